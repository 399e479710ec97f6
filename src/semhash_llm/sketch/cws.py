"""Consistent weighted sampling (weighted MinHash) of weighted feature sets (numba kernels).

Slot ``j`` of two signatures is equal with probability equal to the weighted (generalized) Jaccard
similarity ``J_w(A, B) = sum_i min(a_i, b_i) / sum_i max(a_i, b_i)`` of the two sets, so the share of
equal slots (``weighted_jaccard_estimate``) is an unbiased estimate of it with binomial error
``sqrt(J_w (1 - J_w) / num_perm)``. ``weighted_jaccard`` computes the exact value.

Input. A batch of weighted sets in CSR form: ``offsets`` (int64, ``n_docs + 1`` entries, starting at 0,
non-decreasing, ending at ``len(features)``), ``features`` (uint64 feature hashes, e.g. hashed word
n-grams; any integer dtype is cast to uint64) and ``weights`` (float32 or float64, finite, ``>= 0``;
used as float64). Document ``d`` is ``features[offsets[d]:offsets[d + 1]]``. A feature that occurs
several times in one document has the sum of its weights (added in ascending order, so the result
does not depend on the order of the occurrences); a feature with weight 0 is the same as an absent one.
The weights of each document must sum to a finite float64.

Algorithm (ICWS, Ioffe 2010, "Improved consistent sampling, weighted minhash and L1 sketching"). For
slot ``j`` and each feature ``k`` of weight ``S_k > 0``: ``r, c ~ Gamma(2, 1)``, ``beta ~ U(0, 1)``,
``t = floor(ln S_k / r + beta)``, ``ln a_k = ln c - r (t - beta + 1)``; the sample of the slot is
``(k*, t_k*)`` with ``k* = argmin_k a_k`` (exact ties, practically impossible, go to the smaller
feature hash). The random variables come from hashes, with no table over the feature space: the
feature key is ``mix(feature ^ seed_key)`` and slot ``j`` draws three 64-bit words
``mix(key ^ K[i, j])`` (``mix`` is SplitMix64's bijective finalizer; ``seed_key`` and the
``3 x num_perm`` slot keys ``K`` are a SplitMix64 stream started at ``seed``). Word 0 gives
``u1, u2`` and word 1 ``u3, u4`` (high and low 32 bits, ``(x + 1/2) / 2^32``, never 0 or 1); then
``r = -ln(u1 u2)``, ``c = -ln(u3 u4)``; word 2 gives ``beta`` (53 bits).

Output. ``uint64`` signatures of shape ``(n_docs, num_perm)``. A slot holds a 63-bit hash of the sample,
``mix(mix(k*) + t * phi + salt) >> 1`` (``0bit``: ``mix(k*) >> 1``), so equal samples give equal slots
and different samples collide with probability 2^-63. A set without positive weight gets ``EMPTY_SLOT``
(2^64 - 1) in every slot, a value no non-empty set produces (their slots are below 2^63): empty sets
never collide with non-empty ones, and two empty sets are identical (estimate 1.0, like
``weighted_jaccard``, which defines 0/0 as 1).

Variants (``method``):

* ``"icws-reference"``: the textbook loop, all five variables and three logarithms for every
  (feature, slot) pair.
* ``"icws"`` (default): the same samples, bit for bit (tested), with work skipped. Since
  ``r (t - beta + 1) <= ln S + r``, ``a >= c e^-r / S = c u1 u2 / S``, and ``c = -ln(u3 u4) >= 1 - u3 u4``;
  so a first, branch-free (SIMD) pass computes ``(1 - u3 u4) u1 u2`` from two hashes per pair and
  skips the pair when this bound exceeds ``S`` times the slot's current minimum (by a relative margin
  of 1e-9, far above the rounding error, so a skip never changes the result). Features go heaviest
  first, so the minima fall fast: about 6 % of the pairs (9 % with equal weights) reach the exact
  second pass on ~300-feature documents.
* ``"0bit"``: 0-bit CWS (Li 2015), the pruned kernel keeping only ``k*``. It costs the same (``t`` is
  still needed to find ``k*``) and is not exactly a weighted Jaccard sketch: when ``k*`` agrees but
  ``t`` does not, it counts a collision, so it overestimates, mostly for pairs whose shared features
  have very different weights (a set against a scaled copy of itself: A vs 10 A gives ~0.17 for 0.10).

Measured by ``benchmarks/cws_report.py`` (defaults: 4,000 synthetic ~2,000-character documents, ~309
distinct weighted bigram features each, ``num_perm=128``, signing only, best of 7; accuracy on 600
pairs with exact J_w spread over [0, 1] (quartiles 0.26 / 0.45 / 0.61) and 200 pairs (A, c A),
c in [1, 10]; a 2-core Rocket Lake VM, idle):

| variant | docs/s (1 thread) | docs/s (2 threads) | MAE vs exact J_w | bias (± s.e.) | bias on (A, cA) |
|---|---|---|---|---|---|
| icws (default) | 5,923 | 11,772 | 0.0318 | -0.0002 ± 0.0017 | +0.0026 ± 0.0027 |
| icws-reference | 1,411 | 2,802 | 0.0318 | -0.0002 ± 0.0017 | +0.0026 ± 0.0027 |
| 0bit | 6,015 | 11,862 | 0.0317 | +0.0009 ± 0.0017 | +0.0134 ± 0.0027 |
| minhash (unweighted, context) | 125,324 | 244,575 | 0.1050 | +0.0979 ± 0.0042 | +0.6037 ± 0.0177 |

(binomial reference: mean ``sqrt(J (1 - J) / K)`` = 0.0389). ``icws`` is the default: exact, the
same signatures as the reference at 4.2x its speed; ``0bit`` is no faster (within noise) and biased.
Cost is ~0.15 ms per document and thread: ~25 us of sorting and merging plus ~1 us per slot, i.e.
O(features x num_perm); unweighted MinHash is ~20x faster but estimates plain Jaccard. Algorithms with
O(features + num_perm log num_perm) cost (BagMinHash, DartMinHash) are not implemented.

Determinism. Signatures depend only on the set (not on feature order or weight dtype), ``num_perm``,
``seed`` and ``method``: each document is signed on its own, so the batch, its order, the number of
threads and numba's chunking do not matter. No fastmath: IEEE arithmetic, same on every run.
"""

from __future__ import annotations

import functools
import math
from typing import Literal

import numba as nb
import numpy as np

from semhash_llm.text.tokenize import mix64

__all__ = [
    "CWSMethod",
    "CWS_METHODS",
    "DEFAULT_METHOD",
    "EMPTY_SLOT",
    "MAX_NUM_PERM",
    "cws_signatures",
    "cws_signature",
    "weighted_jaccard_estimate",
    "weighted_jaccard",
]

CWSMethod = Literal["icws", "icws-reference", "0bit"]
CWS_METHODS: tuple[str, ...] = ("icws", "icws-reference", "0bit")
DEFAULT_METHOD: CWSMethod = "icws"
MAX_NUM_PERM = 8192

EMPTY_SLOT = np.uint64(0xFFFFFFFFFFFFFFFF)

_MODE = {"icws": 0, "icws-reference": 1, "0bit": 2}

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_T_SALT = np.uint64(0xD6E8FEB86659FD93)
_S1 = np.uint64(1)
_S11 = np.uint64(11)
_S32 = np.uint64(32)
_LO32 = np.uint64(0xFFFFFFFF)
_INV32 = 1.0 / 4294967296.0
_INV53 = 1.0 / 9007199254740992.0
# A candidate is skipped only when its lower bound beats the slot's minimum by this relative
# margin, far above the rounding error of the exact value (~1e-13), so skipping never changes a result.
_PRUNE_MARGIN = 1.0 + 1e-9
# Thresholds (slot minimum times the feature's weight) below this are not used for skipping: near the
# subnormal range products lose relative precision, and the pair is then computed exactly instead.
_PRUNE_FLOOR = 1e-290


@nb.njit(inline="always", cache=True)
def _uniform_product(w: np.uint64) -> float:
    """``u * v`` for the uniforms ``u, v`` in (0, 1) made of the high and the low 32 bits of ``w``."""
    return (np.float64(np.int64(w >> _S32)) + 0.5) * _INV32 * ((np.float64(np.int64(w & _LO32)) + 0.5) * _INV32)


@functools.lru_cache(maxsize=16)
def _slot_keys(num_perm: int, seed: int) -> tuple[np.ndarray, np.uint64]:
    """Three 64-bit keys per slot (shape ``(3, num_perm)``, read-only) and one seed key, all from a
    SplitMix64 stream started at ``seed``."""
    state = seed & 0xFFFFFFFFFFFFFFFF
    mask = 0xFFFFFFFFFFFFFFFF

    def nxt() -> int:
        nonlocal state
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)

    seed_key = np.uint64(nxt())
    keys = np.array([nxt() for _ in range(3 * num_perm)], dtype=np.uint64).reshape(3, num_perm)
    keys.flags.writeable = False
    return keys, seed_key


@nb.njit(cache=True)
def _canonical_set(feats: np.ndarray, wts: np.ndarray, out_f: np.ndarray, out_w: np.ndarray) -> int:
    """Merge ``feats``/``wts`` into distinct features with summed positive weights; returns their count.

    Zero weights are dropped. The weights of a repeated feature are added in ascending order, so the
    sum (and the signature) does not depend on the order the features come in.
    """
    n = feats.shape[0]
    m = 0
    for i in range(n):
        if wts[i] > 0.0:
            out_f[m] = feats[i]
            out_w[m] = wts[i]
            m += 1
    if m == 0:
        return 0
    order = np.argsort(out_f[:m])
    f_sorted = out_f[:m][order]
    w_sorted = out_w[:m][order]
    u = 0
    i = 0
    while i < m:
        j = i + 1
        while j < m and f_sorted[j] == f_sorted[i]:
            j += 1
        if j - i == 1:
            total = w_sorted[i]
        else:
            run = np.sort(w_sorted[i:j])
            total = 0.0
            for q in range(run.shape[0]):
                total += run[q]
        out_f[u] = f_sorted[i]
        out_w[u] = total
        u += 1
        i = j
    return u


@nb.njit(cache=True)
def _sign_one(
    feats: np.ndarray, wts: np.ndarray, slot_keys: np.ndarray, seed_key: np.uint64, mode: int, out: np.ndarray
) -> None:
    """The signature of one weighted set into ``out`` (mode 0: pruned ICWS, 1: reference ICWS, 2: 0-bit)."""
    num_perm = out.shape[0]
    n = feats.shape[0]
    uf = np.empty(max(n, 1), dtype=np.uint64)
    uw = np.empty(max(n, 1), dtype=np.float64)
    m = _canonical_set(feats, wts, uf, uw)
    if m == 0:
        for j in range(num_perm):
            out[j] = EMPTY_SLOT
        return
    # Heaviest features first: they win most slots, so the slot minima fall fast and later
    # (lighter) features are mostly skipped by the lower bound. The result does not depend on the order.
    order = np.argsort(-uw[:m])
    cur_ln = np.full(num_perm, np.inf)
    cur_lin = np.full(num_perm, np.inf)
    best_f = np.zeros(num_perm, dtype=np.uint64)
    best_t = np.zeros(num_perm, dtype=np.int64)
    k0 = slot_keys[0]
    k1 = slot_keys[1]
    k2 = slot_keys[2]
    p12 = np.empty(num_perm)
    p34 = np.empty(num_perm)
    cand = np.empty(num_perm, dtype=np.bool_)
    prune = mode != 1
    for oi in range(m):
        idx = order[oi]
        f = uf[idx]
        s = uw[idx]
        key = mix64(f ^ seed_key)
        # Pass 1 (branch-free, vectorizes): the uniforms u1..u4 of every slot and whether the slot's
        # candidate can beat the slot minimum. a = c exp(-r (t - beta + 1)) >= c exp(-r) / s = c u1 u2 / s
        # and c = -ln(u3 u4) >= 1 - u3 u4, so a candidate whose bound exceeds the minimum is skipped.
        s_margin = s * _PRUNE_MARGIN
        for j in range(num_perm):
            a12 = _uniform_product(mix64(key ^ k0[j]))
            a34 = _uniform_product(mix64(key ^ k1[j]))
            p12[j] = a12
            p34[j] = a34
            thr = cur_lin[j] * s_margin
            cand[j] = (not prune) or thr <= _PRUNE_FLOOR or (1.0 - a34) * a12 <= thr
        # Pass 2: the exact ICWS value for the remaining candidates.
        ln_s = 0.0
        have_ln_s = False
        for j in range(num_perm):
            if not cand[j]:
                continue
            if not have_ln_s:
                ln_s = math.log(s)
                have_ln_s = True
            w3 = mix64(key ^ k2[j])
            beta = (np.float64(np.int64(w3 >> _S11)) + 0.5) * _INV53
            r = -math.log(p12[j])
            c = -math.log(p34[j])
            t = math.floor(ln_s / r + beta)
            ln_a = math.log(c) - r * (t - beta + 1.0)
            if ln_a < cur_ln[j] or (ln_a == cur_ln[j] and f < best_f[j]):
                cur_ln[j] = ln_a
                cur_lin[j] = math.exp(ln_a) if ln_a > -650.0 else 0.0
                best_f[j] = f
                best_t[j] = np.int64(t)
    for j in range(num_perm):
        if mode == 2:
            out[j] = mix64(best_f[j]) >> _S1
        else:
            out[j] = mix64(mix64(best_f[j]) + np.uint64(best_t[j]) * _GOLDEN + _T_SALT) >> _S1


@nb.njit(cache=True, parallel=True)
def _sign_batch(
    offsets: np.ndarray,
    features: np.ndarray,
    weights: np.ndarray,
    slot_keys: np.ndarray,
    seed_key: np.uint64,
    mode: int,
    out: np.ndarray,
) -> None:
    """Signatures of every document of a CSR batch into the rows of ``out`` (one document per task)."""
    for d in nb.prange(out.shape[0]):
        start = offsets[d]
        end = offsets[d + 1]
        _sign_one(features[start:end], weights[start:end], slot_keys, seed_key, mode, out[d])


# ---------------------------------------------------------------------------------------------------------------
# Validation


def _as_int(value: object, name: str, low: int, high: int, hint: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"'{name}' must be an int in [{low}, {high}], got {type(value).__name__} {value!r}. {hint}")
    v = int(value)
    if not low <= v <= high:
        raise ValueError(f"'{name}' must be in [{low}, {high}], got {v}. {hint}")
    return v


def _check_method(method: str) -> int:
    if method not in _MODE:
        raise ValueError(f"Unknown CWS method {method!r}; expected one of {', '.join(map(repr, CWS_METHODS))}.")
    return _MODE[method]


def _check_features(features: object, name: str) -> np.ndarray:
    arr = np.asarray(features)
    if arr.ndim != 1:
        raise ValueError(f"'{name}' must be a 1-D array of feature hashes, got shape {arr.shape}. Flatten it first.")
    if arr.size == 0:
        return np.zeros(0, dtype=np.uint64)
    if arr.dtype.kind not in "iu":
        raise TypeError(
            f"'{name}' must hold integer feature hashes (uint64 expected), got dtype {arr.dtype}. "
            "Hash the features to 64-bit integers first (e.g. xxhash of each word n-gram)."
        )
    return np.ascontiguousarray(arr.astype(np.uint64, copy=False))


def _check_weights(weights: object, name: str, n_features: int, features_name: str) -> np.ndarray:
    arr = np.asarray(weights)
    if arr.ndim != 1:
        raise ValueError(f"'{name}' must be a 1-D array of weights, got shape {arr.shape}. Flatten it first.")
    if arr.shape[0] != n_features:
        raise ValueError(
            f"'{name}' has {arr.shape[0]} entries but '{features_name}' has {n_features}; "
            "there must be exactly one weight per feature."
        )
    if arr.size == 0:
        return np.zeros(0, dtype=np.float64)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"'{name}' must be a real-valued array (float32 or float64 expected), got dtype {arr.dtype}.")
    w = np.ascontiguousarray(arr, dtype=np.float64)
    bad = ~np.isfinite(w)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"'{name}' must be finite, but {int(bad.sum())} entries are NaN or infinite (first: index {i}, "
            f"value {w[i]}). Replace them (e.g. np.nan_to_num) or drop those features."
        )
    neg = w < 0
    if neg.any():
        i = int(np.flatnonzero(neg)[0])
        raise ValueError(
            f"'{name}' must be >= 0, but {int(neg.sum())} entries are negative (first: index {i}, value {w[i]}). "
            "Weighted Jaccard is defined for non-negative weights; clip them (np.maximum(w, 0)) or drop the features."
        )
    return w


def _check_csr(offsets: object, features: object, weights: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    off = np.asarray(offsets)
    if off.ndim != 1 or off.shape[0] < 1:
        raise ValueError(
            f"'offsets' must be a 1-D array of length n_docs + 1 (CSR row pointers), got shape {off.shape}."
        )
    if off.dtype.kind not in "iu":
        raise TypeError(f"'offsets' must be an integer array (int64 expected), got dtype {off.dtype}.")
    off = np.ascontiguousarray(off.astype(np.int64))
    feats = _check_features(features, "features")
    wts = _check_weights(weights, "weights", feats.shape[0], "features")
    if off[0] != 0:
        raise ValueError(f"'offsets' must start at 0, got offsets[0] = {int(off[0])}.")
    steps = np.diff(off)
    if (steps < 0).any():
        i = int(np.flatnonzero(steps < 0)[0])
        raise ValueError(
            f"'offsets' must be non-decreasing (document d spans features[offsets[d]:offsets[d + 1]]), "
            f"but offsets[{i + 1}] = {int(off[i + 1])} < offsets[{i}] = {int(off[i])}."
        )
    if off[-1] != feats.shape[0]:
        raise ValueError(
            f"'offsets' must end at len(features) = {feats.shape[0]}, got offsets[-1] = {int(off[-1])}. "
            "Every feature must belong to exactly one document."
        )
    nonempty = steps > 0
    if nonempty.any():
        with np.errstate(over="ignore"):
            sums = np.add.reduceat(wts, off[:-1][nonempty])
        if not np.isfinite(sums).all():
            d = int(np.flatnonzero(nonempty)[int(np.flatnonzero(~np.isfinite(sums))[0])])
            raise ValueError(
                f"The weights of document {d} sum to infinity (float64 overflow). Scale all documents' "
                "weights down by one common factor (weighted Jaccard does not change when every weight is scaled)."
            )
    return off, feats, wts


# ---------------------------------------------------------------------------------------------------------------
# Public API


def cws_signatures(
    offsets: np.ndarray,
    features: np.ndarray,
    weights: np.ndarray,
    num_perm: int = 128,
    seed: int = 1,
    method: CWSMethod = DEFAULT_METHOD,
) -> np.ndarray:
    """Weighted MinHash signatures of a batch of weighted sets in CSR form.

    Document ``d`` is the weighted set ``features[offsets[d]:offsets[d + 1]]`` with the matching
    ``weights``. Repeated features in one document have their weights summed; zero weights are the same
    as absent features. The result is a ``uint64`` array of shape ``(n_docs, num_perm)``; slot ``j`` of two
    signatures is equal with probability equal to the weighted Jaccard similarity of the two sets (for
    ``method="0bit"``, approximately). Rows of sets without positive weight are all ``EMPTY_SLOT``.
    The output depends only on the set, ``num_perm``, ``seed`` and ``method``; not on the batch, the
    order of the features, or the number of threads.
    """
    mode = _check_method(method)
    num_perm = _as_int(num_perm, "num_perm", 1, MAX_NUM_PERM, "Use e.g. 128 or 256 slots.")
    seed = _as_int(seed, "seed", 0, 2**64 - 1, "Use a non-negative 64-bit integer.")
    off, feats, wts = _check_csr(offsets, features, weights)
    n_docs = off.shape[0] - 1
    out = np.empty((n_docs, num_perm), dtype=np.uint64)
    if n_docs == 0:
        return out
    slot_keys, seed_key = _slot_keys(num_perm, seed)
    _sign_batch(off, feats, wts, slot_keys, seed_key, mode, out)
    return out


def cws_signature(
    features: np.ndarray,
    weights: np.ndarray,
    num_perm: int = 128,
    seed: int = 1,
    method: CWSMethod = DEFAULT_METHOD,
) -> np.ndarray:
    """The weighted MinHash signature (``uint64``, length ``num_perm``) of one weighted set.

    The same as row 0 of ``cws_signatures`` for a batch holding only this set.
    """
    feats = _check_features(features, "features")
    offsets = np.array([0, feats.shape[0]], dtype=np.int64)
    return cws_signatures(offsets, feats, weights, num_perm=num_perm, seed=seed, method=method)[0]


def weighted_jaccard_estimate(sig_a: np.ndarray, sig_b: np.ndarray) -> float:
    """The share of equal slots of two CWS signatures: an unbiased weighted Jaccard estimate.

    Both signatures must come from the same ``num_perm``, ``seed`` and ``method``. Two empty sets give
    1.0, an empty and a non-empty set 0.0 (matching ``weighted_jaccard``).
    """
    a = np.asarray(sig_a)
    b = np.asarray(sig_b)
    if a.ndim != 1 or a.shape != b.shape or a.shape[0] == 0:
        raise ValueError(
            f"Expected two 1-D signatures of the same non-zero length (one row of cws_signatures each), "
            f"got shapes {a.shape} and {b.shape}."
        )
    return float(np.count_nonzero(a == b)) / float(a.shape[0])


def _merged(features: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = weights > 0
    f = features[keep]
    w = weights[keep]
    uniq, inv = np.unique(f, return_inverse=True)
    return uniq, np.bincount(inv, weights=w, minlength=uniq.shape[0])


def weighted_jaccard(
    features_a: np.ndarray, weights_a: np.ndarray, features_b: np.ndarray, weights_b: np.ndarray
) -> float:
    """The exact weighted (generalized) Jaccard ``sum(min(a_i, b_i)) / sum(max(a_i, b_i))``.

    Uses the same conventions as the signatures: weights of a repeated feature are summed, zero
    weights are absent features. Two sets without positive weight have similarity 1.0 (their
    signatures are identical), an empty and a non-empty set 0.0.
    """
    fa = _check_features(features_a, "features_a")
    wa = _check_weights(weights_a, "weights_a", fa.shape[0], "features_a")
    fb = _check_features(features_b, "features_b")
    wb = _check_weights(weights_b, "weights_b", fb.shape[0], "features_b")
    ua, sa = _merged(fa, wa)
    ub, sb = _merged(fb, wb)
    if ua.shape[0] == 0 and ub.shape[0] == 0:
        return 1.0
    keys = np.union1d(ua, ub)
    va = np.zeros(keys.shape[0])
    vb = np.zeros(keys.shape[0])
    va[np.searchsorted(keys, ua)] = sa
    vb[np.searchsorted(keys, ub)] = sb
    den = float(np.maximum(va, vb).sum())
    if not math.isfinite(den):
        raise ValueError("The weights sum to infinity (float64 overflow); scale both sets down by one common factor.")
    return float(np.minimum(va, vb).sum()) / den
