"""Fragments and containment, decided after selection, once the kept documents are known.

A repeated passage (a viral fragment) stays in one kept host — never only in a removed one —
and cuts apply to kept documents only (:func:`settle_fragments`, with the passages stage's
:func:`~semhash_llm.stages.passages.resolve_fragments`). A removed document that another stage
linked but whose content its clearly longer survivor holds is reported ``contained_in``
(:func:`held_by_survivor`); neither changes which documents are kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from semhash_llm.config import PipelineConfig
from semhash_llm.pipeline.edges import EdgeKind
from semhash_llm.pipeline.funnel import StageStats
from semhash_llm.pipeline.select import Selection
from semhash_llm.stages.base import FragmentCandidates, Fragments
from semhash_llm.stages.passages import resolve_fragments

__all__ = ["CONTAINED_SHORTER", "held_by_survivor", "settle_fragments"]


def settle_fragments(candidates: Sequence[tuple[str, FragmentCandidates]], fragment_parts: Sequence[Fragments],
                     selection: Selection, lengths: np.ndarray, config: PipelineConfig,
                     read_texts: Callable[[np.ndarray], list[str]] | None,
                     rows: dict[str, StageStats]) -> Fragments:
    """The spans to cut: each stage's repeated passages resolved against the survivors (their
    counts into the stage's funnel row), with the stages' own fragments, on kept documents only."""
    n = selection.keeper.size
    survivor = selection.keeper == np.arange(n)
    parts = list(fragment_parts)
    for name, cand in candidates:
        resolved, counts = resolve_fragments(cand, survivor, lengths, config.passages, read_texts)
        parts.append(resolved)
        rows[name].details.update(counts)
    fragments = Fragments.concat(parts)
    survives = survivor[fragments.doc]
    return Fragments(fragments.doc[survives], fragments.start[survives], fragments.end[survives])


CONTAINED_SHORTER = 0.8
"""A removed document is *contained* in its survivor when it is shorter than this share of it."""


def held_by_survivor(selection: Selection, lengths: np.ndarray, cfg: PipelineConfig,
                     read_texts: Callable[[np.ndarray], list[str]] | None) -> np.ndarray:
    """Which removed documents are contained in their survivor although another stage (LSH,
    AW-MinHash, SPH, the verifier) linked them first: shorter than :data:`CONTAINED_SHORTER` of
    the survivor, and with their content held by it — shingle containment (the smaller of
    character 4-gram and word 3-gram containment, on the re-read texts) at least
    ``passages.short_containment``. Such a removal is an excerpt, and its relation says
    ``contained_in``; the kept document and the decision do not change."""
    from semhash_llm.text.containment import shingle_containment

    n = selection.keeper.size
    out = np.zeros(n, dtype=np.bool_)
    keeper = selection.keeper
    idx = np.arange(n)
    linked_near = (keeper != idx) & (selection.via_kind >= 0) & ~np.isin(selection.via_kind,
                                                                        [EdgeKind.EXACT, EdgeKind.CONTAINED])
    cand = np.flatnonzero(linked_near & (lengths < CONTAINED_SHORTER * lengths[keeper]))
    if cand.size == 0 or read_texts is None or not cfg.passages.enabled:
        return out
    want = np.unique(np.concatenate([cand, keeper[cand]]))
    texts = dict(zip(want.tolist(), read_texts(want)))
    bar = cfg.passages.short_containment
    for d in cand.tolist():
        if shingle_containment(texts[d], texts[int(keeper[d])], config=cfg.normalize) >= bar:
            out[d] = True
    return out
