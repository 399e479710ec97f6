"""Resumable runs: each step's output kept beside the run's output, behind a completion marker.

A run with an output directory keeps, in ``OUT/.checkpoints/``, what every step after the
stream decided: a stage's :class:`~semhash_llm.stages.base.Decision` (its edges, fragments,
contained children, documents to re-feature and its report row), the union-find after it,
and the *hand-off* state the later stages read from it (the pairs a linking stage deferred to
the verifier, the pairs the verifier referred to the judge, the judge's pair log: each stage
names these in ``handoff_fields``); then the selection. A run killed and started again with
the same command streams the input again, reuses every step whose marker is there, and
computes the rest; the features of a kept stage are computed again only where a step still to
run reads them (they are not stored: see ``reads_features_of`` on the stages); ``report.json`` lists the
reused steps as ``resumed_stages``.

A step is written into a temporary directory and renamed into place when complete: the
rename is the completion marker, so a step killed while it was being written is absent, not
half there. The manifest holds the input fingerprint (every file's path, size and
modification time) and the config fingerprint; when either differs from the run's, the old
steps are removed and the run starts afresh, and says why. Arrays are ``.npy`` files read
with ``allow_pickle=False``, everything else JSON: nothing is unpickled. The directory is
removed when the run's outputs are written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from semhash_llm.io.atomic import fsync_path, write_json_atomic
from semhash_llm.io.sources import Source
from semhash_llm.pipeline.capabilities import capabilities_of
from semhash_llm.stages.base import DecideContext, Decision, Edges, FragmentCandidates, Fragments, Stage

__all__ = ["Checkpoints", "input_fingerprint", "CHECKPOINT_DIR", "features_not_needed", "save_decision",
           "restore_decision", "pack_handoff", "unpack_handoff"]

logger = logging.getLogger(__name__)

CHECKPOINT_DIR = ".checkpoints"
_FORMAT = 1


def input_fingerprint(source: Source) -> str | None:
    """SHA-256 (16 hex) of every input file's resolved path, size and modification time, in
    order; ``None`` for a source that is not files (records in memory cannot be resumed)."""
    files = getattr(source, "files", None)
    if not files:
        return None
    h = hashlib.sha256()
    for f in files:
        path = Path(f.path)
        if not path.exists():
            return None
        st = path.stat()
        h.update(f"{path.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\0{f.name}\n".encode())
    return h.hexdigest()[:16]


class Checkpoints:
    """The completed steps of one run (see the module docstring)."""

    def __init__(self, root: Path, input_fp: str, config_fp: str) -> None:
        self.root = Path(root)
        self.input_fp = input_fp
        self.config_fp = config_fp
        self.fresh_reason: str | None = None
        """Why earlier steps were dropped (``None``: none were there, or they were kept)."""

    def open(self) -> list[str]:
        """Check the manifest against this run's fingerprints; drop the steps of another input or
        config. Returns the names of the completed steps that can be reused, in order."""
        manifest = self.root / "manifest.json"
        if self.root.exists():
            try:
                found = json.loads(manifest.read_text())
            except (OSError, ValueError):
                found = None
            if not isinstance(found, dict):
                self.fresh_reason = "the checkpoint manifest was missing or unreadable"
            elif found.get("format") != _FORMAT:
                self.fresh_reason = "the checkpoints were written by another version"
            elif found.get("input") != self.input_fp:
                self.fresh_reason = "the input changed since the interrupted run"
            elif found.get("config") != self.config_fp:
                self.fresh_reason = ("the config changed since the interrupted run (its settings, the package "
                                     "version or the contents of a weight file it reads)")
            else:
                for step in sorted(p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")):
                    problem = _unreadable(step)
                    if problem is not None:
                        self.fresh_reason = f"the checkpoint {step.name} is unreadable ({problem})"
                        break
            if self.fresh_reason is not None:
                logger.warning("not resuming: %s; starting afresh", self.fresh_reason)
                shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)
        write_json_atomic(manifest, {"format": _FORMAT, "input": self.input_fp, "config": self.config_fp})
        steps = sorted(p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))
        return [p.name.split("-", 1)[1] for p in steps]

    def _dir(self, order: int, name: str) -> Path:
        return self.root / f"{order:02d}-{name}"

    def has(self, order: int, name: str) -> bool:
        return (self._dir(order, name) / "meta.json").exists()

    def save(self, order: int, name: str, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        """Write step ``name`` (``order``-th) atomically: a temporary directory renamed into place."""
        final = self._dir(order, name)
        tmp = self.root / f".tmp-{order:02d}-{name}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for key, value in arrays.items():
            arr = np.asarray(value)
            if arr.dtype == object:
                arr = arr.astype(str)
            with open(tmp / f"{_safe(key)}.npy", "wb") as fh:
                np.save(fh, arr, allow_pickle=False)
                fh.flush()
                os.fsync(fh.fileno())
        write_json_atomic(tmp / "meta.json", {"arrays": sorted(arrays), **meta}, default=_json_default)
        fsync_path(tmp)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        fsync_path(self.root)

    def load(self, order: int, name: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The arrays and meta of a completed step."""
        d = self._dir(order, name)
        meta = json.loads((d / "meta.json").read_text())
        arrays = {key: np.load(d / f"{_safe(key)}.npy", allow_pickle=False) for key in meta.pop("arrays")}
        return arrays, meta

    def remove(self) -> None:
        """Drop every step (the run's outputs are written)."""
        shutil.rmtree(self.root, ignore_errors=True)


def _unreadable(step: Path) -> str | None:
    """Why a step directory cannot be loaded (damaged, tampered with, a pickled array), or ``None``."""
    try:
        meta = json.loads((step / "meta.json").read_text())
        for key in meta["arrays"]:
            np.load(step / f"{_safe(key)}.npy", mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _safe(key: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in key)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"checkpoint meta: cannot store a {type(value).__name__}")


def pack_handoff(stage: object) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The hand-off state a stage names in ``handoff_fields``, as arrays and JSON scalars:
    an array as itself, a dataclass of arrays and numbers field by field, a dict of arrays
    key by key."""
    arrays: dict[str, np.ndarray] = {}
    scalars: dict[str, Any] = {}
    for name in capabilities_of(stage).handoff_fields:
        value = getattr(stage, name)
        if isinstance(value, np.ndarray):
            arrays[f"h.{name}"] = value
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for f in dataclasses.fields(value):
                v = getattr(value, f.name)
                if isinstance(v, np.ndarray):
                    arrays[f"h.{name}.{f.name}"] = v
                else:
                    scalars[f"{name}.{f.name}"] = v
        elif isinstance(value, dict):
            for key, v in value.items():
                arrays[f"h.{name}.{key}"] = np.asarray(v)
            scalars[f"{name}.__keys__"] = list(value)
        else:
            raise TypeError(f"stage {getattr(stage, 'name', stage)!r}: hand-off field {name!r} is a "
                            f"{type(value).__name__}, which a checkpoint cannot hold")
    return arrays, scalars


def unpack_handoff(stage: object, arrays: dict[str, np.ndarray], scalars: dict[str, Any]) -> None:
    """Set the hand-off fields :func:`pack_handoff` stored back onto ``stage``."""
    for name in capabilities_of(stage).handoff_fields:
        current = getattr(stage, name)
        if isinstance(current, np.ndarray):
            setattr(stage, name, arrays[f"h.{name}"])
        elif dataclasses.is_dataclass(current) and not isinstance(current, type):
            values = {f.name: arrays[f"h.{name}.{f.name}"] if f"h.{name}.{f.name}" in arrays
                      else scalars[f"{name}.{f.name}"] for f in dataclasses.fields(current)}
            setattr(stage, name, type(current)(**values))
        elif isinstance(current, dict):
            setattr(stage, name, {key: arrays[f"h.{name}.{key}"] for key in scalars[f"{name}.__keys__"]})


def features_not_needed(stages: Sequence[Stage], ck: Checkpoints | None) -> frozenset[str]:
    """The stages whose streamed features a resumed run need not compute: their decision is
    kept, no step still to run reads them, and they claim no documents while streaming.

    Read from each stage's :class:`~semhash_llm.pipeline.capabilities.Capabilities`: a stage's
    decision reads its own features and those of the stages in its ``reads_features_of`` (a
    linking stage: the verifier's deferral and AW-MinHash's confirmation); until the selection is
    checkpointed, its cover check reads the stages that answer it (a ``cover_rank``). A stage
    that ``claims_documents`` (Bloom) always streams: the documents it claims are the ones the
    others do not see."""
    if ck is None:
        return frozenset()
    done = {st.name for i, st in enumerate(stages) if ck.has(i + 1, st.name)}
    if not done:
        return frozenset()
    needed: set[str] = set()
    for st in stages:
        if capabilities_of(st).claims_documents:
            needed.add(st.name)
        if st.name not in done:
            needed.add(st.name)
            needed.update(capabilities_of(st).reads_features_of)
    if not ck.has(len(stages) + 1, "select"):
        needed.update(st.name for st in stages if capabilities_of(st).cover_evidence)
    return frozenset(done - needed)


def save_decision(ck: Checkpoints, order: int, stage: Stage, decision: Decision, ctx: DecideContext,
                   seconds: float) -> None:
    """Keep a stage's decision, the union-find after it and its hand-off state (one step)."""
    e, fr = decision.edges, decision.fragments
    arrays = {"edges_a": e.a, "edges_b": e.b, "edges_score": e.score, "edges_kind": e.kind,
              "refeature": decision.refeature, "children": decision.children, "fragments_doc": fr.doc,
              "fragments_start": fr.start, "fragments_end": fr.end, "union_find": ctx.union_find.parent_,
              **decision.fragment_candidates.to_arrays("fcand_")}
    handoff, scalars = pack_handoff(stage)
    arrays.update(handoff)
    ck.save(order, stage.name, arrays, {"docs_in": decision.docs_in, "pairs_in": decision.pairs_in,
                                        "pairs_out": decision.pairs_out, "details": decision.details,
                                        "handoff": scalars, "seconds": seconds})


def restore_decision(ck: Checkpoints, order: int, stage: Stage, ctx: DecideContext) -> tuple[Decision, float]:
    """A stage's kept decision, with the union-find and the stage's hand-off state set as it left them."""
    arrays, meta = ck.load(order, stage.name)
    parent = arrays["union_find"]
    if parent.shape != ctx.union_find.parent_.shape:
        raise RuntimeError(f"checkpoint {stage.name!r} holds {parent.size} documents, the run {ctx.num_docs}")
    ctx.union_find.parent_[:] = parent
    unpack_handoff(stage, arrays, meta["handoff"])
    decision = Decision(Edges(arrays["edges_a"], arrays["edges_b"], arrays["edges_score"], arrays["edges_kind"]),
                        docs_in=int(meta["docs_in"]), pairs_in=int(meta["pairs_in"]), pairs_out=int(meta["pairs_out"]),
                        details={**meta["details"], "resumed": True}, refeature=arrays["refeature"],
                        children=arrays["children"],
                        fragments=Fragments(arrays["fragments_doc"], arrays["fragments_start"],
                                            arrays["fragments_end"]),
                        fragment_candidates=FragmentCandidates.from_arrays(arrays, "fcand_"))
    return decision, float(meta["seconds"])
