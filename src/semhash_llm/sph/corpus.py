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
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

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


_WIKI_PAGE = re.compile(r"<page>.*?<ns>0</ns>.*?<text[^>]*>(.*?)</text>", re.S)
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


def _wikitext_docs(raw: str) -> Iterator[str]:
    import html

    for m in _WIKI_PAGE.finditer(raw):
        text = html.unescape(m.group(1))
        if text.lstrip().lower().startswith("#redirect"):
            continue
        for _ in range(3):  # nested templates
            text = _WIKI_SUBS[1][0].sub(" ", text)
        for pattern, repl in _WIKI_SUBS:
            text = pattern.sub(repl, text)
        yield text


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
            yield from _wikitext_docs(fh.read())
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


def load_training_texts(
    paths: list[str | Path],
    max_texts: int,
    seed: int = 0,
    min_words: int = 8,
    max_words: int = 200,
    short_fraction: float = 0.35,
    text_field: str = "text",
) -> list[str]:
    """Distinct texts from ``paths``: passages, plus short sentence snippets, seeded sample.

    About ``short_fraction`` of the returned texts are snippets of one to a few sentences
    (``min_words``..40 words), so the student learns short texts as well as
    document-length ones.
    """
    if not 0.0 <= short_fraction < 1.0:
        raise ValueError(f"The 'short_fraction' parameter must be a float in [0, 1). Got {short_fraction!r} instead.")
    files = corpus_files(paths)
    if not files:
        raise FileNotFoundError(f"No readable text files under {[str(p) for p in paths]} (formats: {', '.join(_SUFFIXES)}).")
    rng = np.random.default_rng(seed)
    seen: set[str] = set()
    long_texts: list[str] = []
    short_texts: list[str] = []
    for f in files:
        for doc in read_documents(f, text_field):
            for passage in passages(doc, min_words, max_words):
                if passage in seen:
                    continue
                seen.add(passage)
                long_texts.append(passage)
                short = snippet(passage, rng, min_words) if len(passage.split()) > 40 else None
                if short is not None and short not in seen:
                    seen.add(short)
                    short_texts.append(short)
    logger.info("read %d passages and %d snippets from %d files", len(long_texts), len(short_texts), len(files))
    n_short = min(len(short_texts), int(round(max_texts * short_fraction)))
    n_long = min(len(long_texts), max_texts - n_short)
    pick_long = np.sort(rng.choice(len(long_texts), size=n_long, replace=False))
    pick_short = np.sort(rng.choice(len(short_texts), size=n_short, replace=False))
    return [long_texts[i] for i in pick_long] + [short_texts[i] for i in pick_short]
