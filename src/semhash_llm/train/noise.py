"""A realistic noise model for the verifier's short positives: what OCR and typing do to a text.

Real OCR noise is not random letters (issue 25). This module's :func:`ocr_noise` makes, at a
chosen rate of the text's words, the edits a scanner makes:

* visually confusable glyphs, both ways: ``h``/``b``, ``li``/``d``/``il``, ``n``/``u``,
  ``rn``/``m``, ``c``/``e``, ``l``/``1``/``I``, ``ll``/``U``, long s ``ſ``/``f`` for ``s``,
  ``vv``/``w``, ``0``/``o``, ``5``/``S``;
* a word split or two merged (a space lost or added), hyphenation left in
  (``deside-ratum``, ``deside- ratum``);
* punctuation dropped, doubled or read as a neighbour (``.``/``,``, ``;``/``:``).

:func:`typo_noise` makes the edits a typist makes: an adjacent-key substitution (QWERTY), two
letters transposed, a letter doubled or dropped, and, where a list of real misspellings is given
(:func:`read_misspellings`: codespell's, the training half only), a common misspelling. The two
compose (:func:`noisy_copy`). Every function takes its own :class:`random.Random`, so pairs are
deterministic for a seed.

The benchmark plants its own noise (:mod:`semhash_llm.bench.perturb`: a smaller confusion table
and codespell's whole list); this model is separate so that the verifier's recall on the
benchmark measures generalisation. Of codespell's list only the words whose hash falls in the
training half are used here (:func:`read_misspellings`).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from semhash_llm.sketch.edit import char_error_rate
from semhash_llm.verify.features import KEYBOARD_NEIGHBOURS

__all__ = ["GLYPH_CONFUSIONS", "ocr_noise", "typo_noise", "noisy_copy", "read_misspellings", "char_error_rate"]

#: (printed, read as): each applies where the left side occurs in a word.
GLYPH_CONFUSIONS: tuple[tuple[str, str], ...] = (
    ("h", "b"), ("b", "h"), ("li", "d"), ("d", "li"), ("d", "il"), ("il", "d"), ("n", "u"), ("u", "n"),
    ("rn", "m"), ("m", "rn"), ("c", "e"), ("e", "c"), ("l", "1"), ("l", "I"), ("I", "l"), ("1", "l"),
    ("ll", "U"), ("U", "ll"), ("s", "ſ"), ("s", "f"), ("vv", "w"), ("w", "vv"), ("o", "0"), ("O", "0"),
    ("S", "5"), ("cl", "d"), ("d", "cl"), ("t", "f"), ("f", "t"), ("a", "o"), ("i", "l"), ("r", "t"),
)
_PUNCT_SWAPS = {".": ",", ",": ".", ";": ":", ":": ";", "'": "’", "’": "'", "!": "l", "?": "7"}
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


def _glyph(word: str, rng: random.Random) -> str:
    spots = [(i, a, b) for a, b in GLYPH_CONFUSIONS for i in range(len(word)) if word.startswith(a, i)]
    if not spots:
        return word
    i, a, b = rng.choice(spots)
    return word[:i] + b + word[i + len(a):]


def ocr_noise(text: str, rng: random.Random, rate: float) -> str:
    """``text`` with about ``rate`` of its words touched by an OCR edit (module docstring)."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"ocr_noise: rate must be in [0, 1]; got {rate}")
    tokens = re.split(r"(\s+)", text)
    out: list[str] = []
    for k, tok in enumerate(tokens):
        if not tok or tok.isspace() or rng.random() >= rate:
            out.append(tok)
            continue
        r = rng.random()
        if r < 0.6:
            out.append(_glyph(tok, rng))
        elif r < 0.7 and len(tok) >= 6:  # a split word
            cut = rng.randint(2, len(tok) - 2)
            out.append(tok[:cut] + " " + tok[cut:])
        elif r < 0.8 and len(tok) >= 7:  # hyphenation left in
            cut = rng.randint(3, len(tok) - 3)
            out.append(tok[:cut] + rng.choice(("-", "- ", "-\n")) + tok[cut:])
        elif r < 0.88 and k + 1 < len(tokens) and tokens[k + 1].isspace():  # merged with the next word
            out.append(tok)
            tokens[k + 1] = ""
        else:  # punctuation: dropped, doubled or misread
            spots = [i for i, ch in enumerate(tok) if not ch.isalnum()]
            if not spots:
                out.append(_glyph(tok, rng))
                continue
            i = rng.choice(spots)
            ch = tok[i]
            op = rng.random()
            repl = "" if op < 0.4 else ch + ch if op < 0.7 else _PUNCT_SWAPS.get(ch, "")
            out.append(tok[:i] + repl + tok[i + 1:])
    return "".join(out)


def _keystroke(word: str, rng: random.Random) -> str:
    letters = [i for i, ch in enumerate(word) if ch.isalpha()]
    if not letters:
        return word
    i = rng.choice(letters)
    op = rng.randrange(4)
    if op == 0:
        near = KEYBOARD_NEIGHBOURS.get(word[i].lower(), "")
        if near:
            ch = rng.choice(near)
            return word[:i] + (ch.upper() if word[i].isupper() else ch) + word[i + 1:]
    if op == 1 and i + 1 < len(word) and word[i + 1].isalpha():
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    if op == 2 and len(word) > 3:
        return word[:i] + word[i + 1:]
    return word[:i] + word[i] + word[i:]


def typo_noise(text: str, rng: random.Random, rate: float, misspellings: Mapping[str, Sequence[str]] | None = None) -> str:
    """``text`` with about ``rate`` of its words mistyped: a common misspelling where
    ``misspellings`` has one for the word, else one keystroke (module docstring)."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"typo_noise: rate must be in [0, 1]; got {rate}")

    def one(m: re.Match[str]) -> str:
        word = m.group(0)
        if len(word) < 3 or rng.random() >= rate:
            return word
        wrong = (misspellings or {}).get(word.lower())
        if wrong and rng.random() < 0.6:
            w = rng.choice(list(wrong))
            return w[:1].upper() + w[1:] if word[:1].isupper() else w
        return _keystroke(word, rng)

    return _WORD.sub(one, text)


def noisy_copy(text: str, rng: random.Random, misspellings: Mapping[str, Sequence[str]] | None = None,
               max_cer: float = 0.1) -> str:
    """A noisy copy of ``text``: OCR edits, typos or both, at a word rate drawn so that most
    copies fall below 5% character error and a tail reaches ``max_cer``; never ``text`` itself."""
    for _ in range(8):
        band = rng.random()
        rate = rng.uniform(0.02, 0.08) if band < 0.45 else rng.uniform(0.08, 0.2) if band < 0.9 else \
            rng.uniform(0.2, 0.35)
        mode = rng.random()
        out = text
        if mode < 0.45:
            out = ocr_noise(out, rng, rate)
        elif mode < 0.8:
            out = typo_noise(out, rng, rate, misspellings)
        else:
            out = typo_noise(ocr_noise(out, rng, rate / 2), rng, rate / 2, misspellings)
        if out != text and char_error_rate(text, out) <= max_cer:
            return out
    return typo_noise(text, rng, 1.0 / max(1, len(text.split())), None) if text.split() else text


def read_misspellings(data_dir: str | Path, part: str = "train") -> dict[str, list[str]]:
    """Codespell's dictionary (``codespell_typos/dictionary.txt`` under ``data_dir``) as correct
    word → misspellings, only the correct words whose BLAKE2b hash puts them in ``part``
    (``train``: half of them; ``rest``: the other half). ``{}`` where the file is absent."""
    if part not in ("train", "rest"):
        raise ValueError(f"read_misspellings: part must be 'train' or 'rest'; got {part!r}")
    path = Path(data_dir) / "codespell_typos" / "dictionary.txt"
    if not path.is_file():
        return {}
    out: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if "->" not in line:
            continue
        wrong, right = line.split("->", 1)
        wrong = wrong.strip().lower()
        for correct in (c.strip().lower() for c in right.split(",")):
            if not correct or " " in correct or not correct.isalpha() or not wrong.isalpha():
                continue
            half = hashlib.blake2b(f"misspelling:{correct}".encode(), digest_size=1).digest()[0] & 1
            if (half == 0) == (part == "train"):
                out.setdefault(correct, []).append(wrong)
    return out
