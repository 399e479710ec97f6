"""Readers for JSON Lines, JSON arrays, Parquet, Arrow IPC / Feather and Hugging Face datasets.

Accepted inputs (:data:`SUPPORTED_FORMATS`): JSON Lines (``.jsonl``, ``.ndjson``, ``.json``),
plain or compressed with gzip (``.gz``), zstd (``.zst``, ``.zstd``) or bzip2 (``.bz2``); a
``.json`` file holding one top-level array of objects (also compressed); Parquet (``.parquet``,
``.pq``); Arrow IPC files and streams and Feather (``.arrow``, ``.feather``, ``.ipc``); and
directories written by ``datasets``' ``save_to_disk``.

Inputs are files, directories (walked recursively, in sorted order) or glob patterns. A file
of any other format is an error, never skipped. While walking a directory (or expanding a
glob), names that start with ``.`` or ``_`` (hidden files, Spark/Hadoop markers such as
``_SUCCESS`` and ``.part-0.crc``) are not read: each is logged as a warning and listed by
:func:`scan_inputs` with the reason. A file named explicitly is always read.

Records stream out in batches (:class:`RecordBatch`); nothing but the current batch is held.
Every record is located by ``(file, ordinal)``: the 1-based line of a JSON Lines file, the
0-based element of a JSON array, or the 0-based row of a table. Derived ids are
``shard.jsonl:17`` (line) and ``shard.parquet#16`` / ``shard.json#16`` (row, element). Bad
records raise :class:`InputError` naming the file, the line or row and the field — or, with
``on_error='skip'``, come out flagged with their reason so the pipeline can account for them.
A compressed file that ends early (truncated) or holds corrupt data is an error naming the
last complete line; with ``on_error='skip'`` the records before it are kept and the lost rest
is one skipped record with the reason.
"""

from __future__ import annotations

import bz2
import codecs
import glob as _glob
import gzip
import json
import logging
import functools
import math
import mmap
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Collection, Iterator, Literal, Sequence

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from semhash_llm.config import ReaderConfig

__all__ = [
    "SUPPORTED_FORMATS",
    "InputError",
    "UnreadableTailError",
    "InputFile",
    "IgnoredInput",
    "InputScan",
    "RecordBatch",
    "scan_inputs",
    "resolve_inputs",
    "iter_batches",
    "iter_json_lines",
    "iter_json_objects",
    "iter_json_array",
    "iter_table_batches",
    "read_records",
    "add_record",
    "reason_category",
]

logger = logging.getLogger(__name__)

FileKind = Literal["jsonl", "json", "parquet", "arrow"]
"""``jsonl``: JSON Lines; ``json``: one JSON array of objects; ``parquet``; ``arrow``: IPC / Feather."""

_COMPRESSIONS = ((".gz", "gzip"), (".zst", "zstd"), (".zstd", "zstd"), (".bz2", "bz2"))
_JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")
_JSON_SUFFIX = ".json"
_PARQUET_SUFFIXES = (".parquet", ".pq")
_ARROW_SUFFIXES = (".arrow", ".feather", ".ipc")

SUPPORTED_FORMATS = (
    "JSON Lines (.jsonl, .ndjson, .json), plain or compressed (.gz, .zst, .zstd, .bz2, e.g. .jsonl.zst); "
    "a .json file holding one array of objects (also compressed); Parquet (.parquet, .pq); "
    "Arrow IPC file or stream and Feather (.arrow, .feather, .ipc); "
    "a directory written by datasets' save_to_disk"
)

_CHUNK = 1 << 20  # decompressed bytes read at a time
_ZSTD_READ = 1 << 17  # compressed bytes fed to the zstd decompressor at a time


class InputError(ValueError):
    """A bad input: the message names the file, the line or row, and the field."""

    def __init__(self, path: str, message: str, line: int | None = None, field_name: str | None = None,
                 unit: str = "line") -> None:
        self.path = path
        self.line = line
        self.field = field_name
        self.reason = message
        where = path if line is None else f"{path}:{line}" if unit == "line" else f"{path} {unit} {line}"
        what = f" field '{field_name}':" if field_name else ""
        super().__init__(f"{where}:{what} {message}")


class UnreadableTailError(InputError):
    """The rest of a file cannot be read (a truncated or corrupt compressed stream, broken JSON array).

    ``line`` is the ordinal where reading stopped (the line after the last complete one, or the
    array element being read); ``skip_reason`` is the reason recorded for it with ``on_error='skip'``.
    """

    def __init__(self, path: str, skip_reason: str, advice: str, line: int, unit: str = "line") -> None:
        super().__init__(path, f"{skip_reason}. {advice}", line=line, unit=unit)
        self.skip_reason = skip_reason


def _compression(path: Path) -> str | None:
    """``gzip``, ``zstd``, ``bz2`` or None, from the file name."""
    name = path.name.lower()
    for suffix, comp in _COMPRESSIONS:
        if name.endswith(suffix):
            return comp
    return None


def _base_name(path: Path) -> str:
    """The lower-cased file name without its compression suffix."""
    name = path.name.lower()
    for suffix, _ in _COMPRESSIONS:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


_FORMAT_NAMES = {"jsonl": "jsonl", "json": "json-array", "parquet": "parquet", "arrow": "arrow"}


@dataclass(frozen=True)
class InputFile:
    """One input shard: its path, format, and the name used in derived ids and messages."""

    path: Path
    kind: FileKind
    name: str
    label: str | None = None
    """A format name to report instead of the one derived from ``kind`` and the suffix."""

    @property
    def unit(self) -> str:
        """What an ordinal counts: 'line' (JSON Lines), 'element' (JSON array) or 'row' (tables)."""
        return {"jsonl": "line", "json": "element"}.get(self.kind, "row")

    @property
    def format(self) -> str:
        """The format for reports: ``jsonl``, ``json-array``, ``parquet`` or ``arrow``, plus ``+gzip`` etc."""
        if self.label is not None:
            return self.label
        comp = _compression(self.path) if self.kind in ("jsonl", "json") else None
        return _FORMAT_NAMES[self.kind] + (f"+{comp}" if comp else "")

    def derived_id(self, ordinal: int) -> str:
        """The id of a record without one: ``name:line`` or ``name#row``."""
        return f"{self.name}:{ordinal}" if self.kind == "jsonl" else f"{self.name}#{ordinal}"


@dataclass(frozen=True)
class IgnoredInput:
    """A file or directory met while walking a directory or expanding a glob, and not read."""

    path: Path
    reason: str

    def as_dict(self) -> dict[str, str]:
        """``{"path", "reason"}`` for ``report.json``."""
        return {"path": self.path.as_posix(), "reason": self.reason}


@dataclass
class InputScan:
    """What :func:`scan_inputs` found: the shards to read, in order, and what it did not read."""

    files: list[InputFile]
    ignored: list[IgnoredInput]


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
    """The kind of a file from its name (and, for ``.json``, its first byte); None if unsupported."""
    base = _base_name(path)
    compressed = _compression(path) is not None
    if base.endswith(_JSON_LINES_SUFFIXES):
        return "jsonl"
    if base.endswith(_JSON_SUFFIX):
        return "json" if _starts_with_bracket(path) else "jsonl"
    if compressed:
        return None
    if base.endswith(_PARQUET_SUFFIXES):
        return "parquet"
    if base.endswith(_ARROW_SUFFIXES):
        return "arrow"
    return None


def _starts_with_bracket(path: Path) -> bool:
    """Whether the first byte that is not white space (or a BOM) is ``[``: a JSON array, not JSON Lines."""
    try:
        seen = 0
        for chunk in _decompressed_chunks(path):
            text = chunk.lstrip(b" \t\r\n")
            if seen == 0 and text.startswith(codecs.BOM_UTF8):
                text = text[len(codecs.BOM_UTF8):].lstrip(b" \t\r\n")
            if text:
                return text.startswith(b"[")
            seen += len(chunk)
            if seen > 64 * _CHUNK:
                return False
    except (InputError, _StreamError):
        return False  # the reader reports the problem with its line
    return False


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


_HF_METADATA = frozenset({"dataset_info.json", "state.json", "dataset_dict.json"})


def _ignore_reason(path: Path) -> str | None:
    """Why a file or directory met while walking is not read (its name starts with '.' or '_'), or None."""
    what = "directory" if path.is_dir() else "file"
    if path.name.startswith("."):
        return f"hidden {what} (the name starts with '.'); name it explicitly to read it"
    if path.name.startswith("_"):
        return (f"{what} name starts with '_' (a marker such as Spark's _SUCCESS or a _temporary "
                "directory); name it explicitly to read it")
    return None


def _ignore(path: Path, reason: str, ignored: list[IgnoredInput]) -> None:
    ignored.append(IgnoredInput(path, reason))


_MAX_WARNINGS = 20  # entries not read that are logged one by one; the rest in one line


def _warn_ignored(ignored: list[IgnoredInput]) -> None:
    for item in ignored[:_MAX_WARNINGS]:
        logger.warning("not reading %s: %s", item.path, item.reason)
    if len(ignored) > _MAX_WARNINGS:
        logger.warning("not reading %d more entries whose names start with '.' or '_' (all are listed under "
                       "ignored_files in report.json)", len(ignored) - _MAX_WARNINGS)


def _walk(directory: Path, ignored: list[IgnoredInput], unknown: list[Path]) -> list[tuple[Path, FileKind]]:
    hf = _hf_arrow_files(directory)
    if hf is not None:
        return [(p, "arrow") for p in hf]
    found: list[tuple[Path, FileKind]] = []
    for child in sorted(directory.iterdir()):
        reason = _ignore_reason(child)
        if reason is not None:
            _ignore(child, reason, ignored)
        elif child.is_dir():
            found.extend(_walk(child, ignored, unknown))
        elif (kind := _kind_of(child)) is not None:
            found.append((child, kind))
        else:
            unknown.append(child)
    return found


def _unknown_format_error(unknown: list[Path]) -> InputError:
    listed = ", ".join(p.as_posix() for p in unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5
                                                           else "")
    what = (f"unknown format ({len(unknown)} files of unknown format: {listed})" if len(unknown) > 1
            else "unknown format")
    return InputError(
        unknown[0].as_posix(),
        f"{what}. Supported: {SUPPORTED_FORMATS}. Convert the file, or pass only the data files "
        "(for example a glob such as 'DIR/**/*.jsonl')",
    )


def scan_inputs(inputs: Sequence[str | Path]) -> InputScan:
    """Expand files, directories and globs into the ordered shards to read and the entries not read.

    Raises :class:`InputError` for a path that does not exist, a glob that matches nothing,
    a file of unknown format (named, or met while walking or expanding a glob), or inputs
    that yield no shard at all.
    """
    if not inputs:
        raise InputError("<inputs>", "no input given; pass files, directories or glob patterns")
    found: list[tuple[Path, FileKind, Path]] = []
    ignored: list[IgnoredInput] = []
    unknown: list[Path] = []
    for raw in inputs:
        text = str(raw)
        if any(ch in text for ch in "*?[") and not Path(text).exists():
            matches = sorted(_glob.glob(text, recursive=True))
            if not matches:
                raise InputError(text, "the glob pattern matches no file")
            named = Path(text).name[:1]  # a pattern like '_part*' names '_' files on purpose
            for m in matches:
                p = Path(m)
                reason = _ignore_reason(p)
                if reason is not None and p.name[:1] != named:
                    _ignore(p, reason, ignored)
                elif p.name in _HF_METADATA and _hf_arrow_files(p.parent) is not None:
                    _ignore(p, "metadata of a dataset written by datasets' save_to_disk; pass its directory "
                            "to read the dataset", ignored)
                elif p.is_dir():
                    found.extend((f, k, p) for f, k in _walk(p, ignored, unknown))
                elif (k := _kind_of(p)) is not None:
                    found.append((p, k, p.parent))
                else:
                    unknown.append(p)
            continue
        p = Path(text)
        if not p.exists():
            raise InputError(text, "no such file or directory")
        if p.is_dir():
            before = len(ignored)
            files = _walk(p, ignored, unknown)
            if not files and not unknown:
                n_ignored = len(ignored) - before
                note = (f" ({n_ignored} entr{'y' if n_ignored == 1 else 'ies'} whose names start with '.' or '_' "
                        "not read)" if n_ignored else "")
                raise InputError(text, f"the directory holds no input file{note}. Supported: {SUPPORTED_FORMATS}")
            found.extend((f, k, p) for f, k in files)
        elif (kind := _kind_of(p)) is not None:
            found.append((p, kind, p.parent))
        else:
            unknown.append(p)
    if unknown:
        raise _unknown_format_error(unknown)
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
        note = ""
        if ignored:
            listed = "; ".join(f"{i.path.as_posix()}: {i.reason}" for i in ignored[:3])
            note = f". Not read: {listed}" + (f" and {len(ignored) - 3} more" if len(ignored) > 3 else "")
        raise InputError(", ".join(str(i) for i in inputs), f"no input shard found{note}")
    names = [f.name for f in out]
    if len(set(names)) != len(names):
        # Fall back to full paths so derived ids stay unique across inputs.
        out = [InputFile(path=f.path, kind=f.kind, name=f.path.as_posix()) for f in out]
    unique_ignored = list({i.path.resolve(): i for i in ignored}.values())  # a glob may meet one twice
    _warn_ignored(unique_ignored)
    return InputScan(files=out, ignored=unique_ignored)


def resolve_inputs(inputs: Sequence[str | Path]) -> list[InputFile]:
    """The ordered shards of :func:`scan_inputs` (what was not read is only logged, as warnings)."""
    return scan_inputs(inputs).files


# ---------------------------------------------------------------------------- raw access


class _StreamError(Exception):
    """A compressed stream stopped early: ``truncated`` (no end marker) or corrupt."""

    def __init__(self, truncated: bool, detail: str) -> None:
        super().__init__(detail)
        self.truncated = truncated
        self.detail = detail


def _zstd_chunks(raw: IO[bytes]) -> Iterator[bytes]:
    """Decompress every zstd frame of ``raw``; a file that ends inside a frame is truncated."""
    import zstandard

    dctx = zstandard.ZstdDecompressor()
    dobj = dctx.decompressobj()
    in_frame = False
    while data := raw.read(_ZSTD_READ):
        while data:
            try:
                out = dobj.decompress(data)
            except zstandard.ZstdError as exc:
                raise _StreamError(False, str(exc)) from None
            in_frame = True
            if out:
                yield out
            if dobj.eof:  # the frame ended: what follows starts another one
                data = dobj.unused_data
                dobj = dctx.decompressobj()
                in_frame = False
            else:
                data = b""
    if in_frame:
        raise _StreamError(True, "the file ends inside a zstd frame")


def _decompressed_chunks(path: Path) -> Iterator[bytes]:
    """The bytes of a (possibly gzip/zstd/bz2-compressed) file, chunk by chunk.

    Raises :class:`InputError` if the file cannot be opened and ``_StreamError`` if the
    compressed stream is truncated or corrupt (after yielding everything before).
    """
    comp = _compression(path)
    try:
        raw = open(path, "rb")
    except OSError as exc:
        raise InputError(str(path), f"cannot open: {exc.strerror or exc}") from None
    with raw:
        if comp == "zstd":
            yield from _zstd_chunks(raw)
            return
        fh: gzip.GzipFile | bz2.BZ2File | IO[bytes]
        if comp == "gzip":
            fh = gzip.GzipFile(fileobj=raw, mode="rb")
        elif comp == "bz2":
            fh = bz2.BZ2File(raw, "rb")
        else:
            fh = raw
        with fh:
            while True:
                try:
                    # read1: what was decompressed before a truncated or corrupt spot still comes out.
                    chunk = fh.read1(_CHUNK)
                except EOFError as exc:
                    raise _StreamError(True, str(exc)) from None
                except (OSError, ValueError, zlib.error) as exc:
                    raise _StreamError(False, str(exc)) from None
                if not chunk:
                    return
                yield chunk


def _tail_error(path: Path, exc: _StreamError, done: int, unit: str) -> UnreadableTailError:
    """The error for a stream that stopped after ``done`` complete lines (or array elements)."""
    comp = _compression(path) or "uncompressed"
    if unit == "line":
        where = (f"after line {done} (the last complete line)" if done else "before its first complete line")
        at = done + 1
        kept = "the records before it"
    else:
        where = f"in element {done} ({done} elements read before it)"
        at = done
        kept = "the elements before it"
    if exc.truncated:
        reason = (f"truncated {comp} file: the compressed stream ends before its end marker, {where}; "
                  "the rest of the file could not be read")
    else:
        reason = f"corrupt {comp} data: {exc.detail}, {where}; the rest of the file could not be read"
    advice = (f"Re-create or re-download the file, or pass --on-error skip to keep {kept} "
              "(the unreadable rest then counts as one skipped record)")
    return UnreadableTailError(path.as_posix(), reason, advice, line=at, unit=unit)


def iter_json_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, raw_line)`` (without the line break) for the non-blank lines of a JSONL file.

    Raises :class:`UnreadableTailError` after the last complete line of a compressed file
    that is truncated or corrupt; a partial last line is never yielded.
    """
    line_no = 0
    pending: list[bytes] = []
    try:
        for chunk in _decompressed_chunks(path):
            parts = chunk.split(b"\n")
            tail = parts.pop()
            for part in parts:
                if pending:
                    pending.append(part)
                    part = b"".join(pending)
                    pending.clear()
                line_no += 1
                if part.strip():
                    yield line_no, part
            if tail:
                pending.append(tail)
    except _StreamError as exc:
        raise _tail_error(path, exc, line_no, "line") from None
    if pending:
        last = b"".join(pending)
        line_no += 1
        if last.strip():
            yield line_no, last


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


_WHITESPACE = re.compile(r"[ \t\r\n]*")
_NOT_UTF8 = re.compile("[\udc80-\udcff]")  # bytes that are not UTF-8, kept by 'surrogateescape'


def iter_json_array(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """Yield ``(index, value, error)`` for the elements of a file holding one JSON array, streaming.

    ``error`` is set (and ``value`` unusable) for an element with bytes that are not UTF-8.
    Invalid JSON cannot be resynchronised: it raises :class:`UnreadableTailError` at that
    element, as does a truncated or corrupt compressed stream.
    """
    chunks = _decompressed_chunks(path)
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
    json_decoder = json.JSONDecoder()
    buf = ""
    pos = 0
    eof = False
    index = 0

    def fill() -> bool:
        """Read more text into ``buf`` (at least doubling what is pending); False at the end."""
        nonlocal buf, pos, eof
        if eof:
            return False
        if pos:
            buf, pos = buf[pos:], 0
        want = max(_CHUNK, len(buf))
        got = 0
        pieces = [buf]
        while got < want:
            try:
                chunk = next(chunks, None)
            except _StreamError as exc:
                raise _tail_error(path, exc, index, "element") from None
            if chunk is None:
                eof = True
                pieces.append(decoder.decode(b"", final=True))
                break
            pieces.append(decoder.decode(chunk))
            got += len(chunk)
        buf = "".join(pieces)
        return True

    def skip_space() -> None:
        nonlocal pos
        while True:
            m = _WHITESPACE.match(buf, pos)
            pos = m.end() if m else pos
            if pos < len(buf) or not fill():
                return

    def broken(message: str) -> UnreadableTailError:
        return UnreadableTailError(
            path.as_posix(), f"{message}; the rest of the file could not be read",
            "Fix the file, or pass --on-error skip to keep the elements before it "
            "(the unreadable rest then counts as one skipped record)", line=index, unit="element")

    fill()
    skip_space()
    if buf.startswith("\ufeff", pos):
        pos += 1
        skip_space()
    if not buf.startswith("[", pos):
        raise broken("invalid JSON: expected '[' to open the array of records")
    pos += 1
    skip_space()
    if buf.startswith("]", pos):
        pos += 1
    else:
        while True:
            while True:
                try:
                    value, end = json_decoder.raw_decode(buf, pos)
                except json.JSONDecodeError as exc:
                    if fill():
                        continue
                    raise broken(f"invalid JSON: {exc.msg} (character {exc.pos - pos} of the element)") from None
                if end >= len(buf) and fill():
                    continue  # a number or literal may go on in the next chunk
                break
            error = None
            if _NOT_UTF8.search(buf, pos, end):
                error = "invalid UTF-8: the element holds bytes that are not UTF-8"
            yield index, value, error
            index += 1
            pos = end
            skip_space()
            if buf.startswith(",", pos):
                pos += 1
                skip_space()
                continue
            if buf.startswith("]", pos):
                pos += 1
                break
            raise broken("invalid JSON: expected ',' or ']' after the previous element" if pos < len(buf)
                         else "invalid JSON: the file ends before the array's closing ']'")
    skip_space()
    if pos < len(buf):
        raise broken("invalid JSON: data after the array's closing ']'")


def _arrow_batches(path: Path) -> Iterator[pa.RecordBatch]:
    """Record batches of an Arrow IPC stream or file, or a Feather (v1 or v2) file."""
    with pa.memory_map(str(path)) as source:
        stream: Any = None
        try:
            stream = pa.ipc.open_stream(source)
        except pa.ArrowInvalid:
            pass
        if stream is not None:
            yield from stream
            return
        try:
            reader: Any = pa.ipc.open_file(source)
        except pa.ArrowInvalid:
            reader = None
        if reader is not None:
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)
            return
    import pyarrow.feather as feather

    yield from feather.read_table(str(path), memory_map=True).to_batches()


def iter_table_batches(path: Path, kind: FileKind, batch_size: int,
                       columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
    """Yield Arrow record batches of a Parquet file, an Arrow IPC / Feather file or a Hugging Face shard."""
    what = "Parquet" if kind == "parquet" else "Arrow IPC or Feather"
    try:
        if kind == "parquet":
            pf = pq.ParquetFile(path)
            cols = None if columns is None else [c for c in columns if c in pf.schema_arrow.names]
            yield from pf.iter_batches(batch_size=batch_size, columns=cols)
        else:
            for batch in _arrow_batches(path):
                if columns is not None:
                    keep = [c for c in columns if c in batch.schema.names]
                    batch = batch.select(keep)
                for off in range(0, batch.num_rows, batch_size):
                    yield batch.slice(off, batch_size)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(str(path), f"cannot read as {what}: {exc}") from None


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
    if reason.startswith(("the line is a JSON", "the element is a JSON")):
        return "not a JSON object"
    if reason.startswith(("truncated ", "corrupt ")):
        return reason.split(":", 1)[0]
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


def _parsed_objects(f: InputFile) -> Iterator[tuple[int, Any, str | None]]:
    """``(ordinal, value, error)`` of a JSON Lines or JSON array file; ``error`` if the value is unusable."""
    if f.kind == "json":
        yield from iter_json_array(f.path)
        return
    for line_no, raw in iter_json_lines(f.path):
        try:
            yield line_no, orjson.loads(raw), None
        except orjson.JSONDecodeError as exc:
            reason = "invalid UTF-8" if "utf-8" in str(exc).lower() else "invalid JSON"
            yield line_no, None, f"{reason}: {exc}"


def _not_an_object(f: InputFile, value: object) -> str:
    return f"the {f.unit} is a JSON {_type_name(value)}, expected an object"


def _object_batches(fi: int, f: InputFile, cfg: ReaderConfig, priority_field: str | None) -> Iterator[RecordBatch]:
    v = _Validator(cfg, priority_field)
    batch = RecordBatch(fi)
    try:
        for ordinal, rec, error in _parsed_objects(f):
            derived = f.derived_id(ordinal)
            if error is not None:
                _fail_or_flag(batch, f, ordinal, derived, error, cfg)
            elif not isinstance(rec, dict):
                _fail_or_flag(batch, f, ordinal, derived, _not_an_object(f, rec), cfg)
            else:
                add_record(batch, f, v, ordinal, derived, rec.get(cfg.id_field), rec.get(cfg.text_field),
                           rec.get(priority_field) if priority_field else None)
            if len(batch) >= cfg.batch_size:
                yield batch
                batch = RecordBatch(fi)
    except UnreadableTailError as exc:
        if cfg.on_error == "raise" or exc.line is None:
            raise
        logger.warning("%s: %s (skipped)", f.path, exc.skip_reason)
        _fail_or_flag(batch, f, exc.line, f.derived_id(exc.line), exc.skip_reason, cfg)
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
            add_record(batch, f, v, row + i, f.derived_id(row + i), ids[i], texts[i], prios[i])
        row += rb.num_rows
        if len(batch):
            yield batch


def iter_batches(files: Sequence[InputFile], cfg: ReaderConfig,
                 priority_field: str | None = None) -> Iterator[RecordBatch]:
    """Stream validated records of every shard, in order, in batches of at most ``cfg.batch_size``."""
    for fi, f in enumerate(files):
        logger.debug("reading %s (%s)", f.path, f.format)
        if f.kind in ("jsonl", "json"):
            yield from _object_batches(fi, f, cfg, priority_field)
        else:
            yield from _table_batches(fi, f, cfg, priority_field)


def _changed_error(f: InputFile, ordinal: int, why: str) -> InputError:
    return InputError(
        f.path.as_posix(),
        f"the record kept in the first pass cannot be re-read to write the kept output ({why}). The input "
        "changed while the run was going; rerun on inputs that do not change during the run",
        line=ordinal, unit=f.unit)


@functools.lru_cache(maxsize=64)
def _line_ends(path: str, size: int, mtime_ns: int) -> np.ndarray:
    """Byte offsets of every line break of a plain (uncompressed) JSON Lines file, found once per
    file version (path, size, modification time) and kept: line ``k`` (1-based, as
    :func:`iter_json_lines` numbers them) spans ``[ends[k-2] + 1, ends[k-1])``."""
    with open(path, "rb") as fh:
        if size == 0:
            return np.zeros(0, np.int64)
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            ends = np.flatnonzero(np.frombuffer(mm, dtype=np.uint8) == 0x0A).astype(np.int64)
    if ends.size == 0 or ends[-1] != size - 1:
        ends = np.append(ends, size)  # a last line without a line break
    return ends


def _wanted_json_lines(f: InputFile, wanted: Collection[int]) -> Iterator[tuple[int, Any, str | None]]:
    """``(line, value, error)`` of just the ``wanted`` lines of a JSON Lines file, in line order:
    a plain file is read at the lines' byte offsets (one scan for its line breaks per file
    version, then seeks); a compressed one in one pass that parses only the wanted lines."""
    want = sorted(set(int(o) for o in wanted))
    if not want:
        return
    if _compression(f.path) is None:
        try:
            st = f.path.stat()
            ends = _line_ends(str(f.path), st.st_size, st.st_mtime_ns)
        except OSError as exc:
            raise InputError(str(f.path), f"cannot open: {exc.strerror or exc}") from None
        with open(f.path, "rb") as fh:
            for line in want:
                if line < 1 or line > ends.size:
                    yield line, None, "the line is past the end of the file"
                    continue
                start = int(ends[line - 2]) + 1 if line >= 2 else 0
                fh.seek(start)
                raw = fh.read(int(ends[line - 1]) - start)
                yield (line, *_parse_line(raw))
        return
    targets = set(want)
    for line_no, raw in iter_json_lines(f.path):
        if line_no in targets:
            yield (line_no, *_parse_line(raw))


def _parse_line(raw: bytes) -> tuple[Any, str | None]:
    """One JSON line: ``(value, None)`` or ``(None, why it is unusable)``."""
    if not raw.strip():
        return None, "the line is blank"
    try:
        return orjson.loads(raw), None
    except orjson.JSONDecodeError as exc:
        reason = "invalid UTF-8" if "utf-8" in str(exc).lower() else "invalid JSON"
        return None, f"{reason}: {exc}"


def read_records(f: InputFile, cfg: ReaderConfig,
                 wanted: Collection[int] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(ordinal, full record)`` of one shard (the second pass, to write the kept documents).

    Records that the first pass flagged as bad are passed over. With ``wanted`` (the ordinals
    the first pass accepted and the caller needs), a wanted record that can no longer be parsed,
    or that lies past a truncated end, is an :class:`InputError` naming the file and line; and
    only the wanted records are read: a plain JSON Lines file at their byte offsets, a
    compressed one parsing only the wanted lines, a Parquet file only the row groups that hold
    them (the candidate texts of the verifier, the cover check, the fragments and the Bloom
    repair are re-read this way, never by scanning whole files).
    """
    if f.kind == "jsonl" and wanted is not None:
        seen = 0
        try:
            for ordinal, value, error in _wanted_json_lines(f, wanted):
                if error is None and isinstance(value, dict):
                    seen += 1
                    yield ordinal, value
                else:
                    raise _changed_error(f, ordinal, error or _not_an_object(f, value))
        except UnreadableTailError as exc:
            lost = [o for o in wanted if exc.line is not None and o >= exc.line]
            if lost:
                raise _changed_error(f, min(lost), exc.skip_reason) from None
        return
    if f.kind in ("jsonl", "json"):
        try:
            for ordinal, value, error in _parsed_objects(f):
                if error is None and isinstance(value, dict):
                    yield ordinal, value
                elif wanted is not None and ordinal in wanted:
                    raise _changed_error(f, ordinal, error or _not_an_object(f, value))
        except UnreadableTailError as exc:
            # The first pass flagged the unreadable rest (on_error='skip'); only a wanted record past it is lost.
            lost = [o for o in wanted if exc.line is not None and o >= exc.line] if wanted is not None else []
            if lost:
                raise _changed_error(f, min(lost), exc.skip_reason) from None
        return
    if f.kind == "parquet" and wanted is not None:
        yield from _wanted_parquet_rows(f, wanted)
        return
    want = None if wanted is None else np.unique(np.fromiter((int(o) for o in wanted), dtype=np.int64))
    row = 0
    for rb in iter_table_batches(f.path, f.kind, cfg.batch_size):
        if want is None:
            for i, rec in enumerate(rb.to_pylist()):
                yield row + i, rec
        else:  # only the wanted rows of each batch become Python objects
            lo, hi = np.searchsorted(want, [row, row + rb.num_rows])
            local = want[lo:hi] - row
            if local.size:
                for o, rec in zip((local + row).tolist(), rb.take(pa.array(local)).to_pylist()):
                    yield o, rec
        row += rb.num_rows


def _wanted_parquet_rows(f: InputFile, wanted: Collection[int]) -> Iterator[tuple[int, dict[str, Any]]]:
    """The wanted rows of a Parquet file, reading only the row groups that hold them."""
    want = np.unique(np.fromiter((int(o) for o in wanted), dtype=np.int64))
    try:
        pf = pq.ParquetFile(f.path)
        sizes = np.array([pf.metadata.row_group(g).num_rows for g in range(pf.num_row_groups)], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)])
        if want.size and (want[0] < 0 or want[-1] >= starts[-1]):
            bad = int(want[want >= starts[-1]][0]) if want[-1] >= starts[-1] else int(want[0])
            raise _changed_error(f, bad, f"the file has {int(starts[-1])} rows")
        group = np.searchsorted(starts, want, side="right") - 1
        for g in np.unique(group).tolist():
            local = want[group == g] - starts[g]
            table = pf.read_row_group(g)
            for o, rec in zip((local + starts[g]).tolist(), table.take(pa.array(local)).to_pylist()):
                yield o, rec
    except (pa.ArrowException, OSError) as exc:
        raise InputError(str(f.path), f"cannot read as Parquet: {exc}") from None
