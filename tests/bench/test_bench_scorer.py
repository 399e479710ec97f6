"""The scorer implements BENCHMARK.md §2; its self-test: oracle 100, keep-all 0 recall, remove-all 0."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from semhash_llm.bench.scorer import (
    DecisionsError,
    decisions_table,
    keep_all_decisions,
    oracle_decisions,
    remove_all_decisions,
    score,
)
from semhash_llm.bench.truth import (
    Containment,
    DocInfo,
    Fragment,
    GroundTruth,
    Group,
    NegativeSet,
    Occurrence,
)


def _truth() -> GroundTruth:
    docs: dict[str, DocInfo] = {}

    def d(i: str, role: str, source: str = "x", length: int = 100) -> str:
        docs[i] = DocInfo(role, source, length)  # type: ignore[arg-type]
        return i

    groups = [
        Group("A-0", "A", (d("a1", "group_member"), d("a2", "group_member"), d("a3", "group_member"))),
        Group("B-0", "B", tuple(d(f"b{i}", "group_member") for i in range(5))),
        Group("C-0", "C", (d("c1", "group_member"), d("c2", "group_member"))),
    ]
    conts = [Containment(d("child", "d_child", length=40), d("parent", "d_parent"), "excerpt", (10, 50))]
    frag = Fragment("E-0", "p" * 20, tuple(Occurrence(d(f"h{i}", "e_host"), 30, 50) for i in range(4)))
    negs = [NegativeSet("paws_non_paraphrase", (d("n1", "negative", "paws_dev"), d("n2", "negative", "paws_dev")))]
    sem = [(d("s1", "semantic", "paws_dev"), d("s2", "semantic", "paws_dev"))]
    for i in range(6):
        d(f"bg{i}", "background")
    t = GroundTruth(0, "tiny", "0" * 64, docs, groups, conts, [frag], negs, sem)
    t.check()
    return t


def test_oracle_scores_100_with_fdr_0() -> None:
    t = _truth()
    r = score(oracle_decisions(t), t)
    assert r.composite == pytest.approx(100.0)
    assert r.fdr == 0.0
    assert (r.s_a, r.s_b, r.s_c, r.s_d, r.s_e) == (1.0, 1.0, 1.0, 1.0, 1.0)
    assert r.semantic_precision == 1.0 and r.semantic_recall == 1.0


def test_keep_everything_has_zero_recall_and_zero_fdr() -> None:
    t = _truth()
    r = score(keep_all_decisions(t), t)
    assert (r.s_a, r.s_b, r.s_c, r.s_d, r.s_e) == (0.0, 0.0, 0.0, 0.0, 0.0)
    assert r.fdr == 0.0 and r.composite == 0.0
    assert r.semantic_precision is None and r.semantic_recall == 0.0


def test_remove_everything_is_forced_to_zero() -> None:
    t = _truth()
    r = score(remove_all_decisions(t), t)
    assert r.s_a == 1.0  # every needed removal was made ...
    assert r.fdr > 0.10  # ... but so was every must-keep one
    assert r.composite == 0.0


def test_removing_all_copies_counts_one_false_deletion() -> None:
    t = _truth()
    ids = list(t.documents)
    r = score(decisions_table(ids, {"c1": None, "c2": None}), t)
    assert r.s_c == 1.0
    assert r.false_deletions == 1
    assert r.fdr_by_family["role:group_representative"] == pytest.approx(1 / 3)


def test_containment_needs_parent_kept() -> None:
    t = _truth()
    ids = list(t.documents)
    assert score(decisions_table(ids, {"child": "parent"}), t).s_d == 1.0
    r = score(decisions_table(ids, {"child": "parent", "parent": None}), t)
    assert r.s_d == 0.0 and r.false_deletions == 1


def test_fragment_needs_80_percent_overlap_and_kept_host() -> None:
    t = _truth()
    ids = list(t.documents)
    # h0..h3 host the fragment at [30, 50): 3 redundant occurrences.
    frags = {"h1": [(30, 46)], "h2": [(30, 45)], "h3": [(28, 40), (40, 52)]}  # IoU 0.8 ok, 0.75 not, merged ok
    r = score(decisions_table(ids, {}, fragments=frags), t)
    assert r.s_e == pytest.approx(2 / 3)
    whole = {h: [(0, 100)] for h in ("h1", "h2", "h3")}  # cutting whole hosts is not removing the passage
    assert score(decisions_table(ids, {}, fragments=whole), t).s_e == 0.0
    r = score(decisions_table(ids, {"h1": None}, fragments=frags), t)  # a removed host does not count
    assert r.s_e == pytest.approx(1 / 3)
    assert r.fdr_by_family["role:e_host"] == pytest.approx(1 / 4)


def test_semantic_pairs_precision_recall_from_clusters() -> None:
    t = _truth()
    ids = list(t.documents)
    tab = decisions_table(ids, {"s2": "s1", "n2": "n1"}, cluster_of={"s1": "x", "s2": "x", "n1": "y", "n2": "y"})
    r = score(tab, t)
    assert r.semantic_recall == 1.0 and r.semantic_precision == 0.5
    assert r.fdr_by_family["paws_non_paraphrase"] == 0.5


def test_fdr_over_ten_percent_zeroes_composite() -> None:
    t = _truth()
    ids = list(t.documents)
    removed = {f"bg{i}": None for i in range(3)} | {"a2": None, "a3": None}
    r = score(decisions_table(ids, removed), t)
    assert r.s_a == 1.0 and r.fdr > 0.10 and r.composite == 0.0


def test_reads_parquet_and_checks_the_contract(tmp_path: Path) -> None:
    t = _truth()
    path = tmp_path / "documents.parquet"
    pq.write_table(oracle_decisions(t), path)
    assert score(path, t).composite == pytest.approx(100.0)

    ids = list(t.documents)
    with pytest.raises(DecisionsError, match="no row"):
        score(decisions_table(ids[:-1], {}), t)
    with pytest.raises(DecisionsError, match="appears twice"):
        score(decisions_table(ids + ids[:1], {}), t)
    with pytest.raises(DecisionsError, match="not a document"):
        score(decisions_table(ids + ["nope"], {}), t)
    bad = decisions_table(ids, {}, fragments={"h1": [(90, 120)]})
    with pytest.raises(DecisionsError, match="fragments"):
        score(bad, t)
    with pytest.raises(DecisionsError, match="missing contract columns"):
        score(oracle_decisions(t).drop(["fragments"]), t)
    tab = keep_all_decisions(t)
    import pyarrow as pa

    tab = tab.set_column(1, "action", pa.array(["drop"] * tab.num_rows))
    with pytest.raises(DecisionsError, match="'keep' or 'remove'"):
        score(tab, t)
