"""Input readers and the writers of the output contract."""

from __future__ import annotations

from semhash_llm.io.readers import InputError, InputFile, RecordBatch, iter_batches, resolve_inputs
from semhash_llm.io.sources import FileSource, MemorySource, Source

__all__ = [
    "InputError",
    "InputFile",
    "RecordBatch",
    "iter_batches",
    "resolve_inputs",
    "Source",
    "FileSource",
    "MemorySource",
]
