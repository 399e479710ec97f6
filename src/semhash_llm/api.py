"""The Python API: a streaming pipeline over files and an in-memory facade.

>>> from semhash_llm import deduplicate
>>> result = deduplicate(["a cat sat on the mat", "A cat sat on the mat!", "something else"])
>>> len(result.selected), result.duplicate_ratio
(2, 0.333...)
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from semhash_llm import __version__
from semhash_llm.cascade import Cascade, CascadeState, ProgressCallback, peak_rss_mb
from semhash_llm.pipeline.checkpoints import CHECKPOINT_DIR
from semhash_llm.config import PipelineConfig
from semhash_llm.faults import failpoint
from semhash_llm.io.readers import InputError, scan_inputs
from semhash_llm.io.sources import FileSource, MemorySource, Source
from semhash_llm.io.writers import write_documents, write_json, write_kept
from semhash_llm.pipeline.edges import EdgeKind
from semhash_llm.runview import LOCATIONS, RunViewError, locations_table
from semhash_llm.stages.base import DocStatus
from semhash_llm.storage.index import DocumentIndex, IndexedSource, IndexPrefix
from semhash_llm.text.spans import remove_spans

__all__ = ["DedupResult", "Deduplicator", "OutputWriteError", "deduplicate"]

logger = logging.getLogger(__name__)


@dataclass
class DedupResult:
    """What a run decided. ``documents`` is the contract table (one row per input document)."""

    documents: pa.Table
    report: dict[str, Any]
    records: list[dict[str, Any]] | None = None
    output_dir: Path | None = None
    pair_logs: dict[str, pa.Table] = field(default_factory=dict)
    """Per-pair records by stage (``judge``: every pair the verifier referred to it, with both
    probabilities, the fused one and the outcome); written as ``<stage>_pairs.parquet``."""
    _actions: list[str] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self._actions = self.documents.column("action").to_pylist()

    @property
    def num_documents(self) -> int:
        return self.documents.num_rows

    @property
    def duplicate_ratio(self) -> float:
        """Share of documents removed as duplicates (skipped bad records excluded)."""
        rel = self.documents.column("relation").to_pylist()
        dups = sum(1 for a, r in zip(self._actions, rel) if a == "remove" and r != "skipped")
        return dups / self.num_documents if self.num_documents else 0.0

    @property
    def exact_duplicate_ratio(self) -> float:
        """Share of documents removed as exact duplicates."""
        rel = self.documents.column("relation").to_pylist()
        return sum(1 for r in rel if r == "exact") / self.num_documents if self.num_documents else 0.0

    @property
    def selected(self) -> list[dict[str, Any]]:
        """The kept records (in-memory runs only)."""
        if self.records is None:
            raise ValueError("selected records are only held for in-memory runs; read kept.parquet instead")
        return [r for r, a in zip(self.records, self._actions) if a == "keep"]

    @property
    def removed(self) -> list[dict[str, Any]]:
        """Removed records with why: ``{"record", "duplicate_of", "relation", "score"}`` (in-memory runs)."""
        if self.records is None:
            raise ValueError("removed records are only held for in-memory runs; read documents.parquet instead")
        cols = self.documents.select(["duplicate_of", "relation", "score"]).to_pylist()
        return [
            {"record": r, **c} for r, a, c in zip(self.records, self._actions, cols) if a == "remove"
        ]


def _summary(state: CascadeState) -> dict[str, Any]:
    n = state.num_documents
    kept = int(state.kept_mask().sum())
    skipped = len(state.skip_reasons)
    rows = {row.name: row for row in state.funnel}
    removed = ~state.kept_mask() & (state.status != DocStatus.SKIPPED) & state.visible
    kinds = state.selection.via_kind[removed]
    cuts = state.cuts()
    if state.visible_from:  # against an index: the clusters this run's documents are in
        sel = state.selection
        clustered = state.visible & (sel.cluster_size > 1)
        clusters = int(np.unique(sel.keeper[clustered]).size)
    else:
        clusters = rows["select"].details.get("clusters", 0)
    held = state.contained[removed] if state.contained is not None else np.zeros(kinds.size, np.bool_)
    contained = int(np.count_nonzero((kinds == EdgeKind.CONTAINED) | held))
    exact = int(np.count_nonzero((kinds == EdgeKind.EXACT) & ~held))
    return {
        "documents": n,
        "kept": kept,
        "removed": n - kept - skipped,
        "skipped": skipped,
        "skipped_in_kept_output": False,
        "skipped_note": ("records skipped with --on-error skip are action=remove, relation=skipped in "
                         "documents.parquet and are not in the kept output" if skipped else ""),
        "exact_removed": exact,
        "near_removed": n - kept - skipped - exact - contained,
        "contained_removed": contained,
        "documents_cut": len(cuts),
        "fragment_spans_cut": sum(len(spans) for spans in cuts.values()),
        "clusters": clusters,
    }


def _against_report(state: CascadeState, prefix: IndexPrefix) -> dict[str, Any]:
    """The index a run was checked against, and how many of its documents matched an indexed one."""
    keeper = state.selection.keeper
    mine = np.flatnonzero(state.visible & (keeper != np.arange(keeper.size)) & (state.status != DocStatus.SKIPPED))
    return {"index": str(prefix.index.root), "indexed_documents": prefix.documents,
            "segments": len(prefix.index.segments), "feature_fingerprint": prefix.index.header["feature_fingerprint"],
            "removed_as_duplicate_of_indexed": int(np.count_nonzero(keeper[mine] < prefix.documents))}


def _files_report(state: CascadeState, source: Source | None) -> list[dict[str, Any]]:
    """One entry per shard read: name, path, format, records read and records skipped."""
    names = state.source_names
    read = np.bincount(state.file_index, minlength=len(names))
    skipped_docs = np.fromiter(state.skip_reasons.keys(), dtype=np.int64, count=len(state.skip_reasons))
    skipped = np.bincount(state.file_index[skipped_docs], minlength=len(names))
    files = source.files if source is not None and len(source.files) == len(names) else None
    out: list[dict[str, Any]] = []
    for i, name in enumerate(names):
        if i < state.visible_shards_from:
            continue  # an index segment
        entry: dict[str, Any] = {"name": name}
        if files is not None:
            entry["path"] = files[i].path.as_posix()
            entry["format"] = files[i].format
        entry["records_read"] = int(read[i])
        entry["records_skipped"] = int(skipped[i])
        out.append(entry)
    return out


def build_report(state: CascadeState, config: PipelineConfig, inputs: Sequence[str],
                 extra_seconds: float = 0.0, source: Source | None = None) -> dict[str, Any]:
    """The ``report.json`` payload: summary, files read and not read, per-stage funnel, throughput and memory.

    ``files`` lists every shard read (``name``, ``path``, ``format``, ``records_read`` — each a
    row of ``documents.parquet`` — and ``records_skipped``); ``ignored_files`` lists what was met
    while walking directories or expanding globs and not read (``path``, ``reason``).
    """
    seconds = state.seconds + extra_seconds
    n = state.num_documents
    return {
        "semhash_llm_version": __version__,
        "config_fingerprint": config.fingerprint(),
        "inputs": list(inputs),
        "files": _files_report(state, source),
        "ignored_files": [i.as_dict() for i in source.ignored] if source is not None else [],
        "summary": _summary(state),
        "funnel": [s.as_dict() for s in state.funnel],
        "resumed_stages": list(state.resumed_stages),
        **({"resume_note": f"not resumed: {state.resume_note}; started afresh"} if state.resume_note else {}),
        "seconds": round(seconds, 3),
        "documents_per_second": round(n / seconds, 1) if seconds > 0 else None,
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "config": config.to_dict(),
    }


def _check_kept_rows(kept_path: Path, kept_rows: int, table: pa.Table) -> None:
    """The kept output must hold exactly the documents that ``documents.parquet`` keeps."""
    keep = int(pc.sum(pc.equal(table.column("action"), "keep")).as_py() or 0)
    if kept_rows != keep:
        kept_path.unlink(missing_ok=True)
        raise InputError(
            kept_path.as_posix(),
            f"the kept output has {kept_rows:,} rows, but documents.parquet keeps {keep:,} documents; the "
            "input changed while the run was going or a record could not be re-read (the kept file was "
            "removed). Rerun on inputs that do not change during the run")


class OutputWriteError(OSError):
    """The outputs could not be written (disk full, unwritable directory); none is left half-written."""


_OUTPUT_NAMES = ("documents.parquet", "kept.parquet", "kept.jsonl", "locations.parquet", "*_pairs.parquet",
                 "config.json", "report.json", "report.html")
"""What a run writes into its output directory (removed again when writing them fails)."""


class Deduplicator:
    """Run the cascade with one configuration, over files or records in memory."""

    def __init__(self, config: PipelineConfig | None = None, progress: ProgressCallback | None = None) -> None:
        self.config = config or PipelineConfig()
        self.progress = progress

    def _run(self, source: Source, checkpoint_dir: Path | None = None,
             prefix: IndexPrefix | None = None, config: PipelineConfig | None = None) -> CascadeState:
        return Cascade(config or self.config, self.progress, checkpoint_dir, prefix).run(source)

    def run(self, inputs: Sequence[str | Path], output: str | Path, against: str | Path | None = None) -> DedupResult:
        """Deduplicate files/directories/globs and write the output contract into ``output``.

        ``against``: an index directory (:mod:`semhash_llm.storage.index`); the input is deduplicated
        against every document indexed there as well as against itself."""
        cfg = self.config
        t0 = time.perf_counter()
        scan = scan_inputs(inputs)
        source: Source = FileSource(scan.files, cfg.reader, scan.ignored)
        prefix = None
        if against is not None:
            index = DocumentIndex.open(against)
            index.check_config(cfg)
            indexed = IndexedSource(index, FileSource(scan.files, cfg.reader, scan.ignored))
            prefix = IndexPrefix(index, index.num_documents, indexed.shards)
            source = indexed
        out = Path(output)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputWriteError(f"cannot create the output directory {out}: {exc.strerror or exc}; choose "
                                   "another --output") from exc
        judge = cfg.judge
        if judge.active and judge.use_cache and judge.cache and not Path(judge.cache).is_absolute():
            # a relative cache path lives inside the output directory (a config file can name no other)
            cfg = dataclasses.replace(cfg, judge=dataclasses.replace(judge, cache=str(out.absolute() / judge.cache)))
        state = self._run(source, out / CHECKPOINT_DIR if cfg.output.resume else None, prefix, cfg)
        table = state.documents_table()
        try:
            t_write = time.perf_counter()
            write_documents(out / "documents.parquet", table, cfg.output.compression_level)
            failpoint("during", "write")
            kept_path: Path | None = None
            kept_rows = 0
            if cfg.output.write_kept:
                kept: dict[int, dict[int, str]] = {}
                mask = state.kept_mask()
                kept_idx = np.flatnonzero(mask)
                kept_ids = state.ids.take(pa.array(kept_idx)).to_pylist()
                for d, ident in zip(kept_idx.tolist(), kept_ids):
                    kept.setdefault(int(state.file_index[d]), {})[int(state.ordinal[d])] = ident
                if self.progress:
                    self.progress("write", 0, int(mask.sum()))
                cuts = {(int(state.file_index[d]), int(state.ordinal[d])): spans for d, spans in state.cuts().items()}
                kept_path, kept_rows = write_kept(out, source, kept, cfg.reader.id_field, cfg.output.format,
                                                  cfg.output.compression_level, cuts=cuts,
                                                  text_field=cfg.reader.text_field)
                _check_kept_rows(kept_path, kept_rows, table)
                if self.progress:
                    self.progress("write", kept_rows, int(mask.sum()))
            write_seconds = time.perf_counter() - t_write
            report = build_report(state, cfg, [str(i) for i in inputs], extra_seconds=write_seconds, source=source)
            report["funnel"].append({"stage": "write", "docs_in": kept_rows, "docs_out": kept_rows,
                                     "seconds": round(write_seconds, 4), "peak_rss_mb": round(peak_rss_mb(), 1)})
            report["seconds"] = round(time.perf_counter() - t0, 3)
            report["documents_per_second"] = (round(state.num_documents / report["seconds"], 1)
                                              if report["seconds"] > 0 else None)
            if prefix is not None:
                report["against"] = _against_report(state, prefix)
            report["outputs"] = {"documents": "documents.parquet",
                                 "kept": kept_path.name if kept_path else None, "kept_rows": kept_rows}
            for name, pairs in state.pair_logs.items():
                write_documents(out / f"{name}_pairs.parquet", pairs, cfg.output.compression_level)
                report["outputs"][f"{name}_pairs"] = f"{name}_pairs.parquet"
            vis = state.visible_from
            write_documents(out / LOCATIONS, locations_table(state.file_index[vis:] - state.visible_shards_from,
                                                             state.ordinal[vis:], scan.files),
                            cfg.output.compression_level)
            report["outputs"]["locations"] = LOCATIONS
            write_json(out / "config.json", {"fingerprint": cfg.fingerprint(), "config": cfg.to_dict(),
                                             "semhash_llm_version": __version__})
            if cfg.output.html:
                report["outputs"]["html"] = "report.html"
            write_json(out / "report.json", report)
            if cfg.output.html:
                from semhash_llm.report_html import write_report_html
                from semhash_llm.runview import RunView

                t_html = time.perf_counter()
                try:
                    write_report_html(RunView.open(out))
                    logger.info("wrote %s in %.1f s", out / "report.html", time.perf_counter() - t_html)
                except RunViewError as exc:  # the decisions stand; the page can be written later
                    logger.warning("report.html not written: %s (write it with `semhash-llm report %s`)", exc, out)
            failpoint("after", "write")
        except OSError as exc:  # disk full, a file too large, an unwritable directory: nothing half-written stays
            for name in _OUTPUT_NAMES:
                for found in out.glob(name):
                    found.unlink(missing_ok=True)
            where = getattr(exc, "filename", None) or out
            again = ("the decisions are kept in its .checkpoints: free space (or fix the directory) and run the same "
                     "command again to resume" if state.checkpoints is not None else
                     "free space (or fix the directory) and run again")
            raise OutputWriteError(f"writing the outputs into {out} failed ({where}: {exc.strerror or exc}). The "
                                   f"partial outputs were removed; {again}") from exc
        if state.checkpoints is not None:
            state.checkpoints.remove()
        logger.info("deduplicated %d documents in %.1fs: %s", state.num_documents, report["seconds"],
                    report["summary"])
        return DedupResult(documents=table, report=report, output_dir=out, pair_logs=state.pair_logs)

    def deduplicate(self, records: Iterable[Mapping[str, Any] | str]) -> DedupResult:
        """Deduplicate records held in memory (mappings with the text field, or strings)."""
        source = MemorySource(records, self.config.reader)
        state = self._run(source)
        report = build_report(state, self.config, ["<records>"], source=source)
        items = source.items
        field = self.config.reader.text_field
        cuts = state.cuts()
        if cuts:  # kept records carry their text without the viral fragments, as kept.parquet does
            items = [{**r, field: remove_spans(str(r[field]), cuts[i])} if i in cuts else r
                     for i, r in enumerate(items)]
        return DedupResult(documents=state.documents_table(), report=report, records=items,
                           pair_logs=state.pair_logs)


def deduplicate(
    records: Iterable[Mapping[str, Any] | str],
    config: PipelineConfig | None = None,
    progress: ProgressCallback | None = None,
) -> DedupResult:
    """Deduplicate records in memory with ``config`` (default: the full cascade, ``semhash-llm stages``)."""
    return Deduplicator(config, progress).deduplicate(records)
