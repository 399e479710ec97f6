"""The cascade: read → normalize → 1 Bloom exact → features → LSH candidates → cluster → select.

:class:`Cascade` runs the stages in order over a :class:`~semhash_llm.io.sources.Source`,
streaming the input in batches. Per document it keeps only fixed-size state (digest,
length, location, signature row); texts live only as long as their batch. Every stage
records what entered and left it, which forms the funnel of ``report.json``.

Later stages (SPH blocking, AW-MinHash, passages, the verifier and the judge) plug in as
further producers of accepted edges before clustering.
"""

from __future__ import annotations

import logging
import resource
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from semhash_llm.config import PipelineConfig
from semhash_llm.io.readers import InputError, reason_category
from semhash_llm.io.sources import Source
from semhash_llm.select import EDGE_KINDS, Selection, select_survivors
from semhash_llm.sketch.unionfind import UnionFind
from semhash_llm.stages.exact import BloomExactStage, confirm_exact
from semhash_llm.stages.near import Edges, MinHashLSHStage
from semhash_llm.stages.semantic import SPHStage
from semhash_llm.text.normalize import char_classes, normalize_batch
from semhash_llm.text.tokenize import tokenize_batch

__all__ = ["Cascade", "CascadeState", "ProgressCallback", "DocStatus", "peak_rss_mb"]

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[str, int, "int | None"], None]
"""``progress(stage, done, total)``: called as documents pass a stage (total may be None)."""


class DocStatus:
    """Per-document status codes."""

    OK = 0
    SKIPPED = 1  # bad record, skipped with on_error='skip'
    NO_TOKENS = 2  # only punctuation/symbols/emoji: exact duplicates only, no near-duplicate features


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
    exact_rep: np.ndarray
    selection: Selection
    funnel: list[StageStats]
    source_names: list[str]
    seconds: float

    @property
    def num_documents(self) -> int:
        return int(self.status.shape[0])

    def documents_table(self) -> pa.Table:
        """The ``documents.parquet`` contract table (plus ``skip_reason``), in input order.

        Built column by column with Arrow kernels, without a Python object per document.
        """
        n = self.num_documents
        sel = self.selection
        keeper = sel.keeper
        index = np.arange(n)
        skipped = self.status == DocStatus.SKIPPED
        removed = (keeper != index) | skipped
        in_cluster = sel.cluster_size > 1
        is_dup = in_cluster & (keeper != index)
        # Relation codes: the kind of the weakest accepted edge on the path to the survivor (so a
        # copy found by LSH with the exact stage off says lsh, not bloom), then "skipped".
        kinds = sorted(EDGE_KINDS)
        names = [EDGE_KINDS[k] for k in kinds] + [("skipped", "reader")]
        code = np.searchsorted(np.asarray(kinds), np.maximum(sel.via_kind, kinds[0]))
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
        return pa.table(
            {
                "id": self.ids,
                "action": action,
                "duplicate_of": pc.if_else(pa.array(is_dup), keeper_ids, null_str),
                "relation": relation,
                "cluster_id": pc.if_else(pa.array(in_cluster), keeper_ids, null_str),
                "score": pa.array(score, pa.float64(), mask=~is_dup),
                "decided_by": decided,
                "fragments": pa.ListArray.from_arrays(
                    pa.array(np.zeros(n + 1, dtype=np.int32)),
                    pa.array([], pa.list_(pa.int64(), 2)),
                ),
                "skip_reason": pa.array(reasons, pa.string()),
            }
        )

    def kept_mask(self) -> np.ndarray:
        """True for documents that are written to the kept output."""
        return (self.selection.keeper == np.arange(self.num_documents)) & (self.status != DocStatus.SKIPPED)


class Cascade:
    """Runs the configured stages over a source."""

    def __init__(self, config: PipelineConfig, progress: ProgressCallback | None = None) -> None:
        self.config = config
        self.progress = progress

    def _tick(self, stage: str, done: int, total: int | None = None) -> None:
        if self.progress is not None:
            self.progress(stage, done, total)

    def run(self, source: Source) -> CascadeState:
        cfg = self.config
        t_start = time.perf_counter()
        classes = char_classes(cfg.normalize.strip_punctuation)
        bloom = BloomExactStage(cfg.bloom) if cfg.bloom.enabled else None
        near = MinHashLSHStage(cfg.minhash) if cfg.minhash.enabled else None
        sph = SPHStage(cfg.sph) if cfg.sph.enabled else None
        prio_field = cfg.select.priority_field if cfg.select.keep == "priority" else None

        id_chunks: list[pa.Array] = []
        file_index = _Growable(np.int32)
        ordinal = _Growable(np.int64)
        status = _Growable(np.uint8)
        lengths = _Growable(np.int64)
        prios = _Growable(np.float64)
        d_hi = _Growable(np.uint64)
        d_lo = _Growable(np.uint64)
        hits_all = _Growable(np.bool_)
        skip_reasons: dict[int, str] = {}
        read = StageStats("read")
        st_bloom = StageStats("bloom")
        st_sign = StageStats("features")
        n = 0
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
            del normalized
            st[(tb.num_tokens == 0) & (st == DocStatus.OK)] = DocStatus.NO_TOKENS
            status.extend(st)
            d_hi.extend(tb.digest_hi)
            d_lo.extend(tb.digest_lo)
            # Documents without tokens (only symbols or emoji) can still be exact duplicates.
            eligible = st != DocStatus.SKIPPED
            read.seconds += time.perf_counter() - t0
            t1 = time.perf_counter()
            hits = bloom.process(tb.digest_hi, tb.digest_lo, eligible) if bloom else np.zeros(size, np.bool_)
            hits_all.extend(hits)
            st_bloom.seconds += time.perf_counter() - t1
            t2 = time.perf_counter()
            if near is not None:
                to_sign = np.flatnonzero((st == DocStatus.OK) & ~hits)
                # Bloom hits skip the signature; a hit that turns out to be a false positive is
                # re-signed from its source after confirmation (see _repair).
                near.sign(tb, to_sign, to_sign + n)
                if sph is not None:
                    sph.encode([texts[j] for j in to_sign.tolist()])
            st_sign.seconds += time.perf_counter() - t2
            n += size
            read.docs_in = n
            self._tick("read", n)
        read.docs_out = int(np.count_nonzero(status.view() == DocStatus.OK))
        read.docs_removed = len(skip_reasons)
        read.peak_rss_mb = peak_rss_mb()
        read.details = {
            "skipped": len(skip_reasons),
            "skipped_by_reason": _reason_counts(skip_reasons),
            "no_tokens": int(np.count_nonzero(status.view() == DocStatus.NO_TOKENS)),
            "files": len(source.names),
        }
        st_status = status.view()
        hi, lo = d_hi.view(), d_lo.view()
        eligible_all = st_status != DocStatus.SKIPPED
        hits_v = hits_all.view()

        # ---- stage 1: confirm the Bloom hits
        t1 = time.perf_counter()
        if bloom is not None:
            exact_rep = confirm_exact(hi, lo, eligible_all, hits_v)
        else:
            exact_rep = np.arange(n, dtype=np.int64)
        is_exact_dup = exact_rep != np.arange(n)
        false_pos = np.flatnonzero(hits_v & ~is_exact_dup)
        # Only documents with tokens have near-duplicate features to repair.
        to_repair = false_pos[st_status[false_pos] == DocStatus.OK]
        st_bloom.seconds += time.perf_counter() - t1
        st_bloom.docs_in = int(eligible_all.sum())
        st_bloom.docs_removed = int(is_exact_dup.sum())
        st_bloom.docs_out = st_bloom.docs_in - st_bloom.docs_removed
        st_bloom.peak_rss_mb = peak_rss_mb()
        if bloom is not None:
            st_bloom.details = {**bloom.stats(), "confirmed_exact": st_bloom.docs_removed,
                                "false_positives": int(false_pos.size)}
        self._tick("bloom", n, n)

        # ---- repair: Bloom false positives still need their features
        if near is not None and to_repair.size:
            t2 = time.perf_counter()
            self._repair(source, near, sph, to_repair, file_index.view(), ordinal.view(), classes)
            st_sign.seconds += time.perf_counter() - t2
            st_sign.details["repaired_false_positives"] = int(to_repair.size)
        st_sign.docs_in = int(np.count_nonzero((st_status == DocStatus.OK) & ~is_exact_dup))
        st_sign.docs_out = near.num_signed if near else 0
        st_sign.peak_rss_mb = peak_rss_mb()
        if sph is not None:
            st_sign.details["sph_encode_seconds"] = round(sph.encode_seconds_, 3)
            st_sign.details["minhash_seconds"] = round(st_sign.seconds - sph.encode_seconds_, 3)

        # ---- union: exact edges, then LSH edges
        uf = UnionFind(n)
        dup_idx = np.flatnonzero(is_exact_dup)
        uf.union_many(dup_idx, exact_rep[dup_idx])
        exact_edges = Edges(dup_idx, exact_rep[dup_idx], np.ones(dup_idx.size, np.float32),
                            np.zeros(dup_idx.size, np.uint8))
        st_lsh = StageStats("lsh", docs_in=st_sign.docs_out)
        t3 = time.perf_counter()
        if near is not None:
            lsh_edges = near.link(uf.parent_)
            st_lsh.details = near.stats()
            st_lsh.pairs_in = st_lsh.details["pairs_proposed"]
            st_lsh.pairs_out = st_lsh.details["pairs_accepted"]
        else:
            lsh_edges = Edges.empty()
        st_lsh.docs_removed = len(lsh_edges)
        st_lsh.docs_out = st_lsh.docs_in - st_lsh.docs_removed
        st_lsh.seconds = time.perf_counter() - t3
        st_lsh.peak_rss_mb = peak_rss_mb()
        self._tick("lsh", n, n)
        st_sph = StageStats("sph", docs_in=st_lsh.docs_out)
        t_sph = time.perf_counter()
        if sph is not None and near is not None:
            sph_edges = sph.link(near, uf.parent_)
            st_sph.details = dict(sph.details_)
            st_sph.pairs_in = int(sph.details_["pairs_proposed"])
            st_sph.pairs_out = len(sph_edges)
        else:
            sph_edges = Edges.empty()
            st_sph.details = {"enabled": False}
        st_sph.docs_removed = len(sph_edges)
        st_sph.docs_out = st_sph.docs_in - st_sph.docs_removed
        st_sph.seconds = time.perf_counter() - t_sph
        st_sph.peak_rss_mb = peak_rss_mb()
        self._tick("sph", n, n)

        # ---- cluster and select
        t4 = time.perf_counter()
        edges = Edges.concat([exact_edges, lsh_edges, sph_edges])
        roots = uf.roots()
        selection = select_survivors(roots, edges.a, edges.b, edges.score, edges.kind, lengths.view(),
                                     prios.view(), cfg.select)
        st_select = StageStats("select", docs_in=n)
        removed = int(np.count_nonzero(selection.keeper != np.arange(n)))
        st_select.docs_removed = removed
        st_select.docs_out = n - removed - len(skip_reasons)
        st_select.seconds = time.perf_counter() - t4
        st_select.peak_rss_mb = peak_rss_mb()
        st_select.details = {"clusters": int(np.count_nonzero((selection.cluster_size > 1) &
                                                              (selection.keeper == np.arange(n)))),
                             "keep_policy": cfg.select.keep}
        ids = pa.concat_arrays(id_chunks) if id_chunks else pa.array([], pa.string())
        _check_unique_ids(ids, file_index.view(), ordinal.view(), source)
        funnel = [read, st_bloom, st_sign, st_lsh, st_sph, st_select]
        return CascadeState(
            ids=ids, file_index=file_index.view().copy(), ordinal=ordinal.view().copy(), status=st_status.copy(),
            lengths=lengths.view().copy(), skip_reasons=skip_reasons, exact_rep=exact_rep, selection=selection,
            funnel=funnel, source_names=list(source.names),
            seconds=time.perf_counter() - t_start,
        )

    def _repair(self, source: Source, near: MinHashLSHStage, sph: SPHStage | None, docs: np.ndarray,
                file_index: np.ndarray, ordinal: np.ndarray, classes: np.ndarray) -> None:
        """Sign documents that the Bloom filter wrongly took for duplicates (re-read from source)."""
        logger.info("re-signing %d Bloom false positive(s)", docs.size)
        wanted: dict[int, dict[int, int]] = {}
        for d in docs.tolist():
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
                got_texts.append(value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value))
                found += 1
            if found != len(by_ord):
                raise InputError(source.names[fi], f"{len(by_ord) - found} record(s) read in the first pass were "
                                 "missing when re-read to repair Bloom false positives; the file changed during "
                                 "the run. Run again on a file that does not change")
        tb = tokenize_batch(normalize_batch(got_texts, self.config.normalize), classes, self.config.shingle)
        near.sign(tb, np.arange(len(got_docs)), np.asarray(got_docs, dtype=np.int64))
        if sph is not None:
            sph.encode(got_texts)


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
