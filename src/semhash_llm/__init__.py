"""SemHash-LLM: multi-granularity semantic hashing for LLM pre-training corpus deduplication."""

from __future__ import annotations

__version__ = "0.1.0"

from semhash_llm.api import Deduplicator, DedupResult, deduplicate  # noqa: E402
from semhash_llm.config import ConfigError, PipelineConfig  # noqa: E402
from semhash_llm.frames import FrameError, deduplicate_frame  # noqa: E402

__all__ = ["__version__", "deduplicate", "deduplicate_frame", "Deduplicator", "DedupResult", "PipelineConfig",
           "ConfigError", "FrameError"]
