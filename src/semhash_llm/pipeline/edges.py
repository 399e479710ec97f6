"""Edge kinds: which stage accepted a pair, and what ``documents.parquet`` calls the link.

Every accepted pair carries one :class:`EdgeKind` (stored as ``uint8`` in
:class:`~semhash_llm.stages.base.Edges`). When a document is removed, the kind of the weakest
accepted edge on its path to the survivor gives its ``relation`` and ``decided_by`` columns
(:data:`EDGE_RELATIONS`). The values are part of checkpoints and index segments: append new
kinds, never renumber.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["EdgeKind", "EDGE_RELATIONS"]


class EdgeKind(IntEnum):
    """The kind of an accepted pair (an ``int``: it is written into ``uint8`` arrays as is)."""

    EXACT = 0
    """Same normalized text (Bloom filter hit confirmed by the exact key)."""
    LSH = 1
    """MinHash LSH candidate confirmed by its Jaccard estimate."""
    SPH = 2
    """Nearest SPH codes confirmed by a Jaccard floor."""
    CONTAINED = 3
    """The passage stage: the document is contained in its survivor."""
    PASSAGE_NEAR = 4
    """The passage stage: near duplicates by shared passages."""
    AW = 5
    """AW-MinHash: weighted Jaccard estimate at its threshold."""
    VERIFIED = 6
    """The neural verifier (MGFN) accepted the pair."""
    JUDGED = 7
    """The LLM judge, fused with the verifier, accepted the pair."""


EDGE_RELATIONS: dict[int, tuple[str, str]] = {int(k): v for k, v in {
    EdgeKind.EXACT: ("exact", "bloom"),
    EdgeKind.LSH: ("near_duplicate", "lsh"),
    EdgeKind.SPH: ("near_duplicate", "sph"),
    EdgeKind.CONTAINED: ("contained_in", "passages"),
    EdgeKind.PASSAGE_NEAR: ("near_duplicate", "passages"),
    EdgeKind.AW: ("near_duplicate", "aw"),
    EdgeKind.VERIFIED: ("near_duplicate", "verifier"),
    EdgeKind.JUDGED: ("near_duplicate", "judge"),
}.items()}
"""Edge kind → (``relation``, ``decided_by``) as written to ``documents.parquet``."""
