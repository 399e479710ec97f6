"""The weights shipped in the package load offline (numpy + tokenizers only) and behave."""

from __future__ import annotations

import json

import numpy as np
import pytest

from semhash_llm.sph import ASSETS_DIR, SPH, SPHConfig, hamming_distance, load_hasher, load_student

TEXTS = [
    "The city council approved the new budget for public schools on Tuesday evening.",
    "On Tuesday evening the city council approved the new budget for public schools.",
    "the city council approved the new budget for public schools on tuesday evening",
    "Heavy rain flooded several streets near the river after the storm.",
    "A recipe for chocolate cake needs flour, sugar, eggs and cocoa powder.",
]


def test_shipped_assets_are_small_and_complete() -> None:
    files = [p for p in ASSETS_DIR.rglob("*") if p.is_file()]
    names = {p.relative_to(ASSETS_DIR).as_posix() for p in files}
    assert {"student/student.json", "student/embeddings.npz", "student/tokenizer.json", "MODEL_CARD.md",
            "train_report.json", "hyperplanes_k32.npz", "hyperplanes_k64.npz", "hyperplanes_k128.npz"} <= names
    assert sum(p.stat().st_size for p in files) <= 10 * 1024 * 1024
    card = (ASSETS_DIR / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "p_tea(j|i)" in card and "KL only" in card and "MSE only" in card
    report = json.loads((ASSETS_DIR / "train_report.json").read_text(encoding="utf-8"))
    assert report["scores"]["student_variants"]


def test_shipped_student_loads_offline() -> None:
    student = load_student()
    emb = student.encode(TEXTS)
    assert emb.shape == (5, student.dim) and emb.dtype == np.float32
    assert np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-4)
    cos = emb @ emb.T
    assert cos[0, 1] > 0.95 and cos[0, 2] > 0.95  # reorder / case: same content
    assert cos[0, 1] > cos[0, 3] and cos[0, 1] > cos[0, 4]


@pytest.mark.parametrize("bits", [32, 64, 128])
def test_shipped_hyperplanes_and_codes(bits: int) -> None:
    hasher = load_hasher(None, bits)
    assert hasher.bits == bits and hasher.dim == load_student().dim
    sph = SPH(SPHConfig(bits=bits, num_chunks=4))
    codes = sph.codes(TEXTS)
    assert codes.dtype == np.uint64
    assert codes.shape == ((5,) if bits <= 64 else (5, bits // 64))
    d = hamming_distance(codes[[0, 0]], codes[[2, 4]])
    assert d[0] < d[1]


def test_sph_candidates_find_the_copies() -> None:
    sph = SPH()
    cands = sph.candidates(TEXTS)
    pairs = set(zip(cands.a.tolist(), cands.b.tolist()))
    assert (0, 2) in pairs
    assert not any(4 in p for p in pairs)
    assert cands.proposed_by == "sph"


def test_mismatched_bits_are_refused() -> None:
    with pytest.raises(ValueError, match="bits"):
        SPH(SPHConfig(bits=64), hasher=load_hasher(None, 32))
