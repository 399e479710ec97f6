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


# ---- issue 25: each difference classified, noise against meaning ---------------------------------

from semhash_llm.verify.features import differences, fold_glyphs  # noqa: E402


@pytest.mark.parametrize(("a", "b"), [
    ("the modern man", "the modern rnan"),        # rn / m
    ("a little bird", "a 1ittle bird"),           # l / 1
    ("the old house", "the o1d bouse"),           # l / 1 and h / b
    ("he does love her", "he does love ehr"),     # two letters transposed
    ("a quick test", "a quick tesr"),             # adjacent key
])
def test_a_glyph_or_keystroke_confusion_is_noise_not_another_word(a: str, b: str) -> None:
    d = differences(a, b)
    assert d.confusion >= 1 and d.substituted == 0 and d.inserted == 0


def test_split_merged_and_hyphenated_words_are_noise() -> None:
    assert differences("this desideratum is met", "this deside-ratum is met").split_merge == 1
    d = differences("the cat sat on the mat", "the cat saton the mat")
    assert d.split_merge == 1 and d.substituted == d.inserted == 0
    assert differences("Hello, world.", "Hello world!!").punctuation_only


def test_changes_of_meaning_are_classified_by_the_kind_of_token() -> None:
    neg = differences("He is here today.", "He is not here today.")
    assert neg.inserted == 1 and neg.negation == 1
    num = differences("We paid 5 dollars for it.", "We paid 7 dollars for it.")
    assert num.substituted == 1 and num.number == 2 and num.confusion == 0
    name = differences("She flew to Paris last week.", "She flew to Berlin last week.")
    assert name.substituted == 1 and name.name == 2
    word = differences("the best way to learn golf", "the best way to learn tennis")
    assert word.substituted == 1 and word.confusion == word.near == 0


def test_fold_glyphs_folds_lookalikes_only() -> None:
    assert fold_glyphs("rnodern") == fold_glyphs("modern")
    assert fold_glyphs("ſtate") == fold_glyphs("state")
    assert fold_glyphs("golf") != fold_glyphs("tennis")


def test_noise_share_separates_a_noisy_copy_from_a_meaning_edit() -> None:
    share = FEATURE_NAMES.index("noise_share")
    f = pair_features(["What is the best way to learn golf in Spain?"] * 2,
                      ["What is tbe best way to 1earn golf in Spain?", "What is the best way to learn tennis in Spain?"])
    assert f[0, share] == 1.0 and f[1, share] == 0.0


def test_older_weights_read_a_prefix_of_the_features() -> None:
    full = pair_features(["a b c d"], ["a b x d"])
    assert np.array_equal(pair_features(["a b c d"], ["a b x d"], width=13), full[:, :13])
    with pytest.raises(ValueError, match="width"):
        pair_features(["a"], ["a"], width=NUM_PAIR_FEATURES + 1)
