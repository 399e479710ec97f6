"""Edit distance between two strings (numba kernel over code points).

Used to measure a pair's character error rate: the benchmark's recall by error band and the
noise model's bound on how far a generated copy may drift.
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["levenshtein", "char_error_rate"]


@nb.njit(cache=True)
def _levenshtein(a: np.ndarray, b: np.ndarray) -> int:
    n, m = a.shape[0], b.shape[0]
    prev = np.arange(m + 1, dtype=np.int64)
    cur = np.empty(m + 1, dtype=np.int64)
    for i in range(1, n + 1):
        cur[0] = i
        ca = a[i - 1]
        for j in range(1, m + 1):
            best = prev[j] + 1
            if cur[j - 1] + 1 < best:
                best = cur[j - 1] + 1
            sub = prev[j - 1] + (1 if ca != b[j - 1] else 0)
            if sub < best:
                best = sub
            cur[j] = best
        prev, cur = cur, prev
    return int(prev[m])


def _code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


def levenshtein(a: str, b: str) -> int:
    """Insertions, deletions and substitutions of code points that turn ``a`` into ``b``."""
    return _levenshtein(_code_points(a), _code_points(b))


def char_error_rate(reference: str, hypothesis: str) -> float:
    """Character error rate of ``hypothesis`` against ``reference``: Levenshtein distance over
    ``len(reference)`` (1.0 for an empty reference and a non-empty hypothesis, 0.0 for two empty ones)."""
    if not reference:
        return float(bool(hypothesis))
    return levenshtein(reference, hypothesis) / len(reference)
