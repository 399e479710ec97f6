"""Learned hyperplanes: K-bit codes from student embeddings (paper eqs. 3-10).

Each bit is a hyperplane ``h_k(e) = sign(w_k^T e + b_k)`` (eqs. 3-4); ``W`` is stored as a
(dim, K) matrix whose columns are the ``w_k``. The hyperplanes are trained so that the
fraction of agreeing bits tracks ``(1 + cos(e_i, e_j)) / 2`` (eq. 5), with::

    L = L_sim + 0.1 * L_orth + 0.01 * L_bal + 0.001 * ||W||_F^2          (eqs. 6-10)

* ``L_sim``: mean over in-batch pairs of ``(agree_ij - (1 + cos_ij) / 2)^2`` where
  ``agree_ij = (1 + b_i . b_j / K) / 2`` for codes ``b`` in {-1, +1}^K, plus ``pos_weight``
  (default 10) times the same error averaged over the batch's near-duplicate view pairs.
  Random pairs alone almost never have a high cosine, so without that term the codes
  learn the low-similarity end of eq. 5 and let near duplicates drift apart (measured:
  the mean Hamming distance of near-duplicate pairs doubles).
* ``L_orth = ||W^T W - I||_F^2 / K``: the hyperplanes stay orthonormal (decorrelated bits).
* ``L_bal = mean_k (mean_i b_ik)^2``: every bit fires for half the documents.

During training the sign is replaced by ``tanh(beta * x)`` with ``beta`` annealed linearly
from 1 to 10 (:func:`beta_schedule`); a straight-through estimator makes the forward
pass use the hard sign (the codes that will be used) and the backward pass the
gradient of the tanh.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

ALLOWED_BITS = (32, 64, 128)


def pack_bits(bits: np.ndarray) -> np.ndarray:
    """Pack a boolean (n, K) matrix into uint64 codes.

    Bit k is stored in word ``k // 64`` at position ``k % 64``. For K <= 64 the result is
    (n,) uint64; otherwise (n, ceil(K / 64)) uint64.
    """
    bits = np.asarray(bits, dtype=bool)
    if bits.ndim != 2:
        raise ValueError(f"pack_bits expects a 2-D (n, K) boolean matrix. Got shape {bits.shape} instead.")
    n, k = bits.shape
    words = max(1, -(-k // 64))
    padded = np.zeros((n, words * 64), dtype=bool)
    padded[:, :k] = bits
    packed = np.packbits(padded, axis=1, bitorder="little")
    codes = np.ascontiguousarray(packed).view("<u8").astype(np.uint64).reshape(n, words)
    return codes[:, 0].copy() if words == 1 else codes


def unpack_bits(codes: np.ndarray, bits: int) -> np.ndarray:
    """Inverse of :func:`pack_bits`: (n, bits) boolean matrix."""
    words = as_words(codes)
    raw = np.ascontiguousarray(words.astype("<u8")).view(np.uint8).reshape(len(words), -1)
    return np.unpackbits(raw, axis=1, bitorder="little")[:, :bits].astype(bool)


def as_words(codes: np.ndarray) -> np.ndarray:
    """View codes as an (n, words) uint64 matrix (1-D codes become one word per row)."""
    codes = np.asarray(codes)
    if codes.dtype != np.uint64:
        raise ValueError(f"SPH codes must be uint64 (as returned by SPHHasher.codes). Got dtype {codes.dtype} instead.")
    return codes.reshape(-1, 1) if codes.ndim == 1 else codes


def hamming_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise Hamming distance between two arrays of codes (same shape)."""
    return np.bitwise_count(as_words(a) ^ as_words(b)).sum(axis=1).astype(np.int64)


@njit(cache=True, nogil=True)
def _margins(embeddings: np.ndarray, W: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - numba
    """``out[i, k] = (sum_d e[i, d] W[d, k]) + b[k]`` in float64, d in order, one document at a time.

    No BLAS: its kernels (and so the rounding of a margin near 0, i.e. a bit) depend on the batch
    shape and the thread count. Here a document's margins are a pure function of its embedding.
    """
    n, dim = embeddings.shape
    bits = W.shape[1]
    for i in range(n):
        for k in range(bits):
            out[i, k] = 0.0
        for d in range(dim):
            x = np.float64(embeddings[i, d])
            for k in range(bits):
                out[i, k] += x * W[d, k]
        for k in range(bits):
            out[i, k] += b[k]


@dataclass
class SPHHasher:
    """K hyperplanes ``(W, b)``: ``W`` (dim, K) float32, ``b`` (K,) float32."""

    W: np.ndarray
    b: np.ndarray
    meta: dict[str, object] | None = None

    def __post_init__(self) -> None:
        self.W = np.ascontiguousarray(self.W, dtype=np.float32)
        self.b = np.ascontiguousarray(self.b, dtype=np.float32).reshape(-1)
        if self.W.ndim != 2 or self.W.shape[1] != self.b.shape[0]:
            raise ValueError(
                f"SPHHasher needs W of shape (dim, K) and b of shape (K,). Got W {self.W.shape} and b {self.b.shape}."
            )

    @property
    def bits(self) -> int:
        return int(self.W.shape[1])

    @property
    def dim(self) -> int:
        return int(self.W.shape[0])

    def project(self, embeddings: np.ndarray) -> np.ndarray:
        """``e W + b``: (n, K) float64 margins, each row a pure function of its embedding row.

        Computed per document in a fixed order (:func:`_margins`), so a code never depends on the
        batch it is hashed in, the batch size or the number of threads.
        """
        embeddings = np.asarray(embeddings, dtype=np.float32)
        if embeddings.ndim != 2 or embeddings.shape[1] != self.dim:
            raise ValueError(
                f"SPHHasher with dim={self.dim} got embeddings of shape {embeddings.shape}; the student and the "
                "hyperplanes must come from the same training run."
            )
        out = np.empty((embeddings.shape[0], self.bits), dtype=np.float64)
        if embeddings.shape[0]:
            W64 = np.ascontiguousarray(self.W, dtype=np.float64)
            _margins(np.ascontiguousarray(embeddings), W64, np.ascontiguousarray(self.b, dtype=np.float64), out)
        return out

    def bit_matrix(self, embeddings: np.ndarray) -> np.ndarray:
        """(n, K) boolean: bit k set when ``w_k^T e + b_k > 0`` (eq. 3)."""
        return self.project(embeddings) > 0

    def codes(self, embeddings: np.ndarray) -> np.ndarray:
        """Packed codes: (n,) uint64 for K <= 64, (n, K / 64) uint64 for K = 128 (eq. 4)."""
        return pack_bits(self.bit_matrix(embeddings))

    def orthogonality_error(self) -> float:
        """``||W^T W - I||_F`` (0 for orthonormal hyperplanes)."""
        gram = self.W.T.astype(np.float64) @ self.W.astype(np.float64)
        return float(np.linalg.norm(gram - np.eye(self.bits)))

    @classmethod
    def simhash(cls, dim: int, bits: int, seed: int = 0) -> SPHHasher:
        """Random-hyperplane SimHash baseline (Charikar): Gaussian directions (unit columns), ``b = 0``."""
        rng = np.random.default_rng(seed)
        W = rng.standard_normal((dim, bits))
        W /= np.linalg.norm(W, axis=0, keepdims=True)
        return cls(W.astype(np.float32), np.zeros(bits, np.float32), {"kind": "simhash"})

    def save(self, path: str | Path) -> None:
        """Write ``W``, ``b`` and metadata to one ``.npz`` file."""
        np.savez_compressed(Path(path), W=self.W, b=self.b, meta=np.array(json.dumps(self.meta or {}, sort_keys=True)))

    @classmethod
    def load(cls, path: str | Path) -> SPHHasher:
        with np.load(Path(path), allow_pickle=False) as data:
            meta = json.loads(str(data["meta"])) if "meta" in data else {}
            return cls(data["W"], data["b"], meta)


def bit_balance(bit_matrix: np.ndarray) -> np.ndarray:
    """Per-bit fraction of documents with the bit set (0.5 is perfectly balanced)."""
    return np.asarray(bit_matrix, dtype=np.float64).mean(axis=0)


def beta_schedule(step: int, total: int, start: float = 1.0, end: float = 10.0) -> float:
    """Annealed tanh sharpness: ``start`` at step 0, rising linearly to ``end`` at ``total - 1``."""
    if total <= 1:
        return float(end)
    frac = min(max(step, 0), total - 1) / (total - 1)
    return float(start + (end - start) * frac)


def straight_through_sign(x: torch.Tensor, beta: float) -> torch.Tensor:
    """Forward: ``sign(x)`` (0 maps to +1); backward: the gradient of ``tanh(beta * x)``."""
    import torch

    soft = torch.tanh(beta * x)
    hard = torch.where(x >= 0, torch.ones_like(x), -torch.ones_like(x))
    return soft + (hard - soft).detach()


def sim_loss(codes: torch.Tensor, cos: torch.Tensor) -> torch.Tensor:
    """``L_sim``: mean over pairs i != j of ``((1 + b_i.b_j / K) / 2 - (1 + cos_ij) / 2)^2``.

    ``codes`` is (B, K) in [-1, 1]; ``cos`` is the (B, B) cosine matrix of the embeddings.
    """
    import torch

    k = codes.shape[1]
    agree = (1.0 + codes @ codes.T / k) / 2.0
    target = (1.0 + cos) / 2.0
    off_diag = ~torch.eye(codes.shape[0], dtype=torch.bool, device=codes.device)
    return ((agree - target) ** 2)[off_diag].mean()


def pair_sim_loss(codes_a: torch.Tensor, codes_b: torch.Tensor, cos: torch.Tensor) -> torch.Tensor:
    """``L_sim`` restricted to aligned pairs ``(a_i, b_i)`` (near-duplicate views), mean over i."""
    k = codes_a.shape[1]
    agree = (1.0 + (codes_a * codes_b).sum(dim=1) / k) / 2.0
    return ((agree - (1.0 + cos) / 2.0) ** 2).mean()


def orth_loss(W: torch.Tensor) -> torch.Tensor:
    """``L_orth = ||W^T W - I||_F^2 / K`` for ``W`` of shape (dim, K); 0 iff columns are orthonormal."""
    import torch

    k = W.shape[1]
    gram = W.T @ W
    return ((gram - torch.eye(k, dtype=W.dtype, device=W.device)) ** 2).sum() / k


def balance_loss(codes: torch.Tensor) -> torch.Tensor:
    """``L_bal = mean_k (mean_i b_ik)^2`` for codes in [-1, 1]; 0 when every bit is balanced."""
    return (codes.mean(dim=0) ** 2).mean()


@dataclass(frozen=True)
class HyperplaneTrainConfig:
    """Optimisation settings of :func:`train_hyperplanes` (loss weights from the paper).

    ``init="pca"`` starts from the data's top principal axes under a random rotation;
    ``pos_weight`` weights the near-duplicate pairs' part of ``L_sim``.
    """

    bits: int = 64
    epochs: int = 30
    batch_size: int = 512
    lr: float = 5e-3
    w_orth: float = 0.1
    w_bal: float = 0.01
    w_l2: float = 0.001
    beta_start: float = 1.0
    beta_end: float = 10.0
    init: str = "pca"
    pos_weight: float = 10.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.bits not in ALLOWED_BITS:
            raise ValueError(
                f"The 'bits' parameter of HyperplaneTrainConfig must be one of {ALLOWED_BITS}. Got {self.bits!r} instead."
            )
        if not isinstance(self.epochs, int) or not 1 <= self.epochs <= 10000:
            raise ValueError(
                f"The 'epochs' parameter of HyperplaneTrainConfig must be an int in [1, 10000]. Got {self.epochs!r} instead."
            )
        if not isinstance(self.batch_size, int) or not 4 <= self.batch_size <= 65536:
            raise ValueError(
                f"The 'batch_size' parameter of HyperplaneTrainConfig must be an int in [4, 65536]. "
                f"Got {self.batch_size!r} instead."
            )
        if isinstance(self.pos_weight, bool) or not isinstance(self.pos_weight, (int, float)) or self.pos_weight < 0:
            raise ValueError(
                f"The 'pos_weight' parameter of HyperplaneTrainConfig must be a float >= 0. Got {self.pos_weight!r} instead."
            )
        if self.init not in ("pca", "random"):
            raise ValueError(f"The 'init' parameter of HyperplaneTrainConfig must be one of 'pca', 'random'. Got {self.init!r} instead.")
        if not self.beta_start > 0 or not self.beta_end >= self.beta_start:
            raise ValueError(
                "HyperplaneTrainConfig needs 0 < beta_start <= beta_end. "
                f"Got beta_start={self.beta_start!r}, beta_end={self.beta_end!r} instead."
            )


def train_hyperplanes(
    embeddings: np.ndarray,
    positives: tuple[np.ndarray, np.ndarray] | None = None,
    config: HyperplaneTrainConfig | None = None,
) -> tuple[SPHHasher, list[float]]:
    """Learn ``(W, b)`` on normalised embeddings with eqs. 6-10 and STE.

    ``positives`` optionally gives two aligned (m, dim) arrays of near-duplicate views;
    each batch mixes random documents with such pairs so that the high-similarity end of
    eq. 5 is represented. Returns the hasher and the mean loss per epoch.
    """
    import torch

    config = config or HyperplaneTrainConfig()
    embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
    n, dim = embeddings.shape
    if config.bits > dim:
        raise ValueError(f"Cannot learn {config.bits} orthonormal hyperplanes in a {dim}-dimensional space; use bits <= {dim}.")
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    # Start from the top principal axes of the data, randomly rotated among themselves (ITQ-style:
    # high-variance directions, spread evenly over the bits), biases at the median margin (balanced bits).
    if config.init == "pca":
        centred = embeddings - embeddings.mean(axis=0)
        _, _, vt = np.linalg.svd(centred[: min(n, 20000)].astype(np.float64), full_matrices=False)
        rotation, _ = np.linalg.qr(rng.standard_normal((config.bits, config.bits)))
        q = vt[: config.bits].T @ rotation
    else:
        q, _ = np.linalg.qr(rng.standard_normal((dim, config.bits)))
    W = torch.tensor(q, dtype=torch.float32, requires_grad=True)
    b0 = -np.median(embeddings @ q.astype(np.float32), axis=0)
    b = torch.tensor(b0, dtype=torch.float32, requires_grad=True)
    opt = torch.optim.Adam([W, b], lr=config.lr)
    X = torch.from_numpy(embeddings)
    if positives is not None:
        pa = torch.from_numpy(np.ascontiguousarray(positives[0], dtype=np.float32))
        pb = torch.from_numpy(np.ascontiguousarray(positives[1], dtype=np.float32))
    half = config.batch_size // 2 if positives is not None else config.batch_size
    steps_per_epoch = max(1, n // half)
    total = config.epochs * steps_per_epoch
    history: list[float] = []
    step = 0
    for _epoch in range(config.epochs):
        order = rng.permutation(n)
        running = 0.0
        for s in range(steps_per_epoch):
            parts = [X[order[s * half : (s + 1) * half]]]
            if positives is not None:
                pi = rng.choice(len(pa), size=half // 2, replace=len(pa) < half // 2)
                parts += [pa[pi], pb[pi]]
            batch = torch.cat(parts)
            beta = beta_schedule(step, total, config.beta_start, config.beta_end)
            codes = straight_through_sign(batch @ W + b, beta)
            cos = batch @ batch.T
            l_sim = sim_loss(codes, cos)
            if positives is not None and config.pos_weight > 0:
                m = half // 2
                l_sim = l_sim + config.pos_weight * pair_sim_loss(
                    codes[half : half + m], codes[half + m :], (batch[half : half + m] * batch[half + m :]).sum(1)
                )
            loss = (
                l_sim
                + config.w_orth * orth_loss(W)
                + config.w_bal * balance_loss(codes)
                + config.w_l2 * (W**2).sum()
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
            running += float(loss.detach())
            step += 1
        history.append(running / steps_per_epoch)
    logger.info("hyperplanes K=%d: final loss %.5f", config.bits, history[-1])
    hasher = SPHHasher(
        W.detach().numpy(),
        b.detach().numpy(),
        {"kind": "sph", "bits": config.bits, "epochs": config.epochs, "lr": config.lr, "seed": config.seed},
    )
    return hasher, history
