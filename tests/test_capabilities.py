"""Stages declare what they do in a Capabilities record; the cascade's resume logic reads only that."""

from __future__ import annotations

import pytest

from semhash_llm.cascade import _features_not_needed
from semhash_llm.pipeline.capabilities import NONE, Capabilities, capabilities_of
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
    _Fake("lsh", Capabilities(reads_features_of=("mgfn",), cover_evidence=True)),
    _Fake("sph", Capabilities(cover_evidence=True)),
    _Fake("passages"),
    _Fake("mgfn", Capabilities(cover_evidence=True)),
]


def test_resume_streams_what_a_step_still_to_run_reads() -> None:
    names = {st.name for st in STAGE_SET}
    # every stage decided, selection still to run: the cover check's evidence streams again
    assert _features_not_needed(STAGE_SET, _Checkpoints(names)) == frozenset({"passages"})  # type: ignore[arg-type]
    # selection done too: only the stage that claims documents streams
    assert _features_not_needed(STAGE_SET, _Checkpoints(names | {"select"})) == frozenset(  # type: ignore[arg-type]
        {"lsh", "sph", "passages", "mgfn"})
    # lsh still to run: it and the stage whose features it reads stream
    assert _features_not_needed(STAGE_SET, _Checkpoints(names - {"lsh"} | {"select"})) == frozenset(  # type: ignore[arg-type]
        {"sph", "passages"})
    assert _features_not_needed(STAGE_SET, None) == frozenset()  # type: ignore[arg-type]


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
