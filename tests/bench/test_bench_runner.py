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
    assert rows["minhash-lsh (datasketch)"]["score"]["s_b"] >= 0.9  # B's light variations are MinHash's job
    # SemHash-LLM really ran and found what it should: the hot spots, and more than MinHash alone.
    ours, lexical = rows["semhash-llm"]["score"], rows["semhash-llm −SPH"]["score"]
    assert ours["s_b"] >= 0.8 and ours["fdr"] <= 0.05
    assert ours["composite"] >= 15.0
    assert ours["composite"] >= lexical["composite"] > 0.0
    assert ours["composite"] > rows["simhash-64"]["score"]["composite"]
    assert res["keep"] == "longest" and "keeps the longest document" in text
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
    # SPH is built: --no-sph turns it off and the row says so in its name and notes.
    assert main_row.name == "semhash-llm −SPH"
    assert main_row.run is not None and "SPH off" in main_row.notes
    built = [s for s in specs[6:] if s.run is not None]
    assert [s.name for s in built] == ["semhash-llm −SPH −passages", "semhash-llm −SPH −AW-MinHash",
                                       "semhash-llm −SPH −MGFN"]  # the others
    for s in specs[6:]:
        assert s.run is not None or "not built yet" in s.notes or "the judge is off" in s.notes
    assert len(specs) == 6 + len(ABLATIONS) - 1  # the row turned off by --no-sph is not repeated
    # Without switches the full system runs and each built component gets its ablation row; the
    # judge's only when a backend is given (it is off by default).
    full = build_registry({}, ablations=True)
    assert full[5].name == "semhash-llm" and full[5].run is not None and "LLM judge off" in full[5].notes
    assert [s.name for s in full[6:] if s.run is not None] == ["semhash-llm −SPH", "semhash-llm −passages",
                                                               "semhash-llm −AW-MinHash", "semhash-llm −MGFN"]
    judged = build_registry({}, ablations=True, judge={"backend": "local"})
    assert judged[5].name == "semhash-llm +judge (local)" and "LLM judge on" in judged[5].notes
    assert judged[-1].name == "semhash-llm +judge (local) −LLM judge" and judged[-1].run is not None


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
    rows = {r["system"]: r["score"] for r in res["rows"]}
    ours = rows["semhash-llm"]
    # On real data SemHash-LLM beats the lexical peers and stays under 2% false deletions.
    assert ours["composite"] > rows["minhash-lsh (datasketch)"]["composite"] + 5.0
    assert ours["fdr"] <= 0.02 and ours["s_b"] >= 0.9
