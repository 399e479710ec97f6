"""Issue 24 (1, 2): a cut passage keeps exactly one occurrence among the documents that are kept,
and a fragment is cut at its full extent."""

from __future__ import annotations

import random

import pytest
from helpers import WORDS

from semhash_llm import PipelineConfig, deduplicate


def _sentence(rng: random.Random, n: int = 14) -> str:
    words = [rng.choice(WORDS) + str(rng.randrange(100)) for _ in range(n)]
    return words[0].capitalize() + " " + " ".join(words[1:]) + "."


def _doc(rng: random.Random, sentences: int = 10) -> str:
    return " ".join(_sentence(rng) for _ in range(sentences))


def _kept(records: list[dict], **config: object) -> dict[str, str]:
    result = deduplicate(records, PipelineConfig.from_dict(dict(config)))
    return {r["id"]: r["text"] for r in result.selected}


def _count(kept: dict[str, str], passage: str) -> int:
    return sum(text.count(passage) for text in kept.values())


@pytest.mark.parametrize("fragment_keep", ["first", "longest"])
def test_a_fragment_whose_host_is_removed_survives_in_another_host(fragment_keep: str) -> None:
    """Host H (first in the input) is a near copy of a longer S that lacks fragment F; F sits in
    five other documents too. H leaves for S; F must stay in exactly one kept text."""
    rng = random.Random(11)
    body = [_sentence(rng, 16) for _ in range(40)]
    fragment = " ".join(_sentence(rng, 16) for _ in range(2))
    s_text = " ".join(body)
    h_text = " ".join(body[:36] + [fragment])  # shorter than S, ~90% of its shingles
    others = [" ".join([_doc(rng, 6 + i), fragment, _doc(rng, 6)]) for i in range(5)]
    records = [{"id": "H", "text": h_text}, {"id": "S", "text": s_text}]
    records += [{"id": f"o{i}", "text": t} for i, t in enumerate(others)]
    records += [{"id": f"bg{i}", "text": _doc(rng)} for i in range(10)]
    result = deduplicate(records, PipelineConfig.from_dict({"passages": {"fragment_keep": fragment_keep}}))
    rows = {r["id"]: r for r in result.documents.to_pylist()}
    assert rows["H"]["action"] == "remove" and rows["H"]["duplicate_of"] == "S"
    kept = {r["id"]: r["text"] for r in result.selected}
    assert _count(kept, fragment) == 1, {i: t.count(fragment) for i, t in kept.items()}
    if fragment_keep == "longest":  # the longest *kept* host keeps it
        assert fragment in kept["o4"]


def test_every_cut_passage_keeps_one_occurrence_in_the_kept_output() -> None:
    """Property: over random corpora of hosts, near copies and excerpts, every span cut from a kept
    document still reads, verbatim, in at least one kept text."""
    for seed in range(6):
        rng = random.Random(100 + seed)
        fragments = [" ".join(_sentence(rng, 15) for _ in range(rng.randrange(1, 4))) for _ in range(3)]
        records: list[dict] = []
        for i in range(24):
            parts = [_doc(rng, rng.randrange(3, 9))]
            for f in fragments:
                if rng.random() < 0.45:
                    parts.append(f)
                    parts.append(_doc(rng, rng.randrange(1, 4)))
            records.append({"id": f"d{i}", "text": " ".join(parts)})
        for i in range(8):  # near copies (some longer, some shorter) of random hosts
            src = records[rng.randrange(24)]["text"].split(". ")
            cut = rng.randrange(1, 3)
            text = ". ".join(src[:-cut] if rng.random() < 0.5 else src + [_sentence(rng)[:-1]])
            records.insert(rng.randrange(len(records) + 1), {"id": f"n{i}", "text": text})
        result = deduplicate(records, PipelineConfig())
        by_id = {r["id"]: r for r in records}
        kept = {r["id"]: r["text"] for r in result.selected}
        for row in result.documents.to_pylist():
            if row["action"] != "keep":
                continue
            for start, end in row["fragments"]:
                span = by_id[row["id"]]["text"][start:end].strip()
                assert span and any(span in t for t in kept.values()), (seed, row["id"], span[:80])


def test_a_short_neighbour_sentence_is_cut_with_its_fragment() -> None:
    """A two-sentence fragment whose second sentence is shorter than a passage is cut whole: no
    dangling half-sentence stays in the hosts."""
    rng = random.Random(12)
    fragment = _sentence(rng, 18) + " " + _sentence(rng, 4)  # the second one: 4 words, under min_words
    hosts = [{"id": f"h{i}", "text": " ".join([_doc(rng, 6), fragment, _doc(rng, 6)])} for i in range(7)]
    kept = _kept(hosts)
    assert len(kept) == 7
    tail = fragment.split(". ")[1]
    assert _count(kept, fragment) == 1
    assert sum(t.count(tail) for t in kept.values()) == 1, [t.count(tail) for t in kept.values()]


def test_a_long_single_sentence_in_five_unrelated_documents_is_a_fragment() -> None:
    rng = random.Random(13)
    sentence = _sentence(rng, 30)
    assert len(sentence) >= 150
    hosts = [{"id": f"h{i}", "text": " ".join([_doc(rng, 5), sentence, _doc(rng, 5)])} for i in range(6)]
    kept = _kept(hosts)
    assert len(kept) == 6 and _count(kept, sentence) == 1


def test_a_one_sentence_quote_in_a_reply_stays() -> None:
    rng = random.Random(14)
    source = _doc(rng, 12)
    quote = source.split(". ")[5] + "."
    reply = " ".join([_doc(rng, 4), quote, _doc(rng, 4)])
    kept = _kept([{"id": "source", "text": source}, {"id": "reply", "text": reply}])
    assert kept == {"source": source, "reply": reply}
