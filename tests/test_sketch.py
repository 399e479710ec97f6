from __future__ import annotations

import numpy as np
import pytest

from semhash_llm.sketch import BloomFilter, MinHash, ScalableBloomFilter, UnionFind, bloom_parameters
from semhash_llm.sketch.lsh import (
    Confirmation,
    Deferred,
    band_key_column,
    band_keys,
    link_band,
    lsh_probability,
    optimal_lsh_params,
)
from semhash_llm.sketch.minhash import minhash_into, minhash_permutations
from semhash_llm.sketch.unionfind import cluster_roots


def _keys(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    return (rng.integers(0, 2**63, size=n, dtype=np.uint64) * np.uint64(2) + np.uint64(1),
            rng.integers(0, 2**63, size=n, dtype=np.uint64))


@pytest.mark.parametrize("fp_rate", [0.01, 0.001])
def test_bloom_false_positive_rate_within_bound(fp_rate: float) -> None:
    rng = np.random.default_rng(0)
    n = 20_000
    bf = BloomFilter(n, fp_rate)
    hi, lo = _keys(rng, n)
    seen = bf.add_batch(hi, lo)
    assert seen.sum() <= 3 * fp_rate * n  # new keys are rarely reported present
    assert bf.contains(hi, lo).all()  # no false negatives
    qhi, qlo = _keys(rng, 200_000)
    observed = bf.contains(qhi, qlo).mean()
    assert observed <= 1.5 * fp_rate, observed


def test_bloom_parameters_formula() -> None:
    m, k = bloom_parameters(1_000_000, 0.01)
    assert abs(m / 1_000_000 - 9.585) < 0.01  # -ln p / ln^2 2 bits per key
    assert k == 7


def test_bloom_finds_repeats_inside_a_batch() -> None:
    bf = BloomFilter(100, 0.001)
    hi = np.array([5, 6, 5, 7, 6], dtype=np.uint64)
    lo = np.array([1, 2, 1, 3, 2], dtype=np.uint64)
    assert bf.add_batch(hi, lo).tolist() == [False, False, True, False, True]


def test_scalable_bloom_grows_and_keeps_its_bound() -> None:
    rng = np.random.default_rng(1)
    sbf = ScalableBloomFilter(0.01, initial_capacity=1000)
    hi, lo = _keys(rng, 20_000)
    for start in range(0, hi.size, 1000):
        sbf.add_batch(hi[start:start + 1000], lo[start:start + 1000])
    assert len(sbf.slices_) > 3
    assert sbf.add_batch(hi[:500], lo[:500]).all()
    qhi, qlo = _keys(rng, 50_000)
    fp = 0
    for s in range(0, qhi.size, 5000):  # query only: copy of the state
        seen = np.zeros(5000, dtype=bool)
        for sl in sbf.slices_:
            sl.contains(qhi[s:s + 5000], qlo[s:s + 5000], seen)
        fp += int(seen.sum())
    assert fp / qhi.size <= 2 * 0.01


def _sets_with_jaccard(rng: np.random.Generator, size: int, j: float) -> tuple[np.ndarray, np.ndarray]:
    # |A ∩ B| = c, |A| = |B| = size: J = c / (2 size - c)
    c = int(round(2 * size * j / (1 + j)))
    universe = rng.choice(2**62, size=2 * size, replace=False).astype(np.uint64)
    common = universe[:c]
    a = np.concatenate([common, universe[c:size]])
    b = np.concatenate([common, universe[size:2 * size - c]])
    return a, b


@pytest.mark.parametrize("j", [0.1, 0.3, 0.5, 0.8, 0.95])
def test_minhash_estimates_jaccard(j: float) -> None:
    rng = np.random.default_rng(42)
    errors = []
    for _ in range(40):
        a, b = _sets_with_jaccard(rng, 300, j)
        true = len(set(a.tolist()) & set(b.tolist())) / len(set(a.tolist()) | set(b.tolist()))
        ma, mb = MinHash(256, seed=7), MinHash(256, seed=7)
        ma.update_hashes(a)
        mb.update_hashes(b)
        errors.append(ma.jaccard(mb) - true)
    errors_arr = np.asarray(errors)
    assert abs(errors_arr.mean()) < 0.02  # unbiased
    assert np.abs(errors_arr).max() < 4 * np.sqrt(j * (1 - j) / 256) + 0.01  # each within ~4 sigma


def test_minhash_update_is_incremental_and_order_free() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(0, 2**63, size=100, dtype=np.uint64)
    m1, m2 = MinHash(64), MinHash(64)
    m1.update_hashes(x)
    m2.update_hashes(x[50:][::-1])
    m2.update_hashes(x[:50])
    assert np.array_equal(m1.hashvalues, m2.hashvalues)
    with pytest.raises(ValueError, match="num_perm"):
        MinHash(0)


@pytest.mark.parametrize("threshold", [0.5, 0.7, 0.8, 0.9])
def test_optimal_params_respect_num_perm(threshold: float) -> None:
    b, r = optimal_lsh_params(threshold, 128)
    assert b * r <= 128
    # The S-curve rises through the threshold region.
    assert lsh_probability(threshold - 0.2, b, r) < 0.5 < lsh_probability(min(1.0, threshold + 0.1), b, r)


def test_lsh_s_curve_matches_formula() -> None:
    rng = np.random.default_rng(5)
    num_perm, b, r = 128, 16, 8
    a_, b_ = minhash_permutations(num_perm, 11)
    for s in (0.3, 0.5, 0.6, 0.7, 0.8, 0.9):
        trials = 300
        hits = 0
        for _ in range(trials):
            x, y = _sets_with_jaccard(rng, 200, s)
            sig = np.empty((2, num_perm), dtype=np.uint32)
            minhash_into(x, x.size, a_, b_, sig[0])
            minhash_into(y, y.size, a_, b_, sig[1])
            keys = band_keys(sig, b, r)
            hits += bool((keys[0] == keys[1]).any())
        expected = float(lsh_probability(s, b, r))
        sd = np.sqrt(expected * (1 - expected) / trials)
        assert abs(hits / trials - expected) <= 4 * sd + 0.03, (s, hits / trials, expected)


def _components(n: int, pairs: list[tuple[int, int]]) -> list[int]:
    adj: list[list[int]] = [[] for _ in range(n)]
    for a, b in pairs:
        adj[a].append(b)
        adj[b].append(a)
    comp = [-1] * n
    for s in range(n):
        if comp[s] >= 0:
            continue
        stack = [s]
        members = []
        comp[s] = s
        while stack:
            u = stack.pop()
            members.append(u)
            for v in adj[u]:
                if comp[v] < 0:
                    comp[v] = s
                    stack.append(v)
        low = min(members)
        for m in members:
            comp[m] = low
    return comp


def test_union_find_matches_components_and_roots_are_minimal() -> None:
    rng = np.random.default_rng(9)
    n = 500
    pairs = [(int(a), int(b)) for a, b in rng.integers(0, n, size=(300, 2))]
    uf = UnionFind(n)
    uf.union_many(np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs]))
    assert uf.roots().tolist() == _components(n, pairs)
    # Order of unions does not matter.
    uf2 = UnionFind(n)
    for a, b in reversed(pairs):
        uf2.union(b, a)
    assert uf2.roots().tolist() == uf.roots().tolist()
    assert uf.union(0, 0) is False


def _link_first_band(sigs: np.ndarray, max_bucket_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Link the buckets of band 0 (4 bands of 8 rows, 26 equal slots to accept); (roots, edge b, counters)."""
    n = sigs.shape[0]
    col = band_key_column(sigs, 0, 8)
    order = np.argsort(col, kind="stable")
    parent = np.arange(n, dtype=np.int64)
    ea, eb = np.empty(n, np.int64), np.empty(n, np.int64)
    es = np.empty(n, np.float32)
    counters = np.zeros(4, np.int64)
    c = Confirmation.plain(sigs, 26)
    d = c.buffer
    link_band(order, col, c.sigs, c.min_equal, c.alt_sigs, c.alt_min_equal, c.alt_row, c.rows_to_defer, c.defer_share,
              np.arange(n, dtype=np.int64), parent, max_bucket_size, ea, eb, es, counters, d.a, d.b, d.score, d.counters)
    return cluster_roots(parent, np.arange(n, dtype=np.int64)), eb, counters


def test_hot_bucket_is_linked_linearly() -> None:
    n = 5000
    sigs = np.tile(np.arange(32, dtype=np.uint32), (n, 1))
    _, eb, counters = _link_first_band(sigs, max_bucket_size=32)
    assert counters[1] == n - 1  # compared: one per member, not n(n-1)/2
    assert counters[2] == n - 1
    assert (eb[: n - 1] == 0).all()  # every member linked to the representative


def test_hot_bucket_with_two_clusters_restars() -> None:
    n = 100
    sigs = np.zeros((n, 32), dtype=np.uint32)
    sigs[:, :8] = 7  # every row shares band 0
    sigs[1::2, 8:] = 1  # odd rows form a second cluster, far from the even rows
    roots, _, counters = _link_first_band(sigs, max_bucket_size=8)
    assert set(roots[0::2].tolist()) == {0} and set(roots[1::2].tolist()) == {1}
    assert counters[1] < 2 * n


def test_hot_bucket_with_many_clusters_leaves_no_member_unlinked() -> None:
    """A big bucket holding more distinct clusters than any fixed number of star rounds."""
    clusters, per_cluster = 20, 30
    n = clusters * per_cluster
    sigs = np.zeros((n, 32), dtype=np.uint32)
    sigs[:, :8] = 7  # every row shares band 0
    member_of = np.arange(n) % clusters  # interleaved, so each star round meets every cluster
    sigs[:, 8:] = (member_of[:, None] * 1000 + np.arange(24)[None, :]).astype(np.uint32)
    roots, _, counters = _link_first_band(sigs, max_bucket_size=8)
    # Every member sits with its own cluster (root = the cluster's first row), none left over.
    assert roots.tolist() == member_of.tolist()
    assert counters[2] == n - clusters
    assert counters[3] == clusters  # one star round per cluster
    assert counters[1] <= n * clusters


def test_band_key_column_matches_band_keys() -> None:
    rng = np.random.default_rng(0)
    sigs = rng.integers(0, 2**32, size=(50, 24), dtype=np.uint32)
    keys = band_keys(sigs, 3, 8)
    for j in range(3):
        assert np.array_equal(band_key_column(sigs, j, 8), keys[:, j])


def test_confirmation_uses_the_alternative_signatures_where_both_rows_have_one() -> None:
    from semhash_llm.sketch.lsh import link_pairs

    plain = np.zeros((3, 10), dtype=np.uint32)  # all three agree on the plain signatures
    alt = np.arange(20, dtype=np.uint64).reshape(2, 10)  # two alternative rows that agree on no slot
    def link(c: Confirmation) -> np.ndarray:
        """Pairs (0, 1) and (0, 2) through link_pairs; the counters."""
        parent = np.arange(3, dtype=np.int64)
        ea, eb, es = np.empty(2, np.int64), np.empty(2, np.int64), np.empty(2, np.float32)
        counters = np.zeros(4, np.int64)
        d = c.buffer
        d.adopt(link_pairs(np.array([0, 0]), np.array([1, 2]), c.sigs, c.min_equal, c.alt_sigs, c.alt_min_equal,
                           c.alt_row, c.rows_to_defer, c.defer_share, np.arange(3, dtype=np.int64), parent, ea, eb,
                           es, counters, d.a, d.b, d.score, d.counters))
        return counters

    # alt_row maps a row to its alternative signature (-1: none).
    for alt_row, linked in (([-1, -1, -1], 2), ([0, -1, 1], 1), ([0, 1, 1], 0), ([0, 0, 0], 2)):
        counters = link(Confirmation(plain, 8, alt, 8, np.array(alt_row, dtype=np.int64)))
        assert counters[2] == linked, alt_row
    # Deferral: pairs with a marked row go to the buffer instead (when their estimate reaches the
    # share), however their slots agree; a full buffer grows, it never decides a pair.
    for defer_row, share, capacity, linked, deferred, growths in (
            ([False, False, False], 0.0, 4, 2, 0, 0), ([False, True, False], 0.0, 4, 1, 1, 0),
            ([True, False, False], 0.0, 4, 0, 2, 0), ([True, False, False], 0.0, 1, 0, 2, 1),
            ([True, False, False], 0.0, 0, 0, 2, 1), ([True, False, False], 1.1, 4, 0, 0, 0)):
        c = Confirmation(plain, 8, plain, 8, np.full(3, -1, dtype=np.int64), np.array(defer_row), share,
                         Deferred.buffer(capacity))
        counters = link(c)
        d = c.buffer
        assert (counters[2], d.count, d.growths) == (linked, deferred, growths), (defer_row, share, capacity)
        assert d.pairs()[0].tolist() == [0] * deferred
    with pytest.raises(ValueError, match="defer_row"):
        Confirmation(plain, 8, plain, 8, np.full(3, -1, dtype=np.int64), np.zeros(2, dtype=np.bool_))
    with pytest.raises(ValueError, match="alt_row"):
        Confirmation(plain, 8, alt, 8, np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError, match="alt_row"):
        Confirmation(plain, 8, alt, 8, np.array([0, 1, 2], dtype=np.int64))


def test_a_hot_spot_of_short_texts_past_the_deferral_buffer_is_deferred_not_accepted() -> None:
    """Issue 24.7: 40 identical short texts in one bucket with room for 2 deferred pairs: every
    pair still goes to the verifier (the buffer grows and says so); none is linked on its hash."""
    from semhash_llm.sketch.lsh import link_band

    n = 40
    sigs = np.zeros((n, 16), dtype=np.uint32)  # all equal: Jaccard estimate 1.0
    keys = np.zeros(n, dtype=np.uint64)
    order = np.arange(n, dtype=np.int64)
    parent = np.arange(n, dtype=np.int64)
    ea, eb, es = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.float32)
    counters = np.zeros(4, np.int64)
    d = Deferred.buffer(2)
    no_alt = np.full(n, -1, dtype=np.int64)
    for max_bucket in (100, 8):  # the all-pairs walk and the star rounds of a big bucket
        parent[:] = np.arange(n)
        counters[:] = 0
        d = Deferred.buffer(2)
        d.adopt(link_band(order, keys, sigs, 8, sigs, 8, no_alt, np.ones(n, dtype=np.bool_), 0.5, order, parent,
                          max_bucket, ea, eb, es, counters, d.a, d.b, d.score, d.counters))
        assert counters[2] == 0, max_bucket  # nothing accepted on the hash estimate
        assert d.count >= n - 1 and d.growths >= 1 and d.capacity >= d.count
        a, b, _ = d.pairs()
        assert len(set(zip(a.tolist(), b.tolist()))) == d.count  # each pair deferred once


def test_the_hot_kernels_are_compiled() -> None:
    """Issue 24.11: the linking kernels are numba dispatchers, not Python loops."""
    from numba.core.registry import CPUDispatcher

    from semhash_llm.sketch import lsh

    for name in ("link_band", "link_pairs", "_try_pair", "_grow_deferred", "band_key_column", "band_keys"):
        assert isinstance(getattr(lsh, name), CPUDispatcher), name
