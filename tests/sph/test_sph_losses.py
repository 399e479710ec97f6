from __future__ import annotations

import os
from types import ModuleType

import numpy as np
import pytest

from semhash_llm.sph.hyperplanes import (
    HyperplaneTrainConfig,
    balance_loss,
    beta_schedule,
    bit_balance,
    orth_loss,
    sim_loss,
    straight_through_sign,
    train_hyperplanes,
)
from semhash_llm.sph.student import distill_loss


@pytest.fixture()
def torch() -> ModuleType:
    """torch, or a skip for the tests that need it (the others run without it)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    return pytest.importorskip("torch")


@pytest.mark.ml
def test_orth_loss_zero_for_orthonormal_columns(torch: ModuleType) -> None:
    q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((16, 8)))
    assert float(orth_loss(torch.tensor(q, dtype=torch.float64))) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.ml
def test_orth_loss_positive_for_correlated_columns(torch: ModuleType) -> None:
    w = torch.ones(16, 4, dtype=torch.float64) / 4.0  # unit columns, all equal
    # Gram = all ones: off-diagonal entries 1 -> ||G - I||_F^2 / K = 12 / 4
    assert float(orth_loss(w)) == pytest.approx(3.0)


@pytest.mark.ml
def test_balance_loss_zero_for_balanced_bits(torch: ModuleType) -> None:
    codes = torch.tensor([[1.0, -1.0, 1.0], [-1.0, 1.0, -1.0], [1.0, 1.0, -1.0], [-1.0, -1.0, 1.0]])
    assert float(balance_loss(codes)) == 0.0


@pytest.mark.ml
def test_balance_loss_one_for_constant_bits(torch: ModuleType) -> None:
    assert float(balance_loss(torch.ones(5, 3))) == pytest.approx(1.0)


@pytest.mark.ml
def test_sim_loss_zero_when_agreement_matches_target(torch: ModuleType) -> None:
    # Two identical codes (agreement 1) and one opposite code (agreement 0).
    codes = torch.tensor([[1.0, -1.0, 1.0, 1.0], [1.0, -1.0, 1.0, 1.0], [-1.0, 1.0, -1.0, -1.0]])
    cos = torch.tensor([[1.0, 1.0, -1.0], [1.0, 1.0, -1.0], [-1.0, -1.0, 1.0]])
    assert float(sim_loss(codes, cos)) == pytest.approx(0.0)
    assert float(sim_loss(codes, torch.zeros(3, 3))) == pytest.approx(0.25)


@pytest.mark.ml
def test_straight_through_forward_is_sign_backward_is_tanh_gradient(torch: ModuleType) -> None:
    x = torch.tensor([-0.5, 0.0, 0.2], requires_grad=True)
    y = straight_through_sign(x, beta=2.0)
    assert y.tolist() == [-1.0, 1.0, 1.0]
    y.sum().backward()
    expected = 2.0 * (1.0 - torch.tanh(2.0 * x.detach()) ** 2)
    assert torch.allclose(x.grad, expected)


def test_beta_schedule_anneals_from_1_to_10() -> None:
    values = [beta_schedule(s, 100) for s in range(100)]
    assert values[0] == pytest.approx(1.0)
    assert values[-1] == pytest.approx(10.0)
    assert all(b > a for a, b in zip(values, values[1:]))
    assert beta_schedule(500, 100) == pytest.approx(10.0)  # clamped
    assert beta_schedule(0, 1) == pytest.approx(10.0)


@pytest.mark.ml
def test_distill_loss_zero_when_student_equals_teacher(torch: ModuleType) -> None:
    e = torch.nn.functional.normalize(torch.randn(6, 8, generator=torch.Generator().manual_seed(0)), dim=1)
    assert float(distill_loss(e, e, e, alpha=1.0, tau=0.05)) == pytest.approx(0.0, abs=1e-6)
    other = torch.nn.functional.normalize(torch.randn(6, 8, generator=torch.Generator().manual_seed(1)), dim=1)
    kl_only = float(distill_loss(other, e, e, alpha=1.0, tau=0.05, use_mse=False))
    mse_only = float(distill_loss(other, e, e, alpha=1.0, tau=0.05, use_kl=False))
    assert kl_only > 0 and mse_only > 0
    assert float(distill_loss(other, e, e, alpha=1.0, tau=0.05)) == pytest.approx(kl_only + mse_only, rel=1e-5)


@pytest.mark.ml
def test_train_hyperplanes_tracks_cosine_and_balances_bits(torch: ModuleType) -> None:
    rng = np.random.default_rng(0)
    centers = rng.standard_normal((40, 32))
    x = np.repeat(centers, 10, axis=0) + 0.3 * rng.standard_normal((400, 32))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    views = x + 0.05 * rng.standard_normal(x.shape)
    views /= np.linalg.norm(views, axis=1, keepdims=True)
    hasher, history = train_hyperplanes(x, (x, views), HyperplaneTrainConfig(bits=32, epochs=10, batch_size=128))
    assert history[-1] < history[0]
    balance = bit_balance(hasher.bit_matrix(x))
    assert np.abs(balance - 0.5).mean() < 0.15
    assert hasher.orthogonality_error() < 3.0  # random unit Gaussian columns: ~5.6 here
    codes = hasher.codes(x)
    assert codes.dtype == np.uint64 and codes.shape == (400,)
    a, b = rng.integers(0, 400, 2000), rng.integers(0, 400, 2000)
    agree = 1 - np.bitwise_count(codes[a] ^ codes[b]) / 32
    target = (1 + (x[a] * x[b]).sum(1)) / 2
    assert np.corrcoef(agree, target)[0, 1] > 0.8


def test_hyperplane_config_errors() -> None:
    with pytest.raises(ValueError, match=r"The 'bits' parameter of HyperplaneTrainConfig must be one of"):
        HyperplaneTrainConfig(bits=48)
    with pytest.raises(ValueError, match=r"The 'pos_weight' parameter"):
        HyperplaneTrainConfig(pos_weight=-1.0)
    with pytest.raises(ValueError, match=r"The 'init' parameter"):
        HyperplaneTrainConfig(init="zeros")


@pytest.mark.ml
def test_pair_sim_loss(torch: ModuleType) -> None:
    from semhash_llm.sph.hyperplanes import pair_sim_loss

    a = torch.tensor([[1.0, 1.0, -1.0, 1.0]])
    assert float(pair_sim_loss(a, a, torch.tensor([1.0]))) == pytest.approx(0.0)
    assert float(pair_sim_loss(a, -a, torch.tensor([1.0]))) == pytest.approx(1.0)
