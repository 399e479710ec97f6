"""Resume: a run killed at a named point (SEMHASH_LLM_FAILPOINT, SIGKILL) and started again with
the same command continues from its checkpoints and writes exactly what an uninterrupted run
writes; changed input or config starts afresh and says so."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import dedup_cli as _dedup
from helpers import resume_corpus as _corpus

from semhash_llm.cascade import STAGES
from semhash_llm.pipeline.checkpoints import CHECKPOINT_DIR, Checkpoints


def _outputs(out: Path) -> dict[str, Any]:
    return {"documents": pq.read_table(out / "documents.parquet"), "kept": pq.read_table(out / "kept.parquet"),
            "report": json.loads((out / "report.json").read_text())}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("resume")
    inp = _corpus(tmp)
    res = _dedup(inp, tmp / "ref")
    assert res.returncode == 0, res.stderr
    ref = _outputs(tmp / "ref")
    assert ref["report"]["resumed_stages"] == []
    assert not (tmp / "ref" / CHECKPOINT_DIR).exists()  # removed once the outputs are written
    decided = set(ref["documents"].column("decided_by").drop_null().to_pylist())
    assert {"bloom", "lsh"} <= decided  # the corpus exercises the stages
    return inp, ref


def _kill_and_resume(inp: Path, out: Path, point: str, ref: dict[str, Any]) -> list[str]:
    killed = _dedup(inp, out, failpoint=point)
    assert killed.returncode == -signal.SIGKILL, (point, killed.returncode, killed.stderr[-2000:])
    again = _dedup(inp, out)
    assert again.returncode == 0, again.stderr
    got = _outputs(out)
    assert got["documents"].equals(ref["documents"]), point
    assert got["kept"].equals(ref["kept"]), point
    assert not (out / CHECKPOINT_DIR).exists()
    resumed: list[str] = got["report"]["resumed_stages"]
    return resumed


def _features_reused(out: Path) -> list[str]:
    read = next(row for row in json.loads((out / "report.json").read_text())["funnel"] if row["stage"] == "read")
    reused: list[str] = read["details"].get("features_reused_from_checkpoints", [])
    return reused


STAGE_NAMES = [s.name for s in STAGES if s.name != "judge"]  # the judge is off by default


@pytest.mark.parametrize("point", ["after:lsh", "during:mgfn", "after:select", "during:write"])
def test_killed_run_resumes_to_the_same_output(reference: tuple[Path, dict[str, Any]], tmp_path: Path,
                                               point: str) -> None:
    inp, ref = reference
    resumed = _kill_and_resume(inp, tmp_path / "out", point, ref)
    where, step = point.split(":")
    order = [*STAGE_NAMES, "select"]
    done = order[: order.index(step) + (1 if where == "after" else 0)] if step in order else order
    assert resumed == done, (point, resumed)
    # A kept stage's features are computed again only while a step still to run reads them:
    # the lexical stages' signatures serve SPH, the verifier's deferral and the cover check;
    # SPH's codes serve the cover check until selection is checkpointed; Bloom always streams.
    all_but_bloom = sorted(set(STAGE_NAMES) - {"bloom"})
    expected = {"after:lsh": [], "during:mgfn": [], "after:select": all_but_bloom,
                "during:write": all_but_bloom}[point]
    assert _features_reused(tmp_path / "out") == expected, point


@pytest.mark.slow
@pytest.mark.parametrize("point", [f"{w}:{s}" for s in ["read", *STAGE_NAMES, "select", "write"]
                                   for w in ("during", "after")])
def test_every_kill_point_resumes(reference: tuple[Path, dict[str, Any]], tmp_path: Path, point: str) -> None:
    inp, ref = reference
    _kill_and_resume(inp, tmp_path / "out", point, ref)


def test_changed_config_or_input_starts_afresh(reference: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    inp, ref = reference
    out = tmp_path / "out"
    assert _dedup(inp, out, failpoint="after:aw").returncode == -signal.SIGKILL
    res = _dedup(inp, out, "--threshold", "0.7")
    assert res.returncode == 0, res.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["resumed_stages"] == [] and "config changed" in report["resume_note"]
    # another input under the same output directory
    assert _dedup(inp, out, failpoint="after:aw").returncode == -signal.SIGKILL
    changed = tmp_path / "in.jsonl"
    changed.write_text(inp.read_text() + json.dumps({"id": "new", "text": "one more document"}) + "\n")
    res = _dedup(changed, out)
    assert res.returncode == 0, res.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["resumed_stages"] == [] and "input changed" in report["resume_note"]
    assert pq.read_table(out / "documents.parquet").num_rows == ref["documents"].num_rows + 1


def test_no_resume_keeps_no_checkpoints(reference: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    inp, ref = reference
    out = tmp_path / "out"
    assert _dedup(inp, out, "--no-resume", failpoint="after:lsh").returncode == -signal.SIGKILL
    assert not (out / CHECKPOINT_DIR).exists()
    res = _dedup(inp, out, "--no-resume")
    assert res.returncode == 0
    got = _outputs(out)
    assert got["report"]["resumed_stages"] == [] and got["documents"].equals(ref["documents"])


def test_checkpoint_steps_are_atomic_and_never_pickled(tmp_path: Path) -> None:
    ck = Checkpoints(tmp_path / "ck", "in", "cfg")
    assert ck.open() == []
    ck.save(1, "lsh", {"a": np.arange(3), "names": np.array(["x", "y"], dtype=object)}, {"k": np.int64(2)})
    (tmp_path / "ck" / ".tmp-02-aw-1").mkdir()  # a step killed while it was written: not complete
    (tmp_path / "ck" / ".tmp-02-aw-1" / "a.npy").write_bytes(b"partial")
    again = Checkpoints(tmp_path / "ck", "in", "cfg")
    assert again.open() == ["lsh"] and again.has(1, "lsh") and not again.has(2, "aw")
    arrays, meta = again.load(1, "lsh")
    assert arrays["a"].tolist() == [0, 1, 2] and arrays["names"].tolist() == ["x", "y"] and meta["k"] == 2
    other = Checkpoints(tmp_path / "ck", "in", "cfg2")
    assert other.open() == [] and other.fresh_reason is not None and "config changed" in other.fresh_reason


def test_weights_retrained_in_place_start_afresh(reference: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    """Issue 24.9: the same --verifier-model path with other contents is another config."""
    import shutil

    from safetensors.numpy import load_file, save_file

    from semhash_llm.stages.mgfn import shipped_verifier_path

    inp, ref = reference
    weights = tmp_path / "verifier.safetensors"
    shutil.copy(shipped_verifier_path(), weights)
    out = tmp_path / "out"
    assert _dedup(inp, out, "--verifier-model", str(weights), failpoint="after:aw").returncode == -signal.SIGKILL
    same = _dedup(inp, out, "--verifier-model", str(weights))  # unchanged weights: resumed
    assert same.returncode == 0, same.stderr
    assert json.loads((out / "report.json").read_text())["resumed_stages"][:2] == ["bloom", "lsh"]
    assert _dedup(inp, out, "--verifier-model", str(weights), failpoint="after:aw").returncode == -signal.SIGKILL
    tensors = load_file(str(weights))
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] * 0.5  # "retrained": same path, other weights
    metadata = _safetensors_metadata(weights)
    save_file(tensors, str(weights), metadata=metadata)
    res = _dedup(inp, out, "--verifier-model", str(weights))
    assert res.returncode == 0, res.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["resumed_stages"] == [] and "weight file" in report["resume_note"]


def _safetensors_metadata(path: Path) -> dict[str, str]:
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as fh:
        meta: dict[str, str] = fh.metadata() or {}
    return meta


def test_run_fingerprint_follows_the_package_version_and_the_weight_contents(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24.9: an upgrade or weights retrained in place change what a checkpoint must match."""
    import semhash_llm.fingerprint as fp
    from semhash_llm.config import PipelineConfig, VerifierConfig

    weights = tmp_path / "w.safetensors"
    weights.write_bytes(b"one")
    cfg = PipelineConfig(verifier=VerifierConfig(model_path=str(weights)))
    first = fp.run_fingerprint(cfg)
    assert fp.run_fingerprint(cfg) == first  # stable
    weights.write_bytes(b"two")
    second = fp.run_fingerprint(cfg)
    assert second != first
    monkeypatch.setattr(fp, "__version__", "99.0.0")
    assert fp.run_fingerprint(cfg) != second
    ck = Checkpoints(tmp_path / "ck", "input", second)
    ck.open()
    again = Checkpoints(tmp_path / "ck", "input", fp.run_fingerprint(cfg))
    assert again.open() == [] and again.fresh_reason is not None and "package version" in again.fresh_reason
