"""Stage ``sph`` (config ``sph``; paper A, Semantic Projection Hashing): semantic candidate pairs from learned binary codes.

While the input streams, every document that reaches the feature stage gets a K-bit SPH
code from the distilled student (:mod:`semhash_llm.sph`); only the codes are kept (8 bytes
a document at K = 64). After the stream, among one representative per cluster formed so far,
each code proposes its ``SPHConfig.neighbors`` nearest codes within the Hamming radius
(:func:`semhash_llm.sph.blocking.hamming_knn`: a per-document neighbour budget, so a crowded
code space — thousands of documents on one topic — still yields each document's closest
codes, where one global radius chosen from a pair budget would have to shrink to nothing);
``neighbors=None`` proposes every pair within the radius (multi-index hashing). This is the
semantic neighbourhood that lexical banding cannot see (re-wrapped, re-worded, re-ordered text).

A proposed pair of two longer documents is confirmed lexically: it is accepted when the
MinHash estimate of its Jaccard similarity reaches ``SPHConfig.min_jaccard``, a floor below the
LSH threshold. A pair with a short document goes to the neural verifier when it runs
(:class:`semhash_llm.stages.mgfn.VerifierStage`), which reads the two texts. SPH never
merges two documents on meaning alone.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from semhash_llm.config import NormalizeConfig, ShingleConfig
from semhash_llm.pipeline.capabilities import Capabilities
from semhash_llm.pipeline.edges import EdgeKind
from semhash_llm.sketch.lsh import Confirmation, Deferred, link_pairs, min_equal_slots
from semhash_llm.sketch.unionfind import cluster_roots
from semhash_llm.sph import SPH, SPHConfig
from semhash_llm.sph.blocking import CandidatePairs, hamming_candidates, hamming_knn
from semhash_llm.stages.base import (
    CoverAnswer,
    CoverContext,
    CoverQuery,
    DecideContext,
    Decision,
    Edges,
    StageCover,
    StreamBatch,
    confirmation,
)
from semhash_llm.stages.lsh import MinHashLSHStage

__all__ = ["SPHStage", "SPH_EDGE_KIND"]

SPH_EDGE_KIND = EdgeKind.SPH


class SPHStage:
    """Codes while streaming; Hamming blocking and lexical confirmation after the stream."""

    name = "sph"
    capabilities = Capabilities(reads_features_of=("lsh", "aw", "mgfn"), handoff_fields=("deferred_", "counters_"),
                                cover_rank=30, defers_pairs=True)
    """It reads the MinHash signatures and clusters, AW-MinHash's confirmation and the verifier's deferral; its deferred pairs go to the verifier; the cover check asks it after LSH (its codes within the radius, with the MinHash estimate)."""

    def __init__(self, config: SPHConfig) -> None:
        self.config = config
        self.sph_ = SPH(config)
        self._codes: list[np.ndarray] = []
        self.encode_seconds_ = 0.0
        self.counters_ = np.zeros(4, dtype=np.int64)
        self.details_: dict[str, float | int | str] = {}
        self.deferred_ = Deferred.buffer(0)  # pairs handed to the verifier (filled in decide)

    def codes(self) -> np.ndarray:
        """Every code kept, in MinHash signature-row order (the cover check reads them)."""
        if not self._codes:
            return np.empty(0, np.uint64)
        if len(self._codes) > 1:
            self._codes = [np.concatenate(self._codes)]
        return self._codes[0]

    def covers(self, ctx: CoverContext) -> StageCover | None:
        """The cover check's question to SPH: are the two codes within ``sph.radius`` and does
        the MinHash estimate reach ``sph.min_jaccard`` (SPH's own confirmation)? Asked after LSH,
        so only of pairs below the LSH bar; not of a pair AW-MinHash confirms. ``None`` without
        MinHash signatures, or with codes of another row set (an engine's partial run)."""
        from semhash_llm.sph.hyperplanes import hamming_distance

        lsh = ctx.stages.get("lsh")
        if not isinstance(lsh, MinHashLSHStage) or not lsh.num_signed:
            return None
        codes = self.codes()
        if codes.shape[0] != lsh.num_signed:
            return None
        estimate = lsh.plain_estimates(ctx)
        radius, floor = ctx.config.sph.radius, ctx.config.sph.min_jaccard

        def answer(q: CoverQuery) -> CoverAnswer:
            at, rd, rk, same = estimate(q)
            hit = (hamming_distance(codes[rd], codes[rk]) <= radius) & (same >= floor - 1e-9)
            return CoverAnswer.none(q.docs.size).mark(at[hit], SPH_EDGE_KIND, same[hit])

        return StageCover(answer)

    def encode(self, texts: Sequence[str]) -> None:
        """Compute and keep the codes of ``texts`` (in the order MinHash signs them)."""
        if not texts:
            return
        t0 = time.perf_counter()
        self._codes.append(self.sph_.codes(texts))
        self.encode_seconds_ += time.perf_counter() - t0

    def process(self, batch: StreamBatch) -> None:
        """Codes of the batch documents that still need features (the rows MinHash signs), or the
        codes an engine computed for them."""
        done = batch.computed(self.name)
        if done is not None:
            if done["codes"].shape[0]:
                self._codes.append(done["codes"])
            return
        self.encode([batch.texts[j] for j in batch.feature_docs.tolist()])

    def compute(self, texts: list[str], normalize: NormalizeConfig, shingle: ShingleConfig) -> dict[str, np.ndarray]:
        """The codes of ``texts``, as :meth:`process` would keep them."""
        return {"codes": self.sph_.codes(texts)}

    def decide(self, ctx: DecideContext) -> Decision:
        """Hamming blocking over cluster representatives, confirmed by MinHash Jaccard."""
        near = ctx.stages.get("lsh")
        if not isinstance(near, MinHashLSHStage):
            raise RuntimeError("the SPH stage confirms its pairs with MinHash signatures: run it after the lsh stage")
        confirm = None
        if near.num_signed:
            sigs, rows = near.signatures()
            confirm = confirmation(ctx, sigs, rows, self.config.min_jaccard)
        edges = self.link(near, ctx.union_find.parent_, confirm)
        # Documents in: the clusters whose representative's code enters the Hamming search.
        return Decision(edges, docs_in=int(self.details_.get("codes_blocked", 0)), pairs_in=int(self.details_.get("pairs_proposed", 0)),
                        pairs_out=len(edges), details=dict(self.details_))

    def link(self, near: MinHashLSHStage, parent: np.ndarray, confirm: Confirmation | None = None) -> Edges:
        """Propose pairs within the Hamming radius, confirm them by Jaccard estimate, union.

        ``confirm``: how pairs are confirmed (AW-MinHash's weighted signatures for documents with
        lines to weigh); by default the MinHash estimate against ``min_jaccard``."""
        if not self._codes:
            return Edges.empty()
        codes = np.concatenate(self._codes)
        self._codes = [codes]
        sigs, rows = near.signatures()
        if sigs.shape[0] != codes.shape[0]:
            raise RuntimeError(f"SPH has {codes.shape[0]} codes but MinHash {sigs.shape[0]} signatures")
        # Block only one code per cluster formed so far (its root): documents already merged by
        # Bloom or LSH — a hot spot's thousands of copies — enter the Hamming search once, which
        # keeps the candidate count linear in the number of clusters, not quadratic in copies.
        reps = np.flatnonzero(cluster_roots(parent, rows) == rows)
        cands = self._candidates(codes[reps])
        n = sigs.shape[0]
        c = confirm or Confirmation.plain(sigs, min_equal_slots(self.config.min_jaccard, sigs.shape[1]))
        out = Edges.buffer(n, SPH_EDGE_KIND)
        d = self.deferred_ = c.buffer
        d.adopt(link_pairs(reps[cands.a], reps[cands.b], c.sigs, c.min_equal, c.alt_sigs, c.alt_min_equal, c.alt_row,
                   c.rows_to_defer, c.defer_share, rows, parent, out.a, out.b, out.score, self.counters_,
                   d.a, d.b, d.score, d.counters))
        k = int(self.counters_[2])
        self.details_ = {
            "bits": self.config.bits,
            "radius": self.config.radius,
            "neighbors": self.config.neighbors if self.config.neighbors is not None else "all",
            "codes_blocked": int(reps.shape[0]),
            "pairs_proposed": len(cands),
            "all_pairs": cands.all_pairs,
            "pruned_fraction": round(cands.pruned_fraction, 6),
            "pairs_compared": int(self.counters_[1]),
            "pairs_accepted": k,
            "pairs_deferred": d.count,
            "min_jaccard": self.config.min_jaccard,
            "docs_confirmed_on_aw_signatures": int(np.count_nonzero(c.alt_row >= 0)),
            "encode_seconds": round(self.encode_seconds_, 3),
        }
        return out.head(k)

    def _candidates(self, codes: np.ndarray) -> CandidatePairs:
        """Each code's nearest codes within the radius (``neighbors`` of them), or all within it."""
        cfg = self.config
        if cfg.neighbors is None:
            return hamming_candidates(codes, radius=cfg.radius, num_chunks=cfg.num_chunks, bits=cfg.bits,
                                      hot_spots=cfg.hot_spots)
        return hamming_knn(codes, k=cfg.neighbors, radius=cfg.radius, bits=cfg.bits, num_perms=cfg.permutations,
                           window=cfg.window)
