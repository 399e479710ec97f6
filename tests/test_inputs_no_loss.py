"""No input is lost silently: truncated streams, unread files and the kept output's count.

Each test here failed before the fix it guards: a truncated zstd file read as a short one,
files of other formats (and dot-files) skipped while walking a directory, and the second
pass that writes the kept records dropping a record it could no longer parse.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
import zstandard
from helpers import make_corpus, write_jsonl

from semhash_llm.api import Deduplicator
from semhash_llm.cli import main
from semhash_llm.config import PipelineConfig, ReaderConfig
from semhash_llm.io import InputError, iter_batches, resolve_inputs
from semhash_llm.io.readers import reason_category, scan_inputs

N_RECORDS = 2000


def _records(n: int = N_RECORDS, pad: int = 0) -> list[dict[str, Any]]:
    return [{"id": f"r{i}", "text": f"record number {i} with some words to compress {i % 7}" + " filler" * pad}
            for i in range(n)]


def _payload(records: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def _zstd_block_flushed(records: list[dict[str, Any]], every: int = 100) -> bytes:
    buf = io.BytesIO()
    writer = zstandard.ZstdCompressor().stream_writer(buf, closefd=False)
    for i, rec in enumerate(records):
        writer.write(json.dumps(rec).encode() + b"\n")
        if i % every == every - 1:
            writer.flush(zstandard.FLUSH_BLOCK)
    writer.flush(zstandard.FLUSH_FRAME)
    return buf.getvalue()


def _complete_lines(data: bytes) -> int:
    return data.count(b"\n")


def _truncated(tmp_path: Path, kind: str) -> tuple[Path, int]:
    """Write 2,000 records compressed with ``kind``, cut the file in half; return (path, complete lines)."""
    records = _records(pad=60 if kind == "bz2" else 0)  # bz2 needs several 100 kB blocks
    if kind == "zst":
        whole = _zstd_block_flushed(records)
        half = whole[: len(whole) // 2]
        partial = zstandard.ZstdDecompressor().decompressobj().decompress(half)
    elif kind == "gz":
        whole = gzip.compress(_payload(records))
        half = whole[: len(whole) // 2]
        d = __import__("zlib").decompressobj(31)
        partial = d.decompress(half)
    else:
        whole = bz2.compress(_payload(records), compresslevel=1)
        half = whole[: len(whole) // 2]
        partial = bz2.BZ2Decompressor().decompress(half)
    path = tmp_path / f"half.jsonl.{kind}"
    path.write_bytes(half)
    good = _complete_lines(partial)
    assert 0 < good < N_RECORDS
    return path, good


def _read(inputs: list[str], **kw: Any) -> list[tuple[int, str, str | None, str | None]]:
    out: list[tuple[int, str, str | None, str | None]] = []
    for b in iter_batches(resolve_inputs(inputs), ReaderConfig(**kw)):
        out.extend(zip(b.ordinals, b.ids, b.texts, b.errors))
    return out


# ---------------------------------------------------------------------------- 1. truncated streams


@pytest.mark.parametrize("kind", ["zst", "gz", "bz2"])
def test_truncated_compressed_jsonl_is_an_error(tmp_path: Path, kind: str) -> None:
    path, good = _truncated(tmp_path, kind)
    with pytest.raises(InputError, match="truncated") as info:
        _read([str(path)])
    msg = str(info.value)
    assert path.as_posix() in msg
    assert f"line {good}" in msg  # the last complete line
    assert "--on-error skip" in msg


@pytest.mark.parametrize("kind", ["zst", "gz", "bz2"])
def test_truncated_compressed_jsonl_skip_counts_the_lost_tail(tmp_path: Path, kind: str) -> None:
    path, good = _truncated(tmp_path, kind)
    rows = _read([str(path)], on_error="skip")
    assert [r[1] for r in rows[:good]] == [f"r{i}" for i in range(good)]
    assert all(r[3] is None for r in rows[:good])
    assert len(rows) == good + 1  # the unreadable tail is one skipped entry with its reason
    ordinal, ident, text, reason = rows[-1]
    assert (ordinal, ident, text) == (good + 1, f"half.jsonl.{kind}:{good + 1}", None)
    assert reason is not None and reason.startswith("truncated") and f"line {good}" in reason
    assert reason_category(reason).startswith("truncated")


def test_truncated_zstd_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, good = _truncated(tmp_path, "zst")
    out = tmp_path / "out"
    assert main(["dedup", "--no-progress", str(path), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "half.jsonl.zst" in err and "truncated" in err
    assert main(["dedup", "--no-progress", str(path), "-o", str(out), "--on-error", "skip"]) == 0
    docs = pq.read_table(out / "documents.parquet").to_pylist()
    assert len(docs) == good + 1
    assert docs[-1]["relation"] == "skipped" and docs[-1]["skip_reason"].startswith("truncated")
    report = json.loads((out / "report.json").read_text())
    assert report["summary"]["skipped"] == 1
    assert report["files"][0]["records_read"] == good + 1
    assert report["files"][0]["records_skipped"] == 1


def test_multi_frame_zstd_reads_every_frame(tmp_path: Path) -> None:
    records = _records(300)
    c = zstandard.ZstdCompressor()
    data = b"".join(c.compress(_payload(records[i:i + 100])) for i in range(0, 300, 100))
    (tmp_path / "frames.jsonl.zst").write_bytes(data)
    rows = _read([str(tmp_path / "frames.jsonl.zst")])
    assert [r[1] for r in rows] == [r["id"] for r in records]


# ---------------------------------------------------------------------------- 2. every format is read


def _write_arrow_file(path: Path, table: pa.Table) -> None:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)


def _write_arrow_stream(path: Path, table: pa.Table) -> None:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)


def _mixed_dir(tmp_path: Path) -> Path:
    d = tmp_path / "mixed"
    d.mkdir()
    write_jsonl(d / "a.jsonl", [{"id": "a1", "text": "alpha one"}, {"text": "alpha two"}])
    write_jsonl(d / "b.json", [{"id": "b1", "text": "beta one"}])
    (d / "c.jsonl.bz2").write_bytes(bz2.compress(_payload([{"id": "c1", "text": "gamma one"}])))
    _write_arrow_file(d / "d.arrow", pa.table({"id": ["d1", None], "text": ["delta one", "delta two"]}))
    return d


def test_directory_of_mixed_formats_reads_them_all(tmp_path: Path) -> None:
    d = _mixed_dir(tmp_path)
    files = resolve_inputs([str(d)])
    assert [f.name for f in files] == ["a.jsonl", "b.json", "c.jsonl.bz2", "d.arrow"]
    ids = [r[1] for r in _read([str(d)])]
    assert ids == ["a1", "a.jsonl:2", "b1", "c1", "d1", "d.arrow#1"]
    assert [r[1] for r in _read([str(d / "*")])] == ids


@pytest.mark.filterwarnings("ignore:Feather V1 files are deprecated:DeprecationWarning")
def test_every_supported_suffix(tmp_path: Path) -> None:
    rec = [{"id": "x", "text": "some text"}]
    payload = _payload(rec)
    table = pa.table({"id": ["x"], "text": ["some text"]})
    writers = {
        "f.json.gz": lambda p: p.write_bytes(gzip.compress(payload)),
        "f.json.zst": lambda p: p.write_bytes(zstandard.ZstdCompressor().compress(payload)),
        "f.ndjson.bz2": lambda p: p.write_bytes(bz2.compress(payload)),
        "f.json.bz2": lambda p: p.write_bytes(bz2.compress(payload)),
        "f.ndjson.zstd": lambda p: p.write_bytes(zstandard.ZstdCompressor().compress(payload)),
        "f.feather": lambda p: feather.write_feather(table, str(p)),
        "f1.feather": lambda p: feather.write_feather(table, str(p), version=1),
        "f.ipc": lambda p: _write_arrow_stream(p, table),
        "f.arrow": lambda p: _write_arrow_stream(p, table),
        "f.pq": lambda p: pq.write_table(table, p),
    }
    for name, write in writers.items():
        path = tmp_path / name
        write(path)
        assert [r[1:] for r in _read([str(path)])] == [("x", "some text", None)], name


def test_json_array_file(tmp_path: Path) -> None:
    p = tmp_path / "arr.json"
    p.write_text("\n  " + json.dumps([{"id": "j1", "text": "first"}, {"text": "second"},
                                     {"id": "j3", "text": "third, with \"quotes\" and ] brackets"}], indent=2))
    rows = _read([str(p)])
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (0, "j1", "first"), (1, "arr.json#1", "second"), (2, "j3", "third, with \"quotes\" and ] brackets")]
    assert resolve_inputs([str(p)])[0].kind == "json"
    # a large array read in several chunks gives every element once
    big = tmp_path / "big.json.gz"
    records = _records(3000)
    big.write_bytes(gzip.compress(json.dumps(records).encode()))
    assert [r[1] for r in _read([str(big)], batch_size=512)] == [r["id"] for r in records]


def test_json_array_bad_elements(tmp_path: Path) -> None:
    p = tmp_path / "arr.json"
    p.write_bytes(b'[{"id": "a", "text": "ok"}, 5, {"id": "c", "text": 7}, {"id": "d", "text": "caf\xe9"}]')
    with pytest.raises(InputError, match=r"arr\.json element 1: the element is a JSON int, expected an object"):
        _read([str(p)])
    rows = _read([str(p)], on_error="skip")
    assert [r[1] for r in rows] == ["a", "arr.json#1", "c", "arr.json#3"]  # a bad element's id is derived
    assert [r[3] is None for r in rows] == [True, False, False, False]
    assert rows[3][3] is not None and "UTF-8" in rows[3][3]
    broken = tmp_path / "broken.json"
    broken.write_text('[{"id": "a", "text": "ok"}, {"id": "b", "text": ')
    with pytest.raises(InputError, match=r"broken\.json element 1: invalid JSON"):
        _read([str(broken)])
    rows = _read([str(broken)], on_error="skip")
    assert [r[1] for r in rows] == ["a", "broken.json#1"] and rows[1][3] is not None


def test_truncated_json_array(tmp_path: Path) -> None:
    records = _records()
    whole = gzip.compress(json.dumps(records).encode())
    path = tmp_path / "arr.json.gz"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(InputError, match=r"arr\.json\.gz element \d+: truncated gzip file"):
        _read([str(path)])
    rows = _read([str(path)], on_error="skip")
    assert [r[1] for r in rows[:-1]] == [r["id"] for r in records[: len(rows) - 1]]
    assert rows[-1][1] == f"arr.json.gz#{len(rows) - 1}"
    assert (rows[-1][3] or "").startswith("truncated gzip file")


def test_saved_dataset_through_a_glob(tmp_path: Path) -> None:
    """A glob over a save_to_disk directory reads its Arrow shards, not its JSON metadata."""
    ds = tmp_path / "ds"
    ds.mkdir()
    _write_arrow_stream(ds / "data-00000-of-00001.arrow", pa.table({"id": ["h1"], "text": ["hf one"]}))
    (ds / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]},
                                              indent=2))
    (ds / "dataset_info.json").write_text("{\n}")
    scan = scan_inputs([str(ds / "*")])
    assert [f.name for f in scan.files] == ["data-00000-of-00001.arrow"]
    assert sorted(i.path.name for i in scan.ignored) == ["dataset_info.json", "state.json"]
    assert [r[1] for r in _read([str(ds)])] == ["h1"]


def test_unknown_format_is_refused_everywhere(tmp_path: Path) -> None:
    d = tmp_path / "d"
    (d / "sub").mkdir(parents=True)
    write_jsonl(d / "a.jsonl", [{"text": "x"}])
    (d / "sub" / "notes.txt").write_text("not data")
    for inputs in ([str(d)], [str(d / "**" / "*")], [str(d / "sub" / "notes.txt")]):
        with pytest.raises(InputError, match="unknown format") as info:
            resolve_inputs(inputs)
        msg = str(info.value)
        assert "notes.txt" in msg
        for fmt in (".jsonl", ".json", ".bz2", ".parquet", ".arrow", ".feather", "save_to_disk"):
            assert fmt in msg, (inputs, fmt)


def test_dot_and_underscore_files_are_ignored_loudly(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "spark"
    (d / ".cache").mkdir(parents=True)
    write_jsonl(d / "part-00000.jsonl", [{"id": "p0", "text": "part zero"}])
    write_jsonl(d / ".part-00001.jsonl", [{"id": "p1", "text": "hidden part"}])
    (d / ".part-00000.jsonl.crc").write_bytes(b"\x00crc")
    (d / "_SUCCESS").write_bytes(b"")
    write_jsonl(d / ".cache" / "x.jsonl", [{"id": "c", "text": "cached"}])
    with caplog.at_level(logging.WARNING, logger="semhash_llm"):
        scan = scan_inputs([str(d)])
    assert [f.name for f in scan.files] == ["part-00000.jsonl"]
    ignored = {i.path.name: i.reason for i in scan.ignored}
    assert set(ignored) == {".cache", ".part-00000.jsonl.crc", ".part-00001.jsonl", "_SUCCESS"}
    assert all(ignored.values())
    logged = caplog.text
    assert all(name in logged for name in ignored)
    # named explicitly, a dot-file is read
    assert [r[1] for r in _read([str(d / ".part-00001.jsonl")])] == ["p1"]
    # a glob skips '_' files too, unless it names them
    assert [f.name for f in resolve_inputs([str(d / "*")])] == ["part-00000.jsonl"]


def test_report_lists_files_read_and_ignored(tmp_path: Path) -> None:
    d = _mixed_dir(tmp_path)
    (d / "_SUCCESS").write_bytes(b"")
    (d / "z.jsonl").write_bytes(b'{"id": "z1", "text": "zeta"}\n{"id": "z2"}\n')
    out = tmp_path / "out"
    cfg = PipelineConfig().with_overrides({"reader": {"on_error": "skip"}}, source="test")
    result = Deduplicator(cfg).run([str(d)], out)
    report = json.loads((out / "report.json").read_text())
    assert report == json.loads(json.dumps(result.report))
    files = {f["name"]: f for f in report["files"]}
    assert list(files) == ["a.jsonl", "b.json", "c.jsonl.bz2", "d.arrow", "z.jsonl"]
    assert files["a.jsonl"]["format"] == "jsonl"
    assert files["c.jsonl.bz2"]["format"] == "jsonl+bz2"
    assert files["d.arrow"]["format"] == "arrow"
    assert files["d.arrow"]["path"] == (d / "d.arrow").as_posix()
    assert [(f["records_read"], f["records_skipped"]) for f in files.values()] == [(2, 0), (1, 0), (1, 0), (2, 0),
                                                                                   (2, 1)]
    assert report["ignored_files"] == [{"path": (d / "_SUCCESS").as_posix(),
                                        "reason": report["ignored_files"][0]["reason"]}]
    assert "_" in report["ignored_files"][0]["reason"]


# ---------------------------------------------------------------------------- 3. the kept output is reconciled


def _corpus(tmp_path: Path, fmt: str = "jsonl") -> tuple[Path, list[dict[str, Any]]]:
    records, _ = make_corpus(n_unique=30)
    if fmt == "jsonl":
        return write_jsonl(tmp_path / "corpus.jsonl", records), records
    path = tmp_path / "corpus.parquet"
    pq.write_table(pa.Table.from_pylist(records), path)
    return path, records


def _run_changing_input(monkeypatch: pytest.MonkeyPatch, change: Any, inputs: list[str], out: Path,
                        fmt: str = "parquet") -> None:
    """Run the pipeline with ``change()`` applied to the input between the cascade and the kept output."""
    original = Deduplicator._run

    def run_then_change(self: Deduplicator, source: Any, *args: Any) -> Any:
        state = original(self, source, *args)
        change()
        return state

    monkeypatch.setattr(Deduplicator, "_run", run_then_change)
    cfg = PipelineConfig().with_overrides({"output": {"format": fmt}}, source="test")
    Deduplicator(cfg).run(inputs, out)


def test_kept_rows_match_documents(tmp_path: Path) -> None:
    path, _ = _corpus(tmp_path)
    for fmt in ("parquet", "jsonl"):
        out = tmp_path / fmt
        cfg = PipelineConfig().with_overrides({"output": {"format": fmt}}, source="test")
        result = Deduplicator(cfg).run([str(path)], out)
        keep = result.documents.column("action").to_pylist().count("keep")
        assert result.report["outputs"]["kept_rows"] == keep
        if fmt == "parquet":
            assert pq.read_table(out / "kept.parquet").num_rows == keep
        else:
            assert len((out / "kept.jsonl").read_text().splitlines()) == keep


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_kept_record_unparsable_in_second_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    path, _ = _corpus(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)

    def corrupt_line_3() -> None:
        path.write_bytes(b"".join(lines[:2] + [b'{"id": "u2", "text": \n'] + lines[3:]))

    out = tmp_path / "out"
    with pytest.raises(InputError, match=r"corpus\.jsonl:3: .*first pass") as info:
        _run_changing_input(monkeypatch, corrupt_line_3, [str(path)], out, fmt)
    assert "invalid JSON" in str(info.value)
    assert not (out / f"kept.{fmt}").exists()


def test_kept_record_missing_in_second_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, records = _corpus(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)

    def drop_tail() -> None:
        path.write_bytes(b"".join(lines[:10]))

    out = tmp_path / "out"
    with pytest.raises(InputError, match=r"corpus\.jsonl:11: .*(changed|no longer)"):
        _run_changing_input(monkeypatch, drop_tail, [str(path)], out)
    assert not (out / "kept.parquet").exists()


def test_kept_record_with_another_id_in_second_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, records = _corpus(tmp_path, "parquet")
    changed = [dict(r, id=r["id"] + "-new") if i == 4 else r for i, r in enumerate(records)]

    def rewrite() -> None:
        pq.write_table(pa.Table.from_pylist(changed), path)

    with pytest.raises(InputError, match=r"corpus\.parquet row 4: .*'u4-new'.*'u4'"):
        _run_changing_input(monkeypatch, rewrite, [str(path)], tmp_path / "out")


def test_kept_count_mismatch_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import semhash_llm.api as api

    path, _ = _corpus(tmp_path)
    real = api.write_kept

    def short_write(*args: Any, **kwargs: Any) -> tuple[Path, int]:
        final, rows = real(*args, **kwargs)
        return final, rows - 1

    monkeypatch.setattr(api, "write_kept", short_write)
    with pytest.raises(InputError, match="kept output has .* rows, but documents.parquet keeps"):
        Deduplicator().run([str(path)], tmp_path / "out")
