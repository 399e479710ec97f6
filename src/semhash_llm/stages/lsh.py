"""Stage ``lsh`` (config ``minhash``; the paper's lexical LSH tier of the cascade): near duplicates by estimated Jaccard similarity of shingle sets.

Signatures are computed batch by batch while the input streams (only they are kept, not
the texts). After the stream, each band's keys are sorted and its buckets are linked by
:func:`semhash_llm.sketch.lsh.link_band`: every candidate pair is confirmed by its Jaccard
estimate before it is accepted, and pairs already in one cluster are not compared again.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from semhash_llm.config import MinHashConfig, NormalizeConfig, ShingleConfig
from semhash_llm.pipeline.capabilities import Capabilities
from semhash_llm.pipeline.edges import EdgeKind
from semhash_llm.sketch.lsh import (
    Confirmation,
    Deferred,
    band_key_column,
    link_band,
    min_equal_slots,
    optimal_lsh_params,
)
from semhash_llm.sketch.minhash import minhash_into, minhash_permutations, sign_documents
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
from semhash_llm.text.normalize import char_classes, normalize_batch
from semhash_llm.text.tokenize import TokenizedBatch, tokenize_batch

__all__ = ["MinHashLSHStage", "Edges", "LSH_EDGE_KIND"]  # Edges: re-exported from stages.base

LSH_EDGE_KIND = EdgeKind.LSH

_SPACES = re.compile(r"\s+")
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def char_shingle_hashes(text: str, n: int) -> np.ndarray:
    """Distinct 64-bit hashes of the character ``n``-grams of ``text`` lower-cased with whitespace
    runs folded to one space (the whole text as one shingle when shorter than ``n``)."""
    t = _SPACES.sub(" ", text.lower()).strip()
    if not t:
        return np.empty(0, dtype=np.uint64)
    c = np.frombuffer(t.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    m = max(c.size - n + 1, 1)
    h = np.zeros(m, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(min(n, c.size)):
            h = (h ^ c[k:k + m]) * _M1
        h ^= h >> np.uint64(31)
        h *= _M2
        h ^= h >> np.uint64(29)
    return np.unique(h)


def _mapped_array(shape: tuple[int, int], dtype: type) -> np.ndarray:
    """An array in its own anonymous memory map, so that freeing it returns the memory at once.

    Small heap blocks freed by numpy stay in the allocator's arenas; signature chunks are
    freed one by one while they are gathered into one matrix, and must not linger there.
    """
    nbytes = max(1, shape[0] * shape[1] * np.dtype(dtype).itemsize)
    return np.frombuffer(mmap.mmap(-1, nbytes), dtype=dtype, count=shape[0] * shape[1]).reshape(shape)


class MinHashLSHStage:
    """Signatures while streaming; LSH linking after the stream."""

    name = "lsh"
    capabilities = Capabilities(reads_features_of=("aw", "mgfn"), handoff_fields=("deferred_", "counters_"),
                                cover_rank=20, defers_pairs=True, shuffles_buckets=True)
    """Its deferred pairs and proposal count go to the verifier; AW-MinHash confirms its pairs; the
    cover check asks it after AW-MinHash (its Jaccard estimate); an engine may group its buckets."""

    def __init__(self, config: MinHashConfig) -> None:
        self.config = config
        self.a_, self.b_ = minhash_permutations(config.num_perm, config.seed)
        if config.num_bands is not None and config.rows_per_band is not None:
            self.num_bands, self.rows_per_band = config.num_bands, config.rows_per_band
        else:
            self.num_bands, self.rows_per_band = optimal_lsh_params(
                config.threshold, config.num_perm, config.fp_weight, config.fn_weight
            )
        self._chunks: list[np.ndarray] = []
        self._rows: list[np.ndarray] = []
        self.counters_ = np.zeros(4, dtype=np.int64)
        self.deferred_ = Deferred.buffer(0)  # pairs handed to the verifier (filled in decide)
        self.bucketer: Callable[[np.ndarray], list[np.ndarray]] | None = None
        """Given every row's band keys ``(rows, bands)``, the rows of each band's buckets of two or
        more, by key then row (an engine's shuffle, ``--engine ray``); ``None``: sorted here."""

    @property
    def num_signed(self) -> int:
        return sum(c.shape[0] for c in self._chunks)

    def sign(self, batch: TokenizedBatch, docs: np.ndarray, global_index: np.ndarray) -> None:
        """Compute and keep the signatures of batch documents ``docs`` (global ids given)."""
        if docs.size == 0:
            return
        out = _mapped_array((docs.shape[0], self.config.num_perm), np.uint32)
        sign_documents(batch.tok_offsets, batch.tok_hashes, batch.ngrams, docs.astype(np.int64),
                       self.a_, self.b_, out)
        self._chunks.append(out)
        self._rows.append(global_index.astype(np.int64))

    def process(self, batch: StreamBatch) -> None:
        """Sign the batch documents that still need features (or keep the signatures an engine computed)."""
        docs = batch.feature_docs
        done = batch.computed(self.name)
        if done is not None:
            if docs.size:
                self._chunks.append(done["signatures"])
                self._rows.append(batch.index[docs].astype(np.int64))
            return
        self.sign(batch.tokens, docs, batch.index[docs])

    def compute(self, texts: list[str], normalize: NormalizeConfig, shingle: ShingleConfig) -> dict[str, np.ndarray]:
        """The signatures of ``texts`` (each with tokens), as :meth:`process` would keep them."""
        tb = tokenize_batch(normalize_batch(texts, normalize), char_classes(normalize.strip_punctuation), shingle)
        out = np.empty((len(texts), self.config.num_perm), dtype=np.uint32)
        if texts:
            sign_documents(tb.tok_offsets, tb.tok_hashes, tb.ngrams, np.arange(len(texts), dtype=np.int64),
                           self.a_, self.b_, out)
        return {"signatures": out}

    def decide(self, ctx: DecideContext) -> Decision:
        """Band, bucket, verify and link; the funnel numbers of the ``lsh`` row."""
        confirm = None
        if self._chunks:
            sigs, rows = self.signatures()
            confirm = confirmation(ctx, sigs, rows, self.config.threshold)
        edges = self.link(ctx.union_find.parent_, confirm)
        short_net = self.link_short_chars(ctx, confirm)
        details: dict[str, Any] = {**self.stats(), "short_char_net": short_net}
        if confirm is not None:
            details["docs_confirmed_on_aw_signatures"] = int(np.count_nonzero(confirm.alt_row >= 0))
        return Decision(edges, docs_in=self.num_signed, pairs_in=details["pairs_proposed"],
                        pairs_out=details["pairs_accepted"], details=details)

    def link(self, parent: np.ndarray, confirm: Confirmation | None = None) -> Edges:
        """Band, bucket, verify and union; returns the accepted edges (kind 1).

        ``confirm``: how pairs are confirmed (AW-MinHash's weighted signatures for documents with
        lines to weigh); by default each pair on its MinHash estimate against the threshold.
        """
        if not self._chunks:
            return Edges.empty()
        sigs, rows = self.signatures()
        n = sigs.shape[0]
        c = confirm or Confirmation.plain(sigs, min_equal_slots(self.config.threshold, self.config.num_perm))
        out = Edges.buffer(n, LSH_EDGE_KIND)
        self.deferred_ = c.buffer
        self._walk_bands(c, rows, self.num_bands, self.rows_per_band, parent, out, self.counters_, self.bucketer)
        k = int(self.counters_[2])
        return out.head(k)

    def _walk_bands(self, c: Confirmation, rows: np.ndarray, bands: int, width: int, parent: np.ndarray, out: Edges,
                    counters: np.ndarray, bucketer: Callable[[np.ndarray], list[np.ndarray]] | None = None) -> None:
        """Link the buckets of ``bands`` bands of ``width`` rows of ``c.sigs`` (of documents
        ``rows``): accepted edges into ``out``, deferred pairs into ``c.buffer``."""
        d = c.buffer
        if bucketer is not None:
            keys = np.stack([band_key_column(c.sigs, j, width) for j in range(bands)], axis=1)
            orders = bucketer(keys)
        for j in range(bands):
            if bucketer is not None:
                # Only rows of buckets of two or more, in the order a stable sort gives them:
                # link_band walks the same buckets in the same order.
                col, order = keys[:, j], orders[j]
            else:
                col = band_key_column(c.sigs, j, width)
                order = np.argsort(col, kind="stable")
            d.adopt(link_band(order, col, c.sigs, c.min_equal, c.alt_sigs, c.alt_min_equal, c.alt_row, c.rows_to_defer,
                              c.defer_share, rows, parent, self.config.max_bucket_size, out.a, out.b, out.score, counters,
                              d.a, d.b, d.score, d.counters))

    def link_short_chars(self, ctx: DecideContext, confirm: Confirmation | None,
                         chunk_docs: int = 65_536) -> dict[str, Any]:
        """The character net for short documents (:class:`~semhash_llm.config.MinHashConfig`):
        the documents ``confirm`` defers to the verifier (the word net's confirmation, rows as in
        :meth:`signatures`) re-read, signed on character n-grams, banded; every candidate whose
        estimate reaches ``short_threshold`` goes to the verifier's deferral buffer. Nothing is
        linked here. Returns the funnel numbers (``{"docs": 0}`` when no verifier runs or the
        source cannot be read again)."""
        cfg = self.config
        stats: dict[str, Any] = {"docs": 0}
        if not cfg.short_max_chars or confirm is None or ctx.read_texts is None:
            return stats
        _sigs, rows = self.signatures()
        short = rows[confirm.rows_to_defer]
        if short.size < 2:
            return stats
        short = np.sort(short)
        n = cfg.short_char_ngram
        out = np.empty((short.size, cfg.num_perm), dtype=np.uint32)
        keep = np.zeros(short.size, dtype=np.bool_)
        for s in range(0, short.size, chunk_docs):
            for k, text in enumerate(ctx.read_texts(short[s: s + chunk_docs])):
                if len(text) > cfg.short_max_chars:
                    continue
                h = char_shingle_hashes(text, n)
                if h.size:
                    minhash_into(h, h.size, self.a_, self.b_, out[s + k])
                    keep[s + k] = True
        sigs, docs = np.ascontiguousarray(out[keep]), short[keep]
        stats["docs"] = int(docs.size)
        if docs.size < 2:
            return stats
        # Banded for recall (false negatives weigh 0.9): 32 bands of 4 rows at 0.5 propose a pair at
        # Jaccard 0.55 with probability 0.95; the estimate check then drops what falls short.
        bands, width = optimal_lsh_params(cfg.short_threshold, cfg.num_perm, 0.1, 0.9)
        min_equal = min_equal_slots(cfg.short_threshold, cfg.num_perm)
        # Every row is deferred: these pairs are the verifier's to decide, at the net's own bar.
        c = Confirmation(sigs, min_equal, sigs, min_equal, np.full(docs.size, -1, dtype=np.int64),
                         np.ones(docs.size, dtype=np.bool_), float(cfg.short_threshold), self.deferred_)
        counters = np.zeros(4, dtype=np.int64)
        d = self.deferred_
        before = d.count
        self._walk_bands(c, docs, bands, width, ctx.union_find.parent_, Edges.buffer(0, LSH_EDGE_KIND), counters)
        if int(counters[2]):
            raise RuntimeError("the character net linked a pair on its estimate; every pair of it is the verifier's")
        stats.update({"num_bands": bands, "rows_per_band": width, "pairs_proposed": int(counters[0]),
                      "pairs_compared": int(counters[1]), "pairs_deferred": int(d.count - before)})
        return stats

    def covers(self, ctx: CoverContext) -> StageCover | None:
        """The cover check's question to LSH: does the pair's MinHash Jaccard estimate reach
        ``minhash.threshold``? Not asked for a pair that AW-MinHash confirms (both documents have
        weighted signatures): there the weighted estimate is the one that links. ``None`` when
        nothing was signed."""
        if not self.num_signed:
            return None
        estimate = self.plain_estimates(ctx)
        bar = ctx.config.minhash.threshold

        def answer(q: CoverQuery) -> CoverAnswer:
            at, _, _, same = estimate(q)
            hit = same >= bar - 1e-9
            return CoverAnswer.none(q.docs.size).mark(at[hit], LSH_EDGE_KIND, same[hit])

        return StageCover(answer)

    def plain_estimates(self, ctx: CoverContext
                        ) -> Callable[[CoverQuery], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """For the cover check (LSH's and SPH's answers): of a query's open, estimable pairs of two
        signed documents that AW-MinHash does not confirm, the positions in the query, the two
        signature rows and the MinHash Jaccard estimate."""
        sigs, rows = self.signatures()
        where = np.full(ctx.num_docs, -1, dtype=np.int64)
        where[rows] = np.arange(rows.size, dtype=np.int64)

        def estimate(q: CoverQuery) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
            md, mk = where[q.docs], where[q.keepers]
            both = ((md >= 0) & (mk >= 0) & q.open & q.estimable
                    & ~(ctx.confirmed[q.docs] & ctx.confirmed[q.keepers]))
            at = np.flatnonzero(both)
            rd, rk = md[at], mk[at]
            return at, rd, rk, (sigs[rd] == sigs[rk]).mean(axis=1)

        return estimate

    def signatures(self) -> tuple[np.ndarray, np.ndarray]:
        """All signatures as one matrix and the global document index of each row."""
        sigs = self._gather()
        rows = np.concatenate(self._rows) if len(self._rows) != 1 else self._rows[0]
        self._rows = [rows]
        return sigs, rows

    def _gather(self) -> np.ndarray:
        """One signature matrix from the streamed chunks, freeing each chunk as it is copied."""
        if len(self._chunks) == 1:
            return self._chunks[0]
        total = sum(c.shape[0] for c in self._chunks)
        sigs = np.empty((total, self.config.num_perm), dtype=np.uint32)
        pos = 0
        while self._chunks:
            chunk = self._chunks.pop(0)
            sigs[pos : pos + chunk.shape[0]] = chunk
            pos += chunk.shape[0]
            del chunk
        self._chunks = [sigs]
        return sigs

    def signature_bytes(self) -> int:
        """Memory held by signatures."""
        return sum(c.nbytes for c in self._chunks)

    def stats(self) -> dict[str, int]:
        """Numbers for the report."""
        return {
            "num_perm": self.config.num_perm,
            "num_bands": self.num_bands,
            "rows_per_band": self.rows_per_band,
            "pairs_proposed": int(self.counters_[0]),
            "pairs_compared": int(self.counters_[1]),
            "pairs_accepted": int(self.counters_[2]),
            "pairs_deferred": self.deferred_.count,
            "deferral_buffer_growths": self.deferred_.growths,
            "hot_bucket_star_rounds": int(self.counters_[3]),
            "signature_bytes": self.signature_bytes(),
        }
