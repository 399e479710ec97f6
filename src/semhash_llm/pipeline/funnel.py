"""The funnel of ``report.json``: one :class:`StageStats` row per step, recorded the same way for every stage."""

from __future__ import annotations

import resource
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from semhash_llm.io.readers import reason_category

__all__ = ["StageStats", "peak_rss_mb", "reason_counts", "Growable"]


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


@dataclass
class StageStats:
    """One row of the funnel."""

    name: str
    docs_in: int = 0
    docs_out: int = 0
    docs_removed: int = 0
    pairs_in: int = 0
    pairs_out: int = 0
    seconds: float = 0.0
    peak_rss_mb: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "stage": self.name,
            "docs_in": self.docs_in,
            "docs_out": self.docs_out,
            "docs_removed": self.docs_removed,
            "pairs_in": self.pairs_in,
            "pairs_out": self.pairs_out,
            "seconds": round(self.seconds, 4),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            **({"details": self.details} if self.details else {}),
        }


def reason_counts(reasons: dict[int, str]) -> dict[str, int]:
    """Skipped records by the category of their reason (``skipped_by_reason`` of the read row)."""
    out: dict[str, int] = {}
    for r in reasons.values():
        key = reason_category(r)
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


class Growable:
    """An append-only numpy column grown by doubling."""

    def __init__(self, dtype: Any, capacity: int = 1 << 16) -> None:
        self.data = np.empty(capacity, dtype=dtype)
        self.size = 0

    def extend(self, values: np.ndarray) -> None:
        need = self.size + values.shape[0]
        if need > self.data.shape[0]:
            new = np.empty(max(need, 2 * self.data.shape[0]), dtype=self.data.dtype)
            new[: self.size] = self.data[: self.size]
            self.data = new
        self.data[self.size : need] = values
        self.size = need

    def view(self) -> np.ndarray:
        return self.data[: self.size]
