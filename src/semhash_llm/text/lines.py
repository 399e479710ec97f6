"""The line each token sits on, and what the line looks like: cues for cheap importance.

Page chrome has a shape: menus and link lists run a few tokens a line, rarely end a
sentence, and the same lines come back on every page of a site; an article's lines are long
sentences that end with a full stop. Attention-weighted MinHash learns per-token importance
from the teacher's attention; these line cues are the part of its cheap model that needs no
teacher. :func:`token_lines` reads the *normalized* texts of a batch with the tokenizer's
own class table, so token ``t`` here is token ``t`` of
:func:`~semhash_llm.text.tokenize.tokenize_batch` (the tests check the counts agree), and
returns for every token its line and for every line:

* ``tokens`` — how many tokens the line holds;
* ``terminal`` — whether its last non-space character ends a sentence (``. ! ? …`` and the
  full-width ``。！？``);
* ``hash`` — a 64-bit hash of the line's token sequence (lines equal up to case,
  punctuation and spacing share it), to count how many documents repeat the line
  (:class:`~semhash_llm.sketch.docfreq.DocumentFrequency` over line hashes);
* ``position`` — the line's rank in its document divided by the document's lines with
  tokens (0 first, ``< 1`` last).

Lines end at ``\\n``, ``\\r``, U+2028 and U+2029; lines without a token get no entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numba as nb
import numpy as np

from semhash_llm.config import NormalizeConfig, ShingleConfig
from semhash_llm.text.normalize import char_classes, normalize_batch
from semhash_llm.text.tokenize import TokenizedBatch, count_tokens, encode_batch, mix64, tokenize_batch

__all__ = ["LineBatch", "token_lines", "span_line_cues", "tokens_and_lines"]

_U64 = np.uint64
_WORD = 1
_SEP = 0
_FNV_OFFSET = _U64(0xCBF29CE484222325)
_FNV_PRIME = _U64(0x100000001B3)
_TERMINALS = np.array([ord(c) for c in ".!?…。！？"], dtype=np.uint32)


@nb.njit(inline="always", cache=True)
def _is_break(cp: np.uint32) -> bool:
    return cp == 10 or cp == 13 or cp == 0x2028 or cp == 0x2029


@nb.njit(inline="always", cache=True)
def _is_space(cp: np.uint32) -> bool:
    return cp == 32 or cp == 9 or cp == 0xA0 or cp == 0x3000 or cp == 12 or cp == 11


@nb.njit(parallel=True, cache=True)
def _count_lines(cps: np.ndarray, offsets: np.ndarray, classes: np.ndarray) -> np.ndarray:
    n = offsets.shape[0] - 1
    out = np.zeros(n, dtype=np.int64)
    for d in nb.prange(n):
        lines = 0
        has_tok = False
        for i in range(offsets[d], offsets[d + 1]):
            cp = cps[i]
            if _is_break(cp):
                if has_tok:
                    lines += 1
                has_tok = False
            elif classes[cp] != _SEP:
                has_tok = True
        if has_tok:
            lines += 1
        out[d] = lines
    return out


@nb.njit(parallel=True, cache=True)
def _fill(cps: np.ndarray, offsets: np.ndarray, classes: np.ndarray, terminals: np.ndarray,
          tok_offsets: np.ndarray, line_offsets: np.ndarray, tok_line: np.ndarray, line_tokens: np.ndarray,
          line_terminal: np.ndarray, line_hash: np.ndarray) -> None:
    n = offsets.shape[0] - 1
    for d in nb.prange(n):
        t = tok_offsets[d]
        ln = line_offsets[d]
        count = 0
        h = _FNV_OFFSET
        th = _FNV_OFFSET
        in_word = False
        last = np.uint32(0)
        for i in range(offsets[d], offsets[d + 1] + 1):
            at_end = i == offsets[d + 1]
            cp = np.uint32(10) if at_end else cps[i]
            if _is_break(cp):
                if in_word:
                    h = (h ^ mix64(th)) * _FNV_PRIME
                    in_word = False
                if count > 0:
                    line_tokens[ln] = count
                    term = False
                    for k in range(terminals.shape[0]):
                        if last == terminals[k]:
                            term = True
                    line_terminal[ln] = term
                    line_hash[ln] = mix64(h ^ _U64(count))
                    ln += 1
                count = 0
                h = _FNV_OFFSET
                last = np.uint32(0)
                continue
            if not _is_space(cp):
                last = cp
            c = classes[cp]
            if c == _WORD:
                if not in_word:
                    in_word = True
                    th = _FNV_OFFSET
                    tok_line[t] = ln
                    t += 1
                    count += 1
                th = (th ^ _U64(cp)) * _FNV_PRIME
            else:
                if in_word:
                    h = (h ^ mix64(th)) * _FNV_PRIME
                    in_word = False
                if c != _SEP:
                    tok_line[t] = ln
                    t += 1
                    count += 1
                    h = (h ^ mix64((_FNV_OFFSET ^ _U64(cp)) * _FNV_PRIME)) * _FNV_PRIME


@dataclass
class LineBatch:
    """Lines of a batch: ``tok_line[t]`` is the line of token ``t`` (global line index);
    ``line_offsets`` (n_docs + 1) delimit each document's lines."""

    line_offsets: np.ndarray
    tok_line: np.ndarray
    tokens: np.ndarray
    terminal: np.ndarray
    hash: np.ndarray

    @property
    def position(self) -> np.ndarray:
        """Rank of each line in its document / the document's lines (float32, in [0, 1))."""
        counts = np.diff(self.line_offsets)
        doc = np.repeat(np.arange(counts.size), counts)
        rank = np.arange(self.tokens.size) - self.line_offsets[doc]
        return (rank / np.maximum(counts[doc], 1)).astype(np.float32)


def token_lines(normalized: Sequence[str], classes: np.ndarray, tok_offsets: np.ndarray) -> LineBatch:
    """Lines of a batch of normalized texts; ``tok_offsets`` from the same texts' tokenization."""
    cps, offsets = encode_batch(normalized)
    tok_offsets = np.asarray(tok_offsets, dtype=np.int64)
    if tok_offsets.shape != (len(normalized) + 1,):
        raise ValueError(f"token_lines needs tok_offsets of length len(normalized) + 1 = {len(normalized) + 1}; "
                         f"got shape {tok_offsets.shape}")
    ntok, _ = count_tokens(cps, offsets, classes)
    if not np.array_equal(ntok, np.diff(tok_offsets)):
        raise ValueError("token_lines: tok_offsets do not match the texts' tokens (tokenized with another class "
                         "table or normalization?); pass the tok_offsets of tokenize_batch on the same texts")
    counts = _count_lines(cps, offsets, classes)
    line_offsets = np.zeros(len(normalized) + 1, dtype=np.int64)
    np.cumsum(counts, out=line_offsets[1:])
    total = int(line_offsets[-1])
    tok_line = np.full(int(tok_offsets[-1]), -1, dtype=np.int64)
    tokens = np.zeros(total, dtype=np.int64)
    terminal = np.zeros(total, dtype=np.bool_)
    hashes = np.zeros(total, dtype=np.uint64)
    _fill(cps, offsets, classes, _TERMINALS, tok_offsets, line_offsets, tok_line, tokens, terminal, hashes)
    return LineBatch(line_offsets, tok_line, tokens, terminal, hashes)


@nb.njit(parallel=True, cache=True)
def _span_line_cues(cps: np.ndarray, offsets: np.ndarray, classes: np.ndarray, doc_first: np.ndarray,
                    span_start: np.ndarray, span_end: np.ndarray, midpoint: float, scale: float,
                    out: np.ndarray) -> None:
    n = offsets.shape[0] - 1
    for d in nb.prange(n):
        lo = doc_first[d]
        hi = doc_first[d + 1]
        if lo == hi:
            continue
        s0 = offsets[d]
        length = offsets[d + 1] - s0
        # Lines of the document: start offset (code points, relative) and token count.
        starts = np.empty(length + 1, np.int64)
        counts = np.zeros(length + 1, np.float64)
        nl = 1
        starts[0] = 0
        in_word = False
        for i in range(length):
            cp = cps[s0 + i]
            if _is_break(cp):
                in_word = False
                starts[nl] = i + 1
                nl += 1
                continue
            c = classes[cp]
            if c == _WORD:
                if not in_word:
                    counts[nl - 1] += 1.0
                    in_word = True
            else:
                in_word = False
                if c != _SEP:
                    counts[nl - 1] += 1.0
        cum_n = np.zeros(nl + 1, np.float64)
        cum_w = np.zeros(nl + 1, np.float64)
        for k in range(nl):
            cue = 1.0 / (1.0 + np.exp(-(counts[k] - midpoint) / scale))
            cum_n[k + 1] = cum_n[k] + counts[k]
            cum_w[k + 1] = cum_w[k] + counts[k] * cue
        for p in range(lo, hi):
            a = span_start[p]
            b = max(span_end[p] - 1, a)
            first = np.searchsorted(starts[:nl], a, side="right") - 1
            last = np.searchsorted(starts[:nl], b, side="right") - 1
            tokens = cum_n[last + 1] - cum_n[first]
            out[p] = (cum_w[last + 1] - cum_w[first]) / tokens if tokens > 0 else 1.0


def span_line_cues(texts: Sequence[str], classes: np.ndarray, doc: np.ndarray, start: np.ndarray, end: np.ndarray,
                   midpoint: float = 8.0, scale: float = 2.0) -> np.ndarray:
    """The line cue of text spans: for span ``k`` of ``texts[doc[k]][start[k]:end[k]]`` (code
    points; ``doc`` sorted), the token-weighted mean over the whole lines it touches of
    ``1 / (1 + exp(-(tokens on the line - midpoint) / scale))`` (float32; 1.0 for a span on
    lines without tokens). Tokens as the tokenizer counts them with ``classes``: a word run is
    one, every other non-separator character (CJK, symbols) one. A span over a menu weighs
    ~0.05, one over running text ~1, one across both in between.
    """
    doc = np.asarray(doc, dtype=np.int64)
    if doc.size and np.any(np.diff(doc) < 0):
        raise ValueError("span_line_cues needs the spans sorted by document")
    cps, offsets = encode_batch(texts)
    doc_first = np.searchsorted(doc, np.arange(len(texts) + 1, dtype=np.int64)).astype(np.int64)
    out = np.ones(doc.size, dtype=np.float32)
    _span_line_cues(cps, offsets, classes, doc_first, np.asarray(start, np.int64), np.asarray(end, np.int64),
                    float(midpoint), float(scale), out)
    return out


def tokens_and_lines(texts: Sequence[str], normalize_config: NormalizeConfig | None = None,
                     shingle_config: ShingleConfig | None = None) -> tuple[TokenizedBatch, LineBatch]:
    """Normalize, tokenize and find the lines of ``texts`` in one go (the cascade's own tokens)."""
    cfg = normalize_config or NormalizeConfig()
    classes = char_classes(cfg.strip_punctuation)
    normalized = normalize_batch(list(texts), cfg)
    tokens = tokenize_batch(normalized, classes, shingle_config or ShingleConfig())
    return tokens, token_lines(normalized, classes, tokens.tok_offsets)
