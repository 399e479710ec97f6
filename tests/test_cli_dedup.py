from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import make_corpus, write_jsonl

from semhash_llm.api import Deduplicator
from semhash_llm.cli import main
from semhash_llm.config import PipelineConfig
from semhash_llm.io.readers import InputError
from semhash_llm.io.sources import FileSource

CONTRACT = ["id", "action", "duplicate_of", "relation", "cluster_id", "score", "decided_by", "fragments"]


def _run(args: list[str]) -> int:
    return main(["dedup", "--no-progress", "--keep", "first", *args])


def _docs(out: Path) -> dict[str, dict]:
    return {r["id"]: r for r in pq.read_table(out / "documents.parquet").to_pylist()}


@pytest.fixture()
def corpus(tmp_path: Path) -> tuple[Path, list[dict], dict[str, str]]:
    records, truth = make_corpus()
    return write_jsonl(tmp_path / "corpus.jsonl", records), records, truth


def test_exact_and_near_duplicates_found(corpus, tmp_path: Path, capsys) -> None:
    path, records, truth = corpus
    out = tmp_path / "out"
    assert _run([str(path), "-o", str(out)]) == 0
    table = pq.read_table(out / "documents.parquet")
    assert table.column_names[: len(CONTRACT)] == CONTRACT
    docs = _docs(out)
    assert len(docs) == table.num_rows == len(records)  # every id exactly once
    for dup, orig in truth.items():
        assert docs[dup]["action"] == "remove", dup
        assert docs[dup]["duplicate_of"] == orig
        assert docs[orig]["action"] == "keep"
        assert docs[dup]["cluster_id"] == docs[orig]["cluster_id"] == orig
        expected = ("exact", "bloom") if dup.startswith("x") else ("near_duplicate", "lsh")
        assert (docs[dup]["relation"], docs[dup]["decided_by"]) == expected
        assert 0.8 <= docs[dup]["score"] <= 1.0
    removed = {i for i, d in docs.items() if d["action"] == "remove"}
    assert removed == set(truth)
    kept = pq.read_table(out / "kept.parquet").to_pylist()
    assert [r["id"] for r in kept] == [r["id"] for r in records if r["id"] not in truth]
    assert kept[0]["text"] == records[0]["text"]  # the original text, not the normalized one
    report = json.loads((out / "report.json").read_text())
    assert report["summary"]["removed"] == len(truth)
    assert [s["stage"] for s in report["funnel"]] == ["read", "bloom", "lsh", "aw", "sph", "mgfn", "passages", "select", "write"]
    for row in report["funnel"][1:5]:  # every stage's row is recorded the same way
        assert {"docs_in", "docs_out", "docs_removed", "pairs_in", "pairs_out", "seconds", "peak_rss_mb"} <= set(row)
        assert row["docs_out"] == row["docs_in"] - row["docs_removed"]
        assert "stream_seconds" in row["details"]
    bloom = report["funnel"][1]
    assert bloom["docs_removed"] == sum(1 for d in truth if d.startswith("x"))
    config = json.loads((out / "config.json").read_text())
    assert config["fingerprint"] == report["config_fingerprint"]
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary files left
    printed = capsys.readouterr().out
    assert "documents/s" in printed and "removed" in printed


def test_same_output_twice(corpus, tmp_path: Path) -> None:
    path, _, _ = corpus
    assert _run([str(path), "-o", str(tmp_path / "a")]) == 0
    assert _run([str(path), "-o", str(tmp_path / "b")]) == 0
    ta = pq.read_table(tmp_path / "a" / "documents.parquet")
    tb = pq.read_table(tmp_path / "b" / "documents.parquet")
    assert ta.equals(tb)
    assert pq.read_table(tmp_path / "a" / "kept.parquet").equals(pq.read_table(tmp_path / "b" / "kept.parquet"))


def test_bloom_false_positives_never_delete(corpus, tmp_path: Path) -> None:
    """A saturated Bloom filter (fp 0.5, 1 slot of capacity) must give the same decisions."""
    path, _, _ = corpus
    assert _run([str(path), "-o", str(tmp_path / "ref")]) == 0
    assert _run([str(path), "-o", str(tmp_path / "fp"), "--bloom-fp-rate", "0.5", "--expected-documents", "1",
                 "--batch-size", "4"]) == 0
    ref = pq.read_table(tmp_path / "ref" / "documents.parquet")
    fp = pq.read_table(tmp_path / "fp" / "documents.parquet")
    assert ref.equals(fp)
    report = json.loads((tmp_path / "fp" / "report.json").read_text())
    details = report["funnel"][1]["details"]
    assert details["false_positives"] > 0
    assert details["repaired_false_positives"] == details["false_positives"]


def test_no_bloom_still_finds_exact_copies_via_lsh(corpus, tmp_path: Path) -> None:
    path, _, truth = corpus
    assert _run([str(path), "-o", str(tmp_path / "o"), "--no-bloom"]) == 0
    docs = _docs(tmp_path / "o")
    assert {i for i, d in docs.items() if d["action"] == "remove"} == set(truth)
    # With the exact stage off, nothing may claim it decided: the copies were found by LSH.
    for dup in truth:
        assert (docs[dup]["relation"], docs[dup]["decided_by"]) == ("near_duplicate", "lsh"), dup
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert [s["stage"] for s in report["funnel"]][:3] == ["read", "lsh", "aw"]  # no bloom row


def test_symbol_only_documents_are_exact_duplicates(tmp_path: Path) -> None:
    """Documents made only of emoji or punctuation have no tokens, but identical ones are copies."""
    recs = [
        {"id": "e1", "text": "😀🎉🔥 !!!"},
        {"id": "e2", "text": "😀🎉🔥 !!!"},
        {"id": "e3", "text": " 😀🎉🔥 \t  !!!\n"},  # the same up to runs of whitespace
        {"id": "e5", "text": "😀 🎉🔥 !!!"},  # a space where there was none: not exact
        {"id": "e4", "text": "🔥🎉😀 !!!"},  # another order: another document
        {"id": "p1", "text": "--- *** ---"},
        {"id": "p2", "text": "--- *** ---"},
        {"id": "w1", "text": "fire party smile"},
    ]
    path = write_jsonl(tmp_path / "sym.jsonl", recs)
    assert _run([str(path), "-o", str(tmp_path / "o")]) == 0
    docs = _docs(tmp_path / "o")
    assert {i for i, d in docs.items() if d["action"] == "remove" and d["relation"] == "exact"} == {"e2", "e3", "p2"}
    assert docs["e5"]["relation"] != "exact"
    assert docs["e2"]["duplicate_of"] == docs["e3"]["duplicate_of"] == "e1"
    assert (docs["e2"]["relation"], docs["e2"]["decided_by"]) == ("exact", "bloom")
    assert docs["p2"]["duplicate_of"] == "p1"


def test_keep_longest_and_priority(tmp_path: Path) -> None:
    base = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma"
    recs = [
        {"id": "short", "text": base, "q": 1},
        {"id": "long", "text": base + " tau", "q": 5},
        {"id": "mid", "text": base.upper(), "q": 9},
    ]
    p = write_jsonl(tmp_path / "c.jsonl", recs)
    # --no-mgfn: the three short texts are linked on their hash score (the verifier would read
    # "one more word" in an 18-word text as another text); the policies are what is tested.
    assert _run([str(p), "-o", str(tmp_path / "l"), "--keep", "longest", "--threshold", "0.7", "--no-mgfn"]) == 0
    docs = _docs(tmp_path / "l")
    assert docs["long"]["action"] == "keep"
    assert docs["short"]["duplicate_of"] == "long"
    assert _run([str(p), "-o", str(tmp_path / "p"), "--keep", "priority", "--priority-field", "q",
                 "--threshold", "0.7", "--no-mgfn"]) == 0
    docs = _docs(tmp_path / "p")
    assert docs["mid"]["action"] == "keep"
    assert docs["short"]["duplicate_of"] == "mid" and docs["short"]["relation"] == "exact"
    assert docs["long"]["duplicate_of"] == "mid" and docs["long"]["relation"] == "near_duplicate"


def test_jsonl_output_and_derived_ids(tmp_path: Path) -> None:
    p = write_jsonl(tmp_path / "c.jsonl", [{"text": "same words here again and again"},
                                           {"text": "Same words here  again and AGAIN"},
                                           {"text": "something different"}])
    assert _run([str(p), "-o", str(tmp_path / "o"), "--format", "jsonl"]) == 0
    kept = [json.loads(line) for line in (tmp_path / "o" / "kept.jsonl").read_text().splitlines()]
    assert [k["id"] for k in kept] == ["c.jsonl:1", "c.jsonl:3"]
    assert _docs(tmp_path / "o")["c.jsonl:2"]["duplicate_of"] == "c.jsonl:1"


def test_cjk_documents_are_compared_by_characters(tmp_path: Path) -> None:
    a = "大规模语言模型的训练数据需要仔细清洗，重复的网页和新闻会降低模型的质量，因此我们研究去重方法。"
    b = a.replace("仔细", "认真")  # two characters changed
    c = "今天天气很好，我们一起去公园散步，看到了很多美丽的花朵和快乐的孩子们在草地上玩耍。"
    p = write_jsonl(tmp_path / "zh.jsonl", [{"id": "a", "text": a}, {"id": "b", "text": b}, {"id": "c", "text": c}])
    assert _run([str(p), "-o", str(tmp_path / "o"), "--threshold", "0.6"]) == 0
    docs = _docs(tmp_path / "o")
    assert docs["b"]["duplicate_of"] == "a" and docs["b"]["relation"] == "near_duplicate"
    assert docs["c"]["action"] == "keep"


BAD_LINES = {
    "invalid JSON": b'{"id": "bad", "text": "unterminated',
    "missing text": b'{"id": "bad"}',
    "non-string text": b'{"id": "bad", "text": ["list"]}',
    "invalid UTF-8": b'{"id": "bad", "text": "\xff\xfe"}',
    "empty": b'{"id": "bad", "text": ""}',
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_bad_input_errors_then_skips(tmp_path: Path, case: str, capsys) -> None:
    p = tmp_path / "in.jsonl"
    good = b'{"id": "g1", "text": "a perfectly good document"}\n'
    p.write_bytes(good + BAD_LINES[case] + b"\n" + b'{"id": "g2", "text": "another good one"}\n')
    assert _run([str(p), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"{p.as_posix()}:2:" in err and "--on-error skip" in err
    assert not (tmp_path / "o" / "documents.parquet").exists()
    assert _run([str(p), "-o", str(tmp_path / "s"), "--on-error", "skip"]) == 0
    docs = pq.read_table(tmp_path / "s" / "documents.parquet").to_pylist()
    assert len(docs) == 3
    bad = [d for d in docs if d["skip_reason"]]
    assert len(bad) == 1 and bad[0]["relation"] == "skipped" and bad[0]["action"] == "remove"
    report = json.loads((tmp_path / "s" / "report.json").read_text())
    assert report["summary"]["skipped"] == 1
    assert sum(report["funnel"][0]["details"]["skipped_by_reason"].values()) == 1
    kept = pq.read_table(tmp_path / "s" / "kept.parquet").column("id").to_pylist()
    assert kept == ["g1", "g2"]


def test_50mb_document(tmp_path: Path, capsys) -> None:
    p = tmp_path / "huge.jsonl"
    with open(p, "w") as fh:
        fh.write(json.dumps({"id": "small", "text": "fine text"}) + "\n")
        fh.write('{"id": "huge", "text": "' + "word " * 10_000_000 + '"}\n')
    assert _run([str(p), "-o", str(tmp_path / "o")]) == 2
    assert "has 50,000,000 characters, more than reader.max_doc_chars=10,000,000" in capsys.readouterr().err
    assert _run([str(p), "-o", str(tmp_path / "s"), "--on-error", "skip"]) == 0
    docs = _docs(tmp_path / "s")
    assert docs["huge"]["skip_reason"].startswith("field 'text' has 50,000,000 characters")


def test_missing_file_and_duplicate_ids(tmp_path: Path, capsys) -> None:
    assert _run([str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "o")]) == 2
    assert "missing.jsonl: no such file or directory" in capsys.readouterr().err
    p = write_jsonl(tmp_path / "d.jsonl", [{"id": "same", "text": "one"}, {"id": "same", "text": "two"}])
    assert _run([str(p), "-o", str(tmp_path / "o")]) == 2
    assert "duplicate id 'same'" in capsys.readouterr().err


def test_bad_flag_value_is_a_config_error(tmp_path: Path, capsys) -> None:
    p = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": "x"}])
    assert _run([str(p), "-o", str(tmp_path / "o"), "--threshold", "1.5"]) == 2
    assert "The 'threshold' parameter of MinHashConfig must be a float in (0.0, 1.0]. Got 1.5" in \
        capsys.readouterr().err


def test_entry_point_subprocess(corpus, tmp_path: Path) -> None:
    path, _, _ = corpus
    res = subprocess.run([sys.executable, "-m", "semhash_llm", "dedup", str(path), "-o", str(tmp_path / "o"),
                          "--no-progress"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "documents/s" in res.stdout


def test_in_memory_facade() -> None:
    from semhash_llm import PipelineConfig, deduplicate

    records, truth = make_corpus()
    res = deduplicate(records, PipelineConfig.from_dict({"select": {"keep": "first"}}))
    assert len(res.selected) == len(records) - len(truth)
    assert {r["record"]["id"] for r in res.removed} == set(truth)
    assert res.duplicate_ratio == pytest.approx(len(truth) / len(records))
    assert 0 < res.exact_duplicate_ratio < res.duplicate_ratio
    # Default keep policy: the longest version survives.
    strings = deduplicate(["one two three four five six", "ONE two three  four five six\n", "other"])
    assert [r["text"] for r in strings.selected] == ["ONE two three  four five six\n", "other"]


def test_bloom_repair_refuses_records_gone_from_the_source(corpus, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Re-reading Bloom false positives must find every one of them, or stop: none is dropped."""
    path, _, _ = corpus
    monkeypatch.setattr(FileSource, "records", lambda self, fi, wanted=None: iter(()))
    cfg = PipelineConfig.from_dict({"bloom": {"fp_rate": 0.5, "expected_documents": 1},
                                    "output": {"write_kept": False}})
    with pytest.raises(InputError, match="missing when re-read to repair Bloom false positives"):
        Deduplicator(cfg).run([str(path)], tmp_path / "o")


def test_short_children_are_checked_on_text_re_read_from_the_files(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The passage stage re-reads a short child and its parent from the input files after the stream."""
    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november".split()
    sentences = [" ".join(f"{w}{(i * 7 + j) % 97}" for j, w in enumerate(words)) + "." for i in range(10)]
    page = " ".join(sentences)
    path = write_jsonl(tmp_path / "in.jsonl", [{"id": "page", "text": page}, {"id": "copy", "text": sentences[6]}])
    assert _run([str(path), "-o", str(tmp_path / "o"), "--only", "bloom,passages"]) == 0
    rows = _docs(tmp_path / "o")
    assert (rows["copy"]["action"], rows["copy"]["relation"], rows["copy"]["duplicate_of"]) == (
        "remove", "contained_in", "page")
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    passages = next(r for r in report["funnel"] if r["stage"] == "passages")
    assert passages["details"]["short_children_checked"] == 1
    assert (report["summary"]["contained_removed"], report["summary"]["near_removed"]) == (1, 0)
    # A source that cannot give the records back stops the run instead of guessing.
    monkeypatch.setattr(FileSource, "records", lambda self, fi, wanted=None: iter(()))
    with pytest.raises(InputError, match="missing when re-read to check candidate pairs on their text"):
        Deduplicator(PipelineConfig.from_dict({"output": {"write_kept": False}})).run([str(path)], tmp_path / "o2")
