"""Weighted shingles of a batch: the input of attention-weighted MinHash.

Each token gets an importance, each shingle (the same word or character n-grams MinHash
uses, :func:`~semhash_llm.text.tokenize.doc_shingles`) the importance of its *least*
important token — a shingle that reaches into a menu line is chrome — times the mean IDF of
its tokens when token IDFs are given (from a
:class:`~semhash_llm.sketch.docfreq.DocumentFrequency` over token hashes: the mean, not the
minimum, so that a shingle holding "the" still counts by its other words). The result is a CSR batch
``(offsets, features, weights)`` that :func:`~semhash_llm.sketch.cws.cws_signatures` signs
and :func:`~semhash_llm.sketch.cws.weighted_jaccard` compares.

The importance here is the teacher-free line cue (:func:`line_cue_importance`): a logistic
function of the number of tokens on the token's line, ``1 / (1 + exp(-(t - midpoint) /
scale))``, scaled to mean 1 over the document. It is the strongest single signal measured so
far for "this word is article, not chrome" (ROC AUC 0.919 on 176 real pages,
``benchmarks/line_cues_report.py``; the teacher's attention reaches 0.65–0.79,
``benchmarks/importance_report.py``). ``midpoint`` (8 tokens) and ``scale`` (2) are set a
priori — about the length of a short sentence — not fitted to those pages, whose content may
not train shipped weights. A document whose lines are all short (a list, a tweet) is not
penalised against itself: the scaling to mean 1 keeps its shingles' relative weights, and
weighted Jaccard compares two documents' weights, not absolute values.

Two helpers serve the stage's line document frequencies (page chrome that recurs across a site's
pages, :mod:`semhash_llm.stages.aw`): :func:`line_weights`, each line's share of the
weighted shingles (a shingle counts on the line of its first token), and
:func:`shingle_span_max`, the largest per-token value (a line's document frequency) over each
shingle's tokens, to drop the shingles that touch a recurring line.

Measured on 20,000 synthetic documents of ~1.8 KB (281 shingles each, 2 cores): lines,
importance and weighted shingles at 24,064 documents/s; their ICWS signatures (128 slots) at
10,470 documents/s.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from semhash_llm.text.lines import LineBatch
from semhash_llm.text.tokenize import TokenizedBatch, doc_shingles

__all__ = ["line_cue", "line_cue_importance", "line_weights", "mean_one", "shingle_span_max", "weighted_shingles"]


def _line_logistic(tokens: TokenizedBatch, lines: LineBatch, midpoint: float, scale: float, caller: str) -> np.ndarray:
    """``1 / (1 + exp(-(tokens on the token's line - midpoint) / scale))`` per token, float64."""
    if not (np.isfinite(midpoint) and np.isfinite(scale) and scale > 0):
        raise ValueError(f"{caller} needs a finite midpoint and a scale > 0; got midpoint={midpoint}, scale={scale}")
    if lines.tok_line.shape != tokens.tok_hashes.shape:
        raise ValueError(f"{caller}: the lines were not computed from these tokens "
                         f"({lines.tok_line.size} token lines for {tokens.tok_hashes.size} tokens)")
    t = lines.tokens[lines.tok_line].astype(np.float64)
    return 1.0 / (1.0 + np.exp(-(t - midpoint) / scale))


def line_cue(tokens: TokenizedBatch, lines: LineBatch, midpoint: float = 8.0, scale: float = 2.0) -> np.ndarray:
    """The unscaled line cue of every token (float32): the same for a line in any document."""
    return _line_logistic(tokens, lines, midpoint, scale, "line_cue").astype(np.float32)


def mean_one(values: np.ndarray, tok_offsets: np.ndarray) -> np.ndarray:
    """Per-token ``values`` (float64) scaled to mean 1 over each document's tokens, as float32."""
    counts = np.diff(tok_offsets)
    doc = np.repeat(np.arange(counts.size), counts)
    mean = np.bincount(doc, weights=values, minlength=counts.size) / np.maximum(counts, 1)
    return (values / np.maximum(mean[doc], 1e-12)).astype(np.float32)


def line_cue_importance(tokens: TokenizedBatch, lines: LineBatch, midpoint: float = 8.0,
                        scale: float = 2.0) -> np.ndarray:
    """Per-token importance (``float32``, mean 1 over each document's tokens) from its line's length."""
    return mean_one(_line_logistic(tokens, lines, midpoint, scale, "line_cue_importance"), tokens.tok_offsets)


@nb.njit(cache=True)
def _shingle_weights(tok_offsets: np.ndarray, tok_hashes: np.ndarray, ngrams: np.ndarray, importance: np.ndarray,
                     token_idf: np.ndarray, use_idf: bool, features: np.ndarray, weights: np.ndarray,
                     counts: np.ndarray) -> None:
    """Each document's shingles and weights at its token offsets (it has at most one shingle per token)."""
    for d in range(tok_offsets.shape[0] - 1):
        s = tok_offsets[d]
        e = tok_offsets[d + 1]
        k = doc_shingles(tok_hashes, s, e, ngrams[d], features[s:])
        width = e - s - k + 1
        for j in range(k):
            w = importance[s + j]
            idf = token_idf[s + j] if use_idf else 1.0
            for q in range(1, width):
                if importance[s + j + q] < w:
                    w = importance[s + j + q]
                if use_idf:
                    idf += token_idf[s + j + q]
            weights[s + j] = w * (idf / width if use_idf else 1.0)
        counts[d] = k


def weighted_shingles(tokens: TokenizedBatch, importance: np.ndarray,
                      token_idf: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(offsets, features, weights)``: every document's shingles (as MinHash makes them) with
    the smallest importance of their tokens, times the mean of their tokens' ``token_idf``
    (one per token, e.g. ``DocumentFrequency.idf(tokens.tok_hashes)``) when it is given."""
    importance = np.ascontiguousarray(importance, dtype=np.float32)
    if importance.shape != tokens.tok_hashes.shape:
        raise ValueError(f"weighted_shingles needs one importance per token: {importance.size} for "
                         f"{tokens.tok_hashes.size} tokens")
    use_idf = token_idf is not None
    idf = np.ascontiguousarray(token_idf if token_idf is not None else np.empty(0), dtype=np.float32)
    if use_idf and idf.shape != tokens.tok_hashes.shape:
        raise ValueError(f"weighted_shingles needs one token_idf per token: {idf.size} for "
                         f"{tokens.tok_hashes.size} tokens")
    ntok = np.diff(tokens.tok_offsets)
    features = np.empty(tokens.tok_hashes.size, dtype=np.uint64)
    weights = np.empty(tokens.tok_hashes.size, dtype=np.float32)
    counts = np.zeros(ntok.size, dtype=np.int64)
    _shingle_weights(tokens.tok_offsets, tokens.tok_hashes, tokens.ngrams.astype(np.int64), importance, idf, use_idf,
                     features, weights, counts)
    offsets = np.zeros(ntok.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    # Keep each document's first counts[d] slots.
    rank = np.arange(features.size) - np.repeat(tokens.tok_offsets[:-1], ntok)
    keep = rank < np.repeat(counts, ntok)
    return offsets, features[keep], weights[keep]


def line_weights(tokens: TokenizedBatch, lines: LineBatch, offsets: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The weight of every line of the batch (float64, one per line of ``lines``): the sum of the
    weights of the shingles that start on it (shingle ``j`` of a document starts at its token ``j``;
    ``(offsets, weights)`` as :func:`weighted_shingles` returns them for these tokens)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    weights = np.asarray(weights)
    ntok = np.diff(tokens.tok_offsets)
    if offsets.shape != tokens.tok_offsets.shape or weights.shape != (int(offsets[-1]),) \
            or np.any(np.diff(offsets) > ntok):
        raise ValueError("line_weights needs the (offsets, weights) of weighted_shingles on these tokens: "
                         f"{offsets.size - 1} documents and {weights.size} weights for {ntok.size} documents")
    if lines.tok_line.shape != tokens.tok_hashes.shape:
        raise ValueError(f"line_weights: the lines were not computed from these tokens "
                         f"({lines.tok_line.size} token lines for {tokens.tok_hashes.size} tokens)")
    per_doc = np.diff(offsets)
    doc = np.repeat(np.arange(per_doc.size), per_doc)
    start = tokens.tok_offsets[doc] + (np.arange(weights.size) - offsets[doc])
    return np.bincount(lines.tok_line[start], weights=weights.astype(np.float64), minlength=lines.tokens.size)


@nb.njit(cache=True)
def _span_max(tok_offsets: np.ndarray, offsets: np.ndarray, values: np.ndarray, out: np.ndarray) -> None:
    for d in range(tok_offsets.shape[0] - 1):
        s = tok_offsets[d]
        k = offsets[d + 1] - offsets[d]
        if k == 0:
            continue
        width = tok_offsets[d + 1] - s - k + 1
        for j in range(k):
            m = values[s + j]
            for q in range(1, width):
                if values[s + j + q] > m:
                    m = values[s + j + q]
            out[offsets[d] + j] = m


def shingle_span_max(tokens: TokenizedBatch, offsets: np.ndarray, values: np.ndarray) -> np.ndarray:
    """For every shingle of ``offsets`` (as :func:`weighted_shingles` returns them for these tokens),
    the largest of the per-token ``values`` (int64, one per token) over the tokens it spans."""
    offsets = np.asarray(offsets, dtype=np.int64)
    values = np.ascontiguousarray(values, dtype=np.int64)
    if values.shape != tokens.tok_hashes.shape:
        raise ValueError(f"shingle_span_max needs one value per token: {values.size} for {tokens.tok_hashes.size}")
    if offsets.shape != tokens.tok_offsets.shape or np.any(np.diff(offsets) > np.diff(tokens.tok_offsets)):
        raise ValueError("shingle_span_max needs the offsets of weighted_shingles on these tokens")
    out = np.zeros(int(offsets[-1]), dtype=np.int64)
    _span_max(tokens.tok_offsets, offsets, values, out)
    return out
