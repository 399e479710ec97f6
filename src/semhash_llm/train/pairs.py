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
* ``B`` — a light copy: whitespace, case and punctuation changes, a date line, 1–3% of the words
  replaced;
* ``C`` — a short snippet (80–300 characters) and a copy with character noise: OCR-like
  confusions (``rn``/``m``, ``l``/``1``, ``O``/``0``…), swapped, dropped and doubled letters;
* ``D`` — a text and a contiguous excerpt of it (30–70%), with a word or two changed;
* ``E`` — a passage (150–400 characters) and another document it was planted into.

Hard negatives (``label=0``), by family:

* ``word_swap`` — two words of the text exchanged (PAWS-like: the same words, another meaning);
* ``entity_swap`` — a capitalized word replaced by another one of the corpus;
* ``negation`` — a ``not`` added after an auxiliary, or removed;
* ``same_template`` — two different texts in one page template;
* ``same_topic`` — two different passages of one document (one topic, other text).

Every pair is a :class:`TrainingPair`; :func:`make_pairs` is deterministic for a seed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["TrainingPair", "POSITIVE_TYPES", "NEGATIVE_FAMILIES", "make_pairs", "PairGenerator"]

POSITIVE_TYPES: tuple[str, ...] = ("A", "B", "C", "D", "E")
NEGATIVE_FAMILIES: tuple[str, ...] = ("word_swap", "entity_swap", "negation", "same_template", "same_topic")

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

    def __init__(self, documents: Sequence[str], seed: int = 0) -> None:
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
        out = self._replace_words(text, self.rng.uniform(0.01, 0.03))
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
                op = self.rng.randrange(4)
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
                else:  # double
                    out.extend([chars[i], chars[i]])
            else:
                out.append(chars[i])
            i += 1
        return "".join(out)

    # ------------------------------------------------------------------ pairs

    def positive(self, kind: str) -> TrainingPair:
        """A duplicate pair of type ``kind`` (``A``..``E``)."""
        if kind == "A":
            body = "\n".join(self._passage(150, 400) for _ in range(self.rng.randint(2, 5)))
            return TrainingPair(self._wrap(self._chrome(), body), self._wrap(self._chrome(), body), 1, "A")
        if kind == "B":
            text = self._passage(300, 1500)
            return TrainingPair(text, self._light_copy(text), 1, "B")
        if kind == "C":
            text = self._passage(80, 300)
            return TrainingPair(text, self._noise(text, self.rng.uniform(0.02, 0.08)), 1, "C")
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
                    return TrainingPair(text, " ".join(words), 0, family)
            return self.negative("same_topic")
        if family == "entity_swap":
            text = self._passage(80, 300)
            caps = [m for m in _WORD.finditer(text) if m.group(0) in self._capital_set and m.start() > 0]
            if caps and len(self.capitals) > 1:
                m = self.rng.choice(caps)
                other = self.rng.choice([c for c in self.capitals[:500] if c != m.group(0)] or self.capitals)
                return TrainingPair(text, text[:m.start()] + other + text[m.end():], 0, family)
            return self.negative("word_swap")
        if family == "negation":
            text = self._passage(80, 300)
            hits = list(_AUX.finditer(text))
            if hits:
                m = self.rng.choice(hits)
                flipped = m.group(1) if m.group(2) else m.group(1) + " not"
                return TrainingPair(text, text[:m.start()] + flipped + text[m.end():], 0, family)
            return self.negative("word_swap")
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
        raise ValueError(f"negative(): family must be one of {', '.join(NEGATIVE_FAMILIES)}; got {family!r}")


def make_pairs(documents: Sequence[str], per_kind: int, seed: int = 0) -> list[TrainingPair]:
    """``per_kind`` pairs of every positive type and every negative family, shuffled, deterministic."""
    if per_kind < 1:
        raise ValueError(f"make_pairs needs per_kind >= 1; got {per_kind}")
    gen = PairGenerator(documents, seed)
    pairs = [gen.positive(k) for k in POSITIVE_TYPES for _ in range(per_kind)]
    pairs += [gen.negative(f) for f in NEGATIVE_FAMILIES for _ in range(per_kind)]
    gen.rng.shuffle(pairs)
    return pairs
