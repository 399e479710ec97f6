"""Cheap token importance for AW-MinHash: the teacher's attention distilled into a table and line cues.

The teacher (:class:`~semhash_llm.aw.attention.TeacherImportance`) reads a dozen documents a
second on two cores; a pre-training crawl has billions. :class:`ImportanceModel` predicts the
teacher's per-word importance from what costs nothing at scale::

    log importance(t) = table[bucket(t)] + coef · features(line(t)) + intercept

* ``table`` — one learned log-weight per bucket of token hashes (the top ``bits`` bits of the
  canonical token hash of :func:`~semhash_llm.text.tokenize.tokenize_batch`), ``float16``:
  what kind of word the teacher tends to find central (content words over function words);
* ``features`` — cues of the token's line (:mod:`semhash_llm.text.lines`): the line-length
  logistic ``1 / (1 + exp(-(tokens - midpoint) / scale))``, ``log(1 + tokens)`` and whether
  the line ends a sentence. Nothing relative to the document (such as the line's position):
  the same line gets the same weights in every page that holds it, which is what lets an
  article collide with its copy in other chrome.

:meth:`ImportanceModel.predict` is ``exp`` of that, scaled to mean 1 over each document's
tokens (as the teacher's own importances are, for comparing with it);
:meth:`ImportanceModel.absolute` leaves it unscaled, the same for a token on the same line in
any document (what AW-MinHash weighs with). Fitted by least squares on the log of the teacher's importance
(:func:`fit_importance`): alternating a ridge solve of the line coefficients and a shrunken
mean residual per bucket (``count / (count + l2)``), a few rounds, deterministic.
``semhash-llm train importance`` (:mod:`semhash_llm.train.importance`) runs the teacher over a
sample of permitted text, fits the model, measures its Spearman rank correlation with the
teacher on held-apart documents and writes the model with its card.

:func:`aw_importance` is what the AW stage uses: the model's importance times the a priori
line cue of :func:`~semhash_llm.aw.weights.line_cue_importance` (mode ``"model"``), the line cue
alone (``"line"``) or the teacher itself (``"teacher"``, small corpora and checks).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from semhash_llm.aw.weights import line_cue, mean_one
from semhash_llm.sph.evaluate import spearman as rank_correlation
from semhash_llm.text.lines import LineBatch
from semhash_llm.text.tokenize import TokenizedBatch

__all__ = ["LINE_FEATURES", "ImportanceModel", "line_features", "fit_importance", "spearman",
           "default_importance_path"]

logger = logging.getLogger(__name__)

LINE_FEATURES: tuple[str, ...] = ("line_cue", "log_tokens", "terminal")
_LOG_CLIP = 4.0


def default_importance_path() -> Path:
    """The importance model shipped in the package (trained by ``semhash-llm train importance``)."""
    return Path(__file__).resolve().parent.parent / "assets" / "importance" / "importance.npz"


def line_features(tokens: TokenizedBatch, lines: LineBatch, midpoint: float = 8.0, scale: float = 2.0) -> np.ndarray:
    """``(n_tokens, len(LINE_FEATURES))`` float32: the cues of each token's line."""
    if lines.tok_line.shape != tokens.tok_hashes.shape:
        raise ValueError("line_features: the lines were not computed from these tokens "
                         f"({lines.tok_line.size} token lines for {tokens.tok_hashes.size} tokens)")
    line = lines.tok_line
    out = np.empty((line.size, len(LINE_FEATURES)), dtype=np.float32)
    out[:, 0] = line_cue(tokens, lines, midpoint, scale)
    out[:, 1] = np.log1p(lines.tokens[line].astype(np.float64))
    out[:, 2] = lines.terminal[line]
    return out


def _mean_one(log_imp: np.ndarray, tok_offsets: np.ndarray) -> np.ndarray:
    """``exp(log_imp)`` scaled to mean 1 over each document's tokens (float32)."""
    return mean_one(np.exp(np.clip(log_imp, -_LOG_CLIP, _LOG_CLIP)), tok_offsets)


@dataclass(frozen=True)
class ImportanceModel:
    """A per-bucket token log-weight table plus line-cue coefficients (module docstring)."""

    table: np.ndarray
    coef: np.ndarray
    intercept: float
    midpoint: float = 8.0
    scale: float = 2.0
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        size = int(self.table.size)
        if self.table.ndim != 1 or size < 2 or size & (size - 1):
            raise ValueError(f"ImportanceModel.table must be 1-D with a power-of-two size >= 2; got shape "
                             f"{self.table.shape}")
        if self.coef.shape != (len(LINE_FEATURES),):
            raise ValueError(f"ImportanceModel.coef must have {len(LINE_FEATURES)} entries ({', '.join(LINE_FEATURES)});"
                             f" got shape {self.coef.shape}")
        if not (np.all(np.isfinite(self.table)) and np.all(np.isfinite(self.coef)) and math.isfinite(self.intercept)):
            raise ValueError("ImportanceModel: table, coef and intercept must be finite")
        if not (math.isfinite(self.scale) and self.scale > 0 and math.isfinite(self.midpoint)):
            raise ValueError(f"ImportanceModel needs a finite midpoint and a scale > 0; got {self.midpoint}, {self.scale}")

    @property
    def bits(self) -> int:
        return int(self.table.size).bit_length() - 1

    def buckets(self, tok_hashes: np.ndarray) -> np.ndarray:
        """The table bucket of each token hash (its top ``bits`` bits)."""
        return (np.asarray(tok_hashes, dtype=np.uint64) >> np.uint64(64 - self.bits)).astype(np.int64)

    def log_importance(self, tokens: TokenizedBatch, lines: LineBatch) -> np.ndarray:
        """The unnormalized log importance of every token (float64)."""
        x = line_features(tokens, lines, self.midpoint, self.scale)
        return (self.table.astype(np.float64)[self.buckets(tokens.tok_hashes)]
                + x.astype(np.float64) @ self.coef.astype(np.float64) + self.intercept)

    def absolute(self, tokens: TokenizedBatch, lines: LineBatch) -> np.ndarray:
        """``exp`` of the log importance of every token, unscaled (float32)."""
        return np.exp(np.clip(self.log_importance(tokens, lines), -_LOG_CLIP, _LOG_CLIP)).astype(np.float32)

    def predict(self, tokens: TokenizedBatch, lines: LineBatch) -> np.ndarray:
        """Importance of every token (float32, mean 1 over each document's tokens)."""
        return _mean_one(self.log_importance(tokens, lines), tokens.tok_offsets)

    # ------------------------------------------------------------------ files

    def save(self, path: str | Path) -> Path:
        """Write the model as one ``.npz`` (the table in float16; metadata as JSON)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as fh:
            np.savez_compressed(fh, table=self.table.astype(np.float16), coef=self.coef.astype(np.float32),
                                scalars=np.array([self.intercept, self.midpoint, self.scale], dtype=np.float64),
                                meta=np.array(json.dumps(self.meta, sort_keys=True)))
        return path

    @classmethod
    def load(cls, path: str | Path | None = None) -> ImportanceModel:
        """Read a model written by :meth:`save` (``None``: the one shipped in the package)."""
        path = Path(path) if path is not None else default_importance_path()
        if not path.is_file():
            hint = ("reinstall the package" if path == default_importance_path() else
                    "train one with `semhash-llm train importance --out DIR` and pass DIR/importance.npz")
            raise FileNotFoundError(f"{path}: no importance model there; {hint}")
        try:
            with np.load(path, allow_pickle=False) as z:
                table = z["table"].astype(np.float32)
                coef = z["coef"].astype(np.float32)
                intercept, midpoint, scale = (float(v) for v in z["scalars"])
                meta = json.loads(str(z["meta"]))
        except (KeyError, ValueError, OSError) as exc:
            raise ValueError(f"{path}: not an importance model written by ImportanceModel.save ({exc})") from exc
        return cls(table, coef, intercept, midpoint, scale, meta)


def fit_importance(tok_hashes: np.ndarray, features: np.ndarray, target: np.ndarray, bits: int = 16,
                   l2: float = 20.0, rounds: int = 8, midpoint: float = 8.0, scale: float = 2.0,
                   meta: dict[str, Any] | None = None) -> ImportanceModel:
    """Least squares of ``target`` (log teacher importance per token) on the table and line cues.

    ``tok_hashes`` (n,), ``features`` (n, len(LINE_FEATURES)) from :func:`line_features`,
    ``target`` (n,) finite. Alternates the ridge solve of the coefficients (with intercept)
    and the per-bucket mean residual shrunk by ``count / (count + l2)``.
    """
    hashes = np.asarray(tok_hashes, dtype=np.uint64)
    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(target, dtype=np.float64)
    n = hashes.size
    if x.shape != (n, len(LINE_FEATURES)) or y.shape != (n,):
        raise ValueError(f"fit_importance: {n} tokens need features of shape ({n}, {len(LINE_FEATURES)}) and a "
                         f"target of shape ({n},); got {x.shape} and {y.shape}")
    if n == 0 or not np.all(np.isfinite(y)) or not np.all(np.isfinite(x)):
        raise ValueError("fit_importance needs at least one token and finite features and target")
    if not (1 <= bits <= 24) or l2 < 0 or rounds < 1:
        raise ValueError(f"fit_importance: bits in [1, 24], l2 >= 0, rounds >= 1; got {bits}, {l2}, {rounds}")
    bucket = (hashes >> np.uint64(64 - bits)).astype(np.int64)
    counts = np.bincount(bucket, minlength=1 << bits).astype(np.float64)
    table = np.zeros(1 << bits, dtype=np.float64)
    design = np.column_stack([x, np.ones(n)])
    gram = design.T @ design + 1e-6 * np.eye(design.shape[1])
    beta = np.zeros(design.shape[1])
    for _ in range(rounds):
        beta = np.linalg.solve(gram, design.T @ (y - table[bucket]))
        resid = y - design @ beta
        sums = np.bincount(bucket, weights=resid, minlength=1 << bits)
        table = np.where(counts > 0, sums / np.maximum(counts + l2, 1e-12), 0.0)
    return ImportanceModel(table.astype(np.float32), beta[:-1].astype(np.float32), float(beta[-1]), midpoint, scale,
                           dict(meta or {}))


def spearman(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Spearman's rank correlation of two equal-length sequences (NaN when either is constant)."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"spearman needs two 1-D arrays of one length; got {x.shape} and {y.shape}")
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return rank_correlation(x, y)
