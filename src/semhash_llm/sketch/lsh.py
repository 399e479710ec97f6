"""LSH banding: parameters from a threshold, band keys, and linear bucket linking.

A pair with Jaccard similarity ``s`` shares at least one of ``b`` bands of ``r`` rows with
probability ``P(s) = 1 - (1 - s^r)^b``. :func:`optimal_lsh_params` picks ``(b, r)`` with
``b * r <= num_perm`` minimizing ``w_fp * ∫_0^t P(s) ds + w_fn * ∫_t^1 (1 - P(s)) ds``.

:func:`link_band` turns one band's buckets into accepted pairs without ever expanding a big
bucket into all its pairs: small buckets are compared pairwise, big ones are linked to a
representative; members that fail against it start a new star among themselves, round
after round, until every member is linked or is itself a star's centre. A bucket of ``m``
members costs ``m × stars`` comparisons, where ``stars`` is the number of mutually
dissimilar centres it holds: linear for a hot spot of copies, quadratic only for a bucket of
documents that share a band yet differ pairwise — exactly the pairs that must be compared.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numba as nb
import numpy as np

from semhash_llm.sketch.minhash import equal_slots
from semhash_llm.sketch.unionfind import uf_find, uf_union

__all__ = ["lsh_probability", "optimal_lsh_params", "band_keys", "band_key_column", "link_band", "link_pairs",
           "Confirmation", "Deferred", "min_equal_slots"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_S29 = np.uint64(29)
_S31 = np.uint64(31)


def lsh_probability(s: float | np.ndarray, num_bands: int, rows_per_band: int) -> float | np.ndarray:
    """Probability that a pair of Jaccard similarity ``s`` becomes a candidate."""
    return 1.0 - (1.0 - np.power(s, rows_per_band)) ** num_bands


@functools.lru_cache(maxsize=256)
def optimal_lsh_params(
    threshold: float, num_perm: int, fp_weight: float = 0.5, fn_weight: float = 0.5
) -> tuple[int, int]:
    """``(num_bands, rows_per_band)`` minimizing the weighted false-positive/negative areas."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1]. Got {threshold} instead.")
    grid = 2001
    best: tuple[float, int, int] | None = None
    s_lo = np.linspace(0.0, threshold, grid)
    s_hi = np.linspace(threshold, 1.0, grid)
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            fp = np.trapezoid(lsh_probability(s_lo, b, r), s_lo)
            fn = np.trapezoid(1.0 - lsh_probability(s_hi, b, r), s_hi)
            err = fp_weight * fp + fn_weight * fn
            if best is None or err < best[0] - 1e-15:
                best = (float(err), b, r)
    assert best is not None  # num_perm >= 1 always yields a candidate
    return best[1], best[2]


@nb.njit(inline="always", cache=True)
def _band_hash(sigs: np.ndarray, i: int, band: int, rows_per_band: int) -> np.uint64:
    h = np.uint64(band) * _GOLDEN
    base = band * rows_per_band
    for k in range(rows_per_band):
        h = (h ^ np.uint64(sigs[i, base + k])) * _MIX1
        h ^= h >> _S29
    return h ^ (h >> _S31)


@nb.njit(parallel=True, cache=True)
def band_keys(sigs: np.ndarray, num_bands: int, rows_per_band: int) -> np.ndarray:
    """64-bit key of every band of every signature: ``(n, num_bands)``."""
    n = sigs.shape[0]
    out = np.empty((n, num_bands), dtype=np.uint64)
    for i in nb.prange(n):
        for j in range(num_bands):
            out[i, j] = _band_hash(sigs, i, j, rows_per_band)
    return out


@nb.njit(parallel=True, cache=True)
def band_key_column(sigs: np.ndarray, band: int, rows_per_band: int) -> np.ndarray:
    """64-bit keys of one band for every signature (equal to ``band_keys(...)[:, band]``)."""
    n = sigs.shape[0]
    out = np.empty(n, dtype=np.uint64)
    for i in nb.prange(n):
        out[i] = _band_hash(sigs, i, band, rows_per_band)
    return out


@nb.njit(cache=True)
def _try_pair(
    sigs: np.ndarray,
    min_equal: int,
    alt_sigs: np.ndarray,
    alt_min_equal: int,
    alt_row: np.ndarray,
    defer_row: np.ndarray,
    defer_share: float,
    rows: np.ndarray,
    parent: np.ndarray,
    x: int,
    y: int,
    edges_a: np.ndarray,
    edges_b: np.ndarray,
    edges_s: np.ndarray,
    counters: np.ndarray,
    def_a: np.ndarray,
    def_b: np.ndarray,
    def_s: np.ndarray,
    def_counters: np.ndarray,
) -> int:
    """0: already linked; 1: compared and linked; 2: compared and rejected; 3: deferred; 4: the
    pair is to be deferred but the buffers are full (nothing was counted or changed: grow them
    with :func:`_grow_deferred` and try the pair again).

    The pair is compared on rows ``alt_row[x], alt_row[y]`` of ``alt_sigs`` (at least
    ``alt_min_equal`` equal slots) when both have one (``>= 0``), else on ``sigs`` (at least
    ``min_equal``). When ``defer_row`` marks either row and the estimate reaches ``defer_share``,
    the pair is appended to the deferred buffers instead (for the verifier); a pair to defer is
    never decided on its hash estimate, whatever the buffers hold (``def_counters``: deferred,
    times the buffers grew)."""
    gx = rows[x]
    gy = rows[y]
    if uf_find(parent, gx) == uf_find(parent, gy):
        return 0
    counters[1] += 1
    if alt_row[x] >= 0 and alt_row[y] >= 0:
        same = equal_slots(alt_sigs, alt_row[x], alt_row[y])
        need = alt_min_equal
        width = alt_sigs.shape[1]
    else:
        same = equal_slots(sigs, x, y)
        need = min_equal
        width = sigs.shape[1]
    if defer_row[x] or defer_row[y]:
        if same < defer_share * width - 1e-9:
            return 2
        k = def_counters[0]
        if k >= def_a.shape[0]:
            counters[1] -= 1
            return 4
        def_a[k] = gx
        def_b[k] = gy
        def_s[k] = same / width
        def_counters[0] += 1
        return 3
    if same < need:
        return 2
    uf_union(parent, gx, gy)
    e = counters[2]
    edges_a[e] = gx
    edges_b[e] = gy
    edges_s[e] = same / width
    counters[2] += 1
    return 1


@nb.njit(cache=True)
def _grow_deferred(
    def_a: np.ndarray, def_b: np.ndarray, def_s: np.ndarray, def_counters: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Deferral buffers of twice the size (at least 64), holding the pairs deferred so far."""
    size = max(2 * def_a.shape[0], 64)
    k = def_counters[0]
    a = np.empty(size, dtype=def_a.dtype)
    b = np.empty(size, dtype=def_b.dtype)
    s = np.empty(size, dtype=def_s.dtype)
    a[:k] = def_a[:k]
    b[:k] = def_b[:k]
    s[:k] = def_s[:k]
    def_counters[1] += 1
    return a, b, s


@dataclass
class Deferred:
    """Pairs a linking kernel handed to the verifier instead of deciding them: global document
    indices and hash estimate; ``counters``: deferred, times the buffers grew. The linking
    kernels grow the arrays (doubling) when a pair to defer finds them full, and return the
    arrays they wrote: :meth:`adopt` them."""

    a: np.ndarray
    b: np.ndarray
    score: np.ndarray
    counters: np.ndarray

    @classmethod
    def buffer(cls, capacity: int) -> Deferred:
        size = max(int(capacity), 0)
        return cls(np.empty(size, np.int64), np.empty(size, np.int64), np.empty(size, np.float32),
                   np.zeros(2, np.int64))

    @property
    def count(self) -> int:
        return int(self.counters[0])

    @property
    def growths(self) -> int:
        """How often a linking kernel found the buffers full and doubled them."""
        return int(self.counters[1])

    @property
    def capacity(self) -> int:
        return int(self.a.shape[0])

    def adopt(self, arrays: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        """Take the (possibly grown) arrays a linking kernel returned."""
        self.a, self.b, self.score = arrays

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The deferred pairs so far: (a, b, estimate), copies."""
        k = self.count
        return self.a[:k].copy(), self.b[:k].copy(), self.score[:k].copy()


def min_equal_slots(threshold: float, num_perm: int) -> int:
    """The fewest equal slots of ``num_perm`` whose share reaches ``threshold`` (a Jaccard estimate)."""
    return int(math.ceil(threshold * num_perm - 1e-9))


@dataclass(frozen=True)
class Confirmation:
    """How candidate pairs of signature rows are confirmed: on ``sigs`` with at least ``min_equal``
    equal slots, or — for a pair of rows that both have an alternative signature (``alt_row``:
    its row in ``alt_sigs``, ``-1`` for none; e.g. AW-MinHash's weighted signatures) — on those,
    with at least ``alt_min_equal``."""

    sigs: np.ndarray
    min_equal: int
    alt_sigs: np.ndarray
    alt_min_equal: int
    alt_row: np.ndarray
    defer_row: np.ndarray | None = None
    """Rows whose pairs go to the verifier (``None``: none)."""
    defer_share: float = 0.0
    """The least estimate of a pair that is deferred rather than rejected."""
    deferred: Deferred | None = None
    """Where deferred pairs go (``None``: an empty buffer, nothing is deferred)."""

    @classmethod
    def plain(cls, sigs: np.ndarray, min_equal: int) -> Confirmation:
        """Every pair on ``sigs``."""
        return cls(sigs, min_equal, sigs, min_equal, np.full(sigs.shape[0], -1, dtype=np.int64))

    def __post_init__(self) -> None:
        n = self.sigs.shape[0]
        if self.alt_row.shape != (n,) or (n and int(self.alt_row.max()) >= self.alt_sigs.shape[0]):
            raise ValueError(f"Confirmation: {n} signature rows need {n} alt_row entries below the "
                             f"{self.alt_sigs.shape[0]} alternative rows; got shape {self.alt_row.shape}")
        if self.deferred is None:
            object.__setattr__(self, "deferred", Deferred.buffer(0))
        if self.defer_row is None:
            object.__setattr__(self, "defer_row", np.zeros(n, dtype=np.bool_))
        elif self.defer_row.shape != (n,):
            raise ValueError(f"Confirmation: {n} signature rows need {n} defer_row entries; got {self.defer_row.shape}")

    @property
    def rows_to_defer(self) -> np.ndarray:
        """``defer_row`` (set in ``__post_init__``)."""
        return self.defer_row if self.defer_row is not None else np.zeros(self.sigs.shape[0], dtype=np.bool_)

    @property
    def buffer(self) -> Deferred:
        """``deferred`` (set in ``__post_init__``)."""
        return self.deferred if self.deferred is not None else Deferred.buffer(0)


@nb.njit(cache=True)
def link_band(
    order: np.ndarray,
    keys: np.ndarray,
    sigs: np.ndarray,
    min_equal: int,
    alt_sigs: np.ndarray,
    alt_min_equal: int,
    alt_row: np.ndarray,
    defer_row: np.ndarray,
    defer_share: float,
    rows: np.ndarray,
    parent: np.ndarray,
    max_bucket_size: int,
    edges_a: np.ndarray,
    edges_b: np.ndarray,
    edges_s: np.ndarray,
    counters: np.ndarray,
    def_a: np.ndarray,
    def_b: np.ndarray,
    def_s: np.ndarray,
    def_counters: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Link the documents of one band's buckets; returns the deferral buffers (grown when full).

    ``order`` sorts the signature rows by ``keys`` (stable, so each bucket lists its rows in
    input order); ``rows[i]`` is the global document index of signature row ``i``, the
    element that ``parent`` (the union-find) holds. Pairs are confirmed as :class:`Confirmation`
    says (pass its fields). Accepted pairs are appended to the edge arrays. ``counters``: proposed, compared, accepted, star rounds in big buckets.
    Every member of a big bucket ends linked to a centre or as a centre: none is left over.
    """
    n = order.shape[0]
    start = 0
    pending = np.empty(0, dtype=np.int64)
    while start < n:
        end = start + 1
        key = keys[order[start]]
        while end < n and keys[order[end]] == key:
            end += 1
        size = end - start
        if size > 1:
            if size <= max_bucket_size:
                counters[0] += size * (size - 1) // 2
                for i in range(start, end):
                    for j in range(i + 1, end):
                        r = 4
                        while r == 4:
                            r = _try_pair(sigs, min_equal, alt_sigs, alt_min_equal, alt_row, defer_row, defer_share,
                                          rows, parent, order[i], order[j], edges_a, edges_b, edges_s, counters,
                                          def_a, def_b, def_s, def_counters)
                            if r == 4:
                                def_a, def_b, def_s = _grow_deferred(def_a, def_b, def_s, def_counters)
            else:
                if pending.shape[0] < size:
                    pending = np.empty(size, dtype=np.int64)
                m = 0
                for i in range(start + 1, end):
                    pending[m] = order[i]
                    m += 1
                rep = order[start]
                while m > 0:
                    counters[0] += m
                    counters[3] += 1
                    kept = 0
                    for i in range(m):
                        r = 4
                        while r == 4:
                            r = _try_pair(sigs, min_equal, alt_sigs, alt_min_equal, alt_row, defer_row, defer_share,
                                          rows, parent, pending[i], rep, edges_a, edges_b, edges_s, counters,
                                          def_a, def_b, def_s, def_counters)
                            if r == 4:
                                def_a, def_b, def_s = _grow_deferred(def_a, def_b, def_s, def_counters)
                        if r == 2:
                            pending[kept] = pending[i]
                            kept += 1
                    if kept == 0:
                        break
                    # The first member that failed becomes the next centre (input order).
                    rep = pending[0]
                    for i in range(1, kept):
                        pending[i - 1] = pending[i]
                    m = kept - 1
        start = end
    return def_a, def_b, def_s


@nb.njit(cache=True)
def link_pairs(
    pairs_a: np.ndarray,
    pairs_b: np.ndarray,
    sigs: np.ndarray,
    min_equal: int,
    alt_sigs: np.ndarray,
    alt_min_equal: int,
    alt_row: np.ndarray,
    defer_row: np.ndarray,
    defer_share: float,
    rows: np.ndarray,
    parent: np.ndarray,
    edges_a: np.ndarray,
    edges_b: np.ndarray,
    edges_s: np.ndarray,
    counters: np.ndarray,
    def_a: np.ndarray,
    def_b: np.ndarray,
    def_s: np.ndarray,
    def_counters: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Confirm externally proposed pairs of signature rows (e.g. by SPH blocking) and union them.

    Same bookkeeping as :func:`link_band`: pairs already in one cluster are skipped, the
    others are compared as :class:`Confirmation` says and linked when enough slots agree.
    """
    for i in range(pairs_a.shape[0]):
        counters[0] += 1
        r = 4
        while r == 4:
            r = _try_pair(sigs, min_equal, alt_sigs, alt_min_equal, alt_row, defer_row, defer_share, rows, parent,
                          pairs_a[i], pairs_b[i], edges_a, edges_b, edges_s, counters, def_a, def_b, def_s,
                          def_counters)
            if r == 4:
                def_a, def_b, def_s = _grow_deferred(def_a, def_b, def_s, def_counters)
    return def_a, def_b, def_s
