"""Stages declare what they do in a Capabilities record; the cascade's resume logic reads only that."""

from __future__ import annotations

import numpy as np
import pytest

from semhash_llm.pipeline.capabilities import NONE, Capabilities, capabilities_of
from semhash_llm.pipeline.checkpoints import features_not_needed
from semhash_llm.pipeline.registry import STAGES


class _Fake:
    def __init__(self, name: str, caps: Capabilities = NONE) -> None:
        self.name = name
        self.capabilities = caps


class _Checkpoints:
    def __init__(self, done: set[str]) -> None:
        self.done = done

    def has(self, order: int, name: str) -> bool:
        return name in self.done


STAGE_SET = [
    _Fake("bloom", Capabilities(claims_documents=True)),
    _Fake("lsh", Capabilities(reads_features_of=("mgfn",), cover_rank=20)),
    _Fake("sph", Capabilities(cover_rank=30)),
    _Fake("passages"),
    _Fake("mgfn", Capabilities(cover_rank=90)),
]


def test_resume_streams_what_a_step_still_to_run_reads() -> None:
    names = {st.name for st in STAGE_SET}
    # every stage decided, selection still to run: the cover check's evidence streams again
    assert features_not_needed(STAGE_SET, _Checkpoints(names)) == frozenset({"passages"})  # type: ignore[arg-type]
    # selection done too: only the stage that claims documents streams
    assert features_not_needed(STAGE_SET, _Checkpoints(names | {"select"})) == frozenset(  # type: ignore[arg-type]
        {"lsh", "sph", "passages", "mgfn"})
    # lsh still to run: it and the stage whose features it reads stream
    assert features_not_needed(STAGE_SET, _Checkpoints(names - {"lsh"} | {"select"})) == frozenset(  # type: ignore[arg-type]
        {"sph", "passages"})
    assert features_not_needed(STAGE_SET, None) == frozenset()  # type: ignore[arg-type]


def test_every_registered_stage_class_declares_a_record() -> None:
    from semhash_llm.stages.aw import AWMinHashStage
    from semhash_llm.stages.exact import BloomExactStage
    from semhash_llm.stages.judge import JudgeStage
    from semhash_llm.stages.lsh import MinHashLSHStage
    from semhash_llm.stages.mgfn import VerifierStage
    from semhash_llm.stages.passages import PassageStage
    from semhash_llm.stages.sph import SPHStage

    classes = {"bloom": BloomExactStage, "lsh": MinHashLSHStage, "aw": AWMinHashStage, "sph": SPHStage,
               "mgfn": VerifierStage, "judge": JudgeStage, "passages": PassageStage}
    assert set(classes) == {info.name for info in STAGES}
    caps = {name: capabilities_of(cls) for name, cls in classes.items()}
    assert caps["bloom"].claims_documents and caps["judge"].adjudicates
    assert {n for n, c in caps.items() if c.cover_evidence} == {"lsh", "aw", "sph", "mgfn"}
    assert caps["passages"] == NONE


def test_a_capabilities_attribute_of_another_type_is_refused() -> None:
    with pytest.raises(TypeError, match="capabilities must be a Capabilities record"):
        capabilities_of(_Fake("x", {"adjudicates": True}))  # type: ignore[arg-type]


def test_a_declared_role_without_its_method_is_refused_with_the_fix() -> None:
    from semhash_llm.pipeline.capabilities import check_capabilities

    with pytest.raises(TypeError, match=r"stage 'half' declares cover_rank but has no covers"):
        check_capabilities(_Fake("half", Capabilities(cover_rank=40)))
    with pytest.raises(TypeError, match=r"declares offers_deferral but has no deferral, is_short"):
        check_capabilities(_Fake("v", Capabilities(offers_deferral=True)))
    with pytest.raises(TypeError, match=r"hand-off field 'kept_'"):
        check_capabilities(_Fake("h", Capabilities(handoff_fields=("kept_",))))
    assert check_capabilities(_Fake("plain")) == NONE


class _Ranked:
    """A stage that covers every open pair, labelled with its own kind."""

    def __init__(self, name: str, rank: int, kind: int) -> None:
        self.name, self.kind = name, kind
        self.capabilities = Capabilities(cover_rank=rank)
        self.asked: list[int] = []

    def covers(self, ctx: object) -> object:
        from semhash_llm.stages.base import CoverAnswer, StageCover

        def answer(q: object) -> CoverAnswer:
            out = CoverAnswer.none(q.docs.size)  # type: ignore[attr-defined]
            self.asked.append(int(q.open.sum()))  # type: ignore[attr-defined]
            return out.mark(np.arange(out.hit.size), self.kind, 0.5)

        return StageCover(answer, {"asked": 1})


def test_the_cover_check_asks_by_rank_and_only_what_is_still_open() -> None:
    """The lower rank answers first and labels the pair; the containment chain (rank 50) comes
    before a stage of rank 90, which is then asked nothing."""
    from semhash_llm.config import PipelineConfig
    from semhash_llm.pipeline.cover import CoverCheck
    from semhash_llm.stages.base import Edges

    late, early = _Ranked("late", 90, 101), _Ranked("early", 30, 100)
    check = CoverCheck({"late": late, "early": early}, Edges.empty(), 3, PipelineConfig())  # type: ignore[dict-item]
    assert check(np.array([1, 2]), np.array([0, 0])).tolist() == [True, True]
    assert check.evidence[1 * 3 + 0] == (100, 0.5) and late.asked == [] and early.asked == [2]
    assert check.details() == {"cover_check_asked": 1}
    # 2 ⊂ 1 ⊂ 0: the chain of containment edges covers (2, 0) before the rank-90 stage is asked
    chain = Edges(np.array([2, 1]), np.array([1, 0]), np.array([0.9, 0.8], np.float32), np.array([3, 3], np.uint8))
    late = _Ranked("late", 90, 101)
    check = CoverCheck({"late": late}, chain, 4, PipelineConfig())  # type: ignore[dict-item]
    assert check(np.array([2, 3]), np.array([0, 0])).tolist() == [True, True]
    assert check.evidence[2 * 4 + 0][0] == 3 and check.evidence[3 * 4 + 0] == (101, 0.5) and late.asked == [1]
