"""The cover check: no document is removed through a chain of links its survivor does not cover."""

from __future__ import annotations

import numpy as np

from semhash_llm import PipelineConfig, deduplicate
from semhash_llm.config import SelectConfig
from semhash_llm.select import refine_by_cover, select_survivors


def _chain(n: int = 4) -> tuple[np.ndarray, ...]:
    """Documents 0-1-2-3 linked in a chain (edges 0-1, 1-2, 2-3), all in cluster 0."""
    roots = np.zeros(n, dtype=np.int64)
    a = np.arange(n - 1, dtype=np.int64)
    b = a + 1
    return roots, a, b, np.ones(n - 1, np.float32), np.ones(n - 1, np.uint8)


def test_a_chain_is_split_where_the_survivor_does_not_cover() -> None:
    roots, a, b, score, kind = _chain()
    lengths = np.array([10, 50, 10, 10])  # keep="longest": document 1 survives
    covered = {(0, 1), (2, 1)}  # 1 covers its neighbours, not 3 (linked only through 2)

    def covers(docs: np.ndarray, keepers: np.ndarray) -> np.ndarray:
        return np.array([(int(d), int(k)) in covered for d, k in zip(docs, keepers)])

    cfg = SelectConfig(keep="longest")
    new_roots, kept, reclustered = refine_by_cover(roots, a, b, score, kind, lengths, np.zeros(4), cfg, None, covers)
    assert reclustered == 1 and new_roots.tolist() == [0, 0, 0, 3]
    assert kept.tolist() == [True, True, False]
    sel = select_survivors(new_roots, a[kept], b[kept], score[kept], kind[kept], lengths, np.zeros(4), cfg)
    assert sel.keeper.tolist() == [1, 1, 1, 3]  # 3 stays: nothing that covers it was kept


def test_uncovered_members_form_clusters_of_their_own_edges() -> None:
    roots, a, b, score, kind = _chain(5)
    lengths = np.array([50, 10, 10, 40, 10])  # survivor 0 covers only 1; 2-3-4 re-cluster, 3 survives there
    covered = {(1, 0), (2, 3), (4, 3)}

    def covers(docs: np.ndarray, keepers: np.ndarray) -> np.ndarray:
        return np.array([(int(d), int(k)) in covered for d, k in zip(docs, keepers)])

    cfg = SelectConfig(keep="longest")
    new_roots, kept, reclustered = refine_by_cover(roots, a, b, score, kind, lengths, np.zeros(5), cfg, None, covers)
    assert reclustered == 3 and new_roots.tolist() == [0, 0, 2, 2, 2]
    sel = select_survivors(new_roots, a[kept], b[kept], score[kept], kind[kept], lengths, np.zeros(5), cfg)
    assert sel.keeper.tolist() == [0, 0, 3, 3, 3]


def test_in_the_cascade_a_chain_of_edits_keeps_its_far_end() -> None:
    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(5000)]
    base = [str(vocab[j]) for j in rng.integers(0, 5000, 200)]
    # Each version replaces the next 15% of the words: neighbours are near duplicates (J ~ 0.7),
    # the two ends share nothing.
    versions = []
    words = list(base)
    for step in range(7):
        versions.append(" ".join(words))
        for j in range(step * 30, step * 30 + 30):
            words[j % 200] = str(vocab[int(rng.integers(0, 5000))])
    records = [{"id": f"v{i}", "text": t} for i, t in enumerate(versions)]
    # Without the verifier: the check's own rules are tested here (on these "w123" pseudo-words the
    # verifier, asked about the far end, reads two pages of look-alike tokens as one).
    loose = {"minhash": {"threshold": 0.6}, "passages": {"enabled": False}, "sph": {"enabled": False},
             "verifier": {"enabled": False}}
    chained = deduplicate(records, PipelineConfig.from_dict({**loose, "select": {"cover_check": False}}))
    covered = deduplicate(records, PipelineConfig.from_dict(loose))
    kept_chained = [r["id"] for r in chained.documents.to_pylist() if r["action"] == "keep"]
    kept_covered = [r["id"] for r in covered.documents.to_pylist() if r["action"] == "keep"]
    assert len(kept_chained) == 1  # one cluster: the chain removed the far end too
    assert len(kept_covered) > 1  # its survivor does not cover the far end: it stays
    select_row = next(s for s in covered.report["funnel"] if s["stage"] == "select")
    assert select_row["details"]["cover_check_reclustered"] >= 1


def test_an_exact_copy_of_a_covered_document_is_covered() -> None:
    """x is linked to the survivor y by an accepted pair; x's exact copy leaves with it (before,
    the copy stayed behind alone: covered by nothing but its twin, which had left)."""
    from semhash_llm.cascade import _cover_fn
    from semhash_llm.stages.base import Edges

    # Documents 0 (x), 1 (x's exact copy), 2 (y, the survivor), 3 (unrelated).
    edges = Edges(np.array([1, 0]), np.array([0, 2]), np.array([1.0, 0.9], np.float32), np.array([0, 6], np.uint8))
    covers = _cover_fn({}, edges, 4, PipelineConfig())
    assert covers(np.array([0, 1, 3]), np.array([2, 2, 2])).tolist() == [True, True, False]
