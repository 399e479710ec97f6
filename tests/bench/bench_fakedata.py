"""A tiny fake copy of ``../shared/data``'s file layout, with made-up words, for the bench tests."""

from __future__ import annotations

import bz2
import json
import random
from pathlib import Path

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


class Words:
    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        # real words with codespell entries below, then made-up words (no 8-gram collides by accident)
        self.vocab = [
            "".join(self.rng.choice(_LETTERS) for _ in range(self.rng.randint(3, 9))) for _ in range(5000)
        ]

    def sentence(self, n: int | None = None) -> str:
        n = n or self.rng.randint(8, 16)
        words = [self.rng.choice(self.vocab) for _ in range(n)]
        if self.rng.random() < 0.5:
            words[self.rng.randrange(n)] = self.rng.choice(["receive", "separate", "because", "government"])
        return " ".join(words).capitalize() + "."

    def text(self, chars: int) -> str:
        out: list[str] = []
        while sum(len(s) + 1 for s in out) < chars:
            out.append(self.sentence())
        return " ".join(out)

    def paragraphs(self, n: int, chars: int) -> str:
        return "\n".join(self.text(chars // n) for _ in range(n))


def make_fake_data(root: Path, seed: int = 7) -> Path:
    """Write the fake data tree under ``root`` and return it."""
    w = Words(seed)
    nltk = root / "nltk"
    (nltk / "abc").mkdir(parents=True)
    for name in ("rural.txt", "science.txt"):
        stories = [w.paragraphs(3, w.rng.choice([500, 900, 2500])) for _ in range(40)]
        (nltk / "abc" / name).write_text("\n\n".join(stories), encoding="latin-1")
    for pol in ("neg", "pos"):
        (nltk / "movie_reviews" / pol).mkdir(parents=True)
        for i in range(30):
            (nltk / "movie_reviews" / pol / f"cv{i:03d}_{pol}.txt").write_text(w.paragraphs(4, 2600), encoding="latin-1")
    (nltk / "webtext").mkdir()
    for name in ("firefox.txt", "overheard.txt", "singles.txt", "wine.txt"):
        lines = [w.text(w.rng.choice([100, 200, 400])) for _ in range(40)]
        (nltk / "webtext" / name).write_text("\n".join(lines), encoding="latin-1")
    for sub in ("inaugural", "state_union"):
        (nltk / sub).mkdir()
        for y in range(3):
            (nltk / sub / f"19{y}0-Speaker.txt").write_text(w.paragraphs(5, 3000), encoding="latin-1")
    (nltk / "qc").mkdir()
    (nltk / "qc" / "train.txt").write_text(
        "\n".join(f"DESC:manner {w.text(120)}?" for _ in range(80)), encoding="latin-1"
    )
    (nltk / "qc" / "test.txt").write_text("\n".join(f"NUM:date {w.text(90)}?" for _ in range(20)), encoding="latin-1")

    g = root / "gensim_lee_wiki"
    g.mkdir()
    (g / "lee_background.cor").write_text("\n".join(w.text(1500) for _ in range(30)), encoding="latin-1")
    (g / "lee.cor").write_text("\n".join(w.text(800) for _ in range(10)), encoding="latin-1")
    with (g / "mini_newsgroup.jsonl").open("w") as fh:
        for i in range(30):
            body = "\n".join(w.text(90) for _ in range(6))
            text = f"From: user{i}@example.org\nSubject: Topic {i}\nLines: 6\n\n{body}"
            fh.write(json.dumps({"id": i, "newsgroup": "sci.space", "orig_filename": f"sci.space/{i}", "text": text}) + "\n")
    pages = "".join(
        f"<page><title>T{i}</title><revision><text xml:space=\"preserve\">'''T{i}''' is [[a|an]] {w.text(900)}\n"
        f"== History ==\n{w.text(700)}{{{{cite web|url=x}}}}</text></revision></page>\n"
        for i in range(8)
    )
    (g / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2").write_bytes(
        bz2.compress(f"<mediawiki>{pages}</mediawiki>".encode())
    )

    (root / "qqp_subset").mkdir()
    rows = ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate"]
    for i in range(120):
        rows.append(f"{i}\t{2 * i}\t{2 * i + 1}\t{w.text(100)}?\t{w.text(100)}?\t{i % 2}")
    (root / "qqp_subset" / "qqp_glue_train_subset_23496.tsv").write_text("\n".join(rows) + "\n")

    tt = root / "twitter_url" / "train_tokenized"
    tt.mkdir(parents=True)
    (tt / "a.toks").write_text("\n".join(w.text(110).lower() for _ in range(60)) + "\n")
    (tt / "b.toks").write_text("\n".join(w.text(110).lower() for _ in range(60)) + "\n")
    (tt / "sim.txt").write_text("\n".join("0" for _ in range(60)) + "\n")

    (root / "paws_wiki").mkdir()
    paws = []
    for i in range(120):
        s = w.sentence(14).rstrip(".").split()
        t = s[:]
        t[1], t[5] = t[5], t[1]
        paws.append(f"{i}\t{' '.join(s)} .\t{' '.join(t)} .\t{i % 2}")
    (root / "paws_wiki" / "dev.tsv").write_text("\n".join(paws) + "\n")

    (root / "stsbenchmark").mkdir()
    for name in ("sts-train.csv", "sts-dev.csv"):
        rows = [
            f"main-news\theadlines\t2015\t{i:04d}\t{(i % 6) * 1.0:.3f}\t{w.sentence()}\t{w.sentence()}" for i in range(60)
        ]
        (root / "stsbenchmark" / name).write_text("\n".join(rows) + "\n")

    (root / "codespell_typos").mkdir()
    (root / "codespell_typos" / "dictionary.txt").write_text(
        "recieve->receive\nseperate->separate\nbecuase->because\ngoverment->government\namiguous->ambiguous, ambiguity,\n"
    )

    rp = root / "readability_test_pages"
    for name in [f"site{i}" for i in range(10)] + ["nytimes-1", "nytimes-2", "nytimes-3"]:
        (rp / name).mkdir(parents=True)
        article = "".join(f"<p>{w.text(300)}</p>" for _ in range(4))
        nav = "".join(f"<li><a href='#'>{w.text(30)}</a></li>" for _ in range(8))
        foot = "".join(f"<div>{w.text(60)}</div>" for _ in range(4))
        if name.startswith("nytimes"):
            nav, foot = "<li>NYT Home</li><li>World section navigation link</li>" * 4, "<div>Copyright The Times footer links</div>" * 3
        (rp / name / "source.html").write_text(
            f"<html><head><title>x</title><script>var a=1;</script></head><body><nav><ul>{nav}</ul></nav>"
            f"<div id='cookie'>We use cookies to improve {w.text(40)}</div><article>{article}</article>"
            f"<footer>{foot}</footer></body></html>"
        )
        (rp / name / "expected.html").write_text(f"<div id='readability-page-1'>{article}</div>")
    return root
