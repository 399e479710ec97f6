"""Learned SPH codes vs random-hyperplane SimHash at an equal candidate budget (``hamming_knn``).

    python benchmarks/codes_report.py                                  # /tmp/bench_full, K = 32, 64, 128
    python benchmarks/codes_report.py --bench-dir DIR --bits 64 --ks 1,4,16

The development benchmark at ``--bench-dir`` (``corpus/corpus.jsonl`` and ``corpus/truth.json``,
as written by ``semhash_llm.bench``) is embedded once with the shipped static student. The
embeddings are hashed with (a) the shipped learned hyperplanes and (b) random-hyperplane SimHash
(seeds 0, 1, 2; the SimHash rows are the mean over the seeds) at each K. For every k of the
per-document budget, ``hamming_knn`` proposes each document's k nearest codes within the radius
(radius = K / 4, and radius = K, i.e. no radius limit), so both hashings propose about the same
number of candidates and the comparison is of what they spend that budget on.

Per row:

* ``cand/doc``: candidate pairs per document (at most k);
* ``A``, ``B``, ``C``: recall of the true pairs within the duplicate groups of each category
  (every pair of members), ``D``: recall of the containment (child, parent) pairs;
* ``links A/B/C``: share of each group's n - 1 links that the candidate edges provide, i.e. how
  much of each group a union-find over the candidates joins (large groups cannot have all their
  pairs proposed under a budget of k, but they can still be connected);
* ``neg``: share of the hard-negative families' pairs (look-alike documents that must all be
  kept) that were proposed: lower is better.

In brackets after each number: the same measure for the *exact* kNN lists at the same k and
radius (brute force over all pairs, same tie-break), so that what the codes can give under the
budget is told apart from what the approximate sorted-permutation search loses. The ``all`` rows
(radius K / 4 only) are the reference without a budget: every pair within the radius (counted
exactly over all pairs), i.e. the recall ceiling of that radius and its cost. ``--no-exact``
skips the brute force.

Bit balance: share of bits whose mean over the corpus is within 0.1 of 0.5 (per hashing; mean over
the SimHash seeds).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

import numba as nb
import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from semhash_llm.bench.truth import GroundTruth, read_corpus  # noqa: E402
from semhash_llm.sketch.unionfind import UnionFind  # noqa: E402
from semhash_llm.sph import SPHHasher, load_hasher, load_student  # noqa: E402
from semhash_llm.sph.blocking import _offer, _popcount64, hamming_knn  # noqa: E402
from semhash_llm.sph.hyperplanes import as_words, hamming_distance  # noqa: E402

logger = logging.getLogger("codes_report")

CATEGORIES = ("A", "B", "C", "D", "neg")


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _table(headers: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _all_pairs(members: list[int]) -> list[tuple[int, int]]:
    return [(x, y) for i, x in enumerate(members) for y in members[i + 1 :]]


def _true_pairs(truth: GroundTruth, index: dict[str, int]) -> tuple[dict[str, np.ndarray], dict[str, list[list[int]]]]:
    """Sorted keys ``a * n + b`` (a < b) of the true pairs of each category, and the A/B/C groups."""
    n = len(index)
    pairs: dict[str, list[tuple[int, int]]] = {c: [] for c in CATEGORIES}
    groups: dict[str, list[list[int]]] = {c: [] for c in "ABC"}
    for g in truth.groups:
        ids = [index[m] for m in g.members]
        groups[g.category].append(ids)
        pairs[g.category] += _all_pairs(ids)
    for cont in truth.containments:
        pairs["D"].append((index[cont.child], index[cont.parent]))
    for neg in truth.negatives:
        pairs["neg"] += _all_pairs([index[m] for m in neg.members])
    keys = {}
    for c, ps in pairs.items():
        arr = np.asarray(ps, dtype=np.int64).reshape(-1, 2)
        a, b = arr.min(axis=1), arr.max(axis=1)
        keys[c] = np.unique(a * n + b)
    return keys, groups


def _link_share(groups: list[list[int]], a: np.ndarray, b: np.ndarray, n: int) -> float:
    """Share of the groups' sum(len - 1) links that the candidate edges inside the groups provide."""
    member_group = np.full(n, -1, dtype=np.int64)
    for gi, g in enumerate(groups):
        member_group[g] = gi
    inside = (member_group[a] >= 0) & (member_group[a] == member_group[b])
    uf = UnionFind(n)
    uf.union_many(a[inside], b[inside])
    roots = uf.roots()
    need = sum(len(g) - 1 for g in groups)
    have = sum(len(g) - len(set(roots[g].tolist())) for g in groups)
    return have / need if need else float("nan")


def _scores(a: np.ndarray, b: np.ndarray, n: int, true: dict[str, np.ndarray], groups: dict[str, list[list[int]]]) -> dict[str, float]:
    keys = np.unique(a * n + b)
    out = {c: float(np.isin(true[c], keys, assume_unique=True).mean()) for c in CATEGORIES}
    out["cand/doc"] = len(keys) / n
    for c in "ABC":
        out[f"links {c}"] = _link_share(groups[c], a, b, n)
    return out


@nb.njit(cache=True)
def _exact_lists(words: np.ndarray, kmax: int, bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """Brute force over all pairs: every code's ``kmax`` nearest (distance, then index) and the
    histogram of all pairwise distances. Uses hamming_knn's own top-k insertion."""
    n, num_words = words.shape
    best_j = np.full((n, kmax), -1, dtype=np.int64)
    best_d = np.zeros((n, kmax), dtype=np.int64)
    hist = np.zeros(bits + 1, dtype=np.int64)
    for i in range(n):
        for j in range(i + 1, n):
            d = 0
            for w in range(num_words):
                d += _popcount64(words[i, w] ^ words[j, w])
            hist[d] += 1
            _offer(best_j, best_d, i, j, d)
            _offer(best_j, best_d, j, i, d)
    return best_j, best_d, hist


def _exact_knn_pairs(best_j: np.ndarray, best_d: np.ndarray, k: int, radius: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact kNN union for budget ``k`` and ``radius`` from the brute-force lists."""
    n = len(best_j)
    j, d = best_j[:, :k].ravel(), best_d[:, :k].ravel()
    i = np.repeat(np.arange(n, dtype=np.int64), k)
    keep = (j >= 0) & (d <= radius)
    return np.minimum(i, j)[keep], np.maximum(i, j)[keep]


def _within_radius_scores(codes: np.ndarray, hist: np.ndarray, radius: int, n: int, true: dict[str, np.ndarray]) -> dict[str, float]:
    """Recall of every pair within ``radius`` (no budget) and its exact candidate count."""
    out: dict[str, float] = {}
    for c in CATEGORIES:
        a, b = true[c] // n, true[c] % n
        out[c] = float((hamming_distance(codes[a], codes[b]) <= radius).mean())
    out["cand/doc"] = float(hist[: radius + 1].sum()) / n
    for c in "ABC":
        out[f"links {c}"] = float("nan")  # not computed: would need the full pair list
    return out


def _mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: float(np.mean([r[key] for r in rows])) for key in rows[0]}


def _cell(key: str, s: dict[str, float], ref: dict[str, float] | None, digits: int) -> str:
    def f(x: float) -> str:
        return "–" if np.isnan(x) else f"{x:.{digits}f}"

    return f(s[key]) if ref is None else f"{f(s[key])} ({f(ref[key])})"


def _row(bits: int, radius: int, k: str, name: str, s: dict[str, float], ref: dict[str, float] | None = None) -> list[str]:
    links = " / ".join(_cell(f"links {c}", s, ref, 3) for c in "ABC")
    return [str(bits), str(radius), k, name, _cell("cand/doc", s, ref, 2), *(_cell(c, s, ref, 3) for c in "ABCD"), links,
            _cell("neg", s, ref, 3)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench-dir", type=Path, default=Path("/tmp/bench_full"),
                        help="a generated benchmark with corpus/corpus.jsonl and corpus/truth.json")
    parser.add_argument("--bits", type=_ints, default=[32, 64, 128], help="code lengths (shipped: 32, 64, 128)")
    parser.add_argument("--ks", type=_ints, default=[1, 2, 4, 8, 16], help="per-document budgets k")
    parser.add_argument("--simhash-seeds", type=_ints, default=[0, 1, 2])
    parser.add_argument("--num-perms", type=int, default=8, help="hamming_knn permutations")
    parser.add_argument("--window", type=int, default=8, help="hamming_knn window")
    parser.add_argument("--no-exact", action="store_true", help="skip the exact all-pairs reference rows")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)

    t_start = time.perf_counter()
    corpus_dir = args.bench_dir / "corpus"
    records = read_corpus(corpus_dir / "corpus.jsonl")
    truth = GroundTruth.read(corpus_dir / "truth.json")
    index = {str(r["id"]): i for i, r in enumerate(records)}
    n = len(records)
    true, groups = _true_pairs(truth, index)

    student = load_student()
    t0 = time.perf_counter()
    emb = student.encode([str(r["text"]) for r in records])
    t_embed = time.perf_counter() - t0
    logger.info("embedded %d documents in %.1f s", n, t_embed)

    rows: list[list[str]] = []
    balance: list[list[str]] = []
    t_knn = t_exact = 0.0
    for bits in args.bits:
        hashers: dict[str, list[SPHHasher]] = {
            "learned (SPH)": [load_hasher(None, bits)],
            f"SimHash (mean of {len(args.simhash_seeds)} seeds)": [
                SPHHasher.simhash(student.dim, bits, s) for s in args.simhash_seeds
            ],
        }
        codes: dict[str, list[np.ndarray]] = {}
        exact: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        for name, hs in hashers.items():
            codes[name], exact[name] = [], []
            shares = []
            for h in hs:
                bit_matrix = h.bit_matrix(emb)
                shares.append(float((np.abs(bit_matrix.mean(axis=0) - 0.5) <= 0.1).mean()))
                codes[name].append(h.codes(emb))
                if not args.no_exact:
                    t0 = time.perf_counter()
                    exact[name].append(_exact_lists(np.ascontiguousarray(as_words(codes[name][-1])), max(args.ks), bits))
                    t_exact += time.perf_counter() - t0
            balance.append([str(bits), name, f"{np.mean(shares):.3f}"])
        for radius in (bits // 4, bits):
            if radius == bits // 4 and not args.no_exact:
                for name, cs in codes.items():
                    within = [_within_radius_scores(c, e[2], radius, n, true) for c, e in zip(cs, exact[name])]
                    rows.append(_row(bits, radius, "all", name, _mean(within)))
            for k in args.ks:
                for name, cs in codes.items():
                    scores, refs = [], []
                    for ci, c in enumerate(cs):
                        t0 = time.perf_counter()
                        pairs = hamming_knn(c, k, radius, bits, num_perms=args.num_perms, window=args.window)
                        t_knn += time.perf_counter() - t0
                        scores.append(_scores(pairs.a, pairs.b, n, true, groups))
                        if not args.no_exact:
                            refs.append(_scores(*_exact_knn_pairs(exact[name][ci][0], exact[name][ci][1], k, radius), n,
                                                true, groups))
                    rows.append(_row(bits, radius, str(k), name, _mean(scores), _mean(refs) if refs else None))
        logger.info("K=%d done", bits)

    sizes = ", ".join(f"{c} {len(true[c]):,}" for c in CATEGORIES)
    print(
        f"# Learned codes vs SimHash at equal candidates ({args.bench_dir})\n\n"
        f"{n:,} documents; true pairs {sizes} (neg = hard-negative pairs, lower is better). "
        f"Cells: hamming_knn with num_perms={args.num_perms}, window={args.window} (in brackets: the exact kNN "
        f"lists, brute force over all pairs, same k and radius); the `all` rows are every pair within the radius "
        f"(exact, no budget). Student embedding {t_embed:.1f} s, hamming_knn {t_knn:.1f} s, brute force "
        f"{t_exact:.1f} s, total {time.perf_counter() - t_start:.0f} s.\n"
    )
    print(_table(["K", "radius", "k", "hashing", "cand/doc", "recall A", "recall B", "recall C", "recall D",
                  "links A / B / C", "neg proposed"], rows))
    print("\n## Bit balance (share of bits with mean within 0.1 of 0.5)\n")
    print(_table(["K", "hashing", "balanced bits"], balance))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
