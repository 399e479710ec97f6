"""Deduplicate the tables users already hold, and get the same kind of table back.

:func:`deduplicate_frame` takes a list of dicts, a pandas or polars ``DataFrame``, a pyarrow
``Table`` or a Hugging Face ``datasets.Dataset``, runs the in-memory cascade
(:meth:`semhash_llm.api.Deduplicator.deduplicate`) over its text column and returns an object of
the same type, one row per input row in input order, with the decision columns of
``documents.parquet`` added (:data:`DECISION_COLUMNS`)::

    >>> import pandas as pd
    >>> from semhash_llm import deduplicate_frame
    >>> out = deduplicate_frame(pd.DataFrame({"text": [...]}))
    >>> out[out["action"] == "keep"]

pandas, polars and datasets are imported only when such an object is passed: none of them is
a dependency of the core. Only the text column (and the id column, when there is one) is read
into Python objects; the other columns are carried through untouched.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Mapping, TypeVar, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from semhash_llm.api import Deduplicator
from semhash_llm.cascade import ProgressCallback
from semhash_llm.config import PipelineConfig
from semhash_llm.io.readers import InputError

__all__ = ["DECISION_COLUMNS", "FrameError", "deduplicate_frame"]

DECISION_COLUMNS: tuple[str, ...] = (
    "action", "duplicate_of", "relation", "cluster_id", "score", "decided_by", "fragments", "skip_reason",
)
"""The columns :func:`deduplicate_frame` adds, named as in ``documents.parquet`` (README, *Outputs*)."""

# The keys of the records handed to the cascade: ours, so that no user column can clash with them.
# No record carries the id key, so the cascade derives ids "0", "1", ...: the row positions.
_TEXT_KEY = "__semhash_text__"
_ID_KEY = "__semhash_row__"
_SKIP_FIX = ("fix or drop that row, or pass config=PipelineConfig.from_dict({'reader': {'on_error': 'skip'}}) "
             "to go on: such rows get action='remove', relation='skipped' and a skip_reason")

T = TypeVar("T")


class FrameError(ValueError):
    """The data cannot be deduplicated as given; the message says what, what was expected and the fix."""


# ---------------------------------------------------------------------------------------------- decisions
@dataclass
class Decisions:
    """What the cascade decided for n rows, with keepers given as row positions."""

    table: pa.Table
    """The contract columns (:data:`DECISION_COLUMNS`); ``duplicate_of`` and ``cluster_id`` hold
    the keeper's row position (int64, null where the contract has null)."""
    keep: np.ndarray
    """Bool per row: kept."""
    cut_texts: dict[int, str]
    """Row position → its kept text without its viral fragments (only rows that lost some)."""

    @property
    def duplicate_of(self) -> list[int | None]:
        return self.table.column("duplicate_of").to_pylist()

    @property
    def cluster_of(self) -> list[int | None]:
        return self.table.column("cluster_id").to_pylist()

    def arrow(self, ids: pa.Array | pa.ChunkedArray | None) -> pa.Table:
        """The decision columns; keepers as values of ``ids`` (same type), or as positions if ``None``."""
        if ids is None:
            return self.table
        t = self.table
        for name in ("duplicate_of", "cluster_id"):
            i = t.schema.get_field_index(name)
            t = t.set_column(i, name, ids.take(t.column(name)))
        return t

    def python(self, ids: list[Any] | None) -> dict[str, list[Any]]:
        """The decision columns as Python lists; keepers as values of ``ids``, or positions if ``None``."""
        cols: dict[str, list[Any]] = {name: self.table.column(name).to_pylist() for name in DECISION_COLUMNS}
        if ids is not None:
            for name in ("duplicate_of", "cluster_id"):
                cols[name] = [None if p is None else ids[p] for p in cols[name]]
        return cols


def _empty_decisions() -> Decisions:
    table = pa.table({
        "action": pa.array([], pa.string()), "duplicate_of": pa.array([], pa.int64()),
        "relation": pa.array([], pa.string()), "cluster_id": pa.array([], pa.int64()),
        "score": pa.array([], pa.float64()), "decided_by": pa.array([], pa.string()),
        "fragments": pa.array([], pa.list_(pa.list_(pa.int64(), 2))), "skip_reason": pa.array([], pa.string()),
    })
    return Decisions(table, np.zeros(0, dtype=bool), {})


def _reason(message: str) -> str:
    """An :class:`InputError` reason without the command-line advice (the caller gives its own)."""
    message = message.replace(" Use --on-error skip to skip bad records.", "").rstrip(". ")
    return message.replace("(raise it with --max-doc-chars)", "(raise reader.max_doc_chars in the config)")


def decide(texts: list[Any], config: PipelineConfig | None, progress: ProgressCallback | None, *,
           priorities: list[Any] | None = None, text_name: str = "text",
           where: Callable[[int], str] = lambda i: f"row {i}", fix: str = _SKIP_FIX) -> Decisions:
    """Run the cascade over ``texts`` (one per row) and return its decisions by row position.

    ``priorities``: the values of ``config.select.priority_field`` (used with ``keep='priority'``).
    A bad row (no text, not a string, empty, too long) raises :class:`FrameError` naming it by
    ``where(position)`` and the column ``text_name``, and suggesting ``fix`` — unless
    ``reader.on_error`` is ``'skip'``: then it is removed with ``relation='skipped'``.
    """
    cfg = config if config is not None else PipelineConfig()
    if not isinstance(cfg, PipelineConfig):
        raise TypeError(f"config must be a PipelineConfig or None, got a {type(cfg).__name__}. Build one with "
                        "PipelineConfig.from_dict({...}) or PipelineConfig.from_toml(path).")
    if not texts:
        return _empty_decisions()
    internal = cfg.with_overrides({"reader": {"text_field": _TEXT_KEY, "id_field": _ID_KEY}}, source="frames")
    pf = cfg.select.priority_field if cfg.select.keep == "priority" else None
    records: list[dict[str, Any]]
    if pf is not None and priorities is not None:
        records = [{_TEXT_KEY: t, pf: p} for t, p in zip(texts, priorities)]
    else:
        records = [{_TEXT_KEY: t} for t in texts]
    try:
        result = Deduplicator(internal, progress).deduplicate(records)
    except InputError as exc:
        if exc.path != "<records>" or exc.line is None:
            raise
        column = text_name if exc.field in (None, _TEXT_KEY) else exc.field
        raise FrameError(f"{where(exc.line)}: {column!r} {_reason(exc.reason)}; {fix}.") from None
    docs = result.documents
    keep = pc.equal(docs.column("action"), "keep").to_numpy(zero_copy_only=False)
    table = docs.select(list(DECISION_COLUMNS))
    for name in ("duplicate_of", "cluster_id"):  # derived ids are row positions
        i = table.schema.get_field_index(name)
        table = table.set_column(i, name, pc.cast(table.column(name), pa.int64()))
    cut_rows = np.flatnonzero(pc.list_value_length(docs.column("fragments")).to_numpy(zero_copy_only=False) > 0)
    assert result.records is not None
    cut_texts = {int(i): str(result.records[i][_TEXT_KEY]) for i in cut_rows if keep[i]}
    return Decisions(table, keep, cut_texts)


# ---------------------------------------------------------------------------------------------- adapters
_TEXT_TYPES = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary,
               pa.types.is_null)


def _is_text_type(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return _is_text_type(t.value_type)
    if str(t) in ("string_view", "binary_view"):
        return True
    return any(check(t) for check in _TEXT_TYPES)


def _replace_rows(col: pa.Array | pa.ChunkedArray, texts: dict[int, str]) -> pa.Array | pa.ChunkedArray:
    """``col`` with the rows in ``texts`` replaced (same type)."""
    if not texts:
        return col
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    mask = np.zeros(len(arr), dtype=bool)
    rows = sorted(texts)
    mask[rows] = True
    values = [texts[r] for r in rows]
    try:
        return pc.replace_with_mask(arr, pa.array(mask), pa.array(values).cast(arr.type))
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):  # string_view, dictionary, ...
        plain = arr.to_pylist()
        for r in rows:
            plain[r] = texts[r] if not isinstance(plain[r], bytes) else texts[r].encode("utf-8")
        try:
            return pa.array(plain).cast(arr.type)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
            return pa.array(plain)


class _Adapter(ABC):
    """One kind of table: read its columns, build the result of the same kind."""

    kind: str = ""
    rename: str = ""

    def __init__(self, data: Any) -> None:
        self.data = data

    @abstractmethod
    def columns(self) -> list[Any]: ...

    @abstractmethod
    def num_rows(self) -> int: ...

    @abstractmethod
    def values(self, column: str) -> list[Any]:
        """The column's values as Python objects, ``None`` for a missing value."""

    @abstractmethod
    def build(self, dec: Decisions, text: str, id_col: str | None, keep_removed: bool, cut: bool) -> Any: ...

    def check_text_type(self, column: str) -> None:
        """Refuse a column whose type cannot hold text (numbers, dates, ...); rows are checked one by one."""
        return None

    def where(self, row: int) -> str:
        """A row, named in an error message."""
        return f"row {row}"

    def check_ids(self, column: str) -> None:
        """Ids refer to rows: each row needs one, and no two rows the same."""
        seen: dict[Any, int] = {}
        for i, value in enumerate(self.values(column)):
            if value is None or (isinstance(value, float) and value != value):
                raise FrameError(f"row {i} has no id in the id column {column!r}: every row needs one, since "
                                 "duplicate_of and cluster_id name rows by their id. Fill it, or pass "
                                 "id_column=None and rename the column so that rows are named by position.")
            try:
                j = seen.setdefault(value, i)
            except TypeError:
                raise FrameError(f"row {i} has an id of type {type(value).__name__} in the id column {column!r}, "
                                 "expected a string or a number. Pass a column of scalar ids as id_column.") from None
            if j != i:
                raise FrameError(f"rows {j} and {i} have the same id {value!r} in the id column {column!r}; ids must "
                                 "be unique. Fix the ids, or pass another id_column (rows are named by position "
                                 "when the data has no id column).")


class _Records(_Adapter):
    kind = "list of dicts"
    rename = "rename the key in every dict"

    def __init__(self, data: list[Any]) -> None:
        super().__init__(data)
        for i, r in enumerate(data):
            if not isinstance(r, Mapping):
                hint = (" For a list of strings use semhash_llm.deduplicate(texts)." if isinstance(r, str) else "")
                raise FrameError(f"item {i} of the list is a {type(r).__name__}, expected a dict (one record with "
                                 f"a text field).{hint}")

    def columns(self) -> list[Any]:
        keys: dict[Any, None] = {}
        for r in self.data:
            keys.update(dict.fromkeys(r))
        return list(keys)

    def num_rows(self) -> int:
        return len(self.data)

    def values(self, column: str) -> list[Any]:
        return [r.get(column) for r in self.data]

    def build(self, dec: Decisions, text: str, id_col: str | None, keep_removed: bool, cut: bool) -> list[Any]:
        cols = dec.python(self.values(id_col) if id_col is not None else None)
        out: list[dict[str, Any]] = []
        for i, r in enumerate(self.data):
            if not keep_removed and not dec.keep[i]:
                continue
            row = {**r, **{name: cols[name][i] for name in DECISION_COLUMNS}}
            if cut and i in dec.cut_texts:
                row[text] = dec.cut_texts[i]
            out.append(row)
        return out


class _Arrow(_Adapter):
    kind = "pyarrow Table"
    rename = "table.rename_columns({...})"

    def columns(self) -> list[Any]:
        return list(self.data.column_names)

    def num_rows(self) -> int:
        return int(self.data.num_rows)

    def column(self, name: str) -> pa.ChunkedArray:
        return self.data.column(name)

    def values(self, column: str) -> list[Any]:
        return self.column(column).to_pylist()

    def check_text_type(self, column: str) -> None:
        t = self.column(column).type
        if not _is_text_type(t):
            raise FrameError(f"the text column {column!r} has type {t}, expected strings. Pass the column that "
                             f"holds the text as text_column=, or cast this one to strings first.")

    def check_ids(self, column: str) -> None:
        col = self.column(column)
        if col.null_count == 0 and pc.count_distinct(col).as_py() == len(col):
            return
        super().check_ids(column)

    def build(self, dec: Decisions, text: str, id_col: str | None, keep_removed: bool, cut: bool) -> pa.Table:
        table: pa.Table = self.data
        if cut and dec.cut_texts:
            i = table.schema.get_field_index(text)
            table = table.set_column(i, table.schema.field(i), _replace_rows(table.column(i), dec.cut_texts))
        decisions = dec.arrow(self.column(id_col) if id_col is not None else None)
        for name in DECISION_COLUMNS:
            table = table.append_column(name, decisions.column(name))
        return table if keep_removed else table.filter(pa.array(dec.keep))


class _Polars(_Arrow):
    kind = "polars DataFrame"
    rename = "df.rename({...})"

    def columns(self) -> list[Any]:
        return list(self.data.columns)

    def num_rows(self) -> int:
        return int(self.data.height)

    def column(self, name: str) -> pa.ChunkedArray:
        arr = self.data.get_column(name).to_arrow()
        return arr if isinstance(arr, pa.ChunkedArray) else pa.chunked_array([arr], type=arr.type)

    def values(self, column: str) -> list[Any]:
        return list(self.data.get_column(column).to_list())

    def build(self, dec: Decisions, text: str, id_col: str | None, keep_removed: bool, cut: bool) -> Any:
        import polars as pl

        df = self.data
        if cut and dec.cut_texts:
            dtype = df.schema[text]
            new = pl.Series(text, _replace_rows(self.column(text), dec.cut_texts)).cast(dtype)
            df = df.with_columns(new)
        decisions = pl.from_arrow(dec.arrow(self.column(id_col) if id_col is not None else None))
        out = pl.concat([df, decisions], how="horizontal")
        return out if keep_removed else out.filter(pl.Series(dec.keep))


class _Datasets(_Arrow):
    kind = "datasets.Dataset"
    rename = "dataset.rename_column(old, new)"

    def __init__(self, data: Any) -> None:
        super().__init__(data)
        self._tables: dict[str, pa.ChunkedArray] = {}

    def columns(self) -> list[Any]:
        return list(self.data.column_names)

    def num_rows(self) -> int:
        return int(self.data.num_rows)

    def column(self, name: str) -> pa.ChunkedArray:
        # In row order (a shuffled or selected dataset reads through its indices mapping); not formatted.
        if name not in self._tables:
            self._tables[name] = self.data.select_columns([name]).with_format("arrow")[:].column(0)
        return self._tables[name]

    def build(self, dec: Decisions, text: str, id_col: str | None, keep_removed: bool, cut: bool) -> Any:
        import datasets

        ds = self.data
        decisions = datasets.Dataset(dec.arrow(self.column(id_col) if id_col is not None else None))
        if cut and dec.cut_texts:
            order = list(ds.column_names)
            new = datasets.Dataset(pa.table({text: _replace_rows(self.column(text), dec.cut_texts)}))
            ds = datasets.concatenate_datasets([ds.remove_columns([text]), new], axis=1).select_columns(order)
        if ds.num_rows == 0:  # concatenate_datasets drops an empty dataset's columns
            for name in DECISION_COLUMNS:
                ds = ds.add_column(name, decisions.data.column(name), feature=decisions.features[name])
            return ds
        out = datasets.concatenate_datasets([ds, decisions], axis=1)
        return out if keep_removed else out.select(np.flatnonzero(dec.keep))


class _Pandas(_Adapter):
    kind = "pandas DataFrame"
    rename = "df.rename(columns={...})"

    def columns(self) -> list[Any]:
        return list(self.data.columns)

    def num_rows(self) -> int:
        return len(self.data)

    def series(self, column: str) -> Any:
        s = self.data[column]
        if s.ndim != 1:
            raise FrameError(f"the DataFrame has more than one column named {column!r}; give each column its own "
                             "name (df.columns = [...]) first.")
        return s

    def where(self, row: int) -> str:
        return f"row {row} (index {self.data.index[row]!r})"

    def values(self, column: str) -> list[Any]:
        s = self.series(column)
        return list(s.astype(object).where(s.notna(), None).tolist())

    def check_text_type(self, column: str) -> None:
        from pandas.api import types

        s = self.series(column)
        if types.is_numeric_dtype(s.dtype) or types.is_datetime64_any_dtype(s.dtype) or \
                types.is_timedelta64_dtype(s.dtype):
            raise FrameError(f"the text column {column!r} has dtype {s.dtype}, expected strings. Pass the column "
                             f"that holds the text as text_column=, or convert this one with .astype(str) first.")

    def build(self, dec: Decisions, text: str, id_col: str | None, keep_removed: bool, cut: bool) -> Any:
        import pandas as pd
        from pandas.api import types

        df = self.data
        frame = dec.table.to_pandas(types_mapper=lambda t: pd.Int64Dtype() if pa.types.is_int64(t) else None)
        new: dict[str, Any] = {name: frame[name].array for name in DECISION_COLUMNS}
        new["fragments"] = pd.array(dec.table.column("fragments").to_pylist(), dtype=object)
        if id_col is not None:
            cols = dec.python(self.values(id_col))
            dtype = self.series(id_col).dtype
            keep_dtype = types.is_string_dtype(dtype) and not types.is_object_dtype(dtype)
            for name in ("duplicate_of", "cluster_id"):  # ints with nulls: Int64; strings: the column's dtype
                new[name] = pd.array(cols[name], dtype=dtype if keep_dtype else None)
        if cut and dec.cut_texts:
            col = self.series(text).copy()
            rows = sorted(dec.cut_texts)
            col.iloc[rows] = [dec.cut_texts[r] for r in rows]
            new[text] = col.array
        out = df.assign(**new)
        return out if keep_removed else out.iloc[np.flatnonzero(dec.keep)]


def _roots(data: Any) -> set[tuple[str, str]]:
    return {(c.__module__.split(".")[0], c.__name__) for c in type(data).__mro__}


def _adapter(data: Any) -> _Adapter:
    if isinstance(data, list):
        return _Records(data)
    if isinstance(data, pa.Table):
        return _Arrow(data)
    roots = _roots(data)
    if ("pandas", "DataFrame") in roots:
        return _Pandas(data)
    if ("polars", "DataFrame") in roots:
        return _Polars(data)
    if ("datasets", "Dataset") in roots:
        return _Datasets(data)
    hints = {
        ("polars", "LazyFrame"): " Collect it first: deduplicate_frame(lf.collect()).",
        ("datasets", "DatasetDict"): " Pass one split, e.g. deduplicate_frame(dsd['train']).",
        ("datasets", "IterableDataset"): " Load it as a Dataset (streaming=False), or run `semhash-llm dedup` on "
                                         "its files.",
        ("pandas", "Series"): " Pass a DataFrame: deduplicate_frame(series.to_frame('text')).",
        ("pyarrow", "RecordBatch"): " Pass a Table: pa.Table.from_batches([batch]).",
    }
    hint = next((h for key, h in hints.items() if key in roots), "")
    if not hint and hasattr(data, "__iter__"):
        hint = " For an iterable of records or strings use semhash_llm.deduplicate(records)."
    raise TypeError(f"deduplicate_frame takes a list of dicts, a pandas or polars DataFrame, a pyarrow Table or a "
                    f"datasets.Dataset; got a {type(data).__module__}.{type(data).__name__}.{hint}")


def _column_arg(name: str, value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise TypeError(f"{name} must be a non-empty string (a column name) or None, got {value!r}.")


# ---------------------------------------------------------------------------------------------- the API
def deduplicate_frame(
    data: T,
    *,
    text_column: str | None = None,
    id_column: str | None = None,
    config: PipelineConfig | None = None,
    progress: ProgressCallback | None = None,
    keep_removed: bool = True,
    cut_fragments: bool = True,
) -> T:
    """Deduplicate a table held in memory and return a table of the same type with the decisions.

    ``data``: a list of dicts, a pandas or polars ``DataFrame``, a pyarrow ``Table`` or a
    ``datasets.Dataset``. The result has every input column and row, in input order, plus
    :data:`DECISION_COLUMNS` as in ``documents.parquet``: ``action`` (``keep``/``remove``),
    ``duplicate_of`` and ``cluster_id`` (the kept row of the cluster, by its id), ``relation``,
    ``score``, ``decided_by``, ``fragments`` (spans cut from a kept row's original text) and
    ``skip_reason``. An input column with one of these names is refused: rename it first.

    * ``text_column``: the column with the text (default: ``config.reader.text_field``, ``"text"``).
    * ``id_column``: the column naming rows (default: ``config.reader.id_field`` if the data has
      it). Its values must be unique; ``duplicate_of``/``cluster_id`` then hold them, with the
      column's type. Without an id column they hold 0-based row positions (for pandas: positions
      for ``.iloc``, not index labels).
    * ``config``: the cascade's settings (default: the full cascade); its reader settings
      (``on_error``, ``max_doc_chars``) apply, and with ``select.keep='priority'`` the column
      ``select.priority_field`` ranks the copies.
    * ``keep_removed``: ``True`` returns every row; ``False`` only the kept rows (the
      deduplicated data set, like ``kept.parquet``).
    * ``cut_fragments``: a kept row that lost viral fragments gets its text without them (as
      ``kept.parquet`` and :attr:`DedupResult.selected`); ``False`` leaves every text as given.

    Raises :class:`FrameError` for a missing column, a text column that is not text, a bad row
    (no text, empty, too long; unless ``reader.on_error='skip'``), missing or repeated ids and a
    column name clash; :class:`TypeError` for an unsupported ``data`` type.
    """
    _column_arg("text_column", text_column)
    _column_arg("id_column", id_column)
    for name, flag in (("keep_removed", keep_removed), ("cut_fragments", cut_fragments)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool (True or False), got {flag!r}.")
    cfg = config if config is not None else PipelineConfig()
    if not isinstance(cfg, PipelineConfig):
        raise TypeError(f"config must be a PipelineConfig or None, got a {type(cfg).__name__}. Build one with "
                        "PipelineConfig.from_dict({...}) or PipelineConfig.from_toml(path).")
    frame = _adapter(data)
    if isinstance(frame, _Records) and frame.num_rows() == 0:
        return cast(T, [])
    columns = frame.columns()
    text = text_column or cfg.reader.text_field
    shown = ", ".join(repr(c) for c in columns[:20]) + (", ..." if len(columns) > 20 else "")
    if text not in columns:
        origin = "text_column" if text_column else "reader.text_field of the config (pass text_column= to change it)"
        raise FrameError(f"the {frame.kind} has no column {text!r} (the text column, from {origin}). Its columns: "
                         f"{shown or 'none'}. Pass text_column= naming the column that holds the text.")
    if id_column is not None and id_column not in columns:
        raise FrameError(f"the {frame.kind} has no column {id_column!r} (id_column). Its columns: {shown}. Pass an "
                         "existing column, or id_column=None to name rows by position.")
    id_col = id_column if id_column is not None else (cfg.reader.id_field if cfg.reader.id_field in columns else None)
    clash = [c for c in DECISION_COLUMNS if c in columns]
    if clash:
        raise FrameError(f"the {frame.kind} already has a column named {clash[0]!r}, which deduplicate_frame would "
                         f"overwrite with its decision column of that name (it adds {', '.join(DECISION_COLUMNS)}). "
                         f"Rename it first ({frame.rename}), e.g. to {clash[0] + '_orig'!r}.")
    pf = cfg.select.priority_field if cfg.select.keep == "priority" else None
    if pf is not None and pf not in columns:
        raise FrameError(f"select.keep='priority' ranks copies by the column {pf!r} (select.priority_field), which "
                         f"the {frame.kind} lacks. Its columns: {shown}. Set priority_field to an existing numeric "
                         "column, or use keep='first' or 'longest'.")
    frame.check_text_type(text)
    if id_col is not None:
        frame.check_ids(id_col)
    dec = decide(frame.values(text), cfg, progress, priorities=frame.values(pf) if pf is not None else None,
                 text_name=text, where=frame.where, fix=_SKIP_FIX)
    return frame.build(dec, text, id_col, keep_removed, cut_fragments)  # type: ignore[no-any-return]
