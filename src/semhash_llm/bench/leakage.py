"""How much of the development benchmark the shipped models could have seen in training.

    python -m semhash_llm.bench.leakage --bench-dir DIR [--data DATA] [--n 8] [--threshold 0.5]

Counts the benchmark documents (``DIR/corpus.jsonl``, as ``semhash-llm bench --out`` writes it)
whose word ``n``-grams are mostly in the training part of the shared sources
(:mod:`semhash_llm.datasplit`), and, for comparison, in the whole source files.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from semhash_llm.bench.runner import default_data_dir
from semhash_llm.bench.truth import read_corpus
from semhash_llm.datasplit import WIKIPEDIA_FIXTURE, ngram_overlap
from semhash_llm.sph.corpus import read_corpus_documents

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Print the overlap counts; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m semhash_llm.bench.leakage",
        description="Count benchmark documents whose word 8-grams are mostly in the SPH training texts.",
    )
    parser.add_argument("--bench-dir", type=Path, required=True, help="a generated benchmark (corpus.jsonl)")
    parser.add_argument("--data", type=Path, default=None, help="the shared data folder (default: the benchmark's)")
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--examples", type=int, default=5, help="print this many of the most overlapping documents")
    args = parser.parse_args(argv)

    data = args.data or default_data_dir()
    paths = [
        data / "gensim_lee_wiki" / WIKIPEDIA_FIXTURE,
        *(data / "nltk" / c for c in ("movie_reviews", "state_union", "inaugural")),
    ]
    records = read_corpus(args.bench_dir / "corpus.jsonl")
    texts = [str(r["text"]) for r in records]
    print(f"{args.bench_dir}: {len(texts):,} documents; word {args.n}-grams; threshold {args.threshold:.0%}")
    for label, which in (("training part only (what SPH trains on)", "train"), ("whole files, no split", None)):
        reference = [doc for _, doc in read_corpus_documents(paths, part=which)]  # type: ignore[arg-type]
        count, shares = ngram_overlap(texts, reference, args.n, args.threshold)
        print(f"  reference = {label}: {len(reference):,} source documents -> {count:,} of {len(texts):,} "
              f"benchmark documents at >= {args.threshold:.0%}")
        if which == "train" and args.examples:
            for i in sorted(range(len(texts)), key=lambda j: -shares[j])[: args.examples]:
                print(f"    {shares[i]:.2f}  {records[i]['id']}  {texts[i][:100]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
