from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from helpers import write_jsonl

from semhash_llm.config import ReaderConfig
from semhash_llm.io import InputError, iter_batches, resolve_inputs

RECS = [{"id": "a", "text": "first document"}, {"id": "b", "text": "second document"}]


def _read_all(inputs: list[str], **kw: object) -> list[tuple[str, str | None, str | None]]:
    files = resolve_inputs(inputs)
    out: list[tuple[str, str | None, str | None]] = []
    for b in iter_batches(files, ReaderConfig(**kw)):  # type: ignore[arg-type]
        out.extend(zip(b.ids, b.texts, b.errors))
    return out


def test_jsonl_plain_gzip_zstd(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "a.jsonl", RECS)
    payload = "".join(json.dumps(r) + "\n" for r in RECS).encode()
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(payload))
    (tmp_path / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(payload))
    for name in ("a.jsonl", "b.jsonl.gz", "c.jsonl.zst"):
        assert _read_all([str(tmp_path / name)]) == [("a", "first document", None), ("b", "second document", None)]


def test_directory_and_glob_in_sorted_order(tmp_path: Path) -> None:
    d = tmp_path / "shards"
    (d / "sub").mkdir(parents=True)
    write_jsonl(d / "2.jsonl", [{"id": "z", "text": "zz"}])
    write_jsonl(d / "1.jsonl", [{"id": "y", "text": "yy"}])
    write_jsonl(d / "sub" / "0.jsonl", [{"id": "x", "text": "xx"}])
    (d / "_SUCCESS").write_text("")  # a marker: not read (a notes.txt would be refused, see test_inputs_no_loss)
    files = resolve_inputs([str(d)])
    assert [f.name for f in files] == ["1.jsonl", "2.jsonl", "sub/0.jsonl"]
    assert [r[0] for r in _read_all([str(d / "*.jsonl")])] == ["y", "z"]


def test_parquet_and_derived_ids(tmp_path: Path) -> None:
    pq.write_table(pa.table({"content": ["one text", "two text"]}), tmp_path / "t.parquet")
    rows = _read_all([str(tmp_path / "t.parquet")], text_field="content")
    assert rows == [("t.parquet#0", "one text", None), ("t.parquet#1", "two text", None)]
    write_jsonl(tmp_path / "n.jsonl", [{"text": "no id here"}])
    assert _read_all([str(tmp_path / "n.jsonl")])[0][0] == "n.jsonl:1"


def test_hf_save_to_disk_layout(tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    ds.mkdir()
    table = pa.table({"id": ["h1", "h2"], "text": ["hf one", "hf two"]})
    with pa.OSFile(str(ds / "data-00000-of-00001.arrow"), "wb") as sink:
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
    (ds / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    (ds / "dataset_info.json").write_text("{}")
    assert _read_all([str(ds)]) == [("h1", "hf one", None), ("h2", "hf two", None)]


def test_hf_datasets_library_roundtrip(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    d = datasets.DatasetDict({
        "train": datasets.Dataset.from_dict({"id": ["t1"], "text": ["train text"]}),
        "test": datasets.Dataset.from_dict({"id": ["s1"], "text": ["test text"]}),
    })
    d.save_to_disk(str(tmp_path / "dd"))
    ids = sorted(r[0] for r in _read_all([str(tmp_path / "dd")]))
    assert ids == ["s1", "t1"]


@pytest.mark.parametrize(
    ("line", "match"),
    [
        (b'{"id": "a", "text": "ok"', "invalid JSON"),
        (b'{"id": "a"}', "field 'text': is null or missing"),
        (b'{"id": "a", "text": 42}', "field 'text': is a int, expected a string"),
        (b'{"id": "a", "text": "   "}', "field 'text': is empty"),
        (b'{"id": "a", "text": "caf\xe9"}', "invalid UTF-8"),
        (b'[1, 2]', "expected an object"),
        (b'{"id": [1], "text": "x"}', "field 'id': is a list"),
    ],
)
def test_bad_records_name_file_line_and_field(tmp_path: Path, line: bytes, match: str) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_bytes(b'{"id": "ok", "text": "fine"}\n' + line + b"\n")
    with pytest.raises(InputError, match=match) as info:
        _read_all([str(p)])
    assert f"{p.as_posix()}:2:" in str(info.value)
    assert info.value.line == 2
    rows = _read_all([str(p)], on_error="skip")
    assert rows[0] == ("ok", "fine", None)
    assert rows[1][1] is None and rows[1][2] is not None


def test_oversized_document(tmp_path: Path) -> None:
    p = tmp_path / "big.jsonl"
    write_jsonl(p, [{"id": "big", "text": "x" * 2000}])
    with pytest.raises(InputError, match="more than reader.max_doc_chars=1,000"):
        _read_all([str(p)], max_doc_chars=1000)


def test_missing_inputs(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file or directory"):
        resolve_inputs([str(tmp_path / "nope.jsonl")])
    with pytest.raises(InputError, match="matches no file"):
        resolve_inputs([str(tmp_path / "*.jsonl")])
    (tmp_path / "x.csv").write_text("a,b")
    with pytest.raises(InputError, match="unknown format"):
        resolve_inputs([str(tmp_path / "x.csv")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="holds no"):
        resolve_inputs([str(tmp_path / "empty")])


def test_parquet_missing_text_column(tmp_path: Path) -> None:
    pq.write_table(pa.table({"body": ["x"]}), tmp_path / "t.parquet")
    with pytest.raises(InputError, match="no column 'text'"):
        _read_all([str(tmp_path / "t.parquet")])


def test_skip_reason_categories() -> None:
    from semhash_llm.io.readers import reason_category

    assert reason_category("invalid JSON: unexpected end") == "invalid JSON"
    assert reason_category("field 'text' has 50,000,000 characters, more than reader.max_doc_chars=10") == \
        "'text' too long"
    assert reason_category("field 'text' is a int, expected a string") == "wrong type of 'text'"
    assert reason_category("field 'body' is empty") == "empty 'body'"


def test_iter_json_objects_names_the_bad_line(tmp_path: Path) -> None:
    from semhash_llm.io.readers import iter_json_objects

    p = tmp_path / "x.jsonl.gz"
    p.write_bytes(gzip.compress(b'{"a": 1}\n\n[2]\n{"b": \n'))
    it = iter_json_objects(p)
    assert next(it) == (1, {"a": 1})
    assert next(it) == (3, [2])
    with pytest.raises(InputError, match=r"x\.jsonl\.gz:4: invalid JSON"):
        next(it)
