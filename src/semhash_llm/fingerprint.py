"""Fingerprints of what a run's decisions depend on beyond its settings: the package version
and the *contents* of the weight files it loads.

A settings fingerprint (:meth:`semhash_llm.config.PipelineConfig.fingerprint`) names model
paths, not what is in them. Retraining weights in place, or upgrading the package, leaves the
settings as they were while the decisions change; a resume or an index that trusted the
settings alone would then reuse stale decisions or mix codes from two students. So the
checkpoints and the index also compare :func:`weights_fingerprint`: SHA-256 over the package
version and every weight file the configuration reads — the shipped assets and each path a
setting names (a folder: all its files). The weights are small (the shipped ones are about
11 MB; hashing them takes tens of milliseconds, once per process for unchanged files). A file
larger than :data:`CONTENT_LIMIT` (a judge's multi-GB GGUF) is fingerprinted by its size and
modification time instead of its bytes. A setting that is not a path on this machine (a model
hub name, a server's model) enters by its name.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from semhash_llm import __version__

if TYPE_CHECKING:
    from semhash_llm.config import PipelineConfig

__all__ = ["weights_fingerprint", "run_fingerprint", "weight_sources", "path_digest", "ASSETS_ROOT", "CONTENT_LIMIT"]

ASSETS_ROOT = Path(__file__).resolve().parent / "assets"
"""The weights shipped in the package."""
CONTENT_LIMIT = 256 << 20
"""Files up to this size are hashed by content; larger ones by size and modification time."""


@functools.lru_cache(maxsize=4096)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    """SHA-256 of a file's bytes (cached per path, size and mtime: one read per process)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def path_digest(path: str | Path) -> str:
    """SHA-256 of a file's contents, or of a folder's files (relative names and contents, in
    sorted order); a missing path digests its name."""
    p = Path(path)
    h = hashlib.sha256()
    if p.is_file():
        files: Iterable[tuple[str, Path]] = [("", p)]
    elif p.is_dir():
        files = sorted((str(f.relative_to(p)), f) for f in p.rglob("*") if f.is_file() and "__pycache__" not in f.parts)
    else:
        h.update(b"name:" + str(path).encode("utf-8", errors="surrogatepass"))
        return h.hexdigest()
    for rel, f in files:
        st = f.stat()
        if st.st_size > CONTENT_LIMIT:
            part = f"stat:{st.st_size}:{st.st_mtime_ns}"
        else:
            part = _file_digest(os.fspath(f), st.st_size, st.st_mtime_ns)
        h.update(f"{rel}\0{part}\n".encode("utf-8", errors="surrogatepass"))
    return h.hexdigest()


def weight_sources(config: PipelineConfig, features_only: bool = False) -> dict[str, str]:
    """The weights ``config`` reads, by role: the shipped assets and every model path or name a
    setting gives. ``features_only``: just those that shape an index's stored features (SPH)."""
    out: dict[str, str] = {"shipped": os.fspath(ASSETS_ROOT / "sph") if features_only else os.fspath(ASSETS_ROOT)}
    sph = config.sph
    named: dict[str, str | None] = {"sph.student_path": sph.student_path, "sph.hyperplanes_path": sph.hyperplanes_path,
                                    "sph.teacher": sph.teacher}
    if not features_only:
        named.update({"verifier.model_path": config.verifier.model_path, "aw.importance_model": config.aw.importance_model,
                      "judge.model": config.judge.model})
    for role, value in named.items():
        if value:
            out[role] = value
    return out


def weights_fingerprint(config: PipelineConfig, features_only: bool = False) -> str:
    """SHA-256 (16 hex) of the package version and the contents of :func:`weight_sources`."""
    h = hashlib.sha256(f"semhash-llm {__version__}\n".encode())
    for role, source in sorted(weight_sources(config, features_only).items()):
        h.update(f"{role}\0{path_digest(source)}\n".encode())
    return h.hexdigest()[:16]


def run_fingerprint(config: PipelineConfig) -> str:
    """What a checkpoint must match to be resumed: the settings, the version and the weights."""
    blob = f"{config.fingerprint()}:{weights_fingerprint(config)}".encode()
    return hashlib.sha256(blob).hexdigest()[:16]
