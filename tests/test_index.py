"""The incremental index: build, add, info, dedup --against; refusals; atomic writes; no pickle."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import ENV, make_corpus, write_jsonl
from helpers import resume_corpus as _corpus

from semhash_llm.api import Deduplicator
from semhash_llm.config import PipelineConfig
from semhash_llm.io.readers import InputError
from semhash_llm.storage.index import DocumentIndex, IndexDirError


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "semhash_llm", *args, "--no-progress"] if args[0] != "index" or
                          args[1] != "info" else [sys.executable, "-m", "semhash_llm", *args],
                          capture_output=True, text=True, env=ENV, timeout=600)


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    tmp = tmp_path_factory.mktemp("index")
    lines = _corpus(tmp).read_text().splitlines(keepends=True)
    first, second = tmp / "a.jsonl", tmp / "b.jsonl"
    first.write_text("".join(lines[:30]))  # u0..u29
    second.write_text("".join(lines[30:]))  # u30.., their exact and near copies, an excerpt, questions
    return tmp, first, second


def test_dedup_against_an_index_traces_matches_to_indexed_ids(split: tuple[Path, Path, Path]) -> None:
    tmp, first, second = split
    idx = tmp / "idx"
    res = _cli("index", "build", str(first), "--index", str(idx))
    assert res.returncode == 0, res.stderr
    info = json.loads(_cli("index", "info", str(idx)).stdout)
    assert info["documents"] == 30 and len(info["segments"]) == 1 and info["stored_features"] == ["lsh", "sph"]
    res = _cli("dedup", str(second), "--against", str(idx), "-o", str(tmp / "out"), "--keep", "first")
    assert res.returncode == 0, res.stderr
    docs = pq.read_table(tmp / "out" / "documents.parquet")
    n_second = len(second.read_text().splitlines())
    assert docs.num_rows == n_second  # every input document once, no indexed one
    indexed = {json.loads(line)["id"] for line in first.read_text().splitlines()}
    assert not indexed & set(docs.column("id").to_pylist())
    rows = {r["id"]: r for r in docs.to_pylist()}
    # x0 is u0 in capitals (exact), n3 is u3 with a word changed (near): both indexed
    assert rows["x0"]["action"] == "remove" and rows["x0"]["duplicate_of"] == "u0" and rows["x0"]["relation"] == "exact"
    assert rows["n3"]["action"] == "remove" and rows["n3"]["duplicate_of"] == "u3"
    assert rows["n3"]["relation"] == "near_duplicate"
    report = json.loads((tmp / "out" / "report.json").read_text())
    against = report["against"]
    assert against["indexed_documents"] == 30
    to_indexed = sum(1 for r in rows.values() if r["action"] == "remove" and r["duplicate_of"] in indexed)
    assert against["removed_as_duplicate_of_indexed"] == to_indexed >= 8
    assert [f["name"] for f in report["files"]] == ["b.jsonl"]
    kept = pq.read_table(tmp / "out" / "kept.parquet")
    assert kept.num_rows == report["summary"]["kept"] == sum(1 for r in rows.values() if r["action"] == "keep")
    # The same decisions as one run over both files with keep=first (indexed documents come first).
    both = write_jsonl(tmp / "both.jsonl", [json.loads(line) for line in (first.read_text() + second.read_text())
                                            .splitlines()])
    res = _cli("dedup", str(both), "-o", str(tmp / "whole"), "--keep", "first")
    assert res.returncode == 0, res.stderr
    whole = pq.read_table(tmp / "whole" / "documents.parquet").slice(30)
    assert whole.drop_columns(["score"]).equals(docs.drop_columns(["score"]))
    np.testing.assert_allclose(whole.column("score").to_numpy(zero_copy_only=False),
                               docs.column("score").to_numpy(zero_copy_only=False), rtol=1e-6)


def test_add_refusals_and_atomic_segments(tmp_path: Path) -> None:
    records, _ = make_corpus(20, seed=9)
    a = write_jsonl(tmp_path / "a.jsonl", records[:20])
    b = write_jsonl(tmp_path / "b.jsonl", [{"id": f"new{i}", "text": r["text"] + " more"} for i, r in
                                            enumerate(records[20:])])
    cfg = PipelineConfig()
    idx = DocumentIndex.create(tmp_path / "idx", cfg)
    first = idx.add([a], cfg)
    assert first["documents"] == 20 and first["segment"] == "seg-00000"
    with pytest.raises(IndexDirError, match="already there"):
        DocumentIndex.create(tmp_path / "idx", cfg)
    # the same ids again: refused, and the index is left as it was
    with pytest.raises(InputError, match="already in the index"):
        DocumentIndex.open(tmp_path / "idx").add([a], cfg)
    again = DocumentIndex.open(tmp_path / "idx")
    assert again.num_documents == 20 and len(again.segments) == 1
    # other feature settings: refused, naming the setting; a threshold may differ
    other = cfg.with_overrides({"minhash": {"num_perm": 64}})
    with pytest.raises(IndexDirError, match=r"minhash.num_perm: index 128, this run 64"):
        again.add([b], other)
    again.check_config(cfg.with_overrides({"minhash": {"threshold": 0.8}}))
    second = again.add([b], cfg)
    assert second["segment"] == "seg-00001" and DocumentIndex.open(tmp_path / "idx").num_documents == 20 + len(
        records) - 20
    assert not list((tmp_path / "idx").glob(".tmp-*"))
    # the stored arrays load without pickle
    for npy in (tmp_path / "idx").rglob("*.npy"):
        np.load(npy, allow_pickle=False)
    # a run against the index with other feature settings is refused before it reads anything
    with pytest.raises(IndexDirError, match="other settings"):
        Deduplicator(other).run([b], tmp_path / "out", against=tmp_path / "idx")
    with pytest.raises(IndexDirError, match="not a semhash-llm index"):
        DocumentIndex.open(tmp_path / "nowhere")


def test_index_build_killed_midway_leaves_the_index_as_it_was(tmp_path: Path) -> None:
    records, _ = make_corpus(20, seed=2)
    a = write_jsonl(tmp_path / "a.jsonl", records[:20])
    b = write_jsonl(tmp_path / "b.jsonl", [{"id": f"b{i}", "text": r["text"]} for i, r in enumerate(records)])
    assert _cli("index", "build", str(a), "--index", str(tmp_path / "idx")).returncode == 0
    header = (tmp_path / "idx" / "index.json").read_text()
    # a write that died after its segment directory was made but before the rename
    (tmp_path / "idx" / ".tmp-seg-00001-999").mkdir()
    (tmp_path / "idx" / ".tmp-seg-00001-999" / "docs.parquet").write_bytes(b"PAR1 half")
    assert (tmp_path / "idx" / "index.json").read_text() == header
    assert DocumentIndex.open(tmp_path / "idx").num_documents == 20
    res = _cli("index", "add", str(b), "--index", str(tmp_path / "idx"))
    assert res.returncode == 0, res.stderr
    assert DocumentIndex.open(tmp_path / "idx").num_documents == 20 + len(records)
    assert not list((tmp_path / "idx").glob(".tmp-*"))


def test_the_feature_fingerprint_follows_the_student_contents_and_the_version(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24.9: a student retrained in place (same path, other weights) or an upgrade is
    another index: its codes must not be mixed with the indexed ones."""
    import shutil

    import semhash_llm.fingerprint as fp
    from semhash_llm.config import PipelineConfig
    from semhash_llm.sph.student import ASSETS_DIR
    from semhash_llm.storage.index import feature_fingerprint

    student = tmp_path / "student"
    shutil.copytree(ASSETS_DIR / "student", student)
    cfg = PipelineConfig.from_dict({"sph": {"student_path": str(student)}})
    first = feature_fingerprint(cfg)
    assert feature_fingerprint(cfg) == first
    meta = student / "student.json"
    meta.write_text(meta.read_text() + " ")  # retrained in place: other bytes at the same path
    second = feature_fingerprint(cfg)
    assert second != first
    monkeypatch.setattr(fp, "__version__", "99.0.0")
    assert feature_fingerprint(cfg) != second
