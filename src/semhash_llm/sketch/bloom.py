"""Bloom filters over 128-bit keys (numba kernels over a numpy bit array).

A key is a pair of ``uint64`` words ``(hi, lo)`` — already a strong hash, so the ``k``
bit positions come from double hashing, ``g_i = hi + i * (lo | 1) mod m`` (Kirsch and
Mitzenmacher), with no further hashing.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

__all__ = ["bloom_parameters", "BloomFilter", "ScalableBloomFilter"]

_U64 = np.uint64
_ONE = _U64(1)
_SIX = _U64(6)
_MASK63 = _U64(63)


def bloom_parameters(capacity: int, fp_rate: float) -> tuple[int, int]:
    """Bits ``m`` and hash count ``k`` for ``capacity`` keys at false-positive rate ``fp_rate``.

    ``m = -n ln p / (ln 2)^2`` rounded up to whole 64-bit words, ``k = round(m/n ln 2)``.
    """
    if capacity < 1:
        raise ValueError(f"Bloom filter capacity must be >= 1. Got {capacity} instead.")
    if not 0.0 < fp_rate < 1.0:
        raise ValueError(f"Bloom filter fp_rate must be in (0, 1). Got {fp_rate} instead.")
    exact_m = -capacity * math.log(fp_rate) / (math.log(2) ** 2)
    k = max(1, round(exact_m / capacity * math.log(2)))
    m = max(64, ((math.ceil(exact_m) + 63) // 64) * 64)
    return m, k


@nb.njit(cache=True)
def _contains(bits: np.ndarray, m: np.uint64, k: int, hi: np.ndarray, lo: np.ndarray, out: np.ndarray) -> None:
    for j in range(hi.shape[0]):
        if out[j]:
            continue
        step = lo[j] | _ONE
        pos = hi[j] % m
        found = True
        for _ in range(k):
            if (bits[pos >> _SIX] >> (pos & _MASK63)) & _ONE == 0:
                found = False
                break
            pos = (pos + step) % m
        out[j] = found


@nb.njit(cache=True)
def _add_if_absent(
    bits: np.ndarray, m: np.uint64, k: int, hi: np.ndarray, lo: np.ndarray, seen: np.ndarray
) -> int:
    """Sequentially: mark ``seen[j]`` if key j is (probably) present, else insert it."""
    added = 0
    for j in range(hi.shape[0]):
        if seen[j]:
            continue
        step = lo[j] | _ONE
        pos = hi[j] % m
        found = True
        for _ in range(k):
            word = pos >> _SIX
            bit = _ONE << (pos & _MASK63)
            if bits[word] & bit == 0:
                found = False
                bits[word] |= bit
            pos = (pos + step) % m
        if found:
            seen[j] = True
        else:
            added += 1
    return added


class BloomFilter:
    """A classic Bloom filter for ``capacity`` 128-bit keys at ``fp_rate``."""

    def __init__(self, capacity: int, fp_rate: float) -> None:
        self.capacity = capacity
        self.fp_rate = fp_rate
        self.num_bits, self.num_hashes = bloom_parameters(capacity, fp_rate)
        self.bits_ = np.zeros(self.num_bits // 64, dtype=np.uint64)
        self.count_ = 0

    @property
    def nbytes(self) -> int:
        """Memory of the bit array."""
        return int(self.bits_.nbytes)

    def contains(self, hi: np.ndarray, lo: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Whether each key is (probably) in the filter; ``out`` entries already True stay True."""
        res = np.zeros(hi.shape[0], dtype=np.bool_) if out is None else out
        _contains(self.bits_, _U64(self.num_bits), self.num_hashes, hi, lo, res)
        return res

    def add_batch(self, hi: np.ndarray, lo: np.ndarray, seen: np.ndarray | None = None) -> np.ndarray:
        """Insert keys in order; return which ones were (probably) present before their insertion.

        Keys already marked in ``seen`` are skipped. A key repeated inside the batch is found
        by its second occurrence, as in a sequential scan.
        """
        res = np.zeros(hi.shape[0], dtype=np.bool_) if seen is None else seen
        self.count_ += _add_if_absent(self.bits_, _U64(self.num_bits), self.num_hashes, hi, lo, res)
        return res


class ScalableBloomFilter:
    """A Bloom filter that grows: each slice has twice the capacity and half the FP rate.

    With a known capacity it is a single slice. The compound false-positive rate stays below
    ``2 * fp_rate`` (the slices' rates form the series ``p, p/2, p/4, ...``).
    """

    def __init__(self, fp_rate: float, initial_capacity: int = 1 << 20) -> None:
        self.fp_rate = fp_rate
        self.initial_capacity = initial_capacity
        self.slices_: list[BloomFilter] = [BloomFilter(initial_capacity, fp_rate / 2)]

    @property
    def count_(self) -> int:
        """Keys inserted."""
        return sum(s.count_ for s in self.slices_)

    @property
    def nbytes(self) -> int:
        """Memory of all slices."""
        return sum(s.nbytes for s in self.slices_)

    def add_batch(self, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
        """Insert keys in order; return which were (probably) present before."""
        seen = np.zeros(hi.shape[0], dtype=np.bool_)
        current = self.slices_[-1]
        for older in self.slices_[:-1]:
            older.contains(hi, lo, seen)
        if current.count_ + hi.shape[0] > current.capacity:
            current.contains(hi, lo, seen)
            grown = BloomFilter(max(2 * current.capacity, hi.shape[0]), current.fp_rate / 2)
            self.slices_.append(grown)
            current = grown
        current.add_batch(hi, lo, seen)
        return seen
