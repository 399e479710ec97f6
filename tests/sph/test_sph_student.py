from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from semhash_llm.sph.student import (
    FastWordPieceTokenizer,
    StaticStudent,
    load_student,
    pool_tokens,
    projection_basis,
    sif_weights,
    token_counts,
)

WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran", "far", "away", "caf", "##e", "a", "big", "red", "car", ".", ",", "!"]


@pytest.fixture()
def tokenizer_file(tmp_path: Path) -> Path:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    vocab = {tok: i for i, tok in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS])}
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=True, clean_text=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return path


@pytest.fixture()
def student(tokenizer_file: Path) -> StaticStudent:
    tk = FastWordPieceTokenizer(tokenizer_file)
    table = np.random.default_rng(0).standard_normal((tk.vocab_size, 8)).astype(np.float32)
    table[:5] = 0.0
    table[1] = 0.1  # [UNK] keeps a small vector
    return StaticStudent(tokenizer=tk, embeddings=table, max_tokens=16)


def test_fast_tokenizer_matches_wrapped_tokenizer(tokenizer_file: Path) -> None:
    tk = FastWordPieceTokenizer(tokenizer_file)
    assert tk.fast
    for text in ["The cat sat on the mat.", "A BIG red car, far away!", "Café dog", "unknownword the cat"]:
        assert tk.tokenize(text, 100) == tk.tokenizer.encode(text, add_special_tokens=False).ids
    assert len(tk.tokenize("the cat " * 50, 7)) == 7


def test_encode_is_normalised_and_order_free(student: StaticStudent) -> None:
    emb = student.encode(["the cat sat", "sat the cat", "", "a big red car"])
    assert emb.shape == (4, 8) and emb.dtype == np.float32
    assert np.allclose(np.linalg.norm(emb[[0, 1, 3]], axis=1), 1.0, atol=1e-5)
    assert np.allclose(emb[0], emb[1], atol=1e-6)  # bag of tokens
    assert np.all(emb[2] == 0.0)  # empty text


def test_pool_tokens_matches_numpy(student: StaticStudent) -> None:
    flat = np.array([5, 6, 7, 8, 8], dtype=np.int64)
    offsets = np.array([0, 2, 2, 5], dtype=np.int64)
    out = pool_tokens(student.embeddings, flat, offsets)
    first = student.embeddings[[5, 6]].sum(0)
    assert np.allclose(out[0], first / np.linalg.norm(first), atol=1e-6)
    assert np.all(out[1] == 0)


@pytest.mark.parametrize("quantize", [True, False])
def test_save_load_roundtrip(student: StaticStudent, tmp_path: Path, quantize: bool) -> None:
    student.save(tmp_path / "s", quantize=quantize)
    loaded = load_student(tmp_path / "s")
    texts = ["the cat sat on the mat", "a big red car far away"]
    cos = (student.encode(texts) * loaded.encode(texts)).sum(1)
    assert np.all(cos > 0.999)
    assert loaded.max_tokens == 16


def test_load_student_from_a_training_folder(student: StaticStudent, tmp_path: Path) -> None:
    student.save(tmp_path / "run" / "student")
    assert load_student(tmp_path / "run").dim == student.dim


def test_load_student_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="semhash-llm train sph"):
        load_student(tmp_path / "nothing")


def test_sif_weights_and_counts(student: StaticStudent) -> None:
    counts = token_counts(student.tokenizer, ["the the the cat", "the dog"], 16)
    vocab = student.tokenizer.tokenizer.get_vocab()
    assert counts[vocab["the"]] == 4 and counts[vocab["dog"]] == 1
    w = sif_weights(counts, a=1e-3)
    assert w[vocab["the"]] < w[vocab["dog"]] < w[vocab["mat"]] <= 1.0


def test_projection_basis_is_orthonormal() -> None:
    x = np.random.default_rng(0).standard_normal((50, 12)).astype(np.float32)
    basis, energy = projection_basis(x, 5)
    assert basis.shape == (12, 5)
    assert np.allclose(basis.T @ basis, np.eye(5), atol=1e-5)
    assert 0 < energy < 1
    with pytest.raises(ValueError, match="The 'dim' parameter must be an int in \\[1, 12\\]"):
        projection_basis(x, 20)


@pytest.mark.ml
def test_distill_reduces_the_loss_and_each_term_switches(student: StaticStudent) -> None:
    pytest.importorskip("torch")
    from semhash_llm.sph.student import DistillConfig, distill, project_teacher

    rng = np.random.default_rng(1)
    texts = [" ".join(rng.choice(WORDS[:15], size=6)) for _ in range(64)]
    teacher = rng.standard_normal((64, 12)).astype(np.float32)
    teacher /= np.linalg.norm(teacher, axis=1, keepdims=True)
    basis, _ = projection_basis(teacher, 8)
    proj = project_teacher(teacher, basis)
    trained, history = distill(student, texts, teacher, proj, DistillConfig(epochs=6, batch_size=16, lr=0.05))
    assert history[-1] < history[0]
    assert trained.embeddings.shape == student.embeddings.shape
    with pytest.raises(ValueError, match="at least one loss term"):
        DistillConfig(use_kl=False, use_mse=False)
    with pytest.raises(ValueError, match="one teacher embedding per text"):
        distill(student, texts[:3], teacher, proj)
