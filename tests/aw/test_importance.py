"""The cheap importance model: fitting, prediction, files, Spearman, and `train importance` on a small corpus."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from semhash_llm.aw.importance import LINE_FEATURES, ImportanceModel, fit_importance, line_features, spearman
from semhash_llm.text.lines import tokens_and_lines as _batch
from semhash_llm.train.importance import chunk_lines

WORDS = ("river stone market winter signal garden copper lantern orbit meadow harbor violet canyon "
         "the of and a to in is was for on with as by at from").split()



def _page(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randrange(4, 9)):
        k = rng.choice([1, 2, 3, 12, 20])
        lines.append(" ".join(rng.choice(WORDS) for _ in range(k)) + ("." if k > 10 else ""))
    return "\n".join(lines)


def test_fit_recovers_a_planted_table_and_line_coefficients() -> None:
    rng = random.Random(0)
    tb, lines = _batch([_page(rng) for _ in range(400)])
    x = line_features(tb, lines)
    bits = 8
    truth_table = np.random.default_rng(1).normal(0, 0.5, 1 << bits)
    truth_coef = np.array([0.8, -0.2, 0.3])
    bucket = (tb.tok_hashes >> np.uint64(64 - bits)).astype(np.int64)
    y = truth_table[bucket] + x @ truth_coef + 0.1
    model = fit_importance(tb.tok_hashes, x, y, bits=bits, l2=0.0, rounds=30)
    pred = model.log_importance(tb, lines)
    assert np.corrcoef(pred, y)[0, 1] > 0.999
    assert spearman(pred, y) > 0.99


def test_predict_is_mean_one_and_absolute_is_the_same_for_a_line_in_any_document() -> None:
    rng = random.Random(2)
    bits = 6
    model = ImportanceModel(np.random.default_rng(0).normal(0, 0.3, 1 << bits).astype(np.float32),
                            np.array([1.0, 0.1, 0.2], np.float32), 0.0)
    line = "the same long sentence of article text appears in both pages here."
    texts = [line + "\nMenu\nHome", "About us\n" + line + "\n" + _page(rng), ""]
    tb, lines = _batch(texts)
    imp = model.predict(tb, lines)
    for d in range(2):
        assert imp[tb.tok_offsets[d]:tb.tok_offsets[d + 1]].mean() == pytest.approx(1.0, rel=1e-5)
    absolute = model.absolute(tb, lines)
    n = len(line.split())
    first = absolute[tb.tok_offsets[0]: tb.tok_offsets[0] + n]
    second = absolute[tb.tok_offsets[1] + 2: tb.tok_offsets[1] + 2 + n]  # after "About us"
    assert np.array_equal(first, second)


def test_model_round_trips_through_its_file_and_explains_bad_files(tmp_path: Path) -> None:
    model = ImportanceModel(np.linspace(-1, 1, 256).astype(np.float32), np.array([0.5, -0.1, 0.2], np.float32),
                            0.25, meta={"trained_on": "test"})
    path = model.save(tmp_path / "m" / "importance.npz")
    back = ImportanceModel.load(path)
    assert np.allclose(back.table, model.table, atol=1e-3)  # stored as float16
    assert np.array_equal(back.coef, model.coef) and back.intercept == 0.25 and back.meta == {"trained_on": "test"}
    assert back.bits == 8
    with pytest.raises(FileNotFoundError, match="train importance"):
        ImportanceModel.load(tmp_path / "missing.npz")
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not an importance model"):
        ImportanceModel.load(tmp_path / "bad.npz")
    with pytest.raises(ValueError, match="power-of-two"):
        ImportanceModel(np.zeros(100, np.float32), np.zeros(3, np.float32), 0.0)
    with pytest.raises(ValueError, match="coef must have 3"):
        ImportanceModel(np.zeros(64, np.float32), np.zeros(4, np.float32), 0.0)


def test_the_shipped_model_loads_and_has_a_card() -> None:
    model = ImportanceModel.load()
    assert model.coef.shape == (len(LINE_FEATURES),) and model.bits == 16
    assert "CC BY-SA" in model.meta["trained_on"]
    card = (Path(__file__).resolve().parents[2] / "src/semhash_llm/assets/importance/MODEL_CARD.md").read_text()
    assert "Spearman" in card and "public domain" in card


def test_spearman_matches_definition_with_ties() -> None:
    a = [1.0, 2.0, 2.0, 3.0, 5.0]
    assert spearman(a, [10, 20, 20, 30, 50]) == pytest.approx(1.0)
    assert spearman(a, [5, 4, 4, 2, 1]) == pytest.approx(-1.0)
    assert np.isnan(spearman([1, 1, 1], [1, 2, 3]))
    with pytest.raises(ValueError, match="one length"):
        spearman([1, 2], [1, 2, 3])


def test_chunk_lines_keeps_whole_lines_within_the_word_budget() -> None:
    text = "a b c\nd e\n\nf g h i\n" + " ".join(["w"] * 12)
    chunks = chunk_lines(text, 5)
    assert all(len(c.split()) <= 5 for c in chunks)
    assert " ".join(" ".join(chunks).split()) == " ".join(text.split())  # every word once, in order
    assert chunks[0] == "a b c\nd e"
    with pytest.raises(ValueError, match="max_words"):
        chunk_lines(text, 0)


@pytest.mark.ml
def test_train_importance_writes_a_model_card_and_scores(tmp_path: Path) -> None:
    from semhash_llm.train.importance import train_importance

    rng = random.Random(3)
    docs = ["\n".join(_page(rng) for _ in range(3)) for _ in range(60)]
    report = train_importance(docs, tmp_path, max_chunks=40, chunk_words=60, bits=10, trained_on="synthetic test pages")
    model = ImportanceModel.load(tmp_path / "importance.npz")
    assert model.bits == 10 and model.meta["trained_on"] == "synthetic test pages"
    scores = report["scores"]
    assert -1.0 <= scores["spearman_model_mean"] <= 1.0 and scores["held_apart_chunks"] >= 1
    assert json.loads((tmp_path / "train_report.json").read_text())["scores"] == scores
    assert "synthetic test pages" in (tmp_path / "MODEL_CARD.md").read_text()
