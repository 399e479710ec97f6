"""The stage registry: every stage of the cascade, in order, and how each is built.

A stage is one module under :mod:`semhash_llm.stages` with a class that follows the
:class:`~semhash_llm.stages.base.Stage` protocol. Registering it here (one
:class:`StageInfo` in :data:`STAGES`) gives it a name for ``--no-<name>``, ``--only`` and the
funnel of ``report.json``, a config section whose ``enabled`` turns it on and off, and a place
in the order. Nothing here imports :mod:`semhash_llm.cascade`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from semhash_llm.config import PipelineConfig
from semhash_llm.stages.aw import AWMinHashStage
from semhash_llm.stages.base import Stage
from semhash_llm.stages.exact import BloomExactStage
from semhash_llm.stages.lsh import MinHashLSHStage
from semhash_llm.stages.mgfn import VerifierStage
from semhash_llm.stages.passages import PassageStage
from semhash_llm.stages.sph import SPHStage

__all__ = ["StageInfo", "STAGES", "configured_stages", "stage_names"]


@dataclass(frozen=True)
class StageInfo:
    """A stage of the cascade: its funnel name, its config section, what it does, how it is built."""

    name: str
    section: str
    summary: str
    build: Callable[[PipelineConfig], Stage]
    active: Callable[[PipelineConfig], bool] | None = None
    """Whether it runs (default: its section's ``enabled``)."""

    def runs(self, config: PipelineConfig) -> bool:
        return self.active(config) if self.active is not None else bool(getattr(config, self.section).enabled)


STAGES: tuple[StageInfo, ...] = (
    StageInfo("bloom", "bloom", "exact duplicates of the normalized text: BLAKE2b-128 key, Bloom filter, "
              "every hit confirmed", lambda cfg: BloomExactStage(cfg.bloom)),
    StageInfo("lsh", "minhash", "near duplicates: MinHash LSH, every candidate confirmed by its Jaccard estimate "
              "(a pair with a short document goes to the verifier)",
              lambda cfg: MinHashLSHStage(cfg.minhash)),
    StageInfo("aw", "aw", "near duplicates by weighted Jaccard: shingles weighted by importance (line cue; "
              "distilled attention or the teacher on request), ICWS signatures, entropy-adaptive banding over "
              "multi-line documents; confirms the lsh and sph pairs too",
              lambda cfg: AWMinHashStage(cfg.aw, cfg.normalize)),
    StageInfo("sph", "sph", "semantic candidates: each document's nearest SPH codes within a Hamming radius, "
              "confirmed by a Jaccard floor (a pair with a short document goes to the verifier)",
              lambda cfg: SPHStage(cfg.sph)),
    StageInfo("mgfn", "verifier", "the neural verifier: pairs with a short document, deferred by the linking "
              "stages, re-read and decided by MGFN (character, token and semantic levels, alignment features, Monte "
              "Carlo dropout) after a character-trigram screen", lambda cfg: VerifierStage(cfg.verifier, cfg.normalize)),
    StageInfo("judge", "judge", "the LLM judge: the verifier's uncertain pairs, least confident first within a "
              "budget, read by an instruction-tuned model (local GGUF or an OpenAI-compatible server) and fused with "
              "the verifier by confidence; verdicts cached in SQLite (off by default: --judge local|openai)",
              lambda cfg: _judge_stage(cfg), active=lambda cfg: cfg.judge.active),
    StageInfo("passages", "passages", "containment (an excerpt leaves, its parent stays) and viral fragments "
              "(a passage in many documents is cut from all but one)",
              lambda cfg: PassageStage(cfg.passages, cfg.normalize)),
)
"""Every stage, in cascade order. ``--no-<name>`` and ``--only`` use these names."""


def configured_stages(config: PipelineConfig) -> list[Stage]:
    """The enabled stages of ``config``, in cascade order, built once (models load here)."""
    return [info.build(config) for info in STAGES if info.runs(config)]


def _judge_stage(config: PipelineConfig) -> Stage:
    from semhash_llm.stages.judge import JudgeStage

    return JudgeStage(config.judge)


def stage_names() -> tuple[str, ...]:
    """The registered stage names, in cascade order."""
    return tuple(info.name for info in STAGES)
