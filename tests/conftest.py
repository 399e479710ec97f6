"""Shared fixtures: tests are offline and make their own small data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained small MGFN verifier (its probabilities lie strictly inside (0, 1)); needs torch."""
    torch = pytest.importorskip("torch")
    from semhash_llm.sph.student import load_student
    from semhash_llm.verify.features import NUM_PAIR_FEATURES
    from semhash_llm.verify.mgfn import MGFN, MGFNConfig, save_mgfn

    torch.manual_seed(0)
    config = MGFNConfig(max_chars=128, char_dim=8, char_channels=8, kernel_sizes=(3,), max_tokens=32,
                        token_buckets=256, token_dim=8, lstm_hidden=8, semantic_dim=load_student().dim, hidden=16,
                        projection=8, pair_features=NUM_PAIR_FEATURES)
    path = tmp_path_factory.mktemp("verifier") / "verifier.safetensors"
    save_mgfn(MGFN(config), path, extra={"screen": 0.3})
    return path
