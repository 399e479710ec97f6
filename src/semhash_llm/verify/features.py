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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

import numba as nb
import numpy as np

__all__ = ["FEATURE_NAMES", "differences", "Differences", "words", "fold_glyphs", "KEYBOARD_NEIGHBOURS",
           "NUM_PAIR_FEATURES", "pair_features", "char_jaccard", "char_jaccard_indexed",
           "char_trigrams", "char_trigram_codes", "screen_pairs"]

FEATURE_NAMES: tuple[str, ...] = (
    "char3_jaccard", "word_jaccard", "bigram_jaccard", "order_agreement", "displaced_words",
    "typo_share", "changed_share", "changed_count", "changed_per_word", "changed_names_numbers",
    "negation_mismatch", "length_ratio", "log_words",
    # The differences, each classified (:func:`differences`): noise on one side, meaning on the other.
    "punctuation_only", "confusion_words", "near_words", "split_merge", "substituted_words", "inserted_words",
    "changed_function", "changed_negation", "changed_number", "changed_name", "noise_share",
)
NUM_PAIR_FEATURES = len(FEATURE_NAMES)

_WORD = re.compile(r"\w+", re.UNICODE)
_NEGATIONS = frozenset({"not", "no", "never", "nor", "none", "nobody", "nothing", "neither", "cannot", "t"})
_SPACES = re.compile(r"\s+")


def words(text: str) -> list[str]:
    """The words of a text as the pair features see them (runs of word characters, case kept)."""
    return _WORD.findall(text)


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


_SHORT_FLAG = np.uint64(1 << 63)


def char_trigram_codes(text: str) -> np.ndarray:
    """:func:`char_trigrams` as sorted distinct ``uint64`` codes, exact: a trigram's three code
    points (21 bits each) packed into 63 bits; a text of one or two characters is its own code
    with the top bit set. ``8`` bytes a trigram instead of a Python string in a set."""
    t = _SPACES.sub(" ", text.lower()).strip()
    if not t:
        return np.empty(0, dtype=np.uint64)
    c = np.frombuffer(t.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    if c.size < 3:
        code = c[0] << np.uint64(21) | (c[1] if c.size > 1 else np.uint64(0)) | _SHORT_FLAG
        return np.array([code | np.uint64(c.size) << np.uint64(42)], dtype=np.uint64)
    return np.unique(c[:-2] << np.uint64(42) | c[1:-1] << np.uint64(21) | c[2:])


@nb.njit(cache=True)
def _csr_jaccard(offsets: np.ndarray, codes: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:  # pragma: no cover
    out = np.empty(a.size, dtype=np.float32)
    for k in range(a.size):
        i, iend = offsets[a[k]], offsets[a[k] + 1]
        j, jend = offsets[b[k]], offsets[b[k] + 1]
        na, nb_ = iend - i, jend - j
        if na == 0 and nb_ == 0:
            out[k] = 1.0
            continue
        inter = 0
        while i < iend and j < jend:
            x, y = codes[i], codes[j]
            if x == y:
                inter += 1
                i += 1
                j += 1
            elif x < y:
                i += 1
            else:
                j += 1
        out[k] = inter / (na + nb_ - inter)
    return out


def screen_pairs(read_texts: Callable[[np.ndarray], list[str]], a: np.ndarray, b: np.ndarray,
                 chunk_docs: int = 131_072) -> np.ndarray:
    """:func:`char_jaccard` of the pairs of documents ``(a[i], b[i])`` (global indices), read
    with ``read_texts`` ``chunk_docs`` documents at a time: only each document's trigram codes
    (:func:`char_trigram_codes`) are kept, never all the texts at once, and a compiled merge
    intersects them. The same values as :func:`char_jaccard`."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    if a.size != b.size:
        raise ValueError(f"screen_pairs: {a.size} left documents but {b.size} right documents")
    docs = np.unique(np.concatenate([a, b]))
    lengths = np.zeros(docs.size + 1, dtype=np.int64)
    parts: list[np.ndarray] = []
    for s in range(0, docs.size, chunk_docs):
        for k, text in enumerate(read_texts(docs[s: s + chunk_docs])):
            codes = char_trigram_codes(text)
            lengths[s + k + 1] = codes.size
            parts.append(codes)
    offsets = np.cumsum(lengths)
    codes = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
    del parts
    return _csr_jaccard(offsets, codes, np.searchsorted(docs, a), np.searchsorted(docs, b))


def _near_spelled(mine: Sequence[str], theirs: Sequence[str], shared: np.ndarray) -> list[bool]:
    """For each word of ``mine``: whether ``theirs`` holds a word within a small edit of it (a
    typo or OCR slip): ``SequenceMatcher`` ratio >= 0.75, tried only where the lengths differ by
    at most 2, not both words are of 3 letters or fewer, and the shared letters (``shared[i, j]``,
    the size of the two words' letter-multiset intersection: a bound of that ratio, what
    ``SequenceMatcher.quick_ratio`` computes) can reach it."""
    out = [False] * len(mine)
    if not mine or not theirs:
        return out
    la = np.fromiter((len(w) for w in mine), dtype=np.int64, count=len(mine))
    lb = np.fromiter((len(w) for w in theirs), dtype=np.int64, count=len(theirs))
    ok = ((np.abs(la[:, None] - lb[None, :]) <= 2) & ~((la[:, None] <= 3) & (lb[None, :] <= 3))
          & (2 * shared >= 0.75 * (la[:, None] + lb[None, :])))
    for i in np.flatnonzero(ok.any(axis=1)).tolist():
        word = mine[i]
        for j in np.flatnonzero(ok[i]).tolist():
            if SequenceMatcher(None, word, theirs[j], autojunk=False).ratio() >= 0.75:
                out[i] = True
                break
    return out


def _shared_letters(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
    """``(len(a), len(b))``: the size of the letter-multiset intersection of ``a[i]`` and ``b[j]``."""
    if not a or not b:
        return np.zeros((len(a), len(b)), dtype=np.int64)
    alphabet = {c: k for k, c in enumerate(sorted(set("".join(a)) | set("".join(b))))}

    def counts(words: Sequence[str]) -> np.ndarray:
        m = np.zeros((len(words), len(alphabet)), dtype=np.int32)
        for i, w in enumerate(words):
            for c in w:
                m[i, alphabet[c]] += 1
        return m

    ca, cb = counts(a), counts(b)
    return np.minimum(ca[:, None, :], cb[None, :, :]).sum(axis=2)


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
    shared = _shared_letters(only_a, only_b)
    for mine, theirs, sh in ((only_a, only_b, shared), (only_b, only_a, shared.T)):
        for w, near in zip(mine, _near_spelled(mine, theirs, sh)):
            if w in glued or near:
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
        *_difference_features(a, b),
    ]


# ---------------------------------------------------------------------------------------------
# Differences, classified: OCR noise and typos against changes of meaning (issue 25)
# ---------------------------------------------------------------------------------------------

#: Glyphs that print or scan alike, folded to one representative: OCR reads one for the other.
#: A word pair that is equal once folded is a glyph confusion, not another word. Ligatures and
#: multi-glyph shapes first (``rn``/``m``, ``vv``/``w``, ``cl``/``d``), then single glyphs
#: (``1``/``l``/``I``/``i``, ``0``/``o``, ``h``/``b``, ``n``/``u``, ``c``/``e``, long s), then the
#: shapes ``d``, ``li``/``il`` and ``ll``/``U``, which by then all read ``ll``.
_GLYPH_MULTI: tuple[tuple[str, str], ...] = (("ſ", "s"), ("ﬁ", "fi"), ("ﬂ", "fl"), ("rn", "m"), ("vv", "w"),
                                              ("cl", "d"))
_GLYPH_SINGLE = str.maketrans({"1": "l", "|": "l", "!": "l", "i": "l", "0": "o", "5": "s", "8": "b", "h": "b",
                               "n": "u", "e": "c", "v": "u", "y": "u"})

#: QWERTY neighbours: a typo slips to an adjacent key (each key's neighbours as a string, row by row).
KEYBOARD_ROWS: tuple[str, ...] = ("qwertyuiop", "asdfghjkl", "zxcvbnm")


def _keyboard_neighbours() -> dict[str, str]:
    out: dict[str, str] = {}
    for r, row in enumerate(KEYBOARD_ROWS):
        for c, ch in enumerate(row):
            near: list[str] = []
            for dr in (-1, 0, 1):
                if 0 <= r + dr < len(KEYBOARD_ROWS):
                    other = KEYBOARD_ROWS[r + dr]
                    near += [other[c + dc] for dc in (-1, 0, 1) if (dr or dc) and 0 <= c + dc < len(other)]
            out[ch] = "".join(near)
    return out


KEYBOARD_NEIGHBOURS: dict[str, str] = _keyboard_neighbours()

_FUNCTION_WORDS = frozenset(
    "a an the of to in on at by for from with without into onto over under about as and or but if then than "
    "so that this these those there here it its is are was were be been being am do does did has have had will "
    "would shall should can could may might must i you he she we they me him her us them my your his our their "
    "what which who whom whose when where why how all any some each every more most less least very too also just "
    "only up down out off again once".split())
_NUMBER_WORDS = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million "
    "billion first second third fourth fifth half double triple".split())


def fold_glyphs(word: str) -> str:
    """``word`` lower-cased with every look-alike glyph replaced by its representative
    (:data:`_GLYPH_MULTI`, :data:`_GLYPH_SINGLE`)."""
    w = word.lower()
    for src, dst in _GLYPH_MULTI:
        if src in w:
            w = w.replace(src, dst)
    return w.translate(_GLYPH_SINGLE).replace("d", "ll").replace("ll", "u")


def _keyboard_or_transposed(a: str, b: str) -> bool:
    """One keystroke apart: an adjacent-key substitution, two neighbours transposed, or a doubled
    or dropped letter."""
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        if len(diff) == 1:
            return b[diff[0]] in KEYBOARD_NEIGHBOURS.get(a[diff[0]], "")
        return len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
    if abs(len(a) - len(b)) == 1:
        short, long_ = (a, b) if len(a) < len(b) else (b, a)
        for i in range(len(long_)):
            if long_[:i] + long_[i + 1:] == short:
                return True
    return False


@dataclass(frozen=True)
class Differences:
    """The word-level differences between two texts, by kind (:func:`differences`)."""

    punctuation_only: bool
    """The texts have the same words: only punctuation, spacing and case differ."""
    confusion: int
    """Words that differ by a glyph confusion (OCR) or one keystroke (a typo)."""
    near: int
    """Words within a small edit of each other that are not a known confusion (a misspelling)."""
    split_merge: int
    """Words split or merged (a lost or added space, hyphenation left in), their letters the same."""
    substituted: int
    """Words replaced by a word that is not a near spelling of it."""
    inserted: int
    """Words on one side only (inserted or deleted)."""
    function: int
    negation: int
    number: int
    name: int
    """Of the substituted and inserted words: function words, negations, numbers, capitalised names."""


def _kind_counts(words: Sequence[str], raw: Sequence[str]) -> tuple[int, int, int, int]:
    function = negation = number = name = 0
    for w, r in zip(words, raw):
        if w in _NEGATIONS:
            negation += 1
        elif any(ch.isdigit() for ch in w) or w in _NUMBER_WORDS:
            number += 1
        elif r[:1].isupper():
            name += 1
        elif w in _FUNCTION_WORDS:
            function += 1
    return function, negation, number, name


def differences(a: str, b: str) -> Differences:
    """Align the words of ``a`` and ``b`` (difflib over lower-cased words) and classify each
    difference: a within-word glyph or keyboard confusion or near spelling, a split or merge, as
    against a whole-word substitution, insertion or deletion — and of the latter, what kind of
    token changed (function word, negation, number, capitalised name)."""
    raw_a, raw_b = _WORD.findall(a), _WORD.findall(b)
    wa, wb = [w.lower() for w in raw_a], [w.lower() for w in raw_b]
    confusion = near = split = subst = ins = 0
    changed: list[str] = []
    changed_raw: list[str] = []
    matcher = SequenceMatcher(None, wa, wb, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        left, right = wa[i1:i2], wb[j1:j2]
        if left and right and "".join(left) == "".join(right):
            split += max(len(left), len(right)) - 1 or 1
            continue
        if left and right and len(left) != len(right):
            ja, jb = "".join(left), "".join(right)
            if fold_glyphs(ja) == fold_glyphs(jb) or SequenceMatcher(None, ja, jb, autojunk=False).ratio() >= 0.85:
                split += abs(len(left) - len(right))
                near += 1
                continue
        n = min(len(left), len(right))
        for k in range(n):
            x, y = left[k], right[k]
            if fold_glyphs(x) == fold_glyphs(y) or _keyboard_or_transposed(x, y):
                confusion += 1
            elif (min(len(x), len(y)) > 3 and abs(len(x) - len(y)) <= 2
                  and SequenceMatcher(None, x, y, autojunk=False).ratio() >= 0.75):
                near += 1
            else:
                subst += 1
                changed += [x, y]
                changed_raw += [raw_a[i1 + k], raw_b[j1 + k]]
        extra_a, extra_b = left[n:], right[n:]
        ins += len(extra_a) + len(extra_b)
        changed += [*extra_a, *extra_b]
        changed_raw += [*raw_a[i1 + n:i2], *raw_b[j1 + n:j2]]
    function, negation, number, name = _kind_counts(changed, changed_raw)
    return Differences(wa == wb, confusion, near, split, subst, ins,
                       function, negation, number, name)


def _difference_features(a: str, b: str) -> list[float]:
    d = differences(a, b)
    noise = d.confusion + d.near + d.split_merge
    meaning = d.substituted + d.inserted

    def log(x: int) -> float:
        return float(np.log1p(x) / 3.0)

    return [float(d.punctuation_only), log(d.confusion), log(d.near), log(d.split_merge), log(d.substituted),
            log(d.inserted), log(d.function), log(d.negation), log(d.number), log(d.name),
            noise / (noise + meaning) if noise + meaning else 1.0]


def pair_features(a: Sequence[str], b: Sequence[str], width: int = NUM_PAIR_FEATURES) -> np.ndarray:
    """``(n, width)`` float32 features of the pairs ``(a[i], b[i])`` (module docstring): the first
    ``width`` of :data:`FEATURE_NAMES` (weights trained on fewer features read a prefix; new
    features are only ever appended)."""
    if not 0 <= width <= NUM_PAIR_FEATURES:
        raise ValueError(f"pair_features: width must be in [0, {NUM_PAIR_FEATURES}]; got {width}")
    if len(a) != len(b):
        raise ValueError(f"pair_features: {len(a)} left texts but {len(b)} right texts")
    out = np.zeros((len(a), NUM_PAIR_FEATURES), dtype=np.float32)
    for i, (x, y) in enumerate(zip(a, b)):
        out[i] = _one(x, y)
    return np.ascontiguousarray(out[:, :width])
