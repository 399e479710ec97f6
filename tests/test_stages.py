"""The one stage protocol: every stage is an object the cascade loops over; --only / --no-<stage> / `stages`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import make_corpus, write_jsonl

from semhash_llm.api import deduplicate
from semhash_llm.cascade import STAGES, StageInfo, configured_stages
from semhash_llm.cli import main
from semhash_llm.config import ConfigError, PipelineConfig
from semhash_llm.pipeline import registry as registry_mod
from semhash_llm.pipeline.select import EDGE_KINDS
from semhash_llm.stages.base import DecideContext, Decision, Edges, Fragments, Stage, StreamBatch
from semhash_llm.text.spans import remove_spans


def test_every_configured_stage_follows_the_protocol() -> None:
    stages = configured_stages(PipelineConfig())
    assert [info.name for info in STAGES] == ["bloom", "lsh", "aw", "sph", "mgfn", "judge", "passages"]
    assert [s.name for s in stages] == ["bloom", "lsh", "aw", "sph", "mgfn", "passages"]  # the judge is off by default
    assert all(isinstance(s, Stage) for s in stages)


def _funnel(tmp_path: Path, *flags: str) -> list[str]:
    records, _ = make_corpus()
    path = write_jsonl(tmp_path / "c.jsonl", records)
    out = tmp_path / ("o" + "".join(f.replace("-", "_").replace(",", "_") for f in flags))
    assert main(["dedup", str(path), "-o", str(out), "--no-progress", *flags]) == 0
    return [row["stage"] for row in json.loads((out / "report.json").read_text())["funnel"]]


def test_only_and_no_stage_flags_shape_the_cascade(tmp_path: Path) -> None:
    assert _funnel(tmp_path) == ["read", "bloom", "lsh", "aw", "sph", "mgfn", "passages", "select", "write"]
    assert _funnel(tmp_path, "--only", "bloom,lsh") == ["read", "bloom", "lsh", "select", "write"]
    assert _funnel(tmp_path, "--no-sph") == ["read", "bloom", "lsh", "aw", "mgfn", "passages", "select", "write"]
    assert _funnel(tmp_path, "--no-aw") == ["read", "bloom", "lsh", "sph", "mgfn", "passages", "select", "write"]
    assert _funnel(tmp_path, "--no-lsh", "--no-sph", "--no-aw", "--no-mgfn") == ["read", "bloom", "passages", "select",
                                                                                "write"]
    assert _funnel(tmp_path, "--only", "bloom") == ["read", "bloom", "select", "write"]


def test_only_names_unknown_stages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", make_corpus()[0])
    assert main(["dedup", str(path), "-o", str(tmp_path / "o"), "--only", "bloom,verifier"]) == 2
    err = capsys.readouterr().err
    assert "'only' parameter" in err and "bloom, lsh, aw, sph, mgfn, judge, passages" in err and "'bloom,verifier'" in err


def test_stages_command_lists_one_line_each(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stages"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [ln.split()[0] for ln in lines] == ["bloom", "lsh", "aw", "sph", "mgfn", "judge", "passages"]
    assert [ln.split()[1] for ln in lines] == ["on", "on", "on", "on", "on", "off", "on"]


class _LengthTwins:
    """A toy stage: links documents of exactly equal length (to show a new stage needs no cascade change)."""

    name = "twins"

    def __init__(self) -> None:
        self.index: list[np.ndarray] = []
        self.length: list[np.ndarray] = []

    def process(self, batch: StreamBatch) -> None:
        docs = batch.feature_docs
        self.index.append(batch.index[docs])
        self.length.append(np.array([len(batch.texts[j]) for j in docs.tolist()], dtype=np.int64))

    def decide(self, ctx: DecideContext) -> Decision:
        index, length = np.concatenate(self.index), np.concatenate(self.length)
        first: dict[int, int] = {}
        a, b = [], []
        for i, n in zip(index.tolist(), length.tolist()):
            j = first.setdefault(n, i)
            if j != i and ctx.union_find.union(i, j):
                a.append(i)
                b.append(j)
        edges = Edges(np.array(a, np.int64), np.array(b, np.int64), np.ones(len(a), np.float32),
                      np.full(len(a), 1, np.uint8))
        return Decision(edges, docs_in=int(index.size), pairs_in=len(a), pairs_out=len(a))


def test_a_new_stage_plugs_into_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_mod, "STAGES", (StageInfo("twins", "bloom", "toy", lambda cfg: _LengthTwins()),))
    records = [{"id": "a", "text": "x" * 10 + " one"}, {"id": "b", "text": "y" * 10 + " two"},
               {"id": "c", "text": "a different length"}]
    result = deduplicate(records, PipelineConfig.from_dict({"select": {"keep": "first"}}))
    rows = {r["id"]: r for r in result.documents.to_pylist()}
    assert rows["b"]["action"] == "remove" and rows["b"]["duplicate_of"] == "a"
    assert rows["b"]["decided_by"] == EDGE_KINDS[1][1]
    funnel = {row["stage"]: row for row in result.report["funnel"]}
    assert list(funnel) == ["read", "twins", "select"]
    assert funnel["twins"]["docs_in"] == 3 and funnel["twins"]["docs_removed"] == 1


def test_only_is_validated_before_anything_runs() -> None:
    from semhash_llm.cli import _only_sections

    with pytest.raises(ConfigError):
        _only_sections(",")
    assert _only_sections("bloom,lsh") == {"bloom": True, "minhash": True, "aw": False, "sph": False, "verifier": False,
                                           "judge": False, "passages": False}


class _Directed:
    """A toy stage: document 0 is contained in document 1, and 'CUT' is cut from every document that has it."""

    name = "directed"

    def __init__(self) -> None:
        self.texts: dict[int, str] = {}

    def process(self, batch: StreamBatch) -> None:
        for j in batch.feature_docs.tolist():
            self.texts[int(batch.index[j])] = batch.texts[j]

    def decide(self, ctx: DecideContext) -> Decision:
        ctx.union_find.union(0, 1)
        edges = Edges(np.array([0]), np.array([1]), np.array([0.9], np.float32), np.array([3], np.uint8))
        docs = [d for d, t in sorted(self.texts.items()) if "CUT" in t]
        starts = [self.texts[d].index("CUT") for d in docs]
        frags = Fragments(np.array(docs, np.int64), np.array(starts, np.int64), np.array(starts, np.int64) + 3)
        return Decision(edges, docs_in=len(self.texts), children=np.array([0]), fragments=frags)


@pytest.mark.parametrize("keep", ["first", "longest"])
def test_directed_edges_and_fragments_reach_the_output(monkeypatch: pytest.MonkeyPatch, keep: str) -> None:
    monkeypatch.setattr(registry_mod, "STAGES", (StageInfo("directed", "bloom", "toy", lambda cfg: _Directed()),))
    records = [{"id": "child", "text": "a long child text CUT that is longer than its parent, oddly"},
               {"id": "parent", "text": "the parent CUT"}, {"id": "host", "text": "a host with CUT inside"}]
    result = deduplicate(records, PipelineConfig.from_dict({"select": {"keep": keep}}))
    rows = {r["id"]: r for r in result.documents.to_pylist()}
    # Whatever the policy, the child is removed and the parent kept.
    assert rows["child"]["action"] == "remove" and rows["child"]["duplicate_of"] == "parent"
    assert (rows["child"]["relation"], rows["child"]["decided_by"]) == ("contained_in", "passages")
    assert rows["parent"]["action"] == "keep"
    # Fragments are reported for kept documents only, and cut from their kept text.
    assert rows["child"]["fragments"] == []
    assert rows["parent"]["fragments"] == [[11, 14]] and rows["host"]["fragments"] == [[12, 15]]
    kept = {r["id"]: r["text"] for r in result.selected}
    assert kept == {"parent": "the parent ", "host": "a host with  inside"}


def test_remove_spans_round_trips() -> None:
    text = "0123456789"
    assert remove_spans(text, [(2, 4), (3, 6), (8, 10)]) == "0167"
    assert remove_spans(text, []) == text
    with pytest.raises(ValueError, match="outside"):
        remove_spans(text, [(5, 11)])


def test_no_records_gives_an_empty_contract_table() -> None:
    result = deduplicate([])
    assert result.num_documents == 0 and result.documents.column_names[:3] == ["id", "action", "duplicate_of"]
    assert result.report["summary"]["documents"] == 0 and result.selected == []
