"""The one stage protocol every box of the cascade follows.

A stage has a name (the one the funnel, ``--no-<name>`` and ``--only`` use) and two methods:

* :meth:`Stage.process` — what it computes while the input streams: it sees each
  :class:`StreamBatch` (original texts, tokens and digests, per-document status) and keeps
  only fixed-size features (a digest, a signature, a code), never the text. A stage may
  *claim* documents (clear their ``featured`` bit): later stages then compute no features
  for them — the Bloom stage claims its hits, which skip MinHash and SPH;
* :meth:`Stage.decide` — what it decides after the stream: it links its accepted pairs into
  the shared union-find of :class:`DecideContext` and returns them as a :class:`Decision`
  (edges with their kind and score, the documents and pairs it saw, its report details, and
  the documents it claimed wrongly, which later stages must featurize after all).

A stage whose features are a pure function of each text may also offer
``compute(texts) -> dict[str, np.ndarray]`` (one row per text): an engine (``--engine ray``)
then runs it on workers, over the featured texts of each batch, with the stage built once per
worker, and hands the rows back in :attr:`StreamBatch.precomputed`, where ``process`` takes
them instead of computing them (the minhash signatures, the SPH codes).

A stage declares how it relates to the others in one class attribute,
``capabilities = Capabilities(...)`` (:mod:`semhash_llm.pipeline.capabilities`: whether it
claims documents or adjudicates, whose features it reads, what it hands on, which roles it
plays for the others); the stage list itself is :mod:`semhash_llm.pipeline.registry`.

A stage that can say whether a kept document covers a removed one (the cover check before
selection, :mod:`semhash_llm.pipeline.cover`) declares a ``cover_rank`` and offers
``covers(ctx: CoverContext) -> PairCover | None``: built once per selection, the returned
function answers :class:`CoverQuery` batches with a :class:`CoverAnswer` — the pairs its own
bar accepts, with the edge kind and score to report.

The cascade (:mod:`semhash_llm.cascade`) is a loop over the configured stages; it times
both halves, records peak memory and turns each decision into the stage's funnel row the
same way for every stage.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from semhash_llm.config import NormalizeConfig, PipelineConfig, ShingleConfig
from semhash_llm.pipeline.capabilities import capabilities_of
from semhash_llm.sketch.lsh import Confirmation, Deferred, min_equal_slots
from semhash_llm.sketch.unionfind import UnionFind
from semhash_llm.text.tokenize import TokenizedBatch

__all__ = ["ComputesFeatures", "DocStatus", "Edges", "Fragments", "FragmentCandidates", "StreamBatch", "DecideContext",
           "Decision", "Stage", "confirmation", "Deferral", "deferral", "read_pair_texts", "CoverContext", "CoverQuery",
           "CoverAnswer", "PairCover", "StageCover", "role_stage", "DefersPairs"]


class DocStatus:
    """Per-document status codes."""

    OK = 0
    SKIPPED = 1  # bad record, skipped with on_error='skip'
    NO_TOKENS = 2  # only punctuation/symbols/emoji: exact duplicates only, no near-duplicate features


@dataclass
class Edges:
    """Accepted pairs: global document indices, score, and the stage kind that accepted them."""

    a: np.ndarray
    b: np.ndarray
    score: np.ndarray
    kind: np.ndarray

    @classmethod
    def empty(cls) -> Edges:
        return cls(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float32), np.empty(0, np.uint8))

    def __len__(self) -> int:
        return int(self.a.shape[0])

    @classmethod
    def buffer(cls, num_docs: int, kind: int) -> Edges:
        """Room for the edges a linking kernel can accept among ``num_docs`` documents (a forest)."""
        size = max(num_docs - 1, 1)
        return cls(np.empty(size, np.int64), np.empty(size, np.int64), np.empty(size, np.float32),
                   np.full(size, kind, np.uint8))

    def head(self, count: int) -> Edges:
        """The first ``count`` edges, as compact copies."""
        return Edges(self.a[:count].copy(), self.b[:count].copy(), self.score[:count].copy(),
                     self.kind[:count].copy())

    @staticmethod
    def concat(parts: list[Edges]) -> Edges:
        if not parts:
            return Edges.empty()
        return Edges(
            np.concatenate([p.a for p in parts]),
            np.concatenate([p.b for p in parts]),
            np.concatenate([p.score for p in parts]),
            np.concatenate([p.kind for p in parts]),
        )


@dataclass
class Fragments:
    """Character spans ``[start, end)`` cut from kept documents (code points of the original text)."""

    doc: np.ndarray
    start: np.ndarray
    end: np.ndarray

    @classmethod
    def empty(cls) -> Fragments:
        return cls(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64))

    def __len__(self) -> int:
        return int(self.doc.shape[0])

    @staticmethod
    def concat(parts: list[Fragments]) -> Fragments:
        """All spans, sorted by document then start."""
        if not parts:
            return Fragments.empty()
        doc = np.concatenate([p.doc for p in parts])
        start = np.concatenate([p.start for p in parts])
        end = np.concatenate([p.end for p in parts])
        order = np.lexsort((end, start, doc))
        return Fragments(doc[order], start[order], end[order])


@dataclass
class FragmentCandidates:
    """Occurrences of repeated passages whose cuts are decided after selection, when the kept
    documents are known (:func:`semhash_llm.stages.passages.resolve_fragments`): the occurrence
    that stays is chosen among the documents that survive, so a passage is never cut from
    every kept text.

    One row per occurrence: ``group`` (one id per repeated passage), ``doc``, ``start``, ``end``
    (code points of the original text), ``gap`` (where the whitespace after it ends), and the
    adjacent short passage before and after it (``prev_*``, ``next_*``; ``-1``: none), which is
    cut with it when every kept host has the same one."""

    group: np.ndarray
    doc: np.ndarray
    start: np.ndarray
    end: np.ndarray
    gap: np.ndarray
    prev_start: np.ndarray
    prev_end: np.ndarray
    next_start: np.ndarray
    next_end: np.ndarray

    FIELDS: ClassVar[tuple[str, ...]] = ("group", "doc", "start", "end", "gap", "prev_start", "prev_end",
                                         "next_start", "next_end")

    @classmethod
    def empty(cls) -> FragmentCandidates:
        return cls(*(np.empty(0, np.int64) for _ in cls.FIELDS))

    def __len__(self) -> int:
        return int(self.doc.shape[0])

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The columns under ``prefix + name`` (a checkpoint's arrays)."""
        return {prefix + f: getattr(self, f) for f in self.FIELDS}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], prefix: str) -> FragmentCandidates:
        """Read :meth:`to_arrays` back (empty when the arrays are not there)."""
        if prefix + "doc" not in arrays:
            return cls.empty()
        return cls(*(np.asarray(arrays[prefix + f], dtype=np.int64) for f in cls.FIELDS))

    @staticmethod
    def concat(parts: list[FragmentCandidates]) -> FragmentCandidates:
        if not parts:
            return FragmentCandidates.empty()
        return FragmentCandidates(*(np.concatenate([getattr(p, f) for p in parts]).astype(np.int64)
                                    for f in FragmentCandidates.FIELDS))


@dataclass
class StreamBatch:
    """One batch of the stream, as every stage's :meth:`Stage.process` sees it.

    ``index[j]`` is the global document index (input order) of local document ``j``. The
    ``featured`` mask starts as "has tokens" and is narrowed by stages that claim documents.
    """

    index: np.ndarray
    texts: list[str]
    tokens: TokenizedBatch
    status: np.ndarray
    featured: np.ndarray
    normalized: list[str] | None = None
    """The normalized texts the tokens were made from (``None``: a stage normalizes again if it needs them)."""
    precomputed: dict[str, dict[str, np.ndarray]] | None = None
    """Per stage name, the features an engine computed elsewhere for this batch's featured
    documents (in :attr:`feature_docs` order) with that stage's ``compute``: the stage keeps them
    instead of computing them again."""

    def computed(self, stage: str) -> dict[str, np.ndarray] | None:
        """What an engine computed for ``stage`` (``None``: compute here)."""
        return self.precomputed.get(stage) if self.precomputed else None

    def __len__(self) -> int:
        return int(self.index.shape[0])

    @property
    def feature_docs(self) -> np.ndarray:
        """Local indices of the documents that still need features, in input order."""
        return np.flatnonzero(self.featured)


@dataclass
class DecideContext:
    """What a stage's :meth:`Stage.decide` may read and write after the stream."""

    num_docs: int
    status: np.ndarray
    union_find: UnionFind
    stages: dict[str, Stage]
    read_texts: Callable[[np.ndarray], list[str]] | None = None
    """Re-reads the original texts of the given documents from the source, in the order given
    (for stages that check a few candidate pairs on the text itself); ``None`` where the
    source cannot be read again."""
    progress: Callable[[str, int, int | None], None] | None = None
    """``progress(stage, done, total)`` for a stage whose decision takes long (the judge)."""


@dataclass
class Decision:
    """What a stage decided: its accepted edges (already linked) and its funnel numbers."""

    edges: Edges
    docs_in: int
    pairs_in: int = 0
    pairs_out: int = 0
    details: dict[str, Any] = field(default_factory=dict)
    refeature: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    children: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    """Documents that are contained in another one (directed edges: a child never survives its parent)."""
    fragments: Fragments = field(default_factory=Fragments.empty)
    """Spans to cut from documents that stay (viral fragments); dropped for documents removed."""
    fragment_candidates: FragmentCandidates = field(default_factory=FragmentCandidates.empty)
    """Repeated passages whose cuts are decided after selection (one occurrence stays in a kept text)."""


@dataclass
class Deferral:
    """Which pairs a linking stage hands to the verifier rather than deciding them: those with a
    document of ``row`` (per signature row), whose estimate reaches ``share``, into ``buffer``."""

    row: np.ndarray
    share: float
    buffer: Deferred


def read_pair_texts(read_texts: Callable[[np.ndarray], list[str]], a: np.ndarray, b: np.ndarray
                    ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Re-read every distinct document of the pairs ``(a[i], b[i])`` once: the texts, and each
    pair's two positions in them (``texts[ia[i]]``, ``texts[ib[i]]``)."""
    docs = np.unique(np.concatenate([a, b]))
    return read_texts(docs), np.searchsorted(docs, a), np.searchsorted(docs, b)


def role_stage(stages: Mapping[str, Any], role: str) -> Any | None:
    """The first stage (in cascade order) whose :class:`~semhash_llm.pipeline.capabilities.Capabilities`
    declare ``role`` (``"offers_deferral"``, ``"offers_confirmation"``, ...), or ``None``."""
    for stage in stages.values():
        if getattr(capabilities_of(stage), role):
            return stage
    return None


def deferral(ctx: DecideContext, rows: np.ndarray) -> Deferral:
    """The deferral the stage that ``offers_deferral`` (the verifier) makes for documents
    ``rows`` (its ``deferral(rows)`` method), or none: nothing deferred."""
    stage = role_stage(ctx.stages, "offers_deferral")
    if stage is not None:
        found = stage.deferral(rows)
        if isinstance(found, Deferral):
            return found
    return Deferral(np.zeros(len(rows), dtype=np.bool_), 1.0, Deferred.buffer(0))


def confirmation(ctx: DecideContext, sigs: np.ndarray, rows: np.ndarray, threshold: float) -> Confirmation:
    """How a stage confirms its candidate pairs: on its own signatures ``sigs`` (of documents
    ``rows``) at ``threshold``, unless the stage that ``offers_confirmation`` offers better ones
    for some pairs; pairs of short documents go to the verifier when one runs (:func:`deferral`).

    The confirming stage's ``confirmation(rows, threshold)`` (AW-MinHash: weighted signatures,
    on which shared page chrome weighs ~0) returns ``(alt_sigs, alt_min_equal, alt_row)``:
    its signatures, the slots that must agree, and for each of ``rows`` its row there (``-1``:
    none; a pair is confirmed on them when both documents have one), or ``None``.
    """
    d = deferral(ctx, rows)
    min_equal = min_equal_slots(threshold, sigs.shape[1])
    stage = role_stage(ctx.stages, "offers_confirmation")
    found = stage.confirmation(rows, threshold) if stage is not None else None
    if found is not None:
        alt, alt_min, alt_row = found
        return Confirmation(sigs, min_equal, alt, alt_min, alt_row, d.row, d.share, d.buffer)
    return Confirmation(sigs, min_equal, sigs, min_equal, np.full(sigs.shape[0], -1, dtype=np.int64), d.row, d.share,
                        d.buffer)


@dataclass
class CoverContext:
    """What a stage's ``covers`` reads, once per selection (:mod:`semhash_llm.pipeline.cover`)."""

    num_docs: int
    config: PipelineConfig
    stages: Mapping[str, Any]
    edges: Edges
    """Every accepted edge of the run (all stages)."""
    confirmed: np.ndarray
    """Per document: it has a signature of the stage that ``offers_confirmation`` (AW-MinHash with
    ``confirm`` on); a pair of two such documents is confirmed on those signatures, so another
    stage's plain estimate does not cover it."""
    read_texts: Callable[[np.ndarray], list[str]] | None = None
    lengths: np.ndarray | None = None
    """Characters per document (``None``: unknown; a stage that needs them answers nothing)."""


@dataclass
class CoverQuery:
    """A batch of (removed document, keeper) pairs, each as its exact classes' representatives
    (an exact copy stands for the copy Bloom did not claim, which has the features)."""

    docs: np.ndarray
    keepers: np.ndarray
    keys: np.ndarray
    """``docs * num_docs + keepers``: the key a stage caches an answer under."""
    open: np.ndarray
    """Which pairs nothing asked before has covered: a stage answers only those."""
    estimable: np.ndarray
    """Which pairs a hash estimate may cover: neither document is short enough to be the
    verifier's alone (its ``is_short``)."""


@dataclass
class CoverAnswer:
    """Which of a :class:`CoverQuery`'s pairs a stage covers, and the kind and score to report."""

    hit: np.ndarray
    kind: np.ndarray
    score: np.ndarray

    @classmethod
    def none(cls, size: int) -> CoverAnswer:
        return cls(np.zeros(size, np.bool_), np.zeros(size, np.int64), np.full(size, np.nan))

    def mark(self, at: np.ndarray, kind: int, score: np.ndarray | float) -> CoverAnswer:
        """Cover the query's pairs ``at`` (positions), with the edge kind and score(s) to report."""
        self.hit[at] = True
        self.kind[at] = kind
        self.score[at] = score
        return self


class PairCover(Protocol):
    """A stage's answer to the cover check, built once by its ``covers(ctx)``; ``details`` are
    counts for the report's select row (as ``cover_check_<key>``)."""

    details: dict[str, int]

    def __call__(self, query: CoverQuery) -> CoverAnswer:
        ...


@dataclass
class StageCover:
    """A :class:`PairCover` from a function: what a stage's ``covers`` usually returns."""

    answer: Callable[[CoverQuery], CoverAnswer]
    details: dict[str, int] = field(default_factory=dict)

    def __call__(self, query: CoverQuery) -> CoverAnswer:
        return self.answer(query)


class DefersPairs(Protocol):
    """What a stage that declares ``defers_pairs`` has: the pairs it hands to the verifier and
    its counters (``counters_[0]``: pairs it proposed)."""

    deferred_: Deferred
    counters_: np.ndarray


@runtime_checkable
class Stage(Protocol):
    """A cascade stage: features while streaming, decisions after."""

    name: str

    def process(self, batch: StreamBatch) -> None:
        """Compute and keep this stage's features of a batch (and claim documents, if it does)."""
        ...

    def decide(self, ctx: DecideContext) -> Decision:
        """Link the accepted pairs into ``ctx.union_find``; return them with the funnel numbers."""
        ...


@runtime_checkable
class ComputesFeatures(Protocol):
    """A stage whose streamed features are a pure function of each text: an engine may compute
    them elsewhere (:attr:`StreamBatch.precomputed`), an index may store them."""

    name: str

    def compute(self, texts: list[str], normalize: NormalizeConfig, shingle: ShingleConfig) -> dict[str, np.ndarray]:
        """One row per text of each feature, as ``process`` keeps them for featured documents."""
        ...
