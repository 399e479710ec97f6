"""Judge verdicts kept in SQLite: a rerun pays for nothing it already asked.

A verdict is keyed by the two documents' content hashes (BLAKE2b-128 of their texts, in a
fixed order: the pair is unordered), the backend, the model and the prompt version and mode
— a new model or prompt asks again. Failed calls are never stored (a rerun retries them).
Rows hold numbers and short strings only; nothing read back is unpickled or evaluated.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from semhash_llm.judge.prompt import Verdict

__all__ = ["JudgeCache", "pair_key", "text_hash"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    prompt TEXT NOT NULL,
    p_yes REAL NOT NULL,
    duplicate INTEGER,
    type TEXT,
    confidence REAL,
    created REAL NOT NULL
)
"""


def text_hash(text: str) -> str:
    """BLAKE2b-128 of the UTF-8 text (hex)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def pair_key(a: str, b: str, model: str, prompt: str) -> str:
    """The cache key of an unordered pair of texts for one model and prompt version."""
    ha, hb = sorted((text_hash(a), text_hash(b)))
    return hashlib.blake2b(f"{ha}|{hb}|{model}|{prompt}".encode(), digest_size=20).hexdigest()


class JudgeCache:
    """A SQLite file of verdicts (WAL journal; safe from several threads of one process)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(_SCHEMA)
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"The judge cache {self.path} cannot be opened as SQLite ({exc}). Delete it, or pass "
                             "another --judge-cache") from None

    def get_many(self, keys: Sequence[str]) -> dict[str, Verdict]:
        """The stored verdicts of those ``keys`` that have one."""
        out: dict[str, Verdict] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = list(keys[start:start + 500])
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT key, p_yes, duplicate, type, confidence FROM verdicts WHERE key IN ({marks})", chunk)
                for key, p, dup, type_, conf in rows:
                    out[str(key)] = Verdict(float(p), duplicate=None if dup is None else bool(dup),
                                            type=None if type_ is None else str(type_),
                                            confidence=None if conf is None else float(conf))
        return out

    def put_many(self, items: Iterable[tuple[str, Verdict]], model: str, prompt: str) -> int:
        """Store successful verdicts (failed ones are skipped); returns how many were stored."""
        rows = [(key, model, prompt, float(v.p_yes), None if v.duplicate is None else int(v.duplicate), v.type,
                 v.confidence, time.time()) for key, v in items if v.p_yes is not None]
        if rows:
            with self._lock:
                self._db.executemany("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
                self._db.commit()
        return len(rows)

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
