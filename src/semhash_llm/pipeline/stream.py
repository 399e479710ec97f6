"""The stream: read the source in batches, normalize and tokenize each, and hand it to every stage's ``process``.

Per document only fixed-size state is kept here (id, location, status, length, priority); the
stages keep their features; texts live only as long as their batch. With an engine
(``--engine ray``) or an index prefix (``dedup --against``), the stages from the first one whose
features are computed elsewhere onward see each batch once a window of batches has its
features (the engine's, or the index's stored ones); the stages before (Bloom, which claims
documents) see each batch as it is read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from semhash_llm.config import PipelineConfig
from semhash_llm.engine import Engine
from semhash_llm.faults import failpoint
from semhash_llm.io.sources import Source
from semhash_llm.pipeline.capabilities import capabilities_of
from semhash_llm.pipeline.funnel import Growable, StageStats, peak_rss_mb, reason_counts
from semhash_llm.stages.base import DocStatus, Stage, StreamBatch
from semhash_llm.storage.index import IndexPrefix
from semhash_llm.text.normalize import char_classes, normalize_batch
from semhash_llm.text.tokenize import tokenize_batch

__all__ = ["Streamed", "stream"]


@dataclass
class Streamed:
    """What the stream kept per document (index = input order) and its funnel row."""

    ids: pa.Array
    file_index: np.ndarray
    ordinal: np.ndarray
    status: np.ndarray
    lengths: np.ndarray
    priorities: np.ndarray
    skip_reasons: dict[int, str]
    read: StageStats
    stream_seconds: dict[str, float]
    """Per stage (every configured one; 0 for those not streamed), the seconds of its ``process``."""

    @property
    def num_docs(self) -> int:
        return int(self.status.shape[0])


def stream(source: Source, stages: Sequence[Stage], streamed: Sequence[Stage], config: PipelineConfig,
           engine: Engine | None, offload: tuple[str, ...], prefix: IndexPrefix | None,
           tick: Callable[[str, int], None]) -> Streamed:
    """Stream ``source`` through the ``process`` of the ``streamed`` stages (those of ``stages``
    whose features this run computes); ``offload``: the stages whose features ``engine`` computes."""
    cfg = config
    classes = char_classes(cfg.normalize.strip_punctuation)
    stream_seconds = {st.name: 0.0 for st in stages}
    prio_field = cfg.select.priority_field if cfg.select.keep == "priority" else None
    id_chunks: list[pa.Array] = []
    file_index = Growable(np.int32)
    ordinal = Growable(np.int64)
    status = Growable(np.uint8)
    lengths = Growable(np.int64)
    prios = Growable(np.float64)
    skip_reasons: dict[int, str] = {}
    read = StageStats("read")
    n = 0
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
        tick("read", n)
        failpoint("during", "read")
    finish(window)
    if engine is not None:
        read.details["engine"] = {"kind": cfg.engine.kind, "stages": list(offload),
                                  "engine_seconds": round(read.details.pop("engine_seconds", 0.0), 3)}
        shuffle = engine.bucket_orders
        for stage in stages:  # the LSH bucket shuffle runs on the engine too
            if shuffle is not None and capabilities_of(stage).shuffles_buckets:
                stage.bucketer = shuffle  # type: ignore[attr-defined]  # declared by shuffles_buckets
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
        "skipped_by_reason": reason_counts(skip_reasons),
        "no_tokens": int(np.count_nonzero(st_status == DocStatus.NO_TOKENS)),
        "files": len(source.names),
    }
    ids = pa.concat_arrays(id_chunks) if id_chunks else pa.array([], pa.string())
    return Streamed(ids, file_index.view(), ordinal.view(), st_status, lengths.view(), prios.view(), skip_reasons,
                    read, stream_seconds)
