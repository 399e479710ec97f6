"""Pair features: a typo reads as a typo, a changed word as a change, a swap as a swap."""

from __future__ import annotations

import numpy as np
import pytest

from semhash_llm.verify.features import FEATURE_NAMES, NUM_PAIR_FEATURES, char_jaccard, pair_features

F = {name: i for i, name in enumerate(FEATURE_NAMES)}


def test_typo_changed_word_swap_and_negation() -> None:
    base = "Which is the best hair transplant clinic in Delhi for young men?"
    pairs = [
        (base, base),
        (base, "Which is the best hair transplnat clinic in Delhi for yuong men?"),  # typos
        (base, "Which is the best hair transplant clinic in Mumbai for young men?"),  # entity changed
        (base, "Which is the best dental transplant clinic in Delhi for young men?"),  # word changed
        ("Trains run from Paris to Berlin daily.", "Trains run from Berlin to Paris daily."),  # swap
        ("The bridge is open in winter.", "The bridge is not open in winter."),  # negation
        (base, "Whichis the best hair transplant clinic in Delhi for young men?"),  # a lost space
    ]
    f = pair_features([a for a, _ in pairs], [b for _, b in pairs])
    assert f.shape == (len(pairs), NUM_PAIR_FEATURES) and f.dtype == np.float32
    same, typo, entity, word, swap, neg, glued = f
    assert same[F["char3_jaccard"]] == 1.0 and same[F["changed_count"]] == 0.0 and same[F["order_agreement"]] == 1.0
    assert typo[F["typo_share"]] == 1.0 and typo[F["changed_count"]] == 0.0
    assert entity[F["typo_share"]] == 0.0 and entity[F["changed_count"]] > 0 and entity[F["changed_names_numbers"]] > 0
    assert word[F["changed_count"]] > 0 and word[F["changed_names_numbers"]] == 0.0
    assert swap[F["word_jaccard"]] == 1.0 and swap[F["order_agreement"]] < 1.0 and swap[F["displaced_words"]] > 0
    assert typo[F["displaced_words"]] == 0.0 and entity[F["displaced_words"]] == 0.0
    assert 0 < word[F["changed_per_word"]] < 0.2
    assert neg[F["negation_mismatch"]] == 1.0 and typo[F["negation_mismatch"]] == 0.0
    assert glued[F["typo_share"]] == 1.0
    assert ((f >= 0) & (f <= 1.5)).all()


def test_char_jaccard_and_errors() -> None:
    j = char_jaccard(["abcdef", "abc", ""], ["abcdef", "xyz", ""])
    assert j.tolist() == [1.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="2 left texts but 1 right"):
        pair_features(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="1 left texts but 0 right"):
        char_jaccard(["a"], [])


def test_screen_pairs_equals_char_jaccard_in_bounded_chunks() -> None:
    """The verifier's screen keeps trigram codes, reads documents a chunk at a time, and gives
    exactly :func:`char_jaccard`, edge cases included (empty, one or two characters, case
    folding that changes length, astral code points, NUL)."""
    from semhash_llm.verify.features import char_trigram_codes, char_trigrams, screen_pairs

    rng = np.random.default_rng(3)
    words = ["alpha", "beta", "gamma", "delta", "Alpha", "BETA", "日本", "語", "😀", "x\x00y"]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 12))).tolist()) for _ in range(60)]
    texts += ["", " ", "a", "ab", "Ab", "İ", "İstanbul", "abc", "\t\n"]
    a = rng.integers(0, len(texts), 3000)
    b = rng.integers(0, len(texts), 3000)
    calls: list[int] = []

    def read(docs: np.ndarray) -> list[str]:
        calls.append(int(docs.size))
        return [texts[i] for i in docs.tolist()]

    got = screen_pairs(read, a, b, chunk_docs=7)
    want = char_jaccard([texts[i] for i in a.tolist()], [texts[i] for i in b.tolist()])
    np.testing.assert_array_equal(got, want)
    assert max(calls) <= 7 and sum(calls) == np.unique(np.concatenate([a, b])).size
    for t in texts:
        assert char_trigram_codes(t).size == len(char_trigrams(t))
    with pytest.raises(ValueError, match="left documents"):
        screen_pairs(read, a, b[:-1])
