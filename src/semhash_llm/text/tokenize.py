"""CJK-aware tokenization, cryptographic 128-bit text digests and shingle hashes.

A batch of normalized texts is encoded once as UTF-32 code points (one ``uint32`` per
character) with document offsets; the kernels below then run over code points in
parallel, without creating Python objects per token:

* :func:`count_tokens` / :func:`hash_tokens` — split each document into tokens with the
  code-point class table of :func:`semhash_llm.text.normalize.char_classes` and hash every
  token to 64 bits;
* :func:`digest_documents` — the exact-duplicate key: BLAKE2b-128 of the normalized text
  (NFKC, case folded) with every run of whitespace collapsed to one space and the ends
  trimmed. Every other character keeps its identity: ``a = b`` is not ``a == b``, ``C++``
  is not ``C#``, ``$5`` is not ``€5``. Looser matches (punctuation, spacing inside words,
  typos) are the near-duplicate stages' job, which confirm them. The digest is
  cryptographic on purpose: a non-cryptographic one (FNV-1a, multiply-shift) lets anyone
  build two different texts with one digest and so delete a chosen document. Cost: ~3 µs
  per 2 KB document;
* :func:`doc_shingles` — word (or, for scripts without spaces, character) n-gram hashes
  from the token hashes of one document.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numba as nb
import numpy as np

from semhash_llm.config import NormalizeConfig, ShingleConfig
from semhash_llm.text.normalize import CharClass, char_classes, normalize

__all__ = [
    "encode_batch",
    "count_tokens",
    "hash_tokens",
    "digest_documents",
    "exact_text",
    "doc_shingles",
    "choose_ngram",
    "tokens",
    "shingle_hashes",
    "TokenizedBatch",
    "tokenize_batch",
]

_U64 = np.uint64
_FNV_OFFSET = _U64(0xCBF29CE484222325)
_FNV_PRIME = _U64(0x100000001B3)
_GOLDEN = _U64(0x9E3779B97F4A7C15)
_MIX1 = _U64(0xBF58476D1CE4E5B9)
_MIX2 = _U64(0x94D049BB133111EB)
_S27 = _U64(27)
_S30 = _U64(30)
_S31 = _U64(31)
_EXACT_DOMAIN = b"semhash-exact"  # BLAKE2b personalisation of the exact-duplicate key
_SEP = np.uint8(CharClass.SEPARATOR)
_WORD = np.uint8(CharClass.WORD)


@nb.njit(inline="always", cache=True)
def mix64(x: np.uint64) -> np.uint64:
    """SplitMix64's finalizer: a bijective 64-bit avalanche mix."""
    x ^= x >> _S30
    x *= _MIX1
    x ^= x >> _S27
    x *= _MIX2
    x ^= x >> _S31
    return x


def encode_batch(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Encode texts as one UTF-32 code-point array and ``len(texts) + 1`` offsets."""
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    blob = "".join(texts).encode("utf-32-le", errors="surrogatepass")
    cps = np.frombuffer(blob, dtype=np.uint32)
    return cps, offsets


@nb.njit(inline="always", cache=True)
def _utf8_len(cp: np.uint32) -> int:
    if cp < 0x80:
        return 1
    if cp < 0x800:
        return 2
    if cp < 0x10000:
        return 3
    return 4


@nb.njit(inline="always", cache=True)
def _put_utf8(out: np.ndarray, pos: int, cp: np.uint32) -> int:
    """Write ``cp`` as UTF-8 (surrogates as their 3-byte form) at ``out[pos]``; the new position."""
    if cp < 0x80:
        out[pos] = cp
        return pos + 1
    if cp < 0x800:
        out[pos] = 0xC0 | (cp >> 6)
        out[pos + 1] = 0x80 | (cp & 0x3F)
        return pos + 2
    if cp < 0x10000:
        out[pos] = 0xE0 | (cp >> 12)
        out[pos + 1] = 0x80 | ((cp >> 6) & 0x3F)
        out[pos + 2] = 0x80 | (cp & 0x3F)
        return pos + 3
    out[pos] = 0xF0 | (cp >> 18)
    out[pos + 1] = 0x80 | ((cp >> 12) & 0x3F)
    out[pos + 2] = 0x80 | ((cp >> 6) & 0x3F)
    out[pos + 3] = 0x80 | (cp & 0x3F)
    return pos + 4


@nb.njit(parallel=True, cache=True)
def count_tokens(cps: np.ndarray, offsets: np.ndarray, classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Number of tokens of every document of the batch, and the bytes of its canonical stream."""
    n = offsets.shape[0] - 1
    out = np.zeros(n, dtype=np.int64)
    nbytes = np.zeros(n, dtype=np.int64)
    for d in nb.prange(n):
        count = 0
        size = 0
        in_word = False
        for i in range(offsets[d], offsets[d + 1]):
            c = classes[cps[i]]
            if c == _WORD:
                if not in_word:
                    count += 1
                    in_word = True
                size += _utf8_len(cps[i])
            elif c == _SEP:
                in_word = False
            else:
                count += 1
                in_word = False
                size += _utf8_len(cps[i])
        out[d] = count
        nbytes[d] = size + count
    return out, nbytes


@nb.njit(parallel=True, cache=True)
def hash_tokens(
    cps: np.ndarray,
    offsets: np.ndarray,
    classes: np.ndarray,
    tok_offsets: np.ndarray,
    tok_hashes: np.ndarray,
    no_space: np.ndarray,
) -> None:
    """Fill the token hashes and no-space-token counts of every document."""
    n = offsets.shape[0] - 1
    for d in nb.prange(n):
        t = tok_offsets[d]
        h = _FNV_OFFSET
        in_word = False
        ns = 0
        for i in range(offsets[d], offsets[d + 1]):
            cp = cps[i]
            c = classes[cp]
            if c == _WORD:
                if not in_word:
                    h = _FNV_OFFSET
                    in_word = True
                h = (h ^ _U64(cp)) * _FNV_PRIME
            else:
                if in_word:
                    tok_hashes[t] = mix64(h)
                    t += 1
                    in_word = False
                if c != _SEP:
                    tok_hashes[t] = mix64((_FNV_OFFSET ^ _U64(cp)) * _FNV_PRIME)
                    t += 1
                    ns += 1
        if in_word:
            tok_hashes[t] = mix64(h)
            t += 1
        no_space[d] = ns


def exact_text(normalized: str) -> str:
    """What the exact key digests: the normalized text with whitespace runs collapsed to one
    space and the ends trimmed."""
    return " ".join(normalized.split())


def digest_documents(normalized: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """BLAKE2b-128 of every document's :func:`exact_text`, as (high, low) ``uint64`` halves."""
    n = len(normalized)
    out = bytearray(16 * n)
    blake = hashlib.blake2b
    for d in range(n):
        raw = exact_text(normalized[d]).encode("utf-8", errors="surrogatepass")
        out[16 * d : 16 * d + 16] = blake(raw, digest_size=16, person=_EXACT_DOMAIN).digest()
    halves = np.frombuffer(bytes(out), dtype=">u8").reshape(n, 2).astype(np.uint64)
    return np.ascontiguousarray(halves[:, 0]), np.ascontiguousarray(halves[:, 1])


@nb.njit(inline="always", cache=True)
def choose_ngram(ntok: int, no_space: int, ngram: int, char_ngram: int) -> int:
    """Character n-grams when most tokens are no-space-script characters, else word n-grams."""
    if 2 * no_space > ntok:
        return char_ngram
    return ngram


@nb.njit(cache=True)
def doc_shingles(tok_hashes: np.ndarray, start: int, end: int, n: int, out: np.ndarray) -> int:
    """Write the n-gram hashes of tokens ``tok_hashes[start:end]`` into ``out``; return the count.

    Fewer than ``n`` tokens give one shingle made of all of them; no token gives none.
    """
    ntok = end - start
    if ntok <= 0:
        return 0
    width = n if ntok >= n else ntok
    count = ntok - width + 1
    for s in range(count):
        h = _GOLDEN
        for j in range(width):
            h = (h ^ tok_hashes[start + s + j]) * _FNV_PRIME
            h = (h << _S31) | (h >> _U64(33))
        out[s] = mix64(h ^ _U64(width))
    return count


class TokenizedBatch:
    """Token hashes, digests and n-gram sizes of a batch of normalized texts."""

    __slots__ = ("tok_offsets", "tok_hashes", "no_space", "digest_hi", "digest_lo", "ngrams")

    def __init__(
        self,
        tok_offsets: np.ndarray,
        tok_hashes: np.ndarray,
        no_space: np.ndarray,
        digest_hi: np.ndarray,
        digest_lo: np.ndarray,
        ngrams: np.ndarray,
    ) -> None:
        self.tok_offsets = tok_offsets
        self.tok_hashes = tok_hashes
        self.no_space = no_space
        self.digest_hi = digest_hi
        self.digest_lo = digest_lo
        self.ngrams = ngrams

    @property
    def num_tokens(self) -> np.ndarray:
        """Tokens per document."""
        return np.diff(self.tok_offsets)


@nb.njit(cache=True)
def _ngrams(tok_offsets: np.ndarray, no_space: np.ndarray, ngram: int, char_ngram: int) -> np.ndarray:
    n = no_space.shape[0]
    out = np.empty(n, dtype=np.int64)
    for d in range(n):
        out[d] = choose_ngram(tok_offsets[d + 1] - tok_offsets[d], no_space[d], ngram, char_ngram)
    return out


def tokenize_batch(
    normalized: Sequence[str], classes: np.ndarray, shingle: ShingleConfig
) -> TokenizedBatch:
    """Tokenize a batch of already-normalized texts (see :func:`normalize`)."""
    cps, offsets = encode_batch(normalized)
    counts, _ = count_tokens(cps, offsets, classes)
    n = len(normalized)
    tok_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=tok_offsets[1:])
    tok_hashes = np.empty(int(tok_offsets[-1]), dtype=np.uint64)
    no_space = np.zeros(n, dtype=np.int64)
    hash_tokens(cps, offsets, classes, tok_offsets, tok_hashes, no_space)
    hi, lo = digest_documents(normalized)
    ngrams = _ngrams(tok_offsets, no_space, shingle.ngram, shingle.char_ngram)
    return TokenizedBatch(tok_offsets, tok_hashes, no_space, hi, lo, ngrams)


# ---------------------------------------------------------------------- Python helpers


def tokens(text: str, config: NormalizeConfig | None = None) -> list[str]:
    """The tokens of ``text`` after normalization, as strings: runs of word characters, and each
    other non-separator character on its own (vectorized over code points)."""
    cfg = config or NormalizeConfig()
    norm = normalize(text, cfg)
    if not norm:
        return []
    classes = char_classes(cfg.strip_punctuation)
    cls = classes[np.frombuffer(norm.encode("utf-32-le", errors="surrogatepass"), dtype=np.uint32)]
    word = cls == CharClass.WORD
    single = (cls != CharClass.SEPARATOR) & ~word
    starts_w = np.flatnonzero(word & ~np.r_[False, word[:-1]])
    ends_w = np.flatnonzero(word & ~np.r_[word[1:], False]) + 1
    starts_s = np.flatnonzero(single)
    starts = np.concatenate([starts_w, starts_s])
    ends = np.concatenate([ends_w, starts_s + 1])
    order = np.argsort(starts, kind="stable")
    return [norm[a:b] for a, b in zip(starts[order].tolist(), ends[order].tolist())]


def shingle_hashes(
    text: str, normalize_config: NormalizeConfig | None = None, shingle: ShingleConfig | None = None
) -> np.ndarray:
    """The distinct shingle hashes of one text (``uint64``), as MinHash sees them."""
    ncfg = normalize_config or NormalizeConfig()
    scfg = shingle or ShingleConfig()
    batch = tokenize_batch([normalize(text, ncfg)], char_classes(ncfg.strip_punctuation), scfg)
    ntok = int(batch.tok_offsets[1])
    out = np.empty(max(ntok, 1), dtype=np.uint64)
    k = doc_shingles(batch.tok_hashes, 0, ntok, int(batch.ngrams[0]), out)
    return np.unique(out[:k])
