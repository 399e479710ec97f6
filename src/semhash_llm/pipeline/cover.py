"""The cover check before selection: may a kept document stand for a removed one?

``SelectConfig.cover_check`` (on by default) splits a cluster whose survivor does not cover
one of its members: a chain of accepted pairs (a ~ b ~ c) is no evidence that c stands for a.
A keeper covers a document only on evidence that the stage which would make the link itself
accepts. :class:`CoverCheck` asks, in this order, for the pairs still open:

1. the accepted edges themselves: the two documents are exact copies, or an accepted pair
   links their exact classes (a copy of a covered document is covered too);
2. every configured stage that declares a ``cover_rank``
   (:class:`~semhash_llm.pipeline.capabilities.Capabilities`), lowest rank first, through its
   ``covers(ctx)`` method — the estimates on signatures (AW-MinHash 10, LSH 20, SPH 30) — and,
   at :data:`~semhash_llm.pipeline.capabilities.CONTAINMENT_RANK`, a chain of containment
   edges from the document to the keeper; then the stages that read the texts (the verifier
   90). A stage answers only the pairs nothing before it covered.

A pair with a document the deferring stage (the verifier) calls short is never covered by a
hash estimate (:attr:`~semhash_llm.stages.base.CoverQuery.estimable`): no linking stage
accepts such a pair on its estimate, the verifier decides it. Exact copies that Bloom claimed
(no features of their own) are asked as the copy they equal.

The check also keeps the *evidence* of every covered pair (key ``doc * n + keeper``): the edge
kind and score of what covered it, which labels a removed document whose path of edges to its
survivor the check cut (it is covered directly, with no edge of its own).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from semhash_llm.config import PipelineConfig
from semhash_llm.pipeline.capabilities import CONTAINMENT_RANK, capabilities_of
from semhash_llm.pipeline.edges import EdgeKind
from semhash_llm.sketch.unionfind import UnionFind
from semhash_llm.stages.base import CoverAnswer, CoverContext, CoverQuery, Edges, PairCover, role_stage

__all__ = ["CoverCheck"]


class CoverCheck:
    """``check(docs, keepers)`` → whether each keeper covers its document (see the module
    docstring); :attr:`evidence` what covered each pair, :meth:`details` the stages' counts."""

    def __init__(self, stages: Mapping[str, Any], edges: Edges, n: int, config: PipelineConfig,
                 read_texts: Callable[[np.ndarray], list[str]] | None = None,
                 lengths: np.ndarray | None = None) -> None:
        self.n = n
        self.evidence: dict[int, tuple[int, float]] = {}
        self._deferring = role_stage(stages, "offers_deferral")
        confirmed = np.zeros(n, dtype=np.bool_)
        confirming = role_stage(stages, "offers_confirmation")
        if confirming is not None:
            found = confirming.confirmation(np.arange(n, dtype=np.int64), 1.0)
            if found is not None:
                confirmed = np.asarray(found[2]) >= 0
        ctx = CoverContext(n, config, stages, edges, confirmed, read_texts, lengths)
        ranked = sorted(((caps.cover_rank, order, stage) for order, stage in enumerate(stages.values())
                         if (caps := capabilities_of(stage)).cover_rank is not None), key=lambda t: (t[0], t[1]))
        self._before: list[tuple[str, PairCover]] = []
        self._after: list[tuple[str, PairCover]] = []
        for rank, _order, stage in ranked:
            cover = stage.covers(ctx)
            if cover is not None:
                (self._before if rank < CONTAINMENT_RANK else self._after).append((stage.name, cover))
        # Exact classes: each stands for its first member (the one Bloom did not claim: it has the
        # features; the union-find's roots are the smallest index).
        exact = edges.kind == EdgeKind.EXACT
        classes = UnionFind(n)
        if exact.any():
            classes.union_many(edges.a[exact].astype(np.int64), edges.b[exact].astype(np.int64))
        self._reps = reps = classes.roots()
        ra, rb = reps[edges.a].astype(np.int64), reps[edges.b].astype(np.int64)
        self._linked = np.unique(np.concatenate([ra * n + rb, rb * n + ra]))
        self._link_evidence: dict[int, tuple[int, float]] = {}
        for x, y, kind, score in zip((ra * n + rb).tolist(), (rb * n + ra).tolist(), edges.kind.tolist(),
                                     edges.score.tolist()):
            for key in (x, y):
                if key not in self._link_evidence or score > self._link_evidence[key][1]:
                    self._link_evidence[key] = (int(kind), float(score))
        contained = edges.kind == EdgeKind.CONTAINED
        self._parents: dict[int, list[int]] = {}
        self._contained_score: dict[tuple[int, int], float] = {}
        for child, parent, score in zip(edges.a[contained].tolist(), edges.b[contained].tolist(),
                                        edges.score[contained].tolist()):
            self._parents.setdefault(child, []).append(parent)
            self._contained_score[(child, parent)] = float(score)

    def details(self) -> dict[str, int]:
        """The stages' cover counts for the select row (``cover_check_<key>``)."""
        out: dict[str, int] = {}
        for _name, cover in (*self._before, *self._after):
            out.update({f"cover_check_{k}": int(v) for k, v in cover.details.items()})
        return out

    def _contained_in(self, doc: int, keeper: int) -> bool:
        seen = {doc}
        frontier = [doc]
        while frontier:
            nxt: list[int] = []
            for d in frontier:
                for p in self._parents.get(d, ()):
                    if p == keeper:
                        return True
                    if p not in seen:
                        seen.add(p)
                        nxt.append(p)
            frontier = nxt
        return False

    def _ask(self, covers: list[tuple[str, PairCover]], query: CoverQuery, pair_keys: np.ndarray) -> None:
        for _name, cover in covers:
            if not query.open.any():
                return
            got: CoverAnswer = cover(query)
            new = got.hit & query.open
            for i in np.flatnonzero(new).tolist():
                self.evidence[int(pair_keys[i])] = (int(got.kind[i]), float(got.score[i]))
            query.open &= ~new

    def __call__(self, docs: np.ndarray, keepers: np.ndarray) -> np.ndarray:
        n, reps = self.n, self._reps
        docs = np.asarray(docs, dtype=np.int64)
        keepers = np.asarray(keepers, dtype=np.int64)
        rd, rk = reps[docs].astype(np.int64), reps[keepers].astype(np.int64)
        pair_keys = docs * n + keepers
        class_keys = rd * n + rk
        ok = rd == rk
        for i in np.flatnonzero(ok).tolist():
            self.evidence[int(pair_keys[i])] = (int(EdgeKind.EXACT), 1.0)
        via_link = ~ok & np.isin(class_keys, self._linked)
        for i in np.flatnonzero(via_link).tolist():
            self.evidence[int(pair_keys[i])] = self._link_evidence[int(class_keys[i])]
        ok |= via_link
        if self._deferring is not None:
            # A pair with a short document is the verifier's, never its hash estimate's.
            estimable = ~(self._deferring.is_short(rd) | self._deferring.is_short(rk))
        else:
            estimable = np.ones(docs.size, dtype=np.bool_)
        query = CoverQuery(rd, rk, class_keys, ~ok, np.asarray(estimable, dtype=np.bool_))
        self._ask(self._before, query, pair_keys)
        for i in np.flatnonzero(query.open).tolist():
            d, k = int(docs[i]), int(keepers[i])
            if self._contained_in(d, k) or self._contained_in(int(rd[i]), int(rk[i])):
                query.open[i] = False
                self.evidence[int(pair_keys[i])] = (int(EdgeKind.CONTAINED),
                                                    self._contained_score.get((d, k), float("nan")))
        self._ask(self._after, query, pair_keys)
        return ~query.open
