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
    rows = _rows(PipelineConfig.from_dict({"select": {"keep": "first"}}))
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
    assert [s["stage"] for s in rows["_report"]["funnel"]] == ["read", "bloom", "lsh", "aw", "passages", "select"]


def test_lexical_floor_guards_sph_pairs() -> None:
    rows = _rows(PipelineConfig.from_dict({"sph": {"min_jaccard": 0.9}}))
    assert rows["b"]["action"] == "keep"


def test_sph_needs_minhash() -> None:
    with pytest.raises(ConfigError, match="SPH candidates are confirmed by their MinHash Jaccard estimate"):
        PipelineConfig.from_dict({"minhash": {"enabled": False}})
    cfg = PipelineConfig.from_dict({"minhash": {"enabled": False}, "sph": {"enabled": False}})
    assert not cfg.minhash.enabled


def test_radius_adapts_to_the_candidate_budget() -> None:
    import numpy as np

    from semhash_llm.sph import SPHConfig
    from semhash_llm.stages.semantic import SPHStage

    rng = np.random.default_rng(0)
    base = rng.integers(0, 2**63, size=1, dtype=np.uint64)
    # Codes that differ from one base code in a few random bits: dense, like a crowded topic.
    flips = rng.integers(0, 64, size=(4000, 3))
    codes = np.repeat(base, 4000)
    for j in range(3):
        codes ^= np.left_shift(np.uint64(1), flips[:, j].astype(np.uint64))
    generous = SPHStage(SPHConfig(max_pairs_per_doc=1e9))
    assert generous._radius(codes)[0] == 8
    tight = SPHStage(SPHConfig(max_pairs_per_doc=1.0))
    radius, expected = tight._radius(codes)
    assert radius < 8 and expected <= 1.0 * codes.shape[0]
    fixed = SPHStage(SPHConfig(max_pairs_per_doc=None))
    assert fixed._radius(codes)[0] == 8
    with pytest.raises(ValueError, match="max_pairs_per_doc"):
        SPHConfig(max_pairs_per_doc=0)
