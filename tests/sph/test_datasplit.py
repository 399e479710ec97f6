"""The split of the shared source documents between SPH training and the development benchmark."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from semhash_llm.datasplit import (
    NLTK_CORPORA,
    TRAIN_FRACTIONS,
    WIKIPEDIA_FIXTURE,
    document_key,
    ngram_overlap,
    part,
    split_source,
    train_share,
    wiki_pages,
)

DATA = Path(os.environ.get("SEMHASH_LLM_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"))


def test_parts_are_disjoint_deterministic_and_near_their_fractions() -> None:
    for source, fraction in TRAIN_FRACTIONS.items():
        names = [f"doc-{i}.txt" for i in range(4000)]
        parts = [part(source, n) for n in names]
        assert parts == [part(source, n) for n in names]  # a pure function of the key
        assert set(parts) == {"train", "bench"}  # every document in exactly one part
        share = parts.count("train") / len(parts)
        assert share == pytest.approx(fraction, abs=0.03)
    # Pinned values: a change of the hash or the salt re-deals every document, which needs a retrain
    # of the shipped model and a rebuild of the benchmark.
    assert train_share(document_key("movie_reviews", "neg/cv000_29416.txt")) == pytest.approx(0.0963275783)
    assert train_share("wikipedia/Anarchism") == pytest.approx(0.3684537087)
    names = ["neg/cv000_29416.txt", "neg/cv001_19502.txt", "neg/cv002_17424.txt", "neg/cv005_29357.txt"]
    assert [part("movie_reviews", n) for n in names] == ["train", "bench", "bench", "train"]
    with pytest.raises(ValueError, match="'source' parameter"):
        part("abc", "rural.txt")


def test_split_source_recognises_the_shared_files(tmp_path: Path) -> None:
    assert split_source(tmp_path / "nltk" / "movie_reviews" / "neg" / "cv001_1.txt") == ("movie_reviews", "neg/cv001_1.txt")
    assert split_source(tmp_path / "inaugural" / "1789-Washington.txt") == ("inaugural", "1789-Washington.txt")
    assert split_source(tmp_path / "x" / WIKIPEDIA_FIXTURE) == ("wikipedia", None)
    assert split_source(tmp_path / "nltk" / "abc" / "rural.txt") is None
    assert split_source(tmp_path / "movie_reviews.txt") is None
    assert split_source(tmp_path / "state_union" / "notes.jsonl") is None


def test_wiki_pages_give_titles() -> None:
    raw = (
        "<mediawiki><page><title>A &amp; B</title><ns>0</ns><revision><text xml:space='preserve'>body a</text>"
        "</revision></page><page><title>Talk:X</title><ns>1</ns><text>talk</text></page></mediawiki>"
    )
    assert list(wiki_pages(raw)) == [("A & B", "0", "body a"), ("Talk:X", "1", "talk")]


def test_ngram_overlap_counts_mostly_copied_documents() -> None:
    ref = ["one two three four five six seven eight nine ten eleven twelve"]
    docs = [
        "one two three four five six seven eight nine ten",  # all its 8-grams in ref
        "alpha beta gamma delta epsilon zeta eta theta iota kappa",
    ]
    count, shares = ngram_overlap(docs, ref)
    assert count == 1 and shares[0] == 1.0 and shares[1] == 0.0


needs_data = pytest.mark.skipif(not (DATA / "nltk" / "movie_reviews").is_dir(), reason="needs ../shared/data")


@pytest.mark.slow
@needs_data
def test_real_benchmark_and_training_parts_are_disjoint() -> None:
    from semhash_llm.bench import sources as src
    from semhash_llm.sph.corpus import read_corpus_documents

    paths = [DATA / "gensim_lee_wiki" / WIKIPEDIA_FIXTURE, *(DATA / "nltk" / c for c in NLTK_CORPORA)]
    train = dict(read_corpus_documents(paths, part="train"))
    bench = dict(read_corpus_documents(paths, part="bench"))
    assert train and bench and not set(train) & set(bench)
    reviews = src.read_movie_reviews(DATA)  # the benchmark's reader: its part by default
    assert len(reviews) == sum(k.startswith("movie_reviews/") for k in bench)
    train_reviews = {" ".join(t.split()) for k, t in train.items() if k.startswith("movie_reviews/")}
    assert not train_reviews & {" ".join(t.split()) for t in reviews}
    addresses = {" ".join(t.split()) for t in src.read_addresses(DATA)}
    assert not addresses & {" ".join(t.split()) for k, t in train.items() if k.split("/")[0] in ("inaugural", "state_union")}
    assert len(src.read_wikipedia(DATA)) + len(src.read_wikipedia(DATA, part="train")) == len(src.read_wikipedia(DATA, None))
    # Enough left for the full benchmark's long pool (~2,000 documents of >= 2,000 characters drawn).
    long_bench = [t for t in reviews + src.read_wikipedia(DATA) + src.read_abc(DATA) + src.read_lee(DATA) if len(t) >= 2000]
    assert len(long_bench) >= 2100


@pytest.mark.slow
@needs_data
def test_small_benchmark_shares_no_documents_with_the_training_texts(tmp_path: Path) -> None:
    from semhash_llm.bench.generator import generate
    from semhash_llm.sph.corpus import read_corpus_documents

    bench = generate(DATA, "small", 0, tmp_path)
    texts = [str(r["text"]) for r in bench.records]
    paths = [DATA / "gensim_lee_wiki" / WIKIPEDIA_FIXTURE, *(DATA / "nltk" / c for c in NLTK_CORPORA)]
    train = [t for _, t in read_corpus_documents(paths, part="train")]
    count, shares = ngram_overlap(texts, train)
    assert count == 0 and max(shares) < 0.3  # 316 of 3,232 documents at >= 50% before the split
    assert ngram_overlap(texts, [t for _, t in read_corpus_documents(paths, part=None)])[0] > 300
