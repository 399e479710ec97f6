"""The verifier's training noise model (issue 25): OCR and typing edits, deterministic, bounded."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from semhash_llm.train.noise import char_error_rate, noisy_copy, ocr_noise, read_misspellings, typo_noise
from semhash_llm.verify.features import differences

TEXT = ("The committee will meet on Thursday to consider the harbour proposal, which the council "
        "rejected last spring after a long and bitter public debate.")


def test_noisy_copies_are_deterministic_and_bounded() -> None:
    a = [noisy_copy(TEXT, random.Random(7)) for _ in range(3)]
    assert a[0] == a[1] == a[2]
    rng = random.Random(1)
    rates = [char_error_rate(TEXT, noisy_copy(TEXT, rng, max_cer=0.1)) for _ in range(200)]
    assert all(0 < r <= 0.1 for r in rates)
    assert sum(r < 0.05 for r in rates) > 100  # most copies below 5% character error


def test_ocr_noise_reads_as_noise_to_the_difference_classifier() -> None:
    rng = random.Random(3)
    meaning = noise = 0
    for _ in range(200):
        d = differences(TEXT, ocr_noise(TEXT, rng, 0.08))
        noise += d.confusion + d.near + d.split_merge
        meaning += d.substituted + d.inserted
    assert noise > 5 * meaning


def test_typos_use_the_given_misspellings() -> None:
    out = typo_noise("the committee met", random.Random(0), 1.0, {"committee": ["comittee"]})
    assert "comittee" in out or out != "the committee met"
    with pytest.raises(ValueError, match="rate"):
        typo_noise("x", random.Random(0), 1.5)


def test_misspellings_split_in_two_disjoint_halves(tmp_path: Path) -> None:
    d = tmp_path / "codespell_typos"
    d.mkdir()
    words = [f"word{c}" for c in "abcdefghijklmnopqrst"]
    (d / "dictionary.txt").write_text("".join(f"{w[::-1]}->{w}\n" for w in words) + "bad line\n")
    train, rest = read_misspellings(tmp_path, "train"), read_misspellings(tmp_path, "rest")
    assert set(train).isdisjoint(rest) and set(train) | set(rest) == {w for w in words if w.isalpha()}
    assert train and rest
    assert read_misspellings(tmp_path / "missing") == {}
