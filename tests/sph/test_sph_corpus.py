from __future__ import annotations

import bz2
import json
from pathlib import Path

import numpy as np
import pytest

from semhash_llm.sph.augment import near_duplicate
from semhash_llm.sph.corpus import load_training_texts, passages, read_documents, snippet


def test_passages_respect_the_word_limits() -> None:
    doc = "\n\n".join(" ".join(f"w{p}_{i}" for i in range(n)) for p, n in enumerate([5, 30, 300, 12]))
    out = list(passages(doc, min_words=8, max_words=100))
    assert all(8 <= len(p.split()) <= 100 for p in out)
    assert sum(len(p.split()) for p in out) >= 330


def test_snippet_is_whole_sentences() -> None:
    text = "One two three four five. Six seven eight nine ten eleven. Twelve thirteen fourteen fifteen sixteen seventeen."
    s = snippet(text, np.random.default_rng(0), min_words=3, max_words=40)
    assert s is not None and s.endswith(".")


def test_readers(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(json.dumps({"text": "hello json world"}) + "\n\n", encoding="utf-8")
    (tmp_path / "b.tsv").write_text("1\tfirst sentence here\tsecond sentence there\t0\n", encoding="utf-8")
    wiki = (
        "<mediawiki><page><title>T</title><ns>0</ns><text>'''Bold''' [[link|shown]] text {{cite x}} here.</text></page>"
        "<page><ns>1</ns><text>talk page</text></page></mediawiki>"
    )
    (tmp_path / "w.xml.bz2").write_bytes(bz2.compress(wiki.encode()))
    assert list(read_documents(tmp_path / "a.jsonl")) == ["hello json world"]
    assert list(read_documents(tmp_path / "b.tsv")) == ["first sentence here", "second sentence there"]
    assert [" ".join(d.split()) for d in read_documents(tmp_path / "w.xml.bz2")] == ["Bold shown text here."]
    (tmp_path / "bad.jsonl").write_text("{not json\n", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.jsonl, line 1"):
        list(read_documents(tmp_path / "bad.jsonl"))


def test_load_training_texts_is_deterministic(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    for i in range(5):
        words = [f"word{int(x)}" for x in rng.integers(0, 500, 400)]
        text = ". ".join(" ".join(words[j : j + 9]) for j in range(0, 400, 9))
        (tmp_path / f"d{i}.txt").write_text(text, encoding="utf-8")
    a = load_training_texts([tmp_path], max_texts=20, seed=1)
    b = load_training_texts([tmp_path], max_texts=20, seed=1)
    assert a == b and len(a) <= 20 and len(set(a)) == len(a)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_training_texts([tmp_path / "missing"], max_texts=5)


def test_near_duplicate_changes_little() -> None:
    text = " ".join(f"token{i}" for i in range(100))
    view = near_duplicate(text, np.random.default_rng(0))
    assert view != text
    shared = len(set(view.split()) & set(text.split()))
    assert shared > 75
