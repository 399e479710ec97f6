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
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from itertools import combinations
from math import comb
from typing import Literal

import numpy as np

from semhash_llm.sph.hyperplanes import as_words

logger = logging.getLogger(__name__)

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
