"""The development benchmark (BENCHMARK.md): an A–E corpus from real text, its scorer, and the peers.

* :func:`generate` builds ``corpus.jsonl`` + ``truth.json`` from ``../shared/data`` (deterministic by seed);
* :func:`score` scores a decisions table (the ``documents.parquet`` contract) against the truth;
* :mod:`semhash_llm.bench.baselines` holds exact hashing, MinHash-LSH, SimHash-64, NearDup-BERT and semhash;
* :func:`run_bench` / ``semhash-llm bench`` runs everything on one corpus and prints one table.

Command line (until ``semhash-llm bench`` is wired to it)::

    python -m semhash_llm.bench.runner --size small            # ≈ 3k documents
    python -m semhash_llm.bench.runner --size full --out DIR   # ≥ 20k documents, cache and decisions in DIR
"""

from __future__ import annotations

from semhash_llm.bench.generator import SIZES, GeneratedBench, SizeSpec, generate
from semhash_llm.bench.scorer import ScoreResult, load_decisions, score
from semhash_llm.bench.truth import GroundTruth

__all__ = [
    "SIZES",
    "SizeSpec",
    "GeneratedBench",
    "generate",
    "GroundTruth",
    "ScoreResult",
    "load_decisions",
    "score",
    "BenchResult",
    "run_bench",
    "format_markdown",
]


def __getattr__(name: str) -> object:
    # The runner is loaded lazily so ``python -m semhash_llm.bench.runner`` does not import it twice.
    if name in ("BenchResult", "run_bench", "format_markdown"):
        from semhash_llm.bench import runner

        return getattr(runner, name)
    raise AttributeError(f"module 'semhash_llm.bench' has no attribute {name!r}")
