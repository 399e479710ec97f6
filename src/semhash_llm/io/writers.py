"""Writers of the output contract (``../shared/docs/BENCHMARK.md`` §1).

Every file is written under a temporary name in the output directory and renamed into
place when complete, so a crash never leaves a half file that looks whole.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from semhash_llm.io.readers import InputError
from semhash_llm.io.sources import Source
from semhash_llm.text.spans import remove_spans

__all__ = ["atomic_path", "write_documents", "write_kept", "write_json"]


@contextlib.contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``final``; rename it to ``final`` only on success."""
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, _file_mode())  # mkstemp makes 0600; outputs get the usual umask mode
        os.replace(tmp_path, final)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def _file_mode() -> int:
    """0666 less the process umask: the mode ``open()`` gives a new file."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_json(path: Path, payload: Any) -> None:
    """Write JSON atomically (indented, keys in insertion order)."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(payload, indent=2, default=_json_default) + "\n", encoding="utf-8")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def write_documents(path: Path, table: pa.Table, compression_level: int = 3) -> None:
    """Write ``documents.parquet`` (zstd) atomically."""
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", compression_level=compression_level)


Cuts = dict[tuple[int, int], list[tuple[int, int]]]
"""(file index, ordinal) → fragment spans to cut from that kept record's text."""


def _kept_records(source: Source, kept: dict[int, dict[int, str]], id_field: str,
                  cuts: Cuts | None = None, text_field: str = "text") -> Iterator[dict[str, Any]]:
    """The kept records, re-read from ``source``; every one the first pass kept, or an error.

    A kept record that is missing, can no longer be parsed, or carries another id than in the
    first pass means the input changed between the passes: :class:`InputError` naming the
    file and the line or row.
    """
    for fi in range(len(source.names)):
        wanted = kept.get(fi)
        if not wanted:
            continue
        f = source.files[fi]
        expected = iter(sorted(wanted))
        next_wanted: int | None = next(expected, None)
        for ordinal, rec in source.records(fi, wanted):
            ident = wanted.get(ordinal)
            if ident is None:
                continue
            if next_wanted is not None and ordinal > next_wanted:
                break  # a wanted record was passed over: reported below
            value = rec.get(id_field)
            if value is not None and not isinstance(value, bool) and str(value) != ident:
                raise InputError(
                    f.path.as_posix(),
                    f"is {value!r} in the second pass but was {ident!r} in the first pass, so the kept "
                    "output would not match documents.parquet. The input changed while the run was going; "
                    "rerun on inputs that do not change during the run",
                    line=ordinal, field_name=id_field, unit=f.unit)
            if value is None or not isinstance(value, str):
                rec = {id_field: ident, **{k: v for k, v in rec.items() if k != id_field}}
            spans = cuts.get((fi, ordinal)) if cuts else None
            if spans:
                text = rec[text_field]
                text = text.decode("utf-8") if isinstance(text, (bytes, bytearray)) else str(text)
                rec = {**rec, text_field: remove_spans(text, spans)}
            yield rec
            next_wanted = next(expected, None)
        if next_wanted is not None:
            raise InputError(
                f.path.as_posix(),
                f"the record with id {wanted[next_wanted]!r} kept in the first pass is no longer in the file, "
                "so the kept output would miss it. The input changed while the run was going; rerun on "
                "inputs that do not change during the run",
                line=next_wanted, unit=f.unit)


def _check_count(rows: int, kept: dict[int, dict[int, str]]) -> None:
    expected = sum(len(v) for v in kept.values())
    if rows != expected:
        raise InputError("<kept output>", f"{rows:,} kept rows written, but the first pass kept {expected:,} "
                         "documents; the input changed while the run was going. Rerun on inputs that do not "
                         "change during the run")


def write_kept(
    out_dir: Path,
    source: Source,
    kept: dict[int, dict[int, str]],
    id_field: str,
    fmt: str,
    compression_level: int = 3,
    batch_rows: int = 8192,
    cuts: Cuts | None = None,
    text_field: str = "text",
) -> tuple[Path, int]:
    """Write the kept records (all their fields; the id filled in where it was derived).

    ``kept`` maps file index → {ordinal: id}. Returns the path written and the row count,
    which always equals the number of documents in ``kept``: a record that cannot be re-read
    raises :class:`InputError` and no kept file is left in place. ``cuts`` removes viral
    fragments from the ``text_field`` of the records it names.
    """
    rows = 0
    if fmt == "jsonl":
        final = out_dir / "kept.jsonl"
        with atomic_path(final) as tmp, open(tmp, "wb") as fh:
            for rec in _kept_records(source, kept, id_field, cuts, text_field):
                fh.write(orjson.dumps(rec, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
                rows += 1
            _check_count(rows, kept)
        return final, rows
    final = out_dir / "kept.parquet"
    with atomic_path(final) as tmp:
        writer: pq.ParquetWriter | None = None
        schema: pa.Schema | None = None
        buf: list[dict[str, Any]] = []

        def flush() -> None:
            nonlocal writer, schema, rows
            if not buf:
                return
            if schema is None:
                table = pa.Table.from_pylist(buf)
                schema = table.schema
                writer = pq.ParquetWriter(tmp, schema, compression="zstd", compression_level=compression_level)
            else:
                extra = sorted({k for r in buf for k in r} - set(schema.names))
                if extra:
                    raise ValueError(
                        f"kept records gained field(s) {', '.join(extra)} not present in the first records; "
                        "Parquet needs one schema. Write --format jsonl instead."
                    )
                table = pa.Table.from_pylist(buf, schema=schema)
            assert writer is not None
            writer.write_table(table)
            rows += table.num_rows
            buf.clear()

        try:
            for rec in _kept_records(source, kept, id_field, cuts, text_field):
                buf.append(rec)
                if len(buf) >= batch_rows:
                    flush()
            flush()
        finally:
            if writer is not None:
                writer.close()
        _check_count(rows, kept)
        if writer is None:
            pq.write_table(pa.table({id_field: pa.array([], pa.string())}), tmp, compression="zstd")
    return final, rows
