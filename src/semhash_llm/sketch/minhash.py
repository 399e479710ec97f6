"""MinHash signatures with multiply-shift hashing (numba kernels).

Permutation ``p`` maps a 64-bit shingle hash ``x`` to ``(a_p * x + b_p mod 2^64) >> 32``
with ``a_p`` odd (Dietzfelbinger's multiply-shift family); the signature keeps the
minimum per permutation as ``uint32``. The probability that two sets agree in one slot is
their Jaccard similarity, so the share of equal slots estimates it.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from semhash_llm.text.tokenize import doc_shingles

__all__ = [
    "minhash_permutations",
    "minhash_into",
    "sign_documents",
    "jaccard_estimate",
    "MinHash",
    "EMPTY_SLOT",
]

EMPTY_SLOT = np.uint32(0xFFFFFFFF)
_S32 = np.uint64(32)


def minhash_permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``(a, b)`` parameters of ``num_perm`` multiply-shift permutations, from ``seed``."""
    rng = np.random.Generator(np.random.PCG64(seed))
    a = rng.integers(0, np.iinfo(np.uint64).max, size=num_perm, dtype=np.uint64, endpoint=True)
    b = rng.integers(0, np.iinfo(np.uint64).max, size=num_perm, dtype=np.uint64, endpoint=True)
    return a | np.uint64(1), b


@nb.njit(cache=True)
def minhash_into(shingles: np.ndarray, count: int, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """Write the signature of ``shingles[:count]`` into ``out`` (all slots 2^32-1 when empty)."""
    num_perm = a.shape[0]
    for p in range(num_perm):
        out[p] = EMPTY_SLOT
    for i in range(count):
        x = shingles[i]
        for p in range(num_perm):
            v = np.uint32((a[p] * x + b[p]) >> _S32)
            if v < out[p]:
                out[p] = v


@nb.njit(parallel=True, cache=True)
def sign_documents(
    tok_offsets: np.ndarray,
    tok_hashes: np.ndarray,
    ngrams: np.ndarray,
    docs: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    out: np.ndarray,
) -> None:
    """Signatures of the batch documents ``docs`` (indices into the batch) into ``out`` rows."""
    for i in nb.prange(docs.shape[0]):
        d = docs[i]
        start = tok_offsets[d]
        end = tok_offsets[d + 1]
        buf = np.empty(max(end - start, 1), dtype=np.uint64)
        k = doc_shingles(tok_hashes, start, end, ngrams[d], buf)
        minhash_into(buf, k, a, b, out[i])


@nb.njit(inline="always", cache=True)
def equal_slots(sigs: np.ndarray, x: int, y: int) -> int:
    """Number of equal slots between signature rows ``x`` and ``y``."""
    same = 0
    for p in range(sigs.shape[1]):
        if sigs[x, p] == sigs[y, p]:
            same += 1
    return same


def jaccard_estimate(sig_a: np.ndarray, sig_b: np.ndarray) -> float:
    """The share of equal slots of two signatures: an unbiased Jaccard estimate."""
    if sig_a.shape != sig_b.shape:
        raise ValueError(f"Signatures differ in length: {sig_a.shape} vs {sig_b.shape}.")
    return float(np.count_nonzero(sig_a == sig_b)) / float(sig_a.shape[0])


class MinHash:
    """One MinHash signature, updated with 64-bit shingle hashes (like ``datasketch.MinHash``)."""

    def __init__(self, num_perm: int = 128, seed: int = 1) -> None:
        if num_perm < 1:
            raise ValueError(f"The 'num_perm' parameter of MinHash must be an int >= 1. Got {num_perm} instead.")
        self.num_perm = num_perm
        self.seed = seed
        self._a, self._b = minhash_permutations(num_perm, seed)
        self.hashvalues = np.full(num_perm, EMPTY_SLOT, dtype=np.uint32)

    def update_hashes(self, hashes: np.ndarray) -> None:
        """Add shingles given as 64-bit hashes."""
        h = np.ascontiguousarray(hashes, dtype=np.uint64)
        row = np.empty(self.num_perm, dtype=np.uint32)
        minhash_into(h, h.shape[0], self._a, self._b, row)
        np.minimum(self.hashvalues, row, out=self.hashvalues)

    def jaccard(self, other: MinHash) -> float:
        """Estimated Jaccard similarity with ``other`` (same ``num_perm`` and ``seed``)."""
        if (self.num_perm, self.seed) != (other.num_perm, other.seed):
            raise ValueError("Cannot compare MinHash objects with different num_perm or seed.")
        return jaccard_estimate(self.hashvalues, other.hashvalues)
