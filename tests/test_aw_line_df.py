"""AW-MinHash and line document frequency: a site's long-line chrome makes no two of its pages duplicates.

Issue 24 item 6 ("same-template pages merge"): a news site's pages carry long lists of headlines
(lines of 8-15 words that read like prose), which the line cue weighs fully, so two different
articles of the site shared more than half their weighted shingles. Lines that recur in the run's
documents now count as chrome: a pair with a *templated* document is re-read and compared without them.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from semhash_llm import ConfigError, PipelineConfig, deduplicate
from semhash_llm.config import AWConfig
from semhash_llm.stages.aw import LINE_SAMPLE, AWMinHashStage
from semhash_llm.stages.base import StreamBatch
from semhash_llm.text.lines import tokens_and_lines
from semhash_llm.text.normalize import char_classes, normalize_batch
from semhash_llm.text.tokenize import tokenize_batch

_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "zi", "pa", "da", "fe", "go", "hu", "ji", "ba", "co",
              "ri", "sto", "tra", "men", "ver", "pli", "gan", "dor", "bel", "sin", "tur"]


def _vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(3, 5))))
    return sorted(words)


def _sentence(rng: random.Random, words: list[str], lo: int, hi: int) -> str:
    """Prose-like: a third of the words from a Zipf head, the rest uniform."""
    k = rng.randint(lo, hi)
    out = [words[min(int(rng.paretovariate(1.0)) - 1, len(words) - 1)] if rng.random() < 0.3 else rng.choice(words)
           for _ in range(k)]
    return " ".join(out).capitalize()


class _Site:
    """One news site: 40 headline lines (8-15 words) around every page's article."""

    def __init__(self, seed: int, headlines: int = 40) -> None:
        self.rng = random.Random(seed)
        self.words = _vocabulary(self.rng)
        self.headlines = [_sentence(self.rng, self.words, 8, 15) for _ in range(headlines)]

    def article(self, paragraphs: int = 3, sentences: int = 7, words: tuple[int, int] = (8, 9)) -> str:
        """Paragraphs of short sentences: as many passages per word as the headlines, so that the passage
        stage (one passage one vote) does not call two pages versions of one text: only AW-MinHash did."""
        return "\n\n".join(" ".join(_sentence(self.rng, self.words, *words) + "." for _ in range(sentences))
                           for _ in range(paragraphs))

    def page(self, article: str) -> str:
        half = len(self.headlines) // 2
        return "\n".join(self.headlines[:half]) + "\n\n" + article + "\n\n" + "\n".join(self.headlines[half:])


def _run(records: list[dict[str, str]], config: PipelineConfig | None = None) -> tuple[dict[str, dict], dict]:
    res = deduplicate(records, config)
    return {r["id"]: r for r in res.documents.to_pylist()}, res.report


def _aw(report: dict) -> dict:
    return next(s for s in report["funnel"] if s["stage"] == "aw")["details"]


def _news_site(seed: int = 0, paragraphs: int = 3, sentences: int = 7) -> tuple[_Site, list[dict[str, str]]]:
    site = _Site(seed)
    return site, [{"id": f"page{k}", "text": site.page(site.article(paragraphs, sentences))} for k in range(8)]


# (3, 7): weighted Jaccard ~0.52 between two pages, linked by AW-MinHash's banding without the check
# (the issue's case); (2, 8): ~0.59, heavier chrome, linked by the lsh stage confirming on AW signatures.
@pytest.mark.parametrize(("paragraphs", "sentences"), [(3, 7), (2, 8)])
def test_pages_of_a_site_with_long_headline_chrome_are_all_kept(paragraphs: int, sentences: int) -> None:
    _, records = _news_site(0, paragraphs, sentences)
    assert all(6000 <= len(r["text"]) <= 10000 for r in records)
    rows, report = _run(records)
    removed = {k: (r["decided_by"], r["duplicate_of"]) for k, r in rows.items() if r["action"] != "keep"}
    assert removed == {}
    aw = _aw(report)
    assert aw["docs_templated"] == len(records)
    assert aw["template_pairs_rechecked"] >= 1 and aw["template_pairs_accepted"] == 0
    assert aw["template_pairs_rejected"] == aw["template_pairs_rechecked"]
    assert aw["line_df_bytes"] == 4 * 4 * (1 << AWConfig().line_df_bits)
    assert aw["line_sample_bytes"] == len(records) * (LINE_SAMPLE * 10 + 1)


# stamped=1: a fourth copy, so that even the typo paragraph's original lines are in three documents: only
# lines beyond a document's own copies count as chrome, or nothing of the article would be left to compare.
@pytest.mark.parametrize("stamped", [0, 1])
def test_the_same_article_in_two_pages_of_the_site_and_a_typo_copy_are_still_removed(stamped: int) -> None:
    site, records = _news_site(1)
    article = site.article()
    paragraphs = article.split("\n\n")
    words = paragraphs[0].split()
    words[5] = words[5] + "x"
    typo = "\n\n".join([" ".join(words), *paragraphs[1:]])
    # dup1 is dup0 with a "shared" stamp (an exact copy would leave at the Bloom stage, before any feature):
    # all three reach AW-MinHash, and the article's lines are in three documents, as the headlines are in 11.
    records += [{"id": "dup0", "text": site.page(article)}, {"id": "dup1", "text": site.page(article) + "\nShared 12"},
                {"id": "dup2", "text": site.page(typo)}]
    records += [{"id": f"dup{3 + k}", "text": site.page(article) + f"\nShared {40 + k}"} for k in range(stamped)]
    copies = 3 + stamped
    config = PipelineConfig.from_dict({"select": {"keep": "first"}})
    rows, report = _run(records, config)
    assert [rows[f"dup{k}"]["action"] for k in range(copies)] == ["keep"] + ["remove"] * (copies - 1)
    assert {rows[f"dup{k}"]["duplicate_of"] for k in range(1, copies)} == {"dup0"}
    assert all(rows[f"page{k}"]["action"] == "keep" for k in range(8))
    # AW-MinHash finds them on its own: the re-check keeps the article's lines, which recur only in its copies.
    off = {"enabled": False}
    alone = PipelineConfig.from_dict({"select": {"keep": "first"}, "sph": off, "passages": off, "verifier": off})
    rows, report = _run(records, alone)
    assert [rows[f"dup{k}"]["action"] for k in range(copies)] == ["keep"] + ["remove"] * (copies - 1)
    assert {rows[f"dup{k}"]["decided_by"] for k in range(1, copies)} == {"aw"}
    assert all(rows[f"page{k}"]["action"] == "keep" for k in range(8))
    assert _aw(report)["template_pairs_accepted"] >= 1


def _light_site_page(site: _Site, article: str, rng: random.Random) -> str:
    """A site whose chrome is a menu (short lines) and a few of its headlines: a quarter of the weight."""
    menu = "\n".join(" ".join(rng.choice(site.words).capitalize() for _ in range(rng.randint(1, 2))) for _ in range(30))
    return menu + "\n" + "\n".join(site.headlines[:6]) + "\n\n" + article + "\n\n" + "\n".join(site.headlines[6:12])


def test_one_article_in_two_sites_chrome_is_still_linked() -> None:
    rng = random.Random(7)
    one, two = _Site(2), _Site(3)
    article = one.article(4, 4, (12, 20))
    records = [{"id": "a", "text": _light_site_page(one, article, rng)},
               {"id": "b", "text": _light_site_page(two, article, rng)}]
    for site, name in ((one, "one"), (two, "two")):
        records += [{"id": f"{name}{k}", "text": _light_site_page(site, site.article(4, 4, (12, 20)), rng)} for k in range(4)]
    rows, report = _run(records, PipelineConfig.from_dict({"select": {"keep": "first"}}))
    assert rows["b"]["action"] == "remove" and rows["b"]["duplicate_of"] == "a"
    assert all(r["action"] == "keep" for k, r in rows.items() if k != "b")
    aw = _aw(report)
    assert aw["docs_templated"] >= 2  # the wrapped article's two pages among them: it went through the re-check
    assert aw["template_pairs_accepted"] >= 1


def _feed(stage: AWMinHashStage, texts: list[str], batch: int) -> None:
    cfg = stage.normalize
    for lo in range(0, len(texts), batch):
        chunk = texts[lo:lo + batch]
        norm = normalize_batch(chunk, cfg)
        tb = tokenize_batch(norm, char_classes(cfg.strip_punctuation), PipelineConfig().shingle)
        ok = np.ones(len(chunk), dtype=np.bool_)
        stage.process(StreamBatch(np.arange(lo, lo + len(chunk)), chunk, tb, np.zeros(len(chunk), np.uint8), ok, norm))


def test_line_document_frequency_counts_each_document_once() -> None:
    shared = "the quick brown fox jumps over the lazy dog near the river bank"
    twice = "a line that one document holds twice and no other document holds"
    rare = ["zeta eta theta iota kappa lambda mu nu xi omicron pi rho", "one two three four five six seven eight nine ten",
            "red orange yellow green blue indigo violet white black grey"]
    texts = [f"{shared}\n{rare[0]}\n{twice}\n{twice}", f"{rare[1]}\n{shared}", f"{shared}\n{rare[2]}"]
    stage = AWMinHashStage(AWConfig())
    _feed(stage, texts, 2)
    assert stage.line_df_ is not None and stage.line_df_.num_docs == 3
    _, lines = tokens_and_lines([shared, twice, rare[0], "short line"])
    assert stage.line_df_.df(lines.hash).tolist() == [3, 1, 1, 0]  # a line of fewer than 8 tokens is not counted
    # The per-document sample: each document's long lines, once each, with their share of its weight.
    hashes, shares = stage.line_samples()
    assert hashes.shape == shares.shape == (3, LINE_SAMPLE)
    assert [int(np.count_nonzero(s)) for s in shares] == [3, 2, 2]
    assert np.all(shares.astype(np.float64).sum(axis=1) <= 1.0 + 1e-3)
    assert int(np.count_nonzero(hashes[0] == lines.hash[1])) == 1
    # The shared line is in three documents, their rarest lines in one: a third or half of each one's weight
    # lies on a recurring line.
    assert stage.templated().tolist() == [True, True, True]
    # Three copies of one text: every line is in three documents, and so is the rarest: no template.
    copies = AWMinHashStage(AWConfig())
    _feed(copies, [f"{shared}\n{rare[0]}"] * 3 + [f"{rare[1]}\n{rare[2]}"], 4)
    assert copies.templated().tolist() == [False, False, False, False]


def test_line_document_frequency_does_not_depend_on_batching() -> None:
    site, records = _news_site(4)
    texts = [r["text"] for r in records]
    marks = []
    for batch in (1, 3, 8):
        stage = AWMinHashStage(AWConfig())
        _feed(stage, texts, batch)
        marks.append((stage.templated().tolist(), stage.line_samples()[1].tolist()))
    assert marks[0] == marks[1] == marks[2] and all(marks[0][0])


def test_template_check_off_is_todays_behaviour() -> None:
    _, records = _news_site()
    rows, report = _run(records, PipelineConfig.from_dict({"aw": {"template_df": 0}}))
    assert any(r["action"] == "remove" for r in rows.values())
    aw = _aw(report)
    assert aw["docs_templated"] == 0 and aw["line_df_bytes"] == 0


def test_template_config_is_validated() -> None:
    with pytest.raises(ConfigError, match="'template_df' parameter of AWConfig must be 0 .*Got 1"):
        PipelineConfig.from_dict({"aw": {"template_df": 1}})
    with pytest.raises(ConfigError, match="'template_share' parameter of AWConfig must be a float in \\(0.0, 1.0\\]"):
        PipelineConfig.from_dict({"aw": {"template_share": 0}})
    with pytest.raises(ConfigError, match="'line_df_bits' parameter of AWConfig must be an int in \\[10, 30\\]"):
        PipelineConfig.from_dict({"aw": {"line_df_bits": 40}})
