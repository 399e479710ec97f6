"""Readers for the real text in ``../shared/data`` used to build the development benchmark.

Every reader takes the data root, reads its files in place (nothing is copied), returns items in a
deterministic order (sorted file names, file order inside a file) and raises :class:`DataError`
naming the file, and the line where one is at fault, when the data is missing or malformed.

Wikipedia pages, movie reviews and presidential addresses are shared with SPH training: their
readers return only the benchmark's part of them by default (``part="bench"``, see
:mod:`semhash_llm.datasplit`), so that no benchmark document was seen by the shipped model.
"""

from __future__ import annotations

import bz2
import csv
import html
import logging
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from semhash_llm.datasplit import WIKIPEDIA_FIXTURE, Part, in_part, wiki_pages
from semhash_llm.io.readers import InputError, iter_json_objects

logger = logging.getLogger(__name__)

__all__ = [
    "DataError",
    "TextPair",
    "ReadabilityPage",
    "read_abc",
    "read_movie_reviews",
    "read_webtext",
    "read_lee",
    "read_newsgroups",
    "NewsPost",
    "read_wikipedia",
    "read_addresses",
    "read_trec_questions",
    "read_qqp",
    "read_tweets",
    "read_paws_dev",
    "read_stsb",
    "read_codespell",
    "read_readability_pages",
    "html_to_text",
]


class DataError(ValueError):
    """The benchmark's source data is missing or malformed."""


@dataclass(frozen=True)
class TextPair:
    """Two texts from a labelled pair corpus (PAWS, QQP, STS-B)."""

    text_a: str
    text_b: str
    label: float
    origin: str  # "file:line"


@dataclass(frozen=True)
class NewsPost:
    """A newsgroup post with its headers removed (the subject line is kept as the first line)."""

    subject: str
    body: str
    origin: str

    @property
    def text(self) -> str:
        return f"Subject: {self.subject}\n\n{self.body}"


@dataclass(frozen=True)
class ReadabilityPage:
    """A Readability fixture: the full page text, the extracted article and the page chrome around it."""

    name: str
    page_text: str
    article_text: str
    head_boilerplate: str
    tail_boilerplate: str


def _require(path: Path) -> Path:
    if not path.exists():
        raise DataError(f"benchmark source data is missing: {path} does not exist")
    return path


def _read_text(path: Path, encoding: str = "utf-8") -> str:
    _require(path)
    try:
        return path.read_text(encoding=encoding).replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: cannot decode as {encoding}: {exc}") from exc


def _paragraph_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.split(r"\n\s*\n", text) if b.strip()]


def read_abc(root: Path) -> list[str]:
    """ABC rural and science news stories (blank-line separated blocks)."""
    out: list[str] = []
    for name in ("rural.txt", "science.txt"):
        out.extend(_paragraph_blocks(_read_text(root / "nltk" / "abc" / name, "latin-1")))
    return out


def read_movie_reviews(root: Path, part: Part | None = "bench") -> list[str]:
    """The Pang & Lee movie reviews (2,000 in all), one document each; ``part`` of the split (``None``: all)."""
    base = _require(root / "nltk" / "movie_reviews")
    files = sorted(base.glob("*/*.txt"))
    if not files:
        raise DataError(f"{base}: no review files (expected neg/*.txt and pos/*.txt)")
    keep = [f for f in files if in_part("movie_reviews", f.relative_to(base).as_posix(), part)]
    return [_read_text(f, "latin-1").strip() for f in keep]


def read_webtext(root: Path) -> list[str]:
    """Web text lines (forum posts, overheard quotes, ads, wine notes), one line per item."""
    out: list[str] = []
    for name in ("firefox.txt", "overheard.txt", "singles.txt", "wine.txt"):
        for line in _read_text(root / "nltk" / "webtext" / name, "latin-1").split("\n"):
            line = line.strip()
            if line:
                out.append(line)
    return out


def read_lee(root: Path) -> list[str]:
    """The Lee background corpus and the 50 Lee documents, one news article per line."""
    out: list[str] = []
    for name in ("lee_background.cor", "lee.cor"):
        out.extend(line.strip() for line in _read_text(root / "gensim_lee_wiki" / name, "latin-1").split("\n"))
    return [t for t in out if t]


_HEADER_RE = re.compile(r"^[A-Za-z][A-Za-z0-9-]*: ")


def _is_header_block(block: str) -> bool:
    lines = [h for h in block.split("\n") if h]
    return bool(lines) and all(_HEADER_RE.match(h) or h.startswith((" ", "\t")) for h in lines)


def read_newsgroups(root: Path) -> list[NewsPost]:
    """20-Newsgroups posts with the header block stripped; the subject is kept."""
    path = _require(root / "gensim_lee_wiki" / "mini_newsgroup.jsonl")
    posts: list[NewsPost] = []
    try:
        records = list(iter_json_objects(path))
    except InputError as exc:
        raise DataError(str(exc)) from exc
    for lineno, obj in records:
        text = obj.get("text") if isinstance(obj, dict) else None
        if not isinstance(text, str):
            raise DataError(f"{path}:{lineno}: field 'text' must be a string, got {type(text).__name__}")
        head, sep, body = text.replace("\r\n", "\n").partition("\n\n")
        if not sep:
            head, body = "", text
        subject = ""
        for hline in head.split("\n"):
            if hline.lower().startswith("subject:"):
                subject = hline.split(":", 1)[1].strip()
        if head and not _is_header_block(head):
            # Not a header block after all: keep the whole text as the body.
            body = text
        while True:  # some posts carry a second (forwarded / Xref) header block
            nxt, sep2, rest = body.strip().partition("\n\n")
            if not sep2 or not _is_header_block(nxt):
                break
            body = rest
        posts.append(NewsPost(subject=subject, body=body.strip(), origin=f"{path}:{lineno}"))
    return posts


_WIKI_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")
_WIKI_TABLE = re.compile(r"\{\|.*?\|\}", re.S)
_WIKI_REF = re.compile(r"<ref[^>/]*/>|<ref[^>]*>.*?</ref>", re.S | re.I)
_WIKI_TAG = re.compile(r"<[^>]+>")
_WIKI_FILE = re.compile(r"\[\[(?:File|Image|Category|[a-z]{2,3}(?:-[a-z]+)?):[^\[\]]*(?:\[\[[^\]]*\]\][^\[\]]*)*\]\]", re.I)
_WIKI_LINK = re.compile(r"\[\[(?:[^\]|]*\|)?([^\]]*)\]\]")
_WIKI_EXT = re.compile(r"\[https?://\S+\s*([^\]]*)\]")
_WIKI_HEAD = re.compile(r"^=+\s*(.*?)\s*=+\s*$", re.M)


def _wikitext_to_plain(text: str) -> str:
    text = html.unescape(text)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = _WIKI_REF.sub("", text)
    for _ in range(6):
        new = _WIKI_TEMPLATE.sub("", text)
        if new == text:
            break
        text = new
    text = _WIKI_TABLE.sub("", text)
    text = _WIKI_FILE.sub("", text)
    text = _WIKI_LINK.sub(r"\1", text)
    text = _WIKI_EXT.sub(r"\1", text)
    text = _WIKI_TAG.sub("", text)
    text = text.replace("'''", "").replace("''", "")
    text = _WIKI_HEAD.sub(r"\1", text)
    lines = []
    for line in text.split("\n"):
        line = line.strip()
        if line.startswith(("*", "#", ":", ";", "|", "!", "{", "}")):
            line = line.lstrip("*#:;").strip()
            if not line or line.startswith(("|", "!", "{", "}")):
                continue
        lines.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def read_wikipedia(root: Path, part: Part | None = "bench") -> list[str]:
    """Plain text of the Wikipedia pages (wikitext markup stripped); redirects and stubs skipped.

    ``part``: the pages of that part of the split, by title (``None``: all).
    """
    path = _require(root / "gensim_lee_wiki" / WIKIPEDIA_FIXTURE)
    try:
        raw = bz2.decompress(path.read_bytes()).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot decompress/decode: {exc}") from exc
    out: list[str] = []
    found = False
    for title, _ns, body in wiki_pages(raw):
        found = True
        if not in_part("wikipedia", title, part) or body.lstrip().upper().startswith("#REDIRECT"):
            continue
        plain = _wikitext_to_plain(body)
        if len(plain) >= 500:
            out.append(plain)
    if not found:
        raise DataError(f"{path}: no <page> with a <text> body found")
    return out


def read_addresses(root: Path, part: Part | None = "bench") -> list[str]:
    """Inaugural and State of the Union addresses, one text each; ``part`` of the split (``None``: all)."""
    out: list[str] = []
    for sub in ("inaugural", "state_union"):
        base = _require(root / "nltk" / sub)
        files = sorted(base.glob("*.txt"))
        if not files:
            raise DataError(f"{base}: no .txt addresses found")
        out.extend(_read_text(f, "latin-1") for f in files if in_part(sub, f.name, part))
    if not out:
        raise DataError(f"{root / 'nltk'}: no inaugural / State of the Union address in the {part} part of the split")
    return out


def read_trec_questions(root: Path) -> list[str]:
    """TREC question-classification questions (label prefix removed)."""
    out: list[str] = []
    for name in ("train.txt", "test.txt"):
        path = root / "nltk" / "qc" / name
        for lineno, line in enumerate(_read_text(path, "latin-1").split("\n"), 1):
            if not line.strip():
                continue
            parts = line.split(" ", 1)
            if len(parts) != 2 or ":" not in parts[0]:
                raise DataError(f"{path}:{lineno}: expected 'COARSE:fine question', got {line[:60]!r}")
            out.append(parts[1].strip())
    return out


def _read_tsv(path: Path) -> list[list[str]]:
    _require(path)
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))


def read_qqp(root: Path) -> list[TextPair]:
    """QQP question pairs with the human is_duplicate label; malformed rows are skipped with a warning."""
    path = root / "qqp_subset" / "qqp_glue_train_subset_23496.tsv"
    rows = _read_tsv(path)
    if not rows or rows[0][:6] != ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]:
        raise DataError(f"{path}:1: expected header 'id qid1 qid2 question1 question2 is_duplicate'")
    out: list[TextPair] = []
    skipped: list[int] = []
    for lineno, row in enumerate(rows[1:], 2):
        if len(row) != 6 or row[5] not in ("0", "1"):
            skipped.append(lineno)  # the README documents one malformed row (5 fields)
            continue
        out.append(TextPair(row[3].strip(), row[4].strip(), float(row[5]), f"{path}:{lineno}"))
    if skipped:
        logger.info("%s: skipped %d malformed row(s) at line(s) %s", path, len(skipped), skipped[:10])
    return out


def read_tweets(root: Path) -> list[str]:
    """Reference tweets of the Twitter URL corpus (``a.toks``: one per linked news URL), unique, in file order.

    The ``b.toks`` side is left out on purpose: those tweets link the same URL as their ``a`` tweet and are
    mostly retweets or light rewrites of it, i.e. unlabelled near-duplicates.
    """
    seen: set[str] = set()
    out: list[str] = []
    for line in _read_text(root / "twitter_url" / "train_tokenized" / "a.toks").split("\n"):
        line = line.strip()
        if line and line not in seen:
            seen.add(line)
            out.append(line)
    return out


def read_paws_dev(root: Path) -> list[TextPair]:
    """PAWS-Wiki dev pairs (label 1 = paraphrase)."""
    path = root / "paws_wiki" / "dev.tsv"
    out: list[TextPair] = []
    for lineno, row in enumerate(_read_tsv(path), 1):
        if len(row) != 4 or row[3] not in ("0", "1"):
            raise DataError(f"{path}:{lineno}: expected 4 tab-separated fields 'id s1 s2 label(0|1)', got {len(row)}")
        out.append(TextPair(row[1].strip(), row[2].strip(), float(row[3]), f"{path}:{lineno}"))
    return out


def read_stsb(root: Path) -> list[TextPair]:
    """STS-B train+dev pairs with their 0–5 similarity score."""
    out: list[TextPair] = []
    for name in ("sts-train.csv", "sts-dev.csv"):
        path = root / "stsbenchmark" / name
        for lineno, row in enumerate(_read_tsv(path), 1):
            if len(row) < 7:
                raise DataError(f"{path}:{lineno}: expected at least 7 tab-separated fields, got {len(row)}")
            try:
                score = float(row[4])
            except ValueError as exc:
                raise DataError(f"{path}:{lineno}: field 'score' is not a number: {row[4]!r}") from exc
            out.append(TextPair(row[5].strip(), row[6].strip(), score, f"{path}:{lineno}"))
    return out


def read_codespell(root: Path) -> dict[str, list[str]]:
    """Map a correct lower-case word to its real misspellings (codespell's dictionary, reversed)."""
    path = root / "codespell_typos" / "dictionary.txt"
    out: dict[str, list[str]] = {}
    for lineno, line in enumerate(_read_text(path).split("\n"), 1):
        if not line.strip():
            continue
        wrong, sep, right = line.partition("->")
        if not sep:
            raise DataError(f"{path}:{lineno}: expected 'misspelling->correction', got {line[:60]!r}")
        corrections = [c.strip() for c in right.split(",") if c.strip()]
        if len(corrections) != 1:  # ambiguous entries ("a->b, c,") are not used
            continue
        wrong, good = wrong.strip(), corrections[0]
        if wrong.isalpha() and good.isalpha() and wrong.islower() and good.islower():
            out.setdefault(good, []).append(wrong)
    return out


_BLOCK_TAGS = {
    "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption", "figure",
    "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p",
    "pre", "section", "table", "td", "th", "tr", "ul", "title", "button", "label", "option", "select",
}
_SKIP_TAGS = {"script", "style", "noscript", "template", "svg", "math", "head"}


class _BlockTextParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[str] = []
        self._cur: list[str] = []
        self._skip = 0
        self._title = False

    def _flush(self) -> None:
        text = re.sub(r"\s+", " ", "".join(self._cur)).strip()
        if text:
            self.blocks.append(text)
        self._cur = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP_TAGS:
            self._skip += 1
        elif tag in _BLOCK_TAGS:
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP_TAGS:
            self._skip = max(0, self._skip - 1)
        elif tag in _BLOCK_TAGS:
            self._flush()

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self._cur.append(data)

    def close(self) -> None:
        super().close()
        self._flush()


def html_to_blocks(markup: str) -> list[str]:
    """Visible text of an HTML page, one string per block element, scripts and styles dropped."""
    parser = _BlockTextParser()
    parser.feed(markup)
    parser.close()
    return parser.blocks


def html_to_text(markup: str) -> str:
    """Visible text of an HTML page, blocks joined by newlines."""
    return "\n".join(html_to_blocks(markup))


def _norm(s: str) -> str:
    return re.sub(r"\W+", " ", s.lower()).strip()


def read_readability_pages(root: Path) -> list[ReadabilityPage]:
    """Readability fixtures: full page text, article text, and the chrome before and after the article.

    The chrome is the page's blocks outside the span of blocks that occur in the extracted article:
    blocks before the first article block form the head (nav, banners), blocks after the last form the
    tail (related links, footers). Blocks inside the article span are never used as boilerplate.
    """
    base = _require(root / "readability_test_pages")
    pages: list[ReadabilityPage] = []
    for d in sorted(p for p in base.iterdir() if p.is_dir()):
        src, exp = d / "source.html", d / "expected.html"
        if not src.exists() or not exp.exists():
            raise DataError(f"{d}: expected source.html and expected.html")
        source_blocks = html_to_blocks(_read_text(src))
        article_blocks = html_to_blocks(_read_text(exp))
        article_text = "\n".join(article_blocks)
        art_norm = _norm(article_text)
        in_article = [len(_norm(b)) >= 20 and _norm(b) in art_norm for b in source_blocks]
        idx = [i for i, flag in enumerate(in_article) if flag]
        if idx:
            first, last = idx[0], idx[-1]
            head = [b for b in source_blocks[:first] if _norm(b) not in art_norm]
            tail = [b for b in source_blocks[last + 1 :] if _norm(b) not in art_norm]
        else:
            head, tail = [], []
        pages.append(
            ReadabilityPage(
                name=d.name,
                page_text="\n".join(source_blocks),
                article_text=article_text,
                head_boilerplate="\n".join(head),
                tail_boilerplate="\n".join(tail),
            )
        )
    return pages
