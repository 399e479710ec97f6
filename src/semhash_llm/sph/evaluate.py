"""Measurements of the SPH parts: student vs teacher, code quality, blocking, speed.

Used by ``semhash-llm train sph`` (for the model card) and ``benchmarks/sph_report.py``.
"""

from __future__ import annotations

import csv
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from semhash_llm.sph.blocking import hamming_candidates
from semhash_llm.sph.hyperplanes import SPHHasher, as_words, bit_balance, hamming_distance

logger = logging.getLogger(__name__)


def read_sts(path: str | Path) -> tuple[list[str], list[str], np.ndarray]:
    """STS Benchmark file (tab-separated: genre, file, year, id, score, sentence1, sentence2, ...)."""
    s1: list[str] = []
    s2: list[str] = []
    scores: list[float] = []
    with open(path, encoding="utf-8") as fh:
        for line_no, row in enumerate(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE), 1):
            if len(row) < 7:
                raise ValueError(f"{path}, line {line_no}: expected >= 7 tab-separated fields (STS Benchmark). Got {len(row)}.")
            scores.append(float(row[4]))
            s1.append(row[5])
            s2.append(row[6])
    return s1, s2, np.asarray(scores, dtype=np.float64)


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks with ties given their average rank (as in scipy.stats.rankdata)."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    boundaries = np.flatnonzero(np.diff(sorted_x)) + 1
    starts = np.concatenate([[0], boundaries])
    ends = np.concatenate([boundaries, [len(x)]])
    avg = (starts + ends - 1) / 2.0
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.repeat(avg, ends - starts)
    return ranks


def roc_auc(score: np.ndarray, label: np.ndarray) -> float:
    """Area under the ROC curve of ``score`` for ``label == 1`` against ``label == 0`` (the
    Mann-Whitney statistic; tied scores count one half); NaN when a class is empty."""
    score, label = np.asarray(score, dtype=np.float64), np.asarray(label)
    pos = int(np.count_nonzero(label == 1))
    neg = int(np.count_nonzero(label == 0))
    if pos == 0 or neg == 0:
        return float("nan")
    both = (label == 1) | (label == 0)
    ranks = _ranks(score[both]) + 1.0  # 1-based
    return float((ranks[label[both] == 1].sum() - pos * (pos + 1) / 2) / (pos * neg))


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman rank correlation (average ranks for ties)."""
    return pearson(_ranks(x), _ranks(y))


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.corrcoef(np.asarray(x, np.float64), np.asarray(y, np.float64))[0, 1])


def sts_spearman(encode: Callable[[Sequence[str]], np.ndarray], path: str | Path) -> float:
    """Spearman between cosine of the two sentences' embeddings and the gold score."""
    s1, s2, scores = read_sts(path)
    a, b = encode(s1), encode(s2)
    return spearman((a * b).sum(axis=1), scores)


def throughput(encode: Callable[[Sequence[str]], np.ndarray], texts: Sequence[str], min_seconds: float = 2.0) -> float:
    """Documents per second of ``encode`` on ``texts`` (repeated until ``min_seconds``)."""
    encode(list(texts[: min(8, len(texts))]))  # warm-up (caches, lazy init)
    done, start = 0, time.perf_counter()
    while True:
        encode(list(texts))
        done += len(texts)
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return done / elapsed


@dataclass(frozen=True)
class AgreementScores:
    """Student vs (projected) teacher on the same texts."""

    mean_cosine: float
    pairwise_pearson: float
    pairwise_spearman: float


def student_teacher_agreement(
    student_emb: np.ndarray, teacher_proj: np.ndarray, teacher_full: np.ndarray, max_docs: int = 1500
) -> AgreementScores:
    """Mean ``cos(e_stu, e_tea')`` and correlation of the two models' pairwise cosines."""
    n = min(len(student_emb), max_docs)
    s, t = student_emb[:n], teacher_full[:n]
    iu = np.triu_indices(n, 1)
    ps, pt = (s @ s.T)[iu], (t @ t.T)[iu]
    return AgreementScores(
        mean_cosine=float((student_emb * teacher_proj).sum(axis=1).mean()),
        pairwise_pearson=pearson(ps, pt),
        pairwise_spearman=spearman(ps, pt),
    )


@dataclass(frozen=True)
class CodeScores:
    """How well a hasher's code agreement tracks ``(1 + cos) / 2`` (eq. 5), and its bits."""

    bits: int
    pearson: float
    spearman: float
    mae: float
    balance_min: float
    balance_max: float
    balance_mean_abs_dev: float
    orthogonality_error: float


def code_scores(hasher: SPHHasher, emb: np.ndarray, pairs: tuple[np.ndarray, np.ndarray]) -> CodeScores:
    """Agreement ``1 - d / K`` vs ``(1 + cos) / 2`` over ``pairs`` of rows of ``emb``."""
    a, b = pairs
    codes = hasher.codes(emb)
    agree = 1.0 - hamming_distance(codes[a], codes[b]) / hasher.bits
    target = (1.0 + (emb[a] * emb[b]).sum(axis=1)) / 2.0
    balance = bit_balance(hasher.bit_matrix(emb))
    return CodeScores(
        bits=hasher.bits,
        pearson=pearson(agree, target),
        spearman=spearman(agree, target),
        mae=float(np.abs(agree - target).mean()),
        balance_min=float(balance.min()),
        balance_max=float(balance.max()),
        balance_mean_abs_dev=float(np.abs(balance - 0.5).mean()),
        orthogonality_error=hasher.orthogonality_error(),
    )


@dataclass(frozen=True)
class BlockingScores:
    """Recall of known duplicate pairs and the pruned share of the all-pairs space."""

    radius: int
    num_documents: int
    true_pairs: int
    recall: float
    candidate_pairs: int
    pruned_fraction: float


def blocking_scores(
    codes: np.ndarray,
    true_pairs: tuple[np.ndarray, np.ndarray],
    radius: int,
    num_chunks: int,
    bits: int,
) -> BlockingScores:
    """Run Hamming blocking (``hot_spots='expand'``: every pair is scored) and score it."""
    cands = hamming_candidates(codes, radius=radius, num_chunks=num_chunks, bits=bits, hot_spots="expand")
    n = cands.num_documents
    found = set((cands.a * n + cands.b).tolist())
    ta = np.minimum(true_pairs[0], true_pairs[1])
    tb = np.maximum(true_pairs[0], true_pairs[1])
    keys = np.unique(ta * n + tb)
    hit = sum(1 for k in keys.tolist() if k in found)
    return BlockingScores(
        radius=radius,
        num_documents=n,
        true_pairs=int(len(keys)),
        recall=hit / len(keys) if len(keys) else float("nan"),
        candidate_pairs=len(cands),
        pruned_fraction=cands.pruned_fraction,
    )


def random_pairs(n: int, count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``count`` distinct-index random pairs among ``n`` items (seeded)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n, size=count)
    b = (a + rng.integers(1, n, size=count)) % n
    return a.astype(np.int64), b.astype(np.int64)


def all_pairs_distance_histogram(codes: np.ndarray, bits: int, block: int = 512) -> np.ndarray:
    """Counts of all pairs ``i < j`` at each Hamming distance 0..bits (exact, O(n^2) in blocks).

    Gives the candidate count of blocking at *every* radius at once (blocking is exact).
    """
    words = as_words(codes)
    n = len(words)
    hist = np.zeros(bits + 1, dtype=np.int64)
    for start in range(0, n, block):
        stop = min(n, start + block)
        d = np.bitwise_count(words[start:stop, None, :] ^ words[None, start:, :]).sum(axis=2)
        rows = np.arange(stop - start)[:, None]
        cols = np.arange(n - start)[None, :]
        hist += np.bincount(d[cols > rows], minlength=bits + 1)[: bits + 1]
    return hist
