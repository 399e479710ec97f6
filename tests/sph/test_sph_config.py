from __future__ import annotations

import dataclasses

import pytest

from semhash_llm.sph.config import SPHConfig


def test_defaults_are_valid_and_frozen() -> None:
    cfg = SPHConfig()
    assert (cfg.enabled, cfg.bits, cfg.radius, cfg.num_chunks, cfg.hot_spots) == (True, 64, 16, 5, "representative")
    assert (cfg.hashing, cfg.neighbors) == ("simhash", 8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.radius = 2  # type: ignore[misc]


def test_radius_error_message() -> None:
    with pytest.raises(ValueError) as err:
        SPHConfig(radius=70)
    assert str(err.value) == "The 'radius' parameter of SPHConfig must be an int in [0, bits=64]. Got 70 instead."


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"bits": 48}, r"The 'bits' parameter of SPHConfig must be an int in \{32, 64, 128\}. Got 48 instead."),
        ({"bits": True}, r"The 'bits' parameter"),
        ({"radius": 2.0}, r"The 'radius' parameter"),
        ({"num_chunks": 0}, r"The 'num_chunks' parameter of SPHConfig must be an int in \[1, 64\]. Got 0 instead."),
        ({"bits": 128, "num_chunks": 1}, r"must be an int in \[2, 128\]"),
        ({"radius": 16, "num_chunks": 2, "neighbors": None}, r"must be at least 6 for radius=16"),
        ({"neighbors": 0}, r"The 'neighbors' parameter"),
        ({"hashing": "pca"}, r"The 'hashing' parameter of SPHConfig must be one of 'simhash', 'learned'"),
        ({"hot_spots": "all"}, r"The 'hot_spots' parameter of SPHConfig must be one of"),
        ({"student_path": ""}, r"The 'student_path' parameter"),
        ({"batch_size": 0}, r"The 'batch_size' parameter"),
        ({"enabled": "yes"}, r"The 'enabled' parameter"),
        ({"min_jaccard": 1.5}, r"The 'min_jaccard' parameter of SPHConfig must be a float in \[0, 1\]. Got 1.5 instead."),
    ],
)
def test_invalid_values(kwargs: dict[str, object], pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        SPHConfig(**kwargs)  # type: ignore[arg-type]


def test_larger_radius_with_enough_chunks() -> None:
    cfg = SPHConfig(bits=128, radius=16, num_chunks=8)
    assert cfg.radius // cfg.num_chunks == 2
