from __future__ import annotations

import numpy as np
import pytest

from semhash_llm.sph.blocking import (
    MultiIndexHash,
    brute_force_pairs,
    chunk_bounds,
    hamming_candidates,
)
from semhash_llm.sph.hyperplanes import hamming_distance, pack_bits, unpack_bits


def _clustered_codes(bits: int, n_centers: int, copies: int, seed: int) -> np.ndarray:
    """Random centre codes with copies at 0-4 random bit flips (many pairs at every distance)."""
    rng = np.random.default_rng(seed)
    centers = rng.random((n_centers, bits)) < 0.5
    rows = np.repeat(centers, copies, axis=0)
    for r in range(len(rows)):
        flips = rng.choice(bits, size=int(rng.integers(0, 5)), replace=False)
        rows[r, flips] ^= True
    return pack_bits(rows)


def _as_set(a: np.ndarray, b: np.ndarray, d: np.ndarray) -> set[tuple[int, int, int]]:
    return set(zip(a.tolist(), b.tolist(), d.tolist()))


@pytest.mark.parametrize("bits", [32, 64, 128])
@pytest.mark.parametrize(("radius", "num_chunks"), [(0, 4), (3, 4), (5, 4), (6, 3), (8, 4), (4, 2)])
def test_mih_self_join_is_exact(bits: int, radius: int, num_chunks: int) -> None:
    codes = _clustered_codes(bits, 60, 6, seed=bits + radius)
    got = MultiIndexHash(bits, num_chunks).fit(codes).self_join(radius)
    want = brute_force_pairs(codes, radius)
    assert _as_set(*got) == _as_set(*want)
    assert len(got[0]) == len(set(zip(got[0].tolist(), got[1].tolist())))  # no duplicates
    assert np.all(got[0] < got[1])


@pytest.mark.parametrize("bits", [64, 128])
def test_mih_query_is_exact(bits: int) -> None:
    db = _clustered_codes(bits, 50, 4, seed=1)
    queries = _clustered_codes(bits, 50, 1, seed=1)  # same centres, other flips
    qa, qb, qd = MultiIndexHash(bits, 4).fit(db).query(queries, 5)
    words_q = queries.reshape(len(queries), -1)
    words_db = db.reshape(len(db), -1)
    want = set()
    for i in range(len(queries)):
        d = np.bitwise_count(words_db ^ words_q[i]).sum(axis=1)
        want |= {(i, int(j), int(d[j])) for j in np.flatnonzero(d <= 5)}
    assert _as_set(qa, qb, qd) == want


def _hot_spot_codes(hot_size: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    hot = np.full(hot_size, rng.integers(0, 2**63, dtype=np.uint64), dtype=np.uint64)
    near = hot[:5].copy() ^ np.uint64(1)  # distance 1 from the hot code
    other = rng.integers(0, 2**63, size=200, dtype=np.uint64)
    return np.concatenate([hot, near, other])


def _components(a: np.ndarray, b: np.ndarray, n: int) -> list[int]:
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for x, y in zip(a.tolist(), b.tolist()):
        parent[find(x)] = find(y)
    return [find(x) for x in range(n)]


def test_hot_spot_is_linked_to_one_representative() -> None:
    codes = _hot_spot_codes(5000)
    cands = hamming_candidates(codes, radius=3, num_chunks=4, hot_spots="representative")
    # 4999 star edges + 4 star edges among the 5 identical 'near' codes + 1 representative edge
    assert len(cands) == 4999 + 4 + 1
    assert cands.proposed_by == "sph"
    assert np.all(hamming_distance(codes[cands.a], codes[cands.b]) == cands.distance)


def test_representative_mode_keeps_the_components_of_all_pairs() -> None:
    codes = _hot_spot_codes(300)
    rep = hamming_candidates(codes, radius=3, num_chunks=4, hot_spots="representative")
    full = hamming_candidates(codes, radius=3, num_chunks=4, hot_spots="expand")
    assert len(full) == 300 * 299 // 2 + 5 * 4 // 2 + 300 * 5
    c_rep = _components(rep.a, rep.b, len(codes))
    c_full = _components(full.a, full.b, len(codes))
    assert len(set(zip(c_rep, c_full))) == len(set(c_rep)) == len(set(c_full))


def test_candidate_pairs_pruned_fraction() -> None:
    codes = np.array([0, 0, 1, 7 << 40], dtype=np.uint64)
    cands = hamming_candidates(codes, radius=1, num_chunks=2)
    assert {(int(a), int(b)) for a, b in zip(cands.a, cands.b)} == {(0, 1), (0, 2)}
    assert cands.all_pairs == 6
    assert cands.pruned_fraction == pytest.approx(4 / 6)
    assert hamming_candidates(codes[:1]).pruned_fraction == 1.0


def test_pack_unpack_roundtrip() -> None:
    rng = np.random.default_rng(3)
    for bits in (32, 64, 128):
        m = rng.random((10, bits)) < 0.5
        codes = pack_bits(m)
        assert codes.dtype == np.uint64
        assert codes.shape == ((10,) if bits <= 64 else (10, bits // 64))
        assert np.array_equal(unpack_bits(codes, bits), m)
    # bit k is bit k % 64 of word k // 64
    m = np.zeros((1, 128), dtype=bool)
    m[0, 3] = m[0, 70] = True
    assert pack_bits(m).tolist() == [[8, 64]]


def test_chunk_validation() -> None:
    with pytest.raises(ValueError, match="num_chunks"):
        chunk_bounds(64, 0)
    with pytest.raises(ValueError, match="wider than 64 bits"):
        chunk_bounds(128, 1)
    with pytest.raises(ValueError, match="radius"):
        MultiIndexHash(64, 4).fit(np.zeros(3, np.uint64)).self_join(-1)
    with pytest.raises(ValueError, match="uint64"):
        hamming_candidates(np.zeros(3, dtype=np.int64))
