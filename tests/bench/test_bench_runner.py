"""`semhash-llm bench` end to end on fake data, the registry's ablation rows, and the real-data small run."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from bench_fakedata import make_fake_data
from test_bench_generator import TINY

from semhash_llm.bench import generator
from semhash_llm.bench.runner import (
    ABLATIONS,
    add_bench_arguments,
    build_registry,
    default_data_dir,
    main,
    run_bench_command,
)


def _args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_bench_arguments(p)
    return p.parse_args(argv)


def test_small_run_end_to_end_on_fake_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    data = make_fake_data(tmp_path / "data")
    monkeypatch.setitem(generator.SIZES, "small", TINY)
    out, js = tmp_path / "out", tmp_path / "res" / "bench.json"
    rc = run_bench_command(_args(["--data", str(data), "--out", str(out), "--json", str(js),
                                  "--systems", "exact,minhash,simhash,semhash-llm"]))
    assert rc == 0
    text = capsys.readouterr().out
    assert "| system | S_A | S_B | S_C | S_D | S_E | composite | FDR % |" in text
    for name in ("exact-hash", "minhash-lsh (datasketch)", "simhash-64", "semhash-llm"):
        assert f"| {name}" in text
    assert "neardup" not in text  # not selected, and the teacher was never loaded
    res = json.loads(js.read_text())
    assert res == json.loads((out / "bench.json").read_text())
    rows = {r["system"]: r for r in res["rows"]}
    assert rows["exact-hash"]["score"]["fdr"] == 0.0
    assert rows["exact-hash"]["score"]["s_b"] > 0.0  # B has exact copies
    assert res["teacher"] is None
    assert (out / "corpus" / "corpus.jsonl").exists() and (out / "corpus" / "truth.json").exists()


def test_unknown_system_and_missing_data_are_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    absent = tmp_path / "nope"
    assert run_bench_command(_args(["--data", str(absent), "--out", str(tmp_path / "o")])) == 2
    assert str(absent) in capsys.readouterr().err
    data = make_fake_data(tmp_path / "data")
    monkeypatch.setitem(generator.SIZES, "small", TINY)
    assert run_bench_command(_args(["--data", str(data), "--out", str(tmp_path / "o"), "--systems", "bogus"])) == 2
    assert "unknown system" in capsys.readouterr().err


def test_data_dir_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SEMHASH_LLM_DATA", str(tmp_path))
    assert default_data_dir() == tmp_path


def test_ablation_rows_never_pose_as_results() -> None:
    specs = build_registry({"sph": True}, ablations=True)
    names = [s.name for s in specs]
    assert names[:5] == ["exact-hash", "minhash-lsh (datasketch)", "simhash-64", "neardup-bert (MiniLM cos)",
                         "semhash (MinishLab, MiniLM)"]
    main_row = specs[5]
    assert main_row.name.startswith("semhash-llm")
    for s in specs[6:]:
        assert s.run is not None or "not built yet" in s.notes
    if main_row.name == "semhash-llm":  # --no-sph had no component to turn off
        assert main_row.run is None or "--no-sph" in main_row.notes
    assert len(specs) == 6 + len(ABLATIONS) - 1  # the row turned off by --no-sph is not repeated


@pytest.mark.slow
@pytest.mark.ml
def test_real_data_small_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not default_data_dir().is_dir():
        pytest.skip(f"benchmark data not found at {default_data_dir()}")
    assert main(["--size", "small", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "| semhash (MinishLab, MiniLM)" in text
    res = json.loads((tmp_path / "bench.json").read_text())
    assert res["documents"] >= 2500
