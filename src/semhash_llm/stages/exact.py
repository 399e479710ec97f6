"""Stage ``bloom`` (config ``bloom``; paper F.1, the Bloom exact stage): exact duplicates of the normalized text leave first.

Streaming: every document's 128-bit digest goes through a (scalable) Bloom filter. A miss
proves the document is new; a hit marks it as a *candidate* exact duplicate, and it skips
the expensive features (MinHash). At the end of the stream every hit is confirmed against
the full 128-bit digests: a hit is an exact duplicate only if an earlier document has the
same digest. An unconfirmed hit is a Bloom false positive: it is kept, and its features are
computed in a repair pass, so a false positive never deletes a document nor hides it from
the later stages.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from semhash_llm.config import BloomConfig
from semhash_llm.pipeline.capabilities import Capabilities
from semhash_llm.pipeline.edges import EdgeKind
from semhash_llm.sketch.bloom import ScalableBloomFilter
from semhash_llm.stages.base import DecideContext, Decision, DocStatus, Edges, StreamBatch

EXACT_EDGE_KIND = EdgeKind.EXACT

__all__ = ["BloomExactStage", "confirm_exact", "EXACT_EDGE_KIND"]


@nb.njit(cache=True)
def _confirm(hi: np.ndarray, lo: np.ndarray, eligible: np.ndarray, cand_hi: np.ndarray,
             cand_lo: np.ndarray, rep: np.ndarray) -> None:
    """For each doc whose digest is a candidate digest, point it at the first doc with it."""
    first = np.full(cand_hi.shape[0], -1, dtype=np.int64)
    m = cand_hi.shape[0]
    for d in range(hi.shape[0]):
        rep[d] = d
        if not eligible[d]:
            continue
        h = hi[d]
        l_ = lo[d]
        a = 0
        b = m
        while a < b:  # lower bound of (h, l_) in the sorted candidate digests
            mid = (a + b) // 2
            if cand_hi[mid] < h or (cand_hi[mid] == h and cand_lo[mid] < l_):
                a = mid + 1
            else:
                b = mid
        if a < m and cand_hi[a] == h and cand_lo[a] == l_:
            if first[a] < 0:
                first[a] = d
            else:
                rep[d] = first[a]


def confirm_exact(hi: np.ndarray, lo: np.ndarray, eligible: np.ndarray, hits: np.ndarray) -> np.ndarray:
    """The exact-duplicate representative of every document (itself when unique).

    Only the digests of Bloom hits are looked up, so the work is one pass over the digests
    with a binary search in the (small) set of candidate digests.
    """
    cand = np.flatnonzero(hits & eligible)
    pairs = np.unique(np.stack([hi[cand], lo[cand]], axis=1), axis=0) if cand.size else np.empty((0, 2), np.uint64)
    rep = np.empty(hi.shape[0], dtype=np.int64)
    _confirm(hi, lo, eligible, np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1]), rep)
    return rep


class BloomExactStage:
    """The streaming half of stage 1: ask the Bloom filter about each batch of digests."""

    name = "bloom"
    capabilities = Capabilities(claims_documents=True)
    """The documents it claims while streaming are the ones later stages do not see: it streams on every run, resumed or not."""

    def __init__(self, config: BloomConfig) -> None:
        self.config = config
        capacity = config.expected_documents or (1 << 20)
        self.filter_ = ScalableBloomFilter(config.fp_rate, initial_capacity=capacity)
        self.hits_ = 0
        self._hi: list[np.ndarray] = []
        self._lo: list[np.ndarray] = []
        self._hits: list[np.ndarray] = []

    def process(self, batch: StreamBatch) -> None:
        """Ask the filter about the batch's digests; hits are claimed (they skip the features)."""
        tokens = batch.tokens
        hits = self.check(tokens.digest_hi, tokens.digest_lo, batch.status != DocStatus.SKIPPED)
        self._hi.append(tokens.digest_hi)
        self._lo.append(tokens.digest_lo)
        self._hits.append(hits)
        batch.featured &= ~hits

    def decide(self, ctx: DecideContext) -> Decision:
        """Confirm every hit against the full digests; link the exact duplicates to their first copy.

        An unconfirmed hit is a Bloom false positive: it is returned in ``refeature`` (when it
        has tokens) so the later stages compute its features after all.
        """
        n = ctx.num_docs
        hi, lo, hits = (np.concatenate(x) if x else np.empty(0, t)
                        for x, t in ((self._hi, np.uint64), (self._lo, np.uint64), (self._hits, np.bool_)))
        eligible = ctx.status != DocStatus.SKIPPED
        rep = confirm_exact(hi, lo, eligible, hits)
        dup = np.flatnonzero(rep != np.arange(n))
        ctx.union_find.union_many(dup, rep[dup])
        false_pos = np.flatnonzero(hits & (rep == np.arange(n)))
        edges = Edges(dup, rep[dup], np.ones(dup.size, np.float32), np.full(dup.size, EXACT_EDGE_KIND, np.uint8))
        return Decision(edges, docs_in=int(eligible.sum()),
                        details={**self.stats(), "confirmed_exact": int(dup.size), "false_positives": int(false_pos.size)},
                        refeature=false_pos[ctx.status[false_pos] == DocStatus.OK])

    def check(self, hi: np.ndarray, lo: np.ndarray, eligible: np.ndarray) -> np.ndarray:
        """Bloom hits of the eligible documents of a batch (ineligible ones are never hits)."""
        idx = np.flatnonzero(eligible)
        hits = np.zeros(hi.shape[0], dtype=np.bool_)
        if idx.size:
            hits[idx] = self.filter_.add_batch(hi[idx], lo[idx])
        self.hits_ += int(hits.sum())
        return hits

    def stats(self) -> dict[str, float | int]:
        """Numbers for the report."""
        return {
            "filter_bytes": self.filter_.nbytes,
            "filter_slices": len(self.filter_.slices_),
            "target_fp_rate": self.config.fp_rate,
            "bloom_hits": self.hits_,
        }
