"""SemHashDedup: the cascade as a datatrove pipeline step."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest
from helpers import random_text

pytest.importorskip("datatrove")

from datatrove.data import Document  # noqa: E402
from datatrove.executor import LocalPipelineExecutor  # noqa: E402
from datatrove.pipeline.writers import JsonlWriter  # noqa: E402

from semhash_llm import FrameError, PipelineConfig  # noqa: E402
from semhash_llm.integrations.datatrove import SemHashDedup  # noqa: E402

CHEAP = {"sph": {"enabled": False}, "verifier": {"enabled": False}, "aw": {"enabled": False},
         "passages": {"enabled": False}, "select": {"keep": "first"}}
CONFIG = PipelineConfig.from_dict(CHEAP)
SENTENCE = "The quick brown fox jumps over the lazy dog near the old river bank on a sunny afternoon."
TEXTS = {
    "a": SENTENCE,
    "b": "Heavy rain is expected across the northern valleys this weekend, officials said today.",
    "c": SENTENCE.upper().replace(" ", "  "),
    "d": "A completely different sentence about deduplicating pre-training data for language models.",
}


def _docs() -> list[Document]:
    return [Document(text=t, id=i, metadata={"source": "test"}) for i, t in TEXTS.items()]


def _stat(step: SemHashDedup, name: str) -> float:
    return float(step.stats[name].total)


def test_yields_kept_documents_with_their_decision() -> None:
    step = SemHashDedup(CONFIG)
    out = list(step.run(iter(_docs()), rank=0, world_size=1))
    assert [d.id for d in out] == ["a", "b", "d"]
    a, b, _ = out
    assert a.metadata == {"source": "test", "semhash_action": "keep", "semhash_cluster_id": "a",
                          "semhash_cluster_size": 2}
    assert b.metadata["semhash_cluster_id"] == "b" and b.metadata["semhash_cluster_size"] == 1
    assert a.text == SENTENCE
    assert (_stat(step, "total"), _stat(step, "forwarded"), _stat(step, "dropped")) == (4, 3, 1)
    assert _stat(step, "dropped_exact") == 1


def test_keep_removed_yields_removed_documents_too() -> None:
    step = SemHashDedup(CONFIG, keep_removed=True, metadata_prefix="dedup_")
    out = {d.id: d for d in step(_docs())}
    assert list(out) == ["a", "b", "c", "d"]
    c = out["c"].metadata
    assert c["dedup_action"] == "remove" and c["dedup_duplicate_of"] == "a"
    assert (c["dedup_relation"], c["dedup_decided_by"], c["dedup_cluster_id"]) == ("exact", "bloom", "a")
    assert c["dedup_score"] == pytest.approx(1.0)
    assert "dedup_duplicate_of" not in out["a"].metadata
    assert _stat(step, "dropped") == 1


def _viral_docs() -> list[Document]:
    rng = random.Random(0)
    viral = "Subscribe to our newsletter for the latest updates on every story we publish here."
    return [Document(text=f"{random_text(rng, 30)}. {viral} {random_text(rng, 30)}.", id=f"v{i}")
            for i in range(6)]


def test_kept_documents_lose_their_viral_fragments() -> None:
    cfg = PipelineConfig.from_dict({**CHEAP, "passages": {"enabled": True}})
    originals = {d.id: d.text for d in _viral_docs()}
    step = SemHashDedup(cfg)
    out = list(step.run(iter(_viral_docs())))
    assert len(out) == 6 and out[0].text == originals["v0"] and "semhash_fragments_cut" not in out[0].metadata
    for doc in out[1:]:
        (start, end), = doc.metadata["semhash_fragments"]
        assert doc.metadata["semhash_fragments_cut"] == 1
        assert "newsletter" not in doc.text
        assert doc.text == originals[doc.id][:start] + originals[doc.id][end:]
    assert _stat(step, "fragments_cut") == 5
    assert _stat(step, "fragment_chars_cut") == sum(len(originals[d.id]) - len(d.text) for d in out)
    whole = list(SemHashDedup(cfg, cut_fragments=False).run(iter(_viral_docs())))
    assert [d.text for d in whole] == list(originals.values())
    assert all("semhash_fragments" in d.metadata for d in whole[1:])


def test_bad_documents_raise_or_are_dropped() -> None:
    docs = [*_docs(), Document(text="   ", id="blank")]
    with pytest.raises(FrameError, match=r"document 'blank' \(number 4 of task 0\): 'text' is empty; .*on_error"):
        list(SemHashDedup(CONFIG).run(iter(docs)))
    step = SemHashDedup(CONFIG.with_overrides({"reader": {"on_error": "skip"}}), keep_removed=True)
    blank = list(step.run(iter([*_docs(), Document(text="   ", id="blank")])))[-1]
    assert blank.metadata["semhash_relation"] == "skipped" and "empty" in blank.metadata["semhash_skip_reason"]
    assert _stat(step, "dropped_skipped") == 1
    assert list(SemHashDedup(CONFIG).run(iter([]))) == []
    with pytest.raises(TypeError, match="config must be a PipelineConfig"):
        SemHashDedup({"select": {"keep": "first"}})  # type: ignore[arg-type]


def _read_jsonl_gz(folder: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            rows += [json.loads(line) for line in fh]
    return rows


def test_in_a_local_pipeline_with_an_exclusion_writer(tmp_path: Path) -> None:
    step = SemHashDedup(CONFIG, exclusion_writer=JsonlWriter(str(tmp_path / "removed")))
    LocalPipelineExecutor(pipeline=[_docs(), step, JsonlWriter(str(tmp_path / "kept"))], tasks=1,
                          logging_dir=str(tmp_path / "logs")).run()
    kept = _read_jsonl_gz(tmp_path / "kept")
    assert [r["id"] for r in kept] == ["a", "b", "d"]
    assert kept[0]["metadata"]["semhash_cluster_size"] == 2
    removed = _read_jsonl_gz(tmp_path / "removed")
    assert [(r["id"], r["metadata"]["semhash_duplicate_of"]) for r in removed] == [("c", "a")]
