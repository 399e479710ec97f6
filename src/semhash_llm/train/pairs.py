"""Self-supervised training pairs for the neural verifier: positives of each type A–E and hard negatives.

The verifier (issue 9) learns to decide the candidate pairs that hashing cannot settle. Its
training pairs are made from unlabeled text by transformations, so any permitted corpus will do
(by default the training part of the Wikipedia fixture and the addresses, never the benchmark's
part: :func:`semhash_llm.train.importance.permitted_documents`). The transformations are this
module's own, with their own seeds — not the benchmark generator's (:mod:`semhash_llm.bench.
generator`), whose Readability chrome, codespell typos and planted passages the benchmark keeps
for measuring generalisation.

Positives (``label=1``), by the paper's duplicate types:

* ``A`` — one text in two page templates: synthetic chrome (a menu of one- or two-word lines,
  link lines, a footer) made from the corpus vocabulary, different on each side;
* ``B`` — a light copy: whitespace and case changes, a date line, and in texts of 64 words or
  more 1–3% of the words replaced (two in five are short texts of 120–300 characters);
* ``C`` — a short snippet (80–300 characters) and a noisy copy from the realistic noise model of
  :mod:`semhash_llm.train.noise`: OCR glyph confusions (``h``/``b``, ``li``/``d``, ``rn``/``m``,
  long s…), split and merged words, hyphenation, punctuation, keyboard typos and common
  misspellings (a third of the pairs have noise on both sides; ``c_share`` times as many pairs as
  each other type);
* ``D`` — a text and a contiguous excerpt of it (30–70%), with a word or two changed;
* ``E`` — a passage (150–400 characters) and another document it was planted into.

Hard negatives (``label=0``), by family (the four of one short text changed get light character
noise on top half the time, so that typos never excuse a real change):

* ``word_swap`` — two words of the text exchanged (PAWS-like: the same words, another meaning);
* ``entity_swap`` — one or two capitalized words replaced by others of the corpus;
* ``word_replace`` — in a short text (40–200 characters, a question or a sentence), one or two
  content words replaced by other words of the corpus (QQP-like: "… in golf?" / "… in tennis?");
* ``negation`` — a ``not`` added after an auxiliary, or removed;
* ``number_change`` — a number, a number word or a year changed (``12`` / ``15``, ``three`` /
  ``four``);
* ``same_template`` — two different texts in one page template;
* ``same_topic`` — two different passages of one document (one topic, other text);
* ``shared_passage`` — one passage (a quote, a viral sentence) inside two different texts, neither
  containing the other: the passage stage cuts it from one, neither document goes.

Every pair is a :class:`TrainingPair`; :func:`make_pairs` is deterministic for a seed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from semhash_llm.train.noise import noisy_copy, ocr_noise, typo_noise

__all__ = ["TrainingPair", "POSITIVE_TYPES", "NEGATIVE_FAMILIES", "make_pairs", "PairGenerator"]

POSITIVE_TYPES: tuple[str, ...] = ("A", "B", "C", "D", "E")
NEGATIVE_FAMILIES: tuple[str, ...] = ("word_swap", "entity_swap", "word_replace", "negation", "number_change",
                                      "same_template", "same_topic", "shared_passage")
_NUMBER_WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "twelve", "twenty",
                 "hundred", "thousand", "million", "first", "second", "third")
_NUMBER = re.compile(r"\b(\d+|" + "|".join(_NUMBER_WORDS) + r")\b", re.IGNORECASE)

_WORD = re.compile(r"\w+", re.UNICODE)
_AUX = re.compile(r"\b(is|are|was|were|can|could|will|would|should|does|did|has|have|had)\b( not)?",
                  re.IGNORECASE)
_OCR = (("rn", "m"), ("m", "rn"), ("l", "1"), ("1", "l"), ("O", "0"), ("0", "O"), ("e", "c"), ("c", "e"),
        ("i", "l"), ("cl", "d"), ("vv", "w"), ("w", "vv"), ("h", "b"), ("S", "5"))
_SALT = "semhash-llm-verifier-pairs/1"


@dataclass(frozen=True)
class TrainingPair:
    """Two texts, whether they are duplicates, and the type or family that made them."""

    a: str
    b: str
    label: int
    kind: str


class PairGenerator:
    """Transformations over one corpus of documents (see the module docstring)."""

    def __init__(self, documents: Sequence[str], seed: int = 0,
                 misspellings: Mapping[str, Sequence[str]] | None = None) -> None:
        self.misspellings = dict(misspellings or {})
        docs = [d for d in documents if isinstance(d, str) and len(d.split()) >= 30]
        if len(docs) < 4:
            raise ValueError(f"PairGenerator needs at least 4 documents of 30 words or more; got {len(docs)} of "
                             f"{len(documents)}. Give it more text")
        self.documents = docs
        self.rng = random.Random(f"{_SALT}:{seed}")
        vocab: dict[str, None] = {}
        capitals: dict[str, None] = {}
        for d in docs:
            for w in _WORD.findall(d):
                if w.isalpha() and 3 <= len(w) <= 12:
                    vocab.setdefault(w.lower(), None)
                    if w[0].isupper() and not w.isupper():
                        capitals.setdefault(w, None)
        self.vocab = sorted(vocab)
        self.capitals = sorted(capitals)
        self._capital_set = set(self.capitals)
        if len(self.vocab) < 50:
            raise ValueError(f"PairGenerator needs a vocabulary of at least 50 words; the documents give "
                             f"{len(self.vocab)}")

    # ------------------------------------------------------------------ pieces

    def _doc(self) -> str:
        return self.rng.choice(self.documents)

    def _passage(self, lo: int, hi: int, doc: str | None = None) -> str:
        """A stretch of ``lo``..``hi`` characters of a document, cut at word boundaries."""
        text = " ".join((doc or self._doc()).split())
        size = self.rng.randint(lo, hi)
        if len(text) <= size:
            return text
        start = self.rng.randrange(0, len(text) - size)
        start = text.find(" ", start) + 1 if start else 0
        end = text.rfind(" ", start, start + size)
        return text[start: end if end > start else start + size]

    def _chrome(self) -> tuple[str, str]:
        """A synthetic page template: a menu head and a footer tail."""
        menu = [" ".join(self.rng.choice(self.vocab).capitalize() for _ in range(self.rng.randint(1, 2)))
                for _ in range(self.rng.randint(8, 30))]
        links = [" ".join(self.rng.choice(self.vocab) for _ in range(self.rng.randint(3, 7))).capitalize()
                 for _ in range(self.rng.randint(3, 10))]
        footer = [f"© {self.rng.randint(1995, 2025)} {self.rng.choice(self.vocab).capitalize()}. All rights reserved.",
                  " | ".join(self.rng.choice(self.vocab).capitalize() for _ in range(self.rng.randint(3, 6)))]
        return "\n".join(menu), "\n".join(links + footer)

    @staticmethod
    def _wrap(chrome: tuple[str, str], body: str) -> str:
        return f"{chrome[0]}\n{body}\n{chrome[1]}"

    def _replace_words(self, text: str, share: float) -> str:
        words = text.split(" ")
        for _ in range(max(1, round(share * len(words)))):
            words[self.rng.randrange(len(words))] = self.rng.choice(self.vocab)
        return " ".join(words)

    def _light_copy(self, text: str) -> str:
        # Replaced words only in longer texts: in a short one a replaced word is another text
        # (the word_replace negatives), and the verifier sees pairs with a short side.
        out = self._replace_words(text, self.rng.uniform(0.01, 0.03)) if len(text.split()) >= 64 else text
        if self.rng.random() < 0.5:
            out = re.sub(r"\s+", lambda m: m.group(0) + (" " if self.rng.random() < 0.1 else ""), out)
        if self.rng.random() < 0.3:
            out = out.lower()
        if self.rng.random() < 0.5:
            out = f"Posted {self.rng.randint(1, 28)} {self.rng.choice(['May', 'June', 'July'])} " \
                  f"{self.rng.randint(2001, 2024)}\n{out}"
        return out

    def _noise(self, text: str, rate: float) -> str:
        chars = list(text)
        out: list[str] = []
        i = 0
        while i < len(chars):
            r = self.rng.random()
            if r < rate and chars[i].isalnum():
                op = self.rng.randrange(5)
                if op == 0:  # OCR confusion
                    src, dst = self.rng.choice(_OCR)
                    if "".join(chars[i:i + len(src)]) == src:
                        out.append(dst)
                        i += len(src)
                        continue
                    out.append(chars[i])
                elif op == 1 and i + 1 < len(chars):  # swap
                    out.extend([chars[i + 1], chars[i]])
                    i += 2
                    continue
                elif op == 2:  # drop
                    pass
                elif op == 3:  # double
                    out.extend([chars[i], chars[i]])
                else:  # insert a letter
                    out.extend([chars[i], self.rng.choice("aeinorst")])
            elif r < rate * 1.3 and chars[i] == " ":  # a lost space
                pass
            else:
                out.append(chars[i])
            i += 1
        return "".join(out)

    def _maybe_noisy(self, text: str) -> str:
        """Half the time, light character noise on top of a hard negative's real change: typos
        beside a swapped or replaced word do not make the pair a duplicate."""
        if self.rng.random() >= 0.5:
            return text
        if self.rng.random() < 0.5:
            return self._noise(text, self.rng.uniform(0.005, 0.02))
        rate = self.rng.uniform(0.03, 0.12)
        return typo_noise(ocr_noise(text, self.rng, rate), self.rng, rate, self.misspellings)

    # ------------------------------------------------------------------ pairs

    def positive(self, kind: str) -> TrainingPair:
        """A duplicate pair of type ``kind`` (``A``..``E``)."""
        if kind == "A":
            body = "\n".join(self._passage(150, 400) for _ in range(self.rng.randint(2, 5)))
            return TrainingPair(self._wrap(self._chrome(), body), self._wrap(self._chrome(), body), 1, "A")
        if kind == "B":
            text = self._passage(120, 300) if self.rng.random() < 0.4 else self._passage(300, 1500)
            return TrainingPair(text, self._light_copy(text), 1, "B")
        if kind == "C":
            text = self._passage(80, 300)
            left = noisy_copy(text, self.rng, self.misspellings, max_cer=0.05) if self.rng.random() < 0.33 else text
            return TrainingPair(left, noisy_copy(text, self.rng, self.misspellings), 1, "C")
        if kind == "D":
            text = self._passage(800, 2500)
            size = int(len(text) * self.rng.uniform(0.3, 0.7))
            start = self.rng.randrange(0, max(1, len(text) - size))
            start = text.find(" ", start) + 1 if start else 0
            excerpt = self._replace_words(text[start:start + size].strip(), 0.01)
            return TrainingPair(excerpt, text, 1, "D")
        if kind == "E":
            fragment = self._passage(150, 400)
            host = self._passage(400, 1500)
            cut = host.find(" ", self.rng.randrange(0, len(host)))
            cut = len(host) if cut < 0 else cut
            return TrainingPair(fragment, f"{host[:cut]} {fragment} {host[cut:]}".strip(), 1, "E")
        raise ValueError(f"positive(): kind must be one of {', '.join(POSITIVE_TYPES)}; got {kind!r}")

    def negative(self, family: str) -> TrainingPair:
        """A hard negative pair of ``family`` (see :data:`NEGATIVE_FAMILIES`)."""
        if family == "word_swap":
            text = self._passage(80, 300)
            words = text.split(" ")
            if len(words) >= 6:
                i = self.rng.randrange(0, len(words) // 2)
                j = self.rng.randrange(len(words) // 2, len(words))
                if words[i] != words[j]:
                    words[i], words[j] = words[j], words[i]
                    return TrainingPair(text, self._maybe_noisy(" ".join(words)), 0, family)
            return self.negative("same_topic")
        if family == "entity_swap":
            text = self._passage(80, 300)
            caps = [m for m in _WORD.finditer(text) if m.group(0) in self._capital_set and m.start() > 0]
            if caps and len(self.capitals) > 1:
                out = text
                for m in sorted(self.rng.sample(caps, min(len(caps), self.rng.randint(1, 2))), key=lambda m: -m.start()):
                    other = m.group(0)
                    while other == m.group(0):
                        other = self.rng.choice(self.capitals)
                    out = out[:m.start()] + other + out[m.end():]
                return TrainingPair(text, self._maybe_noisy(out), 0, family)
            return self.negative("word_swap")
        if family == "word_replace":
            text = self._passage(40, 200)
            words = text.split(" ")
            content = [i for i, w in enumerate(words) if w.isalpha() and len(w) >= 4 and w.islower()]
            if content:
                for i in self.rng.sample(content, min(len(content), self.rng.randint(1, 2))):
                    old = words[i]
                    while words[i] == old:
                        words[i] = self.rng.choice(self.vocab)
                return TrainingPair(text, self._maybe_noisy(" ".join(words)), 0, family)
            return self.negative("entity_swap")
        if family == "negation":
            text = self._passage(80, 300)
            hits = list(_AUX.finditer(text))
            if hits:
                m = self.rng.choice(hits)
                flipped = m.group(1) if m.group(2) else m.group(1) + " not"
                return TrainingPair(text, self._maybe_noisy(text[:m.start()] + flipped + text[m.end():]), 0, family)
            return self.negative("word_swap")
        if family == "number_change":
            text = self._passage(40, 300)
            hits = list(_NUMBER.finditer(text))
            if hits:
                m = self.rng.choice(hits)
                old = m.group(0)
                if old.isdigit():
                    new = old
                    while new == old:
                        new = str(max(0, int(old) + self.rng.choice((-10, -3, -2, -1, 1, 2, 3, 5, 10, 100))))
                else:
                    new = old
                    while new.lower() == old.lower():
                        new = self.rng.choice(_NUMBER_WORDS)
                changed = text[:m.start()] + new + text[m.end():]
                return TrainingPair(text, self._maybe_noisy(changed), 0, family)
            # No number in the passage: add one where none was (a count or a year stated).
            words = text.split(" ")
            i = self.rng.randrange(len(words))
            words.insert(i, str(self.rng.randint(2, 2024)))
            return TrainingPair(text, self._maybe_noisy(" ".join(words)), 0, family)
        if family == "same_template":
            chrome = self._chrome()
            return TrainingPair(self._wrap(chrome, self._passage(200, 800)), self._wrap(chrome, self._passage(200, 800)),
                                0, family)
        if family == "same_topic":
            doc = self._doc()
            a = self._passage(200, 800, doc)
            for _ in range(5):
                b = self._passage(200, 800, doc)
                if len(set(a.split()) & set(b.split())) < 0.5 * len(set(a.split())):
                    return TrainingPair(a, b, 0, family)
            other = self._doc()
            return TrainingPair(a, self._passage(200, 800, other), 0, family)
        if family == "shared_passage":
            fragment = self._passage(60, 250)
            sides = []
            for _ in range(2):
                other = self._passage(40, 300)
                sides.append(f"{fragment} {other}" if self.rng.random() < 0.5 else f"{other} {fragment}")
            return TrainingPair(sides[0], sides[1], 0, family)
        raise ValueError(f"negative(): family must be one of {', '.join(NEGATIVE_FAMILIES)}; got {family!r}")


def make_pairs(documents: Sequence[str], per_kind: int, seed: int = 0, c_share: int = 1,
               misspellings: Mapping[str, Sequence[str]] | None = None) -> list[TrainingPair]:
    """``per_kind`` pairs of every positive type and every negative family (``c_share`` times as
    many of type C: noise comes in many more forms than the other types), shuffled,
    deterministic. ``misspellings``: real misspellings for the C copies
    (:func:`semhash_llm.train.noise.read_misspellings`)."""
    if per_kind < 1:
        raise ValueError(f"make_pairs needs per_kind >= 1; got {per_kind}")
    if c_share < 1:
        raise ValueError(f"make_pairs needs c_share >= 1; got {c_share}")
    gen = PairGenerator(documents, seed, misspellings)
    pairs = [gen.positive(k) for k in POSITIVE_TYPES for _ in range(per_kind * (c_share if k == "C" else 1))]
    pairs += [gen.negative(f) for f in NEGATIVE_FAMILIES for _ in range(per_kind)]
    gen.rng.shuffle(pairs)
    return pairs
