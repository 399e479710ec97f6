"""The cascade: stream → stages decide → cover check and selection → fragments → the decisions.

:class:`Cascade` strings together the steps of :mod:`semhash_llm.pipeline`:

1. :func:`~semhash_llm.pipeline.stream.stream` reads the :class:`~semhash_llm.io.sources.Source`
   in batches and hands each to every configured stage's ``process`` (features);
2. :func:`~semhash_llm.pipeline.decide.decide` has every stage decide, in order, into one
   union-find (each decision a checkpoint step);
3. :func:`~semhash_llm.pipeline.select.select` runs the cover check (each stage's ``covers``)
   and picks the survivors;
4. :func:`~semhash_llm.pipeline.fragments.settle_fragments` decides the cuts of repeated
   passages now that the kept documents are known.

The stages are the registered ones (:mod:`semhash_llm.pipeline.registry`), each behind the one
protocol of :mod:`semhash_llm.stages.base`. Per document the cascade keeps only fixed-size
state (length, location, status; the stages their digests, signatures, codes); texts live only
as long as their batch. Every stage's funnel row (documents and pairs in and out, stream and
decide time, peak memory) is recorded the same way and forms the funnel of ``report.json``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from semhash_llm.config import PipelineConfig
from semhash_llm.engine import Engine, make_engine
from semhash_llm.fingerprint import run_fingerprint
from semhash_llm.io.readers import InputError
from semhash_llm.io.sources import Source
from semhash_llm.pipeline.capabilities import capabilities_of
from semhash_llm.pipeline.checkpoints import Checkpoints, features_not_needed, input_fingerprint
from semhash_llm.pipeline.decide import decide
from semhash_llm.pipeline.fragments import held_by_survivor, settle_fragments
from semhash_llm.pipeline.funnel import StageStats, peak_rss_mb
from semhash_llm.pipeline.registry import STAGES, StageInfo, configured_stages, offloadable
from semhash_llm.pipeline.select import EDGE_KINDS, Selection, select
from semhash_llm.pipeline.stream import stream
from semhash_llm.sketch.unionfind import UnionFind
from semhash_llm.stages.base import DecideContext, DocStatus, Fragments, Stage, StreamBatch
from semhash_llm.storage.index import IndexPrefix
from semhash_llm.text.normalize import char_classes, normalize_batch
from semhash_llm.text.tokenize import tokenize_batch

__all__ = ["Cascade", "CascadeState", "ProgressCallback", "DocStatus", "STAGES", "StageInfo", "configured_stages",
           "StageStats", "peak_rss_mb"]

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[str, int, "int | None"], None]
"""``progress(stage, done, total)``: called as documents pass a stage (total may be None)."""


@dataclass
class CascadeState:
    """Everything the cascade decided, per document (index = input order)."""

    ids: pa.Array
    file_index: np.ndarray
    ordinal: np.ndarray
    status: np.ndarray
    lengths: np.ndarray
    skip_reasons: dict[int, str]
    selection: Selection
    fragments: Fragments
    funnel: list[StageStats]
    source_names: list[str]
    seconds: float
    pair_logs: dict[str, pa.Table] = field(default_factory=dict)
    """Per-pair records of stages that keep them (the judge: every pair it was referred), by stage name."""
    resumed_stages: list[str] = field(default_factory=list)
    """The steps reused from an interrupted run's checkpoints (empty on a fresh run)."""
    resume_note: str | None = None
    """Why an interrupted run's checkpoints were not used (changed input or config), if so."""
    checkpoints: Checkpoints | None = None
    contained: np.ndarray | None = None
    """Removed documents whose relation is ``contained_in`` although another stage linked them
    (their content is held by the survivor, which is clearly longer): see
    :func:`~semhash_llm.pipeline.fragments.held_by_survivor`."""
    visible_from: int = 0
    """The first document of this run's input: those before are an index's (``dedup --against``),
    in the clusters but not rows of the outputs."""
    visible_shards_from: int = 0
    """Likewise for the shards: those before are the index's segments."""

    @property
    def num_documents(self) -> int:
        """Documents of this run's input (an index's documents are not counted)."""
        return int(self.status.shape[0]) - self.visible_from

    @property
    def visible(self) -> np.ndarray:
        """True for the documents of this run's input."""
        return np.arange(self.status.shape[0]) >= self.visible_from

    def documents_table(self) -> pa.Table:
        """The ``documents.parquet`` contract table (plus ``skip_reason``), in input order.

        Built column by column with Arrow kernels, without a Python object per document.
        """
        n = int(self.status.shape[0])
        sel = self.selection
        keeper = sel.keeper
        index = np.arange(n)
        skipped = self.status == DocStatus.SKIPPED
        removed = (keeper != index) | skipped
        in_cluster = sel.cluster_size > 1
        is_dup = in_cluster & (keeper != index)
        # Relation codes: the kind of the weakest accepted edge on the path to the survivor (so a
        # copy found by LSH with the exact stage off says lsh, not bloom), then "skipped".
        # A document held by its survivor says contained_in whichever stage linked it (decided_by
        # stays that stage): codes len(kinds) .. 2 len(kinds) - 1.
        kinds = sorted(EDGE_KINDS)
        names = ([EDGE_KINDS[k] for k in kinds] + [("contained_in", EDGE_KINDS[k][1]) for k in kinds]
                 + [("skipped", "reader")])
        code = np.searchsorted(np.asarray(kinds), np.maximum(sel.via_kind, kinds[0]))
        if self.contained is not None:
            code = np.where(self.contained, code + len(kinds), code)
        code[skipped] = len(names) - 1
        has_code = is_dup | skipped
        code_arr = pa.array(code.astype(np.int32), mask=~has_code)
        relation = pa.DictionaryArray.from_arrays(code_arr, pa.array([r for r, _ in names])).cast(pa.string())
        decided = pa.DictionaryArray.from_arrays(code_arr, pa.array([d for _, d in names])).cast(pa.string())
        score = sel.via_score
        keeper_ids = self.ids.take(pa.array(keeper))
        null_str = pa.nulls(n, pa.string())
        action = pa.DictionaryArray.from_arrays(pa.array(removed.astype(np.int8)),
                                                pa.array(["keep", "remove"])).cast(pa.string())
        reasons: list[str | None] = [None] * n
        for i, reason in self.skip_reasons.items():
            reasons[i] = reason
        table = pa.table(
            {
                "id": self.ids,
                "action": action,
                "duplicate_of": pc.if_else(pa.array(is_dup), keeper_ids, null_str),
                "relation": relation,
                "cluster_id": pc.if_else(pa.array(in_cluster), keeper_ids, null_str),
                "score": pa.array(score, pa.float64(), mask=~is_dup),
                "decided_by": decided,
                "fragments": self._fragments_column(),
                "skip_reason": pa.array(reasons, pa.string()),
            }
        )
        return table.slice(self.visible_from) if self.visible_from else table

    def _fragments_column(self) -> pa.Array:
        """``fragments``: a list of ``[start, end]`` spans per document (empty for most)."""
        n = int(self.status.shape[0])
        fr = self.fragments
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(np.bincount(fr.doc, minlength=n), out=offsets[1:])
        spans = pa.FixedSizeListArray.from_arrays(pa.array(np.stack([fr.start, fr.end], axis=1).reshape(-1)
                                                           if len(fr) else np.empty(0, np.int64)), 2)
        return pa.ListArray.from_arrays(pa.array(offsets), spans.cast(pa.list_(pa.int64(), 2)))

    def cuts(self) -> dict[int, list[tuple[int, int]]]:
        """Document index → the spans cut from its kept text."""
        out: dict[int, list[tuple[int, int]]] = {}
        for d, a, b in zip(self.fragments.doc.tolist(), self.fragments.start.tolist(), self.fragments.end.tolist()):
            if d >= self.visible_from:
                out.setdefault(d, []).append((a, b))
        return out

    def kept_mask(self) -> np.ndarray:
        """True for documents that are written to the kept output."""
        n = int(self.status.shape[0])
        return (self.selection.keeper == np.arange(n)) & (self.status != DocStatus.SKIPPED) & self.visible


class Cascade:
    """Runs the configured stages over a source: a loop over :class:`~semhash_llm.stages.base.Stage` objects."""

    def __init__(self, config: PipelineConfig, progress: ProgressCallback | None = None,
                 checkpoint_dir: str | Path | None = None, prefix: IndexPrefix | None = None) -> None:
        self.config = config
        self.prefix = prefix
        """The documents of an index that come first in the source (``dedup --against``): their
        stored features are used, they survive their clusters, and they are not this run's rows."""
        self.progress = progress
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
        """Where each step's output is kept so that an interrupted run resumes (``None``: not kept)."""

    def _tick(self, stage: str, done: int, total: int | None = None) -> None:
        if self.progress is not None:
            self.progress(stage, done, total)

    def run(self, source: Source) -> CascadeState:
        """Stream ``source`` through the configured stages, let them decide, select the survivors."""
        stages = configured_stages(self.config)
        ck = self._checkpoints(source)
        skip = features_not_needed(stages, ck)
        if skip:
            logger.info("resuming: the features of %s are not computed again (their decisions are kept and no "
                        "step still to run reads them)", ", ".join(sorted(skip)))
        offload = offloadable(stages, skip)
        engine = make_engine(self.config, offload)
        try:
            return self._run(source, stages, engine, offload, ck, skip)
        finally:
            if engine is not None:
                engine.close()

    def _run(self, source: Source, stages: list[Stage], engine: Engine | None, offload: tuple[str, ...],
             ck: Checkpoints | None, skip: frozenset[str]) -> CascadeState:
        cfg = self.config
        t_start = time.perf_counter()
        prefix = self.prefix
        got = stream(source, stages, [st for st in stages if st.name not in skip], cfg, engine, offload, prefix,
                     self._tick)
        if skip:
            got.read.details["features_reused_from_checkpoints"] = sorted(skip)
        n = got.num_docs
        classes = char_classes(cfg.normalize.strip_punctuation)

        def read_texts(docs: np.ndarray) -> list[str]:
            index, texts = self._read_texts(source, docs, got.file_index, got.ordinal,
                                            "check candidate pairs on their text")
            pos = {d: k for k, d in enumerate(index.tolist())}
            return [texts[pos[d]] for d in np.asarray(docs, dtype=np.int64).tolist()]

        def refeature(later: Sequence[Stage], docs: np.ndarray) -> int:
            return self._refeature(source, [st for st in later if st.name not in skip], docs, got.file_index,
                                   got.ordinal, got.status, classes)

        ctx = DecideContext(n, got.status, UnionFind(n), {st.name: st for st in stages}, read_texts, self._tick)
        decided = decide(stages, ctx, ck, got.stream_seconds, refeature, self._tick)

        t4 = time.perf_counter()
        pinned = np.arange(n) < prefix.documents if prefix is not None else None
        chosen = select(stages, decided.edges, ctx.union_find, decided.children, got.lengths, got.priorities, cfg,
                        read_texts, pinned, ck, len(stages) + 1)
        selection = chosen.selection
        resumed = [*decided.resumed, *(["select"] if chosen.resumed else [])]
        fragments = settle_fragments(decided.candidates, decided.fragments, selection, got.lengths, cfg, read_texts,
                                     decided.rows)
        contained = held_by_survivor(selection, got.lengths, cfg, read_texts if n else None)
        st_select = StageStats("select", docs_in=n)
        removed = int(np.count_nonzero(selection.keeper != np.arange(n)))
        st_select.docs_removed = removed
        st_select.docs_out = n - removed - len(got.skip_reasons)
        st_select.seconds = time.perf_counter() - t4
        st_select.peak_rss_mb = peak_rss_mb()
        st_select.details = {"clusters": int(np.count_nonzero((selection.cluster_size > 1) &
                                                              (selection.keeper == np.arange(n)))),
                             "keep_policy": cfg.select.keep}
        if cfg.select.cover_check:
            st_select.details["cover_check_reclustered"] = chosen.reclustered
            st_select.details.update(chosen.cover_details)
        _check_unique_ids(got.ids, got.file_index, got.ordinal, source)
        pair_logs = {st.name: _pair_table(st.pair_log(), got.ids) for st in stages  # type: ignore[attr-defined]
                     if capabilities_of(st).logs_pairs}
        funnel = [got.read, *(decided.rows[st.name] for st in stages), st_select]
        return CascadeState(
            ids=got.ids, file_index=got.file_index.copy(), ordinal=got.ordinal.copy(), status=got.status.copy(),
            lengths=got.lengths.copy(), skip_reasons=got.skip_reasons, selection=selection, fragments=fragments,
            contained=contained, funnel=funnel, source_names=list(source.names),
            seconds=time.perf_counter() - t_start, pair_logs=pair_logs,
            visible_from=prefix.documents if prefix is not None else 0,
            visible_shards_from=prefix.shards if prefix is not None else 0, resumed_stages=resumed,
            resume_note=ck.fresh_reason if ck is not None else None, checkpoints=ck,
        )

    def _checkpoints(self, source: Source) -> Checkpoints | None:
        """This run's checkpoints (opened: another input's or config's removed), or ``None``."""
        if self.checkpoint_dir is None:
            return None
        fingerprint = input_fingerprint(source)
        if fingerprint is None:
            return None
        # The settings, the package version and the weight files' contents: retrained weights
        # or an upgrade start afresh instead of resuming decisions made with other weights.
        ck = Checkpoints(self.checkpoint_dir, fingerprint, run_fingerprint(self.config))
        found = ck.open()
        if found:
            logger.info("resuming: %d completed step(s) found in %s: %s", len(found), self.checkpoint_dir,
                        ", ".join(found))
        return ck

    def _refeature(self, source: Source, stages: Sequence[Stage], docs: np.ndarray, file_index: np.ndarray,
                   ordinal: np.ndarray, status: np.ndarray, classes: np.ndarray) -> int:
        """Re-read ``docs`` from the source and let ``stages`` compute their features; the count."""
        if not stages:
            return 0
        index, texts = self._read_texts(source, docs, file_index, ordinal, "repair Bloom false positives")
        normalized = normalize_batch(texts, self.config.normalize)
        tb = tokenize_batch(normalized, classes, self.config.shingle)
        st = status[index].copy()
        batch = StreamBatch(index, texts, tb, st, st == DocStatus.OK, normalized)
        for stage in stages:
            stage.process(batch)
        return int(index.size)

    def _read_texts(self, source: Source, docs: np.ndarray, file_index: np.ndarray, ordinal: np.ndarray,
                    why: str) -> tuple[np.ndarray, list[str]]:
        """Re-read the texts of ``docs`` (distinct global indices) from the source: (sorted indices, texts)."""
        logger.info("re-reading %d document(s) to %s", docs.size, why)
        wanted: dict[int, dict[int, int]] = {}
        for d in np.unique(np.asarray(docs, dtype=np.int64)).tolist():
            wanted.setdefault(int(file_index[d]), {})[int(ordinal[d])] = d
        got_docs: list[int] = []
        got_texts: list[str] = []
        text_field = self.config.reader.text_field
        for fi, by_ord in wanted.items():
            found = 0
            for ordv, rec in source.records(fi, by_ord.keys()):
                d = by_ord.get(ordv)
                if d is None:
                    continue
                value = rec.get(text_field)
                got_docs.append(d)
                got_texts.append(value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else
                                 "" if value is None else str(value))
                found += 1
            if found != len(by_ord):
                raise InputError(source.names[fi], f"{len(by_ord) - found} record(s) read in the first pass were "
                                 f"missing when re-read to {why}; the file changed during the run. Run again "
                                 "on a file that does not change")
        order = np.argsort(np.asarray(got_docs, dtype=np.int64), kind="stable")
        index = np.asarray(got_docs, dtype=np.int64)[order]
        return index, [got_texts[k] for k in order.tolist()]


def _pair_table(log: dict[str, np.ndarray], ids: pa.Array) -> pa.Table:
    """A stage's per-pair record as a table: its global indices ``a``, ``b`` become ``id_a``, ``id_b``."""
    a = np.asarray(log.get("a", np.empty(0, np.int64)), dtype=np.int64)
    b = np.asarray(log.get("b", np.empty(0, np.int64)), dtype=np.int64)
    columns: dict[str, Any] = {"id_a": ids.take(pa.array(a)), "id_b": ids.take(pa.array(b))}
    for name, values in log.items():
        if name not in ("a", "b"):
            arr = np.asarray(values)
            columns[name] = pa.array(arr.tolist() if arr.dtype.kind in "OU" else arr)  # strings as Arrow strings
    return pa.table(columns)


def _check_unique_ids(ids: pa.Array, file_index: np.ndarray, ordinal: np.ndarray, source: Source) -> None:
    if len(ids) == pc.count_distinct(ids).as_py():
        return
    seen: dict[str, int] = {}
    for i, value in enumerate(ids.to_pylist()):
        if value in seen:
            j = seen[value]
            raise InputError(
                source.names[int(file_index[i])],
                f"duplicate id {value!r}; first seen in {source.names[int(file_index[j])]} at "
                f"{int(ordinal[j])}. Ids must be unique: fix the data or drop --id-field to derive ids "
                "from file and line",
                line=int(ordinal[i]),
            )
        seen[value] = i
