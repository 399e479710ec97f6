"""Semantic Projection Hashing (SPH, paper section A).

A static student encoder (distilled from a transformer teacher, eq. 2) embeds each
document; K learned hyperplanes turn the embedding into a K-bit code (eqs. 3-10);
multi-index hashing proposes every pair of codes within a Hamming radius.

The cascade's entry point::

    from semhash_llm.sph import SPH, SPHConfig

    sph = SPH(SPHConfig(bits=64, radius=3))      # shipped weights, offline, numpy only
    codes = sph.codes(texts)                     # (n,) uint64; (n, 2) for bits=128
    pairs = sph.candidates_from_codes(codes)     # CandidatePairs(a, b, distance, proposed_by="sph")
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from semhash_llm.sph.blocking import CandidatePairs, MultiIndexHash, brute_force_pairs, hamming_candidates
from semhash_llm.sph.config import SPHConfig
from semhash_llm.sph.hyperplanes import SPHHasher, beta_schedule, hamming_distance, pack_bits, unpack_bits
from semhash_llm.sph.student import ASSETS_DIR, StaticStudent, load_student
from semhash_llm.sph.teacher import Encoder, TransformerTeacher

logger = logging.getLogger(__name__)

__all__ = [
    "SPH",
    "SPHConfig",
    "SPHHasher",
    "StaticStudent",
    "TransformerTeacher",
    "Encoder",
    "CandidatePairs",
    "MultiIndexHash",
    "hamming_candidates",
    "brute_force_pairs",
    "hamming_distance",
    "pack_bits",
    "unpack_bits",
    "beta_schedule",
    "load_student",
    "load_hasher",
    "ASSETS_DIR",
]


def load_hasher(path: str | Path | None = None, bits: int = 64) -> SPHHasher:
    """Load hyperplanes: a ``.npz`` file, a training folder (``hyperplanes_k{bits}.npz``), or the shipped ones."""
    folder_or_file = Path(path) if path is not None else ASSETS_DIR
    file = folder_or_file / f"hyperplanes_k{bits}.npz" if folder_or_file.is_dir() else folder_or_file
    if not file.is_file():
        raise FileNotFoundError(
            f"No SPH hyperplanes for bits={bits} at '{file}'. Train them with "
            f"`semhash-llm train sph CORPUS --out DIR --bits {bits}`, or use bits in (32, 64, 128) with the shipped weights."
        )
    hasher = SPHHasher.load(file)
    if hasher.bits != bits:
        raise ValueError(f"Hyperplanes in '{file}' have {hasher.bits} bits, but bits={bits} was asked for.")
    return hasher


class SPH:
    """The SPH stage: student embeddings -> K-bit codes (random or learned hyperplanes) -> Hamming candidates.

    ``config.student_path`` may name a training output folder (with ``student/`` and
    ``hyperplanes_k*.npz``) or a student folder; ``None`` uses the shipped weights.
    """

    def __init__(
        self,
        config: SPHConfig | None = None,
        student: StaticStudent | None = None,
        hasher: SPHHasher | None = None,
    ) -> None:
        self.config = config or SPHConfig()
        self.student = student or load_student(self.config.student_path)
        if hasher is None:
            if self.config.hyperplanes_path is None and self.config.hashing == "simhash":
                hasher = SPHHasher.simhash(self.student.dim, self.config.bits, seed=self.config.simhash_seed)
            else:
                hasher = load_hasher(self.config.hyperplanes_path or self.config.student_path, self.config.bits)
        if hasher.dim != self.student.dim:
            raise ValueError(
                f"The SPH hyperplanes expect {hasher.dim}-d embeddings but the student gives {self.student.dim}-d; "
                "load both from the same training folder."
            )
        if hasher.bits != self.config.bits:
            raise ValueError(f"The SPH hyperplanes have {hasher.bits} bits but SPHConfig.bits={self.config.bits}.")
        self.hasher = hasher

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Student embeddings, (n, dim) float32, L2-normalised."""
        return self.student.encode(texts, batch_size=self.config.batch_size)

    def codes(self, texts: Sequence[str]) -> np.ndarray:
        """Packed K-bit codes: (n,) uint64 for K <= 64, (n, K / 64) uint64 for K = 128."""
        return self.hasher.codes(self.embed(texts))

    def candidates_from_codes(self, codes: np.ndarray) -> CandidatePairs:
        """Pairs within ``config.radius`` (exact multi-index hashing), ``proposed_by='sph'``."""
        return hamming_candidates(
            codes,
            radius=self.config.radius,
            num_chunks=self.config.num_chunks,
            bits=self.config.bits,
            hot_spots=self.config.hot_spots,
        )

    def candidates(self, texts: Sequence[str]) -> CandidatePairs:
        """Codes and candidate pairs of ``texts`` in one call."""
        return self.candidates_from_codes(self.codes(texts))
