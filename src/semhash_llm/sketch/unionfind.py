"""Deterministic union-find over document indices (numba kernels on a parent array).

The root of every set is its smallest index, whatever the order of the unions, so the
clusters — and everything derived from them — do not depend on how work was scheduled.
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["UnionFind", "cluster_roots", "uf_find", "uf_union"]


@nb.njit(inline="always", cache=True)
def uf_find(parent: np.ndarray, x: int) -> int:
    """Root of ``x`` with path halving."""
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@nb.njit(inline="always", cache=True)
def uf_union(parent: np.ndarray, a: int, b: int) -> bool:
    """Merge the sets of ``a`` and ``b`` (the smaller root wins); False if already merged."""
    ra = uf_find(parent, a)
    rb = uf_find(parent, b)
    if ra == rb:
        return False
    if ra < rb:
        parent[rb] = ra
    else:
        parent[ra] = rb
    return True


@nb.njit(cache=True)
def _roots(parent: np.ndarray) -> np.ndarray:
    out = np.empty(parent.shape[0], dtype=np.int64)
    for i in range(parent.shape[0]):
        out[i] = uf_find(parent, i)
    return out


@nb.njit(cache=True)
def cluster_roots(parent: np.ndarray, items: np.ndarray) -> np.ndarray:
    """The root of each of ``items``."""
    out = np.empty(items.shape[0], dtype=np.int64)
    for i in range(items.shape[0]):
        out[i] = uf_find(parent, items[i])
    return out


@nb.njit(cache=True)
def _union_many(parent: np.ndarray, a: np.ndarray, b: np.ndarray, merged: np.ndarray) -> None:
    for i in range(a.shape[0]):
        merged[i] = uf_union(parent, a[i], b[i])


class UnionFind:
    """Disjoint sets over ``0..n-1``; the root of a set is its smallest member."""

    def __init__(self, n: int) -> None:
        self.parent_ = np.arange(n, dtype=np.int64)

    def __len__(self) -> int:
        return int(self.parent_.shape[0])

    def find(self, x: int) -> int:
        """The root (smallest member) of ``x``'s set."""
        return int(uf_find(self.parent_, x))

    def union(self, a: int, b: int) -> bool:
        """Merge; return whether two different sets were merged."""
        return bool(uf_union(self.parent_, a, b))

    def union_many(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Merge pairs in order; return for each whether it merged two sets."""
        merged = np.zeros(a.shape[0], dtype=np.bool_)
        _union_many(self.parent_, a.astype(np.int64), b.astype(np.int64), merged)
        return merged

    def roots(self) -> np.ndarray:
        """The root of every element."""
        return _roots(self.parent_)
