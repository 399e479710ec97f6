"""The decide loop: after the stream, every stage decides, in cascade order, into one union-find.

Each stage's :meth:`~semhash_llm.stages.base.Stage.decide` links its accepted pairs and returns
a :class:`~semhash_llm.stages.base.Decision`; the loop turns it into the stage's funnel row the
same way for every stage, keeps it as a checkpoint step (or restores it from one on resume),
and has the later stages featurize the documents a stage claimed wrongly (Bloom's false
positives) before they decide.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from semhash_llm.faults import failpoint
from semhash_llm.pipeline.checkpoints import Checkpoints, restore_decision, save_decision
from semhash_llm.pipeline.funnel import StageStats, peak_rss_mb
from semhash_llm.stages.base import DecideContext, Edges, FragmentCandidates, Fragments, Stage

__all__ = ["Decided", "decide"]


@dataclass
class Decided:
    """What the stages decided, gathered for selection."""

    rows: dict[str, StageStats]
    """Each stage's funnel row, by name."""
    edges: list[Edges]
    fragments: list[Fragments]
    candidates: list[tuple[str, FragmentCandidates]]
    """Each stage's repeated passages, whose cuts are decided after selection."""
    children: np.ndarray
    """Per document: it is contained in another (a child never survives its parent)."""
    resumed: list[str]
    """The steps restored from checkpoints."""


def decide(stages: Sequence[Stage], ctx: DecideContext, ck: Checkpoints | None, stream_seconds: dict[str, float],
           refeature: Callable[[Sequence[Stage], np.ndarray], int],
           tick: Callable[[str, int, int | None], None]) -> Decided:
    """Run every stage's decision in order (step ``i + 1`` of the checkpoints for stage ``i``).

    ``refeature(later_stages, docs)`` computes the later stages' features of ``docs`` from the
    source and returns how many it repaired."""
    n = ctx.num_docs
    out = Decided({st.name: StageStats(st.name) for st in stages}, [], [], [], np.zeros(n, dtype=np.bool_), [])
    for i, stage in enumerate(stages):
        t1 = time.perf_counter()
        if ck is not None and ck.has(i + 1, stage.name):
            decision, saved_seconds = restore_decision(ck, i + 1, stage, ctx)
            stream_seconds[stage.name] = 0.0
            out.resumed.append(stage.name)
        else:
            failpoint("during", stage.name)
            decision = stage.decide(ctx)
            saved_seconds = None
            if ck is not None:
                save_decision(ck, i + 1, stage, decision, ctx, stream_seconds[stage.name] + time.perf_counter() - t1)
            failpoint("after", stage.name)
        if decision.refeature.size:
            # Documents this stage claimed wrongly (Bloom false positives): the later stages
            # compute their features now, from the source, before they decide.
            decision.details["repaired_false_positives"] = refeature(stages[i + 1 :], decision.refeature)
        row = out.rows[stage.name]
        row.seconds = (stream_seconds[stage.name] + time.perf_counter() - t1 if saved_seconds is None
                       else saved_seconds)
        row.docs_in = decision.docs_in
        row.docs_removed = len(decision.edges)
        row.docs_out = row.docs_in - row.docs_removed
        row.pairs_in, row.pairs_out = decision.pairs_in, decision.pairs_out
        row.details = {"stream_seconds": round(stream_seconds[stage.name], 4), **decision.details}
        row.peak_rss_mb = peak_rss_mb()
        out.edges.append(decision.edges)
        out.fragments.append(decision.fragments)
        if len(decision.fragment_candidates):
            out.candidates.append((stage.name, decision.fragment_candidates))
        out.children[decision.children] = True
        tick(stage.name, n, n)
    return out
