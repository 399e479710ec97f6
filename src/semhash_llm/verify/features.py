"""Pair features: what a siamese encoder cannot see — where two texts differ, and how.

MGFN encodes each document on its own; two short texts that differ in one word ("… in Russia?"
/ "… in Mexico?", a PAWS word swap) land close together in any embedding space, and so do a
text and its OCR-noisy copy — yet one pair is two documents and the other one document. What
tells them apart is the *difference*: a typo's unmatched word has a near spelling on the other
side, a swapped entity or a replaced content word does not; a word swap keeps the word set and
breaks the order; a negation adds or drops a ``not``.

:func:`pair_features` aligns the two texts' words and returns, per pair, :data:`FEATURE_NAMES`
(all in [0, ~1]): overlap of character trigrams, of words and of word bigrams, the order
agreement of the common words, the unmatched words with and without a near spelling on the
other side (as shares and as counts), the shared words moved out of order, unmatched capitalized or numeric words, a negation
mismatch, the length ratio and the length itself. The boundary network reads them beside
``[u, v, u ⊙ v, |u − v|]``; :func:`char_jaccard` alone is the cheap screen that settles a
candidate pair without the network.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from difflib import SequenceMatcher

import numpy as np

__all__ = ["FEATURE_NAMES", "NUM_PAIR_FEATURES", "pair_features", "char_jaccard", "char_jaccard_indexed",
           "char_trigrams"]

FEATURE_NAMES: tuple[str, ...] = (
    "char3_jaccard", "word_jaccard", "bigram_jaccard", "order_agreement", "displaced_words",
    "typo_share", "changed_share", "changed_count", "changed_per_word", "changed_names_numbers",
    "negation_mismatch", "length_ratio", "log_words",
)
NUM_PAIR_FEATURES = len(FEATURE_NAMES)

_WORD = re.compile(r"\w+", re.UNICODE)
_NEGATIONS = frozenset({"not", "no", "never", "nor", "none", "nobody", "nothing", "neither", "cannot", "t"})
_SPACES = re.compile(r"\s+")


def char_trigrams(text: str) -> set[str]:
    """Character trigrams of the lower-cased text with whitespace runs folded to one space."""
    t = _SPACES.sub(" ", text.lower()).strip()
    if len(t) < 3:
        return {t} if t else set()
    return {t[i:i + 3] for i in range(len(t) - 2)}


def _jaccard(a: set[str] | frozenset[str], b: set[str] | frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def char_jaccard(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
    """Jaccard similarity of the character trigram sets of ``a[i]`` and ``b[i]``, float32."""
    if len(a) != len(b):
        raise ValueError(f"char_jaccard: {len(a)} left texts but {len(b)} right texts")
    return np.fromiter((_jaccard(char_trigrams(x), char_trigrams(y)) for x, y in zip(a, b)), dtype=np.float32,
                       count=len(a))


def char_jaccard_indexed(texts: Sequence[str], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`char_jaccard` of the pairs ``(texts[a[i]], texts[b[i]])``, each text's trigrams made once."""
    if len(a) != len(b):
        raise ValueError(f"char_jaccard_indexed: {len(a)} left indices but {len(b)} right indices")
    grams = [frozenset(char_trigrams(t)) for t in texts]
    return np.fromiter((_jaccard(grams[x], grams[y]) for x, y in zip(np.asarray(a).tolist(), np.asarray(b).tolist())),
                       dtype=np.float32, count=len(a))


def _near_spelling(word: str, others: Sequence[str], letters: dict[str, Counter[str]]) -> bool:
    """Whether ``others`` holds a word within a small edit of ``word`` (a typo or OCR slip):
    ``SequenceMatcher`` ratio >= 0.75, tried only where the shared letters (a multiset bound of
    that ratio, what ``SequenceMatcher.quick_ratio`` computes) can reach it. ``letters``: each
    word's letter counts."""
    n = len(word)
    mine = letters[word]
    for other in others:
        m = len(other)
        if abs(n - m) > 2 or (n <= 3 and m <= 3 and word != other):
            continue
        if 2 * sum((mine & letters[other]).values()) < 0.75 * (n + m):
            continue
        if SequenceMatcher(None, word, other, autojunk=False).ratio() >= 0.75:
            return True
    return False


def _split_glued(word: str, vocab: set[str]) -> tuple[str, str] | None:
    """The two words of ``vocab`` that ``word`` glues together (a dropped space), if any."""
    for i in range(1, len(word)):
        if word[:i] in vocab and word[i:] in vocab:
            return word[:i], word[i:]
    return None


def _one(a: str, b: str) -> list[float]:
    wa_raw, wb_raw = _WORD.findall(a), _WORD.findall(b)
    wa, wb = [w.lower() for w in wa_raw], [w.lower() for w in wb_raw]
    sa, sb = set(wa), set(wb)
    only_a = [w for w in dict.fromkeys(wa) if w not in sb]
    only_b = [w for w in dict.fromkeys(wb) if w not in sa]
    typo = changed = names = 0
    caps = {w.lower() for w in (*wa_raw, *wb_raw) if w[:1].isupper() or w[:1].isdigit()}
    glued: set[str] = set()  # the parts of a word glued on the other side (a lost space) are typos too
    for mine, their_set in ((only_a, sb), (only_b, sa)):
        for w in mine:
            parts = _split_glued(w, their_set)
            if parts is not None:
                glued.update((w, *parts))
    letters = {w: Counter(w) for w in (*only_a, *only_b)}
    for mine, theirs in ((only_a, only_b), (only_b, only_a)):
        for w in mine:
            if w in glued or _near_spelling(w, theirs, letters):
                typo += 1
            else:
                changed += 1
                names += int(w in caps)
    unmatched = max(len(only_a) + len(only_b), 1)
    common_a = [w for w in wa if w in sb]
    common_b = [w for w in wb if w in sa]
    order, displaced = 1.0, 0
    if common_a and common_b:
        matcher = SequenceMatcher(None, common_a, common_b, autojunk=False)
        order = matcher.ratio()
        # Shared words outside the longest run of agreeing order: moved (a swap moves one or two).
        displaced = min(len(common_a), len(common_b)) - sum(m.size for m in matcher.get_matching_blocks())
    neg_a = sum(1 for w in wa if w in _NEGATIONS)
    neg_b = sum(1 for w in wb if w in _NEGATIONS)
    big_a = {f"{x} {y}" for x, y in zip(wa, wa[1:])}
    big_b = {f"{x} {y}" for x, y in zip(wb, wb[1:])}
    la, lb = max(len(a), 1), max(len(b), 1)
    return [
        _jaccard(char_trigrams(a), char_trigrams(b)),
        _jaccard(sa, sb),
        _jaccard(big_a, big_b),
        order,
        float(np.log1p(displaced) / 3.0),
        typo / unmatched,
        changed / unmatched if (only_a or only_b) else 0.0,
        float(np.log1p(changed) / 4.0),
        min(changed / max(min(len(wa), len(wb)), 1), 1.0),
        float(np.log1p(names) / 3.0),
        float(neg_a != neg_b),
        min(la, lb) / max(la, lb),
        float(np.log1p(min(len(wa), len(wb))) / 8.0),
    ]


def pair_features(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
    """``(n, NUM_PAIR_FEATURES)`` float32 features of the pairs ``(a[i], b[i])`` (module docstring)."""
    if len(a) != len(b):
        raise ValueError(f"pair_features: {len(a)} left texts but {len(b)} right texts")
    out = np.zeros((len(a), NUM_PAIR_FEATURES), dtype=np.float32)
    for i, (x, y) in enumerate(zip(a, b)):
        out[i] = _one(x, y)
    return out
