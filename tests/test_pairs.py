"""Self-supervised verifier pairs: each transformation does what its type or family says."""

from __future__ import annotations

import collections
import random
import re

import pytest

from semhash_llm.train.pairs import NEGATIVE_FAMILIES, POSITIVE_TYPES, PairGenerator, make_pairs

NAMES = ["Paris", "Berlin", "Madrid", "Lisbon", "Vienna", "Prague", "Athens", "Dublin"]
WORDS = ("the council approved new budget schools roads library mayor plan balances growth critics argued taxes "
         "rise families years vote passed after long hearing residents spoke against proposal river bridge "
         "station market winter harvest museum garden theatre stadium harbour").split() + [
    a + b for a in ("bal", "cor", "dun", "fel", "gar", "hol") for b in ("ton", "mere", "wick", "ford")]


def _docs(n: int = 12, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    docs = []
    for _ in range(n):
        sentences = []
        for _ in range(30):
            words = [rng.choice(WORDS) for _ in range(rng.randint(8, 16))]
            words.insert(rng.randrange(len(words)), rng.choice(NAMES))
            if rng.random() < 0.5:
                words.insert(2, rng.choice(["is", "was", "can", "will"]))
            sentences.append(" ".join(words).capitalize() + ".")
        docs.append(" ".join(sentences))
    return docs


def test_pairs_are_deterministic_and_cover_every_type_and_family() -> None:
    a = make_pairs(_docs(), per_kind=6, seed=3)
    b = make_pairs(_docs(), per_kind=6, seed=3)
    assert a == b
    assert a != make_pairs(_docs(), per_kind=6, seed=4)
    kinds = collections.Counter(p.kind for p in a)
    assert all(kinds[k] == 6 for k in POSITIVE_TYPES)
    assert sum(kinds[f] for f in NEGATIVE_FAMILIES) == 6 * len(NEGATIVE_FAMILIES)
    assert {p.label for p in a if p.kind in POSITIVE_TYPES} == {1}
    assert {p.label for p in a if p.kind in NEGATIVE_FAMILIES} == {0}


def test_each_transformation() -> None:
    gen = PairGenerator(_docs(), seed=1)
    a = gen.positive("A")  # one body, two templates
    body_lines = [ln for ln in a.a.splitlines() if len(ln.split()) > 12]
    assert body_lines and all(ln in a.b for ln in body_lines) and a.a != a.b
    d = gen.positive("D")  # an excerpt, one word changed at most per hundred
    assert len(d.a) < len(d.b)
    shared = sum(w in d.b.split() for w in d.a.split()) / len(d.a.split())
    assert shared > 0.9
    e = gen.positive("E")  # the fragment is planted verbatim
    assert e.a in e.b
    c = gen.positive("C")  # noisy, close
    assert c.a != c.b and abs(len(c.a) - len(c.b)) < 0.2 * len(c.a)
    swap = gen.negative("word_swap")
    assert sorted(swap.a.split()) == sorted(swap.b.split()) and swap.a != swap.b
    neg = gen.negative("negation")
    assert re.sub(r" not\b", "", neg.a) == re.sub(r" not\b", "", neg.b) and neg.a != neg.b
    ent = gen.negative("entity_swap")
    diff = [(x, y) for x, y in zip(ent.a.split(), ent.b.split()) if x != y]
    assert len(diff) == 1 and diff[0][1].strip(".,")[0].isupper()
    tpl = gen.negative("same_template")
    head_a, head_b = tpl.a.splitlines()[:3], tpl.b.splitlines()[:3]
    assert head_a == head_b and tpl.a != tpl.b


def test_bad_input_is_explained() -> None:
    with pytest.raises(ValueError, match="at least 4 documents"):
        PairGenerator(["too short"] * 10)
    with pytest.raises(ValueError, match="kind must be one of"):
        PairGenerator(_docs()).positive("F")
    with pytest.raises(ValueError, match="family must be one of"):
        PairGenerator(_docs()).negative("paraphrase")
    with pytest.raises(ValueError, match="per_kind"):
        make_pairs(_docs(), per_kind=0)
