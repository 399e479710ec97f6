"""``semhash-llm bench speed``: end-to-end throughput against datasketch and rensa, one process.

A synthetic corpus (by default 100k documents of ~2 KB: Zipf-distributed words from a
synthetic vocabulary) gets planted near duplicates (1-2% of the words edited) and one hot
spot (a document copied 10k times with a date line and a signature that vary). Every system
then deduplicates the same texts in memory, in the same process, one after the other:

* ``semhash-llm`` — :func:`semhash_llm.deduplicate`, the same job as the peers
  (``--only bloom,lsh``): Bloom exact and MinHash LSH (128 permutations, word 5-grams,
  threshold 0.8, verified pairs);
* ``semhash-llm+sph`` — the full default cascade (MinHash LSH at 0.6, AW-MinHash, SPH, the
  verifier and the passage stage);
* ``datasketch`` — ``MinHash(num_perm=128).update_batch`` over word 5-grams and
  ``MinHashLSH(threshold=0.8)``, query-then-insert (a document is removed when the index
  returns a candidate);
* ``rensa`` — ``RMinHashDeduplicator(threshold=0.8, num_perm=128, use_lsh=True)``, rensa's
  own verified LSH pipeline, on the same word 5-gram shingles;
* ``datatrove`` — datatrove's MinHash pipeline (signatures, buckets, clusters, filter) with its
  defaults, on its own tokenizer, over JSONL shards, one task per core (extra ``[bench]``).

``--sizes 10000,100000,1000000`` runs every system at each size (a corpus of that size with a
tenth hot-spot copies) and prints how the cost grows: each system's seconds, documents/s and
peak memory per size, and the exponent of a power-law fit of seconds against documents (1.0
is linear); ``--plot PATH`` draws the curves as a self-contained SVG.

The peers' shingles are made by one shared tokenizer (lower-case ``\\w+`` words, 5-grams),
and their time includes it, as ours includes our tokenizer. Reported: documents/s, peak
memory above the process baseline (sampled from ``/proc/*/statm`` of this process and its child
processes), recall of the planted
duplicates (share removed) and false removals (unique documents removed).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import re
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

__all__ = ["SpeedCorpus", "make_speed_corpus", "SpeedRow", "run_speed", "run_growth", "format_growth", "growth_svg",
           "growth_exponent", "add_speed_arguments", "run_speed_command", "parse_max_docs"]

_WORD = re.compile(r"\w+")


@dataclass
class SpeedCorpus:
    """Texts plus which documents are planted duplicates and of what kind."""

    texts: list[str]
    kind: np.ndarray  # 0 unique, 1 near duplicate, 2 hot-spot copy
    num_unique: int


def make_speed_corpus(num_docs: int = 100_000, doc_chars: int = 2000, near_fraction: float = 0.1,
                      hot_copies: int = 10_000, seed: int = 0, replace_rate: float | None = None) -> SpeedCorpus:
    """Build the synthetic corpus (deterministic by seed); originals come before their copies.

    ``replace_rate``: near copies get exactly this share of their words replaced by other words
    (instead of 0.5-2% of words replaced, deleted or inserted)."""
    if replace_rate is not None and not 0.0 < replace_rate < 1.0:
        raise ValueError(f"replace_rate must be in (0, 1); got {replace_rate}")
    if hot_copies + int(near_fraction * num_docs) >= num_docs:
        raise ValueError("near duplicates and hot-spot copies must leave room for unique documents; "
                         f"got num_docs={num_docs}, near_fraction={near_fraction}, hot_copies={hot_copies}")
    rng = np.random.default_rng(seed)
    syllables = ["ka", "to", "ri", "mu", "se", "na", "lo", "vi", "de", "po", "ra", "ne", "ti", "sa", "go",
                 "mi", "ku", "be", "la", "zo", "fe", "hu", "ja", "qi", "wu", "xe", "yo", "ce", "di", "pa"]
    vocab_size = 30_000
    lens = rng.integers(1, 4, size=vocab_size)
    picks = rng.integers(0, len(syllables), size=(vocab_size, 3))
    vocab = sorted({"".join(syllables[j] for j in picks[i, : lens[i]]) + str(i % 7) for i in range(vocab_size)})
    vocab_arr = np.array(vocab, dtype=object)
    ranks = np.arange(1, len(vocab) + 1, dtype=np.float64)
    p = 1.0 / ranks**1.05
    p /= p.sum()
    num_near = int(near_fraction * num_docs)
    num_unique = num_docs - num_near - hot_copies
    words_per_doc = max(5, doc_chars // 7)
    doc_lens = rng.integers(int(words_per_doc * 0.8), int(words_per_doc * 1.2) + 1, size=num_unique)
    all_words = rng.choice(len(vocab), size=int(doc_lens.sum()), p=p).astype(np.int32)
    offsets = np.r_[0, np.cumsum(doc_lens)]
    texts = [" ".join(vocab_arr[all_words[offsets[i]:offsets[i + 1]]]) for i in range(num_unique)]
    kind = [0] * num_unique
    near_src = rng.integers(0, num_unique, size=num_near)
    extra: list[tuple[float, str, int]] = []
    for src in near_src:
        words = list(vocab_arr[all_words[offsets[src]:offsets[src + 1]]])
        rate = rng.uniform(0.005, 0.02) if replace_rate is None else replace_rate
        n_edit = max(1, int(rate * len(words)) if replace_rate is None else round(rate * len(words)))
        for pos in sorted(rng.choice(len(words), size=n_edit, replace=False), reverse=True):
            op = rng.integers(3) if replace_rate is None else 0
            if op == 0:
                words[pos] = vocab[int(rng.integers(len(vocab)))]
            elif op == 1:
                del words[pos]
            else:
                words.insert(pos, vocab[int(rng.integers(len(vocab)))])
        extra.append((rng.random(), " ".join(words), 1))
    hot = texts[0]
    for k in range(hot_copies):
        date = f"{2020 + k % 7}-{1 + k % 12:02d}-{1 + k % 28:02d}"
        sig = "" if k % 3 else f"\n-- posted by user{k % 97}"
        extra.append((rng.random(), f"Updated {date}\n{hot}{sig}", 2))
    extra.sort(key=lambda t: t[0])
    texts.extend(t for _, t, _ in extra)
    kind.extend(k for _, _, k in extra)
    return SpeedCorpus(texts=texts, kind=np.asarray(kind, dtype=np.int8), num_unique=num_unique)


def shingle_words(text: str, n: int = 5) -> list[str]:
    """The peers' shared shingles: lower-case ``\\w+`` words, joined in n-grams."""
    w = _WORD.findall(text.lower())
    if len(w) < n:
        return [" ".join(w)] if w else []
    return [" ".join(w[i:i + n]) for i in range(len(w) - n + 1)]


class _PeakRSS:
    """Samples the resident set size every few milliseconds in a background thread."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def rss(self) -> int:
        """This process's resident set plus its child processes' (datatrove's workers)."""
        total = 0
        for pid in [os.getpid(), *self._children()]:
            try:
                with open(f"/proc/{pid}/statm") as fh:
                    total += int(fh.read().split()[1]) * self.page
            except (OSError, ValueError, IndexError):  # a child that just ended
                continue
        return total

    @staticmethod
    def _children() -> list[int]:
        try:
            with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as fh:
                direct = [int(x) for x in fh.read().split()]
        except OSError:
            return []
        out, todo = [], list(direct)
        while todo:  # grandchildren too (an executor's pool)
            pid = todo.pop()
            out.append(pid)
            try:
                with open(f"/proc/{pid}/task/{pid}/children") as fh:
                    todo.extend(int(x) for x in fh.read().split())
            except OSError:
                continue
        return out

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss())
            time.sleep(self.interval)

    def __enter__(self) -> _PeakRSS:
        self.base = self.rss()
        self.peak = self.base
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.rss())

    @property
    def increase_mib(self) -> float:
        return (self.peak - self.base) / 2**20


@dataclass
class SpeedRow:
    """One system's result."""

    system: str
    seconds: float
    docs_per_s: float
    peak_mib: float
    recall_near: float
    recall_hot: float
    recall_all: float
    false_removals: int
    note: str = ""


def _run_semhash(texts: list[str]) -> np.ndarray:
    from semhash_llm import PipelineConfig, deduplicate
    from semhash_llm.pipeline.registry import stages as registered_stages

    # `--only bloom,lsh`, built from the stage list so that a new stage never joins this row unseen;
    # keep='first' like the peers' query-then-insert loops, so "removed" means the same thing.
    sections: dict[str, dict[str, object]] = {info.section: {"enabled": info.name in ("bloom", "lsh")}
                                              for info in registered_stages()
                                              if info.has_section}
    sections["minhash"]["threshold"] = 0.8  # the peers' threshold (the cascade's default, 0.6, has a verifier behind it)
    res = deduplicate(texts, PipelineConfig.from_dict({"select": {"keep": "first"}, **sections}))
    return np.asarray(res.documents.column("action").to_pylist()) == "remove"


def _run_semhash_full(texts: list[str]) -> tuple[np.ndarray, str]:
    from semhash_llm import PipelineConfig, deduplicate

    res = deduplicate(texts, PipelineConfig.from_dict({"select": {"keep": "first"}}))
    total = sum(row["seconds"] for row in res.report["funnel"])
    parts = [f"{row['stage']} {row['seconds']:.1f}s" for row in res.report["funnel"] if row["seconds"] >= 0.05]
    ver = next((row for row in res.report["funnel"] if row["stage"] == "mgfn"), None)
    note = "stages: " + ", ".join(parts) + f" of {total:.1f}s"
    if ver is not None:
        d = ver.get("details", {})
        note += (f"; verifier {100 * ver['seconds'] / max(total, 1e-9):.1f}% of the time, "
                 f"{d.get('pairs_verified', 0):,} pairs verified of {d.get('candidate_pairs', 0):,} candidates")
    return np.asarray(res.documents.column("action").to_pylist()) == "remove", note


class _StudentEncoder:
    """MinishLab semhash's encoder here: the shipped static SPH student (its default, a model2vec
    static model, cannot be downloaded on an offline machine; the student is of the same kind)."""

    def __init__(self) -> None:
        from semhash_llm.sph.student import load_student

        self.student = load_student()

    def encode(self, inputs: Any, **kwargs: Any) -> np.ndarray:
        return np.asarray(self.student.encode(list(inputs)), dtype=np.float32)


def _run_minishlab(texts: list[str]) -> tuple[np.ndarray, str]:
    try:
        from semhash import SemHash
    except ImportError as exc:
        raise ImportError("MinishLab semhash is not installed") from exc
    sh = SemHash.from_records(records=[{"id": str(i), "text": t} for i, t in enumerate(texts)], columns=["text"],
                              model=_StudentEncoder())
    result = sh.self_deduplicate(threshold=0.9)
    removed = np.zeros(len(texts), dtype=bool)
    for dup in result.filtered:
        removed[int(dup.record["id"])] = True
    return removed, (f"semhash {_version('semhash')} self_deduplicate(threshold=0.9), encoder: the shipped static "
                     "SPH student (its default model2vec model is not downloadable offline)")


def _run_datasketch(texts: list[str]) -> np.ndarray:
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=0.8, num_perm=128)
    removed = np.zeros(len(texts), dtype=bool)
    for i, t in enumerate(texts):
        m = MinHash(num_perm=128)
        m.update_batch([s.encode("utf-8") for s in shingle_words(t)])
        if lsh.query(m):
            removed[i] = True
        else:
            lsh.insert(str(i), m)
    return removed


def _run_rensa(texts: list[str]) -> np.ndarray:
    from rensa import RMinHashDeduplicator

    dedup = RMinHashDeduplicator(threshold=0.8, num_perm=128, use_lsh=True)
    keep = dedup.add_pairs((str(i), shingle_words(t)) for i, t in enumerate(texts))
    return ~np.asarray(keep, dtype=bool)


def _run_datatrove(texts: list[str]) -> tuple[np.ndarray, str]:
    """datatrove's four-step MinHash pipeline with its defaults (word 5-grams, 14 buckets of 8
    hashes), run by its ``LocalPipelineExecutor`` on one task per core over JSONL shards in a
    temporary folder (writing them is part of the time, as its file-based design asks)."""
    import gzip
    import tempfile

    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (
        MinhashConfig,
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    try:  # datatrove logs every task's stats through loguru: keep the table readable
        from loguru import logger as loguru_logger

        loguru_logger.disable("datatrove")
    except ImportError:
        pass
    tasks = max(os.cpu_count() or 1, 1)
    cfg = MinhashConfig()
    with tempfile.TemporaryDirectory(prefix="semhash-llm-datatrove-") as tmp:
        d = Path(tmp)
        (d / "input").mkdir()
        per = -(-len(texts) // tasks)
        for k in range(tasks):  # one shard per task, in input order
            with open(d / "input" / f"{k:03d}.jsonl", "w", encoding="utf-8") as fh:
                for i in range(k * per, min((k + 1) * per, len(texts))):
                    fh.write(json.dumps({"id": str(i), "text": texts[i]}) + "\n")

        def run(pipeline: list[object], n: int, name: str) -> None:
            LocalPipelineExecutor(pipeline=pipeline, tasks=n, workers=min(n, tasks),  # type: ignore[arg-type]
                                  logging_dir=str(d / "logs" / name), skip_completed=False).run()

        run([JsonlReader(str(d / "input")), MinhashDedupSignature(output_folder=str(d / "sigs"), config=cfg)],
            tasks, "sigs")
        run([MinhashDedupBuckets(input_folder=str(d / "sigs"), output_folder=str(d / "buckets"), config=cfg)],
            cfg.num_buckets, "buckets")
        run([MinhashDedupCluster(input_folder=str(d / "buckets"), output_folder=str(d / "remove_ids"), config=cfg)],
            1, "cluster")
        run([JsonlReader(str(d / "input")),
             MinhashDedupFilter(input_folder=str(d / "remove_ids"), exclusion_writer=JsonlWriter(str(d / "removed")))],
            tasks, "filter")
        removed = np.zeros(len(texts), dtype=bool)
        for f in sorted((d / "removed").glob("*")):
            with gzip.open(f, "rt", encoding="utf-8") as fh:
                for line in fh:
                    removed[int(json.loads(line)["id"])] = True
    return removed, (f"datatrove {_version('datatrove')}, defaults: word 5-grams, {cfg.num_buckets} buckets x "
                     f"{cfg.hashes_per_bucket} hashes (threshold ~0.72), {tasks} tasks")


def _version(package: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "?"


SYSTEMS: dict[str, Callable[[list[str]], np.ndarray | tuple[np.ndarray, str]]] = {
    "semhash-llm": _run_semhash,
    "semhash-llm+sph": _run_semhash_full,
    "rensa": _run_rensa,
    "datasketch": _run_datasketch,
    "datatrove": _run_datatrove,
    "semhash": _run_minishlab,
}


def run_speed(corpus: SpeedCorpus, systems: list[str], on_row: Callable[[SpeedRow], None] | None = None,
              skip: dict[str, str] | None = None, warm_docs: int = 200) -> list[SpeedRow]:
    """Run each system on the corpus (after an untimed warm-up run on its first ``warm_docs``
    documents) and score it.

    ``on_row`` is called with each row as soon as it is measured (a long run shows what it has);
    ``skip`` maps a system to the reason it is not run on this corpus (its row says so)."""
    rows: list[SpeedRow] = []
    warm = corpus.texts[:warm_docs]

    def emit(row: SpeedRow) -> None:
        rows.append(row)
        if on_row is not None:
            on_row(row)

    def not_run(name: str, why: str) -> SpeedRow:
        nan = float("nan")
        return SpeedRow(name, nan, nan, nan, nan, nan, nan, -1, note=f"not run: {why}")

    for name in systems:
        if skip and name in skip:
            emit(not_run(name, skip[name]))
            continue
        fn = SYSTEMS[name]
        try:
            fn(warm)  # JIT compilation and imports are one-time costs, outside the timing
        except ImportError as exc:
            emit(not_run(name, f"{exc} (pip install 'semhash-llm[bench]')"))
            continue
        gc.collect()
        with _PeakRSS() as mem:
            t0 = time.perf_counter()
            out = fn(corpus.texts)
            secs = time.perf_counter() - t0
        removed, note = out if isinstance(out, tuple) else (out, "")
        near = corpus.kind == 1
        hot = corpus.kind == 2
        planted = corpus.kind > 0
        emit(SpeedRow(
            system=name, seconds=secs, docs_per_s=len(corpus.texts) / secs, peak_mib=mem.increase_mib,
            recall_near=float(removed[near].mean()) if near.any() else float("nan"),
            recall_hot=float(removed[hot].mean()) if hot.any() else float("nan"),
            recall_all=float(removed[planted].mean()) if planted.any() else float("nan"),
            false_removals=int(removed[corpus.kind == 0].sum()), note=note,
        ))
        del removed
        gc.collect()
    return rows


def format_table(rows: list[SpeedRow], num_docs: int) -> str:
    """A Markdown table, with each system's speed relative to datasketch."""
    base = next((r.docs_per_s for r in rows if r.system == "datasketch"), None)
    lines = [
        f"| system | docs/s | vs datasketch | seconds ({num_docs:,} docs) | peak MiB | recall near | "
        "recall hot spot | recall all | false removals |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r.false_removals < 0:
            lines.append(f"| {r.system} | – | – | – | – | – | – | – | – |")
            continue
        rel = f"{r.docs_per_s / base:.1f}x" if base else "-"
        lines.append(f"| {r.system} | {r.docs_per_s:,.0f} | {rel} | {r.seconds:.1f} | {r.peak_mib:,.0f} | "
                     f"{r.recall_near:.4f} | {r.recall_hot:.4f} | {r.recall_all:.4f} | {r.false_removals} |")
    notes = [f"- {r.system}: {r.note}" for r in rows if r.note]
    return "\n".join(lines + ([""] + notes if notes else []))


def growth_exponent(sizes: list[int], seconds: list[float]) -> float:
    """The exponent ``k`` of a least-squares fit ``seconds ~ c * docs^k`` (1.0: linear)."""
    ok = [(n, t) for n, t in zip(sizes, seconds) if n > 0 and t > 0 and np.isfinite(t)]
    if len(ok) < 2:
        return float("nan")
    x, y = np.log([n for n, _ in ok]), np.log([t for _, t in ok])
    return float(np.polyfit(x, y, 1)[0])


def run_growth(sizes: list[int], systems: list[str], doc_chars: int = 2000, seed: int = 0,
               max_docs: dict[str, int] | None = None,
               on_row: Callable[[int, SpeedRow], None] | None = None) -> dict[int, list[SpeedRow]]:
    """:func:`run_speed` at each size (near duplicates a tenth, hot-spot copies a tenth).

    ``max_docs`` caps a system's corpus size (its larger sizes are rows marked not run);
    ``on_row(size, row)`` sees each row as it is measured."""
    out: dict[int, list[SpeedRow]] = {}
    caps = max_docs or {}
    for k, n in enumerate(sizes):
        corpus = make_speed_corpus(n, doc_chars, 0.1, max(n // 10, 1), seed)
        skip = {name: f"above its size cap ({caps[name]:,} documents, --max-docs)" for name in systems
                if name in caps and n > caps[name]}
        row_cb: Callable[[SpeedRow], None] | None = None
        if on_row is not None:
            row_cb = functools.partial(on_row, n)
        # The first size is warmed up on (up to 10k of) its own documents: some compiled kernels
        # (numba, ~15 s on a fresh install) are first reached by thousands of documents, not 200.
        out[n] = run_speed(corpus, systems, row_cb, skip, warm_docs=min(n, 10_000) if k == 0 else 200)
        del corpus
        gc.collect()
    return out


def parse_max_docs(spec: str | None, systems: list[str]) -> dict[str, int]:
    """``datatrove=100000,semhash=100000`` → a size cap per system, checked against the systems run."""
    caps: dict[str, int] = {}
    for part in (spec or "").split(","):
        if not part.strip():
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in SYSTEMS or not value.strip().isdigit():
            raise ValueError(f"--max-docs expects SYSTEM=DOCS pairs separated by commas with SYSTEM one of "
                             f"{', '.join(SYSTEMS)}; got {part!r}")
        if name not in systems:
            raise ValueError(f"--max-docs names {name!r}, which is not in --speed-systems ({', '.join(systems)})")
        caps[name] = int(value)
    return caps


def format_growth(results: dict[int, list[SpeedRow]]) -> str:
    """Seconds, documents/s and peak MiB per system and size, and each system's growth exponent."""
    sizes = sorted(results)
    systems = [r.system for r in results[sizes[0]]]
    head = "| system | " + " | ".join(f"{n:,} docs: s / docs/s / MiB" for n in sizes) + " | growth exponent |"
    lines = [head, "|---|" + "---:|" * (len(sizes) + 1)]
    for name in systems:
        cells, secs = [], []
        for n in sizes:
            r = next(x for x in results[n] if x.system == name)
            if r.false_removals < 0:
                cells.append("not run")
                secs.append(float("nan"))
            else:
                cells.append(f"{r.seconds:,.1f} / {r.docs_per_s:,.0f} / {r.peak_mib:,.0f}")
                secs.append(r.seconds)
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {growth_exponent(sizes, secs):.2f} |")
    return "\n".join(lines)


def growth_svg(results: dict[int, list[SpeedRow]]) -> str:
    """Seconds against documents, log-log, one line per system."""
    from semhash_llm.bench.plot import line_chart_svg

    sizes = sorted(results)
    series: dict[str, list[tuple[float, float]]] = {}
    for n in sizes:
        for r in results[n]:
            if r.false_removals >= 0:
                series.setdefault(r.system, []).append((float(n), r.seconds))
    return line_chart_svg(series, title="Whole-process time as the corpus grows (2 KB documents)",
                          x_label="documents", y_label="seconds")


def add_speed_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``semhash-llm bench speed``."""
    g = p.add_argument_group("speed benchmark (bench speed)")
    g.add_argument("--docs", type=int, default=100_000, help="corpus size (default 100000)")
    g.add_argument("--doc-chars", type=int, default=2000)
    g.add_argument("--hot-copies", type=int, default=10_000)
    g.add_argument("--near-fraction", type=float, default=0.1)
    g.add_argument("--replace-rate", type=float,
                   help="near copies with exactly this share of words replaced (e.g. 0.03) instead of 0.5-2%% edits")
    g.add_argument("--speed-systems", default="semhash-llm,semhash-llm+sph,rensa,datasketch,datatrove",
                   help="comma list of: " + ", ".join(SYSTEMS))
    g.add_argument("--speed-seed", type=int, default=0)
    g.add_argument("--speed-json", help="also write the rows as JSON to this path")
    g.add_argument("--sizes", help="comma list of corpus sizes for the growth table (e.g. 10000,100000,1000000)")
    g.add_argument("--plot", help="with --sizes: write the growth curves as SVG to this path")
    g.add_argument("--max-docs", help="with --sizes: largest corpus a system is run on, as SYSTEM=DOCS pairs "
                                      "(e.g. datatrove=100000); its larger sizes are listed as not run")


def _write_growth_json(path: str, results: dict[int, list[SpeedRow]]) -> None:
    from semhash_llm.io.atomic import write_text_atomic

    write_text_atomic(Path(path), json.dumps({str(n): [asdict(r) for r in rows] for n, rows in results.items()},
                                             indent=2) + "\n")


def run_speed_command(args: argparse.Namespace) -> int:
    """Build the corpus, run the systems, print the table."""
    systems = [s.strip() for s in args.speed_systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise ValueError(f"unknown system(s) {', '.join(unknown)}; expected any of {', '.join(SYSTEMS)}")
    if getattr(args, "sizes", None):
        sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
        if not sizes or min(sizes) < 100:
            raise ValueError(f"--sizes needs corpus sizes of at least 100 documents; got {args.sizes!r}")
        caps = parse_max_docs(getattr(args, "max_docs", None), systems)
        so_far: dict[int, list[SpeedRow]] = {}

        def on_row(n: int, row: SpeedRow) -> None:
            # each row as it is measured: a run of an hour shows (and keeps) what it has
            so_far.setdefault(n, []).append(row)
            if row.false_removals < 0:
                print(f"[{n:,} docs] {row.system}: {row.note}", flush=True)
            else:
                print(f"[{n:,} docs] {row.system}: {row.seconds:,.1f} s, {row.docs_per_s:,.0f} docs/s, "
                      f"peak {row.peak_mib:,.0f} MiB", flush=True)
            if args.speed_json:
                _write_growth_json(args.speed_json, so_far)

        results = run_growth(sizes, systems, args.doc_chars, args.speed_seed, caps, on_row)
        for n in sorted(results):
            print(f"\n{n:,} documents:")
            print(format_table(results[n], n))
        print("\n" + format_growth(results))
        if args.plot:
            Path(args.plot).write_text(growth_svg(results), encoding="utf-8")
            print(f"growth curves: {args.plot}")
        if args.speed_json:
            _write_growth_json(args.speed_json, results)
        return 0
    t0 = time.perf_counter()
    corpus = make_speed_corpus(args.docs, args.doc_chars, args.near_fraction, args.hot_copies, args.speed_seed,
                               args.replace_rate)
    mean_chars = sum(len(t) for t in corpus.texts) / len(corpus.texts)
    print(f"corpus: {len(corpus.texts):,} documents, mean {mean_chars:,.0f} chars, "
          f"{int((corpus.kind == 1).sum()):,} near duplicates, {int((corpus.kind == 2).sum()):,} hot-spot copies "
          f"(built in {time.perf_counter() - t0:.1f}s)")
    rows = run_speed(corpus, systems)
    print(format_table(rows, len(corpus.texts)))
    if args.speed_json:
        Path(args.speed_json).write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n", encoding="utf-8")
    return 0
