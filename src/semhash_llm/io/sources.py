"""Where records come from: files on disk, or records held in memory.

A source streams validated :class:`RecordBatch` es for the cascade (first pass), can give
back the text of a few records by location (to repair a Bloom false positive), and streams
full records again to write the kept documents (second pass). It also says which shards it
read (``files``) and which entries it met but did not read (``ignored``), for ``report.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Collection, Iterable, Iterator, Mapping, Protocol, Sequence

from semhash_llm.config import ReaderConfig
from semhash_llm.io.readers import (
    IgnoredInput,
    InputError,
    InputFile,
    RecordBatch,
    _Validator,
    add_record,
    iter_batches,
    read_records,
)

__all__ = ["Source", "FileSource", "MemorySource"]


class Source(Protocol):
    """What the cascade reads from."""

    names: list[str]
    """One display name per shard (index = ``file_index`` of the batches)."""

    files: list[InputFile]
    """One shard per name: its path and format (for messages and ``report.json``)."""

    ignored: list[IgnoredInput]
    """Entries met while walking directories or expanding globs and not read, with why."""

    def batches(self, priority_field: str | None) -> Iterator[RecordBatch]:
        """Validated records, in order."""
        ...

    def records(self, file_index: int,
                wanted: Collection[int] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(ordinal, full record)`` of one shard, in order.

        With ``wanted`` (ordinals the first pass accepted), a wanted record that can no longer
        be read is an :class:`~semhash_llm.io.readers.InputError` instead of being passed over.
        """
        ...


class FileSource:
    """Records from JSON Lines / JSON / Parquet / Arrow / saved-dataset shards on disk."""

    def __init__(self, files: Sequence[InputFile], reader: ReaderConfig,
                 ignored: Sequence[IgnoredInput] = ()) -> None:
        self.files = list(files)
        self.reader = reader
        self.names = [f.name for f in self.files]
        self.ignored = list(ignored)

    def batches(self, priority_field: str | None) -> Iterator[RecordBatch]:
        return iter_batches(self.files, self.reader, priority_field)

    def records(self, file_index: int,
                wanted: Collection[int] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        return read_records(self.files[file_index], self.reader, wanted)


class MemorySource:
    """Records held in memory: mappings with a text field, or plain strings."""

    def __init__(self, records: Iterable[Mapping[str, Any] | str], reader: ReaderConfig) -> None:
        self.reader = reader
        self.items: list[dict[str, Any]] = []
        for i, r in enumerate(records):
            if isinstance(r, str):
                self.items.append({reader.text_field: r})
            elif isinstance(r, Mapping):
                self.items.append(dict(r))
            else:
                raise InputError("<records>", f"record is a {type(r).__name__}, expected a mapping or a string",
                                 line=i, unit="row")
        self.names = ["records"]
        self._file = InputFile(path=Path("<records>"), kind="parquet", name="records", label="records")
        self.files = [self._file]
        self.ignored: list[IgnoredInput] = []

    def batches(self, priority_field: str | None) -> Iterator[RecordBatch]:
        cfg = self.reader
        v = _Validator(cfg, priority_field)
        batch = RecordBatch(0)
        for i, rec in enumerate(self.items):
            add_record(batch, self._file, v, i, str(i), rec.get(cfg.id_field), rec.get(cfg.text_field),
                       rec.get(priority_field) if priority_field else None)
            if len(batch) >= cfg.batch_size:
                yield batch
                batch = RecordBatch(0)
        if len(batch):
            yield batch

    def records(self, file_index: int,
                wanted: Collection[int] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        return iter(enumerate(self.items))
