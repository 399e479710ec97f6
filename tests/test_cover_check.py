"""The cover check: no document is removed through a chain of links its survivor does not cover."""

from __future__ import annotations

import numpy as np
import pytest

from semhash_llm import PipelineConfig, deduplicate
from semhash_llm.config import SelectConfig
from semhash_llm.pipeline.select import refine_by_cover, select_survivors


def _chain(n: int = 4) -> tuple[np.ndarray, ...]:
    """Documents 0-1-2-3 linked in a chain (edges 0-1, 1-2, 2-3), all in cluster 0."""
    roots = np.zeros(n, dtype=np.int64)
    a = np.arange(n - 1, dtype=np.int64)
    b = a + 1
    return roots, a, b, np.ones(n - 1, np.float32), np.ones(n - 1, np.uint8)


def test_a_chain_is_split_where_the_survivor_does_not_cover() -> None:
    roots, a, b, score, kind = _chain()
    lengths = np.array([10, 50, 10, 10])  # keep="longest": document 1 survives
    covered = {(0, 1), (2, 1)}  # 1 covers its neighbours, not 3 (linked only through 2)

    def covers(docs: np.ndarray, keepers: np.ndarray) -> np.ndarray:
        return np.array([(int(d), int(k)) in covered for d, k in zip(docs, keepers)])

    cfg = SelectConfig(keep="longest")
    new_roots, kept, reclustered = refine_by_cover(roots, a, b, score, kind, lengths, np.zeros(4), cfg, None, covers)
    assert reclustered == 1 and new_roots.tolist() == [0, 0, 0, 3]
    assert kept.tolist() == [True, True, False]
    sel = select_survivors(new_roots, a[kept], b[kept], score[kept], kind[kept], lengths, np.zeros(4), cfg)
    assert sel.keeper.tolist() == [1, 1, 1, 3]  # 3 stays: nothing that covers it was kept


def test_uncovered_members_form_clusters_of_their_own_edges() -> None:
    roots, a, b, score, kind = _chain(5)
    lengths = np.array([50, 10, 10, 40, 10])  # survivor 0 covers only 1; 2-3-4 re-cluster, 3 survives there
    covered = {(1, 0), (2, 3), (4, 3)}

    def covers(docs: np.ndarray, keepers: np.ndarray) -> np.ndarray:
        return np.array([(int(d), int(k)) in covered for d, k in zip(docs, keepers)])

    cfg = SelectConfig(keep="longest")
    new_roots, kept, reclustered = refine_by_cover(roots, a, b, score, kind, lengths, np.zeros(5), cfg, None, covers)
    assert reclustered == 3 and new_roots.tolist() == [0, 0, 2, 2, 2]
    sel = select_survivors(new_roots, a[kept], b[kept], score[kept], kind[kept], lengths, np.zeros(5), cfg)
    assert sel.keeper.tolist() == [0, 0, 3, 3, 3]


def test_in_the_cascade_a_chain_of_edits_keeps_its_far_end() -> None:
    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(5000)]
    base = [str(vocab[j]) for j in rng.integers(0, 5000, 200)]
    # Each version replaces the next 15% of the words: neighbours are near duplicates (J ~ 0.7),
    # the two ends share nothing.
    versions = []
    words = list(base)
    for step in range(7):
        versions.append(" ".join(words))
        for j in range(step * 30, step * 30 + 30):
            words[j % 200] = str(vocab[int(rng.integers(0, 5000))])
    records = [{"id": f"v{i}", "text": t} for i, t in enumerate(versions)]
    # With the verifier on (issue 24.5): 200-word pages lie past what the model reads, so the
    # check never asks it about the far end; its hash rules decide.
    loose = {"minhash": {"threshold": 0.6}, "passages": {"enabled": False}, "sph": {"enabled": False}}
    chained = deduplicate(records, PipelineConfig.from_dict({**loose, "select": {"cover_check": False}}))
    covered = deduplicate(records, PipelineConfig.from_dict(loose))
    kept_chained = [r["id"] for r in chained.documents.to_pylist() if r["action"] == "keep"]
    kept_covered = [r["id"] for r in covered.documents.to_pylist() if r["action"] == "keep"]
    assert len(kept_chained) == 1  # one cluster: the chain removed the far end too
    assert len(kept_covered) > 1  # its survivor does not cover the far end: it stays
    select_row = next(s for s in covered.report["funnel"] if s["stage"] == "select")
    assert select_row["details"]["cover_check_reclustered"] >= 1
    # every removal is labelled by a real link (a member whose own edges led to split-off members
    # is labelled by what covered it), never by the "exact" default with no score
    for row in covered.documents.to_pylist():
        if row["action"] == "remove":
            assert row["decided_by"] == "lsh" and 0.0 < row["score"] <= 1.0, row


def test_an_exact_copy_of_a_covered_document_is_covered() -> None:
    """x is linked to the survivor y by an accepted pair; x's exact copy leaves with it (before,
    the copy stayed behind alone: covered by nothing but its twin, which had left)."""
    from semhash_llm.pipeline.cover import CoverCheck
    from semhash_llm.stages.base import Edges

    # Documents 0 (x), 1 (x's exact copy), 2 (y, the survivor), 3 (unrelated).
    edges = Edges(np.array([1, 0]), np.array([0, 2]), np.array([1.0, 0.9], np.float32), np.array([0, 6], np.uint8))
    covers = CoverCheck({}, edges, 4, PipelineConfig())
    evidence = covers.evidence
    assert covers(np.array([0, 1, 3]), np.array([2, 2, 2])).tolist() == [True, True, False]
    assert evidence[0 * 4 + 2] == evidence[1 * 4 + 2] == (6, pytest.approx(0.9))  # the pair that covers both
    assert 3 * 4 + 2 not in evidence


def test_weighted_containment_bound() -> None:
    from semhash_llm.stages.aw import weighted_containment

    # d (mass 1) inside k (mass 3): J = 1/3, containment 1; the bound lies below it and rises with slots.
    j = np.array([1 / 3, 1 / 3, 0.0, 1.0])
    low = weighted_containment(j, np.array([1.0, 1.0, 1.0, 0.0]), np.array([3.0, 3.0, 3.0, 1.0]), 128)
    high = weighted_containment(j[:1], np.array([1.0]), np.array([3.0]), 100_000)
    assert 0.7 < low[0] < 1.0 and abs(high[0] - 1.0) < 0.02
    assert low[2] == 0.0 and low[3] == 0.0  # nothing shared; a document without weight


def _chrome_chain() -> list[dict[str, str]]:
    """One article in three wrappers: ``light`` (4 chrome lines of its own), ``mid`` (16 lines) and
    ``heavy`` (mid's 16 lines and 30 more: the longest, the survivor), linked light-mid-heavy;
    ``other``: another article in mid's chrome."""
    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(20000)]

    def lines(k: int, words: int) -> str:
        return "\n".join(" ".join(vocab[j] for j in rng.integers(0, 20000, words)) for _ in range(k))

    article = lines(12, 25)
    light, mid, extra = lines(4, 9), lines(16, 9), lines(30, 9)
    other = lines(12, 25)
    return [{"id": "light", "text": light + "\n" + article}, {"id": "mid", "text": mid + "\n" + article},
            {"id": "heavy", "text": mid + "\n" + article + "\n" + extra}, {"id": "other", "text": mid + "\n" + other}]


def test_an_article_in_light_chrome_is_covered_by_its_copy_in_heavy_chrome() -> None:
    """Their Jaccard is low (heavy chrome dilutes it), but the survivor holds the light copy's
    weighted content: with ``cover_containment`` it goes; with the test off (1.0) it stays. The
    same chrome around another article is never covered."""
    records = _chrome_chain()
    # The template rule off: mid's chrome sits in three pages here (mid, heavy, other), which makes
    # them templated; the containment cover itself is what this test is about (the template rule
    # has its own tests in test_aw_line_df.py, and the check then reads what AW's re-check reads).
    base = {"passages": {"enabled": False}, "sph": {"enabled": False}, "aw": {"template_df": 0}}
    out = {}
    for cc in (1.0, 0.75):
        res = deduplicate(records, PipelineConfig.from_dict({**base, "select": {"cover_containment": cc}}))
        out[cc] = {r["id"]: (r["action"], r["duplicate_of"]) for r in res.documents.to_pylist()}
    assert out[1.0]["light"] == ("keep", None) and out[1.0]["mid"] == ("remove", "heavy")
    assert out[0.75]["light"] == ("remove", "heavy") and out[0.75]["mid"] == ("remove", "heavy")
    assert out[0.75]["other"] == ("keep", None) and out[0.75]["heavy"] == ("keep", None)


class _Spy:
    """A stand-in verifier for :class:`~semhash_llm.pipeline.cover.CoverCheck`: records what it is asked, accepts everything."""

    def __init__(self, counts: list[int], short_tokens: int = 64) -> None:
        from semhash_llm.verify.mgfn import MGFNConfig

        self.counts = np.asarray(counts)
        self.asked: list[tuple[int, int]] = []
        self.short_tokens = short_tokens
        self.model_ = type("M", (), {"config": MGFNConfig()})()

    def token_counts(self, docs: np.ndarray) -> np.ndarray:
        return self.counts[np.asarray(docs)]

    def is_short(self, docs: np.ndarray) -> np.ndarray:
        return self.token_counts(docs) < self.short_tokens

    def in_range(self, docs: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        from semhash_llm.stages.mgfn import VerifierStage

        return VerifierStage.in_range(self, docs, lengths)  # type: ignore[arg-type]

    def verify_pairs_scored(self, a: np.ndarray, b: np.ndarray, read_texts: object) -> tuple[np.ndarray, np.ndarray]:
        self.asked += list(zip(np.asarray(a).tolist(), np.asarray(b).tolist()))
        return np.ones(len(a), np.bool_), np.full(len(a), 0.9)


def _stages_with(verifier: object) -> dict[str, object]:
    from semhash_llm.stages import mgfn as verify_mod

    class Verifier(_Spy, verify_mod.VerifierStage):  # isinstance() holds; no model is loaded
        def __init__(self, inner: _Spy) -> None:
            self.__dict__.update(inner.__dict__)

    return {"mgfn": Verifier(verifier)}  # type: ignore[arg-type]


def test_the_cover_check_asks_the_verifier_only_within_its_length_range() -> None:
    """Issue 24.5: MGFN reads 1,024 characters and 256 tokens; a removal of long documents is
    never settled by its reading of their first kilobyte."""
    from semhash_llm.pipeline.cover import CoverCheck
    from semhash_llm.stages.base import Edges

    spy = _Spy([20, 30, 900, 1000])
    stages = _stages_with(spy)
    lengths = np.array([120, 150, 6000, 7000])
    covers = CoverCheck(stages, Edges.empty(), 4, PipelineConfig(), lambda d: ["x"] * len(d), lengths)
    got = covers(np.array([0, 2, 0]), np.array([1, 3, 3]))
    assert got.tolist() == [True, False, False]
    assert [tuple(sorted(p)) for p in stages["mgfn"].asked] == [(0, 1)]  # type: ignore[attr-defined]


def test_plain_minhash_below_the_lsh_bar_covers_nothing() -> None:
    """Issue 24.5: a MinHash estimate of 0.55 is below the lsh stage's bar (0.6): no cover, where
    the old check took anything at 0.5. At 0.7 it covers; a short document's pair is the
    verifier's to decide whatever its estimate."""
    from semhash_llm.pipeline.cover import CoverCheck
    from semhash_llm.stages.base import Edges
    from semhash_llm.stages.lsh import MinHashLSHStage

    class Sigs(MinHashLSHStage):
        def __init__(self, sigs: np.ndarray) -> None:
            self._sigs = sigs

        @property
        def num_signed(self) -> int:
            return int(self._sigs.shape[0])

        def signatures(self) -> tuple[np.ndarray, np.ndarray]:
            return self._sigs, np.arange(self._sigs.shape[0], dtype=np.int64)

    base = np.arange(100, dtype=np.uint32)
    sigs = np.stack([base, np.where(np.arange(100) < 55, base, base + 1000), np.where(np.arange(100) < 70, base, base + 1000)])
    cfg = PipelineConfig.from_dict({"minhash": {"threshold": 0.6}})
    # An SPH stage runs (min_jaccard 0.5) but its codes do not place the pair within its radius.
    covers = CoverCheck({"lsh": Sigs(sigs), "sph": object()}, Edges.empty(), 3, cfg)  # type: ignore[dict-item]
    evidence = covers.evidence
    assert covers(np.array([1, 2]), np.array([0, 0])).tolist() == [False, True]
    assert evidence[2 * 3 + 0][0] == 1  # LSH_EDGE_KIND
    spy = _Spy([10, 10, 10])  # all short: the hash estimate is not theirs to use
    stages = {"lsh": Sigs(sigs), **_stages_with(spy)}
    covers = CoverCheck(stages, Edges.empty(), 3, cfg, None, np.array([50, 50, 50]))
    assert covers(np.array([2]), np.array([0])).tolist() == [False]
