"""``semhash-llm bench``: generate the A–E corpus, run every system on it, score, print one table.

Systems are entries of a registry (name → callable(corpus, shared context) → decisions table), so a
failing or missing system is reported in its row and never stops the others. Teacher embeddings are
computed once (cached under ``--out`` by corpus hash) and shared by the systems that use them; their
cost is reported on its own line and counted in those systems' documents/s.

Cost method: wall time of the system's call (``time.perf_counter``), documents/s = documents / (that time
+ the teacher's embedding time for teacher-based systems); memory = peak resident set size sampled every
10 ms by a thread (psutil) during the call, minus the RSS just before it (Δ MiB; the corpus, and the
teacher model for the systems that use it, are already resident and not counted).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from semhash_llm.bench import baselines as bl
from semhash_llm.bench.generator import SIZES, generate
from semhash_llm.bench.scorer import FDR_LIMIT, WEIGHTS, ScoreResult, label_pairs, score
from semhash_llm.bench.sources import DataError
from semhash_llm.bench.truth import GroundTruth, duplicate_pair_test

logger = logging.getLogger(__name__)

__all__ = [
    "ABLATIONS",
    "SharedContext",
    "SystemSpec",
    "BenchRow",
    "BenchResult",
    "default_data_dir",
    "default_out_dir",
    "build_registry",
    "run_bench",
    "format_markdown",
    "add_bench_arguments",
    "run_bench_command",
    "main",
]

# switch → (component name, candidate PipelineConfig section names that hold an ``enabled`` flag)
ABLATIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "sph": ("SPH", ("sph",)),
    "passages": ("passages", ("passages",)),
    "aw": ("AW-MinHash", ("aw", "awminhash", "aw_minhash")),
    "mgfn": ("MGFN", ("mgfn", "verify", "verifier")),
    "judge": ("LLM judge", ("judge",)),
}


@dataclass
class SharedContext:
    """What systems share within one run: the corpus, the ablation switches, the teacher embeddings and
    the keep policy that picks every system's survivors (the same for all rows of a table)."""

    corpus: bl.Corpus
    cache_dir: Path | None
    switches: dict[str, bool] = field(default_factory=dict)
    teacher_precision: str = "auto"
    keep: bl.KeepPolicy = "longest"
    judge: dict[str, object] = field(default_factory=dict)
    """``[judge]`` settings for the SemHash-LLM rows (``--judge local`` ...); empty: no judge."""
    last_report: dict[str, Any] | None = None
    last_pair_logs: dict[str, pa.Table] = field(default_factory=dict)
    _teacher: bl.TeacherEmbeddings | None = None

    def teacher(self) -> bl.TeacherEmbeddings:
        if self._teacher is None:
            self._teacher = bl.teacher_embeddings(self.corpus, self.cache_dir, self.teacher_precision)
        return self._teacher


SystemFn = Callable[[bl.Corpus, SharedContext], pa.Table]


@dataclass(frozen=True)
class SystemSpec:
    """One row of the table: how to run it and what to say about it."""

    name: str
    run: SystemFn | None
    uses_teacher: bool = False
    notes: str = ""


@dataclass
class BenchRow:
    system: str
    score: ScoreResult | None
    seconds: float | None
    docs_per_second: float | None
    peak_rss_delta_mib: float | None
    notes: str
    decisions_path: str | None = None
    judge: dict[str, Any] | None = None


@dataclass
class BenchResult:
    size: str
    seed: int
    keep: str
    data_dir: str
    out_dir: str
    documents: int
    corpus_counts: dict[str, int]
    teacher: dict[str, object] | None
    rows: list[BenchRow]

    def to_json_obj(self) -> dict[str, object]:
        return dataclasses.asdict(self)


# ---- locations ---------------------------------------------------------------------------------------

def _checkout_root() -> Path | None:
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / ".git").exists() or (parent / "pyproject.toml").exists():
            return parent
    return None


def default_data_dir() -> Path:
    """``$SEMHASH_LLM_DATA`` if set, else ``../shared/data`` beside the repository checkout."""
    env = os.environ.get("SEMHASH_LLM_DATA")
    if env:
        return Path(env)
    root = _checkout_root()
    return (root.parent if root else Path.cwd().parent) / "shared" / "data"


def default_out_dir(size: str, seed: int) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "semhash-llm" / "bench"
    return base / f"{size}-seed{seed}"


# ---- the systems -------------------------------------------------------------------------------------

def default_keep() -> bl.KeepPolicy:
    """SemHash-LLM's default keep policy, which the table applies to every system unless told otherwise."""
    from semhash_llm import PipelineConfig

    keep = PipelineConfig().select.keep
    return keep if keep in bl.KEEP_POLICIES else "first"  # type: ignore[return-value]


def _semhash_llm_config(off: dict[str, bool], keep: str | None = None,
                        judge: dict[str, object] | None = None) -> tuple[object, list[str], list[str]]:
    """PipelineConfig with the requested components off (and the judge's settings); (config,
    applied labels, not-built labels)."""
    from semhash_llm import PipelineConfig

    cfg = PipelineConfig()
    sections = {f.name for f in dataclasses.fields(cfg)}
    overrides: dict[str, dict[str, object]] = {} if keep is None else {"select": {"keep": keep}}
    if judge:
        overrides["judge"] = dict(judge)
    applied: list[str] = []
    missing: list[str] = []
    for key, disabled in off.items():
        if not disabled:
            continue
        label, candidates = ABLATIONS[key]
        section = next((s for s in candidates if s in sections), None)
        if section is None or not hasattr(getattr(cfg, section), "enabled"):
            missing.append(label)
            continue
        overrides[section] = {**overrides.get(section, {}), "enabled": False}
        applied.append(label)
    return cfg.with_overrides(overrides, source="bench switches"), applied, missing


def _built_components() -> dict[str, bool]:
    try:
        from semhash_llm import PipelineConfig
    except ImportError:
        return {k: False for k in ABLATIONS}
    sections = {f.name for f in dataclasses.fields(PipelineConfig)}
    return {k: any(s in sections for s in cands) for k, (_, cands) in ABLATIONS.items()}


def _semhash_llm_system(off: dict[str, bool]) -> SystemFn:
    def run(corpus: bl.Corpus, ctx: SharedContext) -> pa.Table:
        from semhash_llm import deduplicate

        cfg, _, _ = _semhash_llm_config(off, ctx.keep, ctx.judge)
        result = deduplicate(corpus.records, cfg)  # type: ignore[arg-type]
        ctx.last_report, ctx.last_pair_logs = result.report, result.pair_logs
        return result.documents

    return run


def build_registry(switches: dict[str, bool], ablations: bool, judge: dict[str, object] | None = None
                   ) -> list[SystemSpec]:
    """Every system of the table, in order: baselines, SemHash-LLM, its single-component ablations.
    The LLM judge runs only when ``judge`` names a backend (``--judge local|openai``)."""
    specs = [
        SystemSpec("exact-hash", lambda c, ctx: bl.exact_hash(c, ctx.keep), notes="identical text"),
        SystemSpec(
            "minhash-lsh (datasketch)",
            lambda c, ctx: bl.minhash_lsh(c, ctx.keep),
            notes=f"{bl.MINHASH_NUM_PERM} perm, word {bl.MINHASH_NGRAM}-grams, threshold {bl.MINHASH_THRESHOLD}",
        ),
        SystemSpec(
            "simhash-64",
            lambda c, ctx: bl.simhash64(c, ctx.keep),
            notes=f"word {bl.SIMHASH_NGRAM}-grams, Hamming ≤ {bl.SIMHASH_MAX_HAMMING}",
        ),
        SystemSpec(
            "neardup-bert (MiniLM cos)",
            lambda c, ctx: bl.neardup_bert(c, ctx.teacher().vectors, ctx.keep),
            uses_teacher=True,
            notes=f"cosine ≥ {bl.NEARDUP_COSINE}",
        ),
        SystemSpec(
            "semhash (MinishLab, MiniLM)",
            lambda c, ctx: bl.minishlab_semhash(c, ctx.teacher().vectors, ctx.keep),
            uses_teacher=True,
            notes=f"self_deduplicate threshold {bl.SEMHASH_THRESHOLD} (default)",
        ),
    ]
    try:
        import semhash_llm

        available = hasattr(semhash_llm, "deduplicate") and hasattr(semhash_llm, "PipelineConfig")
        why = "" if available else "semhash_llm.deduplicate not available"
    except ImportError as exc:
        available, why = False, f"import failed: {exc}"
    built = _built_components()
    judge_on = bool(judge) and judge.get("backend", "none") != "none"  # type: ignore[union-attr]
    if not judge_on:
        switches = {**switches, "judge": True}
    if not available:
        specs.append(SystemSpec("semhash-llm", None, notes=f"not run: {why}"))
        return specs
    _, applied, missing = _semhash_llm_config(switches)
    label = "semhash-llm" + "".join(f" −{a}" for a in applied if a != ABLATIONS["judge"][0] or judge_on)
    if judge_on:
        label += f" +judge ({judge.get('backend')})"  # type: ignore[union-attr]
    comps = ", ".join(f"{ABLATIONS[k][0]} {'on' if built[k] and not switches.get(k) else 'off' if built[k] else 'not built yet'}"
                      for k in ABLATIONS)
    note = f"components: {comps}"
    if missing:
        note += "; ignored " + ", ".join(f"--no-{k}" for k in ABLATIONS if ABLATIONS[k][0] in missing) + " (not built yet)"
    specs.append(SystemSpec(label, _semhash_llm_system(switches), notes=note))
    if ablations:
        for key, (comp, _) in ABLATIONS.items():
            if key == "judge" and not judge_on:
                specs.append(SystemSpec(f"{label} −{comp}", None,
                                        notes="ablation not run: the judge is off (bench --judge local|openai)"))
                continue
            if switches.get(key):
                continue
            if built[key]:
                off = dict(switches)
                off[key] = True
                specs.append(SystemSpec(f"{label} −{comp}", _semhash_llm_system(off), notes=f"ablation: {comp} off"))
            else:
                specs.append(SystemSpec(f"{label} −{comp}", None, notes=f"ablation not run: {comp} not built yet"))
    return specs


# ---- measuring -------------------------------------------------------------------------------------------

class _RssSampler:
    """Peak RSS of this process, sampled every ``interval`` seconds by a daemon thread."""

    def __init__(self, interval: float = 0.01) -> None:
        import psutil

        self._proc = psutil.Process()
        self._interval = interval
        self._stop = threading.Event()
        self.baseline = self._proc.memory_info().rss
        self.peak = self.baseline
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.peak = max(self.peak, self._proc.memory_info().rss)

    def __enter__(self) -> _RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)

    @property
    def delta_mib(self) -> float:
        return (self.peak - self.baseline) / 2**20


def run_bench(
    data_dir: Path,
    size: str,
    seed: int,
    out_dir: Path,
    systems: list[str] | None = None,
    switches: dict[str, bool] | None = None,
    ablations: bool = True,
    teacher_precision: str = "auto",
    keep: bl.KeepPolicy | None = None,
    judge: dict[str, object] | None = None,
) -> BenchResult:
    """Generate the corpus, run the selected systems, score them; write decisions under ``out_dir``.

    ``keep`` picks the survivor of every cluster for every system alike (default: SemHash-LLM's own
    default policy).
    """
    switches = switches or {}
    keep = keep or default_keep()
    bench = generate(data_dir, size, seed, out_dir / "corpus")
    truth: GroundTruth = bench.truth
    corpus = bl.Corpus([str(r["id"]) for r in bench.records], [str(r["text"]) for r in bench.records],
                       truth.corpus_sha256)
    labels = label_pairs(truth, dict(zip(corpus.ids, corpus.texts)))
    ctx = SharedContext(corpus, out_dir / "cache", switches, teacher_precision, keep, dict(judge or {}))
    specs = build_registry(switches, ablations, judge)
    if systems:
        wanted = [s.strip().lower() for s in systems if s.strip()]
        unknown = [w for w in wanted
                   if not any(sp.name.lower() == w[1:] if w.startswith("=") else sp.name.lower().startswith(w)
                              for sp in specs)]
        if unknown:
            raise ValueError(
                f"--systems: unknown system(s) {unknown}; choose among: " + ", ".join(sp.name for sp in specs)
            )
        # "=NAME" selects the row of that full name only; anything else every row it begins.
        specs = [sp for sp in specs
                 if any(sp.name.lower() == w[1:] if w.startswith("=") else sp.name.lower().startswith(w) for w in wanted)]
    teacher_info: dict[str, object] | None = None
    if any(sp.uses_teacher and sp.run is not None for sp in specs):
        try:
            with _RssSampler() as tmem:
                t = ctx.teacher()
            teacher_info = {"peak_rss_delta_mib": None if t.from_cache else tmem.delta_mib, "seconds": t.seconds, "docs_per_second": t.docs_per_second, "precision": t.precision,
                            "from_cache": t.from_cache, "cache_path": str(t.cache_path) if t.cache_path else None,
                            "max_tokens": bl.TEACHER_MAX_TOKENS, "model": "all-MiniLM-L6-v2"}
        except Exception as exc:  # reported in the rows of the systems that needed it
            logger.error("teacher embeddings failed: %s", exc)
            teacher_info = {"error": f"{type(exc).__name__}: {exc}"}
    decisions_dir = out_dir / "decisions"
    decisions_dir.mkdir(parents=True, exist_ok=True)
    rows: list[BenchRow] = []
    for sp in specs:
        if sp.run is None:
            rows.append(BenchRow(sp.name, None, None, None, None, sp.notes))
            continue
        if sp.uses_teacher and teacher_info and "error" in teacher_info:
            rows.append(BenchRow(sp.name, None, None, None, None, f"not run: teacher failed ({teacher_info['error']})"))
            continue
        gc.collect()
        logger.info("running %s", sp.name)
        ctx.last_report, ctx.last_pair_logs = None, {}
        try:
            with _RssSampler() as mem:
                t0 = time.perf_counter()
                table = sp.run(corpus, ctx)
                secs = time.perf_counter() - t0
            result = score(table, truth, labels)
            judge_info = judge_summary(ctx.last_report, ctx.last_pair_logs.get("judge"), truth)
        except Exception as exc:
            logger.exception("system %s failed", sp.name)
            rows.append(BenchRow(sp.name, None, None, None, None, f"failed: {type(exc).__name__}: {exc}"[:300]))
            continue
        slug = re.sub(r"[^a-z0-9]+", "-", sp.name.lower()).strip("-")
        decisions_path = decisions_dir / f"{slug}.parquet"
        pq.write_table(table, decisions_path)
        total = secs + (float(teacher_info["seconds"]) if sp.uses_teacher and teacher_info else 0.0)  # type: ignore[arg-type]
        rows.append(BenchRow(sp.name, result, secs, len(corpus) / total if total > 0 else None, mem.delta_mib,
                             sp.notes, str(decisions_path), judge_info))
        logger.info("%s: composite %.1f, FDR %.4f, %.1f s", sp.name, result.composite, result.fdr, secs)
    return BenchResult(size, seed, keep, str(data_dir), str(out_dir), len(corpus), truth.counts(), teacher_info, rows)


def judge_summary(report: dict[str, Any] | None, pairs: pa.Table | None, truth: GroundTruth) -> dict[str, Any] | None:
    """What the judge did in one run, against the truth: pairs judged and their share, seconds
    per call, and each flip (the judge's fused decision against the verifier's own) right or
    wrong. A pair is a duplicate when its documents share an A–C group or one contains the
    other (type D); any other pair is distinct (semantic paraphrase pairs are counted apart)."""
    if report is None or pairs is None:
        return None
    row = next((r for r in report.get("funnel", []) if r.get("stage") == "judge"), None)
    if row is None:
        return None
    is_duplicate = duplicate_pair_test(truth)
    semantic = {frozenset(p) for p in truth.semantic_pairs}

    def truly(x: str, y: str) -> str:
        if is_duplicate(x, y):
            return "duplicate"
        return "semantic" if frozenset((x, y)) in semantic else "distinct"

    flips = {"to_duplicate": {"right": 0, "wrong": 0, "semantic": 0},
             "to_distinct": {"right": 0, "wrong": 0, "semantic": 0}}
    judged_right = judged = 0
    for r in pairs.to_pylist():
        if r["outcome"] not in ("judged", "cached"):
            continue
        judged += 1
        t = truly(str(r["id_a"]), str(r["id_b"]))
        judged_right += int(t != "semantic" and bool(r["linked"]) == (t == "duplicate"))
        if bool(r["linked"]) == bool(r["automatic"]):
            continue
        side = flips["to_duplicate" if r["linked"] else "to_distinct"]
        if t == "semantic":
            side["semantic"] += 1
        else:
            side["right" if (t == "duplicate") == bool(r["linked"]) else "wrong"] += 1
    d = row.get("details", {})
    return {"pairs_referred": d.get("pairs_referred"), "pairs_judged": d.get("pairs_judged"),
            "calls": d.get("calls"), "from_cache": d.get("pairs_from_cache"), "failures": d.get("failures"),
            "share_of_candidates_judged": d.get("share_of_candidates_judged"),
            "seconds_per_call": d.get("seconds_per_call"), "stage_seconds": row.get("seconds"),
            "model": d.get("model"), "prompt_version": d.get("prompt_version"), "mode": d.get("mode"),
            "calibration": d.get("calibration"), "flips": flips,
            "judged_pairs_decided_right": judged_right, "judged_pairs": judged}


# ---- output ----------------------------------------------------------------------------------------------

def _pct(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{100 * x:.{digits}f}"


def _share(total: int, found: int) -> str:
    return "–" if total == 0 else f"{found:,}/{total:,} ({100 * found / total:.1f}%)"


def _count_table(
    out: list[str],
    rows: list[BenchRow],
    counts_of: Callable[[ScoreResult], dict[str, list[int]]],
    caption: str,
    cell: Callable[[int, int], str],
    keep_empty: bool,
) -> None:
    """Append a table of ``column → [total, hits]`` counts (one row per system that has them); the
    caption ends with each column's total. Columns with no total are left out unless ``keep_empty``."""
    tables = [(r.system, counts_of(r.score)) for r in rows if r.score is not None and counts_of(r.score)]
    if not tables:
        return
    first = tables[0][1]
    cols = [k for k, (total, _) in first.items() if keep_empty or total]
    out += ["", caption + ", ".join(f"{k} {first[k][0]:,}" for k in cols) + "):", "",
            "| system | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for system, counts in tables:
        out.append(f"| {system} | " + " | ".join(cell(*counts[k]) for k in cols) + " |")


def format_markdown(res: BenchResult) -> str:
    """The quality + cost table, the per-family FDR table and the run's notes, as Markdown."""
    out: list[str] = []
    c = res.corpus_counts
    out.append(
        f"SemHash-LLM development benchmark — size {res.size}, seed {res.seed}, {res.documents} documents "
        f"(A {c.get('groups_A', 0)} groups/{c.get('group_docs_A', 0)} docs, B {c.get('groups_B', 0)}/{c.get('group_docs_B', 0)}, "
        f"C {c.get('groups_C', 0)}/{c.get('group_docs_C', 0)}, D {c.get('containments', 0)} pairs, "
        f"E {c.get('fragments', 0)} fragments/{c.get('fragment_occurrences', 0)} hosts, "
        f"{c.get('negative_sets', 0)} hard-negative sets, {c.get('semantic_pairs', 0)} semantic pairs); "
        f"every system keeps the {res.keep} document of each cluster (--keep {res.keep})"
    )
    out.append("")
    out.append("| system | S_A | S_B | S_C | S_D | S_E | composite | FDR % | sem P | sem R | docs/s | peak Δ MiB | notes |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in res.rows:
        notes = r.notes.replace("|", "/")
        if r.score is None:
            out.append(f"| {r.system} | – | – | – | – | – | – | – | – | – | – | – | {notes} |")
            continue
        s = r.score
        comp = f"{s.composite:.1f}" + (" (FDR>10%)" if s.fdr > FDR_LIMIT else "")
        out.append(
            f"| {r.system} | {_pct(s.s_a)} | {_pct(s.s_b)} | {_pct(s.s_c)} | {_pct(s.s_d)} | {_pct(s.s_e)} | {comp} "
            f"| {_pct(s.fdr, 2)} | {_pct(s.semantic_precision)} | {_pct(s.semantic_recall)} "
            f"| {r.docs_per_second:,.0f} | {r.peak_rss_delta_mib:,.0f} | {notes} |"
        )
    scored = [r for r in res.rows if r.score is not None]
    if scored:
        fams = sorted({f for r in scored for f in r.score.fdr_by_family})  # type: ignore[union-attr]
        out.append("")
        out.append("False deletion rate (%) per hard-negative family and per must-keep role:")
        out.append("")
        out.append("| system | " + " | ".join(fams) + " |")
        out.append("|---|" + "---:|" * len(fams))
        for r in scored:
            fd = r.score.fdr_by_family  # type: ignore[union-attr]
            out.append(f"| {r.system} | " + " | ".join(_pct(fd.get(f), 2) for f in fams) + " |")
        _count_table(out, scored, lambda sc: sc.c_by_error_band, keep_empty=True,
                     caption="Type C recall by the noisy copy's character error rate against its original "
                     "(found = in one cluster with it; copies per band: ",
                     cell=_share)
        _count_table(out, scored, lambda sc: sc.negatives_by_edit_kind, keep_empty=False,
                     caption="False deletion rate (%) of the two-document hard negatives by what the edit "
                     "changed (documents per kind: ",
                     cell=lambda total, removed: _pct(removed / total, 2))
    for r in res.rows:
        j = r.judge
        if not j:
            continue
        f = j["flips"]
        out.append("")
        out.append(
            f"LLM judge in `{r.system}` ({j['model']}, prompt {j['prompt_version']}, {j['mode']}): "
            f"{j['pairs_judged']} of {j['pairs_referred']} uncertain pairs judged "
            f"({100 * float(j['share_of_candidates_judged'] or 0):.2f}% of the candidate pairs; {j['calls']} calls, "
            f"{j['from_cache']} from the cache, failures {j['failures'] or 'none'}), {j['seconds_per_call']} s a call; "
            f"flipped to duplicate {f['to_duplicate']['right']} right / {f['to_duplicate']['wrong']} wrong, "
            f"to distinct {f['to_distinct']['right']} right / {f['to_distinct']['wrong']} wrong "
            f"(paraphrase pairs: {f['to_duplicate']['semantic']} / {f['to_distinct']['semantic']}); "
            f"{j['judged_pairs_decided_right']} of {j['judged_pairs']} judged pairs decided right.")
    out.append("")
    w = ", ".join(f"{k} {v}" for k, v in WEIGHTS.items())
    out.append(
        f"S_A–S_E and FDR in %; composite = 100·Σ weight·S ({w}), 0 when FDR > {FDR_LIMIT:.0%}. "
        "Semantic P/R: PAWS paraphrase pairs, outside the composite."
    )
    if res.teacher:
        t = res.teacher
        if "error" in t:
            out.append(f"Teacher embeddings failed: {t['error']}")
        else:
            out.append(
                f"Teacher embeddings (all-MiniLM-L6-v2, ≤{t['max_tokens']} tokens, {t['precision']}): "
                f"{float(t['seconds']):.1f} s, {float(t['docs_per_second']):.1f} docs/s"  # type: ignore[arg-type]
                + (" (measured when computed; read from cache in this run)" if t["from_cache"]
                   else f", peak Δ {float(t['peak_rss_delta_mib']):,.0f} MiB")  # type: ignore[arg-type]
                + "; counted in the docs/s of the systems that use them."
            )
    out.append(
        "docs/s = documents / (system wall time [+ teacher time]); peak Δ MiB = peak RSS sampled every 10 ms "
        "during the system's call minus RSS before it. All systems ran in one process on the same machine."
    )
    out.append(f"Corpus, truth and each system's decisions (documents.parquet contract): {res.out_dir}")
    return "\n".join(out)


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``semhash-llm bench``."""
    parser.add_argument("--size", choices=sorted(SIZES), default="small",
                        help="small ≈ 3k documents (CI), full ≥ 20k documents")
    parser.add_argument("--seed", type=int, default=0, help="generator seed (same seed → identical corpus)")
    parser.add_argument("--data", type=Path, default=None,
                        help="source data folder (default: $SEMHASH_LLM_DATA, else ../shared/data beside the checkout)")
    parser.add_argument("--systems", default=None,
                        help="comma-separated name prefixes of the systems to run; =NAME selects the row of that "
                             "full name only (default: all)")
    for key, (comp, _) in ABLATIONS.items():
        parser.add_argument(f"--no-{key}", dest=f"no_{key}", action="store_true", help=f"turn {comp} off in SemHash-LLM")
    parser.add_argument("--ablations", choices=("all", "none"), default="all",
                        help="add one row per single-component SemHash-LLM ablation (default: all)")
    parser.add_argument("--keep", choices=bl.KEEP_POLICIES, default=None,
                        help="which document of a cluster survives, for every system alike "
                             "(default: SemHash-LLM's default, keep=longest)")
    parser.add_argument("--teacher-precision", choices=("auto", "fp32", "bf16"), default="auto",
                        help="teacher inference precision (auto: bf16 where the CPU has native bf16)")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for the corpus, truth, decisions, embedding cache and bench.json "
                             "(default: ~/.cache/semhash-llm/bench/SIZE-seedSEED)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON to this path")
    parser.add_argument("--judge", choices=("none", "local", "openai"), default="none",
                        help="run the SemHash-LLM rows with this LLM judge (and add the −LLM judge row)")
    parser.add_argument("--judge-model", default=None, help="GGUF file (local) or model name (openai)")
    parser.add_argument("--judge-url", default=None, help="OpenAI-compatible base URL (openai)")
    parser.add_argument("--judge-max-fraction", type=float, default=None, help="most pairs judged, share of candidates")
    parser.add_argument("--judge-cache", default=None, help="SQLite verdict cache (default: the user cache)")


def run_bench_command(args: argparse.Namespace) -> int:
    """Run ``semhash-llm bench``: print the Markdown table; write JSON to --json and OUT/bench.json."""
    data = args.data if args.data is not None else default_data_dir()
    if not Path(data).is_dir():
        print(
            f"error: benchmark data folder {data} does not exist. Pass --data DIR or set SEMHASH_LLM_DATA "
            "to the folder holding nltk/, paws_wiki/, readability_test_pages/, ...",
            file=sys.stderr,
        )
        return 2
    out = args.out if args.out is not None else default_out_dir(args.size, args.seed)
    out.mkdir(parents=True, exist_ok=True)
    switches = {k: bool(getattr(args, f"no_{k}", False)) for k in ABLATIONS}
    systems = args.systems.split(",") if args.systems else None
    judge: dict[str, object] = {}
    if args.judge != "none":
        judge = {"backend": args.judge}
        for key, value in (("model", args.judge_model), ("url", args.judge_url),
                           ("max_fraction", args.judge_max_fraction), ("cache", args.judge_cache)):
            if value is not None:
                judge[key] = value
    try:
        res = run_bench(Path(data), args.size, args.seed, out, systems, switches, args.ablations == "all",
                        args.teacher_precision, args.keep, judge)
    except (DataError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = format_markdown(res)
    print(text)
    payload = json.dumps(res.to_json_obj(), indent=1, default=str)
    (out / "bench.json").write_text(payload + "\n")
    (out / "bench.md").write_text(text + "\n")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(payload + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="semhash-llm bench", description=__doc__.split("\n")[0])
    add_bench_arguments(parser)
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run_bench_command(args)


if __name__ == "__main__":
    sys.exit(main())
