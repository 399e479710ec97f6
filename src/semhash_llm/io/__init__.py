"""Input readers and the writers of the output contract."""

from __future__ import annotations

from semhash_llm.io.readers import (
    SUPPORTED_FORMATS,
    IgnoredInput,
    InputError,
    InputFile,
    InputScan,
    RecordBatch,
    UnreadableTailError,
    iter_batches,
    resolve_inputs,
    scan_inputs,
)
from semhash_llm.io.sources import FileSource, MemorySource, Source

__all__ = [
    "SUPPORTED_FORMATS",
    "InputError",
    "UnreadableTailError",
    "InputFile",
    "IgnoredInput",
    "InputScan",
    "RecordBatch",
    "iter_batches",
    "resolve_inputs",
    "scan_inputs",
    "Source",
    "FileSource",
    "MemorySource",
]
