from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from semhash_llm.storage import KeyGroups, KeyOccurrences
from semhash_llm.storage.spill import RECORD_BYTES

MIB = 1 << 20
N_DOCS = 10_000
HOT_KEY = 0xFFFF_FFFF_FFFF_FFFF  # boilerplate: more occurrences than a merge block, at the top of the key range


def _dataset() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """~200k records: 20 passages per doc, keys drawn from a small pool (many repeats), unique keys,
    a hot key seen in 30k places (also repeated inside documents), key 0; docs out of order."""
    rng = np.random.default_rng(7)
    docs = np.repeat(np.arange(N_DOCS, dtype=np.int64), 20)
    extras = np.tile(np.arange(20, dtype=np.int64), N_DOCS)
    pool = rng.integers(1, 2**64 - 1, size=4000, dtype=np.uint64)
    keys = rng.integers(1, 2**64 - 1, size=docs.size, dtype=np.uint64)  # mostly unique
    from_pool = rng.random(docs.size) < 0.5
    keys[from_pool] = pool[rng.zipf(1.3, size=int(from_pool.sum())) % pool.size]
    keys[rng.random(docs.size) < 0.15] = np.uint64(HOT_KEY)
    keys[rng.random(docs.size) < 0.001] = np.uint64(0)
    order = rng.permutation(docs.size)  # records arrive in no particular order
    group_of = np.arange(N_DOCS, dtype=np.int64) // 4 * 4  # clusters of four consecutive docs
    return keys[order], docs[order], extras[order], group_of


KEYS, DOCS, EXTRAS, GROUP_OF = _dataset()


def _reference(min_distinct: int, group_of: np.ndarray | None = None) -> list[tuple[int, list[int], list[int], int]]:
    by_key: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for k, d, e in zip(KEYS.tolist(), DOCS.tolist(), EXTRAS.tolist()):
        by_key[k].append((d, e))
    out = []
    for k in sorted(by_key):
        occ = sorted(by_key[k])
        owners = {d if group_of is None else int(group_of[d]) for d, _ in occ}
        if len(owners) >= min_distinct:
            out.append((k, [d for d, _ in occ], [e for _, e in occ], len(owners)))
    return out


def _filled(budget: int, tmp_path: Path, batch: int = 997, **kw: int) -> KeyOccurrences:
    occ = KeyOccurrences(memory_budget_bytes=budget, temp_dir=tmp_path, **kw)
    for s in range(0, KEYS.size, batch):
        occ.add(KEYS[s:s + batch], DOCS[s:s + batch], EXTRAS[s:s + batch])
        assert occ.nbytes <= occ.capacity * RECORD_BYTES <= budget  # the buffer never outgrows the budget
    return occ


def _flat(batches: list[KeyGroups]) -> list[tuple[int, list[int], list[int], int]]:
    out = []
    for b in batches:
        for i, (k, d, e) in enumerate(b):
            out.append((k, d.tolist(), e.tolist(), int(b.distinct[i])))
    return out


def _expected_batch_lengths(groups: list[tuple[int, list[int], list[int], int]], batch_records: int) -> list[int]:
    lengths, n_groups, n_records = [], 0, 0
    for _, docs, _, _ in groups:
        n_groups += 1
        n_records += len(docs)
        if n_records >= batch_records:
            lengths.append(n_groups)
            n_groups = n_records = 0
    return lengths + ([n_groups] if n_groups else [])


# budget, max_fan_in, runs spilled while adding + finalize, intermediate merges
CASES = {
    "no-spill": (256 * MIB, 64, 0, 0),
    "one-spill": (6 * MIB, 64, 2, 0),  # capacity 157k records: one spill while adding, the rest at finalize
    "many-spills": (MIB, 64, 8, 0),
    "multi-pass": (MIB, 3, 8, 3),  # 8 runs, fan-in 3: 8 -> 6 -> 4 -> 2
}


@pytest.fixture(scope="module")
def reference() -> dict[tuple[int, bool], list[tuple[int, list[int], list[int], int]]]:
    return {(m, g): _reference(m, GROUP_OF if g else None) for m in (1, 3) for g in (False, True)}


@pytest.mark.parametrize("case", list(CASES))
def test_groups_match_a_dict_and_do_not_depend_on_the_budget(
    case: str, tmp_path: Path, reference: dict[tuple[int, bool], list[tuple[int, list[int], list[int], int]]]
) -> None:
    budget, fan_in, runs, merges = CASES[case]
    with _filled(budget, tmp_path, max_fan_in=fan_in) as occ:
        assert len(occ) == KEYS.size
        for min_distinct in (1, 3):
            for use_groups in (False, True):
                go = GROUP_OF if use_groups else None
                batches = list(occ.groups(min_distinct, go, batch_records=5000))
                assert _flat(batches) == reference[(min_distinct, use_groups)]
                sizes = [b.n_records for b in batches]
                assert all(s >= 5000 for s in sizes[:-1])
                # the batches themselves, not only the groups, follow from the group sequence alone
                assert [len(b) for b in batches] == _expected_batch_lengths(reference[(min_distinct, use_groups)], 5000)
        assert occ.runs_spilled_ == runs
        assert occ.intermediate_merges_ == merges
        assert occ.n_runs <= fan_in
        assert occ.peak_merge_bytes_ > 0


def test_min_distinct_counts_documents_not_occurrences(tmp_path: Path) -> None:
    with KeyOccurrences(temp_dir=tmp_path) as occ:
        occ.add(np.array([5, 5, 5, 9, 9, 7], np.uint64), np.array([1, 1, 1, 2, 3, 4]), np.array([0, 3, 1, 0, 0, 0]))
        assert [g[0] for b in occ.groups(2) for g in b] == [9]
        assert [g[0] for b in occ.groups(1) for g in b] == [5, 7, 9]
        assert list(occ.groups(3)) == []
        (batch,) = list(occ.groups(1))
        key, docs, extras = batch.group(0)
        assert key == 5 and docs.tolist() == [1, 1, 1] and extras.tolist() == [0, 1, 3]
        assert batch.distinct.tolist() == [1, 1, 2]


def test_group_of_collapses_the_copies_of_a_cluster(tmp_path: Path) -> None:
    group_of = np.array([0, 0, 0, 3, 4, 4], dtype=np.int64)  # docs 0-2 copies of one another, 4-5 too
    with KeyOccurrences(temp_dir=tmp_path) as occ:
        keys = np.array([1, 1, 1, 2, 2, 2, 2, 3, 3], np.uint64)
        docs = np.array([0, 1, 2, 0, 1, 3, 4, 4, 5])
        occ.add(keys, docs, np.arange(9))
        assert [g[0] for b in occ.groups(2) for g in b] == [1, 2, 3]
        (batch,) = list(occ.groups(2, group_of))
        assert batch.keys.tolist() == [2] and batch.distinct.tolist() == [3]
        assert batch.group(0)[1].tolist() == [0, 1, 3, 4]  # every occurrence is still returned
        assert list(occ.groups(4, group_of)) == []
        with pytest.raises(ValueError, match="'group_of' parameter of KeyOccurrences"):
            list(occ.groups(2, group_of[:5]))


def test_count_distinct_matches_a_dict(tmp_path: Path) -> None:
    per_key: dict[int, set[int]] = defaultdict(set)
    occurrences: dict[int, int] = defaultdict(int)
    for k, d in zip(KEYS.tolist(), DOCS.tolist()):
        per_key[k].add(int(GROUP_OF[d]))
        occurrences[k] += 1
    with _filled(MIB, tmp_path) as occ:
        stats = occ.count_distinct((2, 10, 1000), group_of=GROUP_OF)
    counts = np.array([len(v) for v in per_key.values()])
    assert stats.counted == "clusters"
    assert stats.n_records == KEYS.size and stats.n_keys == len(per_key)
    assert stats.max_distinct == counts.max()
    for t in (2, 10, 1000):
        assert stats.at_least[t] == int((counts >= t).sum())
        assert stats.records_at_least[t] == sum(occurrences[k] for k, v in per_key.items() if len(v) >= t)
    expected = np.bincount(np.floor(np.log2(counts)).astype(int), minlength=64)
    assert stats.log2_histogram.tolist() == expected.tolist()
    assert sum(n for _, _, n in stats.histogram_rows()) == len(per_key)
    assert stats.to_dict()["n_keys"] == len(per_key)


def test_merge_memory_stays_within_the_budget(tmp_path: Path) -> None:
    """Without a key larger than a block, what the merge holds stays under the budget."""
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 50_000, size=150_000).astype(np.uint64)  # groups of ~3
    docs = rng.integers(0, 40_000, size=keys.size)
    with KeyOccurrences(memory_budget_bytes=MIB, temp_dir=tmp_path) as occ:
        for s in range(0, keys.size, 4096):
            occ.add(keys[s:s + 4096], docs[s:s + 4096], np.zeros(min(4096, keys.size - s), np.int64))
            assert occ.nbytes <= MIB * RECORD_BYTES // 40
        occ.finalize()
        assert occ.nbytes == 0  # the buffer is freed once runs were spilled
        assert occ.n_runs == 6
        pairs = np.unique(np.stack([keys.astype(np.int64), docs]), axis=1)  # distinct (key, doc)
        uk, distinct = np.unique(pairs[0], return_counts=True)
        expected = np.isin(keys, uk[distinct >= 2].astype(np.uint64)).sum()
        assert sum(b.n_records for b in occ.groups(2, batch_records=1000)) == expected
        assert 0 < occ.peak_merge_bytes_ <= 3 * MIB // 4
        assert all(b.n_records < 1000 + 64 for b in occ.groups(2, batch_records=1000))


def test_spilled_files_are_removed_on_close_and_on_error(tmp_path: Path) -> None:
    occ = _filled(MIB, tmp_path)
    spill_dir = occ.spill_dir
    assert spill_dir is not None and spill_dir.parent == tmp_path and len(list(spill_dir.iterdir())) == 7  # the remainder waits for finalize
    occ.close()
    assert not spill_dir.exists() and tmp_path.exists()  # only the private directory goes
    occ.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        occ.add(KEYS[:1], DOCS[:1], EXTRAS[:1])

    with pytest.raises(KeyError), KeyOccurrences(memory_budget_bytes=MIB, temp_dir=tmp_path) as occ2:
        occ2.add(KEYS, DOCS, EXTRAS)
        live = occ2.spill_dir
        assert live is not None and live.exists()
        dirs = [live]
        for _ in occ2.groups(2):
            raise KeyError("consumer failed mid-merge")
    assert not dirs[0].exists()
    assert list(tmp_path.iterdir()) == []


def test_no_directory_without_a_spill(tmp_path: Path) -> None:
    with KeyOccurrences(temp_dir=tmp_path / "sub") as occ:
        occ.add(KEYS[:1000], DOCS[:1000], EXTRAS[:1000])
        assert sum(b.n_records for b in occ.groups(1)) == 1000
        assert occ.spill_dir is None and occ.runs_spilled_ == 0
    assert not (tmp_path / "sub").exists()


def test_empty_and_add_after_finalize() -> None:
    with KeyOccurrences() as occ:
        occ.add(np.empty(0, np.uint64), np.empty(0, np.int64), np.empty(0, np.int64))
        assert list(occ.groups(1)) == []
        assert occ.count_distinct().n_keys == 0
        with pytest.raises(RuntimeError, match="after finalize"):
            occ.add(np.ones(1, np.uint64), np.ones(1, np.int64), np.ones(1, np.int64))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"memory_budget_bytes": 10}, "The 'memory_budget_bytes' parameter of KeyOccurrences must be an int >= 1048576. Got 10 instead."),
        ({"memory_budget_bytes": 2.5e6}, "'memory_budget_bytes' parameter of KeyOccurrences must be an int >= 1048576. Got 2500000.0"),
        ({"max_fan_in": 1}, "The 'max_fan_in' parameter of KeyOccurrences must be an int >= 2. Got 1 instead."),
    ],
)
def test_constructor_errors(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        KeyOccurrences(**kwargs)  # type: ignore[arg-type]


def test_argument_errors() -> None:
    with KeyOccurrences() as occ:
        with pytest.raises(ValueError, match="must have one length. Got 2, 1 and 2 instead"):
            occ.add(np.ones(2, np.uint64), np.ones(1, np.int64), np.ones(2, np.int64))
        with pytest.raises(ValueError, match="'keys' parameter of KeyOccurrences.add must be a 1-D integer array"):
            occ.add(np.ones(2), np.ones(2, np.int64), np.ones(2, np.int64))
        with pytest.raises(ValueError, match="indices >= 0. Got -1 instead"):
            occ.add(np.ones(2, np.uint64), np.array([0, -1]), np.ones(2, np.int64))
        occ.add(np.ones(2, np.uint64), np.array([0, 1]), np.ones(2, np.int64))
        with pytest.raises(ValueError, match="The 'min_distinct' parameter of KeyOccurrences.groups must be an int >= 1. Got 0 instead."):
            occ.groups(0)  # checked at the call, before any merging


def test_an_unclosed_counter_cleans_up_when_collected(tmp_path: Path) -> None:
    import gc

    occ = _filled(MIB, tmp_path)
    spill_dir = occ.spill_dir
    assert spill_dir is not None and spill_dir.exists()
    del occ
    gc.collect()
    assert not spill_dir.exists()
