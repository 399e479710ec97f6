"""--engine ray on a local Ray cluster gives exactly the decisions of --engine local."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import dedup_cli as _dedup
from helpers import resume_corpus as _corpus

pytest.importorskip("ray.data")


def test_ray_engine_equals_local(tmp_path: Path) -> None:
    inp = _corpus(tmp_path)
    local = _dedup(inp, tmp_path / "local")
    assert local.returncode == 0, local.stderr
    ray = _dedup(inp, tmp_path / "ray", "--engine", "ray", "--ray-workers", "2")
    assert ray.returncode == 0, ray.stderr[-3000:]
    a = pq.read_table(tmp_path / "local" / "documents.parquet")
    b = pq.read_table(tmp_path / "ray" / "documents.parquet")
    assert b.equals(a)
    assert pq.read_table(tmp_path / "ray" / "kept.parquet").equals(pq.read_table(tmp_path / "local" / "kept.parquet"))
    report = json.loads((tmp_path / "ray" / "report.json").read_text())
    engine = report["funnel"][0]["details"]["engine"]
    assert engine["kind"] == "ray" and engine["stages"] == ["lsh", "sph"] and engine["bucket_shuffle"] == ["lsh"]
    assert report["config_fingerprint"] == json.loads((tmp_path / "local" / "report.json").read_text())[
        "config_fingerprint"]
    removed = [r for r in a.to_pylist() if r["action"] == "remove"]
    assert len({r["decided_by"] for r in removed}) >= 2  # the corpus exercises several stages
