"""Pure hashing kernels, free of I/O: Bloom filter, MinHash, weighted MinHash (CWS), LSH banding,
union-find; document frequencies in a count-min sketch (``docfreq``). What is kept on disk
(spilled key runs, index segments) is in :mod:`semhash_llm.storage`.
"""

from __future__ import annotations

from semhash_llm.sketch.bloom import BloomFilter, ScalableBloomFilter, bloom_parameters
from semhash_llm.sketch.cws import cws_signatures, weighted_jaccard, weighted_jaccard_estimate
from semhash_llm.sketch.lsh import lsh_probability, optimal_lsh_params
from semhash_llm.sketch.minhash import MinHash, jaccard_estimate, minhash_permutations
from semhash_llm.sketch.unionfind import UnionFind

__all__ = [
    "BloomFilter",
    "ScalableBloomFilter",
    "bloom_parameters",
    "lsh_probability",
    "optimal_lsh_params",
    "MinHash",
    "cws_signatures",
    "weighted_jaccard",
    "weighted_jaccard_estimate",
    "jaccard_estimate",
    "minhash_permutations",
    "UnionFind",
]
