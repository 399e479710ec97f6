"""Stage ``aw`` (config ``aw``; paper B, Attention-Weighted MinHash): near duplicates by weighted Jaccard, chrome weighing ~0.

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

**Line document frequency** (``template_df``, 3 by default; 0 turns it off). The line cue
weighs a site's long-line chrome — lists of headlines of 8-15 words that read like prose —
fully, so two different articles of one site can share half their weighted shingles. Chrome
recurs verbatim across the site's pages, so while streaming every *long* line (at least
``line_midpoint`` tokens; shorter ones weigh little anyway) of every weighted document is
counted once per document (its token-sequence hash, :class:`~semhash_llm.text.lines.LineBatch`)
in a count-min sketch (:class:`~semhash_llm.sketch.docfreq.DocumentFrequency`, ``4 × 2**line_df_bits``
counters of 4 bytes: 16 MiB at the default 20 bits, whatever the corpus; a count is never
under-estimated, and the report's ``line_df_load`` — line counts per sketch column — says when
over-estimates start to matter: past ~1, raise ``line_df_bits``). Each document also keeps a
priority sample (Duffield, Lund & Thorup) of ``LINE_SAMPLE`` = 32 of its long lines, drawn by
weight with the line's own hash as the random draw (the same line is drawn alike in every
document): each line's hash (8 bytes) and estimated share of the document's total shingle
weight (float16, 2 bytes), 320 bytes a document, plus 1 byte for its n-gram size. Nothing of it
is read before the stream ends, so a document's weights never depend on its position.

In ``decide`` (and for the ``lsh`` and ``sph`` confirmations, which come first), with the
line counts complete: a document's *base* is the count of its rarest sampled line — the number
of copies of its own text — and a line is *recurring* for it at ``base + template_df - 1``
documents or more (three copies of one article make their lines no chrome; the site's
headlines, in every page, are). A document with at least ``template_share`` of its weight
estimated on recurring lines is *templated*. A pair with a templated document is never linked
on a signature estimate: the ``lsh`` and ``sph`` confirmations see a signature row of its own
that agrees with nothing (one extra row of 512 bytes per templated document, appended to the
signature matrix when it is gathered), and the banding here defers the pairs whose estimate
reaches ``threshold`` (``link_band``'s deferral, in one buffer with the verifier's pairs of
short documents, which go to the verifier exactly as before). Each such pair is then re-read
(``DecideContext.read_texts``), its recurring lines (for the pair: the larger of its two bases)
dropped from both texts — every shingle that touches one — and the exact weighted Jaccard of
the AW weights that are left decides, at ``threshold``; the pair's edge carries that score.
Where the source cannot be re-read the pair is linked on its estimate, as before, and counted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import numpy as np

from semhash_llm.aw.importance import ImportanceModel
from semhash_llm.aw.weights import line_cue, line_weights, shingle_span_max, weighted_shingles
from semhash_llm.config import AWConfig, NormalizeConfig, ShingleConfig
from semhash_llm.pipeline.capabilities import Capabilities
from semhash_llm.pipeline.edges import EdgeKind
from semhash_llm.sketch.cws import EMPTY_SLOT, cws_signatures, weighted_jaccard
from semhash_llm.sketch.docfreq import DocumentFrequency, WordFrequencyPrior
from semhash_llm.sketch.lsh import Deferred, band_key_column, link_band, min_equal_slots
from semhash_llm.stages.base import (
    CoverAnswer,
    CoverContext,
    CoverQuery,
    DecideContext,
    Decision,
    Edges,
    StageCover,
    StreamBatch,
    deferral,
    read_pair_texts,
)
from semhash_llm.stages.lsh import _mapped_array
from semhash_llm.text.lines import LineBatch, token_lines
from semhash_llm.text.normalize import char_classes, normalize_batch
from semhash_llm.text.tokenize import TokenizedBatch, tokenize_batch

__all__ = ["AWMinHashStage", "AW_EDGE_KIND", "LINE_SAMPLE", "weight_entropy", "effective_share", "line_sample",
           "weighted_containment"]

logger = logging.getLogger(__name__)

AW_EDGE_KIND = EdgeKind.AW
LINE_SAMPLE = 32
"""Long lines each document keeps (a priority sample by weight) to tell whether it is templated."""
_RECHECK_CHUNK = 2048  # pairs re-read at a time
_U64 = np.uint64
_PRIORITY_SALT = _U64(0x5851F42D4C957F2D)
_POISON_SALT = _U64(0x2545F4914F6CDD1D)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer over a ``uint64`` array (wrapping arithmetic)."""
    x = np.asarray(x, dtype=np.uint64).copy()
    with np.errstate(over="ignore"):
        x ^= x >> _U64(30)
        x *= _U64(0xBF58476D1CE4E5B9)
        x ^= x >> _U64(27)
        x *= _U64(0x94D049BB133111EB)
        x ^= x >> _U64(31)
    return x


def line_sample(lines: LineBatch, weights: np.ndarray, mass: np.ndarray, min_tokens: float,
                k: int = LINE_SAMPLE) -> tuple[np.ndarray, np.ndarray]:
    """A priority sample of ``k`` long lines (at least ``min_tokens`` tokens) of each document of
    the batch: ``(hashes (n, k) uint64, shares (n, k) float16)``, a share 0 for an empty slot.

    ``weights``: each line's weight (:func:`~semhash_llm.aw.weights.line_weights`); ``mass``: each
    document's total shingle weight. A line held twice counts once, with both weights. Line ``i``
    gets priority ``w_i / u_i`` with ``u_i`` in (0, 1] from its hash; the ``k`` of highest priority
    are kept, each with share ``max(w_i, tau) / mass`` (``tau``: the ``k + 1``-th priority, 0 when
    there are no more lines), so that the shares of any subset of the lines are estimated without
    bias (a document of ``k`` long lines or fewer keeps them all, exactly).
    """
    n = lines.line_offsets.size - 1
    hashes = np.zeros((n, k), dtype=np.uint64)
    shares = np.zeros((n, k), dtype=np.float16)
    doc = np.repeat(np.arange(n, dtype=np.int64), np.diff(lines.line_offsets))
    pick = np.flatnonzero((lines.tokens >= min_tokens) & (weights > 0))
    if pick.size == 0:
        return hashes, shares
    d, h, w = doc[pick], lines.hash[pick], np.asarray(weights, dtype=np.float64)[pick]
    order = np.lexsort((h, d))
    d, h, w = d[order], h[order], w[order]
    starts = np.flatnonzero(np.r_[True, (d[1:] != d[:-1]) | (h[1:] != h[:-1])])
    d, h, w = d[starts], h[starts], np.add.reduceat(w, starts)
    u = ((_mix(h ^ _PRIORITY_SALT) >> _U64(11)).astype(np.float64) + 1.0) / float(1 << 53)
    q = w / u
    order = np.lexsort((h, -q, d))
    d, h, w, q = d[order], h[order], w[order], q[order]
    first = np.searchsorted(d, np.arange(n + 1))
    rank = np.arange(d.size) - first[d]
    tau = np.zeros(n, dtype=np.float64)
    nxt = rank == k
    tau[d[nxt]] = q[nxt]
    keep = rank < k
    dk, rk = d[keep], rank[keep]
    est = np.maximum(w[keep], tau[dk]) / np.maximum(np.asarray(mass, dtype=np.float64)[dk], 1e-300)
    hashes[dk, rk] = h[keep]
    shares[dk, rk] = np.clip(est, 2.0**-24, 1.0).astype(np.float16)  # never 0: 0 marks an empty slot
    return hashes, shares


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


def _weighted_held(fa: np.ndarray, wa: np.ndarray, fb: np.ndarray, wb: np.ndarray) -> float:
    """``sum(min(a_i, b_i)) / sum(a_i)``: the share of ``a``'s weight that ``b`` holds (repeated
    features summed, as :func:`weighted_jaccard` does); 0 for an ``a`` without weight."""
    ka, ia = np.unique(fa[wa > 0], return_inverse=True)
    va = np.bincount(ia, weights=wa[wa > 0], minlength=ka.size)
    kb, ib = np.unique(fb[wb > 0], return_inverse=True)
    vb = np.bincount(ib, weights=wb[wb > 0], minlength=kb.size)
    total = float(va.sum())
    if total <= 0:
        return 0.0
    common, xa, xb = np.intersect1d(ka, kb, assume_unique=True, return_indices=True)
    return float(np.minimum(va[xa], vb[xb]).sum()) / total


class AWMinHashStage:
    """Weighted shingles and ICWS signatures while streaming; entropy-adaptive banding after."""

    name = "aw"
    capabilities = Capabilities(reads_features_of=("mgfn",), handoff_fields=("deferred_", "counters_"),
                                cover_rank=10, defers_pairs=True, offers_confirmation=True)
    """Its deferred pairs and proposal count go to the verifier; LSH and SPH confirm on its weighted
    signatures; the cover check asks it first (its weighted estimate, its containment bound)."""

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
        self.line_df_: DocumentFrequency | None = None  # long lines' document frequencies (templates)
        if config.template_df:
            self.line_df_ = DocumentFrequency(width_bits=config.line_df_bits, depth=4)
        self.line_adds_ = 0  # (document, distinct long line) counts added to line_df_
        self._pending: list[tuple[np.ndarray, TokenizedBatch, np.ndarray, LineBatch]] = []
        self._pending_docs = 0
        self._sigs: list[np.ndarray] = []
        self._rows: list[np.ndarray] = []
        self._focus: list[np.ndarray] = []
        self.docs_seen_ = 0
        self._empty: list[np.ndarray] = []
        self._mass: list[np.ndarray] = []  # each document's total shingle weight (containment estimates)
        self._line_hash: list[np.ndarray] = []  # (docs, LINE_SAMPLE) sampled long lines' hashes
        self._line_share: list[np.ndarray] = []  # (docs, LINE_SAMPLE) their estimated weight shares
        self._ngrams: list[np.ndarray] = []  # each document's shingle size, to weigh it again in a re-check
        self._matrix: np.ndarray | None = None  # the signatures, then one never-matching row per templated one
        self._templated: np.ndarray | None = None
        self._base: np.ndarray | None = None
        self._gathered = True
        self.counters_ = np.zeros(4, dtype=np.int64)
        self.deferred_ = Deferred.buffer(0)  # pairs handed to the verifier (filled in decide)
        self.template_counts_ = {"rechecked": 0, "accepted": 0, "rejected": 0, "below_threshold": 0,
                                 "already_linked": 0, "unreadable": 0, "no_content_left": 0}
        self.seconds_ = {"importance": 0.0, "signatures": 0.0, "template_recheck": 0.0}

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
        self._count_lines(lines)
        self.seconds_["importance"] += time.perf_counter() - t0
        index = batch.index[docs].astype(np.int64)
        if self.frozen_:
            self._sign(index, tokens, importance, lines)
            return
        self._hold(index, tokens, importance, lines)

    def _count_lines(self, lines: LineBatch) -> None:
        """Count every long line of every document once in the line document frequencies."""
        if self.line_df_ is None:
            return
        n = lines.line_offsets.size - 1
        doc = np.repeat(np.arange(n, dtype=np.int64), np.diff(lines.line_offsets))
        long = lines.tokens >= self.config.line_midpoint
        per_doc = np.bincount(doc[long], minlength=n)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(per_doc, out=offsets[1:])
        hashes = lines.hash[long]
        self.line_df_.add(offsets, hashes)
        d, h = doc[long], hashes  # distinct (document, line) pairs: the sketch's load
        order = np.lexsort((h, d))
        d, h = d[order], h[order]
        self.line_adds_ += int(np.count_nonzero(np.r_[True, (d[1:] != d[:-1]) | (h[1:] != h[:-1])])) if d.size else 0

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

    def _hold(self, index: np.ndarray, tokens: TokenizedBatch, importance: np.ndarray, lines: LineBatch) -> None:
        """Count the sample's document frequencies; freeze them once ``idf_sample`` documents are in."""
        assert self.df_ is not None
        room = self.config.idf_sample - self._pending_docs
        take = min(room, index.size)
        self.df_.add(tokens.tok_offsets[: take + 1], tokens.tok_hashes)
        self._pending.append((index, tokens, importance, lines))
        self._pending_docs += index.size
        if self._pending_docs >= self.config.idf_sample:
            self._freeze()

    def _freeze(self) -> None:
        self.frozen_ = True
        pending, self._pending = self._pending, []
        for index, tokens, importance, lines in pending:
            self._sign(index, tokens, importance, lines)

    def _sign(self, index: np.ndarray, tokens: TokenizedBatch, importance: np.ndarray, lines: LineBatch) -> None:
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
        mass = np.bincount(np.repeat(np.arange(per_doc.size), per_doc), weights=weights, minlength=per_doc.size)
        self._mass.append(mass)
        self._rows.append(index)
        if self.line_df_ is not None:
            h, sh = line_sample(lines, line_weights(tokens, lines, offsets, weights), mass, self.config.line_midpoint)
            self._line_hash.append(h)
            self._line_share.append(sh)
            self._ngrams.append(tokens.ngrams.astype(np.uint8))
        self._gathered = False
        self.seconds_["signatures"] += time.perf_counter() - t0

    # ------------------------------------------------------------------ after the stream

    def signatures(self) -> tuple[np.ndarray, np.ndarray]:
        """All ICWS signatures (folded to 32-bit slots) as one matrix and the global document index of each row."""
        self._gather()
        if not self._sigs:
            return np.empty((0, self.config.num_perm), np.uint32), np.empty(0, np.int64)
        return self._sigs[0], self._rows[0]

    def _gather(self) -> None:
        """Everything kept per document into one array each, once the stream is over; the templated
        documents found (the line counts are complete) and a never-matching signature row appended
        for each, for the other stages' confirmations."""
        if not self.frozen_:
            self._freeze()
        if self._gathered:
            return
        self._gathered = True
        if len(self._rows) > 1:
            self._rows = [np.concatenate(self._rows)]
            self._focus = [np.concatenate(self._focus)]
            self._mass = [np.concatenate(self._mass)]
        if len(self._empty) > 1:
            self._empty = [np.concatenate(self._empty)]
        if len(self._line_hash) > 1:
            self._line_hash = [np.concatenate(self._line_hash)]
            self._line_share = [np.concatenate(self._line_share)]
            self._ngrams = [np.concatenate(self._ngrams)]
        self._find_templated()
        assert self._templated is not None
        marked = np.flatnonzero(self._templated)
        n = sum(c.shape[0] for c in self._sigs)
        if len(self._sigs) == 1 and marked.size == 0:
            self._matrix = self._sigs[0]
            return
        sigs = _mapped_array((n + marked.size, self.config.num_perm), np.uint32)
        pos = 0
        while self._sigs:  # chunk by chunk: the peak is the matrix plus one chunk
            chunk = self._sigs.pop(0)
            sigs[pos : pos + chunk.shape[0]] = chunk
            pos += chunk.shape[0]
            del chunk
        if marked.size:
            # A row of its own per templated document: 32-bit values from its global index, so that it
            # agrees with another row in a slot with probability 2^-32 — never in the slots a link needs.
            slot = np.arange(self.config.num_perm, dtype=np.uint64)
            doc = self._rows[0][marked].astype(np.uint64)
            with np.errstate(over="ignore"):
                keys = (doc[:, None] * _U64(self.config.num_perm) + slot[None, :]) ^ _POISON_SALT
            sigs[n:] = (_mix(keys) >> _U64(32)).astype(np.uint32)
        self._matrix = sigs
        self._sigs = [sigs[:n]]

    def line_samples(self) -> tuple[np.ndarray, np.ndarray]:
        """Each signature row's sampled long lines (rows as :meth:`signatures`): hashes (n, ``LINE_SAMPLE``)
        and estimated shares of the document's weight (float16, 0 for an empty slot)."""
        self._gather()
        if not self._line_hash:
            n = int(sum(r.size for r in self._rows))
            return np.zeros((n, LINE_SAMPLE), np.uint64), np.zeros((n, LINE_SAMPLE), np.float16)
        return self._line_hash[0], self._line_share[0]

    def _find_templated(self) -> None:
        """Each row's base (the line count of its rarest sampled line) and whether it is templated."""
        n = int(sum(r.size for r in self._rows))
        self._templated = np.zeros(n, dtype=np.bool_)
        self._base = np.ones(n, dtype=np.int64)
        if self.line_df_ is None or not self._line_hash or n == 0:
            return
        hashes, shares = self._line_hash[0], self._line_share[0]
        valid = shares > 0
        df = np.zeros(hashes.shape, dtype=np.int64)
        df[valid] = self.line_df_.df(hashes[valid])
        big = np.iinfo(np.int64).max
        base = np.where(valid.any(axis=1), np.where(valid, df, big).min(axis=1), 1)
        recurring = valid & (df >= (base + self.config.template_df - 1)[:, None])
        share = np.where(recurring, shares.astype(np.float64), 0.0).sum(axis=1)
        self._base = base.astype(np.int64)
        self._templated = share >= self.config.template_share

    def templated(self) -> np.ndarray:
        """Whether each signature row's document is templated (rows as :meth:`signatures`)."""
        self._gather()
        if self._templated is None:  # nothing was signed
            self._find_templated()
        assert self._templated is not None
        return self._templated

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
        marked = np.flatnonzero(self.templated())
        if marked.size:
            # A templated document confirms nothing on its estimate: its row agrees with no other. Its
            # pairs are left to this stage's banding and re-check (lsh and sph decide first).
            where[mine[marked]] = mine.size + np.arange(marked.size, dtype=np.int64)
        matrix = self._matrix if self._matrix is not None else sigs
        return matrix, min_equal_slots(threshold, self.config.num_perm), where[rows]

    def decide(self, ctx: DecideContext) -> Decision:
        """Entropy-adaptive banding; every candidate confirmed by its weighted Jaccard estimate, a
        pair with a templated document re-checked on its texts without their recurring lines."""
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
        templated = self.templated()
        check = bool(templated.any())
        if self.line_df_ is not None and self.line_adds_ > (1 << cfg.line_df_bits):
            logger.warning("aw: %d long lines counted in a line-frequency sketch of %d columns: counts of rare lines "
                           "run high and more documents look templated (re-read); raise aw.line_df_bits (now %d)",
                           self.line_adds_, 1 << cfg.line_df_bits, cfg.line_df_bits)
        if check:
            # One deferral buffer for both: the verifier's pairs (a short document) and the pairs with a
            # templated document whose estimate reaches the threshold; split after the bands.
            defer_row = defer.row | templated
            defer_share = min(defer.share, cfg.threshold)
            d = Deferred.buffer(max(defer.buffer.capacity, 64))
        else:
            defer_row, defer_share = defer.row, defer.share
            d = self.deferred_ = defer.buffer
        for j in range(cfg.bands_focused):
            members = np.flatnonzero(bands > j)
            if members.size < 2:
                break
            col = band_key_column(sigs, j, cfg.rows_per_band)
            order = members[np.argsort(col[members], kind="stable")]
            d.adopt(link_band(order, col, sigs, min_equal, sigs, min_equal, no_alt, defer_row, defer_share, rows,
                              parent, cfg.max_bucket_size, out.a, out.b, out.score, self.counters_, d.a, d.b, d.score,
                              d.counters))
        edges = out.head(int(self.counters_[2]))
        if check:
            recheck = self._split_deferred(d, defer.row, defer.share, defer.buffer, rows)
            edges = Edges.concat([edges, self._recheck(ctx, *recheck)])
        details = self.stats(bands)
        return Decision(edges, docs_in=self.docs_seen_, pairs_in=int(self.counters_[0]), pairs_out=len(edges),
                        details=details)

    def _split_deferred(self, combined: Deferred, short_row: np.ndarray, short_share: float, verifier: Deferred,
                        rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The verifier's pairs (a short document, estimate at least its share) into ``verifier`` —
        sized and grown as the banding would have grown it — as :attr:`deferred_`; the others, with a
        templated document and an estimate reaching the threshold, returned for the re-check."""
        a, b, score = combined.pairs()
        where = np.full(int(rows.max()) + 1, -1, dtype=np.int64)
        where[rows] = np.arange(rows.size, dtype=np.int64)
        same = np.rint(score.astype(np.float64) * self.config.num_perm)
        short = short_row[where[a]] | short_row[where[b]]
        to_verifier = short & (same >= short_share * self.config.num_perm - 1e-9)
        k = int(np.count_nonzero(to_verifier))
        size, growths = verifier.capacity, 0
        while size < k:
            size, growths = max(2 * size, 64), growths + 1
        buf = Deferred.buffer(size)
        buf.a[:k], buf.b[:k], buf.score[:k] = a[to_verifier], b[to_verifier], score[to_verifier]
        buf.counters[:] = (k, growths)
        self.deferred_ = buf
        mine = ~short
        above = mine & (same >= min_equal_slots(self.config.threshold, self.config.num_perm))
        self.template_counts_["below_threshold"] += int(np.count_nonzero(mine & ~above))
        return a[above], b[above], score[above]

    def _recheck(self, ctx: DecideContext, a: np.ndarray, b: np.ndarray, estimate: np.ndarray) -> Edges:
        """Link the pairs (global indices) whose exact weighted Jaccard without their recurring lines
        reaches the threshold; each pair once, in order of its documents."""
        t0 = time.perf_counter()
        counts = self.template_counts_
        n = max(int(max(a.max(initial=-1), b.max(initial=-1))) + 1, 1)
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        keys, first = np.unique(lo * n + hi, return_index=True)
        lo, hi, estimate = keys // n, keys % n, estimate[first]
        uf = ctx.union_find
        ea: list[int] = []
        eb: list[int] = []
        es: list[float] = []
        if ctx.read_texts is None:
            # The source cannot be read again: decide on the estimate, as without the check.
            for x, y, e in zip(lo.tolist(), hi.tolist(), estimate.tolist()):
                counts["unreadable"] += 1
                if uf.union(x, y):
                    ea.append(x)
                    eb.append(y)
                    es.append(e)
            if lo.size:
                logger.warning("aw: %d pair(s) with a templated document decided on their estimate: the source "
                               "cannot be re-read to drop the recurring lines", lo.size)
        else:
            _, rows = self.signatures()
            where = np.full(int(rows.max()) + 1, -1, dtype=np.int64)
            where[rows] = np.arange(rows.size, dtype=np.int64)
            assert self._base is not None
            for c in range(0, lo.size, _RECHECK_CHUNK):
                x, y = lo[c : c + _RECHECK_CHUNK], hi[c : c + _RECHECK_CHUNK]
                open_pair = np.array([uf.find(i) != uf.find(j) for i, j in zip(x.tolist(), y.tolist())], np.bool_)
                counts["already_linked"] += int(np.count_nonzero(~open_pair))
                x, y = x[open_pair], y[open_pair]
                if x.size == 0:
                    continue
                jac, _held, empty = self.template_scores(x, y, ctx.read_texts, where)
                for gi, gj, score, nothing in zip(x.tolist(), y.tolist(), jac.tolist(), empty.tolist()):
                    if uf.find(gi) == uf.find(gj):
                        counts["already_linked"] += 1
                        continue
                    counts["no_content_left"] += int(nothing)
                    counts["rechecked"] += 1
                    if score >= self.config.threshold - 1e-9:
                        counts["accepted"] += 1
                        if uf.union(gi, gj):
                            ea.append(gi)
                            eb.append(gj)
                            es.append(score)
                    else:
                        counts["rejected"] += 1
        self.seconds_["template_recheck"] += time.perf_counter() - t0
        return Edges(np.asarray(ea, np.int64), np.asarray(eb, np.int64), np.asarray(es, np.float32),
                     np.full(len(ea), AW_EDGE_KIND, np.uint8))

    def template_scores(self, a: np.ndarray, b: np.ndarray, read_texts: Callable[[np.ndarray], list[str]],
                        where: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each pair (global indices, both signed here), on the re-read texts without the lines
        that recur across the run (beyond the pair's own copies): the exact weighted Jaccard, the
        share of ``a``'s weight that ``b`` holds (weighted containment), and whether nothing but
        recurring lines was left (then the whole texts are compared). What the re-check of a
        templated pair decides on; the cover check asks the same."""
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        jac = np.zeros(a.size, np.float64)
        held = np.zeros(a.size, np.float64)
        empty = np.zeros(a.size, np.bool_)
        if a.size == 0:
            return jac, held, empty
        if where is None:
            _, rows = self.signatures()
            where = np.full(int(rows.max()) + 1, -1, dtype=np.int64)
            where[rows] = np.arange(rows.size, dtype=np.int64)
        if self._base is None:
            raise RuntimeError("aw: template_scores needs the line counts of a finished stream")
        texts, ix, iy = read_pair_texts(read_texts, a, b)
        docs = np.unique(np.concatenate([a, b]))
        offsets, features, weights, span_df = self._weigh_again(texts, where[docs])
        base = self._base[where[docs]]
        for k, (i, j) in enumerate(zip(ix.tolist(), iy.tolist())):
            limit = max(int(base[i]), int(base[j])) + self.config.template_df - 1
            si, sj = slice(offsets[i], offsets[i + 1]), slice(offsets[j], offsets[j + 1])
            ki, kj = span_df[si] < limit, span_df[sj] < limit
            fi, wi, fj, wj = features[si][ki], weights[si][ki], features[sj][kj], weights[sj][kj]
            if not (wi > 0).any() and not (wj > 0).any():
                empty[k] = True
                fi, wi, fj, wj = features[si], weights[si], features[sj], weights[sj]
            jac[k] = weighted_jaccard(fi, wi, fj, wj)
            held[k] = _weighted_held(fi, wi, fj, wj)
        return jac, held, empty

    def covers(self, ctx: CoverContext) -> StageCover:
        """The cover check's question to AW-MinHash: does the keeper hold the document by this
        stage's own bar? Their weighted Jaccard estimate reaches ``aw.threshold`` (or the LSH bar,
        when LSH runs and confirms on these signatures), or — with ``select.cover_containment``
        below 1 — :func:`weighted_containment` of the document in the keeper reaches it. A
        templated page is never covered on its estimate (the chrome rule): only on what the
        re-check reads, the re-read texts without their recurring lines (:meth:`template_scores`)."""
        cfg = ctx.config
        n = ctx.num_docs
        sigs, rows = self.signatures()
        where = np.full(n, -1, dtype=np.int64)
        where[rows] = np.arange(rows.size, dtype=np.int64)
        mass = self.masses() if cfg.select.cover_containment < 1.0 else None
        templated = np.zeros(n, dtype=np.bool_)
        templated[rows[self.templated()]] = True
        floor = cfg.aw.threshold
        if "lsh" in ctx.stages and cfg.aw.confirm:
            floor = min(floor, cfg.minhash.threshold)
        said: dict[int, tuple[float, float]] = {}  # templated pairs: (Jaccard, containment) re-read once

        def answer(q: CoverQuery) -> CoverAnswer:
            out = CoverAnswer.none(q.docs.size)
            wd, wk = where[q.docs], where[q.keepers]
            both = (wd >= 0) & (wk >= 0) & q.open & q.estimable
            if not both.any():
                return out
            at = np.flatnonzero(both)
            same = (sigs[wd[both]] == sigs[wk[both]]).mean(axis=1)
            chrome = templated[q.docs[both]] | templated[q.keepers[both]]
            hit = (same >= floor - 1e-9) & ~chrome
            if mass is not None:
                held = weighted_containment(same, mass[wd[both]], mass[wk[both]], sigs.shape[1])
                hit |= (held >= cfg.select.cover_containment) & ~chrome
            score = same.astype(np.float64)
            if chrome.any() and ctx.read_texts is not None:
                ask = np.flatnonzero(chrome)
                keys = q.keys[at[ask]]
                new = np.unique(keys[np.array([k not in said for k in keys.tolist()], dtype=np.bool_)])
                if new.size:
                    jac, held_t, _ = self.template_scores(new // n, new % n, ctx.read_texts)
                    said.update(zip(new.tolist(), zip(jac.tolist(), held_t.tolist())))
                for j, key in zip(ask.tolist(), keys.tolist()):
                    jac_k, held_k = said[key]
                    if jac_k >= cfg.aw.threshold - 1e-9 or held_k >= cfg.select.cover_containment:
                        hit[j] = True
                        score[j] = jac_k
            return out.mark(at[hit], AW_EDGE_KIND, score[hit])

        return StageCover(answer)

    def _weigh_again(self, texts: list[str], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The weighted shingles of re-read texts (signature ``rows``), weighed as when they streamed,
        and for each shingle the largest line count of the long lines it touches (0: none)."""
        normalized = normalize_batch(texts, self.normalize)
        tb = tokenize_batch(normalized, self.classes_, ShingleConfig())
        # The shingle size each document streamed with (the run's ShingleConfig is not this stage's).
        tokens = TokenizedBatch(tb.tok_offsets, tb.tok_hashes, tb.no_space, tb.digest_hi, tb.digest_lo,
                                self._ngrams[0][rows].astype(tb.ngrams.dtype))
        lines = token_lines(normalized, self.classes_, tokens.tok_offsets)
        importance = self.importance(texts, tokens, lines)
        tok_idf = self.df_.idf(tokens.tok_hashes) if self.df_ is not None else None
        offsets, features, weights = weighted_shingles(tokens, importance, tok_idf)
        assert self.line_df_ is not None
        line_df = np.zeros(lines.tokens.size, dtype=np.int64)
        long = lines.tokens >= self.config.line_midpoint
        line_df[long] = self.line_df_.df(lines.hash[long])
        return offsets, features, weights, shingle_span_max(tokens, offsets, line_df[lines.tok_line])

    def stats(self, bands: np.ndarray) -> dict[str, float | int | str]:
        """Numbers for the report."""
        cfg = self.config
        counts = self.template_counts_
        width = (1 << cfg.line_df_bits) if self.line_df_ is not None else 1
        templated = self._templated if self._templated is not None else np.zeros(0, np.bool_)
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
            "pairs_accepted": int(self.counters_[2]) + counts["accepted"],
            "pairs_deferred": self.deferred_.count,
            "template_df": cfg.template_df,
            "template_share": cfg.template_share,
            "docs_templated": int(np.count_nonzero(templated)),
            "template_pairs_rechecked": counts["rechecked"],
            "template_pairs_accepted": counts["accepted"],
            "template_pairs_rejected": counts["rejected"],
            "template_pairs_below_threshold": counts["below_threshold"],
            "template_pairs_already_linked": counts["already_linked"],
            "template_pairs_unreadable": counts["unreadable"],
            "template_pairs_no_content_left": counts["no_content_left"],
            "line_df_bytes": self.line_df_.nbytes if self.line_df_ is not None else 0,
            "line_df_lines": self.line_adds_,
            "line_df_load": round(self.line_adds_ / width, 4) if self.line_df_ is not None else 0.0,
            "line_sample_bytes": int(sum(h.nbytes + s.nbytes for h, s in zip(self._line_hash, self._line_share))
                                     + sum(g.nbytes for g in self._ngrams)),
            "importance_seconds": round(self.seconds_["importance"], 3),
            "signature_seconds": round(self.seconds_["signatures"], 3),
            "template_recheck_seconds": round(self.seconds_["template_recheck"], 3),
            "signature_bytes": int(self._matrix.nbytes) if self._matrix is not None
            else int(sum(s.nbytes for s in self._sigs)),
        }


def weighted_containment(jaccard: np.ndarray, mass_doc: np.ndarray, mass_keeper: np.ndarray,
                         slots: int) -> np.ndarray:
    """A lower bound on the share of a document's weight that another holds, from their weighted
    Jaccard estimate over ``slots`` signature slots: with ``sum(min) = J (m_d + m_k) / (1 + J)``,
    the containment ``sum(min) / m_d``, taken at ``J`` less two binomial standard errors (a small
    document against a large one multiplies the estimate's error by their mass ratio)."""
    j = np.asarray(jaccard, dtype=np.float64)
    low = np.clip(j - 2.0 * np.sqrt(j * (1.0 - j) / slots), 0.0, 1.0)
    md = np.asarray(mass_doc, dtype=np.float64)
    total = md + np.asarray(mass_keeper, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        held = np.where(md > 0, low / (1.0 + low) * total / md, 0.0)
    return np.clip(held, 0.0, 1.0)
