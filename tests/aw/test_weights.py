"""Weighted shingles: line-cue importance × IDF on the shingles MinHash uses."""

from __future__ import annotations

import random

import numpy as np
import pytest

from semhash_llm.aw.weights import line_cue_importance, weighted_shingles
from semhash_llm.sketch.cws import cws_signatures, weighted_jaccard, weighted_jaccard_estimate
from semhash_llm.sketch.docfreq import DocumentFrequency
from semhash_llm.text.lines import tokens_and_lines as _batch
from semhash_llm.text.tokenize import shingle_hashes

WORDS = ("river stone market winter signal garden copper lantern orbit meadow harbor violet canyon "
         "engine pepper glacier velvet summit timber falcon marble ribbon tunnel cobalt").split()


def _prose(rng: random.Random, sentences: int) -> str:
    return "\n".join(" ".join(rng.choice(WORDS) + str(rng.randrange(50)) for _ in range(14)) + "."
                     for _ in range(sentences))


def _menu(rng: random.Random, lines: int) -> str:
    return "\n".join(f"{rng.choice(WORDS).capitalize()}{rng.randrange(9)}" for _ in range(lines))



def test_shingles_are_minhashs_and_menu_shingles_weigh_less() -> None:
    rng = random.Random(0)
    page = "\n".join([_menu(rng, 30), _prose(rng, 6), _menu(rng, 30)])
    texts = [page, "short text", ""]
    tb, lb = _batch(texts)
    imp = line_cue_importance(tb, lb)
    for d in range(2):  # mean 1 over each document's tokens
        assert imp[tb.tok_offsets[d]:tb.tok_offsets[d + 1]].mean() == pytest.approx(1.0, rel=1e-5)
    offsets, features, weights = weighted_shingles(tb, imp)
    for d, text in enumerate(texts):  # the same shingles MinHash signs
        assert set(features[offsets[d]:offsets[d + 1]].tolist()) == set(shingle_hashes(text).tolist())
    w = weights[offsets[0]:offsets[1]]
    # The first 26 shingles lie in the menu (one token a line), the prose ones come after.
    assert w[:26].max() < 0.1 < 1.0 < w[30:110].min()
    assert offsets[-1] == offsets[-2]  # the empty text has no shingle


def test_idf_multiplies_the_weights_by_the_mean_idf_of_the_shingle_tokens() -> None:
    rng = random.Random(1)
    tb, lb = _batch([_prose(rng, 3), _prose(rng, 3)])
    imp = line_cue_importance(tb, lb)
    df = DocumentFrequency(width_bits=12)
    df.add(tb.tok_offsets, tb.tok_hashes)
    tok_idf = df.idf(tb.tok_hashes)
    o, f, plain = weighted_shingles(tb, imp)
    _, f2, with_idf = weighted_shingles(tb, imp, tok_idf)
    assert np.array_equal(f, f2)
    n = int(tb.ngrams[0])  # word n-grams of document 0: shingle j covers tokens j .. j + n - 1
    s = int(tb.tok_offsets[0])
    expect = np.array([tok_idf[s + j : s + j + n].mean() for j in range(int(o[1]))])
    assert np.allclose(with_idf[: o[1]], plain[: o[1]] * expect, rtol=1e-5)
    with pytest.raises(ValueError, match="one token_idf per token"):
        weighted_shingles(tb, imp, tok_idf[:3])


def test_chrome_stops_counting_in_both_directions() -> None:
    rng = random.Random(2)
    article, other = _prose(rng, 8), _prose(rng, 8)
    chrome_a, chrome_b = (_menu(rng, 60), _menu(rng, 60)), (_menu(rng, 60), _menu(rng, 60))
    wrap = lambda body, chrome: "\n".join([chrome[0], body, chrome[1]])  # noqa: E731
    texts = [wrap(article, chrome_a), wrap(article, chrome_b), wrap(other, chrome_a)]
    tb, lb = _batch(texts)
    imp = line_cue_importance(tb, lb)
    offsets, features, weights = weighted_shingles(tb, imp)
    doc = [(features[offsets[d]:offsets[d + 1]], weights[offsets[d]:offsets[d + 1]]) for d in range(3)]
    unit = [(f, np.ones_like(w)) for f, w in doc]
    same_article = weighted_jaccard(*doc[0], *doc[1]), weighted_jaccard(*unit[0], *unit[1])
    same_chrome = weighted_jaccard(*doc[0], *doc[2]), weighted_jaccard(*unit[0], *unit[2])
    assert same_article[0] > 0.8 > same_article[1]  # one article in two chromes: weighted, a near copy
    assert same_chrome[0] < 0.1 < same_chrome[1]  # two articles in one chrome: weighted, unrelated
    sigs = cws_signatures(offsets, features, weights, num_perm=256)
    assert weighted_jaccard_estimate(sigs[0], sigs[1]) == pytest.approx(same_article[0], abs=0.1)


def test_mismatched_inputs_are_refused() -> None:
    tb, lb = _batch(["one two three", "four"])
    with pytest.raises(ValueError, match="one importance per token"):
        weighted_shingles(tb, np.ones(2, np.float32))
    with pytest.raises(ValueError, match="scale"):
        line_cue_importance(tb, lb, scale=0.0)
    tb2, _ = _batch(["one two"])
    with pytest.raises(ValueError, match="not computed from these tokens"):
        line_cue_importance(tb2, lb)
