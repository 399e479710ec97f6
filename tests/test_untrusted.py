"""Untrusted files: an index, a checkpoint or a model from elsewhere is never unpickled (issue 13).

Each test plants a pickle whose loading would create a marker file (``__reduce__`` runs code on
unpickling) where a loader reads, and checks that the loader refuses it with a message saying
what is wrong and how to fix it, and that the marker was never written."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import ENV, dedup_cli, resume_corpus


class _Payload:
    """Unpickling this creates ``marker``: proof that code from the file ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


def _pickled_array(path: Path, marker: Path) -> None:
    np.save(path, np.array([_Payload(marker)], dtype=object), allow_pickle=True)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "semhash_llm", *args], capture_output=True, text=True, env=ENV,
                          timeout=600)


def test_verifier_weights_are_read_from_safetensors_only(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    from semhash_llm.verify.mgfn import load_mgfn

    marker = tmp_path / "ran"
    pt = tmp_path / "verifier.pt"
    torch.save({"config": {}, "state_dict": {}, "extra": _Payload(marker)}, pt)
    with pytest.raises(ValueError, match="safetensors only.*python -m semhash_llm.verify.mgfn convert"):
        load_mgfn(pt)
    foreign = tmp_path / "other.safetensors"
    save_file({"w": torch.zeros(2)}, str(foreign))
    with pytest.raises(ValueError, match="not a SemHash-LLM verifier"):
        load_mgfn(foreign)
    assert not marker.exists()
    # the shipped weights are safetensors and load
    from semhash_llm.stages.mgfn import shipped_verifier_path

    model, extra = load_mgfn(shipped_verifier_path())
    assert shipped_verifier_path().endswith(".safetensors") and 0.0 < extra["threshold"] < 1.0


def test_converted_weights_give_the_same_model(tmp_path: Path, tiny_model: Path) -> None:
    torch = pytest.importorskip("torch")
    from semhash_llm.verify.mgfn import convert_pt, load_mgfn

    model, extra = load_mgfn(tiny_model)
    old = tmp_path / "old.pt"
    torch.save({"config": dataclasses.asdict(model.config), "state_dict": model.state_dict(),
                "extra": extra}, old)
    convert_pt(old, tmp_path / "new.safetensors")
    again, extra_again = load_mgfn(tmp_path / "new.safetensors")
    assert extra_again == extra
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, again.state_dict()[name])


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("untrusted")
    inp = resume_corpus(tmp)
    res = _cli("index", "build", str(inp), "--index", str(tmp / "idx"))
    assert res.returncode == 0, res.stderr
    return inp, tmp / "idx"


def test_an_index_with_a_pickled_array_is_refused(indexed: tuple[Path, Path], tmp_path: Path) -> None:
    inp, idx = indexed
    bad = tmp_path / "idx"
    subprocess.run(["cp", "-r", str(idx), str(bad)], check=True)
    marker = tmp_path / "ran"
    seg = next(bad.glob("seg-*"))
    _pickled_array(seg / "lsh.signatures.npy", marker)
    res = _cli("dedup", str(inp), "--against", str(bad), "-o", str(tmp_path / "out"))
    assert res.returncode == 2
    assert "lsh.signatures.npy: not a readable feature array" in res.stderr and "never pickled" in res.stderr
    assert not marker.exists()
    assert not (tmp_path / "out" / "documents.parquet").exists()


def test_a_damaged_checkpoint_is_dropped_and_the_run_starts_afresh(tmp_path: Path) -> None:
    inp = resume_corpus(tmp_path)
    ref = dedup_cli(inp, tmp_path / "ref")
    assert ref.returncode == 0, ref.stderr
    out = tmp_path / "out"
    killed = dedup_cli(inp, out, failpoint="after:aw")
    assert killed.returncode == -signal.SIGKILL
    step = next((out / ".checkpoints").glob("*-lsh"))
    marker = tmp_path / "ran"
    _pickled_array(step / "edges_a.npy", marker)
    again = dedup_cli(inp, out)
    assert again.returncode == 0, again.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["resumed_stages"] == []
    assert "unreadable" in report["resume_note"] and "02-lsh" in report["resume_note"]
    assert not marker.exists()
    assert pq.read_table(out / "documents.parquet").equals(pq.read_table(tmp_path / "ref" / "documents.parquet"))


@pytest.mark.ml
def test_a_teacher_directory_with_pickled_weights_only_is_refused(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    from semhash_llm.sph.teacher import TransformerTeacher, default_teacher_path

    torch = pytest.importorskip("torch")
    model = transformers.AutoModel.from_pretrained(default_teacher_path())
    pickled = tmp_path / "teacher"
    pickled.mkdir()
    model.config.save_pretrained(pickled)  # config.json, and the weights as a pickle only
    torch.save(model.state_dict(), pickled / "pytorch_model.bin")
    transformers.AutoTokenizer.from_pretrained(default_teacher_path()).save_pretrained(pickled)
    assert (pickled / "pytorch_model.bin").exists() and not (pickled / "model.safetensors").exists()
    with pytest.raises(OSError, match="safetensors"):
        TransformerTeacher(str(pickled))
