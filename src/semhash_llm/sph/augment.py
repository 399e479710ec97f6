"""Near-duplicate views of a text, for training and checking the SPH hyperplanes.

A view keeps the content and changes the surface the way copies on the web differ:
a few words dropped, neighbours swapped, a word repeated, a character typo, case
changes, a little text cut from either end.
"""

from __future__ import annotations

import numpy as np


def _typo(word: str, rng: np.random.Generator) -> str:
    if len(word) < 4:
        return word
    i = int(rng.integers(1, len(word) - 2))
    op = int(rng.integers(3))
    if op == 0:
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if op == 1:
        return word[:i] + word[i + 1 :]
    return word[:i] + word[i] + word[i:]


def near_duplicate(text: str, rng: np.random.Generator, strength: float = 0.1) -> str:
    """A perturbed copy of ``text``; ``strength`` is the share of words touched (about)."""
    words = text.split()
    if len(words) < 4:
        return text
    n = len(words)
    if n > 20 and rng.random() < 0.5:
        cut = int(rng.integers(1, max(2, int(n * strength * 0.8))))
        words = words[cut:] if rng.random() < 0.5 else words[:-cut]
    out: list[str] = []
    for w in words:
        r = rng.random()
        if r < strength * 0.3:
            continue
        if r < strength * 0.55:
            out.append(_typo(w, rng))
        elif r < strength * 0.7:
            out.extend([w, w])
        elif r < strength * 0.85:
            out.append(w.upper() if rng.random() < 0.5 else w.lower())
        else:
            out.append(w)
    for _ in range(max(1, int(len(out) * strength * 0.15))):
        if len(out) > 2:
            i = int(rng.integers(len(out) - 1))
            out[i], out[i + 1] = out[i + 1], out[i]
    return " ".join(out) if out else text
