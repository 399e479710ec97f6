"""Cluster and select: accepted edges → clusters → one kept document per cluster.

Clusters are the connected components of the accepted pairs (a deterministic union-find
whose roots are the smallest member). The keep policy picks the survivor of each cluster;
every other member is removed and names the survivor in ``duplicate_of``. Its ``relation``,
``decided_by`` and ``score`` come from the weakest accepted edge on its path to the survivor
in the tree of accepted edges: a chain is only as strong as its weakest link.

:func:`select` is the cascade's select step: the stages' edges, the cover check
(:class:`~semhash_llm.pipeline.cover.CoverCheck`, which asks each stage's ``covers``) splitting
what no kept document covers, then the survivors — kept as one checkpoint step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numba as nb
import numpy as np

from semhash_llm.config import PipelineConfig, SelectConfig
from semhash_llm.faults import failpoint
from semhash_llm.pipeline.checkpoints import Checkpoints
from semhash_llm.pipeline.cover import CoverCheck
from semhash_llm.pipeline.edges import EDGE_RELATIONS
from semhash_llm.sketch.unionfind import UnionFind, cluster_roots
from semhash_llm.stages.base import Edges, Stage

__all__ = ["EDGE_KINDS", "Selection", "select_survivors", "refine_by_cover", "CoverFn", "Selected", "select"]

EDGE_KINDS: dict[int, tuple[str, str]] = EDGE_RELATIONS
"""Edge kind → (relation, decided_by): :data:`semhash_llm.pipeline.edges.EDGE_RELATIONS`."""


@dataclass
class Selection:
    """Per document: the survivor of its cluster, and how it was linked to it."""

    keeper: np.ndarray  # index of the kept document of its cluster (itself for survivors)
    cluster_size: np.ndarray
    via_kind: np.ndarray  # edge kind of the weakest link on the path to the keeper (-1: none)
    via_score: np.ndarray  # score of that link (nan: none)


@nb.njit(cache=True)
def _bfs(n: int, keeper: np.ndarray, ea: np.ndarray, eb: np.ndarray, es: np.ndarray, ek: np.ndarray,
         via_kind: np.ndarray, via_score: np.ndarray) -> None:
    m = ea.shape[0]
    deg = np.zeros(n + 1, dtype=np.int64)
    for i in range(m):
        deg[ea[i] + 1] += 1
        deg[eb[i] + 1] += 1
    for i in range(n):
        deg[i + 1] += deg[i]
    adj = np.empty(2 * m, dtype=np.int64)
    fill = deg[:-1].copy()
    for i in range(m):
        adj[fill[ea[i]]] = i
        fill[ea[i]] += 1
        adj[fill[eb[i]]] = i
        fill[eb[i]] += 1
    visited = np.zeros(n, dtype=np.bool_)
    queue = np.empty(n, dtype=np.int64)
    for s in range(n):
        if keeper[s] != s or deg[s + 1] == deg[s]:
            continue
        head = 0
        tail = 0
        queue[tail] = s
        tail += 1
        visited[s] = True
        while head < tail:
            u = queue[head]
            head += 1
            for p in range(deg[u], deg[u + 1]):
                e = adj[p]
                v = eb[e] if ea[e] == u else ea[e]
                if visited[v]:
                    continue
                visited[v] = True
                if u == s or es[e] < via_score[u]:
                    via_score[v] = es[e]
                    via_kind[v] = ek[e]
                else:
                    via_score[v] = via_score[u]
                    via_kind[v] = via_kind[u]
                queue[tail] = v
                tail += 1


def select_survivors(
    roots: np.ndarray,
    edges_a: np.ndarray,
    edges_b: np.ndarray,
    edges_score: np.ndarray,
    edges_kind: np.ndarray,
    lengths: np.ndarray,
    priorities: np.ndarray,
    config: SelectConfig,
    children: np.ndarray | None = None,
    pinned: np.ndarray | None = None,
) -> Selection:
    """Pick one survivor per cluster by the keep policy and describe every removal.

    ``roots`` is the union-find root of every document; ``edges_*`` the accepted pairs that
    merged clusters (a spanning forest). ``children`` (bool per document) marks documents
    contained in another: whatever the policy, a cluster's survivor is one that is not a
    child when it has one, so a child never survives its parent. ``pinned`` (bool per
    document) marks documents of an index (``dedup --against``): among the non-children of a
    cluster, a pinned one survives whatever the policy.
    """
    n = roots.shape[0]
    index = np.arange(n, dtype=np.int64)
    child = np.zeros(n, np.int8) if children is None else children.astype(np.int8)
    # A pinned document (indexed before: published already) survives its cluster unless it is
    # contained in a new one; then the policy decides among the rest.
    loose = ~pinned if pinned is not None else np.zeros(n, dtype=np.bool_)
    if config.keep == "first":
        order = np.lexsort((index, loose, child, roots))
    elif config.keep == "longest":
        order = np.lexsort((index, -lengths.astype(np.int64), loose, child, roots))
    else:
        key = priorities.astype(np.float64)
        key = -key if config.priority_order == "desc" else key.copy()
        key[np.isnan(key)] = np.inf  # missing values rank last
        order = np.lexsort((index, key, loose, child, roots))
    sorted_roots = roots[order]
    starts = np.flatnonzero(np.r_[True, sorted_roots[1:] != sorted_roots[:-1]]) if n else np.empty(0, np.int64)
    sizes = np.diff(np.r_[starts, n])
    keeper_of_root = np.empty(n, dtype=np.int64)
    keeper_of_root[sorted_roots[starts]] = order[starts]
    keeper = keeper_of_root[roots]
    size_of_root = np.zeros(n, dtype=np.int64)
    size_of_root[sorted_roots[starts]] = sizes
    cluster_size = size_of_root[roots]
    via_kind = np.full(n, -1, dtype=np.int64)
    via_score = np.full(n, np.nan, dtype=np.float64)
    if edges_a.shape[0]:
        _bfs(n, keeper, edges_a.astype(np.int64), edges_b.astype(np.int64), edges_score.astype(np.float64),
             edges_kind.astype(np.int64), via_kind, via_score)
    return Selection(keeper=keeper, cluster_size=cluster_size, via_kind=via_kind, via_score=via_score)


CoverFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""``covers(docs, keepers)``: for each pair, whether the keeper covers the document directly."""


def _components(nodes: np.ndarray, edges_a: np.ndarray, edges_b: np.ndarray, n: int) -> np.ndarray:
    """Root (smallest index) of each of ``nodes`` over the edges with both ends in ``nodes``."""
    inside = np.zeros(n, dtype=np.bool_)
    inside[nodes] = True
    both = inside[edges_a] & inside[edges_b]
    sets = UnionFind(n)
    sets.union_many(edges_a[both], edges_b[both])
    return cluster_roots(sets.parent_, nodes)


def refine_by_cover(roots: np.ndarray, edges_a: np.ndarray, edges_b: np.ndarray, edges_score: np.ndarray,
                    edges_kind: np.ndarray, lengths: np.ndarray, priorities: np.ndarray, config: SelectConfig,
                    children: np.ndarray | None, covers: CoverFn,
                    pinned: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """Split clusters until every removed document is covered by its survivor directly.

    Returns the refined roots, a mask of the edges kept (both ends in one refined cluster) and
    the number of documents that had to be re-clustered. Each round picks the survivors with
    :func:`select_survivors`, asks ``covers`` about every other member, and gives the
    uncovered ones clusters of their own: the connected components of their own edges. Every
    round splits at least one cluster, so it ends; a document alone is its own survivor.
    """
    n = roots.shape[0]
    roots = roots.astype(np.int64).copy()
    a = edges_a.astype(np.int64)
    b = edges_b.astype(np.int64)
    reclustered = np.zeros(n, dtype=np.bool_)
    while True:
        keep_edge = roots[a] == roots[b]
        sel = select_survivors(roots, a[keep_edge], b[keep_edge], edges_score[keep_edge], edges_kind[keep_edge],
                               lengths, priorities, config, children, pinned)
        removed = np.flatnonzero(sel.keeper != np.arange(n))
        if removed.size == 0:
            break
        ok = np.asarray(covers(removed, sel.keeper[removed]), dtype=np.bool_)
        uncovered = removed[~ok]
        if uncovered.size == 0:
            break
        reclustered[uncovered] = True
        # Provisional labels (components above n, so they never meet a kept cluster's root), then
        # every cluster is labelled by its smallest member again, as the union-find does.
        label = roots.copy()
        label[uncovered] = n + _components(uncovered, a[keep_edge], b[keep_edge], n)
        smallest = np.full(2 * n, n, dtype=np.int64)
        np.minimum.at(smallest, label, np.arange(n, dtype=np.int64))
        roots = smallest[label]
    return roots, roots[a] == roots[b], int(np.count_nonzero(reclustered))


@dataclass
class Selected:
    """The select step's result: the selection and the numbers of its funnel row."""

    selection: Selection
    reclustered: int
    cover_details: dict[str, int]
    resumed: bool


def select(stages: Sequence[Stage], edge_parts: Sequence[Edges], union_find: UnionFind, children: np.ndarray,
           lengths: np.ndarray, priorities: np.ndarray, config: PipelineConfig,
           read_texts: Callable[[np.ndarray], list[str]] | None, pinned: np.ndarray | None,
           ck: Checkpoints | None, step: int) -> Selected:
    """Cluster the accepted edges, split what the cover check finds uncovered, pick the
    survivors; restored from checkpoint ``step`` when it is there, kept as it otherwise."""
    n = int(lengths.shape[0])
    if ck is not None and ck.has(step, "select"):
        arrays, meta = ck.load(step, "select")
        selection = Selection(arrays["keeper"], arrays["cluster_size"], arrays["via_kind"], arrays["via_score"])
        return Selected(selection, int(meta["reclustered"]),
                        {str(k): int(v) for k, v in meta.get("cover_details", {}).items()}, True)
    failpoint("during", "select")
    cfg = config
    edges = Edges.concat(list(edge_parts))
    roots = union_find.roots()
    reclustered = 0
    evidence: dict[int, tuple[int, float]] = {}
    cover_details: dict[str, int] = {}
    if cfg.select.cover_check and len(edges):
        check = CoverCheck({st.name: st for st in stages}, edges, n, cfg, read_texts, lengths)
        roots, kept_edges, reclustered = refine_by_cover(
            roots, edges.a, edges.b, edges.score, edges.kind, lengths, priorities, cfg.select, children, check, pinned)
        edges = Edges(edges.a[kept_edges], edges.b[kept_edges], edges.score[kept_edges], edges.kind[kept_edges])
        evidence, cover_details = check.evidence, check.details()
    selection = select_survivors(roots, edges.a, edges.b, edges.score, edges.kind, lengths, priorities, cfg.select,
                                 children, pinned)
    # A removed document the cover check kept in its cluster although its own edges led to
    # members it split off has no path of edges to its survivor: label it by what covered it.
    direct = np.flatnonzero((selection.keeper != np.arange(n)) & (selection.via_kind < 0))
    for d in direct.tolist():
        found = evidence.get(d * n + int(selection.keeper[d]))
        if found is not None:
            selection.via_kind[d], selection.via_score[d] = found
    if ck is not None:
        ck.save(step, "select", {"keeper": selection.keeper, "cluster_size": selection.cluster_size,
                                 "via_kind": selection.via_kind, "via_score": selection.via_score},
                {"reclustered": reclustered, "cover_details": cover_details})
    failpoint("after", "select")
    return Selected(selection, reclustered, cover_details, False)
