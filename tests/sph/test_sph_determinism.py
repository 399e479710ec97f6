"""A document's SPH embedding, margins and code are a pure function of its text.

Not of the batch it is encoded in, the batch size, or the number of threads: float32 BLAS products
(``e @ W``) round differently for different batch shapes, and a margin near 0 then flips a bit.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

from semhash_llm.sph import SPH, SPHConfig, load_hasher, load_student


def _texts(n: int = 1500, seed: int = 0) -> list[str]:
    """Texts of 0 to ~400 words drawn from the student's vocabulary, with punctuation, case and accents."""
    student = load_student()
    vocab = [w for w in student.tokenizer.tokenizer.get_vocab() if w.isalpha() and w.isascii()]
    vocab.sort()
    rng = np.random.default_rng(seed)
    out = ["", " ", "a", "Café Müller, naïve façade!", "東京 is big."]
    while len(out) < n:
        k = int(rng.choice([1, 3, 8, 20, 60, 150, 400]))
        words = [vocab[int(i)] for i in rng.integers(0, len(vocab), k)]
        if rng.random() < 0.3:
            words = [w.capitalize() if rng.random() < 0.2 else w for w in words]
        text = " ".join(words)
        if rng.random() < 0.5:
            text = text.replace(" ", ", ", int(rng.integers(0, 5))) + "."
        out.append(text)
    return out


TEXTS = _texts()


@pytest.fixture(scope="module")
def reference() -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    student = load_student()
    out = {}
    for bits in (32, 64, 128):
        hasher = load_hasher(None, bits)
        emb = student.encode(TEXTS)
        out[bits] = (emb, hasher.project(emb), hasher.codes(emb))
    return out


def _one_by_one(bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    student, hasher = load_student(), load_hasher(None, bits)
    emb = np.concatenate([student.encode([t]) for t in TEXTS])
    margins = np.concatenate([hasher.project(emb[i : i + 1]) for i in range(len(TEXTS))])
    codes = np.concatenate([hasher.codes(student.encode([t])) for t in TEXTS])
    return emb, margins, codes


def _in_sevens(bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    sph = SPH(SPHConfig(bits=bits, batch_size=7, hashing="learned"))  # the reference's hyperplanes
    emb = sph.embed(TEXTS)  # the student's own batching, 7 at a time
    margins = np.concatenate([sph.hasher.project(emb[i : i + 7]) for i in range(0, len(TEXTS), 7)])
    codes = np.concatenate([sph.codes(TEXTS[i : i + 7]) for i in range(0, len(TEXTS), 7)])
    return emb, margins, codes


def _reversed(bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    student, hasher = load_student(), load_hasher(None, bits)
    emb = student.encode(TEXTS[::-1], batch_size=1000)[::-1]
    return emb, hasher.project(emb[::-1])[::-1], hasher.codes(student.encode(TEXTS[::-1]))[::-1]


@pytest.mark.parametrize("bits", [32, 64, 128])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("how", [_one_by_one, _in_sevens, _reversed])
def test_codes_do_not_depend_on_batching_or_threads(reference, bits: int, threads: int, how) -> None:  # type: ignore[no-untyped-def]
    ref_emb, ref_margins, ref_codes = reference[bits]
    before = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        emb, margins, codes = how(bits)
    finally:
        numba.set_num_threads(before)
    assert emb.dtype == np.float32 and emb.shape == ref_emb.shape
    # Bit for bit: the embeddings, the float margins (not just their signs) and the packed codes.
    assert np.array_equal(emb.view(np.uint32), ref_emb.view(np.uint32))
    assert np.array_equal(margins.view(np.uint64), ref_margins.view(np.uint64))
    assert np.array_equal(codes, ref_codes)


def test_the_inputs_are_hard_enough(reference) -> None:  # type: ignore[no-untyped-def]
    """The texts reach margins near 0, where a rounding difference would flip a bit."""
    emb, margins, codes = reference[64]
    assert (np.abs(margins) < 1e-3).sum() >= 20
    assert len(np.unique(codes)) > 0.5 * len(TEXTS)  # random word bags: many codes, some shared
    assert not emb[0].any() and np.allclose(np.linalg.norm(emb[5:], axis=1), 1.0, atol=1e-6)
    # float32 BLAS does not give this guarantee: the same product in one batch and row by row differs.
    hasher = load_hasher(None, 64)
    blas = emb @ hasher.W + hasher.b
    rows = np.concatenate([emb[i : i + 1] @ hasher.W + hasher.b for i in range(len(emb))])
    assert np.abs(blas - margins).max() < 1e-5 and np.abs(rows - margins).max() < 1e-5
