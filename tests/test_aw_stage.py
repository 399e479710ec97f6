"""The AW-MinHash stage in the cascade: wrapped copies meet, shared chrome confirms nothing."""

from __future__ import annotations

import random

import numpy as np
import pytest

from semhash_llm import ConfigError, PipelineConfig, deduplicate
from semhash_llm.config import AWConfig
from semhash_llm.stages.aw import AWMinHashStage, effective_share
from semhash_llm.stages.base import StreamBatch
from semhash_llm.text.normalize import char_classes, normalize_batch
from semhash_llm.text.tokenize import tokenize_batch

VOCAB = [f"{a}{b}{c}" for a in "bcdfgklmnprst" for b in "aeiou" for c in "lmnrst"]


def _prose(rng: random.Random, sentences: int) -> str:
    return "\n".join(" ".join(rng.choice(VOCAB) for _ in range(16)) + "." for _ in range(sentences))


def _chrome(rng: random.Random, lines: int) -> tuple[str, str]:
    """Head (a menu: one or two words a line) and tail (short link lines) of one site's pages."""
    head = "\n".join(" ".join(rng.choice(VOCAB).capitalize() for _ in range(rng.randint(1, 2))) for _ in range(lines))
    tail = "\n".join(" ".join(rng.choice(VOCAB) for _ in range(3)) for _ in range(lines // 2))
    return head, tail


def _wrap(chrome: tuple[str, str], article: str) -> str:
    return f"{chrome[0]}\n{article}\n{chrome[1]}"


def _run(records: list[dict[str, str]], **sections: dict) -> dict[str, dict]:
    cfg = PipelineConfig.from_dict({"select": {"keep": "first"}, **sections})
    res = deduplicate(records, cfg)
    return {r["id"]: r for r in res.documents.to_pylist()} | {"_report": res.report}


def _wrapped_corpus(seed: int = 0, prefix: str = "") -> list[dict[str, str]]:
    rng = random.Random(seed)
    article = _prose(rng, 6)
    records = [{"id": f"{prefix}wrap{k}", "text": _wrap(_chrome(rng, 70), article)} for k in range(3)]
    records += [{"id": f"{prefix}other{k}", "text": _wrap(_chrome(rng, 70), _prose(rng, 6))} for k in range(5)]
    return records


def test_one_article_in_different_chrome_is_found_by_weighting() -> None:
    records = _wrapped_corpus()
    rows = _run(records)
    assert [rows[f"wrap{k}"]["action"] for k in range(3)] == ["keep", "remove", "remove"]  # found by AW
    assert {rows[f"wrap{k}"]["duplicate_of"] for k in (1, 2)} == {"wrap0"}
    assert all(rows[f"other{k}"]["action"] == "keep" for k in range(5))
    assert {rows[f"wrap{k}"]["decided_by"] for k in (1, 2)} <= {"aw", "sph"}
    aw = next(s for s in rows["_report"]["funnel"] if s["stage"] == "aw")
    assert aw["details"]["docs_banded"] == len(records)
    # Plain MinHash sees mostly chrome: without the stage (and without the weighted passages) the copies stay.
    plain = _run(records, aw={"enabled": False}, passages={"weighted": False})
    assert all(plain[f"wrap{k}"]["action"] == "keep" for k in range(3))


def test_shared_chrome_confirms_nothing_even_where_plain_minhash_would_merge() -> None:
    rng = random.Random(1)
    site = _chrome(rng, 90)
    records = [{"id": f"page{k}", "text": _wrap(site, _prose(rng, 2))} for k in range(4)]
    # A loose plain threshold merges pages that share only their chrome...
    off = {"enabled": False}
    merged = _run(records, minhash={"threshold": 0.5}, aw=off, sph=off, passages=off)
    assert sum(merged[f"page{k}"]["action"] == "remove" for k in range(4)) >= 1
    # ... the weighted confirmation of the same LSH candidates does not.
    rows = _run(records, minhash={"threshold": 0.5}, sph=off, passages=off)
    assert all(rows[f"page{k}"]["action"] == "keep" for k in range(4))
    lsh = next(s for s in rows["_report"]["funnel"] if s["stage"] == "lsh")
    assert lsh["pairs_in"] >= 1 and lsh["pairs_out"] == 0


def test_one_line_texts_are_left_to_plain_minhash() -> None:
    rng = random.Random(2)
    base = " ".join(rng.choice(VOCAB) for _ in range(20))
    words = base.split()
    words[10] = "zzz"
    records = [{"id": "a", "text": base}, {"id": "b", "text": " ".join(words)}, *_wrapped_corpus()]
    rows = _run(records)
    aw = next(s for s in rows["_report"]["funnel"] if s["stage"] == "aw")
    assert aw["details"]["docs_seen"] == len(records) and aw["details"]["docs_signed"] == len(records) - 2
    assert aw["details"]["docs_banded"] == len(records) - 2
    with_aw = rows["b"]["action"], rows["b"]["decided_by"]
    without = _run(records, aw={"enabled": False})
    assert with_aw == (without["b"]["action"], without["b"]["decided_by"])


@pytest.mark.parametrize("importance", ["model", "line"])
def test_decisions_do_not_depend_on_batching_or_the_idf_sample_boundary(importance: str) -> None:
    records = _wrapped_corpus(3, "x") + _wrapped_corpus(4, "y")
    aw = {"importance": importance, "idf": True, "idf_sample": 5}
    out = [deduplicate(records, PipelineConfig.from_dict({"reader": {"batch_size": bs}, "aw": aw})).documents
           for bs in (3, 7, 1000)]
    assert out[0].equals(out[1]) and out[1].equals(out[2])


def test_a_document_gets_the_same_signature_before_and_after_the_idf_sample() -> None:
    rng = random.Random(5)
    text = _wrap(_chrome(rng, 20), _prose(rng, 3))
    others = [_wrap(_chrome(rng, 20), _prose(rng, 3)) for _ in range(4)]
    texts = [text, *others, text]
    stage = AWMinHashStage(AWConfig(idf=True, idf_sample=3))
    cfg = stage.normalize
    for lo, hi in ((0, 2), (2, 4), (4, 6)):
        chunk = texts[lo:hi]
        norm = normalize_batch(chunk, cfg)
        tb = tokenize_batch(norm, char_classes(cfg.strip_punctuation), PipelineConfig().shingle)
        ok = np.ones(len(chunk), dtype=np.bool_)
        stage.process(StreamBatch(np.arange(lo, hi), chunk, tb, np.zeros(len(chunk), np.uint8), ok, norm))
    sigs, rows = stage.signatures()
    assert rows.tolist() == list(range(6))
    assert np.array_equal(sigs[0], sigs[5]) and not np.array_equal(sigs[0], sigs[1])
    assert stage.df_ is not None and stage.df_.num_docs == 3


def test_effective_share() -> None:
    offsets = np.array([0, 4, 8, 9, 9])
    weights = np.array([1, 1, 1, 1, 1, 1, 1e-9, 1e-9, 5], dtype=np.float32)
    share = effective_share(offsets, weights)
    assert share[0] == pytest.approx(1.0) and share[1] == pytest.approx(0.5, abs=1e-3)
    assert share[2] == pytest.approx(1.0) and share[3] == pytest.approx(1.0)


def test_aw_config_is_validated() -> None:
    with pytest.raises(ConfigError, match="bands_focused"):
        PipelineConfig.from_dict({"aw": {"bands_focused": 8, "bands_diffuse": 16}})
    with pytest.raises(ConfigError, match="importance"):
        PipelineConfig.from_dict({"aw": {"importance": "attention"}})
    with pytest.raises(ConfigError, match="bands_focused \\* rows_per_band <= num_perm"):
        PipelineConfig.from_dict({"aw": {"num_perm": 64}})
    with pytest.raises(ConfigError, match="importance='model'"):
        PipelineConfig.from_dict({"aw": {"importance_model": "/nope.npz"}})
    with pytest.raises(FileNotFoundError, match="train importance"):
        deduplicate([{"id": "a", "text": "x"}],
                    PipelineConfig.from_dict({"aw": {"importance": "model", "importance_model": "/nope.npz"}}))


@pytest.mark.ml
def test_teacher_importance_path_runs_in_the_cascade() -> None:
    records = _wrapped_corpus()
    rows = _run(records, aw={"importance": "teacher"})
    aw = next(s for s in rows["_report"]["funnel"] if s["stage"] == "aw")
    assert aw["details"]["importance"] == "teacher"
    assert rows["wrap1"]["action"] == "remove" and rows["wrap1"]["duplicate_of"] == "wrap0"


def test_pages_of_one_site_are_not_passage_versions_of_each_other() -> None:
    rng = random.Random(1)
    site = _chrome(rng, 90)
    records = [{"id": f"page{k}", "text": _wrap(site, _prose(rng, 2))} for k in range(4)]
    off = {"enabled": False}
    # Weighted by the line cue, the shared menu passages do not make the pages versions of one text
    # (and the lsh candidates, confirmed on the weighted signatures, are rejected) ...
    rows = _run(records, sph=off, passages={"weighted": True})
    assert all(rows[f"page{k}"]["action"] == "keep" for k in range(4))
    # ... counted one passage one vote (the default), they did.
    unweighted = _run(records, sph=off)
    assert sum(unweighted[f"page{k}"]["decided_by"] == "passages" for k in range(4)) >= 1
