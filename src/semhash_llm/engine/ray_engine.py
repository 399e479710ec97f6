"""``--engine ray``: the stages' per-text features computed on a Ray cluster with Ray Data.

Each stream batch's featured texts (those the Bloom stage did not claim: the very texts the
local engine hands those stages) become one Ray Data block; ``map_batches`` runs them through
an actor pool of :class:`StageFeatures`, each of which builds the offloadable stages once in
its constructor (the SPH student loads once per worker) and returns every stage's ``compute``
rows. Blocks come back in order (``preserve_order``) and are matched to their batch by key,
so every stage keeps exactly the rows it would have computed itself, and the decisions after
the stream are the local engine's. Everything else (reading, Bloom, the stages that keep
running state, every decision) stays in the driver.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from semhash_llm.config import ConfigError, PipelineConfig
from semhash_llm.stages.base import ComputesFeatures, StreamBatch

__all__ = ["RayEngine", "StageFeatures"]

logger = logging.getLogger(__name__)


class StageFeatures:
    """A Ray Data actor: builds the named stages once, then computes their features per block."""

    def __init__(self, config: dict[str, Any], stages: tuple[str, ...]) -> None:
        from semhash_llm.pipeline.registry import stages as registered_stages

        self.config = PipelineConfig.from_dict(config)
        built = (info.build(self.config) for info in registered_stages() if info.name in stages)
        self.stages = {st.name: st for st in built if isinstance(st, ComputesFeatures)}

    def __call__(self, block: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        texts = [str(t) for t in block["text"].tolist()]
        out: dict[str, np.ndarray] = {"key": block["key"], "pos": block["pos"]}
        for name, stage in self.stages.items():
            for feature, values in stage.compute(texts, self.config.normalize, self.config.shingle).items():
                out[f"{name}/{feature}"] = values
        return out


class RayEngine:
    """Offloads the stages' ``compute`` to a Ray cluster (see the module docstring)."""

    def __init__(self, config: PipelineConfig, stages: tuple[str, ...]) -> None:
        try:
            import ray
        except ImportError:
            raise ConfigError("--engine ray needs Ray Data, which is not installed: pip install "
                              "'semhash-llm[ray]' (or use the default --engine local)") from None
        self.config = config
        self.stages = stages
        self._started = False
        if not ray.is_initialized():
            ray.init(address=config.engine.ray_address, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
            self._started = True
        import ray.data

        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True
        ctx.enable_progress_bars = False
        self._payload = config.to_dict()
        self.blocks_ = 0
        self.texts_ = 0
        self.shuffle_partitions_ = 0
        logger.info("ray engine: %s computed on %d actor(s) at %s", ", ".join(stages), config.engine.ray_workers,
                    ray.get_runtime_context().gcs_address)

    def featurize(self, window: list[StreamBatch]) -> None:
        import pyarrow as pa
        import ray.data

        tables = []
        for key, batch in enumerate(window):
            docs = batch.feature_docs
            if docs.size:
                tables.append(pa.table({"text": pa.array([batch.texts[j] for j in docs.tolist()], pa.large_string()),
                                        "key": np.full(docs.size, key, np.int64),
                                        "pos": np.arange(docs.size, dtype=np.int64)}))
        got: dict[int, list[dict[str, np.ndarray]]] = {}
        if tables:
            ds = ray.data.from_arrow(tables).map_batches(
                StageFeatures, fn_constructor_args=(self._payload, self.stages), batch_size=None,
                batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=self.config.engine.ray_workers),
                zero_copy_batch=True)
            for block in ds.iter_batches(batch_size=None, batch_format="numpy"):
                keys = block["key"]
                for key in np.unique(keys).tolist():
                    rows = keys == key
                    got.setdefault(int(key), []).append({name: values[rows] for name, values in block.items()})
            self.blocks_ += len(tables)
        for key, batch in enumerate(window):
            m = int(batch.feature_docs.size)
            parts = got.get(key, [])
            precomputed: dict[str, dict[str, np.ndarray]] = {}
            batch.precomputed = precomputed
            for name in self.stages:
                features: dict[str, np.ndarray] = {}
                for column in (parts[0] if parts else {}):
                    if column.startswith(f"{name}/"):
                        values = np.concatenate([p[column] for p in parts])
                        pos = np.concatenate([p["pos"] for p in parts])
                        if values.shape[0] != m or not np.array_equal(np.sort(pos), np.arange(m)):
                            raise RuntimeError(f"ray engine: batch {key} came back with {values.shape[0]} rows of "
                                               f"{column}, expected {m}")
                        features[column.split("/", 1)[1]] = np.ascontiguousarray(values[np.argsort(pos)])
                if not m:
                    continue  # nothing featured: the stage computes nothing either
                if not features:
                    raise RuntimeError(f"ray engine: no features of stage {name!r} came back for batch {key}")
                precomputed[name] = features
            self.texts_ += m

    def bucket_orders(self, keys: np.ndarray) -> list[np.ndarray]:
        """The LSH bucket shuffle: every (band, key, row) written to sorted Parquet partitions by
        bucket hash, one Ray task per partition keeps the buckets of two or more rows, and the
        driver gathers them: per band, those rows by key then row (what a stable sort of the
        band's keys gives, singletons left out), for its deterministic union-find."""
        import tempfile
        from pathlib import Path

        import pyarrow as pa
        import pyarrow.parquet as pq
        import ray

        n, bands = keys.shape
        parts = max(2 * self.config.engine.ray_workers, 1)
        band = np.tile(np.arange(bands, dtype=np.int16), n)
        row = np.repeat(np.arange(n, dtype=np.int64), bands)
        key = np.ascontiguousarray(keys).reshape(-1)
        bucket = (key ^ (band.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))) % np.uint64(parts)
        order = np.argsort(bucket, kind="stable")
        bounds = np.searchsorted(bucket[order], np.arange(parts + 1, dtype=np.uint64))
        with tempfile.TemporaryDirectory(prefix="semhash-shuffle-") as tmp:
            paths = []
            for p in range(parts):
                sel = order[bounds[p]: bounds[p + 1]]
                sel = sel[np.lexsort((row[sel], key[sel], band[sel]))]  # each partition written sorted
                path = Path(tmp) / f"bucket-part-{p:04d}.parquet"
                pq.write_table(pa.table({"band": band[sel], "key": key[sel], "row": row[sel]}), path)
                paths.append(str(path))
            found = ray.get([_multi_member_buckets.remote(path) for path in paths])
        self.shuffle_partitions_ += parts
        b = np.concatenate([f[0] for f in found])
        k = np.concatenate([f[1] for f in found])
        r = np.concatenate([f[2] for f in found])
        sort = np.lexsort((r, k, b))
        b, r = b[sort], r[sort]
        cut = np.searchsorted(b, np.arange(bands + 1))
        return [r[cut[j]: cut[j + 1]] for j in range(bands)]

    def close(self) -> None:
        if self._started:
            import ray

            ray.shutdown()
            self._started = False


def _multi_member_buckets_fn(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One partition of the bucket shuffle (sorted by band, key, row): the rows of its buckets
    with two or more rows."""
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    band = t.column("band").to_numpy()
    key = t.column("key").to_numpy()
    row = t.column("row").to_numpy()
    if band.size == 0:
        return band, key, row
    new = np.ones(band.size, dtype=np.bool_)
    new[1:] = (band[1:] != band[:-1]) | (key[1:] != key[:-1])
    start = np.flatnonzero(new)
    size = np.diff(np.append(start, band.size))
    keep = np.repeat(size > 1, size)
    return band[keep], key[keep], row[keep]


class _LazyRemote:
    """``ray.remote`` applied when first used (importing this module does not import Ray)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self._remote: Any = None

    def remote(self, *args: Any) -> Any:
        if self._remote is None:
            import ray

            self._remote = ray.remote(self.fn)
        return self._remote.remote(*args)


_multi_member_buckets = _LazyRemote(_multi_member_buckets_fn)
