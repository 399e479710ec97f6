"""A finished run, read back: its decisions, report, config and the texts of its documents.

``semhash-llm explain``, ``inspect`` and ``report.html`` read a run's output directory through
:class:`RunView`. Texts are never copied into the output: ``locations.parquet`` (written by
every run with an output directory) gives each row of ``documents.parquet`` its input file and
ordinal, and the texts are re-read from the input files, which must not have changed (their
size and modification time are checked).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from semhash_llm.config import PipelineConfig
from semhash_llm.io.readers import InputFile
from semhash_llm.io.sources import FileSource

__all__ = ["RunView", "RunViewError", "LOCATIONS", "locations_table"]

LOCATIONS = "locations.parquet"


class RunViewError(ValueError):
    """A run directory that cannot be read back, with what is missing and how to fix it."""


def locations_table(file_index: np.ndarray, ordinal: np.ndarray, files: Sequence[InputFile]) -> pa.Table:
    """``locations.parquet``: for each row of ``documents.parquet`` its input file (index into
    the schema's ``files``) and ordinal, with each file's resolved path, format, size and
    modification time in the schema metadata."""
    meta = []
    for f in files:
        path = Path(f.path).resolve()
        st = path.stat() if path.exists() else None
        meta.append({"name": f.name, "path": path.as_posix(), "kind": f.kind, "label": f.label,
                     "size": st.st_size if st else None, "mtime_ns": st.st_mtime_ns if st else None})
    table = pa.table({"file": pa.array(np.asarray(file_index, dtype=np.int32)),
                      "ordinal": pa.array(np.asarray(ordinal, dtype=np.int64))})
    return table.replace_schema_metadata({"files": json.dumps(meta)})


@dataclass
class RunView:
    """The outputs of one run (``OUT``), opened for reading."""

    root: Path
    documents: pa.Table
    report: dict[str, Any]
    config: PipelineConfig
    files: list[InputFile]
    file_of_row: np.ndarray
    ordinal_of_row: np.ndarray
    _row_of: dict[str, int] | None = None

    @classmethod
    def open(cls, root: str | Path) -> RunView:
        """Open ``root``; :class:`RunViewError` says what is missing."""
        out = Path(root)
        if not out.is_dir():
            raise RunViewError(f"{out}: no such run directory; pass the --output directory of a semhash-llm dedup run")
        needed = ["documents.parquet", "report.json", "config.json"]
        missing = [name for name in needed if not (out / name).is_file()]
        if missing:
            raise RunViewError(f"{out}: {', '.join(missing)} missing; it is not a finished semhash-llm dedup run "
                               "(a run killed before it wrote its outputs resumes when started again)")
        documents = pq.read_table(out / "documents.parquet")
        report = json.loads((out / "report.json").read_text())
        config = PipelineConfig.from_dict(json.loads((out / "config.json").read_text())["config"],
                                          source=str(out / "config.json"))
        files: list[InputFile] = []
        file_of_row = np.full(documents.num_rows, -1, np.int32)
        ordinal_of_row = np.full(documents.num_rows, -1, np.int64)
        loc_path = out / LOCATIONS
        if loc_path.is_file():
            loc = pq.read_table(loc_path)
            if loc.num_rows != documents.num_rows:
                raise RunViewError(f"{loc_path}: {loc.num_rows} rows, documents.parquet {documents.num_rows}; the "
                                   "run directory is mixed up: run dedup again into an empty directory")
            meta = json.loads((loc.schema.metadata or {}).get(b"files", b"[]"))
            files = [InputFile(path=Path(m["path"]), kind=m["kind"], name=m["name"], label=m.get("label"))
                     for m in meta]
            cls._check_unchanged(meta)
            file_of_row = loc.column("file").to_numpy()
            ordinal_of_row = loc.column("ordinal").to_numpy()
        return cls(out, documents, report, config, files, file_of_row, ordinal_of_row)

    @staticmethod
    def _check_unchanged(meta: list[dict[str, Any]]) -> None:
        for m in meta:
            path = Path(m["path"])
            if not path.exists():
                raise RunViewError(f"{path}: the run's input file is gone; texts cannot be shown. Put it back or run "
                                   "dedup again")
            st = path.stat()
            if m.get("size") is not None and (st.st_size != m["size"] or st.st_mtime_ns != m["mtime_ns"]):
                raise RunViewError(f"{path}: the input file changed since the run (size or modification time "
                                   "differs); its rows would not match. Run dedup again on it")

    # ------------------------------------------------------------------ rows

    @property
    def num_rows(self) -> int:
        return self.documents.num_rows

    @property
    def skipped(self) -> np.ndarray:
        """True for the rows the reader skipped (``relation`` ``skipped``): they have no text."""
        rel = self.documents.column("relation").to_numpy(zero_copy_only=False)
        return np.asarray(rel == "skipped", dtype=np.bool_)

    @property
    def has_texts(self) -> bool:
        """Whether the texts can be re-read (the run wrote ``locations.parquet``)."""
        return bool(self.files)

    def column(self, name: str) -> list[Any]:
        return self.documents.column(name).to_pylist() if name in self.documents.column_names else \
            [None] * self.num_rows

    def row(self, doc_id: str) -> int:
        """The row of ``doc_id``; :class:`RunViewError` when the run has no such document."""
        if self._row_of is None:
            self._row_of = {}
            for i, ident in enumerate(self.documents.column("id").to_pylist()):
                self._row_of.setdefault(str(ident), i)
        found = self._row_of.get(str(doc_id))
        if found is None:
            against = self.report.get("against")
            where = f" (nor is it one of this run's rows: the index {against['index']} holds the documents " \
                    "matched against)" if against else ""
            raise RunViewError(f"{doc_id!r}: no document with this id in {self.root / 'documents.parquet'}{where}; "
                               "ids are the values of its 'id' column")
        return found

    def record(self, row: int) -> dict[str, Any]:
        """The decision columns of one row."""
        return {name: self.documents.column(name)[row].as_py() for name in self.documents.column_names}

    def texts(self, rows: Sequence[int] | np.ndarray) -> list[str]:
        """The original texts of ``rows``, re-read from the input files."""
        if not self.has_texts:
            raise RunViewError(f"{self.root}: no {LOCATIONS} (written by semhash-llm 0.1 runs from this version "
                               "on); texts cannot be re-read. Run dedup again to see them")
        rows = [int(r) for r in rows]
        bad = [r for r in rows if self.skipped[r]]
        if bad:
            raise RunViewError(f"row {bad[0]} ({self.documents.column('id')[bad[0]].as_py()!r}) was skipped by the "
                               f"reader: {self.documents.column('skip_reason')[bad[0]].as_py()}; it has no text")
        wanted: dict[int, dict[int, list[int]]] = {}
        for r in rows:
            wanted.setdefault(int(self.file_of_row[r]), {}).setdefault(int(self.ordinal_of_row[r]), []).append(r)
        got: dict[int, str] = {}
        field = self.config.reader.text_field
        source = FileSource(self.files, self.config.reader)
        for fi, by_ord in wanted.items():
            for ordv, rec in source.records(fi, by_ord.keys()):
                for r in by_ord.get(ordv, ()):
                    value = rec.get(field)
                    got[r] = (value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray))
                              else "" if value is None else str(value))
        missing = [r for r in rows if r not in got]
        if missing:
            raise RunViewError(f"{len(missing)} document(s) could not be re-read from the input files "
                               f"(first: row {missing[0]}); the inputs changed since the run")
        return [got[r] for r in rows]

    def iter_texts(self, chunk: int = 16_384) -> Iterator[tuple[np.ndarray, list[str]]]:
        """Every row's text, reading each input file once: ``(rows, texts)`` in chunks."""
        if not self.has_texts:
            self.texts([0]) if self.num_rows else None  # raises the error that says why
            return
        field = self.config.reader.text_field
        source = FileSource(self.files, self.config.reader)
        for fi in range(len(self.files)):
            mine = np.flatnonzero((self.file_of_row == fi) & ~self.skipped)
            row_of = dict(zip(self.ordinal_of_row[mine].tolist(), mine.tolist()))
            rows: list[int] = []
            texts: list[str] = []
            for ordv, rec in source.records(fi, row_of.keys()):
                r = row_of.get(ordv)
                if r is None:
                    continue
                value = rec.get(field)
                rows.append(r)
                texts.append(value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray))
                             else "" if value is None else str(value))
                if len(rows) >= chunk:
                    yield np.asarray(rows, np.int64), texts
                    rows, texts = [], []
            if rows:
                yield np.asarray(rows, np.int64), texts

    def clusters(self) -> dict[str, list[int]]:
        """Every cluster of two or more documents: its id (the kept document's) to its rows,
        the kept one first."""
        cid = self.column("cluster_id")
        action = self.column("action")
        out: dict[str, list[int]] = {}
        for i, c in enumerate(cid):
            if c is not None:
                out.setdefault(str(c), []).append(i)
        result: dict[str, list[int]] = {}
        for c, rows in out.items():
            if len(rows) > 1:
                rows.sort(key=lambda r: (action[r] != "keep", r))
                result[c] = rows
        return result
