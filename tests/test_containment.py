"""Shingle containment of short children: typo-tolerant and order-aware."""

from __future__ import annotations

import pytest

from semhash_llm.text.containment import shingle_containment, tokens_of

PARENT = "Intro line here. How does it feel to be a celebrity in a small town? Outro text follows."


def test_containment_is_asymmetric_and_exact_copies_score_one() -> None:
    child = "How does it feel to be a celebrity in a small town?"
    assert shingle_containment(child, PARENT) == 1.0
    assert shingle_containment(PARENT, child) < 0.7


@pytest.mark.parametrize(("child", "low", "high"), [
    ("how does it feel, to be a CELEBRITY in a small town", 1.0, 1.0),  # case and punctuation
    ("How does it feel to be a celebrity in a smal town?", 0.8, 0.95),  # a typo at the end
    ("How does it feel to be a snowman in a small town?", 0.0, 0.8),  # a word replaced
    ("In a small town, how does it feel to be a celebrity?", 0.0, 0.8),  # halves swapped
    ("Completely unrelated words about gardening tools.", 0.0, 0.2),
])
def test_scores(child: str, low: float, high: float) -> None:
    assert low <= shingle_containment(child, PARENT) <= high


def test_cjk_uses_character_tokens_and_empty_text_scores_zero() -> None:
    toks, ns = tokens_of("東京は日本の首都です")
    assert ns == len(toks) == 10
    assert shingle_containment("日本の首都", "東京は日本の首都です") == 1.0
    assert shingle_containment("...", PARENT) == 0.0
    with pytest.raises(ValueError, match="n-gram sizes"):
        shingle_containment("a", "b", char_ngram=0)
