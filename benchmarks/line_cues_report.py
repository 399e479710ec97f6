"""How well do the teacher-free line cues of ``text/lines.py`` tell article words from page chrome?

    python benchmarks/line_cues_report.py [--data-dir ../shared/data]

The same 176 labelled pages as ``benchmarks/importance_report.py`` (Readability articles in
their own and in another page's chrome; measured, never trained on: their content belongs to
its publishers). For every canonical token, cue scores from its line: the tokens on the line,
whether the line ends a sentence, how many of the pages repeat the line (a count-min sketch
over line hashes), two combinations, the distilled attention importance of AW-MinHash and the
weight the AW stage gives a token. Prints the ROC AUC of "the token is in the article"
per cue, the mean over pages and pooled over all tokens, and the cues' throughput.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from importance_report import DEFAULT_DATA, build_docs, roc_auc  # noqa: E402

from semhash_llm.aw.importance import ImportanceModel  # noqa: E402
from semhash_llm.aw.weights import line_cue  # noqa: E402
from semhash_llm.bench.sources import read_readability_pages  # noqa: E402
from semhash_llm.config import NormalizeConfig, ShingleConfig  # noqa: E402
from semhash_llm.sketch.docfreq import DocumentFrequency  # noqa: E402
from semhash_llm.text.lines import token_lines  # noqa: E402
from semhash_llm.text.normalize import char_classes, normalize_batch  # noqa: E402
from semhash_llm.text.tokenize import tokenize_batch  # noqa: E402


def token_starts(text: str, cfg: NormalizeConfig) -> np.ndarray:
    """Start offset (original text) of each canonical token, by the tokenizer's class table on
    the normalized text; exact where normalization keeps lengths (checked by the caller)."""
    classes = char_classes(cfg.strip_punctuation)
    norm = normalize_batch([text], cfg)[0]
    starts: list[int] = []
    in_word = False
    for i, ch in enumerate(norm):
        c = classes[ord(ch)]
        if c == 1:
            if not in_word:
                starts.append(i)
                in_word = True
        else:
            in_word = False
            if c != 0:
                starts.append(i)
    return np.asarray(starts, dtype=np.int64)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    docs = build_docs(read_readability_pages(args.data_dir), None, args.seed)
    cfg = NormalizeConfig()
    classes = char_classes(cfg.strip_punctuation)
    texts = [d.text for d in docs]
    warm = normalize_batch(texts[:2], cfg)  # compile the kernels before timing
    token_lines(warm, classes, tokenize_batch(warm, classes, ShingleConfig()).tok_offsets)
    t0 = time.perf_counter()
    norm = normalize_batch(texts, cfg)
    tb = tokenize_batch(norm, classes, ShingleConfig())
    lb = token_lines(norm, classes, tb.tok_offsets)
    line_df = DocumentFrequency(width_bits=20)
    doc_of_line = np.repeat(np.arange(len(texts)), np.diff(lb.line_offsets))
    line_df.add(lb.line_offsets, lb.hash)
    seconds = time.perf_counter() - t0
    model = ImportanceModel.load()
    repeats = line_df.df(lb.hash).astype(np.float64)  # pages holding the same line (1 = only this page)
    tok_line = lb.tok_line
    cues = {
        "tokens on the line": lb.tokens[tok_line].astype(np.float64),
        "line ends a sentence": lb.terminal[tok_line].astype(np.float64),
        "line unique to the page (1 / repeats)": 1.0 / repeats[tok_line],
        "tokens on the line × (ends a sentence ? 1 : 0.7)": lb.tokens[tok_line] * np.where(lb.terminal[tok_line], 1.0, 0.7),
        "tokens on the line / repeats": lb.tokens[tok_line] / repeats[tok_line],
        # The cheap path of AW-MinHash (semhash_llm.aw.importance, the shipped model), and the
        # weight the AW stage gives a token: that model times the line-length logistic.
        "distilled attention importance (token table + line cues)": model.absolute(tb, lb).astype(np.float64),
        "distilled importance, token table only": np.exp(model.table.astype(np.float64)[model.buckets(tb.tok_hashes)]),
        "AW stage weight (line logistic × distilled importance)":
            (line_cue(tb, lb, 8.0, 2.0) * model.absolute(tb, lb)).astype(np.float64),
        "line logistic × token table only":
            line_cue(tb, lb, 8.0, 2.0) * np.exp(model.table.astype(np.float64)[model.buckets(tb.tok_hashes)]),
    }
    labels = np.zeros(tok_line.size, dtype=np.int8)
    usable = np.zeros(len(docs), dtype=bool)
    for d, doc in enumerate(docs):
        s, e = int(tb.tok_offsets[d]), int(tb.tok_offsets[d + 1])
        starts = token_starts(doc.text, cfg)
        if starts.size != e - s or len(norm[d]) != len(doc.text):
            continue  # normalization changed lengths: offsets would not line up
        usable[d] = True
        labels[s:e] = (starts >= doc.article[0]) & (starts < doc.article[1])
    print(f"{int(usable.sum())} of {len(docs)} pages usable; cues for {len(texts)} pages in {seconds:.2f} s "
          f"({len(texts) / seconds:,.0f} pages/s, {doc_of_line.size:,} lines)")
    print("| cue | AUC, mean over pages | AUC, pooled |")
    print("|---|---:|---:|")
    tok_doc = np.repeat(np.arange(len(texts)), np.diff(tb.tok_offsets))
    keep = usable[tok_doc]
    for name, score in cues.items():
        per_page = [roc_auc(score[tb.tok_offsets[d]:tb.tok_offsets[d + 1]], labels[tb.tok_offsets[d]:tb.tok_offsets[d + 1]])
                    for d in np.flatnonzero(usable)]
        per_page = [a for a in per_page if np.isfinite(a)]
        print(f"| {name} | {np.mean(per_page):.3f} | {roc_auc(score[keep], labels[keep]):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
