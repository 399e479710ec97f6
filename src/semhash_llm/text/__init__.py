"""Text handling: normalization, CJK-aware tokenization, shingling and passages."""

from __future__ import annotations

from semhash_llm.text.normalize import CharClass, char_classes, normalize, normalize_batch
from semhash_llm.text.passages import PassageBatch, passage_keys, passages_batch
from semhash_llm.text.tokenize import encode_batch, shingle_hashes, tokens

__all__ = [
    "CharClass",
    "char_classes",
    "normalize",
    "normalize_batch",
    "encode_batch",
    "shingle_hashes",
    "tokens",
    "PassageBatch",
    "passages_batch",
    "passage_keys",
]
