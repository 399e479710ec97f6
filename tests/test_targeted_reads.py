"""Issue 24.12: re-reads of candidate texts read only the wanted rows — Parquet row groups,
JSON Lines byte offsets — never whole files; and they still refuse a file that changed."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import make_corpus, write_jsonl

from semhash_llm.cli import main
from semhash_llm.config import ReaderConfig
from semhash_llm.io import readers
from semhash_llm.io.readers import InputError, read_records


def _file(path: Path) -> readers.InputFile:
    return readers.scan_inputs([str(path)]).files[0]


def test_parquet_reads_only_the_row_groups_that_hold_the_wanted_rows(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.parquet"
    texts = [f"text number {i}" for i in range(100)]
    pq.write_table(pa.table({"id": [str(i) for i in range(100)], "text": texts}), path, row_group_size=10)
    groups: list[int] = []
    real = pq.ParquetFile.read_row_group

    def spy(self: pq.ParquetFile, i: int, *a: object, **k: object) -> pa.Table:
        groups.append(i)
        return real(self, i, *a, **k)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", spy)
    got = dict(read_records(_file(path), ReaderConfig(), {3, 57, 59, 99}))
    assert {o: r["text"] for o, r in got.items()} == {o: texts[o] for o in (3, 57, 59, 99)}
    assert sorted(groups) == [0, 5, 9]
    with pytest.raises(InputError, match="cannot be re-read"):
        list(read_records(_file(path), ReaderConfig(), {100}))


def test_jsonl_reads_the_wanted_lines_at_their_offsets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.jsonl"
    lines = [json.dumps({"id": str(i), "text": f"text é {i}"}) for i in range(50)]
    lines[10] = ""  # a blank line still counts as a line
    path.write_text("\n".join(lines[:30]) + "\r\n" + "\n".join(lines[30:]))  # one CRLF, no final break
    full = dict(read_records(_file(path), ReaderConfig()))
    parsed: list[bytes] = []
    real = readers._parse_line

    def spy(raw: bytes):  # type: ignore[no-untyped-def]
        parsed.append(raw)
        return real(raw)

    monkeypatch.setattr(readers, "_parse_line", spy)
    monkeypatch.setattr(readers, "iter_json_lines", lambda p: (_ for _ in ()).throw(AssertionError("a scan")))
    wanted = {1, 12, 30, 31, 50}
    got = dict(read_records(_file(path), ReaderConfig(), wanted))
    assert got == {o: full[o] for o in wanted}
    assert len(parsed) == len(wanted)  # the other lines were never parsed
    with pytest.raises(InputError, match="cannot be re-read"):
        list(read_records(_file(path), ReaderConfig(), {11}))  # the blank line: not a record


def test_a_compressed_jsonl_is_read_in_one_pass_parsing_only_the_wanted_lines(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        for i in range(40):
            fh.write(json.dumps({"id": str(i), "text": f"t {i}"}) + "\n")
    parsed: list[bytes] = []
    real = readers._parse_line
    monkeypatch.setattr(readers, "_parse_line", lambda raw: (parsed.append(raw), real(raw))[1])
    got = dict(read_records(_file(path), ReaderConfig(), {2, 39}))
    assert {o: r["text"] for o, r in got.items()} == {2: "t 1", 39: "t 38"} and len(parsed) == 2


def test_a_file_changed_since_the_pass_is_refused_not_misread(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps({"id": str(i), "text": f"t {i}"}) for i in range(5)) + "\n")
    f = _file(path)
    assert dict(read_records(f, ReaderConfig(), {5}))[5]["text"] == "t 4"
    path.write_text("\n".join(json.dumps({"id": str(i), "text": f"t {i}"}) for i in range(3)) + "\n")
    with pytest.raises(InputError, match="cannot be re-read"):
        list(read_records(f, ReaderConfig(), {5}))  # the offsets of the old version are not reused


def test_the_same_corpus_in_every_format_gets_the_same_decisions(tmp_path: Path) -> None:
    """Targeted reads (offsets, row groups, one compressed pass) return what a scan returned:
    the decisions of a run over JSONL, gzipped JSONL and Parquet are row for row the same."""
    records, _ = make_corpus(40, seed=9)
    records += [{"id": f"q{i}", "text": t} for i, t in enumerate(
        ["How do I learn Python quickly?", "How do I lern Python quickly?", "How do I learn Java quickly?"])]
    plain = write_jsonl(tmp_path / "c.jsonl", records)
    gz = tmp_path / "c.jsonl.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    par = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": [r["id"] for r in records], "text": [r["text"] for r in records]}), par,
                   row_group_size=7)
    outs = []
    for i, p in enumerate((plain, gz, par)):
        out = tmp_path / f"o{i}"
        assert main(["dedup", str(p), "-o", str(out), "--no-progress", "--no-html"]) == 0
        outs.append(pq.read_table(out / "documents.parquet"))
    assert outs[0].equals(outs[1]) and outs[0].equals(outs[2])
