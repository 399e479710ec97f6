"""Self-supervised verifier pairs: each transformation does what its type or family says."""

from __future__ import annotations

import collections
import random
import re
from collections.abc import Callable

import pytest

from semhash_llm.train.pairs import NEGATIVE_FAMILIES, POSITIVE_TYPES, PairGenerator, TrainingPair, make_pairs

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
    # The four families of one short text changed: exactly the change half the time, the change
    # plus light character noise the other half (checked on the noise-free ones).
    def exact(family: str, check: Callable[[TrainingPair], bool]) -> None:
        drawn = [p for p in (gen.negative(family) for _ in range(24)) if p.kind == family]
        assert drawn and all(p.label == 0 and p.a != p.b for p in drawn)
        clean = [p for p in drawn if check(p)]
        assert 0 < len(clean) < len(drawn), family  # some exact, some with noise on top

    exact("word_swap", lambda p: sorted(p.a.split()) == sorted(p.b.split()))
    exact("negation", lambda p: re.sub(r" not\b", "", p.a) == re.sub(r" not\b", "", p.b))

    def one_or_two_capitals(p: TrainingPair) -> bool:
        diff = [(x, y) for x, y in zip(p.a.split(), p.b.split()) if x != y]
        return len(p.a.split()) == len(p.b.split()) and 1 <= len(diff) <= 2 and all(
            y.strip(".,")[0].isupper() for _, y in diff)

    exact("entity_swap", one_or_two_capitals)

    def short_lowercase_replaced(p: TrainingPair) -> bool:
        changed = [(x, y) for x, y in zip(p.a.split(" "), p.b.split(" ")) if x != y]
        return (len(p.a) <= 200 and len(p.a.split(" ")) == len(p.b.split(" ")) and 1 <= len(changed) <= 2
                and all(x.isalpha() and x.islower() and len(x) >= 4 for x, _ in changed))

    exact("word_replace", short_lowercase_replaced)
    shared = gen.negative("shared_passage")  # one passage in two texts, neither inside the other
    assert shared.a not in shared.b and shared.b not in shared.a
    common = max((shared.a[i:j] for i in range(0, len(shared.a), 7) for j in range(i + 60, len(shared.a) + 1, 7)
                  if shared.a[i:j] in shared.b), key=len, default="")
    assert len(common) >= 40
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
