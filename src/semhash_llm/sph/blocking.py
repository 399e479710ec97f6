"""Hamming blocking of SPH codes by multi-index hashing (MIH, Norouzi et al. 2012).

Codes are split into ``num_chunks`` disjoint chunks of bits. By the pigeonhole
principle, two codes within Hamming distance ``r`` agree to within ``r // num_chunks``
bits on at least one chunk, so probing every chunk's table with all keys within that
sub-radius finds *every* pair within ``r`` (exact, no false negatives); the candidates
are then filtered by their full distance. With ``r < num_chunks`` (the default 3 < 4)
the sub-radius is 0 and a probe is one exact lookup; at the default radius 8 over 5
chunks each chunk is probed with its key and the 13 keys one bit away.

Hot spots: many documents with the *same* code (templated pages, empty texts) would
expand into all pairs of the group. With ``hot_spots="representative"`` (default)
identical codes are collapsed first: every member is linked to the group's first
document (distance 0), and pairs between distinct codes are reported between the
groups' representatives. The connected components are exactly those of the full pair
set, with a number of pairs linear in the group sizes. ``hot_spots="expand"`` reports
every pair (quadratic on hot spots).

:func:`hamming_knn` is the budgeted alternative: instead of every pair within a radius it
proposes, for each document, its (approximately) ``k`` nearest codes within the radius, found by
Charikar's sorted-permutation search, so the number of candidates is at most ``n * k`` whatever
the radius or the hot spots.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from itertools import combinations
from math import comb
from typing import Literal

import numba as nb
import numpy as np

from semhash_llm.sph.hyperplanes import as_words

logger = logging.getLogger(__name__)

__all__ = [
    "HotSpots",
    "MAX_PROBES",
    "CandidatePairs",
    "MultiIndexHash",
    "chunk_bounds",
    "chunk_keys",
    "flip_masks",
    "hamming_candidates",
    "hamming_knn",
    "brute_force_pairs",
]

HotSpots = Literal["representative", "expand"]
_BLOCK_PAIRS = 8_000_000
MAX_PROBES = 50_000


@dataclass(frozen=True)
class CandidatePairs:
    """Candidate pairs ``(a[i], b[i])`` with ``a < b`` and their Hamming distance.

    ``proposed_by`` names the stage for the cascade's funnel and decisions.
    """

    a: np.ndarray
    b: np.ndarray
    distance: np.ndarray
    num_documents: int
    proposed_by: str = "sph"

    def __len__(self) -> int:
        return int(len(self.a))

    @property
    def all_pairs(self) -> int:
        return self.num_documents * (self.num_documents - 1) // 2

    @property
    def pruned_fraction(self) -> float:
        """Share of the all-pairs space that was never proposed (1.0 when n < 2)."""
        total = self.all_pairs
        return 1.0 - len(self) / total if total else 1.0


def chunk_bounds(bits: int, num_chunks: int) -> list[tuple[int, int]]:
    """Bit ranges ``[lo, hi)`` of the chunks (widths differ by at most one)."""
    if not 1 <= num_chunks <= bits:
        raise ValueError(f"The 'num_chunks' parameter must be an int in [1, {bits}] for {bits}-bit codes. Got {num_chunks!r} instead.")
    edges = [round(i * bits / num_chunks) for i in range(num_chunks + 1)]
    bounds = list(zip(edges[:-1], edges[1:]))
    if max(hi - lo for lo, hi in bounds) > 64:
        raise ValueError(
            f"Chunks of {bits}-bit codes split {num_chunks} ways are wider than 64 bits; use num_chunks >= {-(-bits // 64)}."
        )
    return bounds


def chunk_keys(words: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Bits ``[lo, hi)`` of each code as a uint64 key."""
    width = hi - lo
    w, off = divmod(lo, 64)
    keys = words[:, w] >> np.uint64(off)
    if off and off + width > 64:
        keys = keys | (words[:, w + 1] << np.uint64(64 - off))
    if width < 64:
        keys = keys & np.uint64((1 << width) - 1)
    return keys


def flip_masks(width: int, radius: int) -> np.ndarray:
    """All uint64 masks of ``width`` bits with at most ``radius`` bits set (0 first)."""
    masks = [0]
    for r in range(1, radius + 1):
        for combo in combinations(range(width), r):
            masks.append(sum(1 << i for i in combo))
    return np.asarray(masks, dtype=np.uint64)


def _ragged_positions(lo: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ranges ``[lo_i, lo_i + counts_i)``: (owner index, position) of every element."""
    total = int(counts.sum())
    owner = np.repeat(np.arange(len(counts)), counts)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    pos = np.repeat(lo, counts) + (np.arange(total) - starts)
    return owner, pos


class MultiIndexHash:
    """Exact Hamming r-neighbour search over uint64 codes by multi-index hashing.

    ``fit(codes)`` builds one sorted table per chunk; ``query(codes, radius)`` returns
    every (query, indexed) pair within ``radius``; ``self_join(radius)`` every indexed
    pair ``a < b`` within ``radius``.
    """

    def __init__(self, bits: int, num_chunks: int = 4) -> None:
        if not isinstance(bits, int) or bits < 1:
            raise ValueError(f"The 'bits' parameter of MultiIndexHash must be an int >= 1. Got {bits!r} instead.")
        self.bits = bits
        self.num_chunks = num_chunks
        self.bounds = chunk_bounds(bits, num_chunks)
        self.words_: np.ndarray | None = None
        self.tables_: list[tuple[np.ndarray, np.ndarray]] = []

    def fit(self, codes: np.ndarray) -> MultiIndexHash:
        words = as_words(codes)
        if words.shape[1] * 64 < self.bits:
            raise ValueError(f"MultiIndexHash(bits={self.bits}) got codes with only {words.shape[1] * 64} bits.")
        self.words_ = np.ascontiguousarray(words)
        self.tables_ = []
        for lo, hi in self.bounds:
            keys = chunk_keys(self.words_, lo, hi)
            order = np.argsort(keys, kind="stable")
            self.tables_.append((keys[order], order))
        return self

    def _check_radius(self, radius: int) -> int:
        if not isinstance(radius, (int, np.integer)) or radius < 0 or radius > self.bits:
            raise ValueError(f"The 'radius' parameter must be an int in [0, {self.bits}]. Got {radius!r} instead.")
        sub = int(radius) // self.num_chunks
        width = max(hi - lo for lo, hi in self.bounds)
        probes = sum(comb(width, t) for t in range(sub + 1))
        if probes > MAX_PROBES:
            raise ValueError(
                f"radius={radius} with num_chunks={self.num_chunks} needs {probes} probes per chunk; "
                f"use num_chunks >= {int(radius) // 2 + 1} so that each chunk is probed within 2 bits."
            )
        return sub

    def _search(self, q_words: np.ndarray, radius: int, self_join: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.words_ is None:
            raise RuntimeError("MultiIndexHash.fit(codes) must be called before searching.")
        sub = self._check_radius(radius)
        db = self.words_
        q_keys = [chunk_keys(q_words, lo, hi) for lo, hi in self.bounds]
        db_keys = [chunk_keys(db, lo, hi) for lo, hi in self.bounds]
        out_a: list[np.ndarray] = []
        out_b: list[np.ndarray] = []
        out_d: list[np.ndarray] = []
        for c, ((lo, hi), (sorted_keys, order)) in enumerate(zip(self.bounds, self.tables_)):
            for mask in flip_masks(hi - lo, sub):
                probe = q_keys[c] ^ mask
                left = np.searchsorted(sorted_keys, probe, side="left")
                right = np.searchsorted(sorted_keys, probe, side="right")
                counts = right - left
                hits = np.flatnonzero(counts)
                # Process queries in blocks that bound the number of expanded pairs.
                cum = np.cumsum(counts[hits])
                start = 0
                while start < len(hits):
                    base = cum[start - 1] if start else 0
                    stop = int(np.searchsorted(cum, base + _BLOCK_PAIRS, side="right"))
                    stop = max(stop, start + 1)
                    block = hits[start:stop]
                    owner, pos = _ragged_positions(left[block], counts[block])
                    qa = block[owner]
                    db_idx = order[pos]
                    if self_join:
                        keep = qa < db_idx
                        qa, db_idx = qa[keep], db_idx[keep]
                    # Keep a pair only in the first chunk that can find it (no duplicates).
                    for prev in range(c):
                        first = np.bitwise_count(q_keys[prev][qa] ^ db_keys[prev][db_idx]) > sub
                        qa, db_idx = qa[first], db_idx[first]
                    dist = np.bitwise_count(q_words[qa] ^ db[db_idx]).sum(axis=1)
                    within = dist <= radius
                    out_a.append(qa[within])
                    out_b.append(db_idx[within])
                    out_d.append(dist[within].astype(np.int64))
                    start = stop
        if not out_a:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty.copy(), empty.copy()
        a = np.concatenate(out_a).astype(np.int64)
        b = np.concatenate(out_b).astype(np.int64)
        d = np.concatenate(out_d)
        order_ = np.lexsort((b, a))
        return a[order_], b[order_], d[order_]

    def query(self, codes: np.ndarray, radius: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All (query index, indexed index, distance) with distance <= ``radius``."""
        return self._search(np.ascontiguousarray(as_words(codes)), radius, self_join=False)

    def self_join(self, radius: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All indexed pairs (a, b, distance) with a < b and distance <= ``radius``."""
        if self.words_ is None:
            raise RuntimeError("MultiIndexHash.fit(codes) must be called before searching.")
        return self._search(self.words_, radius, self_join=True)


def _code_groups(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique codes: (first index of each unique code, inverse map document -> group)."""
    view = np.ascontiguousarray(words).view(np.dtype((np.void, words.dtype.itemsize * words.shape[1]))).ravel()
    _, first, inverse = np.unique(view, return_index=True, return_inverse=True)
    return first.astype(np.int64), inverse.astype(np.int64).ravel()


def hamming_candidates(
    codes: np.ndarray,
    radius: int = 8,
    num_chunks: int = 5,
    bits: int | None = None,
    hot_spots: HotSpots = "representative",
) -> CandidatePairs:
    """Candidate pairs among ``codes`` within Hamming ``radius`` (exact, via MIH).

    ``bits`` defaults to 64 per code word. See the module docstring for ``hot_spots``.
    """
    words = np.ascontiguousarray(as_words(codes))
    n = len(words)
    bits = bits if bits is not None else 64 * words.shape[1]
    if hot_spots not in ("representative", "expand"):
        raise ValueError(
            f"The 'hot_spots' parameter must be one of 'representative', 'expand'. Got {hot_spots!r} instead."
        )
    if n < 2:
        empty = np.zeros(0, dtype=np.int64)
        return CandidatePairs(empty, empty.copy(), empty.copy(), n)
    if hot_spots == "expand":
        a, b, d = MultiIndexHash(bits, num_chunks).fit(words).self_join(radius)
        return CandidatePairs(a, b, d, n)
    first, inverse = _code_groups(words)
    members = np.flatnonzero(first[inverse] != np.arange(n))
    star_a = first[inverse[members]]
    star_b = members
    ua, ub, ud = MultiIndexHash(bits, num_chunks).fit(words[first]).self_join(radius)
    ra, rb = first[ua], first[ub]
    a = np.concatenate([star_a, np.minimum(ra, rb)])
    b = np.concatenate([star_b, np.maximum(ra, rb)])
    d = np.concatenate([np.zeros(len(star_a), dtype=np.int64), ud])
    order = np.lexsort((b, a))
    logger.debug("SPH blocking: %d documents, %d distinct codes, %d pairs", n, len(first), len(a))
    return CandidatePairs(a[order], b[order], d[order], n)


def brute_force_pairs(codes: np.ndarray, radius: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reference O(n^2) search: all pairs a < b within ``radius`` (for tests and small inputs)."""
    words = as_words(codes)
    n = len(words)
    out_a, out_b, out_d = [], [], []
    for i in range(n - 1):
        d = np.bitwise_count(words[i + 1 :] ^ words[i]).sum(axis=1)
        j = np.flatnonzero(d <= radius)
        out_a.append(np.full(len(j), i, dtype=np.int64))
        out_b.append(j + i + 1)
        out_d.append(d[j].astype(np.int64))
    if not out_a:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy()
    return np.concatenate(out_a), np.concatenate(out_b), np.concatenate(out_d)


# ---- budgeted k-nearest-neighbour candidates (Charikar's sorted permutations) -------------------

_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)


@nb.njit(inline="always", cache=True)
def _popcount64(x: np.uint64) -> int:  # pragma: no cover - numba
    """Number of set bits of a uint64 (SWAR)."""
    x = x - ((x >> np.uint64(1)) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return int((x * _H01) >> np.uint64(56))


@nb.njit(inline="always", cache=True)
def _offer(best_j: np.ndarray, best_d: np.ndarray, i: int, j: int, d: int) -> None:  # pragma: no cover - numba
    """Insert neighbour ``j`` at distance ``d`` into row ``i`` of the sorted top-k lists.

    Rows are kept sorted by (distance, index), empty slots (``-1``) last; a neighbour already
    listed is ignored (its distance is the same every time it is seen).
    """
    k = best_j.shape[1]
    last = k - 1
    wj = best_j[i, last]
    if wj >= 0 and (d > best_d[i, last] or (d == best_d[i, last] and j >= wj)):
        return
    for t in range(k):
        if best_j[i, t] == j:
            return
        if best_j[i, t] < 0:
            break
    pos = last
    while pos > 0:
        pj = best_j[i, pos - 1]
        if pj >= 0 and (best_d[i, pos - 1] < d or (best_d[i, pos - 1] == d and pj < j)):
            break
        best_j[i, pos] = pj
        best_d[i, pos] = best_d[i, pos - 1]
        pos -= 1
    best_j[i, pos] = j
    best_d[i, pos] = d


@nb.njit(cache=True)
def _permuted_keys(words: np.ndarray, perm: np.ndarray) -> np.ndarray:  # pragma: no cover - numba
    """The permuted codes as (n, ceil(len(perm) / 64)) uint64 sort keys, most significant bit first.

    Bit ``t`` of the permuted code is bit ``perm[t]`` of the code; it lands in key word ``t // 64``
    at position ``63 - t % 64``, so sorting the keys lexicographically sorts the permuted codes.
    """
    n = words.shape[0]
    m = perm.shape[0]
    num_keys = (m + 63) // 64
    out = np.zeros((n, num_keys), dtype=np.uint64)
    one = np.uint64(1)
    for i in range(n):
        for t in range(m):
            p = perm[t]
            bit = (words[i, p >> 6] >> np.uint64(p & 63)) & one
            out[i, t >> 6] |= bit << np.uint64(63 - (t & 63))
    return out


@nb.njit(cache=True)
def _sorted_order(keys: np.ndarray) -> np.ndarray:  # pragma: no cover - numba
    """Stable lexicographic order of the key rows; ties (identical permuted codes) by index."""
    n, num_keys = keys.shape
    order = np.arange(n)
    for w in range(num_keys - 1, -1, -1):
        col = np.empty(n, dtype=np.uint64)
        for p in range(n):
            col[p] = keys[order[p], w]
        order = order[np.argsort(col, kind="mergesort")]
    return order


@nb.njit(cache=True)
def _knn_scan(
    words: np.ndarray, perms: np.ndarray, k: int, radius: int, window: int
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - numba
    """Top-k lists ``(neighbour, distance)`` of every code over all permutations' sliding windows."""
    n, num_words = words.shape
    best_j = np.full((n, k), -1, dtype=np.int64)
    best_d = np.zeros((n, k), dtype=np.int64)
    for p in range(perms.shape[0]):
        order = _sorted_order(_permuted_keys(words, perms[p]))
        for pos in range(n):
            i = order[pos]
            stop = min(n, pos + window + 1)
            for q in range(pos + 1, stop):
                j = order[q]
                d = 0
                for w in range(num_words):
                    d += _popcount64(words[i, w] ^ words[j, w])
                if d <= radius:
                    _offer(best_j, best_d, i, j, d)
                    _offer(best_j, best_d, j, i, d)
    return best_j, best_d


def _check_int(name: str, value: object, low: int, high: int | None = None) -> int:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        if int(value) >= low and (high is None or int(value) <= high):
            return int(value)
    where = f"an int in [{low}, {high}]" if high is not None else f"an int >= {low}"
    raise ValueError(f"The '{name}' parameter of hamming_knn must be {where}. Got {value!r} instead.")


def hamming_knn(
    codes: np.ndarray,
    k: int,
    radius: int,
    bits: int,
    num_perms: int = 8,
    window: int = 8,
    seed: int = 0,
) -> CandidatePairs:
    """Candidate pairs from each code's (approximate) ``k`` nearest codes within Hamming ``radius``.

    The candidate budget is per document: every code ``i`` keeps a list ``knn(i)`` of at most ``k``
    other codes within ``radius``, the nearest it was compared with, ties broken by distance and
    then by the other document's index (lowest first). The output is the symmetric union of these
    lists, the pairs ``(i, j)`` with ``j`` in ``knn(i)`` or ``i`` in ``knn(j)``, so there are at most
    ``n * k`` pairs whatever the radius and however skewed the codes are. A document may appear in
    more than ``k`` pairs (others may list it), but its own list never exceeds ``k``.

    The neighbours are found by Charikar's sorted-permutation method: for each of ``num_perms``
    pseudo-random permutations of the bit positions (drawn with ``numpy.random.default_rng(seed)``),
    the documents are sorted by their permuted code, read most significant bit first as uint64
    words (for codes up to 64 bits one word; longer codes are ordered by all their permuted words,
    so identical codes are always adjacent), ties by document index (a stable sort). Codes sharing
    a long permuted prefix sit close together, so each document is compared (exact Hamming
    distance on all ``bits``) with the ``window`` documents before and after it in that order.
    Near codes share a long prefix in at least one of the permutations with high probability;
    the search is approximate (unlike :func:`hamming_candidates`, a pair within ``radius`` may be
    missed), and more permutations or a wider window trade time for recall.

    Work is ``O(num_perms * (n log n + n * window * (bits / 64 + k)))`` and memory ``O(n * k)``.
    The result is a pure function of the codes and the arguments.

    Hot spots stay linear: ``m`` copies of one code form a run in every sorted order, and each copy
    but the lowest-indexed one has a lower-indexed copy right before it, at distance 0. Since lists
    prefer distance 0 and then low indices, every such copy lists a lower-indexed copy, so the
    copies form one connected component (a union-find joins them all) with at most ``m * k`` pairs.

    Parameters
    ----------
    codes : np.ndarray
        Packed uint64 codes as returned by ``SPHHasher.codes``: shape (n,) for ``bits <= 64``,
        (n, ceil(bits / 64)) otherwise; bits at positions ``>= bits`` must be zero.
    k : int
        Neighbours kept per document (>= 1).
    radius : int
        Largest Hamming distance of a proposed pair, in ``[0, bits]`` (``bits``: no limit).
    bits : int
        Code length in bits.
    num_perms : int
        Number of random bit permutations (>= 1).
    window : int
        Documents compared before and after each document in every sorted order (>= 1).
    seed : int
        Seed of the permutations.

    Returns
    -------
    CandidatePairs
        Pairs ``a < b`` sorted by ``(a, b)`` without duplicates, with their Hamming distances,
        ``num_documents = n`` and ``proposed_by="sph"`` (as :func:`hamming_candidates`).
    """
    k = _check_int("k", k, 1)
    bits = _check_int("bits", bits, 1)
    radius = _check_int("radius", radius, 0, bits)
    num_perms = _check_int("num_perms", num_perms, 1)
    window = _check_int("window", window, 1)
    seed = _check_int("seed", seed, 0)
    codes = np.asarray(codes)
    if codes.dtype != np.uint64 or codes.ndim not in (1, 2):
        raise ValueError(
            f"The 'codes' parameter of hamming_knn must be a 1-D or 2-D uint64 array (as returned by SPHHasher.codes). "
            f"Got dtype {codes.dtype} and shape {codes.shape} instead."
        )
    num_words = max(1, -(-bits // 64))
    words = np.ascontiguousarray(as_words(codes))
    if words.shape[1] != num_words:
        raise ValueError(
            f"The 'codes' parameter of hamming_knn must hold {num_words} uint64 word(s) per code for bits={bits}. "
            f"Got codes of shape {codes.shape} instead."
        )
    if bits % 64 and len(words) and np.any(words[:, -1] >> np.uint64(bits % 64)):
        raise ValueError(
            f"The 'codes' parameter of hamming_knn has bits set beyond position {bits}; pass the codes' real 'bits'."
        )
    n = len(words)
    empty = np.zeros(0, dtype=np.int64)
    if n < 2:
        return CandidatePairs(empty, empty.copy(), empty.copy(), n)
    rng = np.random.default_rng(seed)
    perms = np.stack([rng.permutation(bits) for _ in range(num_perms)]).astype(np.int64)
    best_j, best_d = _knn_scan(words, perms, k, radius, window)
    src = np.repeat(np.arange(n, dtype=np.int64), k)
    dst = best_j.ravel()
    dist = best_d.ravel()
    found = dst >= 0
    src, dst, dist = src[found], dst[found], dist[found]
    a = np.minimum(src, dst)
    b = np.maximum(src, dst)
    _, first = np.unique(a * n + b, return_index=True)  # sorted by (a, b), one row per pair
    logger.debug("SPH kNN blocking: %d documents, k=%d, %d pairs", n, k, len(first))
    return CandidatePairs(a[first], b[first], dist[first], n)
