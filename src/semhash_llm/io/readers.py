"""Readers for JSONL (plain, gzip, zstd), Parquet and Hugging Face ``save_to_disk`` datasets.

Inputs are files, directories (walked recursively, in sorted order) or glob patterns.
Records stream out in batches (:class:`RecordBatch`); nothing but the current batch is held.

Every record is located by ``(file, ordinal)``: the 1-based line of a JSONL file, or the
0-based row of a table. Bad records raise :class:`InputError` naming the file, the line or
row and the field — or, with ``on_error='skip'``, come out flagged with their reason so the
pipeline can account for them.
"""

from __future__ import annotations

import glob as _glob
import gzip
import io
import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterator, Literal, Sequence, cast

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from semhash_llm.config import ReaderConfig

__all__ = [
    "InputError",
    "InputFile",
    "RecordBatch",
    "resolve_inputs",
    "iter_batches",
    "iter_json_lines",
    "iter_json_objects",
    "iter_table_batches",
    "read_records",
    "add_record",
    "reason_category",
]

logger = logging.getLogger(__name__)

FileKind = Literal["jsonl", "parquet", "arrow"]
_JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".jsonl.zstd", ".ndjson", ".ndjson.gz", ".ndjson.zst")
_PARQUET_SUFFIXES = (".parquet", ".pq")


class InputError(ValueError):
    """A bad input: the message names the file, the line or row, and the field."""

    def __init__(self, path: str, message: str, line: int | None = None, field_name: str | None = None,
                 unit: str = "line") -> None:
        self.path = path
        self.line = line
        self.field = field_name
        self.reason = message
        where = path if line is None else f"{path}:{line}" if unit == "line" else f"{path} row {line}"
        what = f" field '{field_name}':" if field_name else ""
        super().__init__(f"{where}:{what} {message}")


@dataclass(frozen=True)
class InputFile:
    """One input shard: its path, format, and the name used in derived ids and messages."""

    path: Path
    kind: FileKind
    name: str

    @property
    def unit(self) -> str:
        """'line' for JSONL, 'row' for tables."""
        return "line" if self.kind == "jsonl" else "row"


@dataclass
class RecordBatch:
    """A batch of records from one file. ``texts[i]`` is None for a skipped (bad) record."""

    file_index: int
    ordinals: list[int] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    texts: list[str | None] = field(default_factory=list)
    errors: list[str | None] = field(default_factory=list)
    priorities: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)


# ---------------------------------------------------------------------------- resolution


def _kind_of(path: Path) -> FileKind | None:
    name = path.name.lower()
    if name.endswith(_JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith(_PARQUET_SUFFIXES):
        return "parquet"
    return None


def _hf_arrow_files(directory: Path) -> list[Path] | None:
    """The Arrow files of a ``save_to_disk`` dataset (or dataset dict) at ``directory``."""
    state = directory / "state.json"
    if state.is_file():
        try:
            meta = json.loads(state.read_text(encoding="utf-8"))
            names = [f["filename"] for f in meta["_data_files"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(str(state), f"not a readable Hugging Face dataset state file ({exc})") from None
        return [directory / n for n in names]
    dd = directory / "dataset_dict.json"
    if dd.is_file():
        try:
            splits = json.loads(dd.read_text(encoding="utf-8"))["splits"]
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(str(dd), f"not a readable Hugging Face dataset dict ({exc})") from None
        out: list[Path] = []
        for split in splits:
            files = _hf_arrow_files(directory / split)
            if files is None:
                raise InputError(str(directory / split), "split listed in dataset_dict.json has no state.json")
            out.extend(files)
        return out
    return None


def _walk(directory: Path) -> list[tuple[Path, FileKind]]:
    hf = _hf_arrow_files(directory)
    if hf is not None:
        return [(p, "arrow") for p in hf]
    found: list[tuple[Path, FileKind]] = []
    for child in sorted(directory.iterdir()):
        if child.name.startswith("."):
            continue
        if child.is_dir():
            found.extend(_walk(child))
        else:
            kind = _kind_of(child)
            if kind is not None:
                found.append((child, kind))
    return found


def resolve_inputs(inputs: Sequence[str | Path]) -> list[InputFile]:
    """Expand files, directories and globs into an ordered list of shards.

    Raises :class:`InputError` for a path that does not exist, a glob that matches nothing,
    a file of unknown format, or an input that yields no shard at all.
    """
    if not inputs:
        raise InputError("<inputs>", "no input given; pass files, directories or glob patterns")
    found: list[tuple[Path, FileKind, Path]] = []
    for raw in inputs:
        text = str(raw)
        if any(ch in text for ch in "*?[") and not Path(text).exists():
            matches = sorted(_glob.glob(text, recursive=True))
            if not matches:
                raise InputError(text, "the glob pattern matches no file")
            for m in matches:
                p = Path(m)
                if p.is_dir():
                    found.extend((f, k, p) for f, k in _walk(p))
                elif (k := _kind_of(p)) is not None:
                    found.append((p, k, p.parent))
            continue
        p = Path(text)
        if not p.exists():
            raise InputError(text, "no such file or directory")
        if p.is_dir():
            files = _walk(p)
            if not files:
                raise InputError(text, "the directory holds no .jsonl[.gz|.zst], .parquet or saved dataset")
            found.extend((f, k, p) for f, k in files)
        else:
            kind = _kind_of(p)
            if kind is None:
                if p.suffix == ".arrow":
                    kind = "arrow"
                else:
                    raise InputError(
                        text,
                        "unknown format; expected .jsonl, .jsonl.gz, .jsonl.zst, .parquet or a directory "
                        "saved by datasets' save_to_disk",
                    )
            found.append((p, kind, p.parent))
    seen: set[Path] = set()
    out: list[InputFile] = []
    for path, kind, root in found:
        resolved = path.resolve()
        if resolved in seen:
            continue
        seen.add(resolved)
        try:
            name = path.relative_to(root).as_posix() if root != path else path.name
        except ValueError:
            name = path.name
        out.append(InputFile(path=path, kind=kind, name=name or path.name))
    if not out:
        raise InputError(", ".join(str(i) for i in inputs), "no input shard found")
    names = [f.name for f in out]
    if len(set(names)) != len(names):
        # Fall back to full paths so derived ids stay unique across inputs.
        out = [InputFile(path=f.path, kind=f.kind, name=f.path.as_posix()) for f in out]
    return out


# ---------------------------------------------------------------------------- raw access


def _open_binary(path: Path) -> IO[bytes]:
    name = path.name.lower()
    if name.endswith(".gz"):
        return cast(IO[bytes], gzip.open(path, "rb"))
    if name.endswith((".zst", ".zstd")):
        import zstandard

        fh = open(path, "rb")
        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(fh, closefd=True))  # type: ignore[arg-type]
    return open(path, "rb")


def iter_json_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, raw_line)`` for the non-blank lines of a JSONL file."""
    try:
        fh = _open_binary(path)
    except OSError as exc:
        raise InputError(str(path), f"cannot open: {exc.strerror or exc}") from None
    with fh:
        line_no = 0
        try:
            for raw in fh:
                line_no += 1
                if raw.strip():
                    yield line_no, raw
        except (OSError, EOFError, ValueError) as exc:
            raise InputError(str(path), f"cannot read past this line: {exc}", line=line_no + 1) from None


def iter_json_objects(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, parsed value)`` for the non-blank lines of a JSONL file.

    Raises :class:`InputError` naming the file and line at the first line that is not JSON.
    """
    for line_no, raw in iter_json_lines(path):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise InputError(path.as_posix(), f"invalid JSON: {exc}", line=line_no) from None
        yield line_no, value


def iter_table_batches(path: Path, kind: FileKind, batch_size: int,
                       columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
    """Yield Arrow record batches of a Parquet file or a Hugging Face Arrow shard."""
    try:
        if kind == "parquet":
            pf = pq.ParquetFile(path)
            cols = None if columns is None else [c for c in columns if c in pf.schema_arrow.names]
            yield from pf.iter_batches(batch_size=batch_size, columns=cols)
        else:
            with pa.memory_map(str(path)) as source:
                try:
                    reader: Any = pa.ipc.open_stream(source)
                    batches = iter(reader)
                except pa.ArrowInvalid:
                    reader = pa.ipc.open_file(source)
                    batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
                for batch in batches:
                    if columns is not None:
                        keep = [c for c in columns if c in batch.schema.names]
                        batch = batch.select(keep)
                    for off in range(0, batch.num_rows, batch_size):
                        yield batch.slice(off, batch_size)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(str(path), f"cannot read as {kind}: {exc}") from None


# ---------------------------------------------------------------------------- validation


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


class _Validator:
    def __init__(self, cfg: ReaderConfig, priority_field: str | None) -> None:
        self.cfg = cfg
        self.priority_field = priority_field

    def text(self, value: object) -> tuple[str | None, str | None]:
        """(text, error)."""
        if value is None:
            return None, f"field '{self.cfg.text_field}' is null or missing"
        if isinstance(value, (bytes, bytearray)):
            try:
                value = bytes(value).decode("utf-8")
            except UnicodeDecodeError as exc:
                return None, f"field '{self.cfg.text_field}' is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        if not isinstance(value, str):
            return None, f"field '{self.cfg.text_field}' is a {_type_name(value)}, expected a string"
        if len(value) > self.cfg.max_doc_chars:
            return None, (
                f"field '{self.cfg.text_field}' has {len(value):,} characters, more than "
                f"reader.max_doc_chars={self.cfg.max_doc_chars:,} (raise it with --max-doc-chars)"
            )
        if not value.strip():
            return None, f"field '{self.cfg.text_field}' is empty"
        return value, None

    def ident(self, value: object, derived: str) -> tuple[str, str | None]:
        if value is None:
            return derived, None
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            return derived, f"field '{self.cfg.id_field}' is a {_type_name(value)}, expected a string or an int"
        text = str(value)
        if not text:
            return derived, f"field '{self.cfg.id_field}' is empty"
        return text, None

    def priority(self, value: object) -> tuple[float, str | None]:
        if value is None:
            return math.nan, None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return math.nan, f"field '{self.priority_field}' is a {_type_name(value)}, expected a number"
        return float(value), None


def _fail_or_flag(batch: RecordBatch, f: InputFile, ordinal: int, ident: str, error: str,
                  cfg: ReaderConfig) -> None:
    """Raise an :class:`InputError` for a bad record, or append it flagged (``on_error='skip'``)."""
    if cfg.on_error == "raise":
        field_name = None
        if error.startswith("field '"):
            field_name, _, error = error[len("field '"):].partition("' ")
        raise InputError(f.path.as_posix(), error + ". Use --on-error skip to skip bad records.",
                         line=ordinal, field_name=field_name, unit=f.unit)
    batch.ordinals.append(ordinal)
    batch.ids.append(ident)
    batch.texts.append(None)
    batch.errors.append(error)
    batch.priorities.append(math.nan)


_FIELD_CATEGORIES = (
    ("is null or missing", "missing '{}'"),
    ("is empty", "empty '{}'"),
    ("characters, more than", "'{}' too long"),
    ("not valid UTF-8", "invalid UTF-8 in '{}'"),
    ("expected", "wrong type of '{}'"),
)


def reason_category(reason: str) -> str:
    """A short category of a skip reason, for the counts in ``report.json``."""
    if reason.startswith(("invalid JSON", "invalid UTF-8")):
        return reason.split(":", 1)[0]
    if reason.startswith("the line is a JSON"):
        return "not a JSON object"
    if reason.startswith("field '"):
        name = reason.split("'")[1]
        for marker, template in _FIELD_CATEGORIES:
            if marker in reason:
                return template.format(name)
    return reason


def add_record(batch: RecordBatch, f: InputFile, v: _Validator, ordinal: int, derived_id: str,
               id_value: object, text_value: object, priority_value: object) -> None:
    """Validate one record's id, text and priority and append it to ``batch`` (or fail/flag it)."""
    cfg = v.cfg
    ident, err = v.ident(id_value, derived_id)
    text = None
    if err is None:
        text, err = v.text(text_value)
    prio = math.nan
    if err is None and v.priority_field is not None:
        prio, err = v.priority(priority_value)
    if err is not None:
        _fail_or_flag(batch, f, ordinal, ident, err, cfg)
        return
    batch.ordinals.append(ordinal)
    batch.ids.append(ident)
    batch.texts.append(text)
    batch.errors.append(None)
    batch.priorities.append(prio)


def _jsonl_batches(fi: int, f: InputFile, cfg: ReaderConfig, priority_field: str | None) -> Iterator[RecordBatch]:
    v = _Validator(cfg, priority_field)
    batch = RecordBatch(fi)
    for line_no, raw in iter_json_lines(f.path):
        derived = f"{f.name}:{line_no}"
        try:
            rec = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            reason = "invalid UTF-8" if "utf-8" in str(exc).lower() else "invalid JSON"
            _fail_or_flag(batch, f, line_no, derived, f"{reason}: {exc}", cfg)
        else:
            if not isinstance(rec, dict):
                _fail_or_flag(batch, f, line_no, derived, f"the line is a JSON {_type_name(rec)}, expected an object", cfg)
            else:
                add_record(batch, f, v, line_no, derived, rec.get(cfg.id_field), rec.get(cfg.text_field),
                           rec.get(priority_field) if priority_field else None)
        if len(batch) >= cfg.batch_size:
            yield batch
            batch = RecordBatch(fi)
    if len(batch):
        yield batch


def _table_batches(fi: int, f: InputFile, cfg: ReaderConfig, priority_field: str | None) -> Iterator[RecordBatch]:
    v = _Validator(cfg, priority_field)
    wanted = [cfg.text_field, cfg.id_field] + ([priority_field] if priority_field else [])
    row = 0
    for rb in iter_table_batches(f.path, f.kind, cfg.batch_size, columns=wanted):
        names = rb.schema.names
        if cfg.text_field not in names:
            raise InputError(f.path.as_posix(), f"no column '{cfg.text_field}' (columns: {', '.join(names)}); "
                             "set --text-field", field_name=cfg.text_field)
        texts = rb.column(names.index(cfg.text_field)).to_pylist()
        ids = rb.column(names.index(cfg.id_field)).to_pylist() if cfg.id_field in names else [None] * rb.num_rows
        prios = (rb.column(names.index(priority_field)).to_pylist()
                 if priority_field and priority_field in names else [None] * rb.num_rows)
        batch = RecordBatch(fi)
        for i in range(rb.num_rows):
            add_record(batch, f, v, row + i, f"{f.name}#{row + i}", ids[i], texts[i], prios[i])
        row += rb.num_rows
        if len(batch):
            yield batch


def iter_batches(files: Sequence[InputFile], cfg: ReaderConfig,
                 priority_field: str | None = None) -> Iterator[RecordBatch]:
    """Stream validated records of every shard, in order, in batches of at most ``cfg.batch_size``."""
    for fi, f in enumerate(files):
        logger.debug("reading %s (%s)", f.path, f.kind)
        if f.kind == "jsonl":
            yield from _jsonl_batches(fi, f, cfg, priority_field)
        else:
            yield from _table_batches(fi, f, cfg, priority_field)


def read_records(f: InputFile, cfg: ReaderConfig) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(ordinal, full record)`` of one shard (used to write the kept documents)."""
    if f.kind == "jsonl":
        for line_no, raw in iter_json_lines(f.path):
            try:
                rec = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue  # was flagged as bad in the first pass
            if isinstance(rec, dict):
                yield line_no, rec
        return
    row = 0
    for rb in iter_table_batches(f.path, f.kind, cfg.batch_size):
        for i, rec in enumerate(rb.to_pylist()):
            yield row + i, rec
        row += rb.num_rows
