"""Document frequencies of tokens in fixed memory, and the IDF weights built on them.

Attention-weighted MinHash weighs every token of a document by importance × IDF, with the
document frequencies taken from the corpus being deduplicated. A dict of every token of a
web crawl would not fit, so :class:`DocumentFrequency` counts them in a count-min sketch
(Cormode & Muthukrishnan 2005) with conservative update (Estan & Varghese 2002):
``depth`` rows of ``2**width_bits`` ``uint32`` counters; each document adds 1 to each of its
*distinct* tokens. A count is never under-estimated; it is over-estimated only by tokens
that share all ``depth`` counters, which conservative update keeps rare (the tests bound it
against exact counts). At the defaults (4 × 2**20 counters) the sketch takes 16 MiB
whatever the corpus size.

A corpus of a few hundred documents says little about which words are common, so the IDF
adds a prior of ``prior_documents`` pseudo-documents whose document frequencies come from
general word frequencies (:class:`WordFrequencyPrior`, built from the ``wordfreq`` package
when it is installed): the estimate is::

    df'(w) = df(w) + M · p(w),   N' = N + M,   idf(w) = ln((1 + N') / (1 + df'(w))) + 1

with ``p(w) = min(1, f(w) · L)`` the chance that a document of ``L`` tokens contains a word
of frequency ``f(w)``. For a tiny input (N ≪ M) the prior decides; for a large one the
corpus does. Without ``wordfreq`` (or for words it does not know) ``p(w) = 0`` and the IDF is
the usual smoothed one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numba as nb
import numpy as np

from semhash_llm.config import NormalizeConfig, ShingleConfig
from semhash_llm.text.normalize import char_classes, normalize_batch
from semhash_llm.text.tokenize import mix64, tokenize_batch

__all__ = ["DocumentFrequency", "WordFrequencyPrior", "token_hashes_of_words"]

logger = logging.getLogger(__name__)

_U64 = np.uint64
_ROW_SEEDS = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93,
                       0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 0x2545F4914F6CDD1D, 0x94D049BB133111EB],
                      dtype=np.uint64)


@nb.njit(cache=True)
def _add_documents(counts: np.ndarray, seeds: np.ndarray, shift: np.uint64, offsets: np.ndarray,
                   hashes: np.ndarray) -> None:
    depth = counts.shape[0]
    for d in range(offsets.shape[0] - 1):
        toks = np.sort(hashes[offsets[d]:offsets[d + 1]])
        for i in range(toks.shape[0]):
            if i > 0 and toks[i] == toks[i - 1]:
                continue  # a document counts each of its tokens once
            h = toks[i]
            low = np.uint32(0xFFFFFFFF)
            for r in range(depth):
                c = counts[r, mix64(h ^ seeds[r]) >> shift]
                if c < low:
                    low = c
            if low == np.uint32(0xFFFFFFFF):
                continue  # saturated
            new = low + np.uint32(1)
            for r in range(depth):  # conservative update: raise only the counters below the new minimum
                j = mix64(h ^ seeds[r]) >> shift
                if counts[r, j] < new:
                    counts[r, j] = new


@nb.njit(cache=True)
def _estimate(counts: np.ndarray, seeds: np.ndarray, shift: np.uint64, hashes: np.ndarray) -> np.ndarray:
    out = np.empty(hashes.shape[0], dtype=np.uint32)
    for i in range(hashes.shape[0]):
        low = np.uint32(0xFFFFFFFF)
        for r in range(counts.shape[0]):
            c = counts[r, mix64(hashes[i] ^ seeds[r]) >> shift]
            if c < low:
                low = c
        out[i] = low
    return out


def _check_int(name: str, value: object, lo: int, hi: int) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not lo <= int(value) <= hi:
        raise ValueError(f"The {name!r} parameter of DocumentFrequency must be an int in [{lo}, {hi}]. "
                         f"Got {value!r} instead.")
    return int(value)


def token_hashes_of_words(words: Sequence[str], normalize_config: NormalizeConfig | None = None) -> np.ndarray:
    """The token hash of each word as the tokenizer computes it (``uint64``; 0 for a word that
    is not exactly one token, e.g. empty or with a separator inside)."""
    cfg = normalize_config or NormalizeConfig()
    tb = tokenize_batch(normalize_batch(list(words), cfg), char_classes(cfg.strip_punctuation), ShingleConfig())
    ntok = np.diff(tb.tok_offsets)
    out = np.zeros(len(words), dtype=np.uint64)
    one = np.flatnonzero(ntok == 1)
    out[one] = tb.tok_hashes[tb.tok_offsets[one]]
    return out


class WordFrequencyPrior:
    """General word frequencies by token hash: the prior of :meth:`DocumentFrequency.idf`.

    ``hashes`` (sorted, unique ``uint64`` token hashes) and ``frequencies`` (per-token
    frequency in running text, in (0, 1]).
    """

    def __init__(self, hashes: np.ndarray, frequencies: np.ndarray) -> None:
        hashes = np.asarray(hashes, dtype=np.uint64)
        frequencies = np.asarray(frequencies, dtype=np.float64)
        if hashes.shape != frequencies.shape or hashes.ndim != 1:
            raise ValueError("WordFrequencyPrior needs 1-D hashes and frequencies of one length; got shapes "
                             f"{hashes.shape} and {frequencies.shape}")
        if frequencies.size and not (np.all(np.isfinite(frequencies)) and frequencies.min() > 0
                                     and frequencies.max() <= 1):
            raise ValueError("WordFrequencyPrior frequencies must be finite and in (0, 1]")
        order = np.argsort(hashes, kind="stable")
        hashes, frequencies = hashes[order], frequencies[order]
        keep = np.r_[True, hashes[1:] != hashes[:-1]] & (hashes != 0)
        self.hashes = hashes[keep]
        self.frequencies = frequencies[keep]

    def __len__(self) -> int:
        return int(self.hashes.size)

    @classmethod
    def from_words(cls, words: Sequence[str], frequencies: Sequence[float],
                   normalize_config: NormalizeConfig | None = None) -> WordFrequencyPrior:
        """From words and their frequencies; words that normalize to the same token add up."""
        h = token_hashes_of_words(words, normalize_config)
        f = np.asarray(frequencies, dtype=np.float64)
        if f.shape != (len(words),):
            raise ValueError(f"WordFrequencyPrior.from_words needs one frequency per word; got {f.shape[0]} "
                             f"frequencies for {len(words)} words")
        order = np.argsort(h, kind="stable")
        h, f = h[order], f[order]
        starts = np.flatnonzero(np.r_[True, h[1:] != h[:-1]]) if h.size else np.empty(0, np.int64)
        summed = np.minimum(np.add.reduceat(f, starts), 1.0) if h.size else f
        return cls(h[starts] if h.size else h, summed)

    @classmethod
    def from_wordfreq(cls, languages: Sequence[str] = ("en",), top_n: int = 50_000,
                      normalize_config: NormalizeConfig | None = None) -> WordFrequencyPrior | None:
        """The ``top_n`` words of each language from the ``wordfreq`` package; ``None`` when it
        is not installed (the IDF then has no prior)."""
        try:
            import wordfreq
        except ImportError:
            logger.info("wordfreq is not installed: IDF from the corpus alone (pip install wordfreq)")
            return None
        words: list[str] = []
        freqs: list[float] = []
        for lang in languages:
            for w in wordfreq.top_n_list(lang, top_n):
                words.append(w)
                freqs.append(wordfreq.word_frequency(w, lang))
        keep = [i for i, f in enumerate(freqs) if f > 0]
        return cls.from_words([words[i] for i in keep], [freqs[i] for i in keep], normalize_config)

    def lookup(self, hashes: np.ndarray) -> np.ndarray:
        """The frequency of each token hash (0 where the prior does not know it)."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        if self.hashes.size == 0:
            return np.zeros(hashes.shape, dtype=np.float64)
        pos = np.minimum(np.searchsorted(self.hashes, hashes), self.hashes.size - 1)
        return np.where(self.hashes[pos] == hashes, self.frequencies[pos], 0.0)


class DocumentFrequency:
    """Document frequencies of token hashes in a fixed-size count-min sketch.

    Feed it the token hashes of every document once (:meth:`add`, CSR like
    :class:`~semhash_llm.text.tokenize.TokenizedBatch`); then :meth:`df` and :meth:`idf`.
    """

    def __init__(self, width_bits: int = 20, depth: int = 4, prior: WordFrequencyPrior | None = None,
                 prior_documents: int = 1000, prior_doc_tokens: int = 300) -> None:
        self.width_bits = _check_int("width_bits", width_bits, 8, 30)
        self.depth = _check_int("depth", depth, 1, len(_ROW_SEEDS))
        self.prior_documents = _check_int("prior_documents", prior_documents, 0, 10**12)
        self.prior_doc_tokens = _check_int("prior_doc_tokens", prior_doc_tokens, 1, 10**9)
        self.prior = prior
        self.counts = np.zeros((self.depth, 1 << self.width_bits), dtype=np.uint32)
        self._seeds = _ROW_SEEDS[: self.depth].copy()
        self._shift = _U64(64 - self.width_bits)
        self.num_docs = 0

    @property
    def nbytes(self) -> int:
        return int(self.counts.nbytes)

    def add(self, tok_offsets: np.ndarray, tok_hashes: np.ndarray) -> None:
        """Count each distinct token of each document (``tok_hashes[tok_offsets[d]:tok_offsets[d+1]]``) once."""
        offsets = np.asarray(tok_offsets, dtype=np.int64)
        hashes = np.asarray(tok_hashes, dtype=np.uint64)
        if offsets.ndim != 1 or offsets.size == 0 or offsets[0] < 0 or np.any(np.diff(offsets) < 0) \
                or offsets[-1] > hashes.size:
            raise ValueError("DocumentFrequency.add needs tok_offsets: 1-D, non-decreasing, from >= 0 to at most "
                             f"len(tok_hashes) ({hashes.size}); got {offsets[:5]}...")
        _add_documents(self.counts, self._seeds, self._shift, offsets, hashes)
        self.num_docs += int(offsets.size - 1)

    def df(self, hashes: np.ndarray) -> np.ndarray:
        """Estimated document frequency of each token hash (never below the true count)."""
        return _estimate(self.counts, self._seeds, self._shift, np.ascontiguousarray(hashes, dtype=np.uint64))

    def idf(self, hashes: np.ndarray) -> np.ndarray:
        """Smoothed IDF of each token hash, ``float32`` (see the module docstring)."""
        hashes = np.ascontiguousarray(hashes, dtype=np.uint64)
        df = self.df(hashes).astype(np.float64)
        n = float(self.num_docs)
        if self.prior is not None and self.prior_documents:
            m = float(self.prior_documents)
            p = np.minimum(1.0, self.prior.lookup(hashes) * self.prior_doc_tokens)
            df = df + m * p
            n = n + m
        return (np.log((1.0 + n) / (1.0 + df)) + 1.0).astype(np.float32)
