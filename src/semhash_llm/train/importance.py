"""``semhash-llm train importance``: distil the teacher's attention importance into a cheap model.

1. Read permitted text: by default the training part (:mod:`semhash_llm.datasplit`) of the
   Wikipedia pages (CC BY-SA) and of the inaugural and State of the Union addresses (public
   domain) under ``--data-dir`` — never the benchmark's part, never research-only sets; or the
   corpus files given. Every document goes whole to the fitting side or to the held-apart side
   (a hash of its text, ``--heldout``).
2. Cut each document into chunks of whole lines of at most ``--chunk-words`` words, so that the
   teacher reads every word (one window of ``--max-length`` pieces).
3. Run :class:`~semhash_llm.aw.attention.TeacherImportance` (``focus`` aggregation, mean pooling)
   and keep the words it covered; the target is the log of their importance.
4. Fit :func:`~semhash_llm.aw.importance.fit_importance` on the fitting side; measure on the held-
   apart side the mean per-chunk Spearman correlation with the teacher (model, and the line cues
   and token table alone), and the model's documents/s; write ``importance.npz``,
   ``train_report.json`` and ``MODEL_CARD.md`` to ``--out``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from semhash_llm.aw.importance import LINE_FEATURES, ImportanceModel, fit_importance, line_features, spearman
from semhash_llm.config import NormalizeConfig, ShingleConfig
from semhash_llm.text.lines import token_lines, tokens_and_lines
from semhash_llm.text.normalize import char_classes, normalize_batch
from semhash_llm.text.tokenize import tokenize_batch

__all__ = ["chunk_lines", "add_train_importance_arguments", "run_train_importance_command", "train_importance",
           "permitted_documents", "model_throughput", "PERMITTED_SOURCES"]

logger = logging.getLogger(__name__)


def chunk_lines(text: str, max_words: int) -> list[str]:
    """Consecutive whole lines of ``text`` grouped into chunks of at most ``max_words`` words
    (a longer line is cut at word boundaries); blank lines are kept inside a chunk."""
    if max_words < 1:
        raise ValueError(f"chunk_lines needs max_words >= 1; got {max_words}")
    chunks: list[str] = []
    cur: list[str] = []
    words = 0
    for line in text.split("\n"):
        parts = line.split()
        while len(parts) > max_words:
            if cur:
                chunks.append("\n".join(cur))
                cur, words = [], 0
            chunks.append(" ".join(parts[:max_words]))
            parts = parts[max_words:]
            line = " ".join(parts)
        if words + len(parts) > max_words and cur:
            chunks.append("\n".join(cur))
            cur, words = [], 0
        cur.append(line)
        words += len(parts)
    if cur and words:
        chunks.append("\n".join(cur))
    return [c.strip("\n") for c in chunks if c.split()]


PERMITTED_SOURCES = ("the training part (semhash_llm.datasplit) of the Wikipedia pages of the gensim fixture "
                     "(CC BY-SA) and of the NLTK inaugural and State of the Union addresses (public domain)")


def permitted_documents(data_dir: str | Path) -> list[str]:
    """The training part of the permitted sources under ``data_dir`` (Wikipedia, addresses)."""
    from semhash_llm.bench.sources import read_addresses, read_wikipedia

    return read_wikipedia(Path(data_dir), part="train") + read_addresses(Path(data_dir), part="train")


def training_documents(corpus: Sequence[str], data_dir: str | Path) -> tuple[list[str], str]:
    """The texts a ``semhash-llm train`` command learns from and how its card names them: the
    training part of the given corpus files or folders, else of the permitted sources."""
    if corpus:
        from semhash_llm.sph.corpus import read_corpus_documents

        return ([text for _key, text in read_corpus_documents(list(corpus), part="train")],
                "the training part of " + ", ".join(corpus))
    return permitted_documents(data_dir), PERMITTED_SOURCES


def train_importance(documents: Sequence[str], out_dir: str | Path, max_chunks: int = 1600, chunk_words: int = 160,
                     heldout: float = 0.2, bits: int = 16, l2: float = 20.0, teacher: str | None = None,
                     max_length: int = 256, dtype: str = "float32", seed: int = 0, command: str = "",
                     trained_on: str = PERMITTED_SOURCES) -> dict[str, Any]:
    """Train on ``documents``, evaluate and write the importance model; returns the report
    (see the module docstring). ``trained_on`` names the text for the model card."""
    from semhash_llm.aw.attention import TeacherImportance

    if not 0.0 < heldout < 0.5:
        raise ValueError(f"--heldout must be in (0, 0.5); got {heldout}")
    if max_chunks < 10:
        raise ValueError(f"--max-chunks must be at least 10; got {max_chunks}")
    t_start = time.perf_counter()
    normalize = NormalizeConfig()
    docs = list(documents)
    fit_chunks: list[str] = []
    held_chunks: list[str] = []
    for text in docs:
        digest = hashlib.blake2b(f"{seed}:{text}".encode(), digest_size=8).digest()
        side = held_chunks if int.from_bytes(digest, "little") / 2**64 < heldout else fit_chunks
        side.extend(chunk_lines(text, chunk_words))
    if not fit_chunks or not held_chunks:
        raise ValueError(f"train importance: {len(docs)} document(s) gave {len(fit_chunks)} fitting and "
                         f"{len(held_chunks)} held-apart chunks; both sides need text. Give more documents")
    rng = np.random.default_rng(seed)
    n_held = max(1, int(round(max_chunks * heldout)))
    n_fit = max_chunks - n_held
    fit_chunks = [fit_chunks[i] for i in sorted(rng.permutation(len(fit_chunks))[:n_fit].tolist())]
    held_chunks = [held_chunks[i] for i in sorted(rng.permutation(len(held_chunks))[:n_held].tolist())]
    logger.info("importance: %d documents -> %d fitting and %d held-apart chunks", len(docs), len(fit_chunks),
                len(held_chunks))

    model_t = TeacherImportance(teacher, max_length=max_length, dtype=dtype,  # type: ignore[arg-type]
                                normalize_config=normalize)
    t0 = time.perf_counter()

    def teacher_targets(chunks: list[str]) -> tuple[list[str], list[np.ndarray], list[np.ndarray]]:
        analyzed = model_t.analyze(chunks)
        kept: list[str] = []
        imps: list[np.ndarray] = []
        covered: list[np.ndarray] = []
        for text, d in zip(chunks, analyzed):
            if d.covered.sum() >= 5:
                kept.append(text)
                imps.append(d.importance)
                covered.append(d.covered)
        return kept, imps, covered

    fit_texts, fit_imp, fit_cov = teacher_targets(fit_chunks)
    held_texts, held_imp, held_cov = teacher_targets(held_chunks)
    teacher_seconds = time.perf_counter() - t0
    teacher_docs_per_s = (len(fit_chunks) + len(held_chunks)) / max(teacher_seconds, 1e-9)

    tb, lines = tokens_and_lines(fit_texts, normalize)
    x = line_features(tb, lines)
    counts = np.diff(tb.tok_offsets)
    if not all(int(c) == imp.size for c, imp in zip(counts.tolist(), fit_imp)):
        raise RuntimeError("the teacher's words and the tokenizer's tokens disagree in number; both must use one "
                           "NormalizeConfig")
    cov = np.concatenate(fit_cov)
    y = np.log(np.maximum(np.concatenate(fit_imp), 1e-3))
    meta = {"trained_on": trained_on, "seed": seed, "bits": bits, "l2": l2,
            "teacher": model_t.model_name_or_path, "aggregation": model_t.aggregation, "pooling": model_t.pooling}
    model = fit_importance(tb.tok_hashes[cov], x[cov], y[cov], bits=bits, l2=l2, meta=meta)

    # ---- held-apart evaluation
    htb, hlines = tokens_and_lines(held_texts, normalize)
    lines_only = ImportanceModel(np.zeros_like(model.table), model.coef, model.intercept, model.midpoint, model.scale)
    table_only = ImportanceModel(model.table, np.zeros_like(model.coef), 0.0, model.midpoint, model.scale)
    scores: dict[str, Any] = {}
    preds: dict[str, np.ndarray] = {}
    for name, m in (("model", model), ("line_cues_only", lines_only), ("token_table_only", table_only)):
        pred = preds[name] = m.log_importance(htb, hlines)
        rhos = []
        for d, (imp, c) in enumerate(zip(held_imp, held_cov)):
            s, e = int(htb.tok_offsets[d]), int(htb.tok_offsets[d + 1])
            rho = spearman(pred[s:e][c], imp[c])
            if np.isfinite(rho):
                rhos.append(rho)
        scores[f"spearman_{name}_mean"] = round(float(np.mean(rhos)), 4) if rhos else None
        scores[f"spearman_{name}_median"] = round(float(np.median(rhos)), 4) if rhos else None
    hy = np.log(np.maximum(np.concatenate(held_imp), 1e-3))[np.concatenate(held_cov)]
    hp = preds["model"][np.concatenate(held_cov)]
    scores["pooled_spearman_model"] = round(spearman(hp, hy), 4)
    scores["held_apart_chunks"] = len(held_texts)
    scores["fitting_chunks"] = len(fit_texts)
    scores["fitting_tokens"] = int(cov.sum())
    scores["teacher_docs_per_s"] = round(teacher_docs_per_s, 1)
    scores["model_docs_per_s"] = round(model_throughput(model), 0)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save(out / "importance.npz")
    report = {
        "command": command, "seconds": round(time.perf_counter() - t_start, 1), "scores": scores,
        "coef": dict(zip(LINE_FEATURES, [round(float(c), 4) for c in model.coef])),
        "intercept": round(model.intercept, 4), "config": {
            "max_chunks": max_chunks, "chunk_words": chunk_words, "heldout": heldout, "bits": bits, "l2": l2,
            "max_length": max_length, "dtype": dtype, "seed": seed},
        "documents": len(docs), "trained_on": trained_on, "teacher": model_t.model_name_or_path,
        "environment": {"python": platform.python_version(), "machine": platform.machine()},
    }
    (out / "train_report.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    (out / "MODEL_CARD.md").write_text(_model_card(report))
    return report


def model_throughput(model: ImportanceModel, num_docs: int = 20_000, seed: int = 0) -> float:
    """Documents/s of lines + prediction on synthetic ~1.8 KB documents of short and long lines."""
    rng = np.random.default_rng(seed)
    vocab = ["w" + format(i, "x") for i in range(5000)]
    texts = []
    for _ in range(num_docs):
        page: list[str] = []
        for _ in range(int(rng.integers(6, 14))):
            k = int(rng.choice([2, 4, 25, 40]))
            page.append(" ".join(vocab[j] for j in rng.integers(0, len(vocab), k)) + ("." if k > 10 else ""))
        texts.append("\n".join(page))
    cfg = NormalizeConfig()
    classes = char_classes(cfg.strip_punctuation)
    norm = normalize_batch(texts, cfg)
    warm = tokenize_batch(norm[:100], classes, ShingleConfig())
    model.predict(warm, token_lines(norm[:100], classes, warm.tok_offsets))  # compile the numba kernels first
    t0 = time.perf_counter()
    tb = tokenize_batch(norm, classes, ShingleConfig())
    lines = token_lines(norm, classes, tb.tok_offsets)
    model.predict(tb, lines)
    return num_docs / (time.perf_counter() - t0)


def _model_card(report: dict[str, Any]) -> str:
    s = report["scores"]
    cfg = report["config"]
    coef = ", ".join(f"{k} {v:+.3f}" for k, v in report["coef"].items())
    return f"""# SemHash-LLM importance model (AW-MinHash, cheap path)

Predicts the teacher's per-word attention importance (`focus` aggregation, mean pooling over word
pieces; `semhash_llm.aw.attention`) from a token table and four line cues, so that AW-MinHash can
weight every n-gram of a crawl without running the transformer:
`log importance = table[top {cfg['bits']} bits of the token hash] + coef · line cues + intercept`,
then scaled to mean 1 a document.

## Training
- Command: `{report['command']}`
- Text: {report['trained_on']}:
  {report['documents']} documents, cut into chunks of whole lines of at most {cfg['chunk_words']} words; a
  document goes whole to the fitting side or the held-apart side ({cfg['heldout']:.0%}). No benchmark
  document, no Readability page, no research-only set.
- Teacher: {report['teacher']} (eager attention, max {cfg['max_length']} pieces, {cfg['dtype']}), read
  at {s['teacher_docs_per_s']} chunks/s.
- Fit: least squares on the log teacher importance of {s['fitting_tokens']:,} covered words
  ({s['fitting_chunks']} chunks): ridge on the line cues alternated with a per-bucket mean residual
  shrunk by count / (count + {cfg['l2']}); seed {cfg['seed']}.
- Line coefficients: {coef}; intercept {report['intercept']:+.3f}.

## Scores (held-apart chunks: {s['held_apart_chunks']})
| predictor | Spearman with the teacher, mean per chunk | median |
|---|---:|---:|
| model (table + line cues) | {s['spearman_model_mean']} | {s['spearman_model_median']} |
| line cues only | {s['spearman_line_cues_only_mean']} | {s['spearman_line_cues_only_median']} |
| token table only | {s['spearman_token_table_only_mean']} | {s['spearman_token_table_only_median']} |

Pooled over all held-apart words: {s['pooled_spearman_model']}.
Speed: {s['model_docs_per_s']:,.0f} documents/s (lines and prediction, ~1.8 KB synthetic documents,
one process on this machine) against the teacher's {s['teacher_docs_per_s']}.

## Use and limits
Used by AW-MinHash with `--importance model` (times the line-length logistic; the default is the
logistic alone, see the README for the comparison on real pages and on the development benchmark).
The teacher itself tells article words from page chrome only weakly (ROC AUC 0.65-0.79 on real
pages, `benchmarks/importance_report.py`), so a faithful copy of it is weak at that too; the
line-length cue is what removes chrome. Trained on English prose: other scripts fall back on
the buckets their tokens hash to and on the line cues.
"""


def add_train_importance_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the options of ``semhash-llm train importance`` to ``parser``."""
    parser.add_argument("corpus", nargs="*",
                        help="corpus files or folders to train on (txt, jsonl, parquet, MediaWiki xml; only the training "
                        "part of the sources shared with the benchmark); default: the permitted sources of --data-dir")
    parser.add_argument("--data-dir", default="../shared/data",
                        help="folder with gensim_lee_wiki/ and nltk/ (their training part is read) when no corpus is given")
    parser.add_argument("--out", required=True, help="output folder (importance.npz, train_report.json, MODEL_CARD.md)")
    parser.add_argument("--teacher", default=None, help="Hugging Face model name or path (default: offline all-MiniLM-L6-v2)")
    parser.add_argument("--teacher-dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--max-length", type=int, default=256, help="teacher window in word pieces")
    parser.add_argument("--max-chunks", type=int, default=1600, help="chunks read by the teacher (fitting + held apart)")
    parser.add_argument("--chunk-words", type=int, default=160, help="words per chunk (whole lines)")
    parser.add_argument("--heldout", type=float, default=0.2, help="share of documents held apart for the scores")
    parser.add_argument("--bits", type=int, default=16, help="token table size: 2**bits buckets")
    parser.add_argument("--l2", type=float, default=20.0, help="shrinkage of each bucket toward 0 (pseudo-counts)")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def run_train_importance_command(args: argparse.Namespace) -> int:
    """Run ``semhash-llm train importance`` from parsed arguments; 0 on success."""
    command = "semhash-llm " + " ".join(sys.argv[1:]) if "importance" in sys.argv else "train_importance(...)"
    documents, trained_on = training_documents(args.corpus, args.data_dir)
    report = train_importance(documents, args.out, trained_on=trained_on, max_chunks=args.max_chunks, chunk_words=args.chunk_words,
                              heldout=args.heldout, bits=args.bits, l2=args.l2, teacher=args.teacher,
                              max_length=args.max_length, dtype=args.teacher_dtype, seed=args.seed, command=command)
    s = report["scores"]
    print(f"importance model -> {args.out}/importance.npz")
    print(f"held-apart Spearman with the teacher: model {s['spearman_model_mean']} (line cues only "
          f"{s['spearman_line_cues_only_mean']}, token table only {s['spearman_token_table_only_mean']}); "
          f"{s['model_docs_per_s']:,.0f} docs/s vs teacher {s['teacher_docs_per_s']}")
    return 0
