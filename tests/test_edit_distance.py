"""The Levenshtein kernel behind character error rates (noise model, bench error bands)."""

from __future__ import annotations

import random

import pytest

from semhash_llm.sketch.edit import char_error_rate, levenshtein


def _reference(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def test_known_distances() -> None:
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("", "abc") == 3 and levenshtein("abc", "") == 3 and levenshtein("", "") == 0
    assert levenshtein("ſtraße", "straße") == 1  # code points, not bytes
    assert levenshtein("日本語", "日本") == 1


def test_matches_the_textbook_recurrence_on_random_strings() -> None:
    rng = random.Random(7)
    for _ in range(200):
        a = "".join(rng.choice("abcé ") for _ in range(rng.randint(0, 30)))
        b = "".join(rng.choice("abcé ") for _ in range(rng.randint(0, 30)))
        assert levenshtein(a, b) == _reference(a, b) == levenshtein(b, a)


def test_char_error_rate_is_distance_over_the_reference_length() -> None:
    assert char_error_rate("kitten", "sitting") == pytest.approx(0.5)
    assert char_error_rate("", "") == 0.0
    assert char_error_rate("", "x") == 1.0
