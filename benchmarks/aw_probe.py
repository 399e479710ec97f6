"""Probe for AW-MinHash: does weighting shingles by a line cue and IDF separate type-A pairs
(one article in other page chrome) from same-site template pages (other articles in one chrome)?

    python benchmarks/aw_probe.py /tmp/bench_full      # a folder written by `semhash-llm bench --size full`

Exact weighted Jaccard (``sketch.cws.weighted_jaccard``) of word 3-gram sets under four
weightings: none, IDF (corpus document frequencies, ``sketch.docfreq``), a line cue (each
token's weight is a sigmoid of the tokens on its line, times 0.7 when the line does not end a
sentence; a shingle takes its weakest token's), and the cue times IDF. Prints the medians, the
share of pairs at or above 0.5 (SPH's lexical floor) and the ROC AUC of A pairs against
template pairs, then a few pairs named on the command line after the folder.
"""
import itertools
import sys
from pathlib import Path

import numpy as np

from semhash_llm.bench.truth import GroundTruth, read_corpus
from semhash_llm.config import NormalizeConfig, ShingleConfig
from semhash_llm.sketch.cws import weighted_jaccard
from semhash_llm.sketch.docfreq import DocumentFrequency
from semhash_llm.text.lines import token_lines
from semhash_llm.text.normalize import char_classes, normalize_batch
from semhash_llm.text.tokenize import doc_shingles, tokenize_batch

out = Path(sys.argv[1])
truth = GroundTruth.read(out / "corpus/truth.json")
recs = read_corpus(out / "corpus/corpus.jsonl")
idx = {r["id"]: i for i, r in enumerate(recs)}
texts = [r["text"] for r in recs]
cfg = NormalizeConfig()
cl = char_classes(True)
sc = ShingleConfig()
norm = normalize_batch(texts, cfg)
tb = tokenize_batch(norm, cl, sc)
lb = token_lines(norm, cl, tb.tok_offsets)
N = 3
# shingles per doc and the min line-weight of their tokens
def shingles(d):
    s, e = tb.tok_offsets[d], tb.tok_offsets[d + 1]
    outb = np.empty(max(e - s, 1), np.uint64)
    k = doc_shingles(tb.tok_hashes, s, e, N, outb)
    return outb[:k]
sh = [shingles(d) for d in range(len(texts))]
df = DocumentFrequency(width_bits=22)
offs = np.r_[0, np.cumsum([x.size for x in sh])]
df.add(offs, np.concatenate(sh))
def weights(d, mode):
    h = sh[d]
    if h.size == 0:
        return h, np.zeros(0)
    s = tb.tok_offsets[d]
    lt = lb.tokens[lb.tok_line[s:tb.tok_offsets[d + 1]]].astype(float)
    term = lb.terminal[lb.tok_line[s:tb.tok_offsets[d + 1]]]
    k = h.size
    width = min(N, lt.size)
    # prose weight of a token: sigmoid on tokens in its line
    pw = 1 / (1 + np.exp(-(lt - 8) / 2)) * np.where(term, 1.0, 0.7)
    sw = np.array([pw[i:i + width].min() for i in range(k)])
    idf = df.idf(h)
    by_mode = {"plain": np.ones(k), "idf": idf, "lines": sw, "lines*idf": sw * idf}
    return h, by_mode[mode]
pos, neg = [], []
for g in truth.groups:
    if g.category == "A":
        pos.extend((idx[a], idx[b]) for a, b in itertools.combinations(g.members, 2))
for n in truth.negatives:
    if n.family == "same_site_template":
        neg.extend((idx[a], idx[b]) for a, b in itertools.combinations(n.members, 2))
print(len(pos), "A pairs;", len(neg), "same-template pairs")
for mode in ("plain", "idf", "lines", "lines*idf"):
    ps = np.array([weighted_jaccard(*weights(a, mode), *weights(b, mode)) for a, b in pos])
    ns = np.array([weighted_jaccard(*weights(a, mode), *weights(b, mode)) for a, b in neg])
    auc = np.mean(ps[:, None] > ns[None, :]) + 0.5 * np.mean(ps[:, None] == ns[None, :])
    print(f"{mode:10s} A median {np.median(ps):.3f} (>=0.5: {np.mean(ps>=0.5):.2f})  template median {np.median(ns):.3f} (>=0.5: {np.mean(ns>=0.5):.2f})  AUC {auc:.3f}")
print("--- specific pairs")
named = sys.argv[2:]
for a, b in zip(named[::2], named[1::2]):
    ia, ib = idx[a], idx[b]
    print(a, b, {m: round(weighted_jaccard(*weights(ia, m), *weights(ib, m)), 3) for m in ("plain", "lines", "lines*idf")})
