from __future__ import annotations

import bz2
import json
from pathlib import Path

import numpy as np
import pytest

from semhash_llm.datasplit import part
from semhash_llm.sph.augment import near_duplicate
from semhash_llm.sph.corpus import load_split_texts, passages, read_corpus_documents, read_documents, snippet


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


def _sentences(rng: np.random.Generator, n_words: int, vocab: int = 500) -> str:
    words = [f"word{int(x)}" for x in rng.integers(0, vocab, n_words)]
    return ". ".join(" ".join(words[j : j + 9]) for j in range(0, n_words, 9)) + "."


def test_load_split_texts_is_deterministic(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    for i in range(5):
        (tmp_path / f"d{i}.txt").write_text(_sentences(rng, 400), encoding="utf-8")
    a = load_split_texts([tmp_path], max_texts=20, heldout_fraction=0.2, seed=1)
    b = load_split_texts([tmp_path], max_texts=20, heldout_fraction=0.2, seed=1)
    assert a.train == b.train and a.heldout == b.heldout
    assert len(a.train) + len(a.heldout) <= 20 and a.heldout
    everything = a.train + a.heldout
    assert len(set(everything)) == len(everything)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_split_texts([tmp_path / "missing"], max_texts=5)
    with pytest.raises(ValueError, match="at least 2 documents"):
        load_split_texts([tmp_path / "d0.txt"], max_texts=5)


def _jsonl_corpus(path: Path, n_docs: int, seed: int = 0) -> list[str]:
    """Documents of several paragraphs, some sharing a boilerplate paragraph and sentence."""
    rng = np.random.default_rng(seed)
    boiler = "Thank you all. God bless you and God bless the United States of America tonight and always."
    docs = []
    for i in range(n_docs):
        paras = [_sentences(rng, int(rng.integers(60, 260)), vocab=3000) for _ in range(int(rng.integers(1, 5)))]
        if i % 3 == 0:
            paras.append(boiler)
        docs.append("\n\n".join(paras))
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    return docs


def test_heldout_texts_come_from_heldout_documents_only(tmp_path: Path) -> None:
    docs = _jsonl_corpus(tmp_path / "c.jsonl", 120)
    texts = load_split_texts([tmp_path / "c.jsonl"], max_texts=600, heldout_fraction=0.2, seed=0)
    assert len(texts.heldout) >= 20 and len(texts.train) >= 100
    assert texts.stats["heldout_documents"] == pytest.approx(24, abs=12)
    # No held-out text occurs verbatim inside a training text (the old passage-level split leaked snippets).
    haystack = "\n".join(texts.train)
    assert not [t for t in texts.heldout if t in haystack]
    # Every text lies inside exactly one side's documents: no document feeds both sides.
    norm = [" ".join(d.split()) for d in docs]
    def owners(t: str) -> set[int]:
        return {i for i, d in enumerate(norm) if t in d}
    train_docs = set().union(*(owners(t) for t in texts.train))
    heldout_docs = set().union(*(owners(t) for t in texts.heldout))
    boiler_docs = {i for i, d in enumerate(docs) if "God bless" in d}
    assert not (train_docs & heldout_docs) - boiler_docs
    assert all(owners(t) for t in texts.train + texts.heldout)


def _fake_nltk(root: Path, n: int = 40) -> None:
    rng = np.random.default_rng(3)
    for pol in ("neg", "pos"):
        (root / "nltk" / "movie_reviews" / pol).mkdir(parents=True)
        for i in range(n):
            (root / "nltk" / "movie_reviews" / pol / f"cv{i:03d}_{pol}.txt").write_text(_sentences(rng, 120), encoding="utf-8")
    (root / "own").mkdir()
    (root / "own" / "mine.txt").write_text(_sentences(rng, 120), encoding="utf-8")


def test_benchmark_documents_are_not_read_for_training(tmp_path: Path) -> None:
    _fake_nltk(tmp_path)
    paths = [tmp_path / "nltk" / "movie_reviews", tmp_path / "own"]
    train = dict(read_corpus_documents(paths))
    everything = dict(read_corpus_documents(paths, part=None))
    bench = dict(read_corpus_documents(paths, part="bench"))
    reviews = {k for k in everything if k.startswith("movie_reviews/")}
    assert len(reviews) == 80 and "mine.txt#0" in train and "mine.txt#0" in bench  # other files are read whole
    assert {k for k in train if k.startswith("movie_reviews/")} == {k for k in reviews if part("movie_reviews", k.split("/", 1)[1]) == "train"}
    assert not (set(train) & set(bench)) - {"mine.txt#0"}
    assert set(train) | set(bench) == set(everything)
    assert 5 <= len(set(train) - {"mine.txt#0"}) <= 40  # about a quarter of 80
    texts = load_split_texts(paths, max_texts=400, heldout_fraction=0.2, seed=0)
    bench_text = "\n".join(" ".join(t.split()) for k, t in bench.items() if k != "mine.txt#0")
    assert not [t for t in texts.train + texts.heldout if t in bench_text]


def test_near_duplicate_changes_little() -> None:
    text = " ".join(f"token{i}" for i in range(100))
    view = near_duplicate(text, np.random.default_rng(0))
    assert view != text
    shared = len(set(view.split()) & set(text.split()))
    assert shared > 75
