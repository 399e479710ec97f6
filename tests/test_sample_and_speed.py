"""The offline sample corpus (README's first command) and the speed benchmark's plumbing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from semhash_llm.bench.speed import format_table, make_speed_corpus, run_speed, shingle_words
from semhash_llm.cli import main
from semhash_llm.sample import build_sample_corpus


def test_sample_corpus_is_deterministic_and_its_planted_pairs_are_found(tmp_path: Path, capsys) -> None:
    a = build_sample_corpus(tmp_path / "a", seed=3, max_background=300)
    b = build_sample_corpus(tmp_path / "b", seed=3, max_background=300)
    assert a.corpus.read_bytes() == b.corpus.read_bytes()
    truth = json.loads(a.truth.read_text())
    ids = {json.loads(line)["id"] for line in a.corpus.read_text().splitlines()}
    assert all(p["id"] in ids and p["duplicate_of"] in ids for p in truth["pairs"])
    out = tmp_path / "out"
    assert main(["dedup", str(a.corpus), "-o", str(out), "--no-progress"]) == 0
    assert main(["check-sample", str(a.truth), str(out)]) == 0
    printed = capsys.readouterr().out
    line = next(x for x in printed.splitlines() if x.startswith("planted duplicates found"))
    found, total = (int(v) for v in line.rsplit("all ", 1)[1].split(" ")[0].split("/"))
    assert found >= 0.9 * total
    exact_found, exact_total = (int(v) for v in line.split("exact ", 1)[1].split(",")[0].split("/"))
    assert exact_found == exact_total > 0


def test_speed_corpus_and_tiny_run() -> None:
    c1 = make_speed_corpus(600, doc_chars=2000, near_fraction=0.1, hot_copies=50, seed=1)
    c2 = make_speed_corpus(600, doc_chars=2000, near_fraction=0.1, hot_copies=50, seed=1)
    assert c1.texts == c2.texts
    assert int((c1.kind == 1).sum()) == 60 and int((c1.kind == 2).sum()) == 50
    assert shingle_words("A b, c d e f") == ["a b c d e", "b c d e f"]
    rows = run_speed(c1, ["semhash-llm"])
    assert rows[0].false_removals == 0 and rows[0].recall_hot == 1.0
    assert rows[0].recall_near > 0.5
    table = format_table(rows, len(c1.texts))
    assert table.splitlines()[2].startswith("| semhash-llm |")
    assert np.isfinite(rows[0].docs_per_s)
