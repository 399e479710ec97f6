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
    ``radius`` bits and one is among the other's ``neighbors`` nearest codes. Random-hyperplane
    codes agree on about ``1 - arccos(cos) / pi`` of their bits, so radius ``r`` of ``bits`` K
    admits pairs with student cosine above roughly ``cos(pi r / K)`` (64 bits, r = 16: cos >~ 0.71);
    the neighbour budget keeps the candidates at most ``neighbors`` per document however many
    codes fall within the radius (``benchmarks/codes_report.py``: recall at equal candidates).

    Attributes
    ----------
    enabled:
        Run the stage (``--no-sph`` turns it off).
    bits:
        Code length K: 32, 64 (default) or 128.
    radius:
        Hamming radius of the blocking, in [0, ``bits``].
    num_chunks:
        Chunks of the multi-index hash (``neighbors=None`` only); search is exact for any radius. Each chunk is
        probed with every key within ``radius // num_chunks`` bits (one exact lookup when
        ``radius < num_chunks``; 5 chunks at radius 8: 14 probes per chunk).
    hot_spots:
        ``"representative"`` links documents with identical codes to one representative
        (linear); ``"expand"`` emits every pair (quadratic on hot spots).
    student_path:
        Folder of a trained student; ``None`` uses the weights shipped in the package.
    hashing:
        ``"simhash"`` (default): random hyperplanes (seed ``simhash_seed``) over the student
        embedding; ``"learned"``: the hyperplanes trained by ``semhash-llm train sph`` (the
        shipped ones for ``bits``, or those of ``student_path``). Measured on the development
        benchmark at an equal candidate budget (``benchmarks/codes_report.py``), random
        hyperplanes recall more true pairs: a quarter of the learned 64 bits are constant
        there, which crowds the code space.
    simhash_seed:
        Seed of the random hyperplanes.
    hyperplanes_path:
        ``.npz`` file of hyperplanes (overrides ``hashing``); ``None``: as ``hashing`` says.
    teacher:
        Teacher model name or path used by training; ``None`` is the offline all-MiniLM-L6-v2.
    batch_size:
        Documents per student encoding batch.
    neighbors:
        The cascade's per-document neighbour budget: each code proposes its ``neighbors``
        nearest codes within ``radius`` (:func:`semhash_llm.sph.blocking.hamming_knn`, sorted
        bit permutations: ``permutations`` of them, ``window`` codes on each side), so the
        candidates stay at most ``neighbors * n`` however crowded the code space is. ``None``:
        every pair within ``radius`` (exact multi-index hashing; quadratic on a crowded space).
    permutations, window:
        Sorted bit permutations of the neighbour search and the codes compared on each side
        of a code in each order.
    min_jaccard:
        A candidate of two longer documents is accepted when the MinHash estimate of its
        Jaccard similarity reaches this floor (below the LSH threshold), so SPH never merges
        two documents on meaning alone; a candidate with a short document goes to the neural
        verifier when it runs (``[verifier] short_tokens``).
    """

    enabled: bool = True
    bits: int = 64
    radius: int = 16
    num_chunks: int = 5
    hot_spots: Literal["representative", "expand"] = "representative"
    student_path: str | None = None
    hashing: Literal["simhash", "learned"] = "simhash"
    simhash_seed: int = 0
    hyperplanes_path: str | None = None
    teacher: str | None = None
    batch_size: int = 4096
    neighbors: int | None = 8
    permutations: int = 16
    window: int = 16
    min_jaccard: float = 0.5

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise ValueError(f"The 'enabled' parameter of SPHConfig must be a bool. Got {self.enabled!r} instead.")
        if not _is_int(self.bits) or self.bits not in ALLOWED_BITS:
            raise ValueError(
                f"The 'bits' parameter of SPHConfig must be an int in {{32, 64, 128}}. Got {self.bits!r} instead."
            )
        if not _is_int(self.radius) or not 0 <= self.radius <= self.bits:
            raise ValueError(f"The 'radius' parameter of SPHConfig must be an int in [0, bits={self.bits}]. "
                             f"Got {self.radius!r} instead.")
        if not _is_int(self.num_chunks) or not max(1, -(-self.bits // 64)) <= self.num_chunks <= self.bits:
            raise ValueError(
                f"The 'num_chunks' parameter of SPHConfig must be an int in [{max(1, -(-self.bits // 64))}, {self.bits}]. "
                f"Got {self.num_chunks!r} instead."
            )
        if self.neighbors is None:  # exact multi-index hashing of every pair within the radius
            width = -(-self.bits // self.num_chunks)
            sub = self.radius // self.num_chunks
            probes = sum(comb(width, t) for t in range(sub + 1))
            if sub > 2 or probes > 50_000:
                raise ValueError(
                    f"The 'num_chunks' parameter of SPHConfig must be at least {self.radius // 3 + 1} for radius={self.radius} "
                    f"with neighbors=None (each chunk is searched within radius // num_chunks <= 2 bits). Got "
                    f"{self.num_chunks!r} instead."
                )
        if self.hot_spots not in ("representative", "expand"):
            raise ValueError(
                "The 'hot_spots' parameter of SPHConfig must be one of 'representative', 'expand'. "
                f"Got {self.hot_spots!r} instead."
            )
        if self.hashing not in ("simhash", "learned"):
            raise ValueError(f"The 'hashing' parameter of SPHConfig must be one of 'simhash', 'learned'. Got {self.hashing!r} instead.")
        if not _is_int(self.simhash_seed) or not 0 <= self.simhash_seed < 2**31:
            raise ValueError(f"The 'simhash_seed' parameter of SPHConfig must be an int in [0, 2**31). Got {self.simhash_seed!r} instead.")
        for name in ("student_path", "hyperplanes_path", "teacher"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"The '{name}' parameter of SPHConfig must be a non-empty str or None. Got {value!r} instead.")
        if not _is_int(self.batch_size) or not 1 <= self.batch_size <= 1_000_000:
            raise ValueError(
                f"The 'batch_size' parameter of SPHConfig must be an int in [1, 1000000]. Got {self.batch_size!r} instead."
            )
        if self.neighbors is not None and (not _is_int(self.neighbors) or not 1 <= self.neighbors <= 1024):
            raise ValueError(
                f"The 'neighbors' parameter of SPHConfig must be an int in [1, 1024] or None. Got {self.neighbors!r} instead."
            )
        for name, hi in (("permutations", 64), ("window", 256)):
            value = getattr(self, name)
            if not _is_int(value) or not 1 <= value <= hi:
                raise ValueError(f"The '{name}' parameter of SPHConfig must be an int in [1, {hi}]. Got {value!r} instead.")
        if isinstance(self.min_jaccard, bool) or not isinstance(self.min_jaccard, (int, float)) or not 0.0 <= self.min_jaccard <= 1.0:
            raise ValueError(
                f"The 'min_jaccard' parameter of SPHConfig must be a float in [0, 1]. Got {self.min_jaccard!r} instead."
            )
