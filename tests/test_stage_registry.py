"""A stage of one's own: one module with a class that follows the protocol, and one register() call.

This file is the example the docs point to. ``DigitlessStage`` links documents that are equal once
their digits are removed (a toy: the verifier would call "order 1234" and "order 9876" two texts);
it declares its Capabilities and its own edge kind, so documents.parquet says it decided, and it
answers the cover check before selection (``covers``, asked at its ``cover_rank``) by its own bar.
"""

from __future__ import annotations

import numpy as np
import pytest

from semhash_llm.api import deduplicate
from semhash_llm.config import PipelineConfig
from semhash_llm.pipeline import registry
from semhash_llm.pipeline.capabilities import Capabilities
from semhash_llm.pipeline.edges import EDGE_RELATIONS
from semhash_llm.pipeline.registry import StageInfo, registered
from semhash_llm.stages.base import (
    CoverAnswer,
    CoverContext,
    CoverQuery,
    DecideContext,
    Decision,
    Edges,
    StageCover,
    StreamBatch,
)

DIGITLESS_EDGE_KIND = 100


class DigitlessStage:
    """Links documents whose texts are equal with their digits removed."""

    name = "digitless"
    capabilities = Capabilities(cover_rank=25)  # hands nothing on; the cover check asks it after LSH

    def __init__(self) -> None:
        self._index: list[np.ndarray] = []
        self._keys: list[str] = []

    def process(self, batch: StreamBatch) -> None:
        docs = batch.feature_docs
        self._index.append(batch.index[docs])
        self._keys.extend("".join(c for c in batch.texts[j] if not c.isdigit()) for j in docs.tolist())

    def decide(self, ctx: DecideContext) -> Decision:
        index = np.concatenate(self._index) if self._index else np.empty(0, np.int64)
        first: dict[str, int] = {}
        a: list[int] = []
        b: list[int] = []
        for i, key in zip(index.tolist(), self._keys):
            j = first.setdefault(key, i)
            if j != i and ctx.union_find.union(i, j):
                a.append(i)
                b.append(j)
        edges = Edges(np.array(a, np.int64), np.array(b, np.int64), np.ones(len(a), np.float32),
                      np.full(len(a), DIGITLESS_EDGE_KIND, np.uint8))
        return Decision(edges, docs_in=int(index.size), pairs_in=len(a), pairs_out=len(a))

    def covers(self, ctx: CoverContext) -> StageCover:
        """A keeper covers a document when their digitless texts are equal (this stage's own bar)."""
        index = np.concatenate(self._index) if self._index else np.empty(0, np.int64)
        key_of = dict(zip(index.tolist(), self._keys))

        def answer(q: CoverQuery) -> CoverAnswer:
            out = CoverAnswer.none(q.docs.size)
            for i in np.flatnonzero(q.open).tolist():
                key = key_of.get(int(q.docs[i]))
                if key is not None and key == key_of.get(int(q.keepers[i])):
                    out.mark(np.array([i]), DIGITLESS_EDGE_KIND, 1.0)
            return out

        return StageCover(answer)


INFO = StageInfo("digitless", "digitless", "documents equal once digits are removed (a test stage)",
                 build=lambda cfg: DigitlessStage(), active=lambda cfg: True)

RECORDS = [
    {"id": "a", "text": "Order 1234 shipped today to the customer in the north of the city."},
    {"id": "b", "text": "Order 9876 shipped today to the customer in the north of the city."},
    {"id": "c", "text": "A quite different sentence about the weather on a rainy afternoon."},
]
LEXICAL = {"aw": {"enabled": False}, "sph": {"enabled": False}, "verifier": {"enabled": False},
           "passages": {"enabled": False}, "select": {"keep": "first"}}


def test_a_registered_stage_runs_in_its_place_and_names_itself() -> None:
    before = registry.stages()
    with registered(INFO, before="lsh", edge_kinds={DIGITLESS_EDGE_KIND: ("near_duplicate", "digitless")}):
        assert [s.name for s in registry.stages()] == ["bloom", "digitless", "lsh", "aw", "sph", "mgfn", "judge",
                                                       "passages"]
        result = deduplicate(RECORDS, PipelineConfig.from_dict(LEXICAL))
    rows = {r["id"]: r for r in result.documents.to_pylist()}
    assert rows["b"]["action"] == "remove" and rows["b"]["duplicate_of"] == "a"
    assert rows["b"]["decided_by"] == "digitless" and rows["b"]["relation"] == "near_duplicate"
    assert rows["a"]["action"] == "keep" and rows["c"]["action"] == "keep"
    funnel = [row["stage"] for row in result.report["funnel"]]
    assert funnel == ["read", "bloom", "digitless", "lsh", "select"]
    # unregistered on leaving the block: the cascade and the edge kinds are as before
    assert registry.stages() == before and DIGITLESS_EDGE_KIND not in EDGE_RELATIONS
    plain = {r["id"]: r["action"] for r in deduplicate(RECORDS, PipelineConfig.from_dict(LEXICAL)).documents.to_pylist()}
    assert plain == {"a": "keep", "b": "keep", "c": "keep"}


def test_register_refuses_what_clashes() -> None:
    with pytest.raises(ValueError, match="already registered"):
        registry.register(StageInfo("lsh", "minhash", "again", build=lambda cfg: DigitlessStage()))
    with pytest.raises(ValueError, match="no registered stage 'nope'"):
        registry.register(INFO, after="nope")
    with pytest.raises(ValueError, match="not both"):
        registry.register(INFO, before="lsh", after="bloom")
    with pytest.raises(ValueError, match="no section 'digitless'"):
        registry.register(StageInfo("digitless", "digitless", "no active", build=lambda cfg: DigitlessStage()))
    with pytest.raises(ValueError, match="edge kind 3 is out of 8–255 or already taken"):
        registry.register(INFO, edge_kinds={3: ("exact", "digitless")})
    with pytest.raises(ValueError, match="built in"):
        registry.unregister("lsh")
    assert registry.stages() == registry.BUILTIN_STAGES


def test_the_cover_check_asks_the_registered_stage_by_its_own_bar() -> None:
    from semhash_llm.pipeline.cover import CoverCheck

    stage = DigitlessStage()
    stage._index, stage._keys = [np.arange(3)], ["order  shipped", "order  shipped", "weather"]
    check = CoverCheck({"digitless": stage}, Edges.empty(), 3, PipelineConfig())
    assert check(np.array([1, 2]), np.array([0, 0])).tolist() == [True, False]
    assert check.evidence == {1 * 3 + 0: (DIGITLESS_EDGE_KIND, 1.0)}


def test_an_engine_offloads_the_built_in_stages_only() -> None:
    """Ray workers build stages from their own registry: a stage registered here computes here,
    even when it offers compute()."""
    from semhash_llm.config import MinHashConfig
    from semhash_llm.pipeline.registry import offloadable
    from semhash_llm.stages.lsh import MinHashLSHStage

    class Computing(DigitlessStage):
        def compute(self, texts: list[str], normalize: object, shingle: object) -> dict[str, np.ndarray]:
            return {}

    built = [Computing(), MinHashLSHStage(MinHashConfig())]
    assert offloadable(built) == ("lsh",)  # type: ignore[arg-type]
    assert offloadable(built, frozenset({"lsh"})) == ()  # type: ignore[arg-type]
