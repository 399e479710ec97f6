"""hamming_knn: per-document Hamming neighbour budget by Charikar's sorted permutations."""

from __future__ import annotations

import numpy as np
import pytest

from semhash_llm.sketch.unionfind import UnionFind
from semhash_llm.sph.blocking import CandidatePairs, hamming_knn
from semhash_llm.sph.hyperplanes import hamming_distance, pack_bits


def _planted_codes(bits: int, n_base: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n_base`` random codes followed by one near copy of each (1-3 random bits flipped).

    Returns the packed codes and the planted pairs ``(i, i + n_base)`` as an (n_base, 2) array.
    """
    rng = np.random.default_rng(seed)
    base = rng.random((n_base, bits)) < 0.5
    near = base.copy()
    for r in range(n_base):
        near[r, rng.choice(bits, size=int(rng.integers(1, 4)), replace=False)] ^= True
    planted = np.stack([np.arange(n_base), np.arange(n_base) + n_base], axis=1)
    return pack_bits(np.concatenate([base, near])), planted


def _words(codes: np.ndarray) -> np.ndarray:
    return codes.reshape(len(codes), -1)


def _brute_knn_lists(codes: np.ndarray, k: int, radius: int) -> list[list[int]]:
    """Each code's k nearest other codes within ``radius``, ties by distance then index."""
    words = _words(codes)
    out = []
    for i in range(len(words)):
        d = np.bitwise_count(words ^ words[i]).sum(axis=1).astype(np.int64)
        d[i] = radius + 1
        j = np.flatnonzero(d <= radius)
        out.append(j[np.lexsort((j, d[j]))][:k].tolist())
    return out


def _brute_knn_pairs(codes: np.ndarray, k: int, radius: int) -> set[tuple[int, int]]:
    lists = _brute_knn_lists(codes, k, radius)
    return {(min(i, j), max(i, j)) for i, js in enumerate(lists) for j in js}


def _pair_set(pairs: CandidatePairs) -> set[tuple[int, int]]:
    return set(zip(pairs.a.tolist(), pairs.b.tolist()))


def _check_well_formed(pairs: CandidatePairs, codes: np.ndarray, radius: int) -> None:
    n = len(codes)
    assert pairs.num_documents == n
    assert pairs.all_pairs == n * (n - 1) // 2
    assert np.all(pairs.a < pairs.b)
    keys = pairs.a * n + pairs.b
    assert np.all(np.diff(keys) > 0)  # sorted by (a, b), no duplicates
    assert np.array_equal(pairs.distance, hamming_distance(codes[pairs.a], codes[pairs.b]))
    assert np.all(pairs.distance <= radius)


@pytest.mark.parametrize("bits", [64, 128])
def test_every_planted_near_copy_is_found(bits: int) -> None:
    codes, planted = _planted_codes(bits, 1000, seed=bits)
    radius, k = bits // 4, 2
    pairs = hamming_knn(codes, k=k, radius=radius, bits=bits, num_perms=16, window=8)
    _check_well_formed(pairs, codes, radius)
    got = _pair_set(pairs)
    assert {(int(i), int(j)) for i, j in planted} <= got
    assert len(pairs) <= len(codes) * k
    # the planted partner is every code's true nearest neighbour
    want = _brute_knn_pairs(codes, k, radius)
    assert {(int(i), int(j)) for i, j in planted} <= want


def test_clusters_of_near_copies_are_recovered_with_k_neighbours() -> None:
    """400 clusters of 5 near copies (1-3 bits from a centre): with k = 4 every document's true
    neighbours are its cluster, and the search returns every within-cluster pair."""
    rng = np.random.default_rng(3)
    centres = rng.random((400, 64)) < 0.5
    rows = np.repeat(centres, 5, axis=0)
    for r in range(len(rows)):
        rows[r, rng.choice(64, size=int(rng.integers(1, 4)), replace=False)] ^= True
    codes = pack_bits(rows)
    within = {(c * 5 + x, c * 5 + y) for c in range(400) for x in range(5) for y in range(x + 1, 5)}
    assert _brute_knn_pairs(codes, 4, 16) == within
    pairs = hamming_knn(codes, k=4, radius=16, bits=64, num_perms=16)
    _check_well_formed(pairs, codes, 16)
    assert within <= _pair_set(pairs)
    assert len(pairs) <= len(codes) * 4
    # with the default 8 permutations a few within-cluster pairs (up to 6 bits apart) may be
    # missed, but every cluster is still one connected component and nothing crosses clusters
    pairs = hamming_knn(codes, k=4, radius=16, bits=64)
    _check_well_formed(pairs, codes, 16)
    assert len(_pair_set(pairs) & within) >= 0.98 * len(within)
    uf = UnionFind(len(codes))
    uf.union_many(pairs.a, pairs.b)
    assert np.array_equal(uf.roots(), np.arange(len(codes)) // 5 * 5)


@pytest.mark.parametrize(("bits", "k", "radius"), [(16, 3, 4), (16, 1, 16), (64, 5, 26), (128, 2, 60)])
def test_exhaustive_window_equals_brute_force_knn(bits: int, k: int, radius: int) -> None:
    """With a window covering every document, each own list is exactly the brute-force top k.

    16-bit codes over 600 documents have many equal distances and identical codes: this checks
    the (distance, index) tie-break and that no own list exceeds k (the output is exactly the
    union of the reference lists, each of at most k).
    """
    rng = np.random.default_rng(bits + k)
    n = 600
    codes = pack_bits(rng.random((n, bits)) < 0.5)
    pairs = hamming_knn(codes, k=k, radius=radius, bits=bits, num_perms=1, window=n - 1)
    _check_well_formed(pairs, codes, radius)
    assert _pair_set(pairs) == _brute_knn_pairs(codes, k, radius)


def test_every_pair_is_in_one_ends_own_list_of_k() -> None:
    """The own-list budget, checked on an approximate run (few permutations, narrow window).

    Every partner of ``i`` in the output was compared with ``i`` and is within the radius, and
    ``i``'s own list is the k best of everything it was compared with; so that list is exactly the
    k best (by distance, then index) of ``i``'s output partners. Each pair must therefore be
    among the k best partners of one of its ends, and the pairs that are not among the k best of
    ``i`` are charged to the other end, whose budget of k must not overflow.
    """
    codes, _ = _planted_codes(64, 1000, seed=5)
    n, k = len(codes), 3
    pairs = hamming_knn(codes, k=k, radius=20, bits=64, num_perms=2, window=2)
    _check_well_formed(pairs, codes, 20)
    assert len(pairs) <= n * k
    partners: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for a, b, d in zip(pairs.a.tolist(), pairs.b.tolist(), pairs.distance.tolist()):
        partners[a].append((d, b))
        partners[b].append((d, a))
    own = [{j for _d, j in sorted(p)[:k]} for p in partners]
    assert all(b in own[a] or a in own[b] for a, b in zip(pairs.a.tolist(), pairs.b.tolist()))
    charged = np.zeros(n, dtype=np.int64)
    for i in range(n):
        for _d, j in sorted(partners[i])[k:]:
            charged[j] += 1
    assert charged.max() <= k
    assert max(len(p) for p in partners) > k  # the bound is on own lists, not on degrees


def test_deterministic_and_seeded() -> None:
    codes, _ = _planted_codes(64, 1000, seed=7)
    one = hamming_knn(codes, k=3, radius=16, bits=64, seed=11)
    two = hamming_knn(codes.copy(), k=3, radius=16, bits=64, seed=11)
    assert np.array_equal(one.a, two.a)
    assert np.array_equal(one.b, two.b)
    assert np.array_equal(one.distance, two.distance)


def test_radius_zero_keeps_only_identical_codes() -> None:
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 2**63, size=300, dtype=np.uint64)
    codes[100:110] = codes[5]
    pairs = hamming_knn(codes, k=2, radius=0, bits=64)
    assert np.all(pairs.distance == 0)
    members = {5, *range(100, 110)}
    assert set(pairs.a.tolist()) | set(pairs.b.tolist()) <= members


@pytest.mark.parametrize(("bits", "k"), [(64, 1), (64, 4), (128, 2)])
def test_identical_hot_spot_is_linear_and_connected(bits: int, k: int) -> None:
    rng = np.random.default_rng(bits + k)
    hot_size = 5000
    rows = rng.random((1, bits)) < 0.5
    others = rng.random((300, bits)) < 0.5
    near = np.repeat(rows, 20, axis=0)
    near[np.arange(20), rng.integers(0, bits, size=20)] ^= True  # 1 bit from the hot code
    stacked = np.concatenate([np.repeat(rows, hot_size, axis=0), others, near])
    perm = rng.permutation(len(stacked))  # the copies are scattered over the index range
    codes = pack_bits(stacked[perm])
    n = len(codes)
    hot = np.flatnonzero(perm < hot_size)
    pairs = hamming_knn(codes, k=k, radius=bits // 4, bits=bits)
    _check_well_formed(pairs, codes, bits // 4)
    assert len(pairs) <= n * k
    uf = UnionFind(n)
    uf.union_many(pairs.a, pairs.b)
    roots = uf.roots()
    assert len(np.unique(roots[hot])) == 1
    assert roots[hot[0]] == hot.min()  # joined to the lowest-indexed copy


def test_small_inputs() -> None:
    for n in (0, 1):
        pairs = hamming_knn(np.zeros(n, dtype=np.uint64), k=2, radius=4, bits=64)
        assert len(pairs) == 0 and pairs.num_documents == n and pairs.all_pairs == 0
    pairs = hamming_knn(np.array([0, 1], dtype=np.uint64), k=1, radius=1, bits=64)
    assert _pair_set(pairs) == {(0, 1)} and pairs.distance.tolist() == [1]


def test_32_bit_codes() -> None:
    codes, planted = _planted_codes(32, 500, seed=2)
    pairs = hamming_knn(codes, k=2, radius=8, bits=32, num_perms=16)
    _check_well_formed(pairs, codes, 8)
    assert {(int(i), int(j)) for i, j in planted} <= _pair_set(pairs)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"k": 0}, "k"),
        ({"k": 1.5}, "k"),
        ({"k": True}, "k"),
        ({"radius": -1}, "radius"),
        ({"radius": 65}, "radius"),
        ({"num_perms": 0}, "num_perms"),
        ({"window": 0}, "window"),
        ({"bits": 0}, "bits"),
        ({"bits": 128}, "codes"),
        ({"bits": 32}, "codes"),
        ({"codes": np.zeros((4, 2), dtype=np.uint64)}, "codes"),
        ({"codes": np.zeros(4, dtype=np.int64)}, "codes"),
        ({"codes": np.zeros((2, 2, 2), dtype=np.uint64)}, "codes"),
    ],
)
def test_argument_errors_name_the_argument(kwargs: dict[str, object], name: str) -> None:
    args: dict[str, object] = {"codes": np.full(4, 2**63, dtype=np.uint64), "k": 2, "radius": 4, "bits": 64}
    args.update(kwargs)
    with pytest.raises(ValueError, match=f"'{name}'"):
        hamming_knn(**args)  # type: ignore[arg-type]
