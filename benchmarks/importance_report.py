"""Which attention aggregation tells an article from its page chrome? Measure it and print tables.

    python benchmarks/importance_report.py                      # data in ../shared/data, all usable pages
    python benchmarks/importance_report.py --pages 40 --max-windows 4

Pages: the Readability fixtures of ``../shared/data/readability_test_pages`` read in place by
:func:`semhash_llm.bench.sources.read_readability_pages` (nothing is copied). Every fixture with an
article of at least 500 characters and at least 100 characters of chrome gives two documents, the
way the development benchmark builds its type-A documents: the article in its own chrome (head +
article + tail) and the article re-wrapped in the chrome of another page (seeded choice). Each
part is cut at line boundaries — the head's last 1,500 characters, the article's first 3,000, the
tail's first 1,500 — so that a page fits in a few windows and chrome on both sides is read. Every
canonical word (:func:`semhash_llm.aw.attention.word_spans`) is labelled *article* or *chrome* by
the part of the document it sits in.

For every (aggregation, pooling) of :class:`semhash_llm.aw.attention.TeacherImportance`, from one
forward pass per window:

* per-document ROC AUC of "the word belongs to the article" from its importance (mean over the
  documents with both classes among the covered words) and the AUC pooled over all covered words
  (importances are mean 1 per document, so they pool);
* the ratio of the mean importance of article words to that of chrome words (pooled);
* first with the document read in full (``--max-windows`` windows of 256 tokens), then
  truncated to the first window (the default ``max_windows=1``: later words get the fallback 1.0
  and are left out of the AUC).

A teacher-free baseline (the number of words on the word's line: chrome lines are short) puts
the numbers in context. Then the entropies: the attention entropy and the normalised word
importance entropy of the article alone vs the chrome alone (first window of each), and the AUC
with which each separates them. Last, the teacher's throughput (documents/s of ~256 tokens,
default settings, this machine's CPU threads).
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from semhash_llm.aw.attention import (  # noqa: E402
    AGGREGATIONS,
    DEFAULT_AGGREGATION,
    DEFAULT_POOLING,
    POOLINGS,
    DocumentImportance,
    TeacherImportance,
    word_spans,
)
from semhash_llm.bench.sources import ReadabilityPage, read_readability_pages  # noqa: E402

logger = logging.getLogger("importance_report")

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
# Page parts are cut at line boundaries so that a document fits in a few 256-token windows and its
# chrome on *both* sides is read: the head's last lines (next to the article), the article's first
# lines, the tail's first lines.
CHROME_CHARS = 1500
ARTICLE_CHARS = 3000


@dataclass(frozen=True)
class LabelledDoc:
    """A page text and the code-point range ``[start, end)`` of its article."""

    name: str
    text: str
    article: tuple[int, int]
    article_text: str
    chrome_text: str


def build_docs(pages: list[ReadabilityPage], limit: int | None, seed: int) -> list[LabelledDoc]:
    """Two documents per usable page: the article in its own chrome and in another page's chrome."""
    usable = [
        p for p in pages if len(p.article_text) >= 500 and len(p.head_boilerplate) + len(p.tail_boilerplate) >= 100
    ]
    donors = [p for p in usable if len(p.head_boilerplate) + len(p.tail_boilerplate) >= 300]
    if limit is not None:
        usable = usable[:limit]
    rng = random.Random(seed)
    out: list[LabelledDoc] = []
    for page in usable:
        donor = rng.choice([d for d in donors if d.name != page.name])
        article = _lines(page.article_text, ARTICLE_CHARS, from_end=False)
        for chrome, name in ((page, page.name), (donor, f"{page.name}+chrome:{donor.name}")):
            head_text = _lines(chrome.head_boilerplate, CHROME_CHARS, from_end=True)
            tail_text = _lines(chrome.tail_boilerplate, CHROME_CHARS, from_end=False)
            head = head_text + "\n" if head_text else ""
            tail = "\n" + tail_text if tail_text else ""
            start = len(head)
            out.append(
                LabelledDoc(
                    name=name,
                    text=head + article + tail,
                    article=(start, start + len(article)),
                    article_text=article,
                    chrome_text="\n".join(x for x in (head_text, tail_text) if x),
                )
            )
    return out


def _lines(text: str, budget: int, from_end: bool) -> str:
    """Whole lines of ``text`` up to ``budget`` characters, from its start (or its end), at least one."""
    lines = text.split("\n")
    if from_end:
        lines.reverse()
    kept: list[str] = []
    size = 0
    for line in lines:
        if kept and size + len(line) + 1 > budget:
            break
        kept.append(line)
        size += len(line) + 1
    if from_end:
        kept.reverse()
    return "\n".join(kept)


def labels(doc: LabelledDoc, spans: list[tuple[int, int, str]]) -> np.ndarray:
    """1 for the words inside the article's range, 0 for the chrome's."""
    starts = np.array([s for s, _, _ in spans], dtype=np.int64)
    return ((starts >= doc.article[0]) & (starts < doc.article[1])).astype(np.int8)


def line_lengths(text: str, spans: list[tuple[int, int, str]]) -> np.ndarray:
    """The number of words on each word's line (the teacher-free baseline)."""
    line = np.array([text.count("\n", 0, s) for s, _, _ in spans], dtype=np.int64)
    counts = np.bincount(line) if line.size else np.zeros(0, dtype=np.int64)
    return counts[line].astype(np.float64)


def roc_auc(scores: np.ndarray, y: np.ndarray) -> float:
    """Mann-Whitney ROC AUC of ``scores`` for ``y == 1`` (ties count one half); NaN without both classes."""
    pos, neg = int((y == 1).sum()), int((y == 0).sum())
    if pos == 0 or neg == 0:
        return float("nan")
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    ranks = (ends - (counts - 1) / 2.0)[inverse]  # average 1-based ranks
    return float((ranks[y == 1].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


@dataclass
class Score:
    doc_auc: float
    docs: int
    pooled_auc: float
    ratio: float
    coverage: float


def score(docs: list[LabelledDoc], results: list[DocumentImportance], values: list[np.ndarray] | None = None) -> Score:
    """AUCs and the article/chrome ratio over the covered words (``values`` replaces the importance)."""
    aucs: list[float] = []
    all_v: list[np.ndarray] = []
    all_y: list[np.ndarray] = []
    covered = total = 0
    for k, (doc, res) in enumerate(zip(docs, results)):
        v = res.importance if values is None else values[k]
        y = labels(doc, res.spans)
        keep = res.covered
        covered += int(keep.sum())
        total += keep.size
        auc = roc_auc(v[keep], y[keep])
        if not np.isnan(auc):
            aucs.append(auc)
        all_v.append(v[keep])
        all_y.append(y[keep])
    v_all, y_all = np.concatenate(all_v), np.concatenate(all_y)
    ratio = float(v_all[y_all == 1].mean() / v_all[y_all == 0].mean()) if (y_all == 0).any() else float("nan")
    return Score(
        doc_auc=float(np.mean(aucs)) if aucs else float("nan"),
        docs=len(aucs),
        pooled_auc=roc_auc(v_all, y_all),
        ratio=ratio,
        coverage=covered / max(total, 1),
    )


def _table(headers: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="the shared data root (default: %(default)s)")
    parser.add_argument("--pages", type=int, default=None, help="use at most this many fixtures (2 documents each)")
    parser.add_argument("--max-windows", type=int, default=8, help="256-token windows read per page in full mode")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=None, help="teacher name or folder (default: offline all-MiniLM-L6-v2)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("transformers").setLevel(logging.ERROR)

    import torch

    pages = read_readability_pages(args.data_dir)
    docs = build_docs(pages, args.pages, args.seed)
    n_pages = len(docs) // 2
    logger.info("%d documents from %d Readability fixtures", len(docs), n_pages)
    variants = [(a, p) for a in AGGREGATIONS for p in POOLINGS]
    texts = [d.text for d in docs]

    full = TeacherImportance(args.model, max_windows=args.max_windows, batch_size=args.batch_size)
    t0 = time.perf_counter()
    full_res = full.analyze_variants(texts, variants)
    full_s = time.perf_counter() - t0
    n_windows = len(full._windows(texts))
    logger.info("full: %d windows in %.1f s", n_windows, full_s)

    trunc = TeacherImportance(args.model, max_windows=1, batch_size=args.batch_size)
    trunc.analyze(texts[:8])  # warm-up
    t0 = time.perf_counter()
    trunc_res = trunc.analyze_variants(texts, variants)
    trunc_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    trunc.analyze(texts)  # the default variant only: the throughput a user gets
    default_s = time.perf_counter() - t0

    rows: list[list[str]] = []
    for a, p in variants:
        f, t = score(docs, full_res[(a, p)]), score(docs, trunc_res[(a, p)])
        rows.append(
            [
                f"`{a}`",
                p,
                f"{f.doc_auc:.3f}",
                f"{f.pooled_auc:.3f}",
                f"{f.ratio:.3f}",
                f"{t.doc_auc:.3f} ({t.docs})",
                f"{t.pooled_auc:.3f}",
                f"{t.ratio:.3f}",
            ]
        )
    base_full = score(docs, full_res[variants[0]], [line_lengths(d.text, r.spans) for d, r in zip(docs, full_res[variants[0]])])
    base_trunc = score(
        docs, trunc_res[variants[0]], [line_lengths(d.text, r.spans) for d, r in zip(docs, trunc_res[variants[0]])]
    )
    rows.append(
        [
            "baseline: words on the line",
            "-",
            f"{base_full.doc_auc:.3f}",
            f"{base_full.pooled_auc:.3f}",
            "-",
            f"{base_trunc.doc_auc:.3f} ({base_trunc.docs})",
            f"{base_trunc.pooled_auc:.3f}",
            "-",
        ]
    )
    cov_full = score(docs, full_res[variants[0]]).coverage
    cov_trunc = score(docs, trunc_res[variants[0]]).coverage
    print(f"\n### Article vs chrome words: {len(docs)} documents from {n_pages} Readability fixtures\n")
    print(
        f"Full: up to {args.max_windows} windows of 256 tokens, {cov_full:.1%} of the words covered. "
        f"Truncated: the first 256 tokens (default), {cov_trunc:.1%} covered; (n) = documents with both "
        "classes among the covered words.\n"
    )
    print(
        _table(
            [
                "aggregation",
                "pooling",
                "AUC/doc, full",
                "AUC pooled, full",
                "article/chrome, full",
                "AUC/doc, 256 tok",
                "AUC pooled, 256 tok",
                "article/chrome, 256 tok",
            ],
            rows,
        )
    )

    # ---- entropies: the article alone vs the chrome alone (first window each) -----------------
    alone = [d.article_text for d in docs[::2]] + [d.chrome_text for d in docs[::2]]
    is_article = np.array([1] * n_pages + [0] * n_pages, dtype=np.int8)
    ent_res = trunc.analyze_variants(alone, variants)
    ent_rows: list[list[str]] = []
    att = np.array([r.attention_entropy for r in ent_res[variants[0]]])
    ent_rows.append(
        [
            "attention entropy (all variants)",
            f"{att[is_article == 1].mean():.3f}",
            f"{att[is_article == 0].mean():.3f}",
            f"{roc_auc(-att, is_article):.3f}",
        ]
    )
    for a, p in variants:
        h = np.array([r.normalized_entropy for r in ent_res[(a, p)]])
        ent_rows.append(
            [
                f"word-importance entropy, `{a}`/{p}",
                f"{h[is_article == 1].mean():.3f}",
                f"{h[is_article == 0].mean():.3f}",
                f"{roc_auc(-h, is_article):.3f}",
            ]
        )
    print(f"\n### Entropy (normalised, first 256 tokens): article alone vs chrome alone, {n_pages} pages each\n")
    print("AUC: how well *low* entropy picks the article.\n")
    print(_table(["entropy", "article mean", "chrome mean", "AUC (low = article)"], ent_rows))

    # ---- throughput ---------------------------------------------------------------------------------
    tok_lens = [len(w.input_ids) for w in trunc._windows(texts)]
    bf16 = TeacherImportance(args.model, max_windows=1, batch_size=args.batch_size, dtype="bfloat16")
    bf16.analyze(texts[:8])  # warm-up
    t0 = time.perf_counter()
    bf16_res = bf16.analyze(texts)
    bf16_s = time.perf_counter() - t0
    bf16_score = score(docs, bf16_res)
    print(f"\n### Teacher throughput ({torch.get_num_threads()} torch threads, float32 unless said, batch {args.batch_size})\n")
    print(
        _table(
            ["setting", "documents", "mean tokens/window", "seconds", "documents/s", "windows/s"],
            [
                [
                    f"default (`{DEFAULT_AGGREGATION}`/{DEFAULT_POOLING}), max_windows=1",
                    str(len(texts)),
                    f"{np.mean(tok_lens):.0f}",
                    f"{default_s:.1f}",
                    f"{len(texts) / default_s:.2f}",
                    f"{len(texts) / default_s:.2f}",
                ],
                [
                    f"default, bfloat16 (AUC/doc {bf16_score.doc_auc:.3f}, float32 "
                    f"{score(docs, trunc_res[(DEFAULT_AGGREGATION, DEFAULT_POOLING)]).doc_auc:.3f})",
                    str(len(texts)),
                    f"{np.mean(tok_lens):.0f}",
                    f"{bf16_s:.1f}",
                    f"{len(texts) / bf16_s:.2f}",
                    f"{len(texts) / bf16_s:.2f}",
                ],
                [
                    f"all {len(variants)} variants, max_windows=1",
                    str(len(texts)),
                    f"{np.mean(tok_lens):.0f}",
                    f"{trunc_s:.1f}",
                    f"{len(texts) / trunc_s:.2f}",
                    f"{len(texts) / trunc_s:.2f}",
                ],
                [
                    f"all {len(variants)} variants, max_windows={args.max_windows}",
                    str(len(texts)),
                    "-",
                    f"{full_s:.1f}",
                    f"{len(texts) / full_s:.2f}",
                    f"{n_windows / full_s:.2f}",
                ],
            ],
        )
    )
    words = [len(word_spans(t)) for t in texts]
    print(f"\nDocuments: {len(texts)}, mean {np.mean(words):.0f} words, {n_windows / len(texts):.1f} windows each.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
