"""The cascade: read → normalize → stages (Bloom exact → MinHash LSH → AW-MinHash → SPH …) → cluster → select.

:class:`Cascade` streams a :class:`~semhash_llm.io.sources.Source` in batches and runs a loop
over the configured stages (:data:`STAGES`), each behind the one protocol of
:mod:`semhash_llm.stages.base`: ``process`` per streamed batch (features), ``decide`` after the
stream (accepted edges into one union-find). Per document the cascade keeps only fixed-size
state (length, location, status; the stages their digests, signatures, codes); texts live
only as long as their batch. Every stage's funnel row (documents and pairs in and out, stream
and decide time, peak memory) is recorded the same way and forms the funnel of ``report.json``.
"""

from __future__ import annotations

import logging
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from semhash_llm.checkpoint import Checkpoints, input_fingerprint, pack_handoff, unpack_handoff
from semhash_llm.config import PipelineConfig
from semhash_llm.engine import Engine, make_engine
from semhash_llm.faults import failpoint
from semhash_llm.fingerprint import run_fingerprint
from semhash_llm.io.readers import InputError, reason_category
from semhash_llm.io.sources import Source
from semhash_llm.pipeline.capabilities import capabilities_of
from semhash_llm.pipeline.registry import STAGES, StageInfo, configured_stages
from semhash_llm.select import EDGE_KINDS, CoverFn, Selection, refine_by_cover, select_survivors
from semhash_llm.sketch.unionfind import UnionFind
from semhash_llm.stages.aw import AW_EDGE_KIND, AWMinHashStage
from semhash_llm.stages.base import (
    ComputesFeatures,
    DecideContext,
    Decision,
    DocStatus,
    Edges,
    FragmentCandidates,
    Fragments,
    Stage,
    StreamBatch,
)
from semhash_llm.stages.exact import EXACT_EDGE_KIND
from semhash_llm.stages.lsh import LSH_EDGE_KIND, MinHashLSHStage
from semhash_llm.stages.mgfn import VERIFIED_EDGE_KIND, VerifierStage
from semhash_llm.stages.passages import CONTAINED_EDGE_KIND, resolve_fragments
from semhash_llm.stages.sph import SPH_EDGE_KIND, SPHStage
from semhash_llm.storage.index import IndexPrefix
from semhash_llm.text.normalize import char_classes, normalize_batch
from semhash_llm.text.tokenize import tokenize_batch

__all__ = ["Cascade", "CascadeState", "ProgressCallback", "DocStatus", "STAGES", "StageInfo", "configured_stages",
           "peak_rss_mb"]

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[str, int, "int | None"], None]
"""``progress(stage, done, total)``: called as documents pass a stage (total may be None)."""


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class _Growable:
    """An append-only numpy column grown by doubling."""

    def __init__(self, dtype: Any, capacity: int = 1 << 16) -> None:
        self.data = np.empty(capacity, dtype=dtype)
        self.size = 0

    def extend(self, values: np.ndarray) -> None:
        need = self.size + values.shape[0]
        if need > self.data.shape[0]:
            new = np.empty(max(need, 2 * self.data.shape[0]), dtype=self.data.dtype)
            new[: self.size] = self.data[: self.size]
            self.data = new
        self.data[self.size : need] = values
        self.size = need

    def view(self) -> np.ndarray:
        return self.data[: self.size]


@dataclass
class StageStats:
    """One row of the funnel."""

    name: str
    docs_in: int = 0
    docs_out: int = 0
    docs_removed: int = 0
    pairs_in: int = 0
    pairs_out: int = 0
    seconds: float = 0.0
    peak_rss_mb: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "stage": self.name,
            "docs_in": self.docs_in,
            "docs_out": self.docs_out,
            "docs_removed": self.docs_removed,
            "pairs_in": self.pairs_in,
            "pairs_out": self.pairs_out,
            "seconds": round(self.seconds, 4),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            **({"details": self.details} if self.details else {}),
        }


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
    (their content is held by the survivor, which is clearly longer): see :func:`held_by_survivor`."""
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
        skip = _features_not_needed(stages, ck)
        if skip:
            logger.info("resuming: the features of %s are not computed again (their decisions are kept and no "
                        "step still to run reads them)", ", ".join(sorted(skip)))
        offload = tuple(st.name for st in stages if isinstance(st, ComputesFeatures) and st.name not in skip)
        engine = make_engine(self.config, offload)
        try:
            return self._run(source, stages, engine, offload, ck, skip)
        finally:
            if engine is not None:
                engine.close()

    def _run(self, source: Source, stages: list[Stage], engine: Engine | None, offload: tuple[str, ...],
             ck: Checkpoints | None, skip: frozenset[str]) -> CascadeState:
        cfg = self.config
        streamed = [st for st in stages if st.name not in skip]
        t_start = time.perf_counter()
        classes = char_classes(cfg.normalize.strip_punctuation)
        rows = {st.name: StageStats(st.name) for st in stages}
        stream_seconds = dict.fromkeys(rows, 0.0)
        prio_field = cfg.select.priority_field if cfg.select.keep == "priority" else None

        id_chunks: list[pa.Array] = []
        file_index = _Growable(np.int32)
        ordinal = _Growable(np.int64)
        status = _Growable(np.uint8)
        lengths = _Growable(np.int64)
        prios = _Growable(np.float64)
        skip_reasons: dict[int, str] = {}
        read = StageStats("read")
        n = 0
        # With an engine, the stages from the first one it computes features for onward see each
        # batch once a window of batches has come back from it; the stages before (Bloom, which
        # claims documents) see it as it is read.
        prefix = self.prefix
        split = (next((i for i, st in enumerate(streamed) if st.name in offload), len(streamed))
                 if engine is not None or prefix is not None else len(streamed))
        window: list[StreamBatch] = []
        origin: list[tuple[int, np.ndarray]] = []  # (file index, ordinals) of each batch in the window

        def finish(pending: list[StreamBatch]) -> None:
            if prefix is not None:
                for held, (fi, ords) in zip(pending, origin):
                    if fi < prefix.shards:  # an indexed document: its stored features
                        prefix.precompute(held, fi, ords, offload)
            todo = [held for held in pending if held.precomputed is None]
            if engine is not None and todo:
                t1 = time.perf_counter()
                engine.featurize(todo)
                read.details["engine_seconds"] = read.details.get("engine_seconds", 0.0) + time.perf_counter() - t1
            origin.clear()
            for held in pending:
                for stage in streamed[split:]:
                    t1 = time.perf_counter()
                    stage.process(held)
                    stream_seconds[stage.name] += time.perf_counter() - t1
            pending.clear()

        for batch in source.batches(prio_field):
            t0 = time.perf_counter()
            size = len(batch)
            id_chunks.append(pa.array(batch.ids, pa.string()))
            file_index.extend(np.full(size, batch.file_index, dtype=np.int32))
            ordinal.extend(np.asarray(batch.ordinals, dtype=np.int64))
            prios.extend(np.asarray(batch.priorities, dtype=np.float64))
            texts = [t if t is not None else "" for t in batch.texts]
            st = np.zeros(size, dtype=np.uint8)
            for j, err in enumerate(batch.errors):
                if err is not None:
                    st[j] = DocStatus.SKIPPED
                    skip_reasons[n + j] = err
            lengths.extend(np.fromiter((len(t) for t in texts), dtype=np.int64, count=size))
            normalized = normalize_batch(texts, cfg.normalize)
            tb = tokenize_batch(normalized, classes, cfg.shingle)
            st[(tb.num_tokens == 0) & (st == DocStatus.OK)] = DocStatus.NO_TOKENS
            status.extend(st)
            read.seconds += time.perf_counter() - t0
            sb = StreamBatch(np.arange(n, n + size, dtype=np.int64), texts, tb, st, st == DocStatus.OK, normalized)
            for stage in streamed[:split]:
                t1 = time.perf_counter()
                stage.process(sb)
                stream_seconds[stage.name] += time.perf_counter() - t1
            window.append(sb)
            origin.append((batch.file_index, np.asarray(batch.ordinals, dtype=np.int64)))
            if engine is None or len(window) >= cfg.engine.window_batches:
                finish(window)
            n += size
            read.docs_in = n
            self._tick("read", n)
            failpoint("during", "read")
        finish(window)
        if engine is not None:
            read.details["engine"] = {"kind": cfg.engine.kind, "stages": list(offload),
                                      "engine_seconds": round(read.details.pop("engine_seconds", 0.0), 3)}
            shuffle = getattr(engine, "bucket_orders", None)
            for stage in stages:  # the LSH bucket shuffle runs on the engine too
                if callable(shuffle) and hasattr(stage, "bucketer"):
                    stage.bucketer = shuffle
                    read.details["engine"]["bucket_shuffle"] = [*read.details["engine"].get("bucket_shuffle", []),
                                                                stage.name]
        failpoint("after", "read")
        st_status = status.view()
        read.docs_out = int(np.count_nonzero(st_status == DocStatus.OK))
        read.docs_removed = len(skip_reasons)
        read.peak_rss_mb = peak_rss_mb()
        read.details = {
            **read.details,
            "skipped": len(skip_reasons),
            "skipped_by_reason": _reason_counts(skip_reasons),
            "no_tokens": int(np.count_nonzero(st_status == DocStatus.NO_TOKENS)),
            "files": len(source.names),
        }
        if skip:
            read.details["features_reused_from_checkpoints"] = sorted(skip)

        # ---- after the stream: every stage decides, in order, into one union-find
        def read_texts(docs: np.ndarray) -> list[str]:
            index, texts = self._read_texts(source, docs, file_index.view(), ordinal.view(),
                                            "check candidate pairs on their text")
            pos = {d: k for k, d in enumerate(index.tolist())}
            return [texts[pos[d]] for d in np.asarray(docs, dtype=np.int64).tolist()]

        ctx = DecideContext(n, st_status, UnionFind(n), {st.name: st for st in stages}, read_texts, self._tick)
        resumed: list[str] = []
        edge_parts: list[Edges] = []
        fragment_parts: list[Fragments] = []
        candidate_parts: list[tuple[str, FragmentCandidates]] = []
        children = np.zeros(n, dtype=np.bool_)
        for i, stage in enumerate(stages):
            t1 = time.perf_counter()
            if ck is not None and ck.has(i + 1, stage.name):
                decision, saved_seconds = _restore_decision(ck, i + 1, stage, ctx)
                stream_seconds[stage.name] = 0.0
                resumed.append(stage.name)
            else:
                failpoint("during", stage.name)
                decision = stage.decide(ctx)
                saved_seconds = None
                if ck is not None:
                    _save_decision(ck, i + 1, stage, decision, ctx,
                                   stream_seconds[stage.name] + time.perf_counter() - t1)
                failpoint("after", stage.name)
            if decision.refeature.size:
                # Documents this stage claimed wrongly (Bloom false positives): the later stages
                # compute their features now, from the source, before they decide.
                repaired = self._refeature(source, [st for st in stages[i + 1 :] if st.name not in skip],
                                           decision.refeature, file_index.view(),
                                           ordinal.view(), st_status, classes)
                decision.details["repaired_false_positives"] = repaired
            row = rows[stage.name]
            row.seconds = (stream_seconds[stage.name] + time.perf_counter() - t1 if saved_seconds is None
                           else saved_seconds)
            row.docs_in = decision.docs_in
            row.docs_removed = len(decision.edges)
            row.docs_out = row.docs_in - row.docs_removed
            row.pairs_in, row.pairs_out = decision.pairs_in, decision.pairs_out
            row.details = {"stream_seconds": round(stream_seconds[stage.name], 4), **decision.details}
            row.peak_rss_mb = peak_rss_mb()
            edge_parts.append(decision.edges)
            fragment_parts.append(decision.fragments)
            if len(decision.fragment_candidates):
                candidate_parts.append((stage.name, decision.fragment_candidates))
            children[decision.children] = True
            self._tick(stage.name, n, n)

        # ---- cluster and select
        t4 = time.perf_counter()
        select_step = len(stages) + 1
        pinned = np.arange(n) < prefix.documents if prefix is not None else None
        ver = next((st for st in stages if isinstance(st, VerifierStage)), None)
        if ck is not None and ck.has(select_step, "select"):
            arrays, meta = ck.load(select_step, "select")
            selection = Selection(arrays["keeper"], arrays["cluster_size"], arrays["via_kind"], arrays["via_score"])
            reclustered = int(meta["reclustered"])
            cover_counts = (int(meta["cover_pairs"]), int(meta["cover_accepted"]))
            resumed.append("select")
        else:
            failpoint("during", "select")
            edges = Edges.concat(edge_parts)
            roots = ctx.union_find.roots()
            reclustered = 0
            evidence: dict[int, tuple[int, float]] = {}
            if cfg.select.cover_check and len(edges):
                covers, evidence = _cover_fn({st.name: st for st in stages}, edges, n, cfg, read_texts,
                                             lengths.view())
                roots, kept_edges, reclustered = refine_by_cover(
                    roots, edges.a, edges.b, edges.score, edges.kind, lengths.view(), prios.view(), cfg.select,
                    children, covers, pinned)
                edges = Edges(edges.a[kept_edges], edges.b[kept_edges], edges.score[kept_edges],
                              edges.kind[kept_edges])
            selection = select_survivors(roots, edges.a, edges.b, edges.score, edges.kind, lengths.view(),
                                         prios.view(), cfg.select, children, pinned)
            # A removed document the cover check kept in its cluster although its own edges led to
            # members it split off has no path of edges to its survivor: label it by what covered it.
            direct = np.flatnonzero((selection.keeper != np.arange(n)) & (selection.via_kind < 0))
            for d in direct.tolist():
                found = evidence.get(d * n + int(selection.keeper[d]))
                if found is not None:
                    selection.via_kind[d], selection.via_score[d] = found
            cover_counts = (ver.cover_pairs_, ver.cover_accepted_) if ver is not None else (0, 0)
            if ck is not None:
                ck.save(select_step, "select", {"keeper": selection.keeper, "cluster_size": selection.cluster_size,
                                                "via_kind": selection.via_kind, "via_score": selection.via_score},
                        {"reclustered": reclustered, "cover_pairs": cover_counts[0],
                         "cover_accepted": cover_counts[1]})
            failpoint("after", "select")
        # Fragments are decided now that the kept documents are known: a repeated passage stays in
        # one kept host (never only in a removed one), and cuts apply to kept documents only.
        survivor = selection.keeper == np.arange(n)
        for name, cand in candidate_parts:
            resolved, counts = resolve_fragments(cand, survivor, lengths.view(), cfg.passages, read_texts)
            fragment_parts.append(resolved)
            rows[name].details.update(counts)
        contained = held_by_survivor(selection, lengths.view(), cfg, read_texts if n else None)
        fragments = Fragments.concat(fragment_parts)
        survives = survivor[fragments.doc]
        fragments = Fragments(fragments.doc[survives], fragments.start[survives], fragments.end[survives])
        st_select = StageStats("select", docs_in=n)
        removed = int(np.count_nonzero(selection.keeper != np.arange(n)))
        st_select.docs_removed = removed
        st_select.docs_out = n - removed - len(skip_reasons)
        st_select.seconds = time.perf_counter() - t4
        st_select.peak_rss_mb = peak_rss_mb()
        st_select.details = {"clusters": int(np.count_nonzero((selection.cluster_size > 1) &
                                                              (selection.keeper == np.arange(n)))),
                             "keep_policy": cfg.select.keep}
        if cfg.select.cover_check:
            st_select.details["cover_check_reclustered"] = reclustered
            if ver is not None:
                st_select.details["cover_check_pairs_verified"] = cover_counts[0]
                st_select.details["cover_check_pairs_verifier_accepted"] = cover_counts[1]
        ids = pa.concat_arrays(id_chunks) if id_chunks else pa.array([], pa.string())
        _check_unique_ids(ids, file_index.view(), ordinal.view(), source)
        pair_logs: dict[str, pa.Table] = {}
        for logged in stages:
            log = getattr(logged, "pair_log", None)
            if callable(log):
                pair_logs[logged.name] = _pair_table(log(), ids)
        funnel = [read, *(rows[st.name] for st in stages), st_select]
        return CascadeState(
            ids=ids, file_index=file_index.view().copy(), ordinal=ordinal.view().copy(), status=st_status.copy(),
            lengths=lengths.view().copy(), skip_reasons=skip_reasons, selection=selection, fragments=fragments,
            contained=contained,
            funnel=funnel, source_names=list(source.names), seconds=time.perf_counter() - t_start,
            pair_logs=pair_logs, visible_from=prefix.documents if prefix is not None else 0,
            visible_shards_from=prefix.shards if prefix is not None else 0, resumed_stages=resumed, resume_note=ck.fresh_reason if ck is not None else None,
            checkpoints=ck,
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


def _features_not_needed(stages: Sequence[Stage], ck: Checkpoints | None) -> frozenset[str]:
    """The stages whose streamed features a resumed run need not compute: their decision is
    kept, no step still to run reads them, and they claim no documents while streaming.

    Read from each stage's :class:`~semhash_llm.pipeline.capabilities.Capabilities`: a stage's
    decision reads its own features and those of the stages in its ``reads_features_of`` (a
    linking stage: the verifier's deferral and AW-MinHash's confirmation); until the selection is
    checkpointed, its cover check reads the stages that declare ``cover_evidence``. A stage
    that ``claims_documents`` (Bloom) always streams: the documents it claims are the ones the
    others do not see."""
    if ck is None:
        return frozenset()
    done = {st.name for i, st in enumerate(stages) if ck.has(i + 1, st.name)}
    if not done:
        return frozenset()
    needed: set[str] = set()
    for st in stages:
        if capabilities_of(st).claims_documents:
            needed.add(st.name)
        if st.name not in done:
            needed.add(st.name)
            needed.update(capabilities_of(st).reads_features_of)
    if not ck.has(len(stages) + 1, "select"):
        needed.update(st.name for st in stages if capabilities_of(st).cover_evidence)
    return frozenset(done - needed)


def _save_decision(ck: Checkpoints, order: int, stage: Stage, decision: Decision, ctx: DecideContext,
                   seconds: float) -> None:
    """Keep a stage's decision, the union-find after it and its hand-off state (one step)."""
    e, fr = decision.edges, decision.fragments
    arrays = {"edges_a": e.a, "edges_b": e.b, "edges_score": e.score, "edges_kind": e.kind,
              "refeature": decision.refeature, "children": decision.children, "fragments_doc": fr.doc,
              "fragments_start": fr.start, "fragments_end": fr.end, "union_find": ctx.union_find.parent_,
              **decision.fragment_candidates.to_arrays("fcand_")}
    handoff, scalars = pack_handoff(stage)
    arrays.update(handoff)
    ck.save(order, stage.name, arrays, {"docs_in": decision.docs_in, "pairs_in": decision.pairs_in,
                                        "pairs_out": decision.pairs_out, "details": decision.details,
                                        "handoff": scalars, "seconds": seconds})


def _restore_decision(ck: Checkpoints, order: int, stage: Stage, ctx: DecideContext) -> tuple[Decision, float]:
    """A stage's kept decision, with the union-find and the stage's hand-off state set as it left them."""
    arrays, meta = ck.load(order, stage.name)
    parent = arrays["union_find"]
    if parent.shape != ctx.union_find.parent_.shape:
        raise RuntimeError(f"checkpoint {stage.name!r} holds {parent.size} documents, the run {ctx.num_docs}")
    ctx.union_find.parent_[:] = parent
    unpack_handoff(stage, arrays, meta["handoff"])
    decision = Decision(Edges(arrays["edges_a"], arrays["edges_b"], arrays["edges_score"], arrays["edges_kind"]),
                        docs_in=int(meta["docs_in"]), pairs_in=int(meta["pairs_in"]), pairs_out=int(meta["pairs_out"]),
                        details={**meta["details"], "resumed": True}, refeature=arrays["refeature"],
                        children=arrays["children"],
                        fragments=Fragments(arrays["fragments_doc"], arrays["fragments_start"],
                                            arrays["fragments_end"]),
                        fragment_candidates=FragmentCandidates.from_arrays(arrays, "fcand_"))
    return decision, float(meta["seconds"])


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


def _cover_fn(stages: dict[str, Stage], edges: Edges, n: int, cfg: PipelineConfig,
              read_texts: Callable[[np.ndarray], list[str]] | None = None,
              lengths: np.ndarray | None = None,
              ) -> tuple[CoverFn, dict[int, tuple[int, float]]]:
    """``covers(docs, keepers)`` for ``SelectConfig.cover_check``: the keeper covers a document
    only on evidence that the stage which would make the link itself accepts:

    * a stage accepted the pair itself (or a pair of their exact copies), or they are exact copies;
    * the pair's hash estimate passes a linking stage's own bar, on the signatures that stage
      confirms on: ``lsh`` at ``minhash.threshold`` (on AW-MinHash's weighted signatures when both
      documents have one, as its confirmation does), ``aw`` at ``aw.threshold`` on the weighted
      signatures — for a page AW-MinHash marked as templated on what its re-check reads (the
      re-read texts without their recurring lines, :meth:`AWMinHashStage.template_scores`),
      never on the estimate: its chrome rule —, ``sph`` at
      ``sph.min_jaccard`` only for codes within its Hamming radius;
    * the document's weighted content is held by the keeper (:func:`weighted_containment` of
      their AW-MinHash signatures at least ``SelectConfig.cover_containment``), or a chain of
      containment edges leads from the document to the keeper;
    * the verifier accepts the pair — asked only when both texts lie within what the model reads
      (:meth:`VerifierStage.in_range`).

    With the verifier on, a pair with a short document (fewer than ``verifier.short_tokens``
    tokens) is never covered on its hash estimate: no linking stage accepts one; the verifier
    decides it. Exact copies that Bloom claimed (no signatures of their own) stand for the copy
    they equal.

    Also returns the *evidence* of every covered pair (key ``doc * n + keeper``): the edge kind
    and score of what covered it, which labels a removed document whose path of edges to its
    survivor was cut by the check (it is covered directly, with no edge of its own)."""
    from semhash_llm.sph.hyperplanes import hamming_distance

    evidence: dict[int, tuple[int, float]] = {}
    found = stages.get("mgfn")
    verifier = found if isinstance(found, VerifierStage) else None
    # AW-MinHash: its weighted signatures, the row of each document (-1: none), masses, templated marks.
    aw_sigs: np.ndarray | None = None
    aw_where = np.full(n, -1, dtype=np.int64)
    aw_mass: np.ndarray | None = None
    aw_templated = np.zeros(n, dtype=np.bool_)
    aw_stage = stages.get("aw")
    if isinstance(aw_stage, AWMinHashStage):
        aw_sigs, rows = aw_stage.signatures()
        aw_where[rows] = np.arange(rows.size, dtype=np.int64)
        aw_mass = aw_stage.masses() if cfg.select.cover_containment < 1.0 else None
        # AW-MinHash's chrome rule: a templated page is linked only after its re-check without its
        # recurring lines, never on its weighted estimate; so it is never covered by one either.
        aw_templated[rows[aw_stage.templated()]] = True
    mh_sigs: np.ndarray | None = None
    mh_where = np.full(n, -1, dtype=np.int64)
    lsh_stage = stages.get("lsh")
    if isinstance(lsh_stage, MinHashLSHStage) and lsh_stage.num_signed:
        mh_sigs, rows = lsh_stage.signatures()
        mh_where[rows] = np.arange(rows.size, dtype=np.int64)
    sph_stage = stages.get("sph")
    sph_codes = sph_stage.codes() if isinstance(sph_stage, SPHStage) and mh_sigs is not None else None
    if sph_codes is not None and mh_sigs is not None and sph_codes.shape[0] != mh_sigs.shape[0]:
        sph_codes = None  # codes of another row set (an engine's partial run): not used as evidence
    # Exact classes: each stands for its first member (the one Bloom did not claim: it has the
    # signatures; the union-find's roots are the smallest index).
    exact = edges.kind == EXACT_EDGE_KIND
    classes = UnionFind(n)
    if exact.any():
        classes.union_many(edges.a[exact].astype(np.int64), edges.b[exact].astype(np.int64))
    reps = classes.roots()
    parents: dict[int, list[int]] = {}
    contained = edges.kind == CONTAINED_EDGE_KIND
    for child, parent in zip(edges.a[contained].tolist(), edges.b[contained].tolist()):
        parents.setdefault(child, []).append(parent)

    def contained_in(doc: int, keeper: int) -> bool:
        seen = {doc}
        frontier = [doc]
        while frontier:
            nxt: list[int] = []
            for d in frontier:
                for p in parents.get(d, ()):
                    if p == keeper:
                        return True
                    if p not in seen:
                        seen.add(p)
                        nxt.append(p)
            frontier = nxt
        return False

    # Accepted pairs between exact classes: a copy of a document the keeper covers is covered too.
    ra, rb = reps[edges.a].astype(np.int64), reps[edges.b].astype(np.int64)
    linked = np.unique(np.concatenate([ra * n + rb, rb * n + ra]))
    link_evidence: dict[int, tuple[int, float]] = {}
    for x, y, kind, score in zip((ra * n + rb).tolist(), (rb * n + ra).tolist(), edges.kind.tolist(),
                                 edges.score.tolist()):
        for key in (x, y):
            if key not in link_evidence or score > link_evidence[key][1]:
                link_evidence[key] = (int(kind), float(score))
    contained_score: dict[tuple[int, int], float] = {}
    for child, parent, score in zip(edges.a[contained].tolist(), edges.b[contained].tolist(),
                                    edges.score[contained].tolist()):
        contained_score[(child, parent)] = float(score)
    verdicts: dict[int, bool] = {}
    template_said: dict[int, tuple[float, float]] = {}

    verifier_p: dict[int, float] = {}

    def covers(docs: np.ndarray, keepers: np.ndarray) -> np.ndarray:
        rd, rk = reps[docs], reps[keepers]
        pair_keys = docs.astype(np.int64) * n + keepers.astype(np.int64)
        class_keys = rd.astype(np.int64) * n + rk
        ok = rd == rk
        for i in np.flatnonzero(ok).tolist():
            evidence[int(pair_keys[i])] = (EXACT_EDGE_KIND, 1.0)
        via_link = ~ok & np.isin(class_keys, linked)
        for i in np.flatnonzero(via_link).tolist():
            evidence[int(pair_keys[i])] = link_evidence[int(class_keys[i])]
        ok |= via_link
        if verifier is not None:
            # A pair with a short document is the verifier's, never its hash estimate's.
            hashable = ~(verifier.is_short(rd) | verifier.is_short(rk))
        else:
            hashable = np.ones(docs.size, dtype=np.bool_)
        if aw_sigs is not None:
            wd, wk = aw_where[rd], aw_where[rk]
            both = (wd >= 0) & (wk >= 0) & ~ok & hashable
            if both.any():
                at = np.flatnonzero(both)
                same = (aw_sigs[wd[both]] == aw_sigs[wk[both]]).mean(axis=1)
                chrome = aw_templated[rd[both]] | aw_templated[rk[both]]
                floor = cfg.aw.threshold if "aw" in stages else 1.0
                if "lsh" in stages and cfg.aw.confirm:
                    floor = min(floor, cfg.minhash.threshold)
                hit = (same >= floor - 1e-9) & ~chrome
                if aw_mass is not None:
                    held = weighted_containment(same, aw_mass[wd[both]], aw_mass[wk[both]], aw_sigs.shape[1])
                    hit |= (held >= cfg.select.cover_containment) & ~chrome
                score = same.astype(np.float64)
                if chrome.any() and read_texts is not None and isinstance(aw_stage, AWMinHashStage):
                    # A templated page: what AW-MinHash's re-check reads, without the recurring lines.
                    ask = np.flatnonzero(chrome)
                    keys = class_keys[at[ask]]
                    new_keys = np.unique(keys[np.array([k not in template_said for k in keys.tolist()],
                                                       dtype=np.bool_)])
                    if new_keys.size:
                        jac, held_t, _ = aw_stage.template_scores(new_keys // n, new_keys % n, read_texts)
                        template_said.update(zip(new_keys.tolist(), zip(jac.tolist(), held_t.tolist())))
                    for j, key in zip(ask.tolist(), keys.tolist()):
                        jac_k, held_k = template_said[key]
                        if jac_k >= cfg.aw.threshold - 1e-9 or held_k >= cfg.select.cover_containment:
                            hit[j] = True
                            score[j] = jac_k
                for j in np.flatnonzero(hit).tolist():
                    evidence[int(pair_keys[at[j]])] = (AW_EDGE_KIND, float(score[j]))
                ok[at[hit]] = True
        if mh_sigs is not None:
            md, mk = mh_where[rd], mh_where[rk]
            weighted_pair = (aw_where[rd] >= 0) & (aw_where[rk] >= 0) & cfg.aw.confirm
            both = (md >= 0) & (mk >= 0) & ~ok & hashable & ~weighted_pair
            if both.any():
                at = np.flatnonzero(both)
                same = (mh_sigs[md[both]] == mh_sigs[mk[both]]).mean(axis=1)
                hit = same >= cfg.minhash.threshold - 1e-9
                kinds = np.full(at.size, LSH_EDGE_KIND, dtype=np.int64)
                if sph_codes is not None:
                    near = hamming_distance(sph_codes[md[both]], sph_codes[mk[both]]) <= cfg.sph.radius
                    sph_hit = ~hit & near & (same >= cfg.sph.min_jaccard - 1e-9)
                    kinds[sph_hit] = SPH_EDGE_KIND
                    hit |= sph_hit
                for j in np.flatnonzero(hit).tolist():
                    evidence[int(pair_keys[at[j]])] = (int(kinds[j]), float(same[j]))
                ok[at[hit]] = True
        for i in np.flatnonzero(~ok).tolist():
            d, k = int(docs[i]), int(keepers[i])
            ok[i] = contained_in(d, k) or contained_in(int(rd[i]), int(rk[i]))
            if ok[i]:
                evidence[int(pair_keys[i])] = (CONTAINED_EDGE_KIND, contained_score.get((d, k), float("nan")))
        if verifier is not None and read_texts is not None and lengths is not None and not ok.all():
            rest = np.flatnonzero(~ok)
            # Asked about the exact classes' representatives: exact copies get one verdict (the
            # model reads case and spacing, which the exact key folds).
            rest = rest[verifier.in_range(rd[rest], lengths) & verifier.in_range(rk[rest], lengths)]
            ckeys = class_keys[rest]
            ask_keys = np.unique(ckeys[np.array([key not in verdicts for key in ckeys.tolist()], dtype=np.bool_)])
            if ask_keys.size:
                said, prob = verifier.verify_pairs_scored(ask_keys // n, ask_keys % n, read_texts)
                verdicts.update(zip(ask_keys.tolist(), said.tolist()))
                verifier_p.update(zip(ask_keys.tolist(), prob.tolist()))
            ok[rest] = [verdicts[key] for key in ckeys.tolist()]
            for i, ck_, accepted in zip(rest.tolist(), ckeys.tolist(), ok[rest].tolist()):
                if accepted:
                    evidence[int(pair_keys[i])] = (VERIFIED_EDGE_KIND, verifier_p[int(ck_)])
        return ok

    return covers, evidence


CONTAINED_SHORTER = 0.8
"""A removed document is *contained* in its survivor when it is shorter than this share of it."""


def held_by_survivor(selection: Selection, lengths: np.ndarray, cfg: PipelineConfig,
                     read_texts: Callable[[np.ndarray], list[str]] | None) -> np.ndarray:
    """Which removed documents are contained in their survivor although another stage (LSH,
    AW-MinHash, SPH, the verifier) linked them first: shorter than :data:`CONTAINED_SHORTER` of
    the survivor, and with their content held by it — shingle containment (the smaller of
    character 4-gram and word 3-gram containment, on the re-read texts) at least
    ``passages.short_containment``. Such a removal is an excerpt, and its relation says
    ``contained_in``; the kept document and the decision do not change."""
    from semhash_llm.text.containment import shingle_containment

    n = selection.keeper.size
    out = np.zeros(n, dtype=np.bool_)
    keeper = selection.keeper
    idx = np.arange(n)
    linked_near = (keeper != idx) & (selection.via_kind >= 0) & ~np.isin(selection.via_kind,
                                                                        [EXACT_EDGE_KIND, CONTAINED_EDGE_KIND])
    cand = np.flatnonzero(linked_near & (lengths < CONTAINED_SHORTER * lengths[keeper]))
    if cand.size == 0 or read_texts is None or not cfg.passages.enabled:
        return out
    want = np.unique(np.concatenate([cand, keeper[cand]]))
    texts = dict(zip(want.tolist(), read_texts(want)))
    bar = cfg.passages.short_containment
    for d in cand.tolist():
        if shingle_containment(texts[d], texts[int(keeper[d])], config=cfg.normalize) >= bar:
            out[d] = True
    return out


def weighted_containment(jaccard: np.ndarray, mass_doc: np.ndarray, mass_keeper: np.ndarray,
                         slots: int) -> np.ndarray:
    """A lower bound on the share of a document's weight that another holds, from their weighted
    Jaccard estimate over ``slots`` signature slots: with ``sum(min) = J (m_d + m_k) / (1 + J)``,
    the containment ``sum(min) / m_d``, taken at ``J`` less two binomial standard errors (a small
    document against a large one multiplies the estimate's error by their mass ratio)."""
    j = np.asarray(jaccard, dtype=np.float64)
    low = np.clip(j - 2.0 * np.sqrt(j * (1.0 - j) / slots), 0.0, 1.0)
    md = np.asarray(mass_doc, dtype=np.float64)
    total = md + np.asarray(mass_keeper, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        held = np.where(md > 0, low / (1.0 + low) * total / md, 0.0)
    return np.clip(held, 0.0, 1.0)


def _reason_counts(reasons: dict[int, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in reasons.values():
        key = reason_category(r)
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


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
