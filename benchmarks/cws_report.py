"""Compare the consistent weighted sampling variants of ``semhash_llm.sketch.cws`` and print Markdown tables.

    python benchmarks/cws_report.py                    # 4,000 docs for speed, 600 pairs, num_perm 128
    python benchmarks/cws_report.py --docs 20000 --pairs 1000 --num-perm 256

Synthetic data, made here from ``--seed``:

* Documents: ~330 words drawn from a Zipf(1.1) vocabulary of 50,000 words (about 2,000 characters of
  text), featurized as hashed word bigrams (~300 distinct per document). Every bigram occurrence
  gets an attention-like weight (log-normal, sigma 1); weights of a repeated bigram are summed.
* Pairs: a set A of 300 features with log-normal weights and a derived B that keeps a random share
  of A's features, replaces the others with fresh ones, multiplies the kept weights by log-normal
  noise (sigma uniform in [0, 0.5]) and, for a quarter of the pairs, scales all of B's weights by a
  constant in [0.5, 2]; the exact weighted Jaccard spreads over [0, 1].

Columns: documents per second (signing only, best of ``--repeats`` runs, 1 thread and all threads),
mean absolute error and bias (mean of estimate - exact, with its standard error) of the share of
equal slots against the exact weighted Jaccard, and the bias on pairs (A, c A) of a set and a scaled
copy (exact value 1 / c), where 0-bit CWS is known to overestimate. The unweighted MinHash row (``sketch.minhash``,
weights ignored) is context: it estimates plain Jaccard, not weighted Jaccard.
"""

from __future__ import annotations

import argparse
import time

import numba as nb
import numpy as np

from semhash_llm.sketch.cws import CWS_METHODS, cws_signatures, weighted_jaccard, weighted_jaccard_estimate
from semhash_llm.sketch.minhash import minhash_into, minhash_permutations

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _hash_pairs(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """64-bit hashes of word-id bigrams (SplitMix64 finalizer of a packed pair)."""
    with np.errstate(over="ignore"):
        x = left.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + right.astype(np.uint64)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def make_documents(rng: np.random.Generator, n_docs: int, words: int = 331, vocab: int = 50_000) -> tuple:
    """CSR batch of ``n_docs`` documents: bigram hashes with log-normal weights per occurrence."""
    ranks = np.arange(1, vocab + 1, dtype=np.float64)
    p = ranks**-1.1
    p /= p.sum()
    ids = rng.choice(vocab, size=(n_docs, words), p=p)
    feats = _hash_pairs(ids[:, :-1], ids[:, 1:]).reshape(-1)
    weights = rng.lognormal(0.0, 1.0, size=feats.shape[0])
    offsets = np.arange(n_docs + 1, dtype=np.int64) * (words - 1)
    return offsets, feats, weights


def make_scaled_pairs(rng: np.random.Generator, n_pairs: int, n_features: int = 300) -> list[tuple]:
    """Pairs (A, c A) with c log-uniform in [1, 10]: exact weighted Jaccard 1 / c."""
    pairs = []
    for _ in range(n_pairs):
        fa = rng.integers(0, 2**64 - 1, size=n_features, dtype=np.uint64, endpoint=True)
        wa = rng.lognormal(0.0, 1.0, size=n_features)
        pairs.append((fa, wa, fa, wa * 10.0 ** rng.uniform(0.0, 1.0)))
    return pairs


def make_pairs(rng: np.random.Generator, n_pairs: int, n_features: int = 300) -> list[tuple]:
    """Pairs (fa, wa, fb, wb) whose exact weighted Jaccard spreads over [0, 1]."""
    pairs = []
    for _ in range(n_pairs):
        fa = rng.integers(0, 2**64 - 1, size=n_features, dtype=np.uint64, endpoint=True)
        wa = rng.lognormal(0.0, 1.0, size=n_features)
        keep = rng.random(n_features) < np.sqrt(rng.random())
        fb = np.where(keep, fa, rng.integers(0, 2**64 - 1, size=n_features, dtype=np.uint64, endpoint=True))
        wb = np.where(keep, wa * rng.lognormal(0.0, rng.uniform(0.0, 0.5), size=n_features), wa)
        if rng.random() < 0.25:
            wb = wb * rng.uniform(0.5, 2.0)
        pairs.append((fa, wa, fb, wb))
    return pairs


@nb.njit(parallel=True)
def _minhash_batch(offsets: np.ndarray, feats: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    for d in nb.prange(out.shape[0]):
        start = offsets[d]
        minhash_into(feats[start:], offsets[d + 1] - start, a, b, out[d])


def _sign(method: str, offsets: np.ndarray, feats: np.ndarray, weights: np.ndarray, num_perm: int) -> np.ndarray:
    if method == "minhash":
        a, b = minhash_permutations(num_perm, 1)
        out = np.empty((offsets.shape[0] - 1, num_perm), dtype=np.uint32)
        _minhash_batch(offsets, feats, a, b, out)
        return out
    return cws_signatures(offsets, feats, weights, num_perm=num_perm, seed=1, method=method)  # type: ignore[arg-type]


def docs_per_second(method: str, batch: tuple, num_perm: int, threads: int, repeats: int) -> float:
    offsets, feats, weights = batch
    nb.set_num_threads(threads)
    warm = offsets[:3]
    _sign(method, warm, feats[: warm[-1]], weights[: warm[-1]], num_perm)  # compile / load from cache
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        _sign(method, offsets, feats, weights, num_perm)
        best = min(best, time.perf_counter() - t0)
    return (offsets.shape[0] - 1) / best


def accuracy(method: str, pairs: list[tuple], exact: np.ndarray, num_perm: int) -> tuple[float, float, float]:
    """(mean absolute error, bias, standard error of the bias) over ``pairs``."""
    feats = np.concatenate([x for fa, _, fb, _ in pairs for x in (fa, fb)])
    weights = np.concatenate([x for _, wa, _, wb in pairs for x in (wa, wb)])
    sizes = [x.shape[0] for fa, _, fb, _ in pairs for x in (fa, fb)]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    sigs = _sign(method, offsets, feats, weights, num_perm)
    est = np.array([weighted_jaccard_estimate(sigs[2 * i], sigs[2 * i + 1]) for i in range(len(pairs))])
    err = est - exact
    return float(np.abs(err).mean()), float(err.mean()), float(err.std(ddof=1) / np.sqrt(err.shape[0]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=4000, help="documents for the speed columns")
    ap.add_argument("--pairs", type=int, default=600, help="pairs for the accuracy columns")
    ap.add_argument("--num-perm", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    rng = np.random.default_rng(args.seed)
    batch = make_documents(rng, args.docs)
    offsets, feats, weights = batch
    distinct = [np.unique(feats[offsets[d] : offsets[d + 1]]).shape[0] for d in range(min(args.docs, 500))]
    pairs = make_pairs(rng, args.pairs)
    exact = np.array([weighted_jaccard(*p) for p in pairs])
    scaled = make_scaled_pairs(rng, max(args.pairs // 3, 50))
    exact_scaled = np.array([weighted_jaccard(*p) for p in scaled])
    all_threads = nb.config.NUMBA_NUM_THREADS

    print(
        f"{args.docs} documents, {np.mean(distinct):.0f} distinct weighted features each (mean), "
        f"num_perm {args.num_perm}; {args.pairs} pairs, exact weighted Jaccard mean {exact.mean():.3f}, "
        f"quartiles {np.quantile(exact, 0.25):.3f} / {np.median(exact):.3f} / {np.quantile(exact, 0.75):.3f}.\n"
    )
    headers = [
        "variant",
        "docs/s (1 thread)",
        f"docs/s ({all_threads} threads)",
        "MAE vs exact J_w",
        "bias (± s.e.)",
        "bias on (A, cA), c in [1, 10]",
    ]
    rows = []
    for method in (*CWS_METHODS, "minhash"):
        one = docs_per_second(method, batch, args.num_perm, 1, args.repeats)
        many = docs_per_second(method, batch, args.num_perm, all_threads, args.repeats)
        mae, bias, se = accuracy(method, pairs, exact, args.num_perm)
        _, bias_c, se_c = accuracy(method, scaled, exact_scaled, args.num_perm)
        name = "minhash (unweighted)" if method == "minhash" else method
        rows.append(
            [
                name,
                f"{one:,.0f}",
                f"{many:,.0f}",
                f"{mae:.4f}",
                f"{bias:+.4f} ± {se:.4f}",
                f"{bias_c:+.4f} ± {se_c:.4f}",
            ]
        )
    print("| " + " | ".join(headers) + " |")
    print("|" + "|".join("---" for _ in headers) + "|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print(f"\nBinomial reference: mean sqrt(J(1-J)/K) = {np.sqrt(exact * (1 - exact) / args.num_perm).mean():.4f}.")


if __name__ == "__main__":
    main()
