"""Static student encoder for SPH, distilled from the teacher with paper eq. 2.

The student is a *static* embedding model: one vector per vocabulary token of the
teacher's tokenizer; a document's embedding is the L2-normalised sum of the vectors
of its first ``max_tokens`` tokens. Token importance (SIF weights) is folded into the
vectors' norms. Inference is numpy only and runs thousands of documents a second.

How it is built (``init_static_student`` then ``distill``):

1. **Initialisation** (the model2vec recipe, implemented here): every vocabulary
   token is embedded by the teacher on its own (``[CLS] tok [SEP]``, mean pooling,
   eq. 1); the vectors are projected onto a ``dim``-dimensional basis ``P`` (the top
   principal axes of the teacher's *document* embeddings, uncentred, so that student
   and projected teacher live in one space); each row is scaled by its SIF weight
   ``a / (a + p(token))`` with ``p`` the token frequency in the training corpus
   (Laplace-smoothed).
2. **Distillation** with eq. 2 on unlabeled text::

       L_distill = KL(p_tea || p_stu) + alpha * || e_tea' - e_stu ||^2

   * ``e_tea' = normalize(e_tea P)``: the teacher's document embedding projected onto
     the student's basis; ``e_stu``: the student's normalised embedding.
   * ``p_tea`` and ``p_stu`` are *in-batch similarity distributions*: for document i of
     a batch of B documents, ``p_tea(j | i) = softmax_{j != i}(cos(e_tea_i, e_tea_j) / tau)``
     over the other B - 1 documents, computed from the full teacher embeddings, and
     ``p_stu(j | i)`` the same with the student's cosines. The KL term transfers the
     teacher's *relative* similarity structure (who is closest to whom); the MSE
     term pins each embedding to its teacher target. The KL is averaged over i.
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

if TYPE_CHECKING:
    import torch

    from semhash_llm.sph.teacher import TransformerTeacher

logger = logging.getLogger(__name__)

#: Folder of the shipped SPH assets (student + hyperplanes + model card).
ASSETS_DIR = Path(__file__).resolve().parent.parent / "assets" / "sph"

# BERT basic pre-tokenisation: runs of letters/digits, or single punctuation/symbol chars
# (BERT treats every ASCII non-alphanumeric printable character, including '_', as punctuation).
_WORD_RE = re.compile(r"[^\W_]+|[^\w\s]|_")
_CJK_RE = re.compile(r"([\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f])")
_MAX_CACHE = 500_000  # distinct words memoised (bounded memory on web-scale vocabularies)


# Combining marks of the Latin, Greek and Cyrillic blocks (what BERT's accent stripping removes in practice).
_COMBINING_RE = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")


def _strip_accents(text: str) -> str:
    return _COMBINING_RE.sub("", unicodedata.normalize("NFD", text))


class FastWordPieceTokenizer:
    """A memoising front end over a Hugging Face WordPiece tokenizer (BERT uncased).

    Pre-tokenisation (lowercase, accent stripping, split on whitespace and punctuation,
    CJK characters apart) is done with one regular expression; each distinct word is
    sent to the wrapped tokenizer once and its word pieces cached. This is ~3x faster
    than calling the tokenizer on whole documents and gives the same pieces on ordinary
    text. For tokenizers that are not BERT-uncased WordPiece, ``fast=False`` calls the
    wrapped tokenizer directly.
    """

    def __init__(self, tokenizer_json: str | Path, fast: bool | None = None) -> None:
        from tokenizers import Tokenizer

        self.path = Path(tokenizer_json)
        self.tokenizer = Tokenizer.from_file(str(self.path))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        spec = json.loads(self.path.read_text(encoding="utf-8"))
        normalizer = spec.get("normalizer") or {}
        is_bert_uncased = (spec.get("model") or {}).get("type") == "WordPiece" and normalizer.get(
            "type"
        ) == "BertNormalizer" and bool(normalizer.get("lowercase", False))
        self.fast = is_bert_uncased if fast is None else bool(fast and is_bert_uncased)
        self.vocab_size = int(self.tokenizer.get_vocab_size())
        self._cache: dict[str, tuple[int, ...]] = {}

    def _pieces(self, word: str) -> tuple[int, ...]:
        ids = self._cache.get(word)
        if ids is None:
            ids = tuple(self.tokenizer.encode(word, add_special_tokens=False).ids)
            if len(self._cache) < _MAX_CACHE:
                self._cache[word] = ids
        return ids

    def tokenize(self, text: str, max_tokens: int) -> list[int]:
        """Token ids of ``text`` (no special tokens), at most ``max_tokens``."""
        if not self.fast:
            return self.tokenizer.encode(text, add_special_tokens=False).ids[:max_tokens]
        text = text[: max_tokens * 12].lower()
        if not text.isascii():
            text = _CJK_RE.sub(r" \1 ", _strip_accents(text))
        get = self._cache.get
        pieces = [get(w) or self._pieces(w) for w in _WORD_RE.findall(text)]
        return list(chain.from_iterable(pieces))[:max_tokens]

    def encode_batch(self, texts: Sequence[str], max_tokens: int) -> tuple[np.ndarray, np.ndarray]:
        """Flat token ids (int64) and per-document offsets (len(texts) + 1)."""
        lists = [self.tokenize(t, max_tokens) for t in texts]
        lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        offsets = np.zeros(len(lists) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.fromiter(chain.from_iterable(lists), dtype=np.int64, count=int(offsets[-1]))
        return flat, offsets


@dataclass
class StaticStudent:
    """Static token-embedding student: ``encode`` = normalised sum of token vectors.

    ``embeddings`` is (vocab_size, dim) float32 with SIF weights folded into the rows.
    """

    tokenizer: FastWordPieceTokenizer
    embeddings: np.ndarray
    max_tokens: int = 256
    meta: dict[str, object] = field(default_factory=dict)

    @property
    def dim(self) -> int:
        return int(self.embeddings.shape[1])

    def encode(self, texts: Sequence[str], batch_size: int = 4096) -> np.ndarray:
        """Embed ``texts``: (n, dim) float32, L2-normalised (empty texts give zero rows).

        A text's embedding is a pure function of the text: the same bits whatever the batch, the
        batch size or the number of threads (:func:`pool_tokens`).
        """
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            flat, offsets = self.tokenizer.encode_batch(texts[start : start + batch_size], self.max_tokens)
            out[start : start + len(offsets) - 1] = pool_tokens(self.embeddings, flat, offsets)
        return out

    def save(self, folder: str | Path, quantize: bool = True) -> None:
        """Write ``tokenizer.json``, ``embeddings.npz`` (int8 + per-row scale, or fp16) and ``student.json``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tokenizer.json").write_bytes(self.tokenizer.path.read_bytes())
        if quantize:
            scale = np.abs(self.embeddings).max(axis=1) / 127.0
            scale[scale == 0] = 1.0
            q = np.round(self.embeddings / scale[:, None]).astype(np.int8)
            np.savez_compressed(folder / "embeddings.npz", q=q, scale=scale.astype(np.float32))
        else:
            np.savez_compressed(folder / "embeddings.npz", w=self.embeddings.astype(np.float16))
        config = {
            "format": "semhash-llm-static-student/1",
            "dim": self.dim,
            "vocab_size": int(self.embeddings.shape[0]),
            "max_tokens": self.max_tokens,
            "quantization": "int8-rowwise" if quantize else "float16",
            "fast_pretokenize": self.tokenizer.fast,
            "meta": self.meta,
        }
        (folder / "student.json").write_text(json.dumps(config, indent=2, sort_keys=True), encoding="utf-8")


@njit(cache=True, nogil=True)
def _pool_normalise(embeddings: np.ndarray, flat: np.ndarray, offsets: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - numba
    """Per document: float64 sum of its token rows in token order, then divide by the norm (fixed order).

    Every document is computed on its own, in one fixed order of operations (no BLAS, no
    reassociation: numba without fastmath), so its embedding does not depend on the batch it is
    encoded in, the batch size or the number of threads.
    """
    dim = embeddings.shape[1]
    acc = np.empty(dim, dtype=np.float64)
    for i in range(len(offsets) - 1):
        for k in range(dim):
            acc[k] = 0.0
        for t in range(offsets[i], offsets[i + 1]):
            row = flat[t]
            for k in range(dim):
                acc[k] += embeddings[row, k]
        sq = 0.0
        for k in range(dim):
            sq += acc[k] * acc[k]
        if sq > 0.0:
            norm = np.sqrt(sq)
            for k in range(dim):
                out[i, k] = acc[k] / norm


def pool_tokens(embeddings: np.ndarray, flat: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Normalised sums of ``embeddings[flat]`` over the segments given by ``offsets`` (float32).

    A document's row is a pure function of its token ids (see :func:`_pool_normalise`); empty
    segments and zero sums give zero rows.
    """
    n = len(offsets) - 1
    out = np.zeros((n, embeddings.shape[1]), dtype=np.float32)
    if n == 0 or len(flat) == 0:
        return out
    _pool_normalise(
        np.ascontiguousarray(embeddings, dtype=np.float32),
        np.ascontiguousarray(flat, dtype=np.int64),
        np.ascontiguousarray(offsets, dtype=np.int64),
        out,
    )
    return out


def load_student(path: str | Path | None = None) -> StaticStudent:
    """Load a student saved by :meth:`StaticStudent.save`; ``None`` loads the shipped one.

    ``path`` may be the student folder or a ``semhash-llm train sph`` output folder.

    Needs only numpy and ``tokenizers``; works offline.
    """
    folder = Path(path) if path is not None else ASSETS_DIR / "student"
    if not (folder / "student.json").is_file() and (folder / "student" / "student.json").is_file():
        folder = folder / "student"  # a training output folder
    config_file = folder / "student.json"
    if not config_file.is_file():
        raise FileNotFoundError(
            f"No SPH student found at '{folder}': expected student.json, embeddings.npz and "
            "tokenizer.json there. Train one with `semhash-llm train sph CORPUS --out DIR`, or pass "
            "student_path=None to use the shipped weights."
        )
    config = json.loads(config_file.read_text(encoding="utf-8"))
    with np.load(folder / "embeddings.npz", allow_pickle=False) as data:
        if "q" in data:
            embeddings = data["q"].astype(np.float32) * data["scale"][:, None].astype(np.float32)
        else:
            embeddings = data["w"].astype(np.float32)
    tokenizer = FastWordPieceTokenizer(folder / "tokenizer.json", fast=bool(config.get("fast_pretokenize", True)))
    return StaticStudent(
        tokenizer=tokenizer,
        embeddings=np.ascontiguousarray(embeddings),
        max_tokens=int(config["max_tokens"]),
        meta=dict(config.get("meta", {})),
    )


def token_counts(tokenizer: FastWordPieceTokenizer, texts: Iterable[str], max_tokens: int) -> np.ndarray:
    """Occurrences of each vocabulary id in ``texts`` (as the student tokenizes them)."""
    counts = np.zeros(tokenizer.vocab_size, dtype=np.int64)
    for text in texts:
        ids = tokenizer.tokenize(text, max_tokens)
        if ids:
            counts += np.bincount(np.asarray(ids, dtype=np.int64), minlength=tokenizer.vocab_size)
    return counts


def sif_weights(counts: np.ndarray, a: float = 1e-4) -> np.ndarray:
    """SIF weights ``a / (a + p)`` with Laplace-smoothed token probabilities ``p``."""
    p = (counts.astype(np.float64) + 1.0) / (float(counts.sum()) + float(len(counts)))
    return (a / (a + p)).astype(np.float32)


def projection_basis(teacher_embeddings: np.ndarray, dim: int) -> tuple[np.ndarray, float]:
    """Top-``dim`` uncentred principal axes of teacher embeddings: (teacher_dim, dim), energy kept."""
    if not 1 <= dim <= teacher_embeddings.shape[1]:
        raise ValueError(
            f"The 'dim' parameter must be an int in [1, {teacher_embeddings.shape[1]}] (the teacher's "
            f"dimension). Got {dim!r} instead."
        )
    _, s, vt = np.linalg.svd(teacher_embeddings.astype(np.float64), full_matrices=False)
    energy = float((s[:dim] ** 2).sum() / (s**2).sum())
    return np.ascontiguousarray(vt[:dim].T.astype(np.float32)), energy


def project_teacher(teacher_embeddings: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """``normalize(e_tea P)``: teacher embeddings in the student's space."""
    z = teacher_embeddings @ basis
    norms = np.linalg.norm(z, axis=1, keepdims=True)
    np.divide(z, norms, out=z, where=norms > 0)
    return z.astype(np.float32)


def init_static_student(
    teacher: TransformerTeacher,
    tokenizer: FastWordPieceTokenizer,
    basis: np.ndarray,
    counts: np.ndarray,
    sif_a: float = 1e-4,
    max_tokens: int = 256,
) -> StaticStudent:
    """Static student before distillation: teacher token vectors, projected, SIF-weighted.

    Special tokens ([CLS], [SEP], [PAD], [MASK], ``[unusedN]``) get zero vectors: the
    student never emits them except [UNK].
    """
    vocab = tokenizer.tokenizer.get_vocab()
    token_vectors = teacher.encode_tokens(range(tokenizer.vocab_size))
    table = (token_vectors @ basis) * sif_weights(counts, sif_a)[:, None]
    for token, idx in vocab.items():
        if token.startswith("[") and token.endswith("]") and token != "[UNK]":
            table[idx] = 0.0
    return StaticStudent(tokenizer=tokenizer, embeddings=table.astype(np.float32), max_tokens=max_tokens)


@dataclass(frozen=True)
class DistillConfig:
    """Hyper-parameters of eq. 2 distillation.

    ``use_kl`` / ``use_mse`` switch the two terms (for the ablation); ``alpha`` weights
    the MSE term; ``tau`` is the temperature of the in-batch similarity distributions.
    """

    epochs: int = 10
    batch_size: int = 128
    lr: float = 2e-3
    alpha: float = 10.0
    tau: float = 0.05
    use_kl: bool = True
    use_mse: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.epochs, int) or not 1 <= self.epochs <= 1000:
            raise ValueError(f"The 'epochs' parameter of DistillConfig must be an int in [1, 1000]. Got {self.epochs!r} instead.")
        if not isinstance(self.batch_size, int) or not 2 <= self.batch_size <= 65536:
            raise ValueError(
                f"The 'batch_size' parameter of DistillConfig must be an int in [2, 65536]. Got {self.batch_size!r} instead."
            )
        for name in ("lr", "alpha", "tau"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"The '{name}' parameter of DistillConfig must be a float > 0. Got {value!r} instead.")
        if not (self.use_kl or self.use_mse):
            raise ValueError(
                "DistillConfig needs at least one loss term: set use_kl=True, use_mse=True or both. Got both False."
            )


def distill_loss(
    student_emb: torch.Tensor,
    teacher_full: torch.Tensor,
    teacher_proj: torch.Tensor,
    alpha: float,
    tau: float,
    use_kl: bool = True,
    use_mse: bool = True,
) -> torch.Tensor:
    """Eq. 2 on one batch: ``KL(p_tea || p_stu) + alpha * ||e_tea' - e_stu||^2``.

    ``student_emb`` and ``teacher_proj`` are (B, dim) normalised; ``teacher_full`` is the
    (B, teacher_dim) normalised teacher embedding used for ``p_tea``. ``p(j | i)`` is the
    softmax over j != i of cosine / tau (in-batch similarity distribution).
    """
    import torch
    import torch.nn.functional as F

    loss = student_emb.new_zeros(())
    if use_kl:
        b = student_emb.shape[0]
        eye = torch.eye(b, dtype=torch.bool, device=student_emb.device)
        t_logits = (teacher_full @ teacher_full.T / tau).masked_fill(eye, float("-inf"))
        s_logits = (student_emb @ student_emb.T / tau).masked_fill(eye, float("-inf"))
        log_p_tea = F.log_softmax(t_logits, dim=1).masked_fill(eye, 0.0)
        log_p_stu = F.log_softmax(s_logits, dim=1).masked_fill(eye, 0.0)
        kl = (log_p_tea.exp() * (log_p_tea - log_p_stu)).sum(dim=1).mean()
        loss = loss + kl
    if use_mse:
        loss = loss + alpha * ((teacher_proj - student_emb) ** 2).sum(dim=1).mean()
    return loss


def distill(
    student: StaticStudent,
    texts: Sequence[str],
    teacher_full: np.ndarray,
    teacher_proj: np.ndarray,
    config: DistillConfig | None = None,
) -> tuple[StaticStudent, list[float]]:
    """Train the student's table with eq. 2 on ``texts`` (teacher embeddings precomputed).

    Returns a new :class:`StaticStudent` and the mean loss of each epoch. Deterministic
    for a given seed (single-threaded sparse updates).
    """
    import torch

    config = config or DistillConfig()
    if len(texts) != len(teacher_full) or len(texts) != len(teacher_proj):
        raise ValueError(
            f"distill() needs one teacher embedding per text: got {len(texts)} texts, "
            f"{len(teacher_full)} teacher embeddings and {len(teacher_proj)} projected ones."
        )
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    flat, offsets = student.tokenizer.encode_batch(texts, student.max_tokens)
    table = torch.nn.EmbeddingBag.from_pretrained(
        torch.from_numpy(student.embeddings.copy()), freeze=False, mode="sum", sparse=True
    )
    optimizer = torch.optim.SparseAdam(list(table.parameters()), lr=config.lr)
    t_full = torch.from_numpy(np.ascontiguousarray(teacher_full, dtype=np.float32))
    t_proj = torch.from_numpy(np.ascontiguousarray(teacher_proj, dtype=np.float32))
    flat_t = torch.from_numpy(flat)
    history: list[float] = []
    n = len(texts)
    for epoch in range(config.epochs):
        order = rng.permutation(n)
        total, batches = 0.0, 0
        for start in range(0, n - 1, config.batch_size):
            idx = order[start : start + config.batch_size]
            if len(idx) < 2:
                continue
            seg = [flat_t[offsets[i] : offsets[i + 1]] for i in idx]
            lengths = torch.tensor([len(s) for s in seg], dtype=torch.long)
            batch_off = torch.zeros(len(idx), dtype=torch.long)
            batch_off[1:] = torch.cumsum(lengths, 0)[:-1]
            emb = table(torch.cat(seg), batch_off)
            emb = torch.nn.functional.normalize(emb, dim=1, eps=1e-8)
            loss = distill_loss(
                emb, t_full[idx], t_proj[idx], config.alpha, config.tau, config.use_kl, config.use_mse
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += float(loss.detach())
            batches += 1
        history.append(total / max(batches, 1))
        logger.info("distill epoch %d/%d: loss %.5f", epoch + 1, config.epochs, history[-1])
    trained = table.weight.detach().numpy().astype(np.float32)
    return (
        StaticStudent(
            tokenizer=student.tokenizer, embeddings=trained, max_tokens=student.max_tokens, meta=dict(student.meta)
        ),
        history,
    )
