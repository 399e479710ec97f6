"""A persistent, incremental index of deduplicated documents: new data is checked against it.

``semhash-llm index build INPUT... --index DIR`` writes the documents of INPUT into DIR as
one *segment*; ``index add`` appends another; ``index info`` describes it; ``semhash-llm dedup
INPUT... --against DIR`` deduplicates INPUT against everything indexed: the indexed documents
enter the cascade first, as its own input would, always survive their clusters (they are
published already), and are not rows of ``documents.parquet``; a new document that repeats
one says so, with the indexed document's id in ``duplicate_of``.

A segment (``seg-NNNNN/``) holds:

* ``docs.parquet``: ``id`` and ``text`` of every document (the verifier, the passage stage and
  the cover check read texts of candidate pairs; an index does not depend on the files it was
  built from still being there);
* the per-text features of the stages whose features are a pure function of the text and cost
  the most to recompute: ``lsh.signatures.npy`` (MinHash) and ``sph.codes.npy`` (SPH codes of
  the student, the model stage), one row per document, and ``has_features.npy``. The Bloom
  digests, AW-MinHash weights and passage keys depend on the whole stream (a document
  frequency table, occurrence counts) and are recomputed from the texts, which is cheap.

``index.json`` is the header: format version, the *feature fingerprint* (the settings that
shape the stored features: normalization, shingles, the MinHash permutations, the SPH encoder and
hashing; thresholds may differ), the full config it was built
with, the segments and their document counts. An index refuses a run whose feature settings
differ, and names the settings that differ. Every write is atomic: a segment is written into
a temporary directory and renamed into place, then the header is replaced; a build killed
midway leaves the index as it was (its half-written segment is removed on the next write).
Arrays are ``.npy`` read with ``allow_pickle=False``, the rest Parquet and JSON: nothing is
unpickled. One writer at a time.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from semhash_llm import __version__
from semhash_llm.config import ConfigError, PipelineConfig, ReaderConfig
from semhash_llm.fingerprint import weights_fingerprint
from semhash_llm.io.atomic import fsync_path, write_json_atomic
from semhash_llm.io.readers import InputError, InputFile, scan_inputs
from semhash_llm.io.sources import FileSource
from semhash_llm.stages.base import ComputesFeatures, StreamBatch

__all__ = ["DocumentIndex", "IndexDirError", "INDEX_FORMAT", "FEATURE_STAGES", "feature_fingerprint"]

logger = logging.getLogger(__name__)

INDEX_FORMAT = 1
HEADER = "index.json"
FEATURE_STAGES: tuple[str, ...] = ("lsh", "sph")
"""The stages whose ``compute`` features an index stores (in this order)."""
_FEATURE_KEYS: dict[str, tuple[str, ...] | None] = {
    "normalize": None, "shingle": None,  # every setting
    "minhash": ("num_perm", "seed"),
    "sph": ("bits", "student_path", "hashing", "simhash_seed", "hyperplanes_path", "teacher"),
}
"""The settings that shape the stored features (``None``: the whole section). The others (the
thresholds, the later stages) may differ between the index and a run against it."""


def _feature_settings(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for section, keys in _FEATURE_KEYS.items():
        values = config.get(section, {})
        out[section] = dict(values) if keys is None else {k: values.get(k) for k in keys}
    return out


class IndexDirError(ConfigError):
    """An index directory that cannot be used: missing, damaged, or built with other settings."""


def _load_array(path: Path) -> np.ndarray:
    """A stored feature array, memory-mapped; never unpickled (an object array is refused)."""
    try:
        arr: np.ndarray = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise IndexDirError(f"{path}: not a readable feature array ({exc}); the index is damaged or was not "
                            "written by semhash-llm (arrays are plain .npy, never pickled). Build it again with "
                            "`semhash-llm index build`") from exc
    return arr


def feature_fingerprint(config: PipelineConfig) -> str:
    """SHA-256 (16 hex) of what shapes an index's stored features: those settings, the package
    version and the contents of the SPH weight files (a student retrained in place, or an
    upgrade, must not add codes of another student to the index)."""
    payload: dict[str, Any] = {**_feature_settings(config.to_dict()),
                               "weights": weights_fingerprint(config, features_only=True)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def _differences(built: dict[str, Any], now: dict[str, Any]) -> list[str]:
    out = []
    old, new = _feature_settings(built), _feature_settings(now)
    for section in _FEATURE_KEYS:
        a, b = old[section], new[section]
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                out.append(f"{section}.{key}: index {a.get(key)!r}, this run {b.get(key)!r}")
    return out


@dataclass(frozen=True)
class Segment:
    name: str
    documents: int
    with_features: int


class DocumentIndex:
    """An index directory (see the module docstring)."""

    def __init__(self, root: Path, header: dict[str, Any]) -> None:
        self.root = root
        self.header = header
        self.segments = [Segment(s["name"], int(s["documents"]), int(s["with_features"]))
                         for s in header["segments"]]

    # ------------------------------------------------------------------ open / create
    @classmethod
    def open(cls, root: str | Path) -> DocumentIndex:
        """An existing index; a clear error for a directory that is not one."""
        root = Path(root)
        path = root / HEADER
        if not path.exists():
            raise IndexDirError(f"{root}: not a semhash-llm index (no {HEADER}). Build one with "
                              f"`semhash-llm index build INPUT... --index {root}`")
        try:
            header = json.loads(path.read_text())
        except ValueError as exc:
            raise IndexDirError(f"{path}: the index header is not valid JSON ({exc}); the index is damaged") from None
        if not isinstance(header, dict) or header.get("format") != INDEX_FORMAT:
            raise IndexDirError(f"{path}: index format {header.get('format') if isinstance(header, dict) else '?'}, "
                              f"this version reads format {INDEX_FORMAT}. Build the index again")
        for key in ("feature_fingerprint", "config", "segments"):
            if key not in header:
                raise IndexDirError(f"{path}: the index header has no {key!r}; the index is damaged")
        for seg in header["segments"]:
            if not (root / seg["name"] / "docs.parquet").exists():
                raise IndexDirError(f"{root / seg['name']}: a segment listed in {HEADER} is missing; the index is "
                                  "damaged")
        return cls(root, header)

    @classmethod
    def create(cls, root: str | Path, config: PipelineConfig) -> DocumentIndex:
        """A new, empty index at ``root`` (which must not hold one already)."""
        root = Path(root)
        if (root / HEADER).exists():
            raise IndexDirError(f"{root}: an index is already there. Add to it with `semhash-llm index add`, or "
                              "choose another directory")
        if root.exists() and any(p for p in root.iterdir() if not p.name.startswith(".")):
            raise IndexDirError(f"{root}: the directory is not empty; an index needs a directory of its own")
        root.mkdir(parents=True, exist_ok=True)
        header = {"format": INDEX_FORMAT, "feature_fingerprint": feature_fingerprint(config),
                  "config_fingerprint": config.fingerprint(), "config": config.to_dict(), "segments": [],
                  "created_with": __version__}
        write_json_atomic(root / HEADER, header)
        return cls(root, header)

    def check_config(self, config: PipelineConfig) -> None:
        """Refuse a config whose feature settings differ from the index's, naming them."""
        if feature_fingerprint(config) == self.header["feature_fingerprint"]:
            return
        diff = _differences(self.header["config"], config.to_dict())
        if not diff:
            diff = [f"the package version or the SPH weight files' contents differ (index built with semhash-llm "
                    f"{self.header.get('created_with', '?')}, this is {__version__}; a student or hyperplanes "
                    "retrained in place change the codes)"]
        raise IndexDirError(f"{self.root}: the index was built with other settings than this run's "
                          f"(feature fingerprint {self.header['feature_fingerprint']}, this run "
                          f"{feature_fingerprint(config)}): {'; '.join(diff) or 'see index.json'}. Run with the "
                          "index's settings (its index.json holds the config: pass it with --config) or build a "
                          "new index")

    # ------------------------------------------------------------------ reading
    @property
    def num_documents(self) -> int:
        return sum(s.documents for s in self.segments)

    def files(self) -> list[InputFile]:
        """The segments' document tables, as input shards."""
        return [InputFile(path=self.root / s.name / "docs.parquet", kind="parquet", name=f"index:{s.name}",
                          label="index segment") for s in self.segments]

    def source(self, reader: ReaderConfig) -> FileSource:
        """The indexed documents, in order (fields ``id`` and ``text``)."""
        cfg = ReaderConfig(text_field="text", id_field="id", batch_size=reader.batch_size, on_error="raise")
        return FileSource(self.files(), cfg)

    def features(self, segment: int, ordinals: np.ndarray, stages: Sequence[str]) -> dict[str, dict[str, np.ndarray]]:
        """The stored features of ``stages`` for rows ``ordinals`` of segment ``segment``."""
        seg = self.root / self.segments[segment].name
        out: dict[str, dict[str, np.ndarray]] = {}
        have = _load_array(seg / "has_features.npy")
        rows = np.asarray(ordinals, dtype=np.int64)
        if rows.size and not bool(np.all(have[rows])):
            raise IndexDirError(f"{seg}: rows {rows[~have[rows]][:5].tolist()} have no stored features; the index "
                              "does not match its documents")
        for stage in stages:
            if stage not in FEATURE_STAGES:
                continue
            found: dict[str, np.ndarray] = {}
            for path in sorted(seg.glob(f"{stage}.*.npy")):
                arr = _load_array(path)
                found[path.name.split(".")[1]] = np.ascontiguousarray(arr[rows])
            if found:
                out[stage] = found
        return out

    def info(self) -> dict[str, Any]:
        size = sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())
        return {"index": str(self.root), "format": INDEX_FORMAT, "documents": self.num_documents,
                "segments": [{"name": s.name, "documents": s.documents, "with_features": s.with_features}
                             for s in self.segments],
                "feature_fingerprint": self.header["feature_fingerprint"],
                "config_fingerprint": self.header.get("config_fingerprint"),
                "stored_features": list(FEATURE_STAGES), "bytes": size,
                "created_with": self.header.get("created_with")}

    def ids(self) -> pa.Array:
        parts = [pq.read_table(f.path, columns=["id"]).column("id") for f in self.files()]
        return pa.chunked_array(parts, pa.string()).combine_chunks() if parts else pa.array([], pa.string())

    # ------------------------------------------------------------------ writing
    def add(self, inputs: Sequence[str | Path], config: PipelineConfig,
            progress: Callable[[str, int, int | None], None] | None = None) -> dict[str, Any]:
        """Index the documents of ``inputs`` as a new segment; its summary."""
        from semhash_llm.pipeline.registry import stages as registered_stages
        from semhash_llm.text.normalize import char_classes, normalize_batch
        from semhash_llm.text.tokenize import tokenize_batch

        self.check_config(config)
        t0 = time.perf_counter()
        for stray in self.root.glob(".tmp-*"):  # a segment whose build was killed
            shutil.rmtree(stray, ignore_errors=True)
        scan = scan_inputs(inputs)
        source = FileSource(scan.files, config.reader, scan.ignored)
        name = f"seg-{len(self.segments):05d}"
        tmp = self.root / f".tmp-{name}-{os.getpid()}"
        tmp.mkdir(parents=True)
        built = (info.build(config) for info in registered_stages() if info.name in FEATURE_STAGES)
        stages = {st.name: st for st in built if isinstance(st, ComputesFeatures)}
        classes = char_classes(config.normalize.strip_punctuation)
        known = set(self.ids().to_pylist())
        seen: dict[str, str] = {}
        features: dict[str, dict[str, list[np.ndarray]]] = {s: {} for s in stages}
        has: list[np.ndarray] = []
        skipped = n = 0
        writer = pq.ParquetWriter(tmp / "docs.parquet", pa.schema([("id", pa.string()), ("text", pa.string())]),
                                  compression="zstd")
        try:
            for batch in source.batches(None):
                keep = [j for j, err in enumerate(batch.errors) if err is None]
                skipped += len(batch) - len(keep)
                ids = [batch.ids[j] for j in keep]
                texts = [batch.texts[j] or "" for j in keep]
                for j, ident in zip(keep, ids):
                    where = f"{source.names[batch.file_index]}:{batch.ordinals[j]}"
                    if ident in known or ident in seen:
                        raise InputError(source.names[batch.file_index],
                                         f"id {ident!r} is already in the index"
                                         + (f" (first seen at {seen[ident]})" if ident in seen else "")
                                         + "; ids must be unique across an index", line=batch.ordinals[j])
                    seen[ident] = where
                tb = tokenize_batch(normalize_batch(texts, config.normalize), classes, config.shingle)
                with_tokens = tb.num_tokens > 0
                sel = [texts[j] for j in np.flatnonzero(with_tokens).tolist()]
                for sname, stage in stages.items():
                    got = stage.compute(sel, config.normalize, config.shingle)
                    for feature, values in got.items():
                        full = np.zeros((len(texts), *values.shape[1:]), dtype=values.dtype)
                        full[with_tokens] = values
                        features[sname].setdefault(feature, []).append(full)
                has.append(with_tokens)
                writer.write_table(pa.table({"id": pa.array(ids, pa.string()), "text": pa.array(texts, pa.string())}))
                n += len(texts)
                if progress is not None:
                    progress("index", n, None)
        finally:
            writer.close()
        for sname, by_feature in features.items():
            for feature, parts in by_feature.items():
                _save_npy(tmp / f"{sname}.{feature}.npy", np.concatenate(parts))
        mask = np.concatenate(has) if has else np.zeros(0, np.bool_)
        _save_npy(tmp / "has_features.npy", mask)
        _fsync_tree(tmp)
        os.replace(tmp, self.root / name)
        header = dict(self.header)
        header["segments"] = [*self.header["segments"],
                              {"name": name, "documents": n, "with_features": int(mask.sum()),
                               "inputs": [str(i) for i in inputs], "added_with": __version__}]
        write_json_atomic(self.root / HEADER, header)
        self.header = header
        self.segments.append(Segment(name, n, int(mask.sum())))
        seconds = time.perf_counter() - t0
        logger.info("indexed %d documents into %s/%s in %.1f s", n, self.root, name, seconds)
        return {"segment": name, "documents": n, "skipped": skipped, "with_features": int(mask.sum()),
                "index_documents": self.num_documents, "seconds": round(seconds, 3)}


class IndexedSource:
    """The indexed documents first, then this run's input: one source for the cascade.

    Shards ``0..S-1`` are the index's segments, ``S..`` the input's files. Records of a segment
    are given back with their text under the run's ``text_field``."""

    def __init__(self, index: DocumentIndex, inputs: FileSource) -> None:
        self.index = index
        self.indexed = index.source(inputs.reader)
        self.inputs = inputs
        self.shards = len(self.indexed.files)
        self.files = [*self.indexed.files, *inputs.files]
        self.names = [*self.indexed.names, *inputs.names]
        self.ignored = inputs.ignored
        self.reader = inputs.reader

    def batches(self, priority_field: str | None) -> Any:
        from dataclasses import replace

        if priority_field is None:
            yield from self.indexed.batches(None)
        else:  # indexed documents have no priority field; they are pinned as survivors anyway
            for b in self.indexed.batches(None):
                yield replace(b, priorities=[0.0] * len(b))
        for b in self.inputs.batches(priority_field):
            yield replace(b, file_index=b.file_index + self.shards) if self.shards else b

    def records(self, file_index: int, wanted: Any = None) -> Any:
        if file_index < self.shards:
            field = self.reader.text_field
            for ordinal, rec in self.indexed.records(file_index, wanted):
                yield ordinal, {field: rec["text"], "id": rec["id"]}
        else:
            yield from self.inputs.records(file_index - self.shards, wanted)


@dataclass
class IndexPrefix:
    """What the cascade needs to run against an index: how many documents and shards come from
    it, and its stored features for a batch of a segment."""

    index: DocumentIndex
    documents: int
    shards: int

    def precompute(self, batch: StreamBatch, file_index: int, ordinals: np.ndarray, stages: Sequence[str]) -> None:
        """Set the batch's stored features (rows of its featured documents) for ``stages``."""
        docs = batch.feature_docs
        batch.precomputed = self.index.features(file_index, ordinals[docs], stages) if docs.size else {}


def _save_npy(path: Path, arr: np.ndarray) -> None:
    with open(path, "wb") as fh:
        np.save(fh, arr, allow_pickle=False)


def _fsync_tree(root: Path) -> None:
    for p in [*root.iterdir(), root]:
        fsync_path(p)
