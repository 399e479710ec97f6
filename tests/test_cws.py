"""Consistent weighted sampling (sketch.cws): collision probability = weighted Jaccard, CWS properties,
determinism and input validation. Statistical checks use fixed seeds and bounds several standard errors wide."""

from __future__ import annotations

import numba as nb
import numpy as np
import pytest

from semhash_llm.sketch.cws import (
    CWS_METHODS,
    EMPTY_SLOT,
    MAX_NUM_PERM,
    cws_signature,
    cws_signatures,
    weighted_jaccard,
    weighted_jaccard_estimate,
)

K = 256
U64_MAX = np.iinfo(np.uint64).max


def _features(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, U64_MAX, size=n, dtype=np.uint64, endpoint=True)


def _csr(sets: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    offsets = np.concatenate([[0], np.cumsum([f.shape[0] for f, _ in sets])]).astype(np.int64)
    feats = np.concatenate([f for f, _ in sets]) if sets else np.zeros(0, np.uint64)
    weights = np.concatenate([w for _, w in sets]) if sets else np.zeros(0)
    return offsets, feats, weights


def _pair_estimates(pairs: list[tuple], num_perm: int = K, seed: int = 7, method: str = "icws") -> np.ndarray:
    """Estimates for (fa, wa, fb, wb) pairs, all signed in one batch."""
    sets = [s for fa, wa, fb, wb in pairs for s in ((fa, wa), (fb, wb))]
    sigs = cws_signatures(*_csr(sets), num_perm=num_perm, seed=seed, method=method)  # type: ignore[arg-type]
    return np.array([weighted_jaccard_estimate(sigs[2 * i], sigs[2 * i + 1]) for i in range(len(pairs))])


def _within_binomial(est: np.ndarray, exact: np.ndarray, num_perm: int = K) -> float:
    """Share of pairs whose estimate is within 3 binomial standard deviations (at least half a slot)."""
    sigma = np.sqrt(exact * (1.0 - exact) / num_perm)
    return float(np.mean(np.abs(est - exact) <= np.maximum(3.0 * sigma, 0.5 / num_perm)))


def _spread_pairs(rng: np.random.Generator, n_pairs: int) -> list[tuple]:
    """Pairs with exact weighted Jaccard spread over [0, 1]; a third share the support but not the weights,
    so an estimator that ignores weights is off by a lot on them."""
    pairs = []
    for i in range(n_pairs):
        n = int(rng.integers(20, 120))
        fa = _features(rng, n)
        wa = rng.lognormal(0.0, 1.0, size=n)
        if i % 3 == 0:
            fb = fa.copy()
            wb = wa * rng.lognormal(0.0, rng.uniform(0.05, 2.0), size=n)
        else:
            keep = rng.random(n) < rng.uniform(0.0, 1.0)
            fb = np.where(keep, fa, _features(rng, n))
            wb = np.where(keep, wa * rng.lognormal(0.0, rng.uniform(0.0, 0.4), size=n), wa)
        pairs.append((fa, wa, fb, wb))
    return pairs


# --------------------------------------------------------------------------------------------------------------
# (a) unbiased, binomial error


def test_estimate_is_unbiased_and_within_binomial_bounds() -> None:
    rng = np.random.default_rng(20240611)
    pairs = _spread_pairs(rng, 300)
    exact = np.array([weighted_jaccard(*p) for p in pairs])
    counts, _ = np.histogram(exact, bins=5, range=(0.0, 1.0))
    assert (counts >= 15).all(), f"test pairs do not spread over [0, 1]: {counts}"
    est = _pair_estimates(pairs)
    err = est - exact
    assert abs(err.mean()) < 0.01, f"biased: mean error {err.mean():+.4f}"
    assert _within_binomial(est, exact) >= 0.95
    # Pairs with the same support but different weights: plain Jaccard is 1, weighted Jaccard is not.
    same_support = np.arange(len(pairs)) % 3 == 0
    assert exact[same_support].mean() < 0.8
    assert abs(err[same_support].mean()) < 0.015


def test_reference_and_pruned_icws_give_identical_signatures() -> None:
    rng = np.random.default_rng(5)
    sets = []
    for i in range(60):
        n = int(rng.integers(1, 200))
        f = _features(rng, n)
        f[: n // 4] = f[0]  # repeated features
        scale = 10.0 ** rng.uniform(-200, 200) if i % 4 == 0 else 1.0
        w = rng.lognormal(0.0, 3.0, size=n) * scale
        w[rng.random(n) < 0.1] = 0.0
        sets.append((f, w))
    sets.append((np.array([1, 2, 3], np.uint64), np.array([5e-324, 1e-310, 1e308])))  # subnormal and huge
    batch = _csr(sets)
    fast = cws_signatures(*batch, num_perm=64, seed=11, method="icws")
    ref = cws_signatures(*batch, num_perm=64, seed=11, method="icws-reference")
    np.testing.assert_array_equal(fast, ref)


def test_zero_bit_variant_is_close_but_biased_for_scaled_copies() -> None:
    rng = np.random.default_rng(8)
    pairs = _spread_pairs(rng, 120)
    exact = np.array([weighted_jaccard(*p) for p in pairs])
    assert abs((_pair_estimates(pairs, method="0bit") - exact).mean()) < 0.03
    # A vs 10 A: J_w = 0.1; 0-bit CWS also counts the slots where only t differs.
    scaled = [(f, w, f, 10.0 * w) for f, w in ((_features(rng, 80), rng.lognormal(0.0, 1.0, 80)) for _ in range(30))]
    assert _pair_estimates(scaled, method="0bit").mean() > 0.13
    assert abs(_pair_estimates(scaled, method="icws").mean() - 0.1) < 0.02


# --------------------------------------------------------------------------------------------------------------
# (b) scaling


def test_scaling_consistency() -> None:
    rng = np.random.default_rng(99)
    sets = [(_features(rng, 100), rng.lognormal(0.0, 1.0, 100)) for _ in range(40)]
    # Identical sets, identical signatures, whatever the scale.
    for c in (1.0, 2.0, 1e-30, 1e30):
        a = cws_signatures(*_csr([(f, c * w) for f, w in sets[:5]]), num_perm=K)
        b = cws_signatures(*_csr([(f.copy(), (c * w).copy()) for f, w in sets[:5]]), num_perm=K)
        np.testing.assert_array_equal(a, b)
    # A vs 2A: weighted Jaccard is 1/2 (a sketch that normalizes or ignores weights says 1).
    doubled = [(f, w, f, 2.0 * w) for f, w in sets]
    assert all(weighted_jaccard(*p) == pytest.approx(0.5) for p in doubled)
    est = _pair_estimates(doubled)
    assert abs(est.mean() - 0.5) < 0.02
    assert _within_binomial(est, np.full(est.shape, 0.5)) >= 0.95
    # Scaling both sets of each pair by one constant leaves weighted Jaccard and the estimates' accuracy unchanged.
    pairs = _spread_pairs(rng, 120)
    exact = np.array([weighted_jaccard(*p) for p in pairs])
    scaled = [(fa, 37.5 * wa, fb, 37.5 * wb) for fa, wa, fb, wb in pairs]
    np.testing.assert_allclose([weighted_jaccard(*p) for p in scaled], exact, rtol=1e-12)
    est_scaled = _pair_estimates(scaled)
    assert abs((est_scaled - exact).mean()) < 0.015
    assert _within_binomial(est_scaled, exact) >= 0.95


# --------------------------------------------------------------------------------------------------------------
# (c) zero weights, repeated features, empty sets


def test_zero_weight_is_the_same_as_absent() -> None:
    rng = np.random.default_rng(3)
    f = _features(rng, 50)
    w = rng.lognormal(0.0, 1.0, 50)
    extra = _features(rng, 30)
    with_zeros = (np.concatenate([f, extra]), np.concatenate([w, np.zeros(30)]))
    np.testing.assert_array_equal(cws_signature(f, w, K), cws_signature(*with_zeros, K))
    assert weighted_jaccard(f, w, *with_zeros) == 1.0
    # A zeroed feature that also appears with a positive weight keeps that weight.
    np.testing.assert_array_equal(
        cws_signature(f, w, K), cws_signature(np.concatenate([f, f[:10]]), np.concatenate([w, np.zeros(10)]), K)
    )


def test_repeated_features_have_their_weights_summed() -> None:
    rng = np.random.default_rng(4)
    f = _features(rng, 40)
    w = rng.integers(1, 8, size=40).astype(np.float64)
    split_f = np.concatenate([f, f[:20]])
    split_w = np.concatenate([w[:20] * 0.25, w[20:], w[:20] * 0.75])  # exact binary fractions
    np.testing.assert_array_equal(cws_signature(f, w, K), cws_signature(split_f, split_w, K))
    assert weighted_jaccard(f, w, split_f, split_w) == 1.0
    assert weighted_jaccard(np.array([1, 1, 2]), np.array([1.0, 1.0, 1.0]), np.array([1, 2]), np.ones(2)) == 2 / 3


def test_empty_sets() -> None:
    rng = np.random.default_rng(6)
    f = _features(rng, 20)
    w = rng.random(20) + 0.1
    sets = [(f[:0], w[:0]), (f, w), (f[:5], np.zeros(5)), (f, w)]
    for method in CWS_METHODS:
        sigs = cws_signatures(*_csr(sets), num_perm=32, method=method)  # type: ignore[arg-type]
        assert (sigs[0] == EMPTY_SLOT).all() and (sigs[2] == EMPTY_SLOT).all()
        assert not (sigs[1] == EMPTY_SLOT).any()
        assert weighted_jaccard_estimate(sigs[0], sigs[2]) == 1.0
        assert weighted_jaccard_estimate(sigs[0], sigs[1]) == 0.0
    assert weighted_jaccard(f[:0], w[:0], f[:5], np.zeros(5)) == 1.0
    assert weighted_jaccard(f[:0], w[:0], f, w) == 0.0
    assert cws_signatures(np.array([0]), f[:0], w[:0], num_perm=16).shape == (0, 16)


# --------------------------------------------------------------------------------------------------------------
# (d) unit weights: plain Jaccard


def test_unit_weights_estimate_plain_jaccard() -> None:
    rng = np.random.default_rng(17)
    pairs, exact = [], []
    universe = _features(rng, 400)
    for _ in range(240):
        p = rng.uniform(0.05, 0.95)
        in_a = rng.random(400) < p
        in_b = np.where(rng.random(400) < rng.uniform(0.0, 1.0), in_a, rng.random(400) < p)
        if not (in_a | in_b).any():
            continue
        pairs.append((universe[in_a], np.ones(in_a.sum()), universe[in_b], np.ones(in_b.sum())))
        exact.append((in_a & in_b).sum() / (in_a | in_b).sum())
    jac = np.array(exact)
    np.testing.assert_allclose([weighted_jaccard(*p) for p in pairs], jac, rtol=1e-12)
    est = _pair_estimates(pairs)
    assert abs((est - jac).mean()) < 0.01
    assert _within_binomial(est, jac) >= 0.95
    # Unweighted feature counts (repeats with unit weight) give the multiset Jaccard.
    fa, fb = np.array([1, 1, 1, 2], np.uint64), np.array([1, 2, 2], np.uint64)
    assert weighted_jaccard(fa, np.ones(4), fb, np.ones(3)) == pytest.approx(2 / 5)


# --------------------------------------------------------------------------------------------------------------
# (e) determinism


def test_deterministic_across_batches_order_and_threads() -> None:
    rng = np.random.default_rng(21)
    sets = [(_features(rng, n), rng.lognormal(0.0, 1.0, n).astype(np.float32)) for n in rng.integers(0, 150, 50)]
    batch = cws_signatures(*_csr(sets), num_perm=128, seed=42)
    again = cws_signatures(*_csr(sets), num_perm=128, seed=42)
    np.testing.assert_array_equal(batch, again)
    one_by_one = np.stack([cws_signature(f, w, 128, seed=42) for f, w in sets])
    np.testing.assert_array_equal(batch, one_by_one)
    reversed_batch = cws_signatures(*_csr(sets[::-1]), num_perm=128, seed=42)[::-1]
    np.testing.assert_array_equal(batch, reversed_batch)
    # Features in any order, weights as float32 or as the same values in float64.
    perms = [rng.permutation(f.shape[0]) for f, _ in sets]
    shuffled = [(f[p], w[p].astype(np.float64)) for (f, w), p in zip(sets, perms, strict=True)]
    np.testing.assert_array_equal(batch, cws_signatures(*_csr(shuffled), num_perm=128, seed=42))
    threads = nb.get_num_threads()
    try:
        nb.set_num_threads(1)
        single = cws_signatures(*_csr(sets), num_perm=128, seed=42)
    finally:
        nb.set_num_threads(threads)
    np.testing.assert_array_equal(batch, single)
    # Another seed gives other samples (the slots of non-empty sets almost all differ).
    other = cws_signatures(*_csr(sets), num_perm=128, seed=43)
    nonempty = np.array([f.shape[0] > 0 for f, _ in sets])
    assert (batch[nonempty] != other[nonempty]).mean() > 0.9


def test_slots_are_independent_samples() -> None:
    """Different slots pick different features (a kernel that reuses one sample for all slots fails):
    with 200 equal weights, 256 slots hold 200 (1 - (1 - 1/200)^256) ~ 144 distinct samples."""
    rng = np.random.default_rng(2)
    sig = cws_signature(_features(rng, 200), np.ones(200), K)
    assert 120 < np.unique(sig).shape[0] < 170


# --------------------------------------------------------------------------------------------------------------
# (f) validation

F3 = np.array([1, 2, 3], dtype=np.uint64)
W3 = np.array([1.0, 2.0, 3.0])
OFF = np.array([0, 1, 3], dtype=np.int64)


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"weights": W3[:2]}, ValueError, "one weight per feature"),
        ({"weights": np.array([1.0, -0.5, 2.0])}, ValueError, r"must be >= 0.*index 1"),
        ({"weights": np.array([1.0, np.nan, 2.0])}, ValueError, "NaN or infinite"),
        ({"weights": np.array([np.inf, 1.0, 2.0])}, ValueError, "NaN or infinite"),
        ({"weights": np.array([1e308, 1e308, 1e308])}, ValueError, "sum to infinity"),
        ({"weights": np.array(["a", "b", "c"])}, TypeError, "real-valued"),
        ({"features": np.array([1.0, 2.0, 3.0])}, TypeError, "integer feature hashes"),
        ({"features": F3.reshape(3, 1)}, ValueError, "1-D"),
        ({"offsets": np.array([0, 2, 1, 3])}, ValueError, "non-decreasing"),
        ({"offsets": np.array([1, 3])}, ValueError, "start at 0"),
        ({"offsets": np.array([0, 2])}, ValueError, "end at len"),
        ({"offsets": np.array([0.0, 3.0])}, TypeError, "integer array"),
        ({"offsets": np.zeros((2, 2), np.int64)}, ValueError, "n_docs \\+ 1"),
        ({"num_perm": 0}, ValueError, "num_perm"),
        ({"num_perm": MAX_NUM_PERM + 1}, ValueError, "num_perm"),
        ({"num_perm": 12.0}, TypeError, "num_perm"),
        ({"num_perm": True}, TypeError, "num_perm"),
        ({"seed": -1}, ValueError, "seed"),
        ({"seed": 2**64}, ValueError, "seed"),
        ({"method": "bagminhash"}, ValueError, "Unknown CWS method"),
    ],
)
def test_signature_input_validation(kwargs: dict, error: type[Exception], pattern: str) -> None:
    args = {"offsets": OFF, "features": F3, "weights": W3, "num_perm": 8, "seed": 1, "method": "icws"} | kwargs
    with pytest.raises(error, match=pattern):
        cws_signatures(**args)


def test_other_validation() -> None:
    with pytest.raises(ValueError, match="one weight per feature"):
        weighted_jaccard(F3, W3, F3, W3[:1])
    with pytest.raises(ValueError, match="must be >= 0"):
        weighted_jaccard(F3, -W3, F3, W3)
    with pytest.raises(ValueError, match="NaN or infinite"):
        cws_signature(F3, np.array([1.0, np.nan, 1.0]))
    with pytest.raises(ValueError, match="same non-zero length"):
        weighted_jaccard_estimate(np.zeros(8, np.uint64), np.zeros(9, np.uint64))
    with pytest.raises(ValueError, match="same non-zero length"):
        weighted_jaccard_estimate(np.zeros((2, 4), np.uint64), np.zeros((2, 4), np.uint64))
