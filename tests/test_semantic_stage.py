"""The SPH stage inside the cascade (shipped student and hyperplanes, offline)."""

from __future__ import annotations

import pytest

from semhash_llm import ConfigError, PipelineConfig, deduplicate

ARTICLE = (
    "The city council approved a new budget on Tuesday that increases funding for public schools, road "
    "repairs and the local library. The mayor said the plan balances growth with fiscal responsibility, while "
    "critics argued that property taxes will rise for many families over the next three years. The vote passed "
    "seven to two after a long public hearing in which residents spoke for and against the proposal."
)
# Re-worded dates and counts plus a share line: too little shared text for LSH at 0.8, close in SPH space.
EDITED = ARTICLE.replace("Tuesday", "Monday").replace("seven to two", "six to three") + " Share this article."
OTHER = ("Heavy rain is expected across the northern valleys this weekend, and officials have asked hikers to "
         "postpone trips until the rivers fall back to their normal levels next week.")


def _rows(cfg: PipelineConfig | None = None) -> dict[str, dict]:
    res = deduplicate([{"id": "a", "text": ARTICLE}, {"id": "b", "text": EDITED}, {"id": "c", "text": OTHER}], cfg)
    return {r["id"]: r for r in res.documents.to_pylist()} | {"_report": res.report}


def test_sph_decides_a_pair_lsh_misses() -> None:
    # LSH at 0.8 (the default, 0.6, accepts this pair itself).
    rows = _rows(PipelineConfig.from_dict({"select": {"keep": "first"}, "minhash": {"threshold": 0.8}}))
    assert rows["b"]["action"] == "remove" and rows["b"]["duplicate_of"] == "a"
    assert rows["b"]["decided_by"] == "sph" and rows["b"]["relation"] == "near_duplicate"
    assert 0.5 <= rows["b"]["score"] < 0.8
    assert rows["c"]["action"] == "keep"
    sph = next(s for s in rows["_report"]["funnel"] if s["stage"] == "sph")
    assert sph["pairs_in"] >= 1 and sph["pairs_out"] == 1
    assert sph["details"]["pruned_fraction"] > 0


def test_without_sph_the_pair_stays() -> None:
    rows = _rows(PipelineConfig.from_dict({"sph": {"enabled": False}}))
    assert rows["b"]["action"] == "keep"
    # A stage that is off is not in the cascade at all: no funnel row.
    assert [s["stage"] for s in rows["_report"]["funnel"]] == ["read", "bloom", "lsh", "aw", "mgfn", "passages",
                                                                "select"]


def test_lexical_floor_guards_sph_pairs() -> None:
    rows = _rows(PipelineConfig.from_dict({"sph": {"min_jaccard": 0.9}}))
    assert rows["b"]["action"] == "keep"


def test_sph_needs_minhash() -> None:
    with pytest.raises(ConfigError, match="SPH candidates are confirmed by their MinHash Jaccard estimate"):
        PipelineConfig.from_dict({"minhash": {"enabled": False}})
    cfg = PipelineConfig.from_dict({"minhash": {"enabled": False}, "sph": {"enabled": False}})
    assert not cfg.minhash.enabled


def test_per_document_neighbour_budget_on_a_crowded_code_space() -> None:
    import numpy as np

    from semhash_llm.sph import SPHConfig
    from semhash_llm.stages.sph import SPHStage

    rng = np.random.default_rng(0)
    base = rng.integers(0, 2**63, size=1, dtype=np.uint64)
    # Codes that differ from one base code in a few random bits: dense, like a crowded topic,
    # where one global radius would propose nearly all pairs. Each of the first 200 gets a copy
    # one bit away.
    flips = rng.integers(0, 64, size=(4000, 3))
    codes = np.repeat(base, 4000)
    for j in range(3):
        codes ^= np.left_shift(np.uint64(1), flips[:, j].astype(np.uint64))
    copies = codes[:200] ^ np.left_shift(np.uint64(1), rng.integers(0, 64, 200).astype(np.uint64))
    packed = np.concatenate([codes, copies])
    n = packed.shape[0]
    budget = SPHStage(SPHConfig(neighbors=4, radius=8))._candidates(packed)
    assert len(budget) <= 4 * n
    found = set(zip(budget.a.tolist(), budget.b.tolist()))
    assert sum((i, 4000 + i) in found for i in range(200)) >= 190  # the nearest code is proposed
    everything = SPHStage(SPHConfig(neighbors=None, radius=8))._candidates(packed)
    assert len(everything) > 50 * len(budget)  # what one global radius of 8 would propose
    with pytest.raises(ValueError, match="neighbors"):
        SPHConfig(neighbors=0)
    with pytest.raises(ValueError, match="num_chunks"):  # exact search needs enough chunks for its radius
        SPHConfig(neighbors=None, radius=16)
