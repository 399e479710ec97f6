"""Stage ``passages`` (config ``passages``; the paper's containment and viral fragments, types D and E).

While the input streams, every document that reaches the feature stages is cut into
passages (:func:`semhash_llm.text.passages.passages_batch`: sentences grouped to a minimum
length, content-anchored windows where text has no boundaries), each with code-point
offsets into the original text, an exact key and near keys. The keys go to two
:class:`~semhash_llm.storage.spill.KeyOccurrences` (sorted runs spilled to disk past the
memory budget); per passage only its document, offsets and token count are kept.

After the stream, in this order:

1. **Containment.** Every key found in 2..``max_group`` documents proposes its pairs of
   passages. A child passage is *found* in another document when an exact key matches, or
   when at least ``MIN_NEAR_BANDS`` of its near keys (LSH bands) match *one* passage there:
   one band alone collides too easily on low-entropy text, and bands gathered over the
   hundreds of passages of a long page are chance, not a copy. A document with at least
   ``containment`` of its passages found in another document is a candidate child of it
   when that document holds clearly more of its own (its passages not found in the child
   outnumber the child's own by more than ``max_novel_passages``, and it is at least
   ``parent_min_ratio`` times as long; with ``weighted``, shares count each passage by its
   line cue, :func:`semhash_llm.text.lines.span_line_cues`, so that the menus of a site
   template weigh ~0); two versions of one text
   that each keep some of their own are linked by an undirected near-duplicate edge
   (``PASSAGE_NEAR_EDGE_KIND``) instead, and the keep policy decides. A candidate child is
   dropped when:

   * it has a block of its own — more than ``max_novel_passages`` prose passages in a row
     (and more than ``max_novel_share`` of its passages) found nowhere in the parent: the
     same site template around another, shorter article. Passages of fewer than
     ``PROSE_TOKENS_PER_LINE`` tokens a line (menus, link lists) are not prose: its own
     template is not content of its own, so they do not add to a run;
   * it has fewer than ``short_child_passages`` passages and its text, re-read from the
     source, is not contained in the parent's over shingles (the smaller of character
     4-gram and word 3-gram containment, :mod:`semhash_llm.text.containment`, below
     ``short_containment``): one sentence found near-exactly in a long page is as often a
     lookalike or a word swap as a copy.

   The best parent (highest share, then most passages) gets a directed edge child →
   parent, ``relation=contained_in``; the parent is kept whatever the keep policy. A
   document that quotes a sentence or two of another stays: its share is small.
2. **Viral fragments.** Every exact key found in at least ``fragment_min_docs`` distinct
   clusters (after containment, so a parent and its excerpts count once) with at least
   ``fragment_min_words`` tokens is a viral fragment. Which host keeps it is decided after
   selection (:func:`resolve_fragments`): among the *kept* hosts, the first
   (``fragment_keep="longest"``: the longest); every other kept host loses it, with the
   short sentence beside it when all kept hosts share that too. A document never loses more
   than ``max_cut_share`` of its characters: past that it is left whole and counted.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator

import numba as nb
import numpy as np

from semhash_llm.config import NormalizeConfig, PassageConfig
from semhash_llm.pipeline.edges import EdgeKind
from semhash_llm.stages.base import (
    DecideContext,
    Decision,
    Edges,
    FragmentCandidates,
    Fragments,
    StreamBatch,
    read_pair_texts,
)
from semhash_llm.storage.spill import KeyOccurrences
from semhash_llm.text.containment import shingle_containment
from semhash_llm.text.lines import span_line_cues
from semhash_llm.text.normalize import char_classes
from semhash_llm.text.passages import passages_batch

__all__ = ["PassageStage", "CONTAINED_EDGE_KIND", "PASSAGE_NEAR_EDGE_KIND", "resolve_fragments"]

logger = logging.getLogger(__name__)

CONTAINED_EDGE_KIND = EdgeKind.CONTAINED
PASSAGE_NEAR_EDGE_KIND = EdgeKind.PASSAGE_NEAR
MIN_NEAR_BANDS = 2
PROSE_TOKENS_PER_LINE = 6
PAIR_OCCURRENCES_PER_DOC = 4
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_TAG_BITS = 5  # extras pack (passage id << 5) | tag: tag = near band, or _EXACT_TAG
_EXACT_TAG = 31
_TAG_MASK = (1 << _TAG_BITS) - 1
_SPACE = re.compile(r"\s*")


@nb.njit(cache=True)
def _group_pairs(offsets: np.ndarray, docs: np.ndarray, extras: np.ndarray, max_docs: int, per_doc: int,
                 out_pid: np.ndarray, out_other: np.ndarray, out_doc: np.ndarray, write: bool) -> int:
    """For every group of 2..``max_docs`` documents: (tagged passage, other passage's tagged
    id, other document) records; the number of records (only counted when not ``write``).

    Records of a group are sorted by document, so each document's occurrences are one run;
    only the first ``per_doc`` of a run take part on either side. A key repeated all over a
    document (a list, a refrain) would otherwise make its group's records grow with the
    square of the repeats; a passage that repeats is found by its first occurrences.
    """
    n_out = 0
    for g in range(offsets.shape[0] - 1):
        s = offsets[g]
        e = offsets[g + 1]
        distinct = 0
        for i in range(s, e):
            if i == s or docs[i] != docs[i - 1]:
                distinct += 1
        if distinct < 2 or distinct > max_docs:
            continue
        rank_i = 0
        for i in range(s, e):
            rank_i = 0 if (i == s or docs[i] != docs[i - 1]) else rank_i + 1
            if rank_i >= per_doc:
                continue
            rank_j = 0
            for j in range(s, e):
                rank_j = 0 if (j == s or docs[j] != docs[j - 1]) else rank_j + 1
                if rank_j >= per_doc or docs[i] == docs[j]:
                    continue
                if write:
                    out_pid[n_out] = extras[i]
                    out_other[n_out] = extras[j]
                    out_doc[n_out] = docs[j]
                n_out += 1
    return n_out


@nb.njit(cache=True)
def _found_runs(pids: np.ndarray, extras: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Scan records sorted by (pair key, child passage, other passage << 5 | tag): the
    (child, other) passage pairs whose distinct tags weigh at least ``MIN_NEAR_BANDS``."""
    n = pids.shape[0]
    out_p = np.empty(n, np.int64)
    out_o = np.empty(n, np.int64)
    k = 0
    i = 0
    while i < n:
        p = pids[i]
        o = extras[i] >> _TAG_BITS
        weight = 0
        last_tag = -1
        j = i
        while j < n and pids[j] == p and (extras[j] >> _TAG_BITS) == o:
            tag = extras[j] & _TAG_MASK
            if tag != last_tag:  # tags ascend within a run: count each once
                weight += MIN_NEAR_BANDS if tag == _EXACT_TAG else 1
                last_tag = tag
            j += 1
        if weight >= MIN_NEAR_BANDS:
            out_p[k] = p
            out_o[k] = o
            k += 1
        i = j
    return out_p[:k], out_o[:k]


def _join(chunks: list[np.ndarray], dtype: type) -> np.ndarray:
    """Concatenate ``chunks`` and empty the list (its arrays are freed once joined)."""
    out = np.concatenate(chunks) if chunks else np.empty(0, dtype)
    chunks.clear()
    return out


def _pair_key(pid: np.ndarray, opid: np.ndarray) -> np.ndarray:
    """A 64-bit key per (child passage, other passage): spreads the pairs over the key space."""
    x = (pid.astype(np.uint64) * _GOLDEN) ^ opid.astype(np.uint64)
    x ^= x >> np.uint64(31)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(29)
    return x


def _space_end(text: str, pos: int) -> int:
    """The end of the whitespace run that starts at ``pos`` (``pos`` itself if none)."""
    m = _SPACE.match(text, pos)
    return m.end() if m is not None else pos


def _longest_unfound_run(a: np.ndarray, b: np.ndarray, child: np.ndarray, other: np.ndarray, pid: np.ndarray,
                         first_pid: np.ndarray, npass: np.ndarray, cum_prose: np.ndarray) -> np.ndarray:
    """For each candidate (child ``a[k]``, parent ``b[k]``): the most prose passages of the
    child between two passages found in the parent (or before the first, after the last).

    ``(child, other, pid)`` lists every child passage found in another document, once;
    ``cum_prose[p]`` counts the prose passages numbered below ``p``. Unfound passages that
    are not prose (menus, link lists) do not add to a run: a child's own template is not
    content of its own.
    """
    if a.size == 0:
        return np.zeros(0, np.int64)
    n = max(int(npass.shape[0]), 1)
    cand = a * n + b
    rows = child * n + other
    keep = np.isin(rows, cand)
    rows, p = rows[keep], pid[keep]
    order = np.lexsort((p, rows))
    rows, p = rows[order], p[order]
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    ends = np.r_[starts[1:], rows.size] - 1
    doc = rows[starts] // n
    gap = np.empty(rows.size, np.int64)
    gap[1:] = cum_prose[p[1:]] - cum_prose[p[:-1] + 1]  # prose passages strictly between two found ones
    gap[starts] = cum_prose[p[starts]] - cum_prose[first_pid[doc]]  # before the first found passage
    inner = np.maximum.reduceat(gap, starts)
    tail = cum_prose[first_pid[doc] + npass[doc]] - cum_prose[p[ends] + 1]  # after the last one
    runs = dict(zip(rows[starts].tolist(), np.maximum(inner, tail).tolist()))
    return np.asarray([runs.get(c, int(npass[x])) for c, x in zip(cand.tolist(), a.tolist())], np.int64)


class PassageStage:
    """Passages while streaming; containment edges and fragment spans after the stream."""

    name = "passages"

    def __init__(self, config: PassageConfig, normalize: NormalizeConfig | None = None) -> None:
        self.config = config
        self.normalize = normalize or NormalizeConfig()
        self._classes = char_classes(self.normalize.strip_punctuation)
        # The budget: a quarter for exact keys (one per passage), half for near keys (one per
        # band) while streaming; the last quarter for the (passage, passage) records of
        # containment after the stream.
        budget = max(config.memory_budget_mb << 20, 4 << 20)
        self.exact_ = KeyOccurrences(memory_budget_bytes=budget // 4)
        self.near_ = KeyOccurrences(memory_budget_bytes=budget // 2)
        self._pair_budget = budget // 4
        self.pair_records_ = 0
        self.pair_key_bytes_spilled_ = 0
        self._doc: list[np.ndarray] = []
        self._start: list[np.ndarray] = []
        self._end: list[np.ndarray] = []
        self._gap_end: list[np.ndarray] = []
        self._prose: list[np.ndarray] = []
        self._weight: list[np.ndarray] = []
        self._ntok: list[np.ndarray] = []
        self._len_doc: list[np.ndarray] = []
        self._len_chars: list[np.ndarray] = []
        self._doc_chars = np.empty(0, np.int64)
        self._num_passages = 0
        self.pairs_scored_ = 0
        self.short_checked_ = 0
        self.novel_rejected_ = 0
        self.near_linked_ = 0
        self.short_accepted_ = 0
        self.short_scores_ = np.empty(0, np.float32)
        self.details_: dict[str, object] = {}

    def process(self, batch: StreamBatch) -> None:
        """Cut the batch's featured documents into passages and record their keys."""
        docs = batch.feature_docs
        if docs.size == 0:
            return
        cfg = self.config
        texts = [batch.texts[j] for j in docs.tolist()]
        pb = passages_batch(texts, min_words=cfg.min_words, max_words=cfg.max_words, window=cfg.window,
                            stride=cfg.stride, near_bands=cfg.near_bands, near_rows=cfg.near_rows,
                            normalize_config=self.normalize)
        gdoc = batch.index[docs][pb.doc]
        pid = np.arange(self._num_passages, self._num_passages + len(pb), dtype=np.int64)
        self._num_passages += len(pb)
        self._doc.append(gdoc)
        # Offsets and counts as int32 where they fit (any text under 2 GiB): 25 bytes a passage.
        narrow = np.int32 if (pb.end.size == 0 or int(pb.end.max()) < 2**31 - 1) else np.int64
        self._start.append(pb.start.astype(narrow))
        self._end.append(pb.end.astype(narrow))
        # Where the whitespace after each passage ends: cut passages that only whitespace
        # separates become one span (a fragment of several sentences is one cut).
        self._gap_end.append(np.fromiter((_space_end(texts[d], e) for d, e in zip(pb.doc.tolist(), pb.end.tolist())),
                                         dtype=narrow, count=len(pb)))
        self._ntok.append(pb.ntok.astype(narrow))
        # Prose or list? Tokens per line of the passage: menus, link lists and tables of a
        # page template run a few tokens a line, sentences of an article many.
        lines = np.fromiter((texts[d].count("\n", s, e) + 1 for d, s, e in
                             zip(pb.doc.tolist(), pb.start.tolist(), pb.end.tolist())), dtype=np.int64, count=len(pb))
        self._prose.append(pb.ntok >= PROSE_TOKENS_PER_LINE * lines)
        # The passage's weight in containment shares: AW-MinHash's line cue (a sentence ~1, a menu
        # entry ~0.05) over the lines it spans, so that shared page chrome does not make one page
        # "contained" in another of the same site.
        self._weight.append(span_line_cues(texts, self._classes, pb.doc, pb.start, pb.end, cfg.line_midpoint,
                                           cfg.line_scale) if cfg.weighted else np.ones(len(pb), np.float32))
        self._len_doc.append(batch.index[docs])
        self._len_chars.append(np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts)))
        if len(pb):
            self.exact_.add(pb.exact_hi, gdoc, (pid << _TAG_BITS) | _EXACT_TAG)
            bands = pb.near.shape[1]
            band = np.arange(bands, dtype=np.int64)
            self.near_.add((pb.near ^ (band.astype(np.uint64) * _GOLDEN)[None, :]).reshape(-1),
                           np.repeat(gdoc, bands), ((pid[:, None] << _TAG_BITS) | band[None, :]).reshape(-1))

    def decide(self, ctx: DecideContext) -> Decision:
        """Containment edges (directed), then fragment spans over the clusters they form."""
        try:
            # One array per column; each list of chunks is released as soon as it is joined,
            # so the join costs one column's size at a time, not the whole state again.
            pdoc = _join(self._doc, np.int64)
            pstart = _join(self._start, np.int64)
            pend = _join(self._end, np.int64)
            pntok = _join(self._ntok, np.int64)
            pgap = _join(self._gap_end, np.int64)
            prose = _join(self._prose, np.bool_)
            pweight = _join(self._weight, np.float32)
            cum_prose = np.zeros(prose.size + 1, np.int64 if prose.size >= 2**31 - 1 else np.int32)
            np.cumsum(prose, out=cum_prose[1:])
            del prose
            npass = np.bincount(pdoc, minlength=ctx.num_docs)
            self._doc_chars = np.full(ctx.num_docs, -1, np.int64)
            for d, c in zip(self._len_doc, self._len_chars):
                self._doc_chars[d] = c
            self._len_doc.clear()
            self._len_chars.clear()
            first_pid = np.zeros(ctx.num_docs, np.int64)
            if pdoc.size:  # passages are numbered in document order: each document's run starts here
                starts = np.flatnonzero(np.r_[True, pdoc[1:] != pdoc[:-1]])
                first_pid[pdoc[starts]] = starts
            edges, children = self._containment(ctx, pdoc, npass, first_pid, cum_prose, pweight)
            candidates, frag_details = self._fragments(ctx, pdoc, pstart, pend, pgap, pntok)
            self.details_ = {
                "passages": int(pdoc.size),
                "documents_with_passages": int(np.count_nonzero(npass)),
                "pairs_scored": self.pairs_scored_,
                "contained": int(children.size),
                "near_duplicates": self.near_linked_,
                "novel_block_rejected": self.novel_rejected_,
                "short_children_checked": self.short_checked_,
                "short_children_accepted": self.short_accepted_,
                **frag_details,
                "exact_key_runs_spilled": self.exact_.runs_spilled_,
                "near_key_runs_spilled": self.near_.runs_spilled_,
                "pair_records": self.pair_records_,
                "key_bytes_spilled": self.exact_.bytes_spilled_ + self.near_.bytes_spilled_
                + self.pair_key_bytes_spilled_,
            }
            return Decision(edges, docs_in=int(np.count_nonzero(self._doc_chars >= 0)), pairs_in=self.pairs_scored_,
                            pairs_out=len(edges), details=dict(self.details_), children=children,
                            fragment_candidates=candidates)
        finally:
            self.exact_.close()
            self.near_.close()

    # ---- containment -------------------------------------------------------------------

    def _pair_records(self, occ: KeyOccurrences) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        empty = np.empty(0, np.int64)
        for batch in occ.groups(min_distinct=2):
            offsets = batch.offsets.astype(np.int64)
            args = (offsets, batch.docs, batch.extras, self.config.max_group, PAIR_OCCURRENCES_PER_DOC)
            count = _group_pairs(*args, empty, empty, empty, False)
            if count == 0:
                continue
            out_pid = np.empty(count, np.int64)
            out_other = np.empty(count, np.int64)
            out_doc = np.empty(count, np.int64)
            _group_pairs(*args, out_pid, out_other, out_doc, True)
            yield out_pid, out_other, out_doc

    def _found_passages(self, pdoc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(child passage, other passage) for every passage found in another document.

        A key's group proposes (child passage, other passage) records; each pair of passages
        weighs its distinct keys — an exact key ``MIN_NEAR_BANDS``, a near band 1 — and the
        child passage is found when the weight reaches ``MIN_NEAR_BANDS``. The bands of one
        pair sit in different groups, so the records go through a third
        :class:`KeyOccurrences` keyed by the pair: memory stays within the budget however
        many records low-entropy text proposes.
        """
        found_pid: list[np.ndarray] = []
        found_opid: list[np.ndarray] = []
        with KeyOccurrences(memory_budget_bytes=self._pair_budget) as pairs:
            for occ in (self.exact_, self.near_):
                for tagged, other_tagged, _ in self._pair_records(occ):
                    self.pair_records_ += int(tagged.size)
                    pid = tagged >> _TAG_BITS
                    opid = other_tagged >> _TAG_BITS
                    pairs.add(_pair_key(pid, opid), pid, (opid << _TAG_BITS) | (tagged & _TAG_MASK))
                if occ is self.near_:
                    self.near_.close()  # only containment reads the near keys
            self.pair_key_bytes_spilled_ = pairs.bytes_spilled_
            for batch in pairs.groups(min_distinct=1):
                pid, opid = _found_runs(batch.docs, batch.extras)
                if pid.size:
                    found_pid.append(pid)
                    found_opid.append(opid)
        if not found_pid:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        return np.concatenate(found_pid), np.concatenate(found_opid)

    def _containment(self, ctx: DecideContext, pdoc: np.ndarray, npass: np.ndarray,
                     first_pid: np.ndarray, cum_prose: np.ndarray, pweight: np.ndarray) -> tuple[Edges, np.ndarray]:
        self.pairs_scored_ = 0
        found_pid, found_opid = self._found_passages(pdoc)
        if found_pid.size == 0:
            return Edges.empty(), np.empty(0, np.int64)
        pid, other = found_pid, pdoc[found_opid]
        # Each child passage counts once per other document (found in one or more of its passages).
        order = np.lexsort((other, pid))
        pid, other = pid[order], other[order]
        first = np.r_[True, (pid[1:] != pid[:-1]) | (other[1:] != other[:-1])]
        pid, other = pid[first], other[first]
        child = pdoc[pid]
        # Count the child's passages found in each other document.
        order = np.lexsort((other, child))
        child, other, pid = child[order], other[order], pid[order]
        starts = np.flatnonzero(np.r_[True, (child[1:] != child[:-1]) | (other[1:] != other[:-1])])
        counts = np.diff(np.r_[starts, child.size])
        a, b = child[starts], other[starts]
        # |A ∩ B| / |A| over the child's passages, each weighing its line cue.
        found_w = np.add.reduceat(pweight[pid].astype(np.float64), starts) if starts.size else np.zeros(0)
        total_w = np.bincount(pdoc, weights=pweight.astype(np.float64), minlength=ctx.num_docs)
        share = found_w / np.maximum(total_w[a], 1e-12)
        self.pairs_scored_ = int(a.size)
        cfg = self.config
        # Directed or not? The parent must hold clearly more of its own than the child does:
        # passages of the parent found nowhere in the child exceed the child's own by more
        # than max_novel_passages, and it is at least parent_min_ratio times as long. Two
        # versions of one text (an edited copy, an 80% excerpt) each have some passages of
        # their own: that is a near duplicate, an undirected edge, and the keep policy picks
        # the survivor.
        n = max(ctx.num_docs, 1)
        key = a * n + b  # ascending: the pairs are sorted by (child, other)
        rkey = b * n + a
        pos = np.minimum(np.searchsorted(key, rkey), max(key.size - 1, 0))
        has_rev = key[pos] == rkey
        rev_count = np.where(has_rev, counts[pos], 0)
        rev_share = np.where(has_rev, share[pos] if share.size else 0.0, 0.0)
        child_own = npass[a] - counts
        parent_own = npass[b] - rev_count
        cand = share >= cfg.containment
        longer = self._doc_chars[b] >= cfg.parent_min_ratio * self._doc_chars[a]
        directed = cand & (parent_own > child_own + cfg.max_novel_passages) & (npass[b] > npass[a]) & longer
        reverse_directed = np.where(has_rev, directed[pos], False)
        big = (npass[a] >= cfg.short_child_passages) & (npass[b] >= cfg.short_child_passages)
        near = cand & ~directed & ~reverse_directed & big
        near_score = np.minimum(share, rev_share)
        near_edges = self._link(ctx, a[near], b[near], near_score[near], PASSAGE_NEAR_EDGE_KIND)
        ok = directed
        a, b, share = a[ok], b[ok], share[ok]
        # A child with a block of its own (max_novel_passages + 1 passages in a row found
        # nowhere in the parent) is another document that shares the rest — typically the
        # same site template around another, shorter article — not an excerpt.
        novel = _longest_unfound_run(a, b, child, other, pid, first_pid, npass, cum_prose)
        del found_pid, found_opid
        own = (novel > cfg.max_novel_passages) & (novel > cfg.max_novel_share * npass[a])
        self.novel_rejected_ = int(np.count_nonzero(own))
        ok = ~own
        a, b, share = a[ok], b[ok], share[ok]
        short = npass[a] < self.config.short_child_passages
        if short.any():
            keep, checked = self._check_short(ctx, a[short], b[short])
            self.short_checked_, self.short_accepted_ = checked, int(np.count_nonzero(keep))
            ok = ~short
            ok[np.flatnonzero(short)[keep]] = True
            share = share.copy()
            share[np.flatnonzero(short)[keep]] = self.short_scores_[keep]
            a, b, share = a[ok], b[ok], share[ok]
        # One parent per child: the highest share, then the most passages, then the first.
        order = np.lexsort((b, -npass[b], -share, a))
        a, b, share = a[order], b[order], share[order]
        best = np.r_[True, a[1:] != a[:-1]] if a.size else np.zeros(0, np.bool_)
        contained = self._link(ctx, a[best], b[best], share[best], CONTAINED_EDGE_KIND)
        self.near_linked_ = len(near_edges)
        # Every child is marked, also one that an earlier stage already put in its parent's
        # cluster (an excerpt LSH or SPH linked as a near duplicate): the keep policy must
        # not pick it over its parent there either.
        return Edges.concat([near_edges, contained]), a[best]

    @staticmethod
    def _link(ctx: DecideContext, a: np.ndarray, b: np.ndarray, score: np.ndarray, kind: int) -> Edges:
        """Union each pair in order; the edges that joined two clusters."""
        ea: list[int] = []
        eb: list[int] = []
        es: list[float] = []
        uf = ctx.union_find
        for x, y, s in zip(a.tolist(), b.tolist(), score.tolist()):
            if uf.union(x, y):
                ea.append(x)
                eb.append(y)
                es.append(s)
        return Edges(np.asarray(ea, np.int64), np.asarray(eb, np.int64), np.asarray(es, np.float32),
                     np.full(len(ea), kind, np.uint8))

    def _check_short(self, ctx: DecideContext, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, int]:
        """Which (short child, parent) candidates are contained over shingles, on the re-read texts."""
        cfg = self.config
        self.short_scores_ = np.zeros(a.size, np.float32)
        if ctx.read_texts is None:
            logger.warning("passages: %d candidate(s) of short children not checked (the source cannot be re-read); "
                           "none of them is counted as contained", a.size)
            return np.zeros(a.size, np.bool_), 0
        texts, ia, ib = read_pair_texts(ctx.read_texts, a, b)
        for k, (x, y) in enumerate(zip(ia.tolist(), ib.tolist())):
            self.short_scores_[k] = shingle_containment(texts[x], texts[y], config=self.normalize)
        return self.short_scores_ >= cfg.short_containment, int(a.size)

    # ---- viral fragments ----------------------------------------------------------------

    def _fragments(self, ctx: DecideContext, pdoc: np.ndarray, pstart: np.ndarray, pend: np.ndarray,
                   pgap: np.ndarray, pntok: np.ndarray) -> tuple[FragmentCandidates, dict[str, object]]:
        """Every occurrence of every repeated passage that qualifies as a viral fragment (an exact
        key in ``fragment_min_docs`` clusters or more, ``fragment_min_words`` tokens or more).
        Which occurrence stays is decided after selection (:func:`resolve_fragments`)."""
        cfg = self.config
        roots = ctx.union_find.roots()
        groups: list[np.ndarray] = []
        occ: list[np.ndarray] = []
        viral = boilerplate = 0
        for batch in self.exact_.groups(min_distinct=cfg.fragment_min_docs, group_of=roots):
            for i in range(len(batch)):
                _, docs, tagged = batch.group(i)
                pids = tagged >> _TAG_BITS
                if pntok[pids[0]] < cfg.fragment_min_words:
                    continue
                occ.append(pids)
                groups.append(np.full(pids.size, viral + boilerplate, np.int64))
                if batch.distinct[i] >= cfg.boilerplate_min_docs:
                    boilerplate += 1
                else:
                    viral += 1
        details: dict[str, object] = {"viral_passages": viral, "boilerplate_passages": boilerplate}
        if not occ:
            return FragmentCandidates.empty(), details
        pids = np.concatenate(occ)
        group = np.concatenate(groups)
        n = pdoc.size
        # The adjacent passage before / after, when it is short (no fragment by itself), in the
        # same document and only whitespace away: cut with the fragment if every kept host has it.
        prev = pids - 1
        has_prev = (pids > 0) & (pdoc[np.maximum(prev, 0)] == pdoc[pids]) & (pntok[np.maximum(prev, 0)]
                                                                           < cfg.fragment_min_words)
        has_prev &= pgap[np.maximum(prev, 0)] >= pstart[pids]
        nxt = pids + 1
        has_next = (nxt < n) & (pdoc[np.minimum(nxt, n - 1)] == pdoc[pids]) & (pntok[np.minimum(nxt, n - 1)]
                                                                             < cfg.fragment_min_words)
        has_next &= pgap[pids] >= pstart[np.minimum(nxt, n - 1)]
        prev_c, next_c = np.maximum(prev, 0), np.minimum(nxt, n - 1)
        cand = FragmentCandidates(
            group, pdoc[pids], pstart[pids], pend[pids], pgap[pids],
            np.where(has_prev, pstart[prev_c], -1), np.where(has_prev, pend[prev_c], -1),
            np.where(has_next, pstart[next_c], -1), np.where(has_next, pend[next_c], -1))
        return cand, details


def _fold(text: str) -> str:
    """A short passage as the hosts are compared on it: case folded, whitespace collapsed."""
    return " ".join(text.casefold().split())


def resolve_fragments(cand: FragmentCandidates, survives: np.ndarray, lengths: np.ndarray,
                      config: PassageConfig,
                      read_texts: Callable[[np.ndarray], list[str]] | None) -> tuple[Fragments, dict[str, int]]:
    """The spans to cut, once selection has decided which documents are kept (``survives``).

    For every repeated passage, the occurrence that stays is chosen among its *kept* hosts —
    the first (``fragment_keep="first"``) or the longest one — and every other kept host loses
    it; occurrences in removed documents do not count, so a host that leaves as a near copy of a
    document without the passage never takes the passage's last copy with it. A short passage
    right before or after the fragment (a sentence under ``fragment_min_words`` tokens) is cut
    with it when every kept host has the same one there (re-read from the source): a fragment is
    cut at its full extent, no dangling half-sentence stays. Spans that overlap or that only
    whitespace separates become one. A document that would lose more than ``max_cut_share`` of
    its characters is left whole (and counted)."""
    empty = {"spans_cut": 0, "documents_cut": 0, "documents_left_whole": 0, "neighbours_cut": 0}
    live = survives[cand.doc] if len(cand) else np.zeros(0, np.bool_)
    if not live.any():
        return Fragments.empty(), empty
    c = FragmentCandidates(*(getattr(cand, f)[live] for f in FragmentCandidates.FIELDS))
    order = np.lexsort((c.start, c.doc, c.group))
    c = FragmentCandidates(*(getattr(c, f)[order] for f in FragmentCandidates.FIELDS))
    bounds = np.flatnonzero(np.r_[True, c.group[1:] != c.group[:-1], True])
    cut = np.zeros(len(c), np.bool_)
    for g0, g1 in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        docs = c.doc[g0:g1]
        if docs[0] == docs[-1]:
            continue  # one kept host (or none other): it keeps the passage
        if config.fragment_keep == "first":
            keeper = int(docs[0])
        else:  # the longest kept host; the first of the longest on ties
            keeper = int(docs[int(np.argmax(lengths[docs]))])
        cut[g0:g1] = docs != keeper
    start, end, gap = c.start.copy(), c.end.copy(), c.gap.copy()
    neighbours = 0
    # Short neighbours: only for passages cut somewhere, on the texts of their kept hosts.
    groups_cut = np.unique(c.group[cut])
    ask = np.isin(c.group, groups_cut) & ((c.prev_start >= 0) | (c.next_start >= 0))
    if ask.any() and read_texts is not None:
        wanted = np.unique(c.doc[np.isin(c.group, np.unique(c.group[ask]))])
        texts = dict(zip(wanted.tolist(), read_texts(wanted)))
        for g0, g1 in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            if not cut[g0:g1].any():
                continue
            rows = range(g0, g1)
            for s_col, e_col, side in ((c.prev_start, c.prev_end, "prev"), (c.next_start, c.next_end, "next")):
                if (s_col[g0:g1] < 0).any():
                    continue  # some kept host has no short passage there
                said = {_fold(texts[int(c.doc[r])][int(s_col[r]):int(e_col[r])]) for r in rows}
                if len(said) != 1:
                    continue
                for r in rows:
                    if not cut[r]:
                        continue
                    if side == "prev":
                        start[r] = s_col[r]
                    else:
                        end[r] = e_col[r]
                        gap[r] = _space_end(texts[int(c.doc[r])], int(e_col[r]))
                    neighbours += 1
    elif ask.any():
        logger.warning("passages: the short sentences beside %d fragment occurrence(s) were not compared (the "
                       "source cannot be re-read); the fragments are cut without them", int(np.count_nonzero(ask)))
    idx = np.flatnonzero(cut)
    if idx.size == 0:
        return Fragments.empty(), empty
    idx = idx[np.lexsort((end[idx], start[idx], c.doc[idx]))]
    spans: list[tuple[int, int, int]] = []
    reach = -1
    for d, s0, e0, g in zip(c.doc[idx].tolist(), start[idx].tolist(), end[idx].tolist(), gap[idx].tolist()):
        if spans and spans[-1][0] == d and s0 <= reach:
            spans[-1] = (d, spans[-1][1], max(spans[-1][2], e0))
            reach = max(reach, g)
        else:
            spans.append((d, s0, e0))
            reach = g
    cut_chars: dict[int, int] = {}
    for d, s0, e0 in spans:
        cut_chars[d] = cut_chars.get(d, 0) + e0 - s0
    whole = {d for d, n_chars in cut_chars.items() if n_chars > config.max_cut_share * lengths[d]}
    kept_spans = [sp for sp in spans if sp[0] not in whole]
    frags = Fragments(np.array([sp[0] for sp in kept_spans], np.int64), np.array([sp[1] for sp in kept_spans], np.int64),
                      np.array([sp[2] for sp in kept_spans], np.int64))
    return frags, {"spans_cut": len(frags), "documents_cut": int(np.unique(frags.doc).size),
                   "documents_left_whole": len(whole), "neighbours_cut": neighbours}
