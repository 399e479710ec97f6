"""The scorer implements BENCHMARK.md §2; its self-test: oracle 100, keep-all 0 recall, remove-all 0."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from semhash_llm.bench.scorer import (
    DecisionsError,
    decisions_table,
    keep_all_decisions,
    label_pairs,
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


def _banded_truth() -> tuple[GroundTruth, dict[str, str]]:
    """One C group with a copy in each error band, and one two-document negative of each edit kind."""
    base = "The committee met on Tuesday and agreed to publish the annual report in the spring of next year."
    assert len(base) == 96
    texts = {
        "c0": base,
        "c1": base.replace("committee", "cornmittee"),                       # m → rn: 2/96 ≈ 2.1%
        "c2": base.replace("Tuesday", "Tuesdav").replace("report", "rep0rt"),  # 2 subs → 2.1%
        "c3": base[:50] + base[56:],                                          # 6 deleted → 6.2%
        "c4": base.replace("annual report in the spring of next year", "anual rep ort inthe sprng of nxt yeer"),  # 6 → 6.2%
        "c5": base.replace(".", ""),                                          # 1 deletion → 1.0%
    }
    pairs = {
        "reorder": ("Alice paid Bob the money he lent her last week.", "Bob paid Alice the money he lent her last week."),
        "negation": ("The bridge is open to traffic again this week.", "The bridge is not open to traffic again this week."),
        "number": ("The train leaves at 7 from platform two today.", "The train leaves at 9 from platform two today."),
        "name": ("The prize went to Marie at the ceremony in Paris.", "The prize went to Pierre at the ceremony in Paris."),
        "other words": ("The cat sat quietly on the warm kitchen floor.", "The dog sat quietly on the cold kitchen floor."),
    }
    docs: dict[str, DocInfo] = {i: DocInfo("group_member", "x", len(t)) for i, t in texts.items()}  # type: ignore[arg-type]
    negs = []
    for k, (a, b) in pairs.items():
        ia, ib = f"{k}-a", f"{k}-b"
        texts[ia], texts[ib] = a, b
        docs[ia] = docs[ib] = DocInfo("negative", "paws_dev", len(a))  # type: ignore[arg-type]
        negs.append(NegativeSet("paws_non_paraphrase", (ia, ib)))
    t = GroundTruth(0, "tiny", "0" * 64, docs, [Group("C-0", "C", tuple(f"c{i}" for i in range(6)))], [], [], negs, [])
    t.check()
    return t, texts


def test_edit_kind_names_what_changed_between_the_two_texts() -> None:
    from semhash_llm.bench.scorer import edit_kind

    _, texts = _banded_truth()
    for kind in ("reorder", "negation", "number", "name", "other words"):
        assert edit_kind(texts[f"{kind}-a"], texts[f"{kind}-b"]) == kind, kind
    assert edit_kind("The cat sat on the mat, today.", "The cat sat on the mat today") == "noise only"
    assert edit_kind("He went to the shop with her.", "He went into the shop for her.") == "function words"


def test_c_recall_is_split_by_the_copy_s_character_error_band() -> None:
    from semhash_llm.bench.scorer import ERROR_BANDS, error_band
    from semhash_llm.sketch.edit import char_error_rate

    t, texts = _banded_truth()
    got = {i: error_band(char_error_rate(texts["c0"], texts[i])) for i in ("c1", "c2", "c3", "c4", "c5")}
    assert got == {"c1": "2–5%", "c2": "2–5%", "c3": "5–10%", "c4": "5–10%", "c5": "< 2%"}
    ids = list(t.documents)
    # c1 and c5 found by duplicate_of, c3 only by sharing c0's cluster id, c2 and c4 missed.
    table = decisions_table(ids, {"c1": "c0", "c5": "c0", "c3": None}, cluster_of={"c0": "k", "c3": "k"})
    r = score(table, t, label_pairs(t, texts))
    assert list(r.c_by_error_band) == [label for label, _, _ in ERROR_BANDS]
    assert r.c_by_error_band == {"< 2%": [1, 1], "2–5%": [2, 1], "5–10%": [2, 1], "≥ 10%": [0, 0]}
    # Without the labels the bands are not computed.
    assert score(table, t).c_by_error_band == {}


def test_negatives_are_counted_by_edit_kind() -> None:
    t, texts = _banded_truth()
    ids = list(t.documents)
    r = score(decisions_table(ids, {"negation-b": "negation-a", "name-a": None, "name-b": "name-a"}), t, label_pairs(t, texts))
    nk = r.negatives_by_edit_kind
    assert nk["negation"] == [2, 1] and nk["name"] == [2, 2]
    assert nk["reorder"] == [2, 0] and nk["number"] == [2, 0] and nk["other words"] == [2, 0]
    assert nk["noise only"] == [0, 0]


def test_the_bench_markdown_prints_the_band_and_edit_kind_tables() -> None:
    from semhash_llm.bench.runner import BenchResult, BenchRow, format_markdown

    t, texts = _banded_truth()
    r = score(decisions_table(list(t.documents), {"c1": "c0", "negation-b": "negation-a"}), t, label_pairs(t, texts))
    md = format_markdown(BenchResult("tiny", 0, "first", "d", "o", len(t.documents), t.counts(), None,
                                     [BenchRow("sys", r, 1.0, 10.0, 1.0, "")]))
    assert "| system | < 2% | 2–5% | 5–10% | ≥ 10% |" in md
    assert "| sys | 0/1 (0.0%) | 1/2 (50.0%) | 0/2 (0.0%) | – |" in md
    assert "| sys | reorder | negation |" not in md  # header row names 'system'
    assert "| system | reorder | negation | number | name | other words |" in md
    assert "| sys | 0.00 | 50.00 | 0.00 | 0.00 | 0.00 |" in md
