"""Containment of a short text in a longer one, over shingles: |A ∩ B| / |A|.

Passage keys decide containment for documents of several passages: a share of found
passages says enough. A child of one or two passages has no such share — one sentence of
a question found near-exactly in a long page is as often a lookalike ("how does it feel to
be a celebrity?" / "... a snowman?") or a word swap (PAWS) as a copy. For those, the
passage stage re-reads both texts and asks two questions of the child's shingles:

* **character n-grams** (default 4) of its tokens joined by one space: typo-tolerant (one
  changed letter breaks at most n grams), blind to word order;
* **word n-grams** (default 3): order-aware (a swap of two phrases breaks the grams across
  them), but a typo breaks up to n of them.

The score is the smaller of the two containments: a typo costs the character side little
and the word side one or two grams at a sentence's end; a word swap or a replaced word
costs the word side or the character side a lot. Tokens follow the exact stage (Unicode
normalization, case folding, punctuation as separator, one token per character of scripts
without spaces); for text mostly in such scripts the character side uses ``cjk_ngram``.
"""

from __future__ import annotations

from semhash_llm.config import NormalizeConfig
from semhash_llm.text.normalize import CharClass, char_classes
from semhash_llm.text.tokenize import tokens

__all__ = ["tokens_of", "shingle_containment"]


def tokens_of(text: str, config: NormalizeConfig | None = None) -> tuple[list[str], int]:
    """The canonical tokens of ``text`` and how many are single characters of no-space scripts."""
    cfg = config or NormalizeConfig()
    toks = tokens(text, cfg)
    classes = char_classes(cfg.strip_punctuation)
    return toks, sum(1 for t in toks if len(t) == 1 and classes[ord(t)] == CharClass.NO_SPACE)


def _char_grams(tokens: list[str], n: int) -> set[str]:
    s = " ".join(tokens)
    if len(s) <= n:
        return {s} if s else set()
    return {s[i:i + n] for i in range(len(s) - n + 1)}


def _word_grams(tokens: list[str], n: int) -> set[tuple[str, ...]]:
    if len(tokens) <= n:
        return {tuple(tokens)} if tokens else set()
    return {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


def shingle_containment(child: str, parent: str, *, char_ngram: int = 4, cjk_ngram: int = 2, word_ngram: int = 3,
                        config: NormalizeConfig | None = None) -> float:
    """min(character-n-gram, word-n-gram) containment of ``child`` in ``parent``, in [0, 1].

    0.0 when the child has no token. Asymmetric: a child found whole inside a much longer
    parent scores 1.0; the parent in the child scores its share.
    """
    if min(char_ngram, cjk_ngram, word_ngram) < 1:
        raise ValueError(f"n-gram sizes must be >= 1, got char_ngram={char_ngram}, cjk_ngram={cjk_ngram}, "
                         f"word_ngram={word_ngram}")
    ct, c_ns = tokens_of(child, config)
    if not ct:
        return 0.0
    pt, _ = tokens_of(parent, config)
    if not pt:
        return 0.0
    n = cjk_ngram if 2 * c_ns > len(ct) else char_ngram
    a = _char_grams(ct, n)
    char_share = len(a & _char_grams(pt, n)) / len(a)
    if char_share == 0.0:
        return 0.0
    # In no-space scripts each character is a token: the word side is then character
    # word_ngram-grams, the character side cjk_ngram-grams.
    w = _word_grams(ct, word_ngram)
    word_share = len(w & _word_grams(pt, word_ngram)) / len(w)
    return min(char_share, word_share)
