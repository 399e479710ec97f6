"""Lines of tokens: the page-shape cues of cheap importance."""

from __future__ import annotations

import numpy as np
import pytest

from semhash_llm.config import NormalizeConfig, ShingleConfig
from semhash_llm.text.lines import token_lines
from semhash_llm.text.normalize import char_classes, normalize_batch
from semhash_llm.text.tokenize import tokenize_batch, tokens

PAGE = ("Home | News | Sport\n\nThe council approved the budget on Tuesday. It takes effect in May!\n"
        "   \n東京は日本の首都です。\nShare this\r\nHome | news | SPORT")


def _lines(texts: list[str]):
    cfg = NormalizeConfig()
    norm = normalize_batch(texts, cfg)
    classes = char_classes(cfg.strip_punctuation)
    tb = tokenize_batch(norm, classes, ShingleConfig())
    return token_lines(norm, classes, tb.tok_offsets), tb


def test_every_token_gets_its_line_and_lines_their_shape() -> None:
    lb, tb = _lines([PAGE, "one line without a break", ""])
    assert lb.line_offsets.tolist() == [0, 5, 6, 6]  # the blank line has no token: no entry
    assert lb.tok_line.size == tb.tok_hashes.size and lb.tok_line.min() >= 0
    assert lb.tokens.tolist() == [3, 12, 10, 2, 3, 5]
    assert np.bincount(lb.tok_line).tolist() == lb.tokens.tolist()  # tokens per line agree
    assert lb.terminal.tolist() == [False, True, True, False, False, False]
    # Menu lines equal up to case and punctuation share a hash; other lines do not.
    assert lb.hash[0] == lb.hash[4] and len(set(lb.hash[:4].tolist())) == 4
    assert lb.position[:5].tolist() == pytest.approx([0, 0.2, 0.4, 0.6, 0.8])
    # Token t of the tokenizer is token t here: the CJK line's tokens are its characters.
    first_cjk = int(np.flatnonzero(lb.tok_line == 2)[0])
    assert tokens(PAGE)[first_cjk] == "東"


def test_offsets_from_other_texts_are_refused() -> None:
    cfg = NormalizeConfig()
    classes = char_classes(True)
    tb = tokenize_batch(normalize_batch(["a b c"], cfg), classes, ShingleConfig())
    with pytest.raises(ValueError, match="do not match"):
        token_lines(normalize_batch(["a b c d"], cfg), classes, tb.tok_offsets)
    with pytest.raises(ValueError, match="length"):
        token_lines(["a"], classes, np.array([0, 1, 2]))


def test_span_line_cues_weigh_menus_low_prose_high_and_count_cjk_characters() -> None:
    from semhash_llm.text.lines import span_line_cues

    classes = char_classes(True)
    menu = "Home\nNews\nSport\nWeather"
    prose = "the council approved a new budget for the schools and the roads of the town on tuesday."
    cjk = "今天市议会批准了新的预算用于学校道路和图书馆的建设"
    texts = [menu + "\n" + prose, cjk]
    p0 = len(menu) + 1
    doc = np.array([0, 0, 0, 1])
    start = np.array([0, p0, 5, 0])
    end = np.array([len(menu), p0 + 20, p0 + 10, len(cjk)])
    w = span_line_cues(texts, classes, doc, start, end)
    assert w[0] < 0.05 and w[1] > 0.98  # a menu span; a span inside a sentence weighs its whole line
    assert 0.05 < w[2] < 0.99  # across both
    assert w[3] > 0.99  # 25 CJK characters: 25 tokens on the line
    with pytest.raises(ValueError, match="sorted"):
        span_line_cues(texts, classes, np.array([1, 0]), np.array([0, 0]), np.array([1, 1]))
