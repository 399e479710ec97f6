"""Stage 2, SPH blocking: semantic candidate pairs from learned binary codes.

While the input streams, every document that reaches the feature stage gets a K-bit SPH
code from the distilled student (:mod:`semhash_llm.sph`); only the codes are kept (8 bytes
a document at K = 64). After the stream, multi-index hashing proposes every pair of codes
within the Hamming radius among one representative per cluster formed so far — the semantic
neighbourhood that lexical banding cannot see
(re-wrapped, re-worded, re-ordered text).

Until the neural verifier lands, a proposed pair is confirmed lexically: it is accepted
when the MinHash estimate of its Jaccard similarity reaches ``SPHConfig.min_jaccard``, a
floor below the LSH threshold. SPH thus decides the pairs that share much of their text
but too little for LSH (boilerplate around the same article, an excerpt with edits), and
never merges two documents on meaning alone.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from semhash_llm.sketch.lsh import Confirmation, link_pairs, min_equal_slots
from semhash_llm.sketch.unionfind import cluster_roots
from semhash_llm.sph import SPH, SPHConfig
from semhash_llm.sph.blocking import hamming_candidates
from semhash_llm.sph.hyperplanes import as_words
from semhash_llm.stages.base import DecideContext, Decision, Edges, StreamBatch, confirmation
from semhash_llm.stages.near import MinHashLSHStage

__all__ = ["SPHStage", "SPH_EDGE_KIND"]

SPH_EDGE_KIND = 2


class SPHStage:
    """Codes while streaming; Hamming blocking and lexical confirmation after the stream."""

    name = "sph"

    def __init__(self, config: SPHConfig) -> None:
        self.config = config
        self.sph_ = SPH(config)
        self._codes: list[np.ndarray] = []
        self.encode_seconds_ = 0.0
        self.counters_ = np.zeros(4, dtype=np.int64)
        self.details_: dict[str, float | int] = {}

    def encode(self, texts: Sequence[str]) -> None:
        """Compute and keep the codes of ``texts`` (in the order MinHash signs them)."""
        if not texts:
            return
        t0 = time.perf_counter()
        self._codes.append(self.sph_.codes(texts))
        self.encode_seconds_ += time.perf_counter() - t0

    def process(self, batch: StreamBatch) -> None:
        """Codes of the batch documents that still need features (the rows MinHash signs)."""
        self.encode([batch.texts[j] for j in batch.feature_docs.tolist()])

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
        radius, expected = self._radius(codes[reps])
        cands = hamming_candidates(codes[reps], radius=radius, num_chunks=self.config.num_chunks,
                                   bits=self.config.bits, hot_spots=self.config.hot_spots)
        n = sigs.shape[0]
        c = confirm or Confirmation.plain(sigs, min_equal_slots(self.config.min_jaccard, sigs.shape[1]))
        out = Edges.buffer(n, SPH_EDGE_KIND)
        link_pairs(reps[cands.a], reps[cands.b], c.sigs, c.min_equal, c.alt_sigs, c.alt_min_equal, c.alt_row, rows, parent,
                   out.a, out.b, out.score, self.counters_)
        k = int(self.counters_[2])
        self.details_ = {
            "bits": self.config.bits,
            "radius": radius,
            "max_radius": self.config.radius,
            "expected_pairs_at_radius": int(expected),
            "codes_blocked": int(reps.shape[0]),
            "pairs_proposed": len(cands),
            "all_pairs": cands.all_pairs,
            "pruned_fraction": round(cands.pruned_fraction, 6),
            "pairs_compared": int(self.counters_[1]),
            "pairs_accepted": k,
            "min_jaccard": self.config.min_jaccard,
            "docs_confirmed_on_aw_signatures": int(np.count_nonzero(c.alt_row >= 0)),
            "encode_seconds": round(self.encode_seconds_, 3),
        }
        return out.head(k)

    def _radius(self, codes: np.ndarray, sample: int = 2000) -> tuple[int, float]:
        """The largest radius (up to the configured one) that keeps the candidates in budget.

        The share of all pairs within each distance is estimated from the pairs of a fixed
        sample of codes (deterministic: an evenly spaced sample).
        """
        words = as_words(codes)
        n = words.shape[0]
        total = n * (n - 1) / 2
        budget = self.config.max_pairs_per_doc
        if budget is None or n < 2:
            return self.config.radius, 0.0
        pick = words[np.linspace(0, n - 1, num=min(n, sample)).astype(np.int64)]
        m = pick.shape[0]
        hist = np.zeros(self.config.bits + 1, dtype=np.int64)
        for i in range(m - 1):
            d = np.bitwise_count(pick[i + 1 :] ^ pick[i]).sum(axis=1)
            hist += np.bincount(d, minlength=self.config.bits + 1)
        share = np.cumsum(hist) / max(m * (m - 1) / 2, 1)
        for r in range(self.config.radius, -1, -1):
            expected = float(share[r] * total)
            if expected <= budget * n or r == 0:
                return r, expected
        return 0, 0.0  # unreachable: r == 0 returns above
