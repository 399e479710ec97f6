"""AW-MinHash weightings on the development benchmark: wrapped copies (type A) against same-site templates.

    python benchmarks/aw_report.py /tmp/bench_full      # a folder written by `semhash-llm bench --size full`

For every weighting the AW stage offers (``semhash_llm.stages.aw``: importance ``line`` /
``model``, with and without IDF over the corpus, and unweighted shingles for context), the exact
weighted Jaccard (``sketch.cws.weighted_jaccard``) of

* every pair of one type-A group (one article in different page chrome: should be high),
* every pair of one same-site template set (other articles in one chrome: should be low),
* the hard-negative pairs of short single-line texts (PAWS, QQP, STS-B; AW leaves them to plain
  MinHash: the stage only weighs documents of two lines or more, shown for context),

with the medians, the share of pairs at or above 0.5 (the floor SPH confirms at) and the ROC AUC of
A pairs against template pairs. The weights are the stage's own: ``AWMinHashStage.importance`` and
``aw.weights.weighted_shingles`` with the same IDF sample.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np

from semhash_llm.aw.weights import weighted_shingles
from semhash_llm.bench.truth import GroundTruth, read_corpus
from semhash_llm.config import AWConfig, NormalizeConfig, ShingleConfig
from semhash_llm.sketch.cws import weighted_jaccard
from semhash_llm.sketch.docfreq import DocumentFrequency, WordFrequencyPrior
from semhash_llm.stages.aw import AWMinHashStage
from semhash_llm.text.lines import token_lines
from semhash_llm.text.normalize import char_classes, normalize_batch
from semhash_llm.text.tokenize import tokenize_batch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench_dir", type=Path)
    args = ap.parse_args()
    truth = GroundTruth.read(args.bench_dir / "corpus/truth.json")
    recs = read_corpus(args.bench_dir / "corpus/corpus.jsonl")
    idx = {r["id"]: i for i, r in enumerate(recs)}
    texts = [str(r["text"]) for r in recs]
    norm_cfg = NormalizeConfig()
    classes = char_classes(norm_cfg.strip_punctuation)
    norm = normalize_batch(texts, norm_cfg)
    tb = tokenize_batch(norm, classes, ShingleConfig())
    lines = token_lines(norm, classes, tb.tok_offsets)
    df = DocumentFrequency(prior=WordFrequencyPrior.from_wordfreq(normalize_config=norm_cfg))
    sample = min(AWConfig().idf_sample, len(texts))
    df.add(tb.tok_offsets[: sample + 1], tb.tok_hashes)
    tok_idf = df.idf(tb.tok_hashes)

    pos = [(idx[a], idx[b]) for g in truth.groups if g.category == "A" for a, b in itertools.combinations(g.members, 2)]
    neg: dict[str, list[tuple[int, int]]] = {}
    for n in truth.negatives:
        neg.setdefault(n.family, []).extend((idx[a], idx[b]) for a, b in itertools.combinations(n.members, 2))
    print(f"{len(pos)} A pairs; " + ", ".join(f"{len(v)} {k} pairs" for k, v in sorted(neg.items())))

    settings: list[tuple[str, str | None, bool]] = [("unweighted", None, False), ("unweighted x idf", None, True),
                                                    ("line", "line", False), ("line x idf", "line", True),
                                                    ("model (default)", "model", False), ("model x idf", "model", True)]
    print("| weighting | A median | A >= 0.5 | template median | template >= 0.5 | AUC A vs template | "
          "PAWS neg median | QQP neg median |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, mode, use_idf in settings:
        if mode is None:
            imp = np.ones(tb.tok_hashes.size, dtype=np.float32)
        else:
            stage = AWMinHashStage(AWConfig(importance=mode, idf=False), norm_cfg)  # type: ignore[arg-type]
            imp = stage.importance(texts, tb, lines)
        off, feats, wts = weighted_shingles(tb, imp, tok_idf if use_idf else None)

        def wj(a: int, b: int, off: np.ndarray = off, feats: np.ndarray = feats, wts: np.ndarray = wts) -> float:
            return weighted_jaccard(feats[off[a]:off[a + 1]], wts[off[a]:off[a + 1]],
                                    feats[off[b]:off[b + 1]], wts[off[b]:off[b + 1]])

        ps = np.array([wj(a, b) for a, b in pos])
        ns = np.array([wj(a, b) for a, b in neg.get("same_site_template", [])])
        paws = np.array([wj(a, b) for a, b in neg.get("paws_non_paraphrase", [])])
        qqp = np.array([wj(a, b) for a, b in neg.get("qqp_non_duplicate", [])])
        auc = float(np.mean(ps[:, None] > ns[None, :]) + 0.5 * np.mean(ps[:, None] == ns[None, :]))
        print(f"| {label} | {np.median(ps):.3f} | {np.mean(ps >= 0.5):.2f} | {np.median(ns):.3f} | "
              f"{np.mean(ns >= 0.5):.2f} | {auc:.3f} | {np.median(paws):.3f} | {np.median(qqp):.3f} |")


if __name__ == "__main__":
    main()
