"""The generator's ground truth is consistent and the output is deterministic by seed (fake data only)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_fakedata import make_fake_data

from semhash_llm.bench.generator import SizeSpec, generate
from semhash_llm.bench.scorer import oracle_decisions, score
from semhash_llm.bench.sources import DataError, read_paws_dev, read_readability_pages
from semhash_llm.bench.truth import GroundTruth, TruthError, read_corpus

TINY = SizeSpec(
    a_groups=4, b_hot_docs=2, b_top_count=8, c_groups=12, d_excerpts=6, d_quoted_replies=2, e_fragments=2,
    paws_negative_pairs=6, qqp_negative_pairs=6, stsb_negative_pairs=4, paws_paraphrase_pairs=5,
    background_long=10, background_medium=10, background_short=10,
)


@pytest.fixture(scope="module")
def fake_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_fake_data(tmp_path_factory.mktemp("data"))


def test_truth_is_consistent(fake_data: Path, tmp_path: Path) -> None:
    bench = generate(fake_data, "small", 3, tmp_path, spec=TINY)
    texts = {r["id"]: r["text"] for r in read_corpus(bench.corpus_path)}
    truth = GroundTruth.read(bench.truth_path)
    truth.check(texts)  # every id exists, groups disjoint, spans point at the planted text
    c = truth.counts()
    assert c["groups_A"] >= 1 and c["groups_B"] == 2 and c["groups_C"] == 12
    assert c["containments"] >= 6 and c["fragments"] == 2 and c["semantic_pairs"] == 5
    assert {n.family for n in truth.negatives} >= {"paws_non_paraphrase", "qqp_non_duplicate", "stsb_low_score",
                                                     "same_site_template"}
    members = [m for g in truth.groups for m in g.members]
    assert len(members) == len(set(members))
    for g in truth.groups:
        if g.category == "B":
            assert len(g.members) >= 5
        if g.category == "C":
            assert all(80 <= len(texts[m]) <= 330 for m in g.members)
    for f in truth.fragments:
        assert 5 <= len(f.occurrences) <= 20 and 150 <= len(f.text) <= 400
        for o in f.occurrences:
            assert texts[o.doc_id][o.start : o.end] == f.text
    for cont in truth.containments:
        if cont.span is not None:
            s, e = cont.span
            assert texts[cont.parent][s:e] == texts[cont.child]
            assert 0.25 <= len(texts[cont.child]) / len(texts[cont.parent]) <= 0.75
    assert score(oracle_decisions(truth), truth).composite == pytest.approx(100.0)


def test_same_seed_is_byte_identical(fake_data: Path, tmp_path: Path) -> None:
    a = generate(fake_data, "small", 5, tmp_path / "a", spec=TINY)
    b = generate(fake_data, "small", 5, tmp_path / "b", spec=TINY)
    c = generate(fake_data, "small", 6, tmp_path / "c", spec=TINY)
    assert a.corpus_path.read_bytes() == b.corpus_path.read_bytes()
    assert a.truth_path.read_bytes() == b.truth_path.read_bytes()
    assert a.corpus_path.read_bytes() != c.corpus_path.read_bytes()


def test_truth_check_catches_inconsistency(fake_data: Path, tmp_path: Path) -> None:
    bench = generate(fake_data, "small", 1, tmp_path, spec=TINY)
    obj = json.loads(bench.truth_path.read_text())
    obj["groups"][1]["members"].append(obj["groups"][0]["members"][0])  # groups no longer disjoint
    with pytest.raises(TruthError, match="in both"):
        GroundTruth.from_json_obj(obj).check()
    obj = json.loads(bench.truth_path.read_text())
    obj["fragments"][0]["occurrences"][0]["start"] += 1
    texts = {r["id"]: r["text"] for r in read_corpus(bench.corpus_path)}
    with pytest.raises(TruthError, match="not the passage"):
        GroundTruth.from_json_obj(obj).check(texts)


def test_missing_data_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=str(tmp_path / "absent")):
        generate(tmp_path / "absent", "small", 0, tmp_path / "out")


def test_malformed_source_line_names_file_and_line(fake_data: Path, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "d"
    shutil.copytree(fake_data / "paws_wiki", root / "paws_wiki")
    with (root / "paws_wiki" / "dev.tsv").open("a") as fh:
        fh.write("999\tonly two fields\n")
    with pytest.raises(DataError, match=r"dev\.tsv:121"):
        read_paws_dev(root)


def test_readability_chrome_excludes_the_article(fake_data: Path) -> None:
    pages = {p.name: p for p in read_readability_pages(fake_data)}
    p = pages["site0"]
    assert p.article_text and p.head_boilerplate and p.tail_boilerplate
    first_para = p.article_text.split("\n")[0]
    assert first_para not in p.head_boilerplate and first_para not in p.tail_boilerplate
    assert "var a=1" not in p.page_text


def test_benchmark_uses_only_its_part_of_the_sources_shared_with_sph_training(fake_data: Path, tmp_path: Path) -> None:
    from semhash_llm.bench.sources import read_addresses, read_movie_reviews, read_wikipedia
    from semhash_llm.datasplit import ngram_overlap

    bench = generate(fake_data, "small", 3, tmp_path, spec=TINY)
    texts = [str(r["text"]) for r in read_corpus(bench.corpus_path)]
    train_part = read_movie_reviews(fake_data, "train") + read_wikipedia(fake_data, "train") + read_addresses(fake_data, "train")
    bench_part = read_movie_reviews(fake_data) + read_wikipedia(fake_data) + read_addresses(fake_data)
    assert train_part and bench_part and not set(train_part) & set(bench_part)
    assert ngram_overlap(texts, train_part)[0] == 0  # no document is mostly training text
    assert ngram_overlap(texts, bench_part)[0] > 0  # (the sources are used: the check can fail)
    # Not even one 8-gram of a training-part document reaches the corpus.
    assert max(ngram_overlap(train_part, texts)[1]) == 0.0
