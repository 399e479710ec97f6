"""The stage registry: every stage of the cascade, in order, and how each is built.

A stage is one module under :mod:`semhash_llm.stages` with a class that follows the
:class:`~semhash_llm.stages.base.Stage` protocol. Registering it here (one
:class:`StageInfo` in :data:`STAGES`) gives it a name for ``--no-<name>``, ``--only`` and the
funnel of ``report.json``, a config section whose ``enabled`` turns it on and off, and a place
in the order. Nothing here imports :mod:`semhash_llm.cascade`.

A stage of your own is one module and one call::

    from semhash_llm.pipeline.registry import StageInfo, register

    register(StageInfo("casefold", "casefold", "exact duplicates up to letter case",
                       build=lambda cfg: CasefoldStage(), active=lambda cfg: True),
             before="lsh", edge_kinds={100: ("exact", "casefold")})

``edge_kinds`` names the ``relation`` and ``decided_by`` that ``documents.parquet`` gives a
document removed over an edge of that kind (:mod:`semhash_llm.pipeline.edges`).
``tests/test_stage_registry.py`` adds such a stage and runs the cascade with it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from semhash_llm.config import PipelineConfig
from semhash_llm.pipeline.capabilities import check_capabilities
from semhash_llm.pipeline.edges import EDGE_RELATIONS
from semhash_llm.stages.aw import AWMinHashStage
from semhash_llm.stages.base import ComputesFeatures, Stage
from semhash_llm.stages.exact import BloomExactStage
from semhash_llm.stages.lsh import MinHashLSHStage
from semhash_llm.stages.mgfn import VerifierStage
from semhash_llm.stages.passages import PassageStage
from semhash_llm.stages.sph import SPHStage

__all__ = ["StageInfo", "STAGES", "BUILTIN_STAGES", "configured_stages", "stage_names", "stages", "register",
           "unregister", "registered", "offloadable"]


@dataclass(frozen=True)
class StageInfo:
    """A stage of the cascade: its funnel name, its config section, what it does, how it is built."""

    name: str
    section: str
    summary: str
    build: Callable[[PipelineConfig], Stage]
    active: Callable[[PipelineConfig], bool] | None = None
    """Whether it runs (default: its section's ``enabled``; a stage without a section of
    :class:`~semhash_llm.config.PipelineConfig` must give one)."""

    @property
    def has_section(self) -> bool:
        """Whether ``section`` is a section of :class:`~semhash_llm.config.PipelineConfig` (a registered
        stage of one's own may have none and say when it runs with ``active``)."""
        return self.section in {f.name for f in dataclasses.fields(PipelineConfig)}

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


BUILTIN_STAGES: tuple[StageInfo, ...] = STAGES
"""The stages the package ships, in cascade order."""


def stages() -> tuple[StageInfo, ...]:
    """The registered stages now, in cascade order (the built-in ones and any :func:`register` added)."""
    return STAGES


def configured_stages(config: PipelineConfig) -> list[Stage]:
    """The enabled stages of ``config``, in cascade order, built once (models load here); each
    stage's declared capabilities are checked against what it has (:func:`check_capabilities`)."""
    built = [info.build(config) for info in stages() if info.runs(config)]
    for stage in built:
        check_capabilities(stage)
    return built


def offloadable(built: Sequence[Stage], skip: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The stages of ``built`` whose features an engine may compute elsewhere: built-in stages
    that offer ``compute`` (:class:`~semhash_llm.stages.base.ComputesFeatures`), less ``skip``.
    An engine's workers build the stages from their own registry, which holds the built-in
    stages only, so a stage registered in this process computes its features here."""
    builtin = {info.name for info in BUILTIN_STAGES}
    return tuple(st.name for st in built
                 if isinstance(st, ComputesFeatures) and st.name not in skip and st.name in builtin)


def register(info: StageInfo, *, before: str | None = None, after: str | None = None,
             edge_kinds: Mapping[int, tuple[str, str]] | None = None) -> None:
    """Add a stage to the cascade, before or after a registered one (default: last).

    ``edge_kinds`` maps each edge kind the stage emits (an int in 8–255: 0–7 are the built-in
    :class:`~semhash_llm.pipeline.edges.EdgeKind`) to its ``(relation, decided_by)``.
    Raises :class:`ValueError` naming what clashes: a taken stage name, an unknown neighbour,
    both neighbours, or an edge kind out of range or taken.
    """
    global STAGES
    names = [s.name for s in STAGES]
    if info.name in names:
        raise ValueError(f"stage {info.name!r} is already registered; registered stages: {', '.join(names)}")
    if before is not None and after is not None:
        raise ValueError(f"stage {info.name!r}: give before= or after=, not both")
    anchor = before if before is not None else after
    if anchor is not None and anchor not in names:
        raise ValueError(f"stage {info.name!r}: no registered stage {anchor!r} to place it by; "
                         f"registered stages: {', '.join(names)}")
    if info.active is None and not info.has_section:
        raise ValueError(f"stage {info.name!r}: PipelineConfig has no section {info.section!r}; "
                         "pass active= to say when it runs")
    kinds = dict(edge_kinds or {})
    for kind in kinds:
        if not 8 <= int(kind) <= 255 or int(kind) in EDGE_RELATIONS:
            raise ValueError(f"stage {info.name!r}: edge kind {kind} is out of 8–255 or already taken "
                             f"(taken: {sorted(EDGE_RELATIONS)})")
    at = len(names) if anchor is None else names.index(anchor) + (0 if before is not None else 1)
    STAGES = (*STAGES[:at], info, *STAGES[at:])
    EDGE_RELATIONS.update({int(k): v for k, v in kinds.items()})
    _OWN_KINDS[info.name] = tuple(int(k) for k in kinds)


def unregister(name: str) -> None:
    """Remove a stage :func:`register` added (and its edge kinds); a built-in stage stays."""
    global STAGES
    if name in {s.name for s in BUILTIN_STAGES}:
        raise ValueError(f"stage {name!r} is built in; turn it off with its config section or --no-{name}")
    if name not in {s.name for s in STAGES}:
        raise ValueError(f"stage {name!r} is not registered")
    STAGES = tuple(s for s in STAGES if s.name != name)
    for kind in _OWN_KINDS.pop(name, ()):
        EDGE_RELATIONS.pop(kind, None)


@contextmanager
def registered(info: StageInfo, *, before: str | None = None, after: str | None = None,
               edge_kinds: Mapping[int, tuple[str, str]] | None = None) -> Iterator[StageInfo]:
    """:func:`register` for the duration of a ``with`` block (tests, one-off runs)."""
    register(info, before=before, after=after, edge_kinds=edge_kinds)
    try:
        yield info
    finally:
        unregister(info.name)


_OWN_KINDS: dict[str, tuple[int, ...]] = {}


def _judge_stage(config: PipelineConfig) -> Stage:
    from semhash_llm.stages.judge import JudgeStage

    return JudgeStage(config.judge)


def stage_names() -> tuple[str, ...]:
    """The registered stage names, in cascade order."""
    return tuple(info.name for info in stages())
