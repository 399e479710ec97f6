"""What the cascade keeps on disk: key occurrences spilled in sorted runs (``spill``) and the
incremental document index's segments (:mod:`semhash_llm.storage.index`).

``semhash_llm.sketch`` holds the pure kernels these build on and opens no file; reading the
input is :mod:`semhash_llm.io`, and a run's resume state is :mod:`semhash_llm.pipeline.checkpoints`.
"""

from __future__ import annotations

from semhash_llm.storage.spill import KeyCountStats, KeyGroups, KeyOccurrences

__all__ = ["KeyOccurrences", "KeyGroups", "KeyCountStats"]
