"""Document frequencies in a count-min sketch, and the IDF with its word-frequency prior."""

from __future__ import annotations

import numpy as np
import pytest

from semhash_llm.sketch.docfreq import DocumentFrequency, WordFrequencyPrior, token_hashes_of_words


def _corpus(rng: np.random.Generator, docs: int, vocab: int, length: int) -> list[np.ndarray]:
    ranks = np.arange(1, vocab + 1, dtype=np.float64)
    p = 1 / ranks
    p /= p.sum()
    return [rng.choice(vocab, size=length, p=p).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(7)
            for _ in range(docs)]


def _csr(docs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.r_[0, np.cumsum([d.size for d in docs])].astype(np.int64)
    return offsets, np.concatenate(docs) if docs else np.empty(0, np.uint64)


def test_counts_are_never_below_the_truth_and_rarely_above() -> None:
    rng = np.random.default_rng(0)
    docs = _corpus(rng, 2000, 20_000, 80)
    exact: dict[int, int] = {}
    for d in docs:
        for h in set(d.tolist()):
            exact[h] = exact.get(h, 0) + 1
    sketch = DocumentFrequency(width_bits=14, depth=4)  # 16k counters a row for 15.7k tokens: collisions happen
    for lo in range(0, len(docs), 300):  # batches add up
        sketch.add(*_csr(docs[lo:lo + 300]))
    keys = np.fromiter(exact, dtype=np.uint64)
    truth = np.fromiter(exact.values(), dtype=np.int64)
    est = sketch.df(keys).astype(np.int64)
    assert sketch.num_docs == 2000
    assert np.all(est >= truth)
    assert 0.9 < np.mean(est == truth) < 1  # conservative update keeps most counts exact (measured 0.944)
    assert np.mean(est - truth) < 0.2
    wide = DocumentFrequency(width_bits=20)
    wide.add(*_csr(docs))
    assert np.array_equal(wide.df(keys).astype(np.int64), truth)


def test_a_document_counts_each_token_once() -> None:
    sketch = DocumentFrequency(width_bits=10)
    h = np.array([5, 5, 5, 9], dtype=np.uint64)
    sketch.add(np.array([0, 4]), h)
    sketch.add(np.array([0, 2]), h[:2])
    assert sketch.df(np.array([5, 9], dtype=np.uint64)).tolist() == [2, 1]


def test_idf_ranks_common_tokens_low_and_the_prior_decides_tiny_inputs() -> None:
    words = ["the", "and", "quantum", "xylophone"]
    h = token_hashes_of_words(words)
    assert np.all(h != 0) and h[0] == token_hashes_of_words(["The"])[0]  # the tokenizer's normalization
    prior = WordFrequencyPrior.from_words(["the", "and", "quantum"], [0.05, 0.03, 1e-5])
    # Two documents only, both containing "xylophone": without a prior it looks common.
    plain = DocumentFrequency(width_bits=12)
    plain.add(np.array([0, 1, 2]), np.array([h[3], h[3]], dtype=np.uint64))
    with_prior = DocumentFrequency(width_bits=12, prior=prior, prior_documents=1000)
    with_prior.add(np.array([0, 1, 2]), np.array([h[3], h[3]], dtype=np.uint64))
    idf_plain, idf_prior = plain.idf(h), with_prior.idf(h)
    assert idf_plain[3] < idf_plain[2]  # no prior: the corpus word is the common one
    assert idf_prior[0] <= idf_prior[1] < idf_prior[2]  # the prior knows "the" and "and" are common
    assert idf_prior[3] > idf_prior[0] + 2
    # A big corpus outweighs the prior: "quantum" in every document is common here.
    big = DocumentFrequency(width_bits=14, prior=prior, prior_documents=1000)
    n = 50_000
    big.add(np.arange(n + 1, dtype=np.int64), np.full(n, h[2], dtype=np.uint64))
    assert big.idf(h[2:3])[0] < 1.05


def test_from_wordfreq_when_installed() -> None:
    pytest.importorskip("wordfreq")
    prior = WordFrequencyPrior.from_wordfreq(top_n=2000)
    assert prior is not None and len(prior) > 1500
    f = prior.lookup(token_hashes_of_words(["the", "of", "zzyzzyx"]))
    assert f[0] > f[1] > 0 and f[2] == 0


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"width_bits": 4}, "width_bits"), ({"depth": 0}, "depth"), ({"depth": 9}, "depth"),
    ({"prior_documents": -1}, "prior_documents"),
])
def test_parameters_are_validated(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DocumentFrequency(**kwargs)


def test_bad_offsets_and_frequencies_are_refused() -> None:
    sketch = DocumentFrequency(width_bits=10)
    with pytest.raises(ValueError, match="tok_offsets"):
        sketch.add(np.array([0, 3]), np.array([1, 2], dtype=np.uint64))
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        WordFrequencyPrior(np.array([1], np.uint64), np.array([2.0]))
    assert sketch.nbytes == 4 * 1024 * 4
