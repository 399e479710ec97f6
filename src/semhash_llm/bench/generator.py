"""Build the A–E development corpus with its ground truth from the real text in ``../shared/data``.

``generate(data_dir, size, seed, out_dir)`` writes ``corpus.jsonl`` (``{"id", "text"}`` per line) and
``truth.json`` (see :mod:`semhash_llm.bench.truth`) and returns a :class:`GeneratedBench`. The output
depends only on the data, the size and the seed: the same inputs give byte-identical files.

What is planted (BENCHMARK.md §2):

* **A** — a Readability article in its own page and re-wrapped in the chrome (text before and after the
  article: nav, cookie banners, related links, footers) of 1–3 other real pages.
* **B** — a few documents copied tens of times (Zipf counts ``⌈top / rank⌉``, at least 5) with light variation.
* **C** — short real texts (80–300 characters) with codespell misspellings and OCR-like noise.
* **D** — contiguous excerpts (30–70 %) of long documents, and newsgroup replies quoting a whole post.
* **E** — passages (150–400 characters) of inaugural / State of the Union addresses planted into
  5–20 otherwise unique host documents each.
* Wikipedia pages, movie reviews and addresses come from the benchmark's part of the split with SPH
  training (:mod:`semhash_llm.datasplit`): the shipped model never saw a benchmark document.
* hard negatives (kept): PAWS dev non-paraphrase pairs, same-site Readability pages, QQP non-duplicate
  pairs, STS-B pairs with score ≤ 2; semantic duplicates (scored apart): PAWS dev paraphrase pairs.
"""

from __future__ import annotations

import hashlib
import logging
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import xxhash

from semhash_llm.bench import sources as src
from semhash_llm.bench.perturb import apply_ocr_noise, apply_typos, vary_copy
from semhash_llm.bench.truth import (
    Containment,
    DocInfo,
    Fragment,
    GroundTruth,
    Group,
    NegativeSet,
    Occurrence,
    write_corpus,
)

logger = logging.getLogger(__name__)

__all__ = ["BenchSize", "SizeSpec", "SIZES", "GeneratedBench", "generate"]

BenchSize = Literal["small", "full"]

SAME_SITE_PREFIXES = ("nytimes", "wapo", "yahoo", "medium", "wikipedia", "webmd", "ehow", "mozilla", "lazy-image")
STSB_NEGATIVE_MAX_SCORE = 2.0
SHORT_MIN, SHORT_MAX = 80, 300


@dataclass(frozen=True)
class SizeSpec:
    """How many of each planted structure a size holds (``None``: as many as the data allows)."""

    a_groups: int | None
    b_hot_docs: int
    b_top_count: int
    c_groups: int
    d_excerpts: int
    d_quoted_replies: int
    e_fragments: int
    paws_negative_pairs: int
    qqp_negative_pairs: int
    stsb_negative_pairs: int
    paws_paraphrase_pairs: int
    background_long: int
    background_medium: int
    background_short: int


SIZES: dict[str, SizeSpec] = {
    "small": SizeSpec(
        a_groups=25, b_hot_docs=6, b_top_count=30, c_groups=220, d_excerpts=130, d_quoted_replies=10,
        e_fragments=10, paws_negative_pairs=150, qqp_negative_pairs=120, stsb_negative_pairs=80,
        paws_paraphrase_pairs=80, background_long=300, background_medium=350, background_short=400,
    ),
    "full": SizeSpec(
        a_groups=None, b_hot_docs=25, b_top_count=60, c_groups=1600, d_excerpts=1000, d_quoted_replies=40,
        e_fragments=70, paws_negative_pairs=1000, qqp_negative_pairs=1000, stsb_negative_pairs=600,
        # background_long: what the long pool holds after D and E, with a quarter of the movie reviews and
        # Wikipedia pages left to SPH training (semhash_llm.datasplit); 650 before the split.
        paws_paraphrase_pairs=600, background_long=320, background_medium=2300, background_short=4900,
    ),
}


@dataclass(frozen=True)
class GeneratedBench:
    """Where a generated benchmark lives, and its truth."""

    out_dir: Path
    corpus_path: Path
    truth_path: Path
    truth: GroundTruth
    records: list[dict[str, object]]


class _Pool:
    """A shuffled source of texts, drawn without replacement, skipping texts already in the corpus."""

    def __init__(self, name: str, items: list[str], rng: random.Random, used: _Used) -> None:
        self.name = name
        self._items = list(items)
        rng.shuffle(self._items)
        self._pos = 0
        self._used = used

    def take(self, accept: Callable[[str], bool] | None = None) -> str | None:
        while self._pos < len(self._items):
            text = self._items[self._pos]
            self._pos += 1
            if (accept is None or accept(text)) and self._used.claim(text):
                return text
        return None

    def remaining(self) -> int:
        return len(self._items) - self._pos


class _Used:
    """Texts already in the corpus, so that no unplanned duplicate slips in.

    A text is refused if its word sequence or its bag of words is already present, or if it shares any
    word 8-gram (a whole text of fewer than 8 words counts as one gram) with a text already present:
    real sources hold their own near-duplicates (re-run wire stories, quoting replies, PAWS sentences
    reused across pairs) and those would otherwise become unlabelled duplicates of must-keep documents.
    """

    GRAM = 8

    def __init__(self) -> None:
        self._seq: set[str] = set()
        self._bag: set[frozenset[str]] = set()
        self._grams: set[int] = set()

    @classmethod
    def keys(cls, text: str) -> tuple[str, frozenset[str], set[int]]:
        words = re.findall(r"\w+", text.lower())
        n = cls.GRAM
        grams = {xxhash.xxh3_64_intdigest(" ".join(words[i : i + n]).encode()) for i in range(max(1, len(words) - n + 1))}
        return " ".join(words), frozenset(words), grams

    def free(self, *texts: str, grams: bool = True) -> bool:
        for seq, bag, gr in map(self.keys, texts):
            if seq in self._seq or bag in self._bag or (grams and not gr.isdisjoint(self._grams)):
                return False
        return True

    def claim(self, *texts: str, grams: bool = True) -> bool:
        """Claim all texts at once if none collides with the corpus (they may overlap each other).

        ``grams=False`` checks and records only the exact keys (used for re-wrapped type-A pages, whose
        donor chrome legitimately recurs).
        """
        if not self.free(*texts, grams=grams):
            return False
        for t in texts:
            seq, bag, gr = self.keys(t)
            self._seq.add(seq)
            self._bag.add(bag)
            if grams:
                self._grams.update(gr)
        return True


@dataclass
class _Doc:
    text: str
    role: str
    source: str
    key: str  # a provisional label used to wire the truth before ids are assigned


def _rng(seed: int, name: str) -> random.Random:
    return random.Random(f"semhash-llm-bench:{seed}:{name}")


def _word_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """Move ``start`` forward to a word start and ``end`` back to a word end."""
    while 0 < start < len(text) and not (text[start - 1].isspace() and not text[start].isspace()):
        start += 1
    while end < len(text) and 0 < end and not (not text[end - 1].isspace() and text[end].isspace()):
        end -= 1
    return start, end


def _sentence_split(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", re.sub(r"\s+", " ", text)) if s.strip()]


def generate(
    data_dir: Path | str,
    size: BenchSize | str,
    seed: int,
    out_dir: Path | str,
    spec: SizeSpec | None = None,
) -> GeneratedBench:
    """Build the benchmark corpus and truth into ``out_dir`` (created if needed).

    ``spec`` replaces the counts of ``size`` (tests use tiny specs); ``size`` is still recorded in the truth.
    """
    data = Path(data_dir)
    if not data.is_dir():
        raise src.DataError(f"benchmark data directory {data} does not exist (pass --data DIR or set SEMHASH_LLM_DATA)")
    if spec is None:
        if size not in SIZES:
            raise ValueError(f"The 'size' parameter of generate must be one of {sorted(SIZES)}. Got {size!r} instead.")
        spec = SIZES[size]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    docs: list[_Doc] = []
    used = _Used()
    groups: list[tuple[str, str, list[str]]] = []  # (group_id, category, member keys)
    conts: list[tuple[str, str, str, tuple[int, int] | None]] = []
    frags: list[tuple[str, str, list[tuple[str, int, int]]]] = []
    negs: list[tuple[str, list[str]]] = []
    sems: list[tuple[str, str]] = []
    counter = iter(range(10**9))

    def add(text: str, role: str, source: str) -> str:
        key = f"k{next(counter)}"
        docs.append(_Doc(text, role, source, key))
        return key

    # ---- load sources ---------------------------------------------------------------------------
    logger.info("reading source data from %s", data)
    abc = src.read_abc(data)
    # Wikipedia, movie reviews and addresses: only the benchmark's part of the split with SPH training.
    reviews = src.read_movie_reviews(data, part="bench")
    lee = src.read_lee(data)
    wiki = src.read_wikipedia(data, part="bench")
    news = src.read_newsgroups(data)
    webtext = src.read_webtext(data)
    trec = src.read_trec_questions(data)
    qqp = src.read_qqp(data)
    tweets = src.read_tweets(data)
    paws = src.read_paws_dev(data)
    stsb = src.read_stsb(data)
    typos = src.read_codespell(data)
    addresses = src.read_addresses(data, part="bench")
    pages = src.read_readability_pages(data)

    # QQP: questions of duplicate pairs (question 1 only) feed the short pool; non-duplicate pairs are negatives.
    qqp_short = [p.text_a for p in qqp if p.label == 1.0]
    long_texts = [t for t in reviews + abc + lee + wiki if len(t) >= 2000]
    host_texts = [t for t in reviews + abc + lee + wiki if 1200 <= len(t) < 2000]
    medium_texts = [t for t in abc + lee + [w for w in webtext if len(w) >= 300] if 300 <= len(t) < 1200]
    short_texts = [t for t in trec + qqp_short + tweets + webtext if SHORT_MIN <= len(t) <= SHORT_MAX]
    long_pool = _Pool("long", long_texts, _rng(seed, "pool-long"), used)
    host_pool = _Pool("host", host_texts, _rng(seed, "pool-host"), used)
    medium_pool = _Pool("medium", medium_texts, _rng(seed, "pool-medium"), used)
    short_pool = _Pool("short", short_texts, _rng(seed, "pool-short"), used)

    # ---- hard negatives and semantic pairs first (their texts must not be reused elsewhere) --------
    rng = _rng(seed, "negatives")
    site_pages: dict[str, list[src.ReadabilityPage]] = {}
    for p in pages:
        for prefix in SAME_SITE_PREFIXES:
            if re.fullmatch(rf"{re.escape(prefix)}(-\d+)?", p.name):
                site_pages.setdefault(prefix, []).append(p)
    same_site_names: set[str] = set()
    for prefix in sorted(site_pages):
        members = [p for p in site_pages[prefix] if len(p.page_text) >= 300]
        # One template, several articles: the pages share their chrome, so they are claimed together.
        if len(members) >= 2 and used.claim(*[p.page_text for p in members]):
            negs.append(("same_site_template", [add(p.page_text, "negative", f"readability:{p.name}") for p in members]))
        same_site_names.update(p.name for p in site_pages[prefix])

    def add_pairs(pairs: list[src.TextPair], want: int, family: str | None, source: str) -> None:
        order = list(pairs)
        rng.shuffle(order)
        n = 0
        for pair in order:
            if n >= want:
                break
            if not pair.text_a or not pair.text_b or not used.claim(pair.text_a, pair.text_b):
                continue
            role = "negative" if family else "semantic"
            ka, kb = add(pair.text_a, role, source), add(pair.text_b, role, source)
            if family:
                negs.append((family, [ka, kb]))
            else:
                sems.append((ka, kb))
            n += 1
        if n < want:
            logger.warning("%s: only %d of %d pairs available", family or "semantic pairs", n, want)

    add_pairs([p for p in paws if p.label == 0.0], spec.paws_negative_pairs, "paws_non_paraphrase", "paws_dev")
    add_pairs([p for p in paws if p.label == 1.0], spec.paws_paraphrase_pairs, None, "paws_dev")
    add_pairs([p for p in qqp if p.label == 0.0], spec.qqp_negative_pairs, "qqp_non_duplicate", "qqp")
    add_pairs([p for p in stsb if p.label <= STSB_NEGATIVE_MAX_SCORE], spec.stsb_negative_pairs, "stsb_low_score", "stsb")

    # ---- A: articles re-wrapped in other pages' real chrome ----------------------------------------
    rng = _rng(seed, "A")
    candidates = [
        p for p in pages
        if p.name not in same_site_names and len(p.article_text) >= 500 and used.free(p.article_text)
    ]
    donors = [p for p in candidates if len(p.head_boilerplate) + len(p.tail_boilerplate) >= 300]
    rng.shuffle(candidates)
    n_a = len(candidates) if spec.a_groups is None else min(spec.a_groups, len(candidates))
    for gi, page in enumerate(candidates[:n_a]):
        wraps = [d for d in donors if d.name != page.name]
        k = rng.randint(1, 3)
        texts: list[tuple[str, str]] = []
        if len(page.head_boilerplate) + len(page.tail_boilerplate) >= 100:
            texts.append((page.page_text, f"readability:{page.name}"))
        for donor in rng.sample(wraps, k):
            parts = [donor.head_boilerplate, page.article_text, donor.tail_boilerplate]
            texts.append(("\n".join(x for x in parts if x), f"readability:{page.name}+chrome:{donor.name}"))
        if len(texts) < 2:
            continue
        if not used.claim(page.article_text) or not used.claim(*[t for t, _ in texts], grams=False):
            continue
        groups.append((f"A-{gi:04d}", "A", [add(t, "group_member", s) for t, s in texts]))

    # ---- B: hot spots copied tens of times (Zipf counts) --------------------------------------------
    rng = _rng(seed, "B")
    for rank in range(1, spec.b_hot_docs + 1):
        base = medium_pool.take()
        if base is None:
            raise src.DataError("not enough medium-length documents for type B hot spots")
        count = max(5, -(-spec.b_top_count // rank))
        copies = [base]
        tries = 0
        while len(copies) < count and tries < count * 20:
            tries += 1
            text = base if rng.random() < 0.25 else vary_copy(base, rng)[0]
            if text != base and text in copies:
                continue
            copies.append(text)
        groups.append((f"B-{rank:04d}", "B", [add(t, "group_member", "hot_spot") for t in copies]))

    # ---- C: short texts with real misspellings and OCR noise ----------------------------------------
    rng = _rng(seed, "C")
    for gi in range(spec.c_groups):
        base = short_pool.take()
        if base is None:
            logger.warning("type C: short pool exhausted after %d groups", gi)
            break
        n_copies = rng.randint(1, 3)
        noisy_copies: list[str] = []
        tries = 0
        while len(noisy_copies) < n_copies and tries < 50:
            tries += 1
            noisy, _ = apply_typos(base, typos, rng, rng.randint(1, 2))
            noisy = apply_ocr_noise(noisy, rng, rng.randint(0 if noisy != base else 1, 3))
            if noisy != base and noisy not in noisy_copies:
                noisy_copies.append(noisy)
        groups.append((f"C-{gi:04d}", "C", [add(t, "group_member", "short") for t in [base, *noisy_copies]]))

    # ---- D: excerpts of long documents and quoted newsgroup replies -----------------------------------
    rng = _rng(seed, "D")
    for _ in range(spec.d_excerpts):
        parent = long_pool.take()
        if parent is None:
            logger.warning("type D: long pool exhausted")
            break
        frac = rng.uniform(0.3, 0.7)
        length = int(len(parent) * frac)
        start = rng.randint(0, len(parent) - length)
        s, e = _word_bounds(parent, start, start + length)
        child = parent[s:e]
        kp = add(parent, "d_parent", "long")
        kc = add(child, "d_child", "long_excerpt")
        conts.append((kc, kp, "excerpt", (s, e)))
    posts = [p for p in news if len(p.body) >= 300]
    consumed: set[str] = set()  # repliers whose own words went into a reply: never used again
    rng.shuffle(posts)
    n_q = 0
    while n_q < spec.d_quoted_replies and len(posts) >= 2:
        post, replier = posts.pop(), posts.pop()
        consumed.add(replier.origin)
        own = "\n".join(
            ln for ln in replier.body.split("\n")
            if not ln.lstrip().startswith((">", "|")) and not re.search(r"\bwrites:\s*$|\bwrote:\s*$", ln)
        ).strip()
        if len(own) < 100:
            continue
        quoted = "\n".join(f"> {ln}" if ln else ">" for ln in post.body.split("\n"))
        subject = post.subject or "(no subject)"
        reply = f"Subject: Re: {subject}\n\nIn a previous article, the poster writes:\n{quoted}\n\n{own}"
        if not used.claim(post.text, reply):
            continue
        kp = add(reply, "d_parent", "newsgroup_reply")
        kc = add(post.text, "d_child", "newsgroup")
        conts.append((kc, kp, "quoted_reply", None))
        n_q += 1

    # ---- E: passages of addresses planted into 5–20 unique hosts --------------------------------------
    rng = _rng(seed, "E")
    for fi in range(spec.e_fragments):
        passage = None
        for _ in range(100):
            sents = _sentence_split(rng.choice(addresses))
            if len(sents) < 4:
                continue
            i = rng.randrange(len(sents))
            acc = ""
            for sent in sents[i:]:
                acc = f"{acc} {sent}".strip()
                if len(acc) >= 150:
                    break
            if 150 <= len(acc) <= 400 and used.claim(acc):
                passage = acc
                break
        if passage is None:
            logger.warning("type E: could not draw passage %d", fi)
            continue
        n_hosts = rng.randint(5, 20)
        occ: list[tuple[str, int, int]] = []
        for _ in range(n_hosts):
            host = host_pool.take() or long_pool.take()
            if host is None:
                break
            cuts = [m.end() for m in re.finditer(r"[.!?]\s+", host)]
            mid = [c for c in cuts if 0.2 * len(host) <= c <= 0.8 * len(host)] or [len(host)]
            pos = rng.choice(mid)
            before = host[:pos]
            sep = "" if before.endswith((" ", "\n")) or not before else " "
            text = f"{before}{sep}{passage} {host[pos:]}".rstrip()
            start = len(before) + len(sep)
            occ.append((add(text, "e_host", "host"), start, start + len(passage)))
        if len(occ) >= 2:
            frags.append((f"E-{fi:04d}", passage, occ))
        else:
            for key, _, _ in occ:  # too few hosts left: they stay as plain background
                next(d for d in docs if d.key == key).role = "background"

    # ---- background unique documents ------------------------------------------------------------------
    for pool, want in ((long_pool, spec.background_long), (medium_pool, spec.background_medium),
                       (short_pool, spec.background_short)):
        got = 0
        while got < want:
            bg = pool.take()
            if bg is None:
                logger.warning("background: pool %s exhausted at %d of %d", pool.name, got, want)
                break
            add(bg, "background", pool.name)
            got += 1
    for np_ in news:  # remaining newsgroup posts are long-ish unique background
        if len(np_.body) >= 300 and np_.origin not in consumed and used.claim(np_.text):
            add(np_.text, "background", "newsgroup")

    # ---- assign ids in a shuffled order, write --------------------------------------------------------
    order = list(range(len(docs)))
    _rng(seed, "order").shuffle(order)
    key_to_id = {docs[i].key: f"doc-{rank:06d}" for rank, i in enumerate(order)}
    records: list[dict[str, object]] = [{"id": key_to_id[docs[i].key], "text": docs[i].text} for i in order]
    texts_by_id = {r["id"]: r["text"] for r in records}
    corpus_path = out / "corpus.jsonl"
    write_corpus(corpus_path, records)
    digest = hashlib.sha256(corpus_path.read_bytes()).hexdigest()

    truth = GroundTruth(
        seed=seed,
        size=str(size),
        corpus_sha256=digest,
        documents={
            key_to_id[docs[i].key]: DocInfo(docs[i].role, docs[i].source, len(docs[i].text))  # type: ignore[arg-type]
            for i in order
        },
        groups=[Group(g, c, tuple(key_to_id[k] for k in m)) for g, c, m in groups],  # type: ignore[arg-type]
        containments=[Containment(key_to_id[c], key_to_id[p], kind, span) for c, p, kind, span in conts],  # type: ignore[arg-type]
        fragments=[
            Fragment(fid, text, tuple(Occurrence(key_to_id[k], s, e) for k, s, e in occ)) for fid, text, occ in frags
        ],
        negatives=[NegativeSet(f, tuple(key_to_id[k] for k in m)) for f, m in negs],
        semantic_pairs=[(key_to_id[a], key_to_id[b]) for a, b in sems],
    )
    truth.check(texts_by_id)  # type: ignore[arg-type]
    truth_path = out / "truth.json"
    truth.write(truth_path)
    logger.info("benchmark %s/seed %d: %s", size, seed, truth.counts())
    return GeneratedBench(out, corpus_path, truth_path, truth, records)
