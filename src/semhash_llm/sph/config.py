"""Configuration of the SPH stage (student encoder, learned hyperplanes, Hamming blocking)."""

from __future__ import annotations

from dataclasses import dataclass
from math import comb
from typing import Literal

from semhash_llm.sph.hyperplanes import ALLOWED_BITS


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class SPHConfig:
    """Semantic Projection Hashing settings.

    Two documents become SPH candidates when their K-bit codes differ in at most
    ``radius`` bits. Learned codes agree on about ``(1 + cos) / 2`` of their bits (eq. 5),
    so radius ``r`` of ``bits`` K admits pairs with student cosine above roughly
    ``1 - 2 r / K`` (64 bits, r = 8: cos >~ 0.75). The default (64 bits, radius 8) was
    chosen on the development benchmark: ~99.5% of all pairs pruned, every type-B copy
    and ~3/4 of the type-C/D pairs proposed (see ``benchmarks/sph_report.py`` for the
    recall/pruning curve); lower the radius for corpora of many millions of documents.

    Attributes
    ----------
    enabled:
        Run the stage (``--no-sph`` turns it off).
    bits:
        Code length K: 32, 64 (default) or 128.
    radius:
        Hamming radius of the blocking, in [0, 16] and at most ``bits``.
    num_chunks:
        Chunks of the multi-index hash; search is exact for any radius. Each chunk is
        probed with every key within ``radius // num_chunks`` bits (one exact lookup when
        ``radius < num_chunks``; 5 chunks at radius 8: 14 probes per chunk).
    hot_spots:
        ``"representative"`` links documents with identical codes to one representative
        (linear); ``"expand"`` emits every pair (quadratic on hot spots).
    student_path:
        Folder of a trained student; ``None`` uses the weights shipped in the package.
    hyperplanes_path:
        ``.npz`` file of hyperplanes; ``None`` uses the shipped ones for ``bits`` (from the
        student's folder when ``student_path`` is given).
    teacher:
        Teacher model name or path used by training; ``None`` is the offline all-MiniLM-L6-v2.
    batch_size:
        Documents per student encoding batch.
    max_pairs_per_doc:
        Candidate budget of the cascade's blocking. Random pairs fall within a radius with
        a probability p(r) set by the data, so the candidates grow as n^2 p(r); the cascade
        estimates p(r) from a sample of codes and uses the largest radius up to ``radius``
        whose expected candidates stay under ``max_pairs_per_doc * n``. ``None`` always
        uses ``radius``.
    min_jaccard:
        Used by the cascade while no neural verifier is available: an SPH candidate is
        accepted when the MinHash estimate of its Jaccard similarity reaches this floor
        (below the LSH threshold), so SPH never merges two documents on meaning alone.
    """

    enabled: bool = True
    bits: int = 64
    radius: int = 8
    num_chunks: int = 5
    hot_spots: Literal["representative", "expand"] = "representative"
    student_path: str | None = None
    hyperplanes_path: str | None = None
    teacher: str | None = None
    batch_size: int = 4096
    max_pairs_per_doc: float | None = 32.0
    min_jaccard: float = 0.5

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise ValueError(f"The 'enabled' parameter of SPHConfig must be a bool. Got {self.enabled!r} instead.")
        if not _is_int(self.bits) or self.bits not in ALLOWED_BITS:
            raise ValueError(
                f"The 'bits' parameter of SPHConfig must be an int in {{32, 64, 128}}. Got {self.bits!r} instead."
            )
        if not _is_int(self.radius) or not 0 <= self.radius <= 16:
            raise ValueError(f"The 'radius' parameter of SPHConfig must be an int in [0, 16]. Got {self.radius!r} instead.")
        if not _is_int(self.num_chunks) or not max(1, -(-self.bits // 64)) <= self.num_chunks <= self.bits:
            raise ValueError(
                f"The 'num_chunks' parameter of SPHConfig must be an int in [{max(1, -(-self.bits // 64))}, {self.bits}]. "
                f"Got {self.num_chunks!r} instead."
            )
        width = -(-self.bits // self.num_chunks)
        sub = self.radius // self.num_chunks
        probes = sum(comb(width, t) for t in range(sub + 1))
        if sub > 2 or probes > 50_000:
            raise ValueError(
                f"The 'num_chunks' parameter of SPHConfig must be at least {self.radius // 3 + 1} for radius={self.radius} "
                f"(each chunk is searched within radius // num_chunks <= 2 bits). Got {self.num_chunks!r} instead."
            )
        if self.hot_spots not in ("representative", "expand"):
            raise ValueError(
                "The 'hot_spots' parameter of SPHConfig must be one of 'representative', 'expand'. "
                f"Got {self.hot_spots!r} instead."
            )
        for name in ("student_path", "hyperplanes_path", "teacher"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"The '{name}' parameter of SPHConfig must be a non-empty str or None. Got {value!r} instead.")
        if not _is_int(self.batch_size) or not 1 <= self.batch_size <= 1_000_000:
            raise ValueError(
                f"The 'batch_size' parameter of SPHConfig must be an int in [1, 1000000]. Got {self.batch_size!r} instead."
            )
        if self.max_pairs_per_doc is not None and (
            isinstance(self.max_pairs_per_doc, bool)
            or not isinstance(self.max_pairs_per_doc, (int, float))
            or not self.max_pairs_per_doc > 0
        ):
            raise ValueError(
                "The 'max_pairs_per_doc' parameter of SPHConfig must be a float > 0 or None. "
                f"Got {self.max_pairs_per_doc!r} instead."
            )
        if isinstance(self.min_jaccard, bool) or not isinstance(self.min_jaccard, (int, float)) or not 0.0 <= self.min_jaccard <= 1.0:
            raise ValueError(
                f"The 'min_jaccard' parameter of SPHConfig must be a float in [0, 1]. Got {self.min_jaccard!r} instead."
            )
