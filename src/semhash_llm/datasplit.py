"""One split of the shared source documents between SPH training and the development benchmark.

The development benchmark (:mod:`semhash_llm.bench.generator`) builds its type-D parents and
excerpts, its type-E hosts and passages and part of its background from Wikipedia pages, NLTK
movie reviews and presidential addresses; the shipped SPH model is trained on the same sources.
Without a split the model would have seen the benchmark's documents. Every *source document* — a
Wikipedia page (by title), a movie review or an address (by file name inside its NLTK corpus) —
goes to exactly one part, decided by a hash of its key alone::

    part("movie_reviews", "neg/cv000_29416.txt")   # "train" or "bench", the same on every machine

The benchmark reads only the ``bench`` part (:mod:`semhash_llm.bench.sources`), SPH training only
the ``train`` part (:mod:`semhash_llm.sph.corpus`, on by default when it is fed these files). The
training shares (:data:`TRAIN_FRACTIONS`) leave the benchmark enough long documents for its
``full`` size: it draws ~2,000 documents of >= 2,000 characters from a pool of ~2,630 (movie
reviews, ABC, Lee, Wikipedia), and ABC and Lee are never used for training.

``python -m semhash_llm.bench.leakage --bench-dir DIR`` measures what the split is for: how many
benchmark documents have most of their word 8-grams in the training texts.
"""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal

import xxhash

__all__ = [
    "Part",
    "SPLIT_SALT",
    "TRAIN_FRACTIONS",
    "WIKIPEDIA_FIXTURE",
    "NLTK_CORPORA",
    "document_key",
    "train_share",
    "part",
    "in_part",
    "split_source",
    "wiki_pages",
    "ngram_overlap",
]

Part = Literal["train", "bench"]

#: Changing the salt re-deals every document: only with a retrain and a benchmark rebuild.
SPLIT_SALT = "semhash-llm-datasplit/1"

#: Share of each source's documents that goes to training (the rest is the benchmark's).
TRAIN_FRACTIONS: dict[str, float] = {
    "movie_reviews": 0.25,
    "wikipedia": 0.25,
    "inaugural": 0.5,
    "state_union": 0.5,
}

#: The gensim test fixture the benchmark reads its Wikipedia pages from.
WIKIPEDIA_FIXTURE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
#: NLTK corpora shared by the benchmark and SPH training (one document per file).
NLTK_CORPORA = ("movie_reviews", "inaugural", "state_union")


def document_key(source: str, name: str) -> str:
    """The stable key of a source document: ``"movie_reviews/neg/cv000_29416.txt"``, ``"wikipedia/Anarchism"``."""
    if source not in TRAIN_FRACTIONS:
        raise ValueError(f"The 'source' parameter must be one of {sorted(TRAIN_FRACTIONS)}. Got {source!r} instead.")
    return f"{source}/{name.strip()}"


def train_share(key: str) -> float:
    """A number in [0, 1) that depends only on ``key`` (SHA-256 of the salted key)."""
    digest = hashlib.sha256(f"{SPLIT_SALT}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def part(source: str, name: str) -> Part:
    """Which part a source document belongs to: ``"train"`` or ``"bench"``."""
    key = document_key(source, name)
    return "train" if train_share(key) < TRAIN_FRACTIONS[source] else "bench"


def in_part(source: str, name: str, which: Part | None) -> bool:
    """``True`` when the document belongs to ``which`` (``None``: every document)."""
    if which is not None and which not in ("train", "bench"):
        raise ValueError(f"The 'part' parameter must be 'train', 'bench' or None. Got {which!r} instead.")
    return which is None or part(source, name) == which


def split_source(path: Path) -> tuple[str, str | None] | None:
    """The shared source a file belongs to, if any: ``(source, document name)``.

    A file inside an NLTK ``movie_reviews`` / ``inaugural`` / ``state_union`` folder is one
    document named by its path inside that folder; the Wikipedia fixture holds many pages, named
    by title (``(source, None)``: split page by page). Other files are not shared with the
    benchmark (``None``).
    """
    if path.name == WIKIPEDIA_FIXTURE:
        return "wikipedia", None
    parts = path.parts
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in NLTK_CORPORA and path.suffix.lower() == ".txt":
            return parts[i], "/".join(parts[i + 1 :])
    return None


_PAGE = re.compile(r"<page>(.*?)</page>", re.S)
_TITLE = re.compile(r"<title>(.*?)</title>", re.S)
_NS = re.compile(r"<ns>(.*?)</ns>", re.S)
_TEXT = re.compile(r"<text[^>]*>(.*?)</text>", re.S)


def wiki_pages(raw: str) -> Iterator[tuple[str, str | None, str]]:
    """``(title, namespace or None, raw wikitext)`` of each ``<page>`` of a MediaWiki XML dump."""
    for page in _PAGE.finditer(raw):
        body = page.group(1)
        text = _TEXT.search(body)
        if text is None:
            continue
        title = _TITLE.search(body)
        ns = _NS.search(body)
        yield (
            html.unescape(title.group(1)).strip() if title else "",
            ns.group(1).strip() if ns else None,
            text.group(1),
        )


# ---- measuring the overlap ---------------------------------------------------------------------

_WORD = re.compile(r"\w+")


def _grams(text: str, n: int) -> set[int]:
    words = _WORD.findall(text.lower())
    return {xxhash.xxh3_64_intdigest(" ".join(words[i : i + n]).encode()) for i in range(max(1, len(words) - n + 1))}


def ngram_overlap(
    documents: Sequence[str], reference: Iterable[str], n: int = 8, threshold: float = 0.5
) -> tuple[int, list[float]]:
    """How many ``documents`` have at least ``threshold`` of their word ``n``-grams in ``reference``.

    Returns the count and every document's share (a text of fewer than ``n`` words is one gram).
    """
    seen: set[int] = set()
    for text in reference:
        seen |= _grams(text, n)
    shares = []
    for doc in documents:
        grams = _grams(doc, n)
        shares.append(len(grams & seen) / len(grams) if grams else 0.0)
    return sum(s >= threshold for s in shares), shares
