"""Unicode normalization and the code-point classes the tokenizer works with.

Normalization happens in two places, both cheap:

* here, in Python (C speed): Unicode NFKC (or NFC) and case folding;
* in the tokenizer (:mod:`semhash_llm.text.tokenize`), which reads every code point's class
  from one lookup table: a *word* character continues a token, a *no-space* character
  (Han, kana, Thai, Lao, Khmer, Myanmar, ...) is a token of its own, and a *separator*
  (whitespace, control, and — with ``strip_punctuation`` — punctuation and symbols) ends
  a token. Runs of separators therefore fold into one boundary.
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from enum import IntEnum
from typing import Sequence

import numpy as np

from semhash_llm.config import NormalizeConfig

__all__ = ["CharClass", "char_classes", "normalize", "normalize_batch", "NO_SPACE_RANGES"]


class CharClass(IntEnum):
    """Class of a code point for tokenization."""

    SEPARATOR = 0
    WORD = 1
    NO_SPACE = 2  # a script written without spaces: each character is a token


# Scripts written without spaces between words: each character becomes a token, so a document
# in them is shingled by character n-grams. (Hangul is written with spaces and stays WORD.)
NO_SPACE_RANGES: tuple[tuple[int, int], ...] = (
    (0x0E00, 0x0E7F),  # Thai
    (0x0E80, 0x0EFF),  # Lao
    (0x0F00, 0x0FFF),  # Tibetan
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x312F),  # Bopomofo
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F),  # half-width Katakana
    (0x20000, 0x3134F),  # CJK extensions B-G
)


@functools.lru_cache(maxsize=2)
def char_classes(strip_punctuation: bool = True) -> np.ndarray:
    """The class (:class:`CharClass`) of every code point, as a ``uint8`` array of 0x110000.

    Letters, marks and digits are WORD; whitespace, control and unassigned code points are
    SEPARATOR; punctuation and symbols are SEPARATOR when ``strip_punctuation`` and else
    tokens of their own (NO_SPACE), so they still count as text.
    """
    table = np.zeros(sys.maxunicode + 1, dtype=np.uint8)
    punct = CharClass.SEPARATOR if strip_punctuation else CharClass.NO_SPACE
    # ASCII fast path, then everything else through unicodedata (about 0.4 s, once a process).
    for cp in range(sys.maxunicode + 1):
        cat = unicodedata.category(chr(cp))
        first = cat[0]
        if first in "LMN":
            table[cp] = CharClass.WORD
        elif first in "PS":
            table[cp] = punct
    for lo, hi in NO_SPACE_RANGES:
        seg = table[lo : hi + 1]
        seg[seg == CharClass.WORD] = CharClass.NO_SPACE
    table[0x5F] = punct  # '_' is punctuation (Pc)
    return table


def normalize(text: str, config: NormalizeConfig | None = None) -> str:
    """Unicode-normalize and case-fold ``text`` (separators are folded by the tokenizer)."""
    cfg = config or NormalizeConfig()
    if cfg.unicode_form != "none" and not text.isascii():
        text = unicodedata.normalize(cfg.unicode_form, text)
    if cfg.lowercase:
        text = text.lower() if text.isascii() else text.casefold()
    return text


def normalize_batch(texts: Sequence[str], config: NormalizeConfig | None = None) -> list[str]:
    """:func:`normalize` over a batch."""
    cfg = config or NormalizeConfig()
    return [normalize(t, cfg) for t in texts]
