"""Atomic writes: a file or directory appears whole or not at all."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

__all__ = ["write_json_atomic", "write_text_atomic", "fsync_path"]


def write_json_atomic(path: Path, payload: dict[str, Any], default: Callable[[Any], Any] | None = None) -> None:
    """Write JSON to a temporary file beside ``path``, fsync it, and rename it into place."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as fh:
        json.dump(payload, fh, indent=1, sort_keys=True, default=default)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_text_atomic(path: Path, text: str) -> None:
    """Write UTF-8 text to a temporary file beside ``path``, fsync it, and rename it into place."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def fsync_path(path: Path) -> None:
    """Flush a file or a directory entry to disk (best effort: some filesystems refuse a directory)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
