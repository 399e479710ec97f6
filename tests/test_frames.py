"""deduplicate_frame: the same type back, one row per input row, with the decision columns."""

from __future__ import annotations

import random
from typing import Any, Callable

import pyarrow as pa
import pytest
from helpers import random_text

from semhash_llm import FrameError, PipelineConfig, deduplicate_frame
from semhash_llm.frames import DECISION_COLUMNS

# The lexical stages only: no model to load, so each call takes milliseconds once numba has compiled.
CHEAP = {"sph": {"enabled": False}, "verifier": {"enabled": False}, "aw": {"enabled": False},
         "passages": {"enabled": False}, "select": {"keep": "first"}}
CONFIG = PipelineConfig.from_dict(CHEAP)

SENTENCE = "The quick brown fox jumps over the lazy dog near the old river bank on a sunny afternoon."
ROWS: list[dict[str, Any]] = [
    {"id": "a", "text": SENTENCE, "lang": "en"},
    {"id": "b", "text": "Heavy rain is expected across the northern valleys this weekend, officials said today.",
     "lang": "en"},
    {"id": "c", "text": SENTENCE.upper().replace(" ", "  "), "lang": "en"},  # an exact copy of "a" once normalized
    {"id": "d", "text": "A completely different sentence about deduplicating pre-training data for language models.",
     "lang": "en"},
]


def _pandas(rows: list[dict[str, Any]]) -> Any:
    pd = pytest.importorskip("pandas")
    return pd.DataFrame(rows)


def _polars(rows: list[dict[str, Any]]) -> Any:
    pl = pytest.importorskip("polars")
    return pl.DataFrame(rows)


def _datasets(rows: list[dict[str, Any]]) -> Any:
    datasets = pytest.importorskip("datasets")
    return datasets.Dataset.from_list(rows)


def _arrow(rows: list[dict[str, Any]]) -> Any:
    return pa.Table.from_pylist(rows)


def _list(rows: list[dict[str, Any]]) -> Any:
    return [dict(r) for r in rows]


BUILDERS: dict[str, Callable[[list[dict[str, Any]]], Any]] = {
    "list": _list, "pandas": _pandas, "polars": _polars, "pyarrow": _arrow, "datasets": _datasets,
}


def _type_name(obj: Any) -> str:
    return f"{type(obj).__module__.split('.')[0]}.{type(obj).__name__}"


def _rows(obj: Any) -> list[dict[str, Any]]:
    """Any result back to a list of dicts (pandas missing values as None)."""
    if isinstance(obj, list):
        return obj
    if isinstance(obj, pa.Table):
        return obj.to_pylist()
    mod = type(obj).__module__.split(".")[0]
    if mod == "pandas":
        return [{k: (None if _isna(v) else v) for k, v in r.items()} for r in obj.astype(object).to_dict("records")]
    if mod == "polars":
        return list(obj.to_dicts())
    if mod == "datasets":
        return list(obj.to_list())
    raise AssertionError(type(obj))


def _isna(v: Any) -> bool:
    import pandas as pd

    return not isinstance(v, (list, tuple)) and not hasattr(v, "__len__") and bool(pd.isna(v))


def _columns(obj: Any) -> list[str]:
    if isinstance(obj, list):
        return list(obj[0]) if obj else []
    if isinstance(obj, pa.Table):
        return list(obj.column_names)
    return [str(c) for c in (obj.column_names if hasattr(obj, "column_names") else obj.columns)]


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_same_type_back_with_the_decisions(kind: str) -> None:
    data = BUILDERS[kind](ROWS)
    out = deduplicate_frame(data, config=CONFIG)
    assert _type_name(out) == _type_name(data)
    assert _columns(out) == ["id", "text", "lang", *DECISION_COLUMNS]
    rows = _rows(out)
    assert len(rows) == len(ROWS)
    assert [r["id"] for r in rows] == ["a", "b", "c", "d"]
    assert [r["text"] for r in rows] == [r["text"] for r in ROWS]  # untouched, in input order
    assert [r["action"] for r in rows] == ["keep", "keep", "remove", "keep"]
    c = rows[2]
    assert (c["duplicate_of"], c["relation"], c["cluster_id"], c["decided_by"]) == ("a", "exact", "a", "bloom")
    assert c["score"] == pytest.approx(1.0)
    assert rows[0]["cluster_id"] == "a" and rows[0]["duplicate_of"] is None and rows[0]["relation"] is None
    assert rows[1]["cluster_id"] is None and rows[1]["score"] is None
    assert all(len(r["fragments"]) == 0 and r["skip_reason"] is None for r in rows)
    assert _rows(data) == ROWS and _columns(data) == ["id", "text", "lang"]  # the input is not modified


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_keep_removed_false_returns_the_kept_rows(kind: str) -> None:
    out = deduplicate_frame(BUILDERS[kind](ROWS), config=CONFIG, keep_removed=False)
    rows = _rows(out)
    assert [r["id"] for r in rows] == ["a", "b", "d"]
    assert {r["action"] for r in rows} == {"keep"}


@pytest.mark.parametrize("kind", ["list", "pandas", "pyarrow"])
def test_without_an_id_column_rows_are_named_by_position(kind: str) -> None:
    rows = [{"body": r["text"]} for r in ROWS]
    out = _rows(deduplicate_frame(BUILDERS[kind](rows), text_column="body", config=CONFIG))
    assert [r["duplicate_of"] for r in out] == [None, None, 0, None]
    assert [r["cluster_id"] for r in out] == [0, None, 0, None]


def test_id_column_keeps_its_type_and_reader_fields_apply() -> None:
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"doc": [10, 20, 30, 40], "content": [r["text"] for r in ROWS]}, index=[7, 7, 3, 1])
    cfg = CONFIG.with_overrides({"reader": {"text_field": "content", "id_field": "doc"}})
    out = deduplicate_frame(df, config=cfg)
    assert list(out.index) == [7, 7, 3, 1]  # the index is kept, duplicates and all
    assert str(out["duplicate_of"].dtype) == "Int64"
    assert out["duplicate_of"].tolist()[2] == 10 and out["cluster_id"].tolist()[0] == 10
    # text_column/id_column override the config's reader fields
    out2 = deduplicate_frame(df.rename(columns={"content": "t"}), text_column="t", id_column="doc", config=cfg)
    assert out2["duplicate_of"].tolist()[2] == 10


def test_datasets_row_order_follows_an_indices_mapping() -> None:
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_list(ROWS).select([2, 0, 1, 3])  # c, a, b, d: c is now the first copy
    out = deduplicate_frame(ds, config=CONFIG)
    assert isinstance(out, datasets.Dataset)
    assert out["id"] == ["c", "a", "b", "d"]
    assert out["action"] == ["keep", "remove", "keep", "keep"]
    assert out["duplicate_of"][1] == "c"
    assert "action" in out.features and out.features["id"] == ds.features["id"]


def _viral_rows() -> list[dict[str, Any]]:
    rng = random.Random(0)
    viral = "Subscribe to our newsletter for the latest updates on every story we publish here."
    return [{"id": f"v{i}", "text": f"{random_text(rng, 30)}. {viral} {random_text(rng, 30)}."} for i in range(6)]


@pytest.mark.parametrize("kind", ["pyarrow", "pandas", "polars", "datasets"])
def test_kept_rows_lose_their_viral_fragments(kind: str) -> None:
    rows = _viral_rows()
    cfg = PipelineConfig.from_dict({**CHEAP, "passages": {"enabled": True}})
    out = _rows(deduplicate_frame(BUILDERS[kind](rows), config=cfg))
    assert [r["action"] for r in out] == ["keep"] * 6
    cut = [i for i, r in enumerate(out) if len(r["fragments"])]
    assert cut == [1, 2, 3, 4, 5]  # fragment_keep='first': the first host keeps it
    for i in cut:
        start, end = (int(x) for x in out[i]["fragments"][0])
        original = rows[i]["text"]
        assert "Subscribe to our newsletter" in original[start:end]
        assert out[i]["text"] == original[:start] + original[end:]
    assert out[0]["text"] == rows[0]["text"]
    whole = _rows(deduplicate_frame(BUILDERS[kind](rows), config=cfg, cut_fragments=False))
    assert [r["text"] for r in whole] == [r["text"] for r in rows]
    assert [len(r["fragments"]) > 0 for r in whole] == [i in cut for i in range(6)]


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_missing_text_column_is_refused(kind: str) -> None:
    rows = [{"id": r["id"], "body": r["text"]} for r in ROWS]
    with pytest.raises(FrameError, match=r"no column 'text'.*'body'.*text_column="):
        deduplicate_frame(BUILDERS[kind](rows), config=CONFIG)
    with pytest.raises(FrameError, match=r"no column 'nope' \(id_column\)"):
        deduplicate_frame(BUILDERS[kind](rows), text_column="body", id_column="nope", config=CONFIG)


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_column_collision_is_refused(kind: str) -> None:
    rows = [{**r, "score": 0.5} for r in ROWS]
    with pytest.raises(FrameError, match=r"already has a column named 'score'.*Rename it first"):
        deduplicate_frame(BUILDERS[kind](rows), config=CONFIG)


@pytest.mark.parametrize("kind", ["pyarrow", "pandas", "polars", "datasets"])
def test_a_text_column_that_is_not_text_is_refused(kind: str) -> None:
    rows = [{"id": r["id"], "text": i} for i, r in enumerate(ROWS)]
    with pytest.raises(FrameError, match=r"text column 'text' has (type|dtype) int64, expected strings"):
        deduplicate_frame(BUILDERS[kind](rows), config=CONFIG)


def test_bad_rows_raise_or_are_skipped() -> None:
    rows = [*ROWS[:2], {"id": "x", "text": 42}, {"id": "y"}]
    with pytest.raises(FrameError, match=r"row 2: 'text' is a int, expected a string; .*on_error"):
        deduplicate_frame(rows, config=CONFIG)
    skip = CONFIG.with_overrides({"reader": {"on_error": "skip"}})
    out = deduplicate_frame(rows, config=skip)
    assert [(r["action"], r["relation"]) for r in out] == [("keep", None)] * 2 + [("remove", "skipped")] * 2
    assert "null or missing" in out[3]["skip_reason"]
    with pytest.raises(FrameError, match=r"item 1 of the list is a str.*semhash_llm.deduplicate"):
        deduplicate_frame([ROWS[0], "text"], config=CONFIG)


def test_ids_must_be_unique_and_present() -> None:
    with pytest.raises(FrameError, match=r"rows 0 and 1 have the same id 'a'.*unique"):
        deduplicate_frame(pa.Table.from_pylist([{**r, "id": "a"} for r in ROWS]), config=CONFIG)
    with pytest.raises(FrameError, match=r"row 1 has no id in the id column 'id'"):
        deduplicate_frame([{**r, "id": None if i == 1 else r["id"]} for i, r in enumerate(ROWS)], config=CONFIG)


def test_unsupported_inputs_say_what_to_pass() -> None:
    with pytest.raises(TypeError, match=r"takes a list of dicts.*got a builtins.tuple.*semhash_llm.deduplicate"):
        deduplicate_frame(tuple(ROWS), config=CONFIG)
    pl = pytest.importorskip("polars")
    with pytest.raises(TypeError, match=r"lf.collect\(\)"):
        deduplicate_frame(pl.DataFrame(ROWS).lazy(), config=CONFIG)
    with pytest.raises(TypeError, match=r"text_column must be a non-empty string"):
        deduplicate_frame(ROWS, text_column="", config=CONFIG)
    with pytest.raises(TypeError, match=r"keep_removed must be a bool"):
        deduplicate_frame(ROWS, keep_removed="no", config=CONFIG)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"config must be a PipelineConfig"):
        deduplicate_frame(ROWS, config={"select": {"keep": "first"}})  # type: ignore[arg-type]


def test_priority_column_ranks_the_copies() -> None:
    rows = [{**r, "quality": q} for r, q in zip(ROWS, [0.1, 0.5, 0.9, 0.2])]
    cfg = PipelineConfig.from_dict({**CHEAP, "select": {"keep": "priority", "priority_field": "quality"}})
    out = deduplicate_frame(pa.Table.from_pylist(rows), config=cfg)
    assert out.column("action").to_pylist() == ["remove", "keep", "keep", "keep"]
    assert out.column("duplicate_of").to_pylist()[0] == "c"
    bad = PipelineConfig.from_dict({**CHEAP, "select": {"keep": "priority", "priority_field": "stars"}})
    with pytest.raises(FrameError, match=r"column 'stars' \(select.priority_field\)"):
        deduplicate_frame(rows, config=bad)


@pytest.mark.parametrize("kind", ["pyarrow", "pandas", "polars", "datasets"])
def test_empty_tables_get_the_decision_columns(kind: str) -> None:
    empty = pa.table({"text": pa.array([], pa.string())})
    data = {"pyarrow": lambda: empty, "pandas": lambda: empty.to_pandas(),
            "polars": lambda: pytest.importorskip("polars").from_arrow(empty),
            "datasets": lambda: pytest.importorskip("datasets").Dataset(empty)}[kind]()
    out = deduplicate_frame(data, config=CONFIG)
    assert _type_name(out) == _type_name(data)
    assert _rows(out) == [] and _columns(out) == ["text", *DECISION_COLUMNS]
    assert deduplicate_frame([], config=CONFIG) == []
