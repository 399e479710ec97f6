"""Unlabeled training text for SPH: read a corpus path, cut it into passages.

Accepted inputs (a file, or a folder searched recursively):

* ``*.txt`` / ``*.cor`` — plain text; blank lines separate paragraphs (``*.cor``: one
  document per line).
* ``*.jsonl`` / ``*.jsonl.gz`` / ``*.jsonl.zst`` — one JSON object per line; the ``text``
  field (or ``text_field``).
* ``*.parquet`` — the ``text`` column (or ``text_field``).
* ``*.tsv`` — every cell with at least 3 words is one text (sentence-pair files such as
  PAWS give both sentences).
* ``*.xml*`` (optionally ``.bz2``) — a MediaWiki XML dump; article wikitext is stripped of markup.

Documents are cut into passages of ``min_words``..``max_words`` words along paragraph
boundaries, so that training sees both short and document-length texts.

Two splits are made by *source document*, before any passage is cut:

* documents of the sources shared with the development benchmark (Wikipedia pages of the gensim
  fixture, NLTK movie reviews and presidential addresses) are read only if they belong to the
  training part of :mod:`semhash_llm.datasplit` (``part="train"``, the default);
* a seeded share of the documents is held out for evaluation; held-out passages and snippets come
  only from those documents, and a held-out text that occurs verbatim inside a training text
  (boilerplate shared between documents) is dropped.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import xxhash

from semhash_llm.datasplit import Part, in_part, split_source, train_share, wiki_pages

logger = logging.getLogger(__name__)

_SUFFIXES = (".txt", ".cor", ".jsonl", ".jsonl.gz", ".jsonl.zst", ".parquet", ".tsv", ".xml", ".xml.bz2")
_SKIP_NAMES = {"readme", "readme.txt", "license", "license.txt", "license.md", "copying"}


def _open_text(path: Path) -> io.TextIOBase:
    name = path.name.lower()
    if name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path), encoding="utf-8", errors="replace")
    if name.endswith(".bz2"):
        return io.TextIOWrapper(bz2.open(path), encoding="utf-8", errors="replace")
    if name.endswith(".zst"):
        import zstandard

        return io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(open(path, "rb")), encoding="utf-8", errors="replace")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    return io.StringIO(text)


def corpus_files(paths: list[str | Path]) -> list[Path]:
    """The readable files under ``paths``, sorted (deterministic)."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(
                f
                for f in sorted(p.rglob("*"))
                if f.is_file() and f.name.lower().endswith(_SUFFIXES) and f.name.lower() not in _SKIP_NAMES
            )
        elif p.is_file():
            files.append(p)
        else:
            raise FileNotFoundError(f"Corpus path '{p}' does not exist. Pass files or folders of text.")
    return files


_WIKI_SUBS = [
    (re.compile(r"<ref[^>]*/>|<ref.*?</ref>", re.S), " "),
    (re.compile(r"\{\{[^{}]*\}\}"), " "),
    (re.compile(r"\{\|.*?\|\}", re.S), " "),
    (re.compile(r"\[\[(?:File|Image|Category):[^\]]*\]\]"), " "),
    (re.compile(r"\[\[[^\]|]*\|([^\]]*)\]\]"), r"\1"),
    (re.compile(r"\[\[([^\]]*)\]\]"), r"\1"),
    (re.compile(r"\[https?://\S+ ([^\]]*)\]"), r"\1"),
    (re.compile(r"'{2,}"), ""),
    (re.compile(r"^=+\s*(.*?)\s*=+\s*$", re.M), r"\1"),
    (re.compile(r"^[*#:;]+\s*", re.M), ""),
    (re.compile(r"<[^>]+>"), " "),
]


def _wikitext_plain(text: str) -> str:
    import html

    text = html.unescape(text)
    for _ in range(3):  # nested templates
        text = _WIKI_SUBS[1][0].sub(" ", text)
    for pattern, repl in _WIKI_SUBS:
        text = pattern.sub(repl, text)
    return text


def _wikitext_docs(raw: str) -> Iterator[tuple[str, str]]:
    """``(title, plain text)`` of the article pages (namespace 0) of a MediaWiki dump, redirects skipped."""
    for title, ns, text in wiki_pages(raw):
        if ns not in (None, "0") or text.lstrip().lower().startswith("#redirect"):
            continue
        yield title, _wikitext_plain(text)


def read_documents(path: Path, text_field: str = "text") -> Iterator[str]:
    """Raw documents of one file (see the module docstring for formats)."""
    name = path.name.lower()
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        table = pq.read_table(path, columns=[text_field])
        yield from (t for t in table.column(text_field).to_pylist() if isinstance(t, str))
    elif ".jsonl" in name:
        with _open_text(path) as fh:
            for line_no, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}, line {line_no}: not valid JSON ({exc.msg}).") from exc
                text = record.get(text_field) if isinstance(record, dict) else None
                if isinstance(text, str):
                    yield text
    elif name.endswith(".tsv"):
        with _open_text(path) as fh:
            for line in fh:
                for cell in line.rstrip("\n").split("\t"):
                    if len(cell.split()) >= 3:
                        yield cell
    elif ".xml" in name:
        with _open_text(path) as fh:
            yield from (text for _, text in _wikitext_docs(fh.read()))
    elif name.endswith(".cor"):
        with _open_text(path) as fh:
            yield from (line for line in fh if line.strip())
    else:
        with _open_text(path) as fh:
            yield fh.read()


def passages(document: str, min_words: int = 8, max_words: int = 200) -> Iterator[str]:
    """Cut a document into passages of at most ``max_words`` words along paragraph breaks."""
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", document)]
    paragraphs = [p for p in paragraphs if p]
    if len(paragraphs) == 1 and len(paragraphs[0].split()) > max_words:
        paragraphs = [" ".join(p.split()) for p in document.split("\n") if p.strip()]
    buf: list[str] = []
    count = 0
    for para in paragraphs:
        words = para.split()
        while len(words) > max_words:
            if buf:
                yield " ".join(buf)
                buf, count = [], 0
            yield " ".join(words[:max_words])
            words = words[max_words:]
        if count + len(words) > max_words and buf:
            if count >= min_words:
                yield " ".join(buf)
            buf, count = [], 0
        buf.append(" ".join(words))
        count += len(words)
    if buf and count >= min_words:
        yield " ".join(buf)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def snippet(passage: str, rng: np.random.Generator, min_words: int = 8, max_words: int = 40) -> str | None:
    """A short run of whole sentences from ``passage`` (``min_words``..``max_words`` words), if any."""
    sentences = [s for s in _SENTENCE_END.split(passage) if s]
    if not sentences:
        return None
    start = int(rng.integers(len(sentences)))
    words: list[str] = []
    for sentence in sentences[start:]:
        extra = sentence.split()
        if words and len(words) + len(extra) > max_words:
            break
        words.extend(extra[: max_words - len(words)])
    return " ".join(words) if len(words) >= min_words else None


def read_corpus_documents(
    paths: Sequence[str | Path],
    text_field: str = "text",
    part: Part | None = "train",
    counts: dict[str, int] | None = None,
) -> Iterator[tuple[str, str]]:
    """``(document key, text)`` of every document under ``paths``, in a deterministic order.

    Documents of the sources shared with the development benchmark carry their
    :func:`semhash_llm.datasplit.document_key` and are read only if they belong to ``part``
    (``None``: all of them); other documents are keyed by their file (relative to the corpus path
    given) and their position in it. With ``part="train"`` a shared document that is a copy of one
    in the benchmark part (at least half of its word 8-grams in a benchmark-part document of the
    files read: the sources hold a few duplicated reviews) is left out as well; ``counts``, if
    given, receives their number under ``"copies_of_benchmark_documents_left_out"``.
    """
    shared_docs: list[tuple[str, str, bool]] = []  # (key, text, in part)
    for root in map(Path, paths):
        for f in corpus_files([root]):
            shared = split_source(f)
            rel = f.relative_to(root).as_posix() if root.is_dir() else f.name
            if shared is not None and shared[0] == "wikipedia":
                with _open_text(f) as fh:
                    for title, text in _wikitext_docs(fh.read()):
                        shared_docs.append((f"wikipedia/{title.strip()}", text, in_part("wikipedia", title, part)))
            elif shared is not None and shared[1] is not None:
                text = next(iter(read_documents(f, text_field)), "")
                shared_docs.append((f"{shared[0]}/{shared[1]}", text, in_part(shared[0], shared[1], part)))
            else:
                yield from _flush(shared_docs, part, counts)
                for i, text in enumerate(read_documents(f, text_field)):
                    yield f"{rel}#{i}", text
    yield from _flush(shared_docs, part, counts)


def _flush(
    shared_docs: list[tuple[str, str, bool]], part: Part | None, counts: dict[str, int] | None = None
) -> Iterator[tuple[str, str]]:
    """Yield the buffered shared documents of ``part`` (see :func:`read_corpus_documents`) and empty the buffer."""
    if not shared_docs:
        return
    others: set[int] = set()
    if part == "train":
        for _, text, keep in shared_docs:
            if not keep:
                others |= _grams8(text)
    dropped = 0
    for key, text, keep in shared_docs:
        if not keep:
            continue
        grams = _grams8(text) if others else set()
        if grams and len(grams & others) >= 0.5 * len(grams):
            dropped += 1
            continue
        yield key, text
    if dropped:
        logger.info("left out %d training-part document(s) that copy a benchmark-part document", dropped)
    if counts is not None:
        key = "copies_of_benchmark_documents_left_out"
        counts[key] = counts.get(key, 0) + dropped
    shared_docs.clear()


def _grams8(text: str) -> set[int]:
    words = re.findall(r"\w+", text.lower())
    return {xxhash.xxh3_64_intdigest(" ".join(words[i : i + 8]).encode()) for i in range(max(1, len(words) - 7))}


@dataclass
class TrainingTexts:
    """Training and held-out texts, split by source document, and what the split did."""

    train: list[str]
    heldout: list[str]
    stats: dict[str, object] = field(default_factory=dict)


def _cut(docs: list[str], rng: np.random.Generator, min_words: int, max_words: int, seen: set[str]) -> tuple[list[str], list[str]]:
    long_texts: list[str] = []
    short_texts: list[str] = []
    for doc in docs:
        for passage in passages(doc, min_words, max_words):
            if passage in seen:
                continue
            seen.add(passage)
            long_texts.append(passage)
            short = snippet(passage, rng, min_words) if len(passage.split()) > 40 else None
            if short is not None and short not in seen:
                seen.add(short)
                short_texts.append(short)
    return long_texts, short_texts


def _sample(long_texts: list[str], short_texts: list[str], n: int, short_fraction: float, rng: np.random.Generator) -> list[str]:
    n_short = min(len(short_texts), int(round(n * short_fraction)))
    n_long = min(len(long_texts), n - n_short)
    pick_long = np.sort(rng.choice(len(long_texts), size=n_long, replace=False))
    pick_short = np.sort(rng.choice(len(short_texts), size=n_short, replace=False))
    return [long_texts[i] for i in pick_long] + [short_texts[i] for i in pick_short]


def load_split_texts(
    paths: Sequence[str | Path],
    max_texts: int,
    heldout_fraction: float = 0.1,
    seed: int = 0,
    min_words: int = 8,
    max_words: int = 200,
    short_fraction: float = 0.35,
    text_field: str = "text",
    part: Part | None = "train",
) -> TrainingTexts:
    """Distinct training and held-out texts from ``paths``: passages plus short sentence snippets.

    Documents are split first (see the module docstring): ``part`` of the benchmark-shared sources
    (``None``: all), then about ``heldout_fraction`` of the documents held out (a seeded hash of the
    document key). Passages and snippets are cut from each side on its own; ``max_texts`` are
    sampled, ``heldout_fraction`` of them held out, about ``short_fraction`` of each side snippets
    of one to a few sentences (``min_words``..40 words), so the student learns short texts as well
    as document-length ones. Held-out texts found verbatim inside a training text are dropped.
    """
    if not 0.0 <= short_fraction < 1.0:
        raise ValueError(f"The 'short_fraction' parameter must be a float in [0, 1). Got {short_fraction!r} instead.")
    if not 0.0 < heldout_fraction < 0.5:
        raise ValueError(f"The 'heldout_fraction' parameter must be a float in (0, 0.5). Got {heldout_fraction!r} instead.")
    files = corpus_files(list(paths))
    if not files:
        raise FileNotFoundError(f"No readable text files under {[str(p) for p in paths]} (formats: {', '.join(_SUFFIXES)}).")
    keys: list[str] = []
    docs: list[str] = []
    left_out: dict[str, int] = {}
    for key, text in read_corpus_documents(paths, text_field, part, left_out):
        keys.append(key)
        docs.append(text)
    if len(docs) < 2:
        raise ValueError(
            f"SPH training needs at least 2 documents to hold some out by document; got {len(docs)} under "
            f"{[str(p) for p in paths]} (a .txt file is one document; use .jsonl, .cor or .parquet for many)."
        )
    shares = np.array([train_share(f"heldout:{seed}:{k}") for k in keys])
    held = shares < heldout_fraction
    if not held.any():
        held[int(np.argmin(shares))] = True
    if held.all():
        held[int(np.argmax(shares))] = False
    rng = np.random.default_rng(seed)
    seen: set[str] = set()
    tr_long, tr_short = _cut([d for d, h in zip(docs, held) if not h], rng, min_words, max_words, seen)
    ho_long, ho_short = _cut([d for d, h in zip(docs, held) if h], rng, min_words, max_words, seen)
    n_ho = max(2, int(round(max_texts * heldout_fraction)))
    train = _sample(tr_long, tr_short, max_texts - n_ho, short_fraction, rng)
    heldout = _sample(ho_long, ho_short, n_ho, short_fraction, rng)
    haystack = "\n".join(train)
    leaked = {t for t in heldout if t in haystack}
    heldout = [t for t in heldout if t not in leaked]
    stats: dict[str, object] = {
        "documents": len(docs),
        "heldout_documents": int(held.sum()),
        "documents_by_source": _count_sources(keys),
        "copies_of_benchmark_documents_left_out": left_out.get("copies_of_benchmark_documents_left_out", 0),
        "passages_train": len(tr_long),
        "snippets_train": len(tr_short),
        "passages_heldout": len(ho_long),
        "snippets_heldout": len(ho_short),
        "heldout_dropped_verbatim_in_train": len(leaked),
    }
    logger.info(
        "read %d documents (%d held out) from %d files: %d training texts, %d held-out texts (%d dropped: verbatim in training)",
        len(docs), int(held.sum()), len(files), len(train), len(heldout), len(leaked),
    )
    return TrainingTexts(train, heldout, stats)


def _count_sources(keys: list[str]) -> dict[str, int]:
    """Documents per benchmark-shared source (their keys are ``source/name``); ``other`` for the rest (``file#i``)."""
    out: dict[str, int] = {}
    for k in keys:
        head = "other" if "#" in k else k.split("/", 1)[0]
        out[head] = out.get(head, 0) + 1
    return dict(sorted(out.items()))
