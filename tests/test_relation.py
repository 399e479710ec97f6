"""Issue 24.10: the relation says what happened — an excerpt held by its survivor says
``contained_in`` even when LSH (or another linking stage) linked it first."""

from __future__ import annotations

import random

from helpers import WORDS

from semhash_llm import PipelineConfig, deduplicate


def _sentence(rng: random.Random, n: int = 14) -> str:
    words = [rng.choice(WORDS) + str(rng.randrange(100)) for _ in range(n)]
    return words[0].capitalize() + " " + " ".join(words[1:]) + "."


def test_an_excerpt_lsh_links_first_says_contained_in() -> None:
    rng = random.Random(21)
    parent = [_sentence(rng) for _ in range(30)]
    records = [{"id": "parent", "text": " ".join(parent)}]
    # 70% of the parent: LSH's Jaccard (~0.7) passes its bar before the passage stage runs.
    records.append({"id": "excerpt", "text": " ".join(parent[:21])})
    # A near copy of about the same length (two sentences changed): near_duplicate, not contained.
    edited = list(parent)
    edited[5], edited[17] = _sentence(rng), _sentence(rng)
    records.append({"id": "edited", "text": " ".join(edited)})
    records += [{"id": f"bg{i}", "text": " ".join(_sentence(rng) for _ in range(12))} for i in range(8)]
    res = deduplicate(records, PipelineConfig())
    rows = {r["id"]: r for r in res.documents.to_pylist()}
    ex = rows["excerpt"]
    assert ex["action"] == "remove" and ex["relation"] == "contained_in", ex
    assert ex["decided_by"] in ("lsh", "aw", "sph", "verifier", "passages")
    assert rows["edited"]["relation"] == "near_duplicate"
    assert res.report["summary"]["contained_removed"] >= 1


def test_held_by_survivor_needs_both_shorter_and_held() -> None:
    """Unit: only a removed, linked (not exact, not already contained) document shorter than 0.8 of
    its survivor whose shingles the survivor holds (>= passages.short_containment) is marked."""
    import numpy as np

    from semhash_llm.pipeline.fragments import held_by_survivor
    from semhash_llm.pipeline.select import Selection

    rng = random.Random(22)
    parent = [_sentence(rng) for _ in range(30)]
    texts = [" ".join(parent),                                      # 0: the survivor
             " ".join(parent[:20]),                                 # 1: held, shorter: contained
             " ".join(parent[:14] + [_sentence(rng) for _ in range(8)]),  # 2: shorter, a third its own
             " ".join(parent[:28]),                                 # 3: held but not clearly shorter
             " ".join(parent[:20])]                                 # 4: held, shorter, but an exact copy
    lengths = np.array([len(t) for t in texts])
    sel = Selection(np.zeros(5, np.int64), np.full(5, 5), np.array([-1, 1, 1, 5, 0]),
                    np.array([np.nan, 0.7, 0.6, 0.9, 1.0]))
    got = held_by_survivor(sel, lengths, PipelineConfig(), lambda d: [texts[i] for i in d])
    assert got.tolist() == [False, True, False, False, False]
    assert not held_by_survivor(sel, lengths, PipelineConfig(), None).any()  # nothing to re-read: unchanged
