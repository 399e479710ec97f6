"""A bad-input corpus: every file the readers are likely to meet in a crawl that nobody has read
(issue 13). Each file, alone and all together: with ``--on-error raise`` (the default) the run
stops with exit code 2 and a message naming the file (and the line or row and the field, where
there is one); with ``--on-error skip`` the run goes on, counts each bad record with its reason,
and ``documents.parquet`` has exactly one row per record read — none lost, none twice."""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import ENV, random_text

GOOD = 40


def _records(prefix: str, n: int = GOOD) -> list[bytes]:
    rng = random.Random(prefix)
    return [json.dumps({"id": f"{prefix}{i}", "text": random_text(rng, 30)}).encode() for i in range(n)]


def _truncated(path: Path, compress: Callable[[bytes], bytes]) -> None:
    blob = compress(b"\n".join(_records(path.name)) + b"\n")
    path.write_bytes(blob[: len(blob) * 2 // 3])


def _zstd(data: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor().compress(data)


def build_bad_corpus(root: Path) -> dict[str, Path]:
    """One file per kind of bad input (each also holds good records where the format allows)."""
    root.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    files["truncated_gzip"] = root / "truncated.jsonl.gz"
    _truncated(files["truncated_gzip"], gzip.compress)
    files["truncated_zstd"] = root / "truncated.jsonl.zst"
    _truncated(files["truncated_zstd"], _zstd)
    files["wrong_schema"] = root / "wrong_schema.parquet"
    pq.write_table(pa.table({"id": [f"w{i}" for i in range(5)], "body": ["no text column"] * 5}),
                   files["wrong_schema"])
    files["wrong_type"] = root / "wrong_type.parquet"
    pq.write_table(pa.table({"id": [f"t{i}" for i in range(5)], "text": list(range(5))}), files["wrong_type"])
    mixed = [*_records("m", 5), json.dumps({"id": "m-int", "text": 17}).encode(),
             json.dumps({"id": "m-list", "text": ["a", "b"]}).encode(), json.dumps({"id": "m-null", "text": None}).encode(),
             json.dumps({"id": "m-obj", "text": {"t": "x"}}).encode(), json.dumps({"id": "m-bool", "text": True}).encode(),
             json.dumps({"id": "m-empty", "text": ""}).encode(), json.dumps({"id": "m-none"}).encode(),
             *_records("m2-", 3)]
    files["mixed_types"] = root / "mixed_types.jsonl"
    files["mixed_types"].write_bytes(b"\n".join(mixed) + b"\n")
    files["duplicate_ids"] = root / "duplicate_ids.jsonl"
    files["duplicate_ids"].write_bytes(b"\n".join([*_records("d", 3), *_records("d", 2)]) + b"\n")
    rng = random.Random(13)
    junk = bytes(rng.randrange(256) for _ in range(4000)).replace(b"\n", b"\x00")  # one line of junk
    files["binary_junk"] = root / "binary_junk.jsonl"
    files["binary_junk"].write_bytes(b"\n".join([*_records("b", 3), junk, b"\xff\xfe\x00{\"text\": \"x\"}", *_records("b2-", 2)]))
    files["huge_line"] = root / "huge_line.jsonl"
    with open(files["huge_line"], "wb") as fh:  # one 100 MB record between good ones, written without a 100 MB str
        fh.write(b"\n".join(_records("h", 2)) + b"\n")
        fh.write(b'{"id": "huge", "text": "')
        chunk = b"lorem ipsum dolor sit amet " * 4096
        for _ in range(100_000_000 // len(chunk) + 1):
            fh.write(chunk)
        fh.write(b'"}\n')
        fh.write(b"\n".join(_records("h2-", 2)) + b"\n")
    return files


def _dedup(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "semhash_llm", "dedup", "--no-progress", "--no-html", "--no-mgfn",
                           "--no-sph", *args], capture_output=True, text=True, env=ENV, timeout=900)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_bad_corpus(tmp_path_factory.mktemp("bad_inputs"))


# what the error names, per kind (the file always; the line/row and field where there is one)
RAISES = {
    "truncated_gzip": ["truncated.jsonl.gz", "line"],
    "truncated_zstd": ["truncated.jsonl.zst", "line"],
    "wrong_schema": ["wrong_schema.parquet", "'text'"],
    "wrong_type": ["wrong_type.parquet", "'text'"],
    "mixed_types": ["mixed_types.jsonl:6", "field 'text'"],
    "duplicate_ids": ["duplicate_ids.jsonl", "d0"],
    "binary_junk": ["binary_junk.jsonl:4"],
    "huge_line": ["huge_line.jsonl:3", "max-doc-chars"],
}


@pytest.mark.parametrize("kind", sorted(RAISES))
def test_each_bad_input_stops_with_a_message_naming_it(corpus: dict[str, Path], tmp_path: Path, kind: str) -> None:
    res = _dedup(str(corpus[kind]), "-o", str(tmp_path / "out"))
    assert res.returncode == 2, (kind, res.returncode, res.stderr[-1500:])
    assert "Traceback" not in res.stderr
    for needle in RAISES[kind]:
        assert needle in res.stderr, (kind, needle, res.stderr[-1500:])
    assert not (tmp_path / "out" / "documents.parquet").exists()


# with --on-error skip: what is still an error (nothing to skip to: a file without the text
# column, two documents with one id), and for the rest how many records are skipped
STILL_ERRORS = {"wrong_schema", "duplicate_ids"}
SKIPPED = {"truncated_gzip": 1, "truncated_zstd": 1, "wrong_type": 5, "mixed_types": 7, "binary_junk": 2,
           "huge_line": 1}


@pytest.mark.parametrize("kind", sorted(SKIPPED))
def test_each_bad_input_is_counted_when_skipping(corpus: dict[str, Path], tmp_path: Path, kind: str) -> None:
    out = tmp_path / "out"
    res = _dedup(str(corpus[kind]), "-o", str(out), "--on-error", "skip")
    assert res.returncode == 0, (kind, res.stderr[-1500:])
    _check_accounting(out, SKIPPED[kind])


@pytest.mark.parametrize("kind", sorted(STILL_ERRORS))
def test_file_level_errors_stop_even_when_skipping(corpus: dict[str, Path], tmp_path: Path, kind: str) -> None:
    res = _dedup(str(corpus[kind]), "-o", str(tmp_path / "out"), "--on-error", "skip")
    assert res.returncode == 2 and RAISES[kind][0] in res.stderr


def test_the_whole_bad_corpus_at_once(corpus: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    files = [str(p) for k, p in sorted(corpus.items()) if k not in STILL_ERRORS]
    res = _dedup(*files, "-o", str(out), "--on-error", "skip")
    assert res.returncode == 0, res.stderr[-1500:]
    _check_accounting(out, sum(SKIPPED.values()))


def _check_accounting(out: Path, skipped: int) -> None:
    docs = pq.read_table(out / "documents.parquet")
    report = json.loads((out / "report.json").read_text())
    read = sum(f["records_read"] for f in report["files"])
    assert docs.num_rows == read == report["summary"]["documents"]  # one row per record read
    assert len(set(docs.column("id").to_pylist())) == docs.num_rows  # none twice
    rel = docs.column("relation").to_pylist()
    assert rel.count("skipped") == report["summary"]["skipped"] == skipped
    reasons = [r for r in docs.column("skip_reason").to_pylist() if r]
    assert len(reasons) == skipped and all(reasons)
    kept = pq.read_table(out / "kept.parquet")
    assert kept.num_rows == docs.column("action").to_pylist().count("keep")
    # Issue 24.3: skipped records stay `remove`, and the report says they are not in the kept output.
    skipped_ids = {i for i, r in zip(docs.column("id").to_pylist(), rel) if r == "skipped"}
    assert all(a == "remove" for a, r in zip(docs.column("action").to_pylist(), rel) if r == "skipped")
    assert not skipped_ids & set(kept.column("id").to_pylist())
    summary = report["summary"]
    assert summary["skipped_in_kept_output"] is False and "not in the kept output" in summary["skipped_note"]
