"""A datatrove pipeline step that runs the SemHash-LLM cascade (``pip install 'semhash-llm[datatrove]'``).

>>> from datatrove.executor import LocalPipelineExecutor
>>> from datatrove.pipeline.readers import JsonlReader
>>> from datatrove.pipeline.writers import JsonlWriter
>>> from semhash_llm.integrations.datatrove import SemHashDedup
>>> LocalPipelineExecutor(pipeline=[JsonlReader("data/"), SemHashDedup(), JsonlWriter("out/")], tasks=1).run()
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any, Iterator

from semhash_llm.cascade import ProgressCallback
from semhash_llm.config import PipelineConfig
from semhash_llm.frames import decide

try:
    from datatrove.data import Document, DocumentsPipeline
    from datatrove.pipeline.base import PipelineStep
    from datatrove.utils.typeshelper import StatHints
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("semhash_llm.integrations.datatrove needs datatrove: pip install 'semhash-llm[datatrove]' "
                      f"(datatrove>=0.10,<0.11). ({exc})") from exc

__all__ = ["SemHashDedup"]


class SemHashDedup(PipelineStep):  # type: ignore[misc]
    """Deduplicate the documents of a task with the SemHash-LLM cascade; yield the kept ones.

    The step reads every document its task receives, runs the cascade over their texts
    (:meth:`semhash_llm.api.Deduplicator.deduplicate`, with ``config``) and then yields the
    kept documents in their input order. A kept document that lost viral fragments has them
    cut from its ``text`` (``cut_fragments=False`` leaves the text as read).

    **Deduplication is per task.** Like datatrove's own in-memory dedup steps, it sees only
    the documents of its own task (rank): run with ``tasks=N`` and a copy in one shard is not
    compared with its original in another. For global deduplication run the pipeline with
    ``tasks=1`` (all documents of the task are held in memory), or write the documents out and
    run ``semhash-llm dedup`` on the files (streamed, bounded memory; ``kept.parquet`` holds the
    kept records), or deduplicate each shard here and the union with the CLI afterwards.

    Each yielded document gets its decision in ``doc.metadata`` (keys start with ``metadata_prefix``,
    default ``semhash_``; a key is set only when it has a value):

    * ``semhash_action``: ``"keep"`` or ``"remove"``;
    * ``semhash_cluster_id``: the ``id`` of the kept document of its duplicate cluster (its own
      id for a document in no cluster — unlike ``documents.parquet``, which leaves it empty);
    * ``semhash_cluster_size``: the number of documents of the task in that cluster (1: unique);
    * ``semhash_fragments_cut``: the number of viral-fragment spans cut from a kept document's
      text, and ``semhash_fragments``: those spans (``[start, end)`` code points of the text as
      read) — only for a kept document that lost some (with ``cut_fragments=False``: that would lose
      some; its text is left whole);
    * removed documents only: ``semhash_duplicate_of`` (the kept document's ``id``),
      ``semhash_relation`` (``exact``, ``near_duplicate``, ``contained_in``, ``skipped``),
      ``semhash_decided_by``, ``semhash_score`` and, for a skipped one, ``semhash_skip_reason``.

    Removed documents are dropped unless ``keep_removed=True`` (then they are yielded too, with
    their decision) or an ``exclusion_writer`` (a datatrove ``DiskWriter``) is given, which
    receives them, as with datatrove's filters. Since keys differ between kept and removed
    documents, pass an explicit ``schema`` to a ``ParquetWriter`` that receives both.

    Stats: ``total``, ``forwarded`` (kept), ``dropped`` and ``dropped_<relation>`` per
    relation, ``fragments_cut`` (documents whose text was cut) and ``fragment_chars_cut`` (characters).

    Documents' ``id`` values name them in the metadata; they should be unique within a task
    (datatrove's readers make them so). A document with empty text stops the run unless the
    config has ``reader.on_error='skip'`` (it is then dropped as ``skipped``).
    """

    type = "🫂 - DEDUPS"
    name = "🧬 SemHash-LLM"

    def __init__(
        self,
        config: PipelineConfig | None = None,
        *,
        keep_removed: bool = False,
        exclusion_writer: Any = None,
        cut_fragments: bool = True,
        metadata_prefix: str = "semhash_",
        progress: ProgressCallback | None = None,
    ) -> None:
        super().__init__()
        if config is not None and not isinstance(config, PipelineConfig):
            raise TypeError(f"config must be a PipelineConfig or None, got a {type(config).__name__}. Build one "
                            "with PipelineConfig.from_dict({...}) or PipelineConfig.from_toml(path).")
        for flag_name, flag in (("keep_removed", keep_removed), ("cut_fragments", cut_fragments)):
            if not isinstance(flag, bool):
                raise TypeError(f"{flag_name} must be a bool (True or False), got {flag!r}.")
        if not isinstance(metadata_prefix, str):
            raise TypeError(f"metadata_prefix must be a string, got {metadata_prefix!r}.")
        self.config = config if config is not None else PipelineConfig()
        self.keep_removed = keep_removed
        self.exclusion_writer = exclusion_writer
        self.cut_fragments = cut_fragments
        self.metadata_prefix = metadata_prefix
        self.progress = progress

    def _metadata(self, docs: list[Document], i: int, cols: dict[str, list[Any]], sizes: Counter[int],
                  keeper: int) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "action": cols["action"][i],
            "cluster_id": docs[keeper].id,
            "cluster_size": sizes[keeper],
        }
        spans = cols["fragments"][i]
        if spans and cols["action"][i] == "keep":
            meta["fragments_cut"] = len(spans)
            meta["fragments"] = [list(s) for s in spans]
        if cols["action"][i] == "remove":
            dup = cols["duplicate_of"][i]
            if dup is not None:
                meta["duplicate_of"] = docs[dup].id
            for key in ("relation", "decided_by", "score", "skip_reason"):
                if cols[key][i] is not None:
                    meta[key] = cols[key][i]
        return {self.metadata_prefix + k: v for k, v in meta.items()}

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> Iterator[Document]:
        """Collect the task's documents, deduplicate them, yield the kept ones (and the removed, if asked)."""
        docs: list[Document] = list(data) if data is not None else []
        if not docs:
            return
        pf = self.config.select.priority_field if self.config.select.keep == "priority" else None
        with self.track_time(unit="task"):
            dec = decide(
                [d.text for d in docs], self.config, self.progress,
                priorities=[d.metadata.get(pf) for d in docs] if pf is not None else None,
                where=lambda i: f"document {docs[i].id!r} (number {i} of task {rank})",
                fix=("drop such documents earlier in the pipeline, or pass SemHashDedup(config=PipelineConfig."
                     "from_dict({'reader': {'on_error': 'skip'}})) to drop them here (stat dropped_skipped)"),
            )
        cols = dec.python(None)
        keepers = [c if c is not None else i for i, c in enumerate(cols["cluster_id"])]
        sizes = Counter(keepers)
        writer_cm = self.exclusion_writer if self.exclusion_writer is not None else contextlib.nullcontext()
        with writer_cm as writer:
            for i, doc in enumerate(docs):
                self.stat_update(StatHints.total)
                doc.metadata.update(self._metadata(docs, i, cols, sizes, keepers[i]))
                if dec.keep[i]:
                    if i in dec.cut_texts and self.cut_fragments:
                        self.stat_update("fragments_cut")
                        self.stat_update("fragment_chars_cut", value=len(doc.text) - len(dec.cut_texts[i]))
                        doc.text = dec.cut_texts[i]
                    self.stat_update(StatHints.forwarded)
                    self.update_doc_stats(doc)
                    yield doc
                    continue
                self.stat_update(StatHints.dropped, f"dropped_{cols['relation'][i]}")
                if writer is not None:
                    writer.write(doc, rank)
                if self.keep_removed:
                    yield doc
