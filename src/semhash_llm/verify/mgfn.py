"""MGFN, the multi-granularity fusion network of the neural verifier (the ``mgfn`` stage: :mod:`semhash_llm.stages.mgfn`).

One encoder reads a document at three granularities and fuses them with a gate:

* **character level** — UTF-8 bytes through an embedding and 1-D convolutions of several widths
  (3, 5, 7 by default), ReLU, max-pooled over the text: fine perturbations (typos, OCR noise);
* **token level** — the project's canonical tokens (hashed into ``token_buckets`` buckets)
  through an embedding and a bidirectional LSTM, mean-pooled over the tokens: word order and
  template patterns;
* **semantic level** — the SPH student's document embedding through a normalized feed-forward
  projection (LayerNorm, Linear, GELU): what the text is about;
* **gate** — a softmax over the three levels from document traits (:func:`document_traits`:
  length, share of characters in scripts written without spaces, share of tokens on short
  lines), so a short OCR snippet can lean on characters and a web page on meaning.

The fused vector goes through a projection head into the space where duplicates cluster
(unit length; trained with a contrastive loss whose margin is learned per duplicate type A–E,
:meth:`MGFN.contrastive_loss`), and a **boundary network** on ``[u, v, u ⊙ v, |u − v|]`` —
plus, by default, the pair's alignment features (:mod:`semhash_llm.verify.features`: where the
two texts differ and whether the difference is a typo or a changed word, which two separately
encoded vectors cannot show) — gives the duplicate probability. **Monte Carlo dropout**
(:meth:`MGFN.mc_predict`): ``T`` passes with dropout on give a mean and a variance per pair; a
high variance marks a pair uncertain (the LLM judge's input). Dropout sits after the fusion and
inside the boundary network, so the encoders run once and only the cheap top runs ``T`` times.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from semhash_llm.config import NormalizeConfig
from semhash_llm.text.lines import LineBatch, tokens_and_lines
from semhash_llm.text.tokenize import TokenizedBatch

__all__ = ["MGFNConfig", "MGFN", "PairBatch", "encode_texts", "document_traits", "NUM_TRAITS", "CATEGORIES",
           "save_mgfn", "load_mgfn", "dropout_masks", "pair_seed", "text_digests"]

CATEGORIES: tuple[str, ...] = ("A", "B", "C", "D", "E")
NUM_TRAITS = 3


@dataclass(frozen=True)
class MGFNConfig:
    """Sizes of the network (defaults: a few hundred thousand parameters, CPU-trainable)."""

    max_chars: int = 1024
    char_dim: int = 32
    char_channels: int = 64
    kernel_sizes: tuple[int, ...] = (3, 5, 7)
    max_tokens: int = 256
    token_buckets: int = 1 << 13
    token_dim: int = 64
    lstm_hidden: int = 64
    semantic_dim: int = 256
    hidden: int = 128
    projection: int = 64
    dropout: float = 0.1
    pair_features: int = 0
    """Width of the pair features the boundary network reads beside ``[u, v, u*v, |u-v|]``
    (:data:`semhash_llm.verify.features.NUM_PAIR_FEATURES`; 0: none)."""

    def __post_init__(self) -> None:
        for name in ("max_chars", "char_dim", "char_channels", "max_tokens", "token_buckets", "token_dim",
                     "lstm_hidden", "semantic_dim", "hidden", "projection"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"MGFNConfig.{name} must be a positive int; got {value!r}")
        if not isinstance(self.pair_features, int) or self.pair_features < 0:
            raise ValueError(f"MGFNConfig.pair_features must be an int >= 0; got {self.pair_features!r}")
        if not self.kernel_sizes or any(k < 1 or k % 2 == 0 for k in self.kernel_sizes):
            raise ValueError(f"MGFNConfig.kernel_sizes must be odd positive ints; got {self.kernel_sizes!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"MGFNConfig.dropout must be in [0, 1); got {self.dropout!r}")


@dataclass
class PairBatch:
    """The encoder inputs of a batch of texts (one side of a batch of pairs)."""

    chars: torch.Tensor  # (B, <= max_chars) int64, 0 = padding, byte + 1
    tokens: torch.Tensor  # (B, <= max_tokens) int64, 0 = padding, bucket + 1
    semantic: torch.Tensor  # (B, semantic_dim) float32
    traits: torch.Tensor  # (B, NUM_TRAITS) float32


def document_traits(texts: Sequence[str], normalize: NormalizeConfig | None = None) -> np.ndarray:
    """``(n, 3)`` float32: log length in characters / 10, share of characters in scripts written
    without spaces (CJK, Thai…), share of tokens on lines of fewer than 8 tokens (chrome-like)."""
    return _traits(texts, *tokens_and_lines(texts, normalize))


def _traits(texts: Sequence[str], tb: TokenizedBatch, lines: LineBatch) -> np.ndarray:
    """:func:`document_traits` from the texts' tokens and lines."""
    counts = np.diff(tb.tok_offsets)
    doc = np.repeat(np.arange(len(texts)), counts)
    short = (lines.tokens[lines.tok_line] < 8).astype(np.float64)
    short_share = np.bincount(doc, weights=short, minlength=len(texts)) / np.maximum(counts, 1)
    out = np.zeros((len(texts), NUM_TRAITS), dtype=np.float32)
    for i, text in enumerate(texts):
        n = max(len(text), 1)
        out[i, 0] = np.log1p(len(text)) / 10.0
        out[i, 1] = sum(1 for ch in text if 0x2E80 <= ord(ch) <= 0x9FFF or 0x0E00 <= ord(ch) <= 0x0EFF) / n
    out[:, 2] = short_share
    return out


def encode_texts(texts: Sequence[str], config: MGFNConfig, semantic: np.ndarray | None = None,
                 normalize: NormalizeConfig | None = None) -> PairBatch:
    """Encoder inputs for ``texts``: bytes, hashed canonical tokens, the given semantic
    embeddings (``(n, semantic_dim)``; zeros when ``None``) and the document traits."""
    n = len(texts)
    raws = [text.encode("utf-8")[: config.max_chars] for text in texts]
    chars = np.zeros((n, max((len(r) for r in raws), default=1) or 1), dtype=np.int64)  # as wide as the longest
    for i, raw in enumerate(raws):
        chars[i, : len(raw)] = np.frombuffer(raw, dtype=np.uint8).astype(np.int64) + 1
    tb, lines = tokens_and_lines(texts, normalize)
    counts = np.minimum(np.diff(tb.tok_offsets), config.max_tokens)
    tokens = np.zeros((n, max(int(counts.max(initial=0)), 1)), dtype=np.int64)
    buckets = (tb.tok_hashes % np.uint64(config.token_buckets)).astype(np.int64) + 1
    for i in range(n):
        s, e = int(tb.tok_offsets[i]), int(tb.tok_offsets[i + 1])
        e = min(e, s + config.max_tokens)
        tokens[i, : e - s] = buckets[s:e]
    if semantic is None:
        sem = np.zeros((n, config.semantic_dim), dtype=np.float32)
    else:
        sem = np.asarray(semantic, dtype=np.float32)
        if sem.shape != (n, config.semantic_dim):
            raise ValueError(f"encode_texts: semantic embeddings of shape ({n}, {config.semantic_dim}) expected; got "
                             f"{sem.shape}")
    return PairBatch(torch.from_numpy(chars), torch.from_numpy(tokens), torch.from_numpy(sem),
                     torch.from_numpy(_traits(texts, tb, lines)))


class MGFN(nn.Module):
    """Encoder (three granularities and a gate), projection head and boundary network."""

    def __init__(self, config: MGFNConfig | None = None) -> None:
        super().__init__()
        self.config = cfg = config or MGFNConfig()
        self.char_embed = nn.Embedding(257, cfg.char_dim, padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(cfg.char_dim, cfg.char_channels, k, padding=k // 2)
                                   for k in cfg.kernel_sizes)
        self.char_out = nn.Linear(cfg.char_channels * len(cfg.kernel_sizes), cfg.hidden)
        self.token_embed = nn.Embedding(cfg.token_buckets + 1, cfg.token_dim, padding_idx=0)
        self.lstm = nn.LSTM(cfg.token_dim, cfg.lstm_hidden, batch_first=True, bidirectional=True)
        self.token_out = nn.Linear(2 * cfg.lstm_hidden, cfg.hidden)
        self.semantic = nn.Sequential(nn.LayerNorm(cfg.semantic_dim), nn.Linear(cfg.semantic_dim, cfg.hidden),
                                      nn.GELU())
        self.gate = nn.Linear(NUM_TRAITS, 3)
        self.dropout = nn.Dropout(cfg.dropout)
        self.head = nn.Sequential(nn.Linear(cfg.hidden, cfg.hidden), nn.GELU(), nn.Linear(cfg.hidden, cfg.projection))
        self.boundary = nn.Sequential(nn.Linear(4 * cfg.projection + cfg.pair_features, cfg.hidden), nn.GELU(), nn.Dropout(cfg.dropout),
                                      nn.Linear(cfg.hidden, 1))
        # One contrastive margin per duplicate type (softplus of these: always positive).
        self.margin_raw = nn.Parameter(torch.zeros(len(CATEGORIES)))

    # ------------------------------------------------------------------ encoder

    def levels(self, batch: PairBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B, 3, hidden)`` level vectors and ``(B, 3)`` gate weights."""
        c = self.char_embed(batch.chars).transpose(1, 2)  # (B, dim, L)
        on_text = (batch.chars > 0).unsqueeze(1)  # padding never wins the max-pool: the width does not matter
        pooled = [(F.relu(conv(c)) * on_text).amax(dim=2) for conv in self.convs]
        h_char = self.char_out(torch.cat(pooled, dim=1))
        mask = (batch.tokens > 0).float()
        emb = self.token_embed(batch.tokens)
        lengths = mask.sum(1).clamp(min=1).to(torch.int64).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(emb, lengths, batch_first=True, enforce_sorted=False)
        out, _ = nn.utils.rnn.pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=emb.shape[1])
        h_tok = self.token_out((out * mask.unsqueeze(2)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1.0))
        h_sem = self.semantic(batch.semantic)
        gate = torch.softmax(self.gate(batch.traits), dim=1)
        return torch.stack([h_char, h_tok, h_sem], dim=1), gate

    def fuse(self, batch: PairBatch) -> torch.Tensor:
        """The gated sum of the three levels, ``(B, hidden)`` (no dropout: that comes after)."""
        levels, gate = self.levels(batch)
        return (levels * gate.unsqueeze(2)).sum(1)

    def project(self, fused: torch.Tensor) -> torch.Tensor:
        """Fused vectors into the contrastive space: dropout, projection head, unit length."""
        return F.normalize(self.head(self.dropout(fused)), dim=1)

    def encode(self, batch: PairBatch) -> torch.Tensor:
        """Unit-length vectors in the contrastive space, ``(B, projection)``."""
        return self.project(self.fuse(batch))

    # ------------------------------------------------------------------ pairs

    def logits(self, u: torch.Tensor, v: torch.Tensor, features: torch.Tensor | None = None) -> torch.Tensor:
        """Boundary network on ``[u, v, u ⊙ v, |u − v|]`` (and the pair features): one logit per pair."""
        parts = [u, v, u * v, (u - v).abs()]
        if self.config.pair_features:
            if features is None or features.shape != (u.shape[0], self.config.pair_features):
                raise ValueError(f"this MGFN reads {self.config.pair_features} pair features per pair; got "
                                 f"{None if features is None else tuple(features.shape)}")
            parts.append(features)
        return self.boundary(torch.cat(parts, dim=1)).squeeze(1)

    def forward(self, a: PairBatch, b: PairBatch, features: torch.Tensor | None = None) -> torch.Tensor:
        """Duplicate probability of every pair ``(a[i], b[i])``."""
        return torch.sigmoid(self.logits(self.encode(a), self.encode(b), features))

    def margins(self) -> torch.Tensor:
        """The learned contrastive margin of each type A–E (positive)."""
        return F.softplus(self.margin_raw)

    def contrastive_loss(self, u: torch.Tensor, v: torch.Tensor, label: torch.Tensor,
                         category: torch.Tensor) -> torch.Tensor:
        """Duplicates pulled together; non-duplicates pushed beyond the margin of the pair's type.

        ``category`` indexes :data:`CATEGORIES` (for a negative: the type it imitates)."""
        dist = (u - v).norm(dim=1)
        margin = self.margins()[category]
        pos = label * dist.pow(2)
        neg = (1 - label) * F.relu(margin - dist).pow(2)
        return (pos + neg).mean()

    @torch.no_grad()
    def mc_predict(self, a: PairBatch, b: PairBatch, passes: int = 20,
                   features: torch.Tensor | None = None,
                   seeds: np.ndarray | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Monte Carlo dropout: mean and variance of the duplicate probability over ``passes``
        stochastic passes (see :meth:`mc_predict_fused` for ``seeds``)."""
        return self.mc_predict_fused(self.fuse(a), self.fuse(b), passes, features, seeds)

    @torch.no_grad()
    def mc_predict_fused(self, fa: torch.Tensor, fb: torch.Tensor, passes: int = 20,
                         features: torch.Tensor | None = None,
                         seeds: np.ndarray | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`mc_predict` from fused vectors (:meth:`fuse`): the encoders ran once, only the
        dropout, the projection head and the boundary network run ``passes`` times.

        The dropout masks of pair ``i`` come from ``seeds[i]`` alone (:func:`dropout_masks`), so a
        pair's verdict never depends on the pairs beside it in the batch, nor on the global torch
        RNG. ``seeds``: one ``uint64`` per pair (``None``: the pair's position, ``0 .. B-1``)."""
        if passes < 1:
            raise ValueError(f"mc_predict needs passes >= 1; got {passes}")
        n = fa.shape[0]
        seeds = np.arange(n, dtype=np.uint64) if seeds is None else np.asarray(seeds, dtype=np.uint64)
        if seeds.shape != (n,):
            raise ValueError(f"mc_predict needs one seed per pair ({n}); got shape {seeds.shape}")
        cfg = self.config
        rate = cfg.dropout
        masks = dropout_masks(seeds, passes, (cfg.hidden, cfg.hidden, cfg.hidden), rate)
        keep = 1.0 / (1.0 - rate)
        first, act, _drop, last = self.boundary
        probs = []
        for t in range(passes):
            u = F.normalize(self.head(fa * (masks[0][t] * keep).to(fa.dtype)), dim=1)
            v = F.normalize(self.head(fb * (masks[1][t] * keep).to(fb.dtype)), dim=1)
            parts = [u, v, u * v, (u - v).abs()]
            if cfg.pair_features:
                if features is None or features.shape != (n, cfg.pair_features):
                    raise ValueError(f"this MGFN reads {cfg.pair_features} pair features per pair; got "
                                     f"{None if features is None else tuple(features.shape)}")
                parts.append(features)
            h = act(first(torch.cat(parts, dim=1))) * (masks[2][t] * keep).to(fa.dtype)
            probs.append(torch.sigmoid(last(h).squeeze(1)))
        stacked = torch.stack(probs)
        return stacked.mean(0), stacked.var(0, unbiased=False)


def text_digests(texts: Sequence[str]) -> np.ndarray:
    """A 64-bit BLAKE2b digest of every text (the MC-dropout seed material of its pairs)."""
    import hashlib

    raw = b"".join(hashlib.blake2b(t.encode("utf-8", errors="surrogatepass"), digest_size=8,
                                   person=b"semhash-mcdrop").digest() for t in texts)
    return np.frombuffer(raw, dtype="<u8").astype(np.uint64)


_SM_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_SM_M1 = np.uint64(0xBF58476D1CE4E5B9)
_SM_M2 = np.uint64(0x94D049BB133111EB)


def _splitmix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser, elementwise over ``uint64`` (wrapping arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * _SM_M1
    x = (x ^ (x >> np.uint64(27))) * _SM_M2
    return x ^ (x >> np.uint64(31))


def pair_seed(digest_a: np.ndarray, digest_b: np.ndarray) -> np.ndarray:
    """One ``uint64`` seed per pair from its two documents' 64-bit text digests (order matters,
    as it does to the model)."""
    a = np.asarray(digest_a, dtype=np.uint64)
    b = np.asarray(digest_b, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return _splitmix(_splitmix(a + _SM_GAMMA) ^ (b * _SM_M1))


def dropout_masks(seeds: np.ndarray, passes: int, widths: Sequence[int], rate: float) -> list[torch.Tensor]:
    """Keep-masks (1.0 kept, 0.0 dropped, each dropped with probability ``rate``) of shape
    ``(passes, len(seeds), width)`` for each width: a counter-based generator (SplitMix64 over
    seed, pass, layer and unit), so a pair's masks depend on its seed alone."""
    seeds = np.asarray(seeds, dtype=np.uint64)
    out = []
    with np.errstate(over="ignore"):
        for layer, width in enumerate(widths):
            t = np.arange(passes, dtype=np.uint64)[:, None, None]
            j = np.arange(width, dtype=np.uint64)[None, None, :]
            counter = ((t * np.uint64(len(widths)) + np.uint64(layer)) << np.uint64(24)) + j + np.uint64(1)
            x = _splitmix(seeds[None, :, None] + counter * _SM_GAMMA)
            uniform = (x >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
            out.append(torch.from_numpy((uniform >= rate).astype(np.float32)))
    return out


def save_mgfn(model: MGFN, path: str | Path, extra: dict[str, Any] | None = None) -> None:
    """Write ``model`` to ``path`` as safetensors: the weights as tensors, its config and the
    ``extra`` plain values as JSON in the file's metadata. Nothing in it is pickled."""
    from safetensors.torch import save_file

    p = Path(path)
    if p.suffix != ".safetensors":
        raise ValueError(f"verifier weights are written as .safetensors; got {p.name!r}. Name the file "
                         "verifier.safetensors")
    tensors = {name: t.detach().contiguous().clone() for name, t in model.state_dict().items()}
    save_file(tensors, str(p), metadata={"format": "semhash-llm-mgfn/1", "config": json.dumps(asdict(model.config)),
                                         "extra": json.dumps(extra or {})})


def load_mgfn(path: str | Path) -> tuple[MGFN, dict[str, Any]]:
    """The model saved by :func:`save_mgfn` at ``path`` (in eval mode) and its ``extra`` values.

    Only safetensors are read (tensors and JSON: a file from elsewhere cannot run code when
    loaded). A ``verifier.pt`` of an earlier version is refused with the command that converts it."""
    from safetensors import safe_open

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no verifier weights at {p}: train them with `semhash-llm train verifier --out DIR` "
                                "and pass DIR/verifier.safetensors")
    if p.suffix != ".safetensors":
        raise ValueError(f"{p}: verifier weights are read from .safetensors only (a pickled file could run code "
                         "when loaded). Convert a file you trust with `python -m semhash_llm.verify.mgfn convert "
                         f"{p} {p.with_suffix('.safetensors')}`")
    with safe_open(str(p), framework="pt", device="cpu") as fh:
        meta = fh.metadata() or {}
        if meta.get("format") != "semhash-llm-mgfn/1" or "config" not in meta:
            raise ValueError(f"{p}: not a SemHash-LLM verifier (no 'semhash-llm-mgfn/1' metadata); pass the "
                             "verifier.safetensors written by `semhash-llm train verifier`")
        state = {name: fh.get_tensor(name) for name in fh.keys()}
    raw = dict(json.loads(meta["config"]))
    raw["kernel_sizes"] = tuple(raw["kernel_sizes"])
    model = MGFN(MGFNConfig(**raw))
    model.load_state_dict(state)
    return model.eval(), dict(json.loads(meta.get("extra", "{}")))


def convert_pt(source: str | Path, target: str | Path) -> None:
    """Convert a ``verifier.pt`` of an earlier version (``torch.save`` of plain tensors) into
    safetensors. It is read with ``weights_only=True``; convert only a file you trust."""
    blob = torch.load(Path(source), map_location="cpu", weights_only=True)
    raw = dict(blob["config"])
    raw["kernel_sizes"] = tuple(raw["kernel_sizes"])
    model = MGFN(MGFNConfig(**raw))
    model.load_state_dict(blob["state_dict"])
    save_mgfn(model, target, extra=dict(blob.get("extra", {})))


def _main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m semhash_llm.verify.mgfn",
                                     description="convert a verifier.pt of an earlier version to safetensors")
    sub = parser.add_subparsers(dest="command", required=True)
    conv = sub.add_parser("convert", help="verifier.pt (trusted) -> verifier.safetensors")
    conv.add_argument("source")
    conv.add_argument("target")
    args = parser.parse_args(argv)
    convert_pt(args.source, args.target)
    print(f"wrote {args.target}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(_main())
