"""Engines that run the cascade's per-document work elsewhere than this process.

An engine takes a window of stream batches and fills each batch's
:attr:`~semhash_llm.stages.base.StreamBatch.precomputed` with what the offloadable stages'
``compute`` gives for its featured texts; the cascade then runs every stage's ``process``
and ``decide`` as without one, so the decisions are the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from semhash_llm.stages.base import StreamBatch

__all__ = ["Engine", "make_engine"]


class Engine(Protocol):
    """Computes the offloadable stages' features of a window of batches, in place."""

    stages: tuple[str, ...]

    @property
    def bucket_orders(self) -> Callable[[np.ndarray], list[np.ndarray]] | None:
        """The LSH bucket shuffle on the engine (given every row's band keys, the rows of each
        band's buckets of two or more, by key then row) for the stages that declare
        ``shuffles_buckets``; ``None``: the buckets are grouped here."""
        ...

    def featurize(self, window: list[StreamBatch]) -> None:
        """Set ``precomputed`` on every batch of ``window`` for :attr:`stages`."""
        ...

    def close(self) -> None:
        ...


def make_engine(config: object, offloadable: tuple[str, ...]) -> Engine | None:
    """The engine ``config.engine`` names (``None`` for ``local`` or nothing to offload)."""
    from semhash_llm.config import PipelineConfig

    if not isinstance(config, PipelineConfig) or config.engine.kind == "local" or not offloadable:
        return None
    from semhash_llm.engine.ray_engine import RayEngine

    return RayEngine(config, offloadable)
