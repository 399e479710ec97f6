"""The passage stage end to end: containment (type D) and viral fragments (type E)."""

from __future__ import annotations

import random

import pytest
from helpers import WORDS

from semhash_llm import PipelineConfig, deduplicate
from semhash_llm.text.spans import remove_spans


def _sentence(rng: random.Random, n: int = 14) -> str:
    words = [rng.choice(WORDS) + str(rng.randrange(100)) for _ in range(n)]
    return words[0].capitalize() + " " + " ".join(words[1:]) + "."


def _doc(rng: random.Random, sentences: int = 10) -> str:
    return " ".join(_sentence(rng) for _ in range(sentences))


def _run(records: list[dict], verifier: bool = True, **select: str) -> dict[str, dict]:
    cfg = PipelineConfig.from_dict({"verifier": {"enabled": verifier}, **({"select": dict(select)} if select else {})})
    result = deduplicate(records, cfg)
    rows = result.documents.to_pylist()
    assert len(rows) == len(records) and len({r["id"] for r in rows}) == len(records)  # every id once
    by_id = {r["id"]: r for r in rows}
    kept = {r["id"]: r["text"] for r in result.selected}
    for r in records:  # the input minus its reported spans is exactly the kept text
        if r["id"] in kept:
            assert remove_spans(r["text"], [tuple(s) for s in by_id[r["id"]]["fragments"]]) == kept[r["id"]]
    return by_id


def _edit(rng: random.Random, sentence: str) -> str:
    words = sentence.split()
    words[rng.randrange(1, len(words) - 1)] = "changed" + str(rng.randrange(1000))
    return " ".join(words)


@pytest.mark.parametrize("keep", ["first", "longest"])
def test_an_edited_excerpt_is_removed_and_its_parent_kept(keep: str) -> None:
    rng = random.Random(1)
    parent = [_sentence(rng) for _ in range(16)]
    # The excerpt comes FIRST in the input and has a few words changed and a sentence dropped.
    excerpt = " ".join(_edit(rng, s) if i % 3 == 0 else s for i, s in enumerate(parent[3:11]) if i != 4)
    records = [{"id": "child", "text": excerpt}, {"id": "parent", "text": " ".join(parent)}]
    records += [{"id": f"bg{i}", "text": _doc(rng)} for i in range(20)]
    rows = _run(records, keep=keep)
    assert rows["child"]["action"] == "remove"
    assert (rows["child"]["relation"], rows["child"]["decided_by"], rows["child"]["duplicate_of"]) == (
        "contained_in", "passages", "parent")
    assert rows["parent"]["action"] == "keep"
    assert all(rows[f"bg{i}"]["action"] == "keep" for i in range(20))


def test_a_quote_of_one_or_two_sentences_removes_nothing() -> None:
    rng = random.Random(2)
    source = _doc(rng, 12)
    quote = source.split(". ")[3] + ". " + source.split(". ")[4] + "."
    quoting = " ".join([_doc(rng, 5), quote, _doc(rng, 5)])
    rows = _run([{"id": "source", "text": source}, {"id": "quoting", "text": quoting}])
    assert rows["source"]["action"] == rows["quoting"]["action"] == "keep"
    assert rows["source"]["fragments"] == rows["quoting"]["fragments"] == []


def test_a_planted_fragment_is_cut_from_all_hosts_but_one() -> None:
    rng = random.Random(3)
    fragment = " ".join(_sentence(rng, 16) for _ in range(2))
    hosts = []
    for i in range(8):
        text = " ".join([_doc(rng, 6), fragment, _doc(rng, 6)])
        hosts.append({"id": f"h{i}", "text": text})
    rows = _run(hosts)
    assert all(r["action"] == "keep" for r in rows.values())  # hosts stay
    cut = [h["id"] for h in hosts if rows[h["id"]]["fragments"]]
    assert len(cut) == 7  # k - 1 of the k hosts
    summary = deduplicate(hosts).report["summary"]
    assert (summary["fragment_spans_cut"], summary["documents_cut"], summary["removed"]) == (7, 7, 0)
    for h in hosts:
        if h["id"] in cut:
            start = h["text"].index(fragment)
            assert rows[h["id"]]["fragments"] == [[start, start + len(fragment)]]


def test_fragments_need_k_documents_and_the_gutting_cap_holds() -> None:
    rng = random.Random(4)
    fragment = _sentence(rng, 16)
    few = [{"id": f"f{i}", "text": " ".join([_doc(rng, 6), fragment, _doc(rng, 6)])} for i in range(3)]
    assert all(r["fragments"] == [] for r in _run(few).values())  # 3 < fragment_min_docs (5)
    # Short hosts that are mostly the fragment: cutting would take more than half: left whole.
    short = [{"id": f"s{i}", "text": fragment + " " + _sentence(rng, 8)} for i in range(6)]
    # Without the verifier: on these pseudo-word texts the shipped verifier accepts one of the 15
    # pairs (p = 0.65 over its threshold 0.55; a shortfall noted in the README); the cap is what
    # is tested here.
    rows = _run(short, verifier=False)
    assert all(r["fragments"] == [] and r["action"] == "keep" for r in rows.values())


def test_passages_can_be_turned_off() -> None:
    rng = random.Random(5)
    parent = [_sentence(rng) for _ in range(12)]
    records = [{"id": "child", "text": " ".join(parent[2:8])}, {"id": "parent", "text": " ".join(parent)}]
    assert _run(records)["child"]["action"] == "remove"
    off = deduplicate(records, PipelineConfig.from_dict({"passages": {"enabled": False}}))
    assert [r["action"] for r in off.documents.to_pylist()] == ["keep", "keep"]


def test_the_parent_stays_under_keep_priority_even_when_the_child_ranks_higher() -> None:
    rng = random.Random(6)
    parent = [_sentence(rng) for _ in range(14)]
    records = [{"id": "child", "text": " ".join(parent[4:10]), "score": 9.0},
               {"id": "parent", "text": " ".join(parent), "score": 1.0}]
    records += [{"id": f"bg{i}", "text": _doc(rng), "score": 0.0} for i in range(5)]
    cfg = PipelineConfig.from_dict({"select": {"keep": "priority", "priority_field": "score"}})
    rows = {r["id"]: r for r in deduplicate(records, cfg).documents.to_pylist()}
    assert rows["child"]["action"] == "remove" and rows["child"]["duplicate_of"] == "parent"
    assert rows["parent"]["action"] == "keep"


def test_short_children_are_decided_on_their_shingles() -> None:
    rng = random.Random(7)
    page = [_sentence(rng, 16) for _ in range(10)]
    sentence = page[4]
    words = sentence.rstrip(".").split()
    lookalike = " ".join(words[:5] + ["other1", "other2"] + words[7:]) + "."  # two words replaced
    swapped = " ".join(words[:3] + words[9:12] + words[6:9] + words[3:6] + words[12:]) + "."  # PAWS-like swap
    records = [{"id": "page", "text": " ".join(page)}, {"id": "copy", "text": sentence},
               {"id": "lookalike", "text": lookalike}, {"id": "swapped", "text": swapped}]
    rows = _run(records)
    assert (rows["copy"]["action"], rows["copy"]["relation"], rows["copy"]["duplicate_of"]) == (
        "remove", "contained_in", "page")
    assert rows["lookalike"]["action"] == rows["swapped"]["action"] == rows["page"]["action"] == "keep"


def _menu(rng: random.Random, lines: int) -> str:
    return "\n".join(rng.choice(WORDS).capitalize() for _ in range(lines))


def test_a_page_of_its_own_in_a_shared_template_is_not_contained() -> None:
    rng = random.Random(8)
    header, footer = _menu(rng, 160), _menu(rng, 160)
    long_article = "\n".join(_sentence(rng) for _ in range(12))
    short_article = "\n".join(_sentence(rng) for _ in range(5))  # ~1/6 of the small page's passages
    big = {"id": "big", "text": "\n".join([header, long_article, footer])}
    small = {"id": "small", "text": "\n".join([header, short_article, footer])}  # same template, own article
    rows = _run([big, small])
    assert rows["small"]["action"] == rows["big"]["action"] == "keep"
    # Without the rule, and with every passage counting one vote (unweighted: the line cue alone
    # already gives the menus ~0 weight), the template (> 75% of the small page's passages) would remove it.
    off = deduplicate([big, small], PipelineConfig.from_dict({"passages": {"max_novel_share": 1.0,
                                                                           "weighted": False}}))
    assert off.documents.to_pylist()[1]["relation"] == "contained_in"
    # The same short page inside a bigger page that holds its article too is contained.
    holder = {"id": "holder", "text": "\n".join([header, short_article, long_article, footer])}
    rows = _run([big, small, holder])
    assert (rows["small"]["action"], rows["small"]["duplicate_of"]) == ("remove", "holder")
    assert rows["holder"]["action"] == "keep"


def test_fragment_keep_longest_leaves_the_fragment_in_the_longest_host() -> None:
    rng = random.Random(9)
    fragment = " ".join(_sentence(rng, 16) for _ in range(2))
    hosts = [{"id": f"h{i}", "text": " ".join([_doc(rng, 5 + i), fragment, _doc(rng, 5)])} for i in range(6)]
    cfg = PipelineConfig.from_dict({"passages": {"fragment_keep": "longest"}})
    rows = {r["id"]: r for r in deduplicate(hosts, cfg).documents.to_pylist()}
    assert [h["id"] for h in hosts if not rows[h["id"]]["fragments"]] == ["h5"]


def test_cjk_and_unpunctuated_excerpts_are_contained() -> None:
    rng = random.Random(10)
    parent = "".join(chr(0x4E00 + rng.randrange(3000)) for _ in range(2000))
    english = " ".join(" ".join(rng.choice(WORDS) + str(rng.randrange(100)) for _ in range(600)).split())
    records = [{"id": "parent", "text": parent}, {"id": "child", "text": parent[300:900]},
               {"id": "en_parent", "text": english}, {"id": "en_child", "text": english[1000:2500]}]
    cfg = PipelineConfig.from_dict({"minhash": {"enabled": False}, "sph": {"enabled": False}})
    rows = {r["id"]: r for r in deduplicate(records, cfg).documents.to_pylist()}
    for child, parent_id in (("child", "parent"), ("en_child", "en_parent")):  # no sentence boundaries: windows
        assert (rows[child]["action"], rows[child]["relation"], rows[child]["duplicate_of"]) == (
            "remove", "contained_in", parent_id)
        assert rows[parent_id]["action"] == "keep"


@pytest.mark.parametrize("keep", ["first", "longest"])
def test_contained_both_ways_is_a_near_duplicate_and_the_keep_policy_decides(keep: str) -> None:
    rng = random.Random(11)
    base = [_sentence(rng) for _ in range(12)]
    shorter = {"id": "shorter", "text": " ".join(base)}
    longer = {"id": "longer", "text": " ".join([*base[:6], _sentence(rng), *base[6:]])}  # one sentence added
    cfg = PipelineConfig.from_dict({"select": {"keep": keep}, "minhash": {"enabled": False}, "sph": {"enabled": False}})
    rows = {r["id"]: r for r in deduplicate([shorter, longer], cfg).documents.to_pylist()}
    removed = "longer" if keep == "first" else "shorter"
    assert (rows[removed]["action"], rows[removed]["relation"], rows[removed]["decided_by"]) == (
        "remove", "near_duplicate", "passages")


def test_an_excerpt_an_earlier_stage_linked_still_never_survives_its_parent() -> None:
    rng = random.Random(12)
    parent = [_sentence(rng) for _ in range(20)]
    records = [{"id": "child", "text": " ".join(parent[2:15])}, {"id": "parent", "text": " ".join(parent)}]
    # A low LSH threshold links the two as near duplicates before the passage stage runs.
    cfg = PipelineConfig.from_dict({"select": {"keep": "first"}, "minhash": {"threshold": 0.5},
                                    "sph": {"enabled": False}})
    rows = {r["id"]: r for r in deduplicate(records, cfg).documents.to_pylist()}
    assert (rows["child"]["action"], rows["child"]["decided_by"]) == ("remove", "lsh")
    assert rows["parent"]["action"] == "keep"
    passages = next(r for r in deduplicate(records, cfg).report["funnel"] if r["stage"] == "passages")
    assert passages["details"]["contained"] == 1 and passages["docs_removed"] == 0


def test_passages_follow_the_pipeline_normalization() -> None:
    rng = random.Random(13)
    parent = [_sentence(rng) for _ in range(14)]
    records = [{"id": "parent", "text": " ".join(parent)}, {"id": "shouting", "text": " ".join(parent[3:9]).upper()}]
    base = {"minhash": {"enabled": False}, "sph": {"enabled": False}}
    folded = {r["id"]: r for r in deduplicate(records, PipelineConfig.from_dict(base)).documents.to_pylist()}
    assert folded["shouting"]["relation"] == "contained_in"
    cased = deduplicate(records, PipelineConfig.from_dict({**base, "normalize": {"lowercase": False}}))
    assert [r["action"] for r in cased.documents.to_pylist()] == ["keep", "keep"]


def test_decisions_do_not_depend_on_batching_or_the_memory_budget() -> None:
    rng = random.Random(14)
    fragment = " ".join(_sentence(rng, 16) for _ in range(8))  # 8 passages in 30 hosts: ~35k pair records
    records = []
    for i in range(30):
        parent = [_sentence(rng) for _ in range(14)]
        records.append({"id": f"p{i}", "text": " ".join(parent)})
        records.append({"id": f"c{i}", "text": " ".join(parent[2:9])})
        records.append({"id": f"h{i}", "text": " ".join([_doc(rng, 6), fragment, _doc(rng, 6)])})
    rng.shuffle(records)

    def run(batch_size: int, budget_mb: int) -> list[dict]:
        cfg = PipelineConfig.from_dict({"reader": {"batch_size": batch_size},
                                        "passages": {"memory_budget_mb": budget_mb}})
        result = deduplicate(records, cfg)
        spilled = next(r for r in result.report["funnel"] if r["stage"] == "passages")["details"]["key_bytes_spilled"]
        return [result.documents.to_pylist(), spilled]

    base, spilled_base = run(1000, 256)
    small, spilled_small = run(7, 4)  # 7 documents a batch; the smallest budget (4 MiB) spills sorted runs
    assert spilled_base == 0 and spilled_small > 0
    assert small == base
    by_id = {r["id"]: r for r in base}
    assert all((by_id[f"c{i}"]["action"], by_id[f"c{i}"]["duplicate_of"]) == ("remove", f"p{i}") for i in range(30))
    # SPH (each document's nearest codes, confirmed at Jaccard >= 0.5) may link an excerpt first.
    assert {by_id[f"c{i}"]["relation"] for i in range(30)} <= {"contained_in", "near_duplicate"}
    assert sum(r["relation"] == "contained_in" for r in base) >= 15
    assert sum(bool(r["fragments"]) for r in base) == 29
