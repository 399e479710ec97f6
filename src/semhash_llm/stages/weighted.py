"""Stage ``aw``, attention-weighted MinHash: near duplicates by weighted Jaccard, chrome weighing ~0.

While the input streams, every document of at least ``min_lines`` lines with tokens that reaches
the feature stages (a text of one line has no chrome to discount: plain MinHash decides it, and
every pair it is in) gets its shingles (MinHash's own) weighted by importance × IDF
(:mod:`semhash_llm.aw.weights`) and an ICWS signature of them (:mod:`semhash_llm.sketch.cws`):
two signatures agree in a slot with probability equal to the weighted Jaccard of the two
weighted sets. Importance is per token:

* ``line`` (default) — the line cue: ``1 / (1 + exp(-(tokens on the line - 8) / 2))``; a menu
  entry of two words weighs ~0.05, a sentence ~1;
* ``model`` — the teacher's attention importance distilled into a token table and line cues
  (:class:`~semhash_llm.aw.importance.ImportanceModel`, unscaled so that a line weighs the
  same in every page that holds it), times the line cue; it reproduces the teacher (Spearman
  0.80) but changes no decision on the development benchmark and ranks chrome below article
  words less well than the line cue alone (README), hence not the default;
* ``teacher`` — the transformer's attention (:class:`~semhash_llm.aw.attention.TeacherImportance`)
  times the line cue: tens of documents a second, for small corpora and checks.

IDF (``idf``, off by default): the tokens' document frequencies over the first ``idf_sample``
documents of the input (count-min sketch, :class:`~semhash_llm.sketch.docfreq.DocumentFrequency`,
with the ``wordfreq`` prior when installed), frozen before any signature is made: until then the
sample's tokens and importances wait in memory (about 12 bytes a token), so a document's
weights never depend on its position in the input.

After the stream, **entropy-adaptive banding**: a document whose shingle weights are
concentrated (``exp(H) / k`` ≤ ``focus_share``, :func:`effective_share`: a share of its
shingles weighs ~0, its content stands out of its chrome) enters ``bands_focused`` bands of
``rows_per_band`` slots; the others the first ``bands_diffuse``. Band ``j`` of every document
is the same slots, so two documents meet in the bands both enter — ``min`` of their counts —
and a pair of weighted Jaccard ``s`` becomes a candidate with probability
``1 - (1 - s^r)^min(b_a, b_b)`` (the S-curves in the README).
Candidates are accepted at weighted Jaccard estimate ≥ ``threshold``. With ``confirm`` on,
the ``lsh`` and ``sph`` stages confirm their own candidates on these signatures instead of
the plain MinHash ones, for every pair of two documents that have one.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from semhash_llm.aw.importance import ImportanceModel
from semhash_llm.aw.weights import line_cue, weighted_shingles
from semhash_llm.config import AWConfig, NormalizeConfig
from semhash_llm.sketch.cws import EMPTY_SLOT, cws_signatures
from semhash_llm.sketch.docfreq import DocumentFrequency, WordFrequencyPrior
from semhash_llm.sketch.lsh import Deferred, band_key_column, link_band, min_equal_slots
from semhash_llm.stages.base import DecideContext, Decision, Edges, StreamBatch, deferral
from semhash_llm.stages.near import _mapped_array
from semhash_llm.text.lines import LineBatch, token_lines
from semhash_llm.text.normalize import char_classes, normalize_batch
from semhash_llm.text.tokenize import TokenizedBatch

__all__ = ["AWMinHashStage", "AW_EDGE_KIND", "weight_entropy", "effective_share"]

logger = logging.getLogger(__name__)

AW_EDGE_KIND = 5


def _entropy(offsets: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Shannon entropy (nats, float64) of each document's weights, and its number of weights."""
    n = offsets.size - 1
    counts = np.diff(offsets)
    doc = np.repeat(np.arange(n), counts)
    w = weights.astype(np.float64)
    total = np.bincount(doc, weights=w, minlength=n)
    p = w / np.maximum(total[doc], 1e-300)
    terms = np.where(p > 0, -p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return np.bincount(doc, weights=terms, minlength=n), counts


def effective_share(offsets: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``exp(H) / k`` of each document's ``k`` weights (``H`` their Shannon entropy): the share of its
    shingles that carry its weight — 1 when all weigh the same, ~0.5 when half weigh ~0 (float32)."""
    h, counts = _entropy(offsets, weights)
    return np.where(counts > 0, np.exp(h) / np.maximum(counts, 1), 1.0).astype(np.float32)


def weight_entropy(offsets: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Normalized Shannon entropy of each document's weights (``H / log k``; 0 for k <= 1), float32."""
    h, counts = _entropy(offsets, weights)
    return np.where(counts > 1, h / np.log(np.maximum(counts, 2)), 0.0).astype(np.float32)


def _subset(tokens: TokenizedBatch, docs: np.ndarray) -> TokenizedBatch:
    """The tokens of batch documents ``docs`` as a batch of their own."""
    starts, ends = tokens.tok_offsets[docs], tokens.tok_offsets[docs + 1]
    counts = ends - starts
    offsets = np.zeros(docs.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    take = np.repeat(starts - offsets[:-1], counts) + np.arange(int(offsets[-1]))
    return TokenizedBatch(offsets, tokens.tok_hashes[take], tokens.no_space[docs], tokens.digest_hi[docs],
                          tokens.digest_lo[docs], tokens.ngrams[docs])


class AWMinHashStage:
    """Weighted shingles and ICWS signatures while streaming; entropy-adaptive banding after."""

    name = "aw"
    handoff_fields: tuple[str, ...] = ("deferred_", "counters_")
    """What a later stage reads from this one after it decided (the verifier: its deferred pairs
    and proposal count); a resumed run restores it (:mod:`semhash_llm.checkpoint`)."""
    reads_features_of: tuple[str, ...] = ("mgfn",)
    """The other stages whose streamed features this one's decision reads (the verifier's deferral); a resumed
    run computes a kept stage's features again only while a step still to run reads them."""

    def __init__(self, config: AWConfig, normalize: NormalizeConfig | None = None) -> None:
        self.config = config
        self.normalize = normalize or NormalizeConfig()
        self.classes_ = char_classes(self.normalize.strip_punctuation)
        self.model_: ImportanceModel | None = None
        self.teacher_ = None
        if config.importance == "model":
            self.model_ = ImportanceModel.load(config.importance_model)
        elif config.importance == "teacher":
            from semhash_llm.aw.attention import TeacherImportance

            self.teacher_ = TeacherImportance(normalize_config=self.normalize)
        self.df_: DocumentFrequency | None = None
        self.frozen_ = not config.idf
        if config.idf:
            self.df_ = DocumentFrequency(prior=WordFrequencyPrior.from_wordfreq(normalize_config=self.normalize))
        self._pending: list[tuple[np.ndarray, TokenizedBatch, np.ndarray]] = []
        self._pending_docs = 0
        self._sigs: list[np.ndarray] = []
        self._rows: list[np.ndarray] = []
        self._focus: list[np.ndarray] = []
        self.docs_seen_ = 0
        self._empty: list[np.ndarray] = []
        self._mass: list[np.ndarray] = []  # each document's total shingle weight (containment estimates)
        self.counters_ = np.zeros(4, dtype=np.int64)
        self.deferred_ = Deferred.buffer(0)  # pairs handed to the verifier (filled in decide)
        self.seconds_ = {"importance": 0.0, "signatures": 0.0}

    # ------------------------------------------------------------------ streaming

    def process(self, batch: StreamBatch) -> None:
        """Importance of every token of the batch documents that need features; sign or hold them."""
        docs = batch.feature_docs
        if docs.size == 0:
            return
        t0 = time.perf_counter()
        tokens = _subset(batch.tokens, docs)
        texts = [batch.texts[j] for j in docs.tolist()]
        normalized = ([batch.normalized[j] for j in docs.tolist()] if batch.normalized is not None
                      else normalize_batch(texts, self.normalize))
        lines = token_lines(normalized, self.classes_, tokens.tok_offsets)
        # Only documents of min_lines lines or more: a one-line text has no chrome to weigh, and
        # lsh and sph confirm it (and every pair it is in) on plain MinHash.
        multi = np.diff(lines.line_offsets) >= self.config.min_lines
        self.docs_seen_ += int(docs.size)
        if not multi.any():
            self.seconds_["importance"] += time.perf_counter() - t0
            return
        if not multi.all():
            keep = np.flatnonzero(multi)
            docs = docs[keep]
            tokens = _subset(tokens, keep)
            texts = [texts[j] for j in keep.tolist()]
            normalized = [normalized[j] for j in keep.tolist()]
            lines = token_lines(normalized, self.classes_, tokens.tok_offsets)
        importance = self.importance(texts, tokens, lines)
        self.seconds_["importance"] += time.perf_counter() - t0
        index = batch.index[docs].astype(np.int64)
        if self.frozen_:
            self._sign(index, tokens, importance)
            return
        self._hold(index, tokens, importance)

    def importance(self, texts: list[str], tokens: TokenizedBatch, lines: LineBatch) -> np.ndarray:
        """Per-token importance (float32, unscaled) of one batch of documents."""
        cue = line_cue(tokens, lines, self.config.line_midpoint, self.config.line_scale)
        if self.model_ is not None:
            return cue * self.model_.absolute(tokens, lines)
        if self.teacher_ is not None:
            per_doc = self.teacher_.word_importance(texts)
            teacher = np.concatenate(per_doc).astype(np.float32) if per_doc else np.empty(0, np.float32)
            if teacher.shape != cue.shape:
                raise RuntimeError("aw: the teacher's words and the tokenizer's tokens disagree in number")
            return cue * teacher
        return cue

    def _hold(self, index: np.ndarray, tokens: TokenizedBatch, importance: np.ndarray) -> None:
        """Count the sample's document frequencies; freeze them once ``idf_sample`` documents are in."""
        assert self.df_ is not None
        room = self.config.idf_sample - self._pending_docs
        take = min(room, index.size)
        self.df_.add(tokens.tok_offsets[: take + 1], tokens.tok_hashes)
        self._pending.append((index, tokens, importance))
        self._pending_docs += index.size
        if self._pending_docs >= self.config.idf_sample:
            self._freeze()

    def _freeze(self) -> None:
        self.frozen_ = True
        pending, self._pending = self._pending, []
        for index, tokens, importance in pending:
            self._sign(index, tokens, importance)

    def _sign(self, index: np.ndarray, tokens: TokenizedBatch, importance: np.ndarray) -> None:
        t0 = time.perf_counter()
        tok_idf = self.df_.idf(tokens.tok_hashes) if self.df_ is not None else None
        offsets, features, weights = weighted_shingles(tokens, importance, tok_idf)
        full = cws_signatures(offsets, features, weights, num_perm=self.config.num_perm, seed=self.config.seed)
        # Kept as 32-bit slots (512 bytes a document at 128 slots, as MinHash): two different samples
        # then agree with probability 2^-32 instead of 2^-63, far below the estimate's own error.
        # A set without weight keeps its all-ones row, which the banding skips. Each chunk has its
        # own memory map, so that gathering them frees each at once (as MinHash's do).
        self._empty.append(full[:, 0] == EMPTY_SLOT)
        folded = _mapped_array(full.shape, np.uint32)
        np.bitwise_xor(full, full >> np.uint64(32), out=full)
        folded[:] = full
        self._sigs.append(folded)
        self._focus.append(effective_share(offsets, weights))
        per_doc = np.diff(offsets)
        self._mass.append(np.bincount(np.repeat(np.arange(per_doc.size), per_doc), weights=weights,
                                      minlength=per_doc.size))
        self._rows.append(index)
        self.seconds_["signatures"] += time.perf_counter() - t0

    # ------------------------------------------------------------------ after the stream

    def signatures(self) -> tuple[np.ndarray, np.ndarray]:
        """All ICWS signatures (folded to 32-bit slots) as one matrix and the global document index of each row."""
        if not self.frozen_:
            self._freeze()
        if not self._sigs:
            return np.empty((0, self.config.num_perm), np.uint32), np.empty(0, np.int64)
        if len(self._sigs) > 1:
            total = sum(c.shape[0] for c in self._sigs)
            sigs = np.empty((total, self.config.num_perm), dtype=np.uint32)
            pos = 0
            while self._sigs:  # chunk by chunk: the peak is the matrix plus one chunk
                chunk = self._sigs.pop(0)
                sigs[pos : pos + chunk.shape[0]] = chunk
                pos += chunk.shape[0]
                del chunk
            self._sigs = [sigs]
            self._rows = [np.concatenate(self._rows)]
            self._focus = [np.concatenate(self._focus)]
            self._mass = [np.concatenate(self._mass)]
        if len(self._empty) > 1:
            self._empty = [np.concatenate(self._empty)]
        return self._sigs[0], self._rows[0]

    def masses(self) -> np.ndarray:
        """Each signature row's total shingle weight (rows as :meth:`signatures`), for containment
        estimates: with weighted Jaccard ``J``, ``sum(min) = J (m_a + m_b) / (1 + J)``."""
        self.signatures()
        return self._mass[0] if self._mass else np.empty(0, np.float64)

    def confirmation(self, rows: np.ndarray, threshold: float) -> tuple[np.ndarray, int, np.ndarray] | None:
        """What another stage confirms its pairs on: these signatures, the slots that must agree
        for ``threshold``, and for each of its ``rows`` (global document indices) the row of its
        weighted signature here, ``-1`` for a document without one (fewer than ``min_lines``
        lines); ``None`` when ``confirm`` is off."""
        if not self.config.confirm:
            return None
        sigs, mine = self.signatures()
        rows = np.asarray(rows, dtype=np.int64)
        size = int(max(rows.max(initial=-1), mine.max(initial=-1))) + 1
        where = np.full(size, -1, dtype=np.int64)
        where[mine] = np.arange(mine.size, dtype=np.int64)
        return sigs, min_equal_slots(threshold, self.config.num_perm), where[rows]

    def decide(self, ctx: DecideContext) -> Decision:
        """Entropy-adaptive banding; every candidate confirmed by its weighted Jaccard estimate."""
        sigs, rows = self.signatures()
        cfg = self.config
        n = sigs.shape[0]
        if n == 0:
            return Decision(Edges.empty(), docs_in=self.docs_seen_, details=self.stats(np.empty(0, np.int64)))
        share = self._focus[0]
        bands = np.where(share <= cfg.focus_share, cfg.bands_focused, cfg.bands_diffuse)
        bands[self._empty[0]] = 0  # no weighted shingle: nothing to band
        min_equal = min_equal_slots(cfg.threshold, cfg.num_perm)
        out = Edges.buffer(n, AW_EDGE_KIND)
        no_alt = np.full(n, -1, dtype=np.int64)
        parent = ctx.union_find.parent_
        defer = deferral(ctx, rows)
        d = self.deferred_ = defer.buffer
        for j in range(cfg.bands_focused):
            members = np.flatnonzero(bands > j)
            if members.size < 2:
                break
            col = band_key_column(sigs, j, cfg.rows_per_band)
            order = members[np.argsort(col[members], kind="stable")]
            d.adopt(link_band(order, col, sigs, min_equal, sigs, min_equal, no_alt, defer.row, defer.share, rows, parent,
                      cfg.max_bucket_size, out.a, out.b, out.score, self.counters_, d.a, d.b, d.score,
                              d.counters))
        edges = out.head(int(self.counters_[2]))
        details = self.stats(bands)
        return Decision(edges, docs_in=self.docs_seen_, pairs_in=int(self.counters_[0]), pairs_out=len(edges),
                        details=details)

    def stats(self, bands: np.ndarray) -> dict[str, float | int | str]:
        """Numbers for the report."""
        cfg = self.config
        return {
            "importance": cfg.importance,
            "idf": cfg.idf,
            "idf_sample_docs": int(self.df_.num_docs) if self.df_ is not None else 0,
            "num_perm": cfg.num_perm,
            "rows_per_band": cfg.rows_per_band,
            "docs_seen": self.docs_seen_,
            "docs_signed": int(sum(s.shape[0] for s in self._sigs)),
            "docs_banded": int(np.count_nonzero(bands)),
            "docs_focused": int(np.count_nonzero(bands == cfg.bands_focused)) if cfg.bands_focused != cfg.bands_diffuse
            else 0,
            "bands_focused": cfg.bands_focused,
            "bands_diffuse": cfg.bands_diffuse,
            "threshold": cfg.threshold,
            "pairs_proposed": int(self.counters_[0]),
            "pairs_compared": int(self.counters_[1]),
            "pairs_accepted": int(self.counters_[2]),
            "pairs_deferred": self.deferred_.count,
            "importance_seconds": round(self.seconds_["importance"], 3),
            "signature_seconds": round(self.seconds_["signatures"], 3),
            "signature_bytes": int(sum(s.nbytes for s in self._sigs)),
        }
