"""Passages: the unit of containment (type D) and viral-fragment (type E) detection.

:func:`passages_batch` cuts every *original* text into passages and gives each an exact
key and a few near keys, as flat numpy arrays (:class:`PassageBatch`). Pure functions, no
I/O; the work per code point runs in numba kernels.

Cutting (on the original text, so offsets are code-point offsets into it)
-------------------------------------------------------------------------
1. **Sentences.** A sentence ends after ``. ! ?`` (and ``…``, ``‼``, ``⁇``, ``؟``, ``۔``,
   ``।``) followed by whitespace or the end of the text, after a CJK / full-width stop
   ``。 ！ ？ ｡ ．`` whatever follows, and at every line break. Closing quotes and brackets
   right after the stop stay in the sentence (``He left.")`` ends after the bracket).
   ``3.14`` or ``e.g.,`` do not end a sentence. A sentence spans from its first
   non-whitespace code point to its stop (or its last non-whitespace code point before the
   line break); the whitespace between sentences belongs to no passage.
2. **Paragraphs** are separated by a blank line (two line breaks with only whitespace
   between, ``\\r\\n`` counting as one), a form feed or U+2029. Nothing is merged across
   paragraphs.
3. **Grouping.** A sentence with ``min_words`` tokens or more is a group of its own; the
   sentences with fewer between two of them (or between one and the paragraph's start or
   end) form one group together, which may be shorter than ``min_words`` (so a text of one
   short sentence is one passage). A short sentence never joins a long one: a long sentence
   that recurs in many documents keeps one key wherever it sits, whatever short sentence
   (a dateline, "Read more.") its host puts beside it. A group without tokens (a line of
   ``***``, emoji only) is no passage. The rule is local on purpose: where a group ends
   depends only on the sentences beside it, so an excerpt that starts at another sentence
   than its parent is misaligned for at most one group, never for the rest of the paragraph
   (greedy "accumulate to ``min_words``" would shift every later group).
4. **Windows.** A group of more than ``max_words`` tokens (a long sentence, CJK or OCR text
   without punctuation, a list of short lines) is covered by overlapping windows of
   ``window`` tokens instead. Windows start at *content-defined anchors*, chosen by
   winnowing (Schleimer et al., 2003) over hashes of 3-token k-grams (tokens case- and
   width-folded): in every run of ``w = min(2 * stride - 1, window)`` consecutive k-grams
   the one with the smallest hash (rightmost on ties) is an anchor. Whether a token is an
   anchor depends only on the tokens less than ``w + 2`` away from it, so two documents
   that share a stretch of text pick
   the same anchors inside it, wherever the stretch sits in either document, and cut the
   same windows there; absolute offsets (a window every ``stride`` tokens from the
   group start) would align only when both copies start at the same token modulo
   ``stride``. Winnowing gives one anchor per ``(w + 1) / 2 = stride`` tokens on average
   and never more than ``w <= window`` tokens between two anchors, so windows leave no
   token uncovered. The group's first token is an anchor too, and the last window is
   ``[T - window, T)``; a window that would run past the group end is replaced by that
   one. Windows overlap; sentence passages do not.

   In repetitive text (equal k-gram hashes) a pick is kept while it stays in the run
   (robust winnowing), so ``"word " * 20000`` gives one window per ``w`` tokens, not one
   per token.

Tokens are the project's tokens (:func:`semhash_llm.text.tokenize.tokens`): words, and one
token per character of scripts written without spaces. Counting for the rules above
happens on the original text (punctuation never counts); the ``ntok`` of a passage is the
count on its normalized text, which can differ in rare cases (NFKC turns ``½`` into
``1⁄2``).

Keys (on the normalized passage)
--------------------------------
The keys of a passage are those of ``normalize(original[start:end])`` — the passage
normalized *on its own* (NFKC, case folding, see
:func:`semhash_llm.text.normalize.normalize`), so they never depend on how normalization
changed lengths elsewhere in the document, and :func:`passage_keys` of the slice gives
them again. (Most documents need no Python work for it; see :func:`_normalized_spans`.)

* **Exact key** — BLAKE2b-128 of the passage's canonical token stream (each token's UTF-8
  followed by ``0xFF``), the stream and normalization of the exact stage, as two
  ``uint64`` (``exact_hi``, ``exact_lo``: digest bytes 0-7 and 8-15, big-endian).
  Punctuation, whitespace, case and width do not change it. Without a ``key`` it is the
  exact stage's digest of a document with the same text (``person=b"semhash-tokens"``);
  with one it is keyed BLAKE2b (``person=b"semhash-passage"``), a MAC: without the key
  nobody can aim two passages at one key. BLAKE2b runs in the kernel (RFC 7693, checked
  against :mod:`hashlib` by the tests), ~0.25 µs a passage.
* **Near keys** — ``near_bands`` band keys of a one-permutation MinHash (Li et al. 2012,
  with rotation densification for empty bins) of ``near_bands * near_rows`` bins over the
  passage's character n-grams. The characters are the tokens' characters with one space
  wherever any separator run stood between two tokens, so punctuation and whitespace
  changes do not move them; ``near_ngram``-grams (default 4), or ``near_cjk_ngram``-grams
  (default 2) when most tokens are characters of scripts without spaces. Band ``b`` is a
  hash of bins ``b * near_rows ... (b + 1) * near_rows - 1``. Two passages share one band
  with probability about ``J ** near_rows`` (J: Jaccard of their n-gram sets), at least
  one with ``1 - (1 - J ** near_rows) ** near_bands``. One typo changes at most ``n + 1``
  n-grams, so a sentence of 60-150 characters keeps J around 0.8-0.93 and shares a band
  with probability 0.93-0.999 at the defaults (4 bands of 3 rows); passages with J below
  0.1 share one with probability below 0.4%. Measured (``tests/test_passages.py``, 200
  template sentences of 10-20 words, 1,000 in the development run): one typo 99.5%, one
  word replaced 95%, unrelated pairs 0.25% (pairs from one template included: most
  false matches are template siblings with J 0.2-0.6); CJK sentences of 15-40
  characters, one character replaced: 99%.

Passages whose normalized text has no token are dropped. The output is sorted by
document, then by start offset (then end). Keys may repeat inside one document (a
repeated sentence; windows of repetitive text): count a key once per document where
that matters.
"""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass
from typing import Callable, Sequence

import numba as nb
import numpy as np

from semhash_llm.config import ConfigError, NormalizeConfig
from semhash_llm.sketch.blake2b import blake2b_into, blake2b_params, bswap64
from semhash_llm.text.normalize import CharClass, char_classes, normalize
from semhash_llm.text.tokenize import _put_utf8, encode_batch, mix64

__all__ = [
    "PassageBatch",
    "passages_batch",
    "passage_keys",
    "boundary_classes",
    "KIND_SENTENCES",
    "KIND_WINDOW",
]

KIND_SENTENCES = 0  # a group of whole sentences (no overlap with other passages)
KIND_WINDOW = 1  # a window of a long group (overlaps its neighbours)

_U64 = np.uint64
_FNV_OFFSET = _U64(0xCBF29CE484222325)
_FNV_PRIME = _U64(0x100000001B3)
_GOLDEN = _U64(0x9E3779B97F4A7C15)
_S31 = _U64(31)
_S32 = _U64(32)
_S33 = _U64(33)
_S16 = _U64(16)
_LOW32 = _U64(0xFFFFFFFF)
_WORD = np.uint8(CharClass.WORD)
_SEP = np.uint8(CharClass.SEPARATOR)
_ANCHOR_K = 3  # tokens per anchor k-gram

# boundary classes of code points
_B_NONE = np.uint8(0)
_B_NEWLINE = np.uint8(1)
_B_PARA = np.uint8(2)  # a paragraph break by itself (U+2029, form feed)
_B_STOP = np.uint8(3)  # ends a sentence when whitespace or the end follows
_B_CJK_STOP = np.uint8(4)  # ends a sentence whatever follows
_B_CLOSER = np.uint8(5)  # closing quote / bracket: stays with the stop before it
_B_SPACE = np.uint8(6)  # whitespace other than line breaks
_FAST_LETTER = np.uint8(int(CharClass.WORD))  # no boundary class, a word character

_NEWLINES = "\n\r\x0b\x1c\x1d\x1e\x85\u2028"
_PARAGRAPH = "\x0c\u2029"
_STOPS = ".!?\u2026\u203c\u2047\u2048\u2049\u061f\u06d4\u0964\u0965"
_CJK_STOPS = "\u3002\uff01\uff1f\uff61\uff0e"
_CLOSERS = "\"')]}\u2019\u201d\u00bb\u203a\u300d\u300f\uff09\uff3d\u3011\u3009\u300b\u3015\uff02\uff07\uff63"

_TOKEN_DOMAIN = b"semhash-tokens"  # BLAKE2b personalisation of a passage's token stream
_KEYED_DOMAIN = b"semhash-passage"
_MAX_LSH = 16
_BLOCK = 256  # passages per parallel work item
_CHUNK_CPS = 1 << 20  # code points cut per scratch chunk (17 bytes of scratch each)


@functools.lru_cache(maxsize=1)
def boundary_classes() -> np.ndarray:
    """The boundary class of every code point (``uint8`` array of 0x110000), for sentence cutting."""
    table = np.zeros(0x110000, dtype=np.uint8)
    for cp in range(0x3001):  # every whitespace code point is below U+3001
        if chr(cp).isspace():
            table[cp] = _B_SPACE
    for chars, cls in (
        (_NEWLINES, _B_NEWLINE),
        (_PARAGRAPH, _B_PARA),
        (_STOPS, _B_STOP),
        (_CJK_STOPS, _B_CJK_STOP),
        (_CLOSERS, _B_CLOSER),
    ):
        for ch in chars:
            table[ord(ch)] = cls
    return table


@functools.lru_cache(maxsize=1)
def _cut_table() -> np.ndarray:
    """Boundary class (bits 2-4) and token class (bits 0-1, punctuation as separator) of every code point."""
    return ((boundary_classes() << 2) | char_classes(True)).astype(np.uint8)


_NO_FOLD = np.uint32(0xFFFFFFFF)  # the code point folds to more than one (or no) code point


def _anchor_fold(ch: str) -> int:
    folded = unicodedata.normalize("NFKC", ch).casefold()
    return ord(folded[0]) if folded else ord(ch)


def _case_fold(ch: str) -> int:
    folded = ch.casefold()
    return ord(folded) if len(folded) == 1 else int(_NO_FOLD)


@nb.njit(parallel=True, cache=True)
def _distinct_code_points(cps: np.ndarray) -> np.ndarray:
    """The distinct code points of ``cps``, sorted."""
    seen = np.zeros(0x110000, dtype=np.uint8)
    for i in nb.prange(cps.shape[0]):
        seen[cps[i]] = 1
    return np.flatnonzero(seen)


class _CodePointTable:
    """A ``uint32`` value per code point, computed by a Python function the first time a batch holds it.

    Filling the table for all 1.1M code points up front costs 0.2-1 s a process; a corpus
    uses a few thousand of them. Unfilled entries map a code point to itself.
    """

    def __init__(self, fn: Callable[[str], int]) -> None:
        self._fn = fn
        self._table: np.ndarray | None = None  # allocated on first use (4.4 MB + 1.1 MB)
        self._known = np.zeros(0, dtype=np.bool_)

    def ready_for(self, distinct: np.ndarray) -> np.ndarray:
        """The table, with ASCII and the given code points filled in."""
        fn = self._fn
        if self._table is None:
            table = np.arange(0x110000, dtype=np.uint32)
            table[:128] = [fn(chr(cp)) for cp in range(128)]
            self._known = np.zeros(0x110000, dtype=np.bool_)
            self._known[:128] = True
            self._table = table
        new = distinct[~self._known[distinct]]
        if new.size:
            self._table[new] = [fn(chr(cp)) for cp in new.tolist()]
            self._known[new] = True
        return self._table


_ANCHOR_FOLD = _CodePointTable(_anchor_fold)
_CASE_FOLD = _CodePointTable(_case_fold)


@functools.lru_cache(maxsize=1)
def _identity() -> np.ndarray:
    return np.arange(0x110000, dtype=np.uint32)


@nb.njit(parallel=True, cache=True)
def _docs_with(cps: np.ndarray, offsets: np.ndarray, table: np.ndarray, value: np.uint32) -> np.ndarray:
    """Per document: does one of its code points map to ``value``?"""
    n = offsets.shape[0] - 1
    out = np.zeros(n, dtype=np.bool_)
    for d in nb.prange(n):
        for i in range(offsets[d], offsets[d + 1]):
            if table[cps[i]] == value:
                out[d] = True
                break
    return out


# ------------------------------------------------------------------------------ cutting


@nb.njit(cache=True)
def _kgram_hash(tok_h: np.ndarray, t: int, k: int) -> np.uint64:
    h = _GOLDEN
    for j in range(k):
        h = (h ^ tok_h[t + j]) * _FNV_PRIME
        h = (h << _S31) | (h >> _S33)
    return mix64(h)


@nb.njit(cache=True)
def _emit(
    out_start: np.ndarray, out_end: np.ndarray, out_kind: np.ndarray, pos: int, s: int, e: int, kind: int
) -> int:
    out_start[pos] = s
    out_end[pos] = e
    out_kind[pos] = kind
    return pos + 1


@nb.njit(cache=True)
def _emit_group(
    t0: int,
    t1: int,
    cs: int,
    ce: int,
    tok_s: np.ndarray,
    tok_e: np.ndarray,
    cps: np.ndarray,
    lo: int,
    fold: np.ndarray,
    max_words: int,
    window: int,
    winnow: int,
    out_start: np.ndarray,
    out_end: np.ndarray,
    out_kind: np.ndarray,
    pos: int,
) -> int:
    """Emit the passages of one group of sentences (tokens ``[t0, t1)``, code points ``[cs, ce)``)."""
    total = t1 - t0
    if total <= 0:
        return pos
    if total <= max_words:
        return _emit(out_start, out_end, out_kind, pos, cs, ce, KIND_SENTENCES)
    k = _ANCHOR_K
    nk = total - k + 1
    w = winnow if winnow < nk else nk
    # token hashes (case- and width-folded), only here: most groups need none
    tok_h = np.empty(total, dtype=np.uint64)
    for t in range(total):
        h = _FNV_OFFSET
        for i in range(tok_s[t0 + t], tok_e[t0 + t]):
            h = (h ^ _U64(fold[cps[lo + i]])) * _FNV_PRIME
        tok_h[t] = mix64(h)
    kh = np.empty(nk, dtype=np.uint64)
    for j in range(nk):
        kh[j] = _kgram_hash(tok_h, j, k)
    # the group's first token is always an anchor
    pos = _emit(out_start, out_end, out_kind, pos, cs, tok_e[t0 + window - 1], KIND_WINDOW)
    last = 0
    m = -1  # the last pick
    r = -1  # the rightmost minimum of the run [s, s + w)
    for s in range(nk - w + 1):
        e = s + w - 1
        if r < s:  # the minimum left the run: scan it (amortized O(1) a step on hashes)
            r = s
            for j in range(s + 1, e + 1):
                if kh[j] <= kh[r]:
                    r = j
        elif kh[e] <= kh[r]:
            r = e
        # robust winnowing: keep the last pick while it is in the run and ties the minimum
        if m < s or kh[r] < kh[m]:
            m = r
        if m > last:
            if m + window > total:
                break
            end = ce if m + window == total else tok_e[t0 + m + window - 1]
            pos = _emit(out_start, out_end, out_kind, pos, tok_s[t0 + m], end, KIND_WINDOW)
            last = m
    if last + window < total:
        pos = _emit(out_start, out_end, out_kind, pos, tok_s[t1 - window], ce, KIND_WINDOW)
    return pos


@nb.njit(cache=True)
def _segment_doc(
    cps: np.ndarray,
    lo: int,
    hi: int,
    kinds: np.ndarray,
    fold: np.ndarray,
    min_words: int,
    max_words: int,
    window: int,
    winnow: int,
    out_start: np.ndarray,
    out_end: np.ndarray,
    out_kind: np.ndarray,
    base: int,
) -> int:
    """Cut document ``cps[lo:hi]`` into passages, written from row ``base``; return their count."""
    n = hi - lo
    tok_s = np.empty(n + 1, dtype=np.int64)
    tok_e = np.empty(n + 1, dtype=np.int64)
    sen_s = np.empty(n + 1, dtype=np.int64)
    sen_e = np.empty(n + 1, dtype=np.int64)
    sen_t0 = np.empty(n + 1, dtype=np.int64)
    sen_t1 = np.empty(n + 1, dtype=np.int64)
    sen_p = np.empty(n + 1, dtype=np.int64)
    ntok = 0
    nsen = 0
    para = 0
    cur = -1  # start of the open sentence, -1 when none
    cur_t0 = 0
    last_end = 0  # end of the last non-whitespace code point
    in_word = False
    breaks = 0  # line breaks since the last non-whitespace code point
    i = 0
    while i < n:
        c = cps[lo + i]
        both = kinds[c]
        if in_word and both == _FAST_LETTER:  # the common case: a letter inside a word
            last_end = i + 1
            i += 1
            continue
        b = both >> 2
        w = both & 3
        if in_word and w != _WORD:
            tok_e[ntok] = i
            ntok += 1
            in_word = False
        if b == _B_NEWLINE or b == _B_PARA:
            if cur >= 0:
                sen_s[nsen] = cur
                sen_e[nsen] = last_end
                sen_t0[nsen] = cur_t0
                sen_t1[nsen] = ntok
                sen_p[nsen] = para
                nsen += 1
                cur = -1
            if b == _B_PARA:
                breaks = 2
            else:
                breaks += 1
                if c == 13 and i + 1 < n and cps[lo + i + 1] == 10:
                    i += 1
            i += 1
            continue
        if b == _B_SPACE:
            i += 1
            continue
        if cur < 0:
            if breaks >= 2 and nsen > 0:
                para += 1
            cur = i
            cur_t0 = ntok
        breaks = 0
        if w == _WORD:
            if not in_word:
                tok_s[ntok] = i
                in_word = True
        elif w != _SEP:
            tok_s[ntok] = i
            tok_e[ntok] = i + 1
            ntok += 1
        last_end = i + 1
        if b == _B_STOP or b == _B_CJK_STOP:
            j = i + 1
            cjk = b == _B_CJK_STOP
            while j < n:
                kj = kinds[cps[lo + j]]
                bj = kj >> 2
                if (bj == _B_STOP or bj == _B_CJK_STOP or bj == _B_CLOSER) and (kj & 3) == _SEP:
                    if bj == _B_CJK_STOP:
                        cjk = True
                    j += 1
                else:
                    break
            ends = cjk or j == n
            if not ends:
                bj = kinds[cps[lo + j]] >> 2
                ends = bj == _B_SPACE or bj == _B_NEWLINE or bj == _B_PARA
            if ends:
                sen_s[nsen] = cur
                sen_e[nsen] = j
                sen_t0[nsen] = cur_t0
                sen_t1[nsen] = ntok
                sen_p[nsen] = para
                nsen += 1
                cur = -1
                last_end = j
                i = j
                continue
        i += 1
    if in_word:
        tok_e[ntok] = n
        ntok += 1
    if cur >= 0:
        sen_s[nsen] = cur
        sen_e[nsen] = last_end
        sen_t0[nsen] = cur_t0
        sen_t1[nsen] = ntok
        sen_p[nsen] = para
        nsen += 1

    pos = base
    s = 0
    while s < nsen:
        e = s
        while e < nsen and sen_p[e] == sen_p[s]:
            e += 1
        prev0 = -1  # the previous closed group (sentence range), emitted one step late
        prev1 = -1
        g0 = s
        for q in range(s, e):
            if sen_t1[q] - sen_t0[q] >= min_words:
                if prev0 >= 0:
                    pos = _emit_group(sen_t0[prev0], sen_t1[prev1 - 1], sen_s[prev0], sen_e[prev1 - 1],
                                      tok_s, tok_e, cps, lo, fold, max_words, window, winnow,
                                      out_start, out_end, out_kind, pos)
                if g0 < q:  # the run of short sentences before this one: a group of its own
                    pos = _emit_group(sen_t0[g0], sen_t1[q - 1], sen_s[g0], sen_e[q - 1],
                                      tok_s, tok_e, cps, lo, fold, max_words, window, winnow,
                                      out_start, out_end, out_kind, pos)
                prev0 = q
                prev1 = q + 1
                g0 = q + 1
        if g0 < e:  # short sentences at the paragraph end: a group of their own too
            if prev0 >= 0:
                pos = _emit_group(sen_t0[prev0], sen_t1[prev1 - 1], sen_s[prev0], sen_e[prev1 - 1],
                                  tok_s, tok_e, cps, lo, fold, max_words, window, winnow,
                                  out_start, out_end, out_kind, pos)
            prev0 = g0
            prev1 = e
        if prev0 >= 0:
            pos = _emit_group(sen_t0[prev0], sen_t1[prev1 - 1], sen_s[prev0], sen_e[prev1 - 1],
                              tok_s, tok_e, cps, lo, fold, max_words, window, winnow,
                              out_start, out_end, out_kind, pos)
        s = e
    return pos - base


@nb.njit(parallel=True, cache=True)
def _cut_chunk(
    cps: np.ndarray,
    offsets: np.ndarray,
    d0: int,
    d1: int,
    kinds: np.ndarray,
    fold: np.ndarray,
    min_words: int,
    max_words: int,
    window: int,
    winnow: int,
    s_start: np.ndarray,
    s_end: np.ndarray,
    s_kind: np.ndarray,
    counts: np.ndarray,
) -> None:
    """Cut documents ``[d0, d1)``; document ``d`` writes from ``offsets[d] - offsets[d0] + d - d0``.

    A document of ``L`` code points has at most ``L`` passages: a group of ``T`` tokens
    gives one passage, or at most ``T - 1`` windows (the first, one per later anchor k-gram,
    the last), so the scratch rows ``[base, base + L + 1)`` of one document never reach the
    next.
    """
    base0 = offsets[d0]
    for d in nb.prange(d0, d1):
        base = offsets[d] - base0 + (d - d0)
        counts[d] = _segment_doc(cps, offsets[d], offsets[d + 1], kinds, fold, min_words, max_words,
                                 window, winnow, s_start, s_end, s_kind, base)


@nb.njit(cache=True)
def _compact(
    offsets: np.ndarray,
    d0: int,
    d1: int,
    counts: np.ndarray,
    s_start: np.ndarray,
    s_end: np.ndarray,
    s_kind: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    kind: np.ndarray,
) -> None:
    base0 = offsets[d0]
    dst = 0
    for d in range(d0, d1):
        src = offsets[d] - base0 + (d - d0)
        for j in range(counts[d]):
            start[dst] = s_start[src + j]
            end[dst] = s_end[src + j]
            kind[dst] = s_kind[src + j]
            dst += 1


def _cut(
    cps: np.ndarray, offsets: np.ndarray, fold: np.ndarray, min_words: int, max_words: int, window: int, winnow: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Passages of every document: (counts per document, start, end, kind), in chunks of bounded scratch."""
    n_docs = offsets.shape[0] - 1
    table = _cut_table()
    counts = np.zeros(n_docs, dtype=np.int64)
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    kinds: list[np.ndarray] = []
    d0 = 0
    while d0 < n_docs:
        d1 = int(np.searchsorted(offsets, offsets[d0] + _CHUNK_CPS, side="right")) - 1
        d1 = min(max(d1, d0 + 1), n_docs)
        rows = int(offsets[d1] - offsets[d0]) + (d1 - d0)
        s_start = np.empty(rows, dtype=np.int64)
        s_end = np.empty(rows, dtype=np.int64)
        s_kind = np.empty(rows, dtype=np.uint8)
        _cut_chunk(cps, offsets, d0, d1, table, fold, min_words, max_words, window, winnow,
                   s_start, s_end, s_kind, counts)
        total = int(counts[d0:d1].sum())
        start = np.empty(total, dtype=np.int64)
        end = np.empty(total, dtype=np.int64)
        kind = np.empty(total, dtype=np.uint8)
        _compact(offsets, d0, d1, counts, s_start, s_end, s_kind, start, end, kind)
        starts.append(start)
        ends.append(end)
        kinds.append(kind)
        d0 = d1
    if not starts:
        return counts, np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.uint8)
    return counts, np.concatenate(starts), np.concatenate(ends), np.concatenate(kinds)


# ------------------------------------------------------------------------------ keys

_EMPTY = np.uint32(0xFFFFFFFF)
_DENSE_STEP = np.uint32(0x9E3779B1)


@nb.njit(inline="always", cache=True)
def _oph_add(x: np.uint64, mins: np.ndarray) -> None:
    """One-permutation MinHash: the high half of ``x`` picks a bin, the low half competes in it."""
    k = mins.shape[0]
    slot = ((x >> _S32) * _U64(k)) >> _S32
    v = np.uint32(x & _LOW32)
    if v < mins[slot]:
        mins[slot] = v


@nb.njit(inline="always", cache=True)
def _densify(mins: np.ndarray, src: np.ndarray) -> None:
    """Fill empty bins from the next non-empty bin to the right (rotation densification)."""
    k = mins.shape[0]
    for i in range(k):
        src[i] = mins[i]
    for i in range(k):
        if src[i] == _EMPTY:
            for j in range(1, k):
                q = (i + j) % k
                if src[q] != _EMPTY:
                    mins[i] = np.uint32(src[q] + np.uint32(j) * _DENSE_STEP)
                    break


_CHAR_MASK = _U64(0xFFFF)
_S48 = _U64(48)


@nb.njit(inline="always", cache=True)
def _char16(cp: np.uint32) -> np.uint64:
    """16 bits of a code point for the n-gram register: exact in the BMP, folded above."""
    x = _U64(cp)
    return (x ^ (x >> _S16) * _U64(0x9E37)) & _CHAR_MASK


@nb.njit(inline="always", cache=True)
def _gram(lo: np.uint64, hi: np.uint64, width: int) -> np.uint64:
    """Hash of the last ``width`` (1..8) characters held in the 2x64-bit register ``hi:lo``."""
    if width > 4:
        top = hi & ((_U64(1) << _U64(16 * (width - 4))) - _U64(1)) if width < 8 else hi
        return mix64(mix64(top ^ _U64(width)) ^ lo)
    if width < 4:
        lo &= (_U64(1) << _U64(16 * width)) - _U64(1)
    return mix64(lo + _U64(width) * _GOLDEN)


@nb.njit(cache=True)
def _grams(
    cps: np.ndarray, a: int, b: int, fold: np.ndarray, classes: np.ndarray, width: int, mins: np.ndarray
) -> int:
    """Feed the character ``width``-grams of ``fold[cps[a:b]]`` to the MinHash ``mins``; return the characters seen.

    The character sequence is the tokens' characters, with one space wherever a run of
    separators stood between two tokens. Fewer than ``width`` characters give one n-gram.
    """
    for q in range(mins.shape[0]):
        mins[q] = _EMPTY
    reg_lo = _U64(0)
    reg_hi = _U64(0)
    emitted = 0
    pending = False
    for i in range(a, b):
        cp = fold[cps[i]]
        if classes[cp] == _SEP:
            pending = emitted > 0
            continue
        if pending:
            reg_hi = (reg_hi << _S16) | (reg_lo >> _S48)
            reg_lo = (reg_lo << _S16) | _U64(0x20)
            emitted += 1
            if emitted >= width:
                _oph_add(_gram(reg_lo, reg_hi, width), mins)
            pending = False
        reg_hi = (reg_hi << _S16) | (reg_lo >> _S48)
        reg_lo = (reg_lo << _S16) | _char16(cp)
        emitted += 1
        if emitted >= width:
            _oph_add(_gram(reg_lo, reg_hi, width), mins)
    if 0 < emitted < width:
        _oph_add(_gram(reg_lo, reg_hi, emitted), mins)
    return emitted


@nb.njit(parallel=True, cache=True)
def _passage_keys_kernel(
    cps: np.ndarray,
    extra: np.ndarray,
    pa: np.ndarray,
    pb: np.ndarray,
    fold: np.ndarray,
    classes: np.ndarray,
    ngram: int,
    cjk_ngram: int,
    rows: int,
    h0: np.ndarray,
    key_block: np.ndarray,
    keyed: bool,
    ntok: np.ndarray,
    hi: np.ndarray,
    lo: np.ndarray,
    near: np.ndarray,
) -> None:
    """Tokens, exact key and near keys of every passage ``fold[cps[pa[p]:pb[p]]]``.

    A passage at ``pa >= len(cps)`` is read from ``extra[pa - len(cps):pb - len(cps)]``
    instead (text normalized in Python; ``fold`` changes nothing there: case folding is
    idempotent).

    The canonical token stream (each token's UTF-8, then ``0xFF``) is written to a scratch
    buffer and digested with BLAKE2b-128 right away; the same pass feeds the character
    n-grams (tokens joined by one space where any separator was) to the one-permutation
    MinHash of the near keys.
    """
    n = pa.shape[0]
    bands = near.shape[1]
    nbins = bands * rows
    for c0 in nb.prange((n + _BLOCK - 1) // _BLOCK):
        canon = np.empty(4096, dtype=np.uint8)
        mins = np.empty(nbins, dtype=np.uint32)
        src = np.empty(nbins, dtype=np.uint32)
        h = np.empty(8, dtype=np.uint64)
        m = np.empty(16, dtype=np.uint64)
        v = np.empty(16, dtype=np.uint64)
        for p in range(c0 * _BLOCK, min(n, (c0 + 1) * _BLOCK)):
            a = pa[p]
            b = pb[p]
            text = cps
            if a >= cps.shape[0]:
                text = extra
                a -= cps.shape[0]
                b -= cps.shape[0]
            if 5 * (b - a) > canon.shape[0]:
                canon = np.empty(5 * (b - a), dtype=np.uint8)
            # one pass: canonical stream, token counts and the n-grams of the usual width
            for q in range(nbins):
                mins[q] = _EMPTY
            width = ngram
            count = 0
            ns = 0
            reg_lo = _U64(0)
            reg_hi = _U64(0)
            emitted = 0
            pending = False
            in_word = False
            pos = 0
            for i in range(a, b):
                cp = fold[text[i]]
                c = classes[cp]
                if c == _SEP:
                    if in_word:
                        canon[pos] = 0xFF
                        pos += 1
                        in_word = False
                    pending = emitted > 0
                    continue
                if c == _WORD:
                    if not in_word:
                        count += 1
                        in_word = True
                    pos = _put_utf8(canon, pos, cp)
                else:
                    if in_word:
                        canon[pos] = 0xFF
                        pos += 1
                        in_word = False
                    count += 1
                    ns += 1
                    pos = _put_utf8(canon, pos, cp)
                    canon[pos] = 0xFF
                    pos += 1
                if pending:
                    reg_hi = (reg_hi << _S16) | (reg_lo >> _S48)
                    reg_lo = (reg_lo << _S16) | _U64(0x20)
                    emitted += 1
                    if emitted >= width:
                        _oph_add(_gram(reg_lo, reg_hi, width), mins)
                    pending = False
                reg_hi = (reg_hi << _S16) | (reg_lo >> _S48)
                reg_lo = (reg_lo << _S16) | _char16(cp)
                emitted += 1
                if emitted >= width:
                    _oph_add(_gram(reg_lo, reg_hi, width), mins)
            if in_word:
                canon[pos] = 0xFF
                pos += 1
            blake2b_into(canon, pos, h0, key_block, keyed, h, m, v)
            hi[p] = bswap64(h[0])
            lo[p] = bswap64(h[1])
            ntok[p] = count
            if emitted == 0:
                for k in range(bands):
                    near[p, k] = 0
                continue
            if 2 * ns > count and cjk_ngram != ngram:  # mostly scripts without spaces: their width
                _grams(text, a, b, fold, classes, cjk_ngram, mins)
            elif emitted < width:  # a passage shorter than n characters is one n-gram
                _oph_add(_gram(reg_lo, reg_hi, emitted), mins)
            _densify(mins, src)
            for k in range(bands):
                g = _GOLDEN ^ _U64(k + 1)
                for r in range(rows):
                    g = mix64((g ^ _U64(mins[k * rows + r])) * _FNV_PRIME)
                near[p, k] = g


def _keys(
    cps: np.ndarray,
    extra: np.ndarray,
    pa: np.ndarray,
    pb: np.ndarray,
    fold: np.ndarray,
    classes: np.ndarray,
    near_ngram: int,
    near_cjk_ngram: int,
    near_bands: int,
    near_rows: int,
    key: bytes | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Token counts, exact keys (hi, lo) and near keys of the spans (see :func:`_passage_keys_kernel`)."""
    n = pa.shape[0]
    ntok = np.empty(n, dtype=np.int64)
    hi = np.empty(n, dtype=np.uint64)
    lo = np.empty(n, dtype=np.uint64)
    near = np.empty((n, near_bands), dtype=np.uint64)
    h0, key_block = blake2b_params(key, _TOKEN_DOMAIN if key is None else _KEYED_DOMAIN)
    _passage_keys_kernel(cps, extra, pa, pb, fold, classes, near_ngram, near_cjk_ngram, near_rows, h0, key_block,
                         key is not None, ntok, hi, lo, near)
    return ntok, hi, lo, near


# ------------------------------------------------------------------------------ public API


@dataclass(frozen=True)
class PassageBatch:
    """The passages of a batch of texts, as flat arrays of one row per passage.

    Rows are sorted by ``doc``, then ``start``. ``start``/``end`` are code-point offsets into
    the *original* text (``texts[doc][start:end]``); ``kind`` is :data:`KIND_SENTENCES` (whole
    sentences; these never overlap) or :data:`KIND_WINDOW` (a window of a long group; windows
    overlap each other). ``ntok`` counts the tokens of the normalized passage. ``exact_hi`` /
    ``exact_lo`` are the halves of the exact key, ``near`` has one column per LSH band.
    ``num_docs`` is the number of input texts (texts without passages included).
    """

    doc: np.ndarray  # int64
    start: np.ndarray  # int64
    end: np.ndarray  # int64
    kind: np.ndarray  # uint8
    ntok: np.ndarray  # int64
    exact_hi: np.ndarray  # uint64
    exact_lo: np.ndarray  # uint64
    near: np.ndarray  # uint64, shape (n, near_bands)
    num_docs: int

    def __len__(self) -> int:
        return int(self.doc.shape[0])

    @property
    def doc_offsets(self) -> np.ndarray:
        """``num_docs + 1`` offsets: the passages of document ``d`` are rows ``[off[d], off[d + 1])``."""
        return np.searchsorted(self.doc, np.arange(self.num_docs + 1, dtype=np.int64)).astype(np.int64)


def _check_int(
    name: str, value: object, lo: int, hi: int | None = None, what: str | None = None, owner: str = "passages_batch"
) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or (hi is not None and value > hi):
        expected = what or (f"an int >= {lo}" if hi is None else f"an int in [{lo}, {hi}]")
        raise ConfigError(f"The '{name}' parameter of {owner} must be {expected}. Got {value!r} instead.")
    return value


def _check_key(key: object, owner: str) -> bytes | None:
    if key is None:
        return None
    if not isinstance(key, (bytes, bytearray)) or not 1 <= len(key) <= 64:
        raise ConfigError(f"The 'key' parameter of {owner} must be None or 1 to 64 bytes. Got {key!r} instead.")
    return bytes(key)


def _check_normalize(config: object, owner: str) -> NormalizeConfig:
    if config is None:
        return NormalizeConfig()
    if not isinstance(config, NormalizeConfig):
        raise ConfigError(
            f"The 'normalize_config' parameter of {owner} must be a NormalizeConfig or None. Got {config!r} instead."
        )
    return config


def _check_near(
    near_ngram: object, near_cjk_ngram: object, near_bands: object, near_rows: object, owner: str
) -> None:
    _check_int("near_ngram", near_ngram, 1, 8, owner=owner)
    _check_int("near_cjk_ngram", near_cjk_ngram, 1, 8, owner=owner)
    _check_int("near_bands", near_bands, 1, _MAX_LSH, owner=owner)
    _check_int("near_rows", near_rows, 1, _MAX_LSH, owner=owner)


def passages_batch(
    texts: Sequence[str],
    *,
    min_words: int = 8,
    max_words: int = 64,
    window: int = 32,
    stride: int = 16,
    near_ngram: int = 4,
    near_cjk_ngram: int = 2,
    near_bands: int = 4,
    near_rows: int = 3,
    key: bytes | None = None,
    normalize_config: NormalizeConfig | None = None,
) -> PassageBatch:
    """Cut every text into passages and key them (see the module docstring for the rules).

    Args:
        texts: the original texts; offsets index into them.
        min_words: a sentence with fewer tokens groups with its short neighbours, never with a longer one (>= 1).
        max_words: a group with more tokens is cut into windows (>= ``window``).
        window: tokens per window (>= 4).
        stride: mean distance between window anchors, in tokens (1 .. ``window``); the
            winnowing run is ``min(2 * stride - 1, window)`` k-grams.
        near_ngram: character n-gram of the near keys for space-separated text (1 .. 8).
        near_cjk_ngram: the same for passages mostly in scripts without spaces (1 .. 8).
        near_bands: near keys per passage (LSH bands, 1 .. 16).
        near_rows: MinHash values per band (1 .. 16).
        key: ``None`` for the exact stage's unkeyed BLAKE2b-128 (a one-passage text then
            has its document digest as exact key), or 1-64 secret bytes for a keyed BLAKE2b.
        normalize_config: the normalization of the exact stage (default NFKC, case folding,
            punctuation stripped).

    Returns:
        A :class:`PassageBatch`.

    Raises:
        ConfigError: (a ``ValueError``) when a parameter is out of range.
    """
    min_words = _check_int("min_words", min_words, 1)
    window = _check_int("window", window, 4)
    max_words = _check_int("max_words", max_words, window, what=f"an int >= window ({window})")
    stride = _check_int("stride", stride, 1, window, what=f"an int in [1, window ({window})]")
    _check_near(near_ngram, near_cjk_ngram, near_bands, near_rows, "passages_batch")
    key = _check_key(key, "passages_batch")
    ncfg = _check_normalize(normalize_config, "passages_batch")
    n_docs = len(texts)
    joined = "".join(texts)
    cps = _utf32(joined)
    offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(np.fromiter((len(t) for t in texts), dtype=np.int64, count=n_docs), out=offsets[1:])
    # the code points present, for the lazily filled tables (ASCII is always filled)
    distinct = np.empty(0, dtype=np.int64) if joined.isascii() else _distinct_code_points(cps).astype(np.int64)
    # 1. cut the original texts
    counts, start, end, kind = _cut(cps, offsets, _ANCHOR_FOLD.ready_for(distinct), min_words, max_words,
                                    window, min(2 * stride - 1, window))
    doc = np.repeat(np.arange(n_docs, dtype=np.int64), counts)
    # 2. where the normalized text of every passage is
    fold = _CASE_FOLD.ready_for(distinct) if ncfg.lowercase else _identity()
    extra, pa, pb = _normalized_spans(texts, joined, cps, offsets, distinct, fold, counts, doc, start, end, ncfg)
    del joined
    # 3. keys
    classes = char_classes(ncfg.strip_punctuation)
    ntok, hi, lo, near = _keys(cps, extra, pa, pb, fold, classes, near_ngram, near_cjk_ngram, near_bands, near_rows,
                               key)
    keep = ntok > 0
    if not keep.all():
        doc, start, end, kind, ntok, hi, lo, near = (x[keep] for x in (doc, start, end, kind, ntok, hi, lo, near))
    return PassageBatch(doc, start, end, kind, ntok, hi, lo, np.ascontiguousarray(near), n_docs)


def _utf32(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", errors="surrogatepass"), dtype=np.uint32)


def _normalized_spans(
    texts: Sequence[str],
    joined: str,
    cps: np.ndarray,
    offsets: np.ndarray,
    distinct: np.ndarray,
    fold: np.ndarray,
    counts: np.ndarray,
    doc: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    ncfg: NormalizeConfig,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where every passage's normalized text ``normalize(texts[doc][start:end])`` is: ``(extra, pa, pb)``.

    Normalizing a passage on its own is the definition. A document that is already in the
    Unicode form (ASCII always is; the whole batch is checked at once first) and whose code
    points each case-fold to exactly one code point needs no work: a slice of a normalized
    string is normalized (composition and reordering only look at code points inside the
    slice), and full case folding works code point by code point (no context, unlike
    ``lower``'s final sigma), so ``fold[cps[pa:pb]]`` (``pa``, ``pb``: the passage's
    offsets in the batch) is the passage's normalized text. Any other document (``ß``,
    ligatures, text not in NFKC) has each passage normalized by :func:`normalize` into
    ``extra``, and its ``pa``/``pb`` point past ``len(cps)``.
    """
    form = ncfg.unicode_form
    base = offsets[doc]
    pa = base + start
    pb = base + end
    n_docs = len(texts)
    if form == "none" or joined.isascii() or unicodedata.is_normalized(form, joined):
        slow = np.zeros(n_docs, dtype=np.bool_)
    else:
        slow = ~np.fromiter(
            (t.isascii() or unicodedata.is_normalized(form, t) for t in texts), dtype=np.bool_, count=n_docs
        )
    if ncfg.lowercase and (fold[distinct] == _NO_FOLD).any():
        slow |= _docs_with(cps, offsets, fold, _NO_FOLD)
    slow_docs = np.flatnonzero(slow & (counts > 0)).tolist()
    if not slow_docs:
        return np.empty(0, dtype=np.uint32), pa, pb
    extra: list[str] = []
    at = int(cps.shape[0])
    bounds = np.concatenate(([0], np.cumsum(counts))).tolist()
    starts = start.tolist()
    ends = end.tolist()
    for d in slow_docs:
        text = texts[d]
        for p in range(bounds[d], bounds[d + 1]):
            piece = normalize(text[starts[p] : ends[p]], ncfg)
            extra.append(piece)
            pa[p] = at
            at += len(piece)
            pb[p] = at
    return _utf32("".join(extra)), pa, pb


def passage_keys(
    texts: Sequence[str],
    *,
    near_ngram: int = 4,
    near_cjk_ngram: int = 2,
    near_bands: int = 4,
    near_rows: int = 3,
    key: bytes | None = None,
    normalize_config: NormalizeConfig | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The keys each text would get as one passage: ``(ntok, exact_hi, exact_lo, near)``.

    For a passage of :func:`passages_batch`, ``passage_keys([text[start:end]])`` gives its
    keys (with the same parameters); use it to look up a given excerpt (a short child
    document, a known boilerplate line) among passages. A text without tokens has
    ``ntok == 0``, near keys 0 and the exact key of the empty token stream (all such texts
    share it; :func:`passages_batch` never emits such a passage). Raises :class:`ConfigError`
    as :func:`passages_batch` does.
    """
    _check_near(near_ngram, near_cjk_ngram, near_bands, near_rows, "passage_keys")
    key = _check_key(key, "passage_keys")
    ncfg = _check_normalize(normalize_config, "passage_keys")
    normed = [normalize(t, ncfg) for t in texts]
    cps, offsets = encode_batch(normed)
    return _keys(cps, np.empty(0, dtype=np.uint32), offsets[:-1].copy(), offsets[1:].copy(), _identity(),
                 char_classes(ncfg.strip_punctuation), near_ngram, near_cjk_ngram, near_bands, near_rows, key)
