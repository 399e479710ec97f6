"""Realistic perturbations used to plant duplicates: codespell typos, OCR-like noise, light copy variation."""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence

__all__ = ["apply_typos", "apply_ocr_noise", "vary_copy", "SIGNATURES"]

# Character confusions typical of OCR output (rendered glyphs confused by shape).
_OCR_SUBS: tuple[tuple[str, str], ...] = (
    ("rn", "m"), ("m", "rn"), ("cl", "d"), ("d", "cl"), ("l", "1"), ("I", "l"), ("i", "l"), ("O", "0"),
    ("o", "0"), ("e", "c"), ("c", "e"), ("h", "b"), ("n", "h"), ("u", "v"), ("S", "5"), ("B", "8"),
    ("a", "o"), ("t", "f"), ("f", "t"), ("vv", "w"), ("w", "vv"), (".", ","), (",", "."),
)

# Lines that forums, mailing lists and news sites append to a post.
SIGNATURES: tuple[str, ...] = (
    "Sent from my iPhone",
    "-- \nPosted via the web interface",
    "Share this article: Facebook | Twitter | Email",
    "Copyright (c) All rights reserved.",
    "Click here to subscribe to our newsletter.",
    "Reprinted with permission.",
    "Comments (0) | Permalink",
    "-- \nThis message was scanned for viruses.",
)

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")

_WORD = re.compile(r"[A-Za-z]+")


def apply_typos(text: str, typos: Mapping[str, Sequence[str]], rng: random.Random, k: int) -> tuple[str, int]:
    """Replace up to ``k`` words that have a real misspelling in codespell's list; returns (text, replaced)."""
    spots = [m for m in _WORD.finditer(text) if m.group(0).lower() in typos]
    if not spots:
        return text, 0
    chosen = sorted(rng.sample(spots, min(k, len(spots))), key=lambda m: m.start())
    out: list[str] = []
    last = 0
    for m in chosen:
        word = m.group(0)
        wrong = rng.choice(list(typos[word.lower()]))
        if word[0].isupper():
            wrong = wrong[0].upper() + wrong[1:]
        out.append(text[last : m.start()])
        out.append(wrong)
        last = m.end()
    out.append(text[last:])
    return "".join(out), len(chosen)


def apply_ocr_noise(text: str, rng: random.Random, k: int) -> str:
    """Apply ``k`` OCR-like edits: glyph confusions, a dropped or doubled character, a lost or split space."""
    for _ in range(k):
        op = rng.random()
        if op < 0.6:
            cands = [(i, a, b) for a, b in _OCR_SUBS for i in _find_all(text, a)]
            if cands:
                i, a, b = rng.choice(cands)
                text = text[:i] + b + text[i + len(a) :]
                continue
        letters = [i for i, ch in enumerate(text) if ch.isalpha()]
        spaces = [i for i, ch in enumerate(text) if ch == " "]
        if op < 0.75 and letters:
            i = rng.choice(letters)
            text = text[:i] + text[i + 1 :]
        elif op < 0.9 and letters:
            i = rng.choice(letters)
            text = text[:i] + text[i] + text[i:]
        elif spaces:
            i = rng.choice(spaces)
            text = text[:i] + text[i + 1 :] if rng.random() < 0.5 else text[:i] + "  " + text[i + 1 :]
    return text


def _find_all(text: str, sub: str) -> list[int]:
    out, i = [], text.find(sub)
    while i >= 0:
        out.append(i)
        i = text.find(sub, i + 1)
    return out


def _random_date(rng: random.Random) -> str:
    y, mo, d = rng.randint(2003, 2012), rng.randint(1, 12), rng.randint(1, 28)
    hh, mm = rng.randint(0, 23), rng.randint(0, 59)
    style = rng.randrange(4)
    if style == 0:
        return f"{y:04d}-{mo:02d}-{d:02d}"
    if style == 1:
        return f"{_MONTHS[mo - 1]} {d}, {y} {hh % 12 or 12}:{mm:02d} {'AM' if hh < 12 else 'PM'}"
    if style == 2:
        return f"Posted {d} {_MONTHS[mo - 1][:3]} {y}"
    return f"Updated {d:02d}/{mo:02d}/{y} {hh:02d}:{mm:02d}"


def vary_copy(text: str, rng: random.Random) -> tuple[str, list[str]]:
    """A light variation of a hot-spot copy: a date line, whitespace changes, a signature line (1–3 of them)."""
    ops = rng.sample(["date", "whitespace", "signature"], rng.randint(1, 3))
    for op in ops:
        if op == "date":
            date = _random_date(rng)
            text = f"{date}\n{text}" if rng.random() < 0.5 else f"{text}\n{date}"
        elif op == "whitespace":
            parts = text.split(" ")
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(len(parts))
                parts[i] = parts[i] + rng.choice(["", " ", "\n", "\t"])
            text = " ".join(parts)
            if rng.random() < 0.5:
                text = text.replace("\n", "\n\n")
            text = text + rng.choice(["", "\n", "  "])
        else:
            text = f"{text.rstrip()}\n\n{rng.choice(SIGNATURES)}"
    return text, sorted(ops)
