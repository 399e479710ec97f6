"""Bounded-memory grouping of ``(key, doc, extra)`` records: sorted runs spilled to disk, k-way merged.

The passage stage sees ~10-50 passages per document and up to billions of documents, so it
never keeps a Python dict over every passage. :class:`KeyOccurrences` appends records to a
fixed-size in-memory buffer; when the buffer is full it is sorted by ``(key, doc, extra)``
and written to a temporary file as one sorted *run* (the only I/O in ``sketch/``).
:meth:`KeyOccurrences.groups` then merges the runs in a streaming way and yields, in key
order, the keys that occur in at least ``min_distinct`` distinct documents (or distinct
clusters, when a ``doc -> cluster`` map is given), each with all of its occurrences.

Memory
    ``memory_budget_bytes`` bounds what the object holds. While adding, the buffer takes
    24 bytes per record (``uint64`` key, ``int64`` doc, ``int64`` extra) and sorting it
    needs 16 more per record (the permutation and one gathered column), so the buffer holds
    ``budget // 40`` records. While merging, each of the ``m`` runs is read in blocks of
    ``budget // (192 m)`` records and holds at most two blocks (the frontier run reads one
    block past the frontier key), so the windows take a quarter of the budget; with the
    merge's input copy and its output, at most three quarters (``peak_merge_bytes_``
    records what was held); the rest covers the per-window group arrays. The one exception is a
    single key whose occurrences exceed a block: a group is always materialised whole, so a
    key seen ``G`` times holds ``24 G`` bytes per run while it is merged (a cookie notice
    on ten million pages is a 240 MB group). Disk use is 24 bytes per record.

Run files
    One raw little-endian binary file per run, column-major: ``n`` keys, then ``n`` docs,
    then ``n`` extras (``n`` known from the writer; each column is read in blocks with
    ``seek`` + ``readinto``, no memory map, so resident memory is only what is read). A run
    is written under a ``.tmp`` name and renamed into place (atomic on POSIX). The files
    live in a private ``mkdtemp`` directory (inside ``temp_dir`` when given), created at the
    first spill and removed by :meth:`KeyOccurrences.close`, by the context manager (also
    on an exception) or, as a last resort, when the object is garbage-collected.

Merge design (safe frontier)
    Every run keeps a *window* (the block read last, minus what was already emitted). The
    frontier is the smallest last key among the windows of runs not yet read to the end:
    no unread record can have a smaller key. Runs whose window ends exactly on the frontier
    key read further blocks until their window passes that key, so every occurrence of every
    key ``<= frontier`` is now in memory; those prefixes are cut off every window, merged
    by a numba heap over the sorted chunks (``O(r log m)``) and grouped by a numba scan.
    Each round empties at least the frontier run's window, so there are at most
    ``records / block + m`` rounds. A key's occurrences are therefore always in one window:
    group statistics are exact. With more than ``max_fan_in`` runs, :meth:`finalize` first
    merges runs ``max_fan_in`` at a time into bigger runs (a classic multi-pass external
    sort), so no more than ``max_fan_in`` files are open at once.

Determinism
    Records are totally ordered by ``(key, doc, extra)`` (equal triples are
    indistinguishable) and the output batches are cut from the group sequence alone (at the
    first group boundary past ``batch_records`` records), so the batches are identical
    whether 0 or 20 runs were spilled, whatever the budget, block size or fan-in.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from io import BufferedReader
from pathlib import Path
from types import TracebackType
from typing import Any

import numba as nb
import numpy as np

__all__ = ["KeyOccurrences", "KeyGroups", "KeyCountStats"]

RECORD_BYTES = 24
"""Bytes of one record in memory and on disk: ``uint64`` key, ``int64`` doc, ``int64`` extra."""
_BUFFER_BYTES_PER_RECORD = 40  # record (24) + argsort permutation (8) + one gathered column (8)
_MERGE_SHARE = 192  # block = budget // (192 m): <= 2 blocks of 24 B per run -> windows <= budget / 4
_MIN_BUDGET = 1 << 20
_MIN_BLOCK = 128
_FIRST_ALLOC = 1 << 16
_COLUMN_DTYPES = (np.dtype("<u8"), np.dtype("<i8"), np.dtype("<i8"))
_MAX_KEY = np.uint64(0xFFFFFFFFFFFFFFFF)


# ----------------------------------------------------------------------------- numba kernels


@nb.njit(inline="always", cache=True)
def _less(k1: Any, d1: Any, e1: Any, k2: Any, d2: Any, e2: Any) -> bool:
    if k1 != k2:
        return bool(k1 < k2)
    if d1 != d2:
        return bool(d1 < d2)
    return bool(e1 < e2)


@nb.njit(cache=True)
def _sort_ties(keys: np.ndarray, docs: np.ndarray, extras: np.ndarray) -> None:
    """In place: given records sorted by key, sort every run of equal keys by ``(doc, extra)``."""
    n = keys.shape[0]
    i = 0
    while i < n:
        j = i + 1
        ordered = True
        while j < n and keys[j] == keys[i]:
            if docs[j] < docs[j - 1] or (docs[j] == docs[j - 1] and extras[j] < extras[j - 1]):
                ordered = False
            j += 1
        if not ordered:
            if j - i <= 32:
                for a in range(i + 1, j):
                    d = docs[a]
                    e = extras[a]
                    b = a - 1
                    while b >= i and (docs[b] > d or (docs[b] == d and extras[b] > e)):
                        docs[b + 1] = docs[b]
                        extras[b + 1] = extras[b]
                        b -= 1
                    docs[b + 1] = d
                    extras[b + 1] = e
            else:
                by_extra = np.argsort(extras[i:j], kind="mergesort")
                by_doc = np.argsort(docs[i:j][by_extra], kind="mergesort")
                order = by_extra[by_doc]
                docs[i:j] = docs[i:j][order]
                extras[i:j] = extras[i:j][order]
        i = j


@nb.njit(cache=True)
def _merge_chunks(
    keys: np.ndarray,
    docs: np.ndarray,
    extras: np.ndarray,
    bounds: np.ndarray,
    out_keys: np.ndarray,
    out_docs: np.ndarray,
    out_extras: np.ndarray,
) -> None:
    """Merge the sorted chunks ``[bounds[c], bounds[c+1])`` into ``out_*`` with a binary heap."""
    m = bounds.shape[0] - 1
    pos = bounds[:-1].copy()
    heap = np.empty(m, dtype=np.int64)
    size = 0
    for c in range(m):
        if pos[c] < bounds[c + 1]:
            heap[size] = c
            x = size
            size += 1
            while x > 0:  # sift up
                parent = (x - 1) >> 1
                pc = pos[heap[parent]]
                px = pos[heap[x]]
                if _less(keys[px], docs[px], extras[px], keys[pc], docs[pc], extras[pc]):
                    heap[parent], heap[x] = heap[x], heap[parent]
                    x = parent
                else:
                    break
    o = 0
    while size > 0:
        c = heap[0]
        p = pos[c]
        out_keys[o] = keys[p]
        out_docs[o] = docs[p]
        out_extras[o] = extras[p]
        o += 1
        pos[c] = p + 1
        if pos[c] == bounds[c + 1]:
            size -= 1
            heap[0] = heap[size]
        x = 0
        while True:  # sift down
            left = 2 * x + 1
            if left >= size:
                break
            best = left
            pb = pos[heap[left]]
            right = left + 1
            if right < size:
                pr = pos[heap[right]]
                if _less(keys[pr], docs[pr], extras[pr], keys[pb], docs[pb], extras[pb]):
                    best = right
                    pb = pr
            px = pos[heap[x]]
            if _less(keys[pb], docs[pb], extras[pb], keys[px], docs[px], extras[px]):
                heap[best], heap[x] = heap[x], heap[best]
                x = best
            else:
                break


@nb.njit(cache=True)
def _group_distinct(
    keys: np.ndarray,
    docs: np.ndarray,
    group_of: np.ndarray,
    use_group_of: bool,
    min_distinct: int,
    starts: np.ndarray,
    distinct: np.ndarray,
) -> int:
    """Split sorted records into key groups; return their number ``g``.

    ``starts[:g + 1]`` are the group boundaries and ``distinct[:g]`` the number of distinct
    docs per group. With ``use_group_of``, groups with at least ``min_distinct`` distinct
    docs (a necessary condition) get the number of distinct ``group_of[doc]`` instead.
    """
    n = keys.shape[0]
    g = 0
    i = 0
    while i < n:
        j = i + 1
        nd = 1
        while j < n and keys[j] == keys[i]:
            if docs[j] != docs[j - 1]:
                nd += 1
            j += 1
        if use_group_of and nd > 1 and nd >= min_distinct:
            clusters = np.empty(j - i, dtype=np.int64)
            for a in range(i, j):
                clusters[a - i] = group_of[docs[a]]
            clusters.sort()
            nd = 1
            for a in range(1, j - i):
                if clusters[a] != clusters[a - 1]:
                    nd += 1
        starts[g] = i
        distinct[g] = nd
        g += 1
        i = j
    starts[g] = n
    return g


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True, eq=False)
class KeyGroups:
    """A batch of key groups, in key order, in flat (CSR) form.

    Group ``i`` has key ``keys[i]`` and the occurrences ``docs[offsets[i]:offsets[i+1]]``,
    ``extras[offsets[i]:offsets[i+1]]``, sorted by ``(doc, extra)``; ``distinct[i]`` is its
    number of distinct documents (or clusters, when a ``group_of`` map was given).
    """

    keys: np.ndarray
    offsets: np.ndarray
    docs: np.ndarray
    extras: np.ndarray
    distinct: np.ndarray

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    @property
    def n_records(self) -> int:
        """Occurrences in the batch."""
        return int(self.docs.shape[0])

    def group(self, i: int) -> tuple[int, np.ndarray, np.ndarray]:
        """Group ``i`` as ``(key, docs, extras)`` (views into the batch)."""
        s, e = int(self.offsets[i]), int(self.offsets[i + 1])
        return int(self.keys[i]), self.docs[s:e], self.extras[s:e]

    def __iter__(self) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        for i in range(len(self)):
            yield self.group(i)


@dataclass
class KeyCountStats:
    """How often keys recur, for the report.

    ``distinct`` counts per key are over documents, or over clusters when ``counted ==
    "clusters"``. ``log2_histogram[b]`` is the number of keys whose distinct count lies in
    ``[2**b, 2**(b+1))``; ``at_least[k]`` the number of keys with a distinct count ``>= k``
    and ``records_at_least[k]`` their occurrences.
    """

    counted: str
    n_records: int = 0
    n_keys: int = 0
    max_distinct: int = 0
    at_least: dict[int, int] = field(default_factory=dict)
    records_at_least: dict[int, int] = field(default_factory=dict)
    log2_histogram: np.ndarray = field(default_factory=lambda: np.zeros(64, dtype=np.int64))

    def histogram_rows(self) -> list[tuple[int, int, int]]:
        """Non-empty histogram buckets as ``(lowest count, highest count, keys)``."""
        return [(1 << b, (1 << (b + 1)) - 1, int(n)) for b, n in enumerate(self.log2_histogram) if n]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "counted": self.counted,
            "n_records": self.n_records,
            "n_keys": self.n_keys,
            "max_distinct": self.max_distinct,
            "at_least": {str(k): v for k, v in self.at_least.items()},
            "records_at_least": {str(k): v for k, v in self.records_at_least.items()},
            "log2_histogram": [{"from": lo, "to": hi, "keys": n} for lo, hi, n in self.histogram_rows()],
        }


# ----------------------------------------------------------------------------- runs


class _Run:
    """A sorted run: ``n`` records in memory or in a column-major file."""

    def __init__(self, n: int, path: Path | None = None, columns: tuple[np.ndarray, ...] | None = None) -> None:
        self.n = n
        self.path = path
        self.columns = columns

    def open(self) -> BufferedReader | None:
        return None if self.path is None else open(self.path, "rb")  # noqa: SIM115

    def read(self, fh: BufferedReader | None, start: int, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        count = min(count, self.n - start)
        if self.columns is not None:
            k, d, e = self.columns
            return k[start:start + count], d[start:start + count], e[start:start + count]
        assert fh is not None
        out = []
        for col, dtype in enumerate(_COLUMN_DTYPES):
            arr = np.empty(count, dtype=dtype)
            fh.seek((col * self.n + start) * 8)
            got = fh.readinto(arr.data.cast("B"))
            if got != arr.nbytes:
                raise OSError(f"Spilled run {self.path} is truncated: read {got} of {arr.nbytes} bytes.")
            out.append(arr)
        return out[0], out[1], out[2]


def _remove_dir(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _check_int(value: object, name: str, minimum: int, owner: str = "KeyOccurrences") -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or int(value) < minimum:
        raise ValueError(f"The '{name}' parameter of {owner} must be an int >= {minimum}. Got {value!r} instead.")
    return int(value)


def _int_column(values: object, name: str, dtype: np.dtype) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise ValueError(
            f"The '{name}' parameter of KeyOccurrences.add must be a 1-D integer array. "
            f"Got {arr.ndim}-D {arr.dtype} instead."
        )
    return np.ascontiguousarray(arr.astype(dtype, copy=False))


# ----------------------------------------------------------------------------- the counter


class KeyOccurrences:
    """Occurrences of 64-bit keys in documents, counted with bounded memory.

    Append batches of ``(key, doc, extra)`` records with :meth:`add` (``extra`` is free for
    the caller: the passage index in its document, a packed offset...). Past
    ``memory_budget_bytes`` the buffer is sorted and spilled to a temporary file as one
    sorted run. :meth:`groups` merges the runs and yields, in key order, batches of the keys
    found in at least ``min_distinct`` distinct documents (or clusters), with all their
    occurrences; :meth:`count_distinct` summarises how often keys recur. See the module
    docstring for the memory bound, the file format and the merge.

    Use it as a context manager (or call :meth:`close`) so that the spilled files go away::

        with KeyOccurrences(memory_budget_bytes=64 << 20) as occ:
            for keys, docs, extras in batches:
                occ.add(keys, docs, extras)
            for batch in occ.groups(min_distinct=3, group_of=roots):
                for key, key_docs, key_extras in batch:
                    ...
    """

    def __init__(
        self,
        memory_budget_bytes: int = 256 << 20,
        temp_dir: str | os.PathLike[str] | None = None,
        max_fan_in: int = 64,
    ) -> None:
        self.memory_budget_bytes = _check_int(memory_budget_bytes, "memory_budget_bytes", _MIN_BUDGET)
        self.max_fan_in = _check_int(max_fan_in, "max_fan_in", 2)
        self.temp_dir = None if temp_dir is None else Path(temp_dir)
        self.capacity = self.memory_budget_bytes // _BUFFER_BYTES_PER_RECORD
        self._keys = np.empty(0, dtype=np.uint64)
        self._docs = np.empty(0, dtype=np.int64)
        self._extras = np.empty(0, dtype=np.int64)
        self._size = 0
        self._runs: list[_Run] = []
        self._dir: str | None = None
        self._cleanup: weakref.finalize | None = None
        self._seq = 0
        self._finalized = False
        self._closed = False
        self.n_records_ = 0
        self.max_doc_ = -1
        self.runs_spilled_ = 0
        self.intermediate_merges_ = 0
        self.bytes_spilled_ = 0
        self.peak_merge_bytes_ = 0

    # -- state ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.n_records_

    @property
    def nbytes(self) -> int:
        """Bytes of the in-memory buffer (allocated, not only filled)."""
        return int(self._keys.nbytes + self._docs.nbytes + self._extras.nbytes)

    @property
    def n_runs(self) -> int:
        """Sorted runs held now (spilled files, plus the in-memory run after :meth:`finalize`)."""
        return len(self._runs)

    @property
    def spill_dir(self) -> Path | None:
        """The private directory of the spilled runs, once one was spilled."""
        return None if self._dir is None else Path(self._dir)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("KeyOccurrences is closed.")

    # -- adding --------------------------------------------------------------------------

    def add(self, keys: np.ndarray, docs: np.ndarray, extras: np.ndarray) -> None:
        """Append records ``(keys[i], docs[i], extras[i])``; spill sorted runs when the buffer is full.

        ``keys`` are taken as ``uint64`` (signed hashes are reinterpreted), ``docs`` (document indices, ``>= 0``) and
        ``extras`` as ``int64``; the three arrays must be 1-D and of one length.
        """
        self._check_open()
        if self._finalized:
            raise RuntimeError("KeyOccurrences.add was called after finalize() or groups().")
        k = _int_column(keys, "keys", np.dtype(np.uint64))
        d = _int_column(docs, "docs", np.dtype(np.int64))
        e = _int_column(extras, "extras", np.dtype(np.int64))
        n = k.shape[0]
        if d.shape[0] != n or e.shape[0] != n:
            raise ValueError(
                "The 'keys', 'docs' and 'extras' parameters of KeyOccurrences.add must have one length. "
                f"Got {n}, {d.shape[0]} and {e.shape[0]} instead."
            )
        if n == 0:
            return
        lo, hi = int(d.min()), int(d.max())
        if lo < 0:
            raise ValueError(f"The 'docs' parameter of KeyOccurrences.add must hold indices >= 0. Got {lo} instead.")
        self.max_doc_ = max(self.max_doc_, hi)
        pos = 0
        while pos < n:
            if self._size == self.capacity:
                self._spill_buffer()
            take = min(self.capacity - self._size, n - pos)
            self._reserve(self._size + take)
            s = self._size
            self._keys[s:s + take] = k[pos:pos + take]
            self._docs[s:s + take] = d[pos:pos + take]
            self._extras[s:s + take] = e[pos:pos + take]
            self._size += take
            self.n_records_ += take
            pos += take

    def _reserve(self, need: int) -> None:
        alloc = self._keys.shape[0]
        if need <= alloc:
            return
        new = min(self.capacity, max(need, 2 * alloc, _FIRST_ALLOC))
        for name in ("_keys", "_docs", "_extras"):
            old = getattr(self, name)
            grown = np.empty(new, dtype=old.dtype)
            grown[: self._size] = old[: self._size]
            setattr(self, name, grown)

    def _sort_buffer(self) -> None:
        """Sort the filled buffer in place by ``(key, doc, extra)``: 16 bytes per record of scratch."""
        n = self._size
        k, d, e = self._keys[:n], self._docs[:n], self._extras[:n]
        order = np.argsort(k)  # unstable is fine: ties are fully ordered next
        for col in (k, d, e):
            col[:] = col[order]
        del order
        _sort_ties(k, d, e)

    def _new_run_path(self) -> Path:
        if self._dir is None:
            if self.temp_dir is not None:
                self.temp_dir.mkdir(parents=True, exist_ok=True)
            self._dir = tempfile.mkdtemp(prefix="semhash-keys-", dir=self.temp_dir)
            self._cleanup = weakref.finalize(self, _remove_dir, self._dir)
        self._seq += 1
        return Path(self._dir) / f"run-{self._seq:06d}.bin"

    def _spill_buffer(self) -> None:
        self._sort_buffer()
        n = self._size
        path = self._new_run_path()
        tmp = path.with_suffix(".tmp")
        try:
            with open(tmp, "wb") as fh:
                for col in (self._keys, self._docs, self._extras):
                    fh.write(col[:n].data.cast("B"))
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self._runs.append(_Run(n, path=path))
        self._size = 0
        self.runs_spilled_ += 1
        self.bytes_spilled_ += n * RECORD_BYTES

    # -- merging -------------------------------------------------------------------------

    def finalize(self) -> None:
        """Close the input: sort what is buffered and cut the runs down to ``max_fan_in``.

        With no spilled run the buffer stays in memory as the only run; otherwise it is
        spilled too and freed, so the whole budget is left to the merge. Idempotent;
        :meth:`groups` and :meth:`count_distinct` call it.
        """
        self._check_open()
        if self._finalized:
            return
        if self._size > 0:
            if self._runs:
                self._spill_buffer()
            else:
                self._sort_buffer()
                n = self._size
                self._runs.append(_Run(n, columns=(self._keys[:n], self._docs[:n], self._extras[:n])))
        if self._runs and self._runs[0].columns is None:
            self._keys = np.empty(0, dtype=np.uint64)
            self._docs = np.empty(0, dtype=np.int64)
            self._extras = np.empty(0, dtype=np.int64)
        self._size = 0
        self._finalized = True
        while len(self._runs) > self.max_fan_in:
            first, self._runs = self._runs[: self.max_fan_in], self._runs[self.max_fan_in:]
            self._runs.append(self._merge_into_one(first))

    def _merge_into_one(self, runs: list[_Run]) -> _Run:
        """Merge ``runs`` (files) into one new run file and delete them."""
        total = sum(r.n for r in runs)
        path = self._new_run_path()
        tmp = path.with_suffix(".tmp")
        written = 0
        try:
            with open(tmp, "wb") as fh:
                for k, d, e in self._windows(runs):
                    for col, arr in enumerate((k, d, e)):
                        fh.seek((col * total + written) * 8)
                        fh.write(np.ascontiguousarray(arr).data.cast("B"))
                    written += k.shape[0]
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        for r in runs:
            if r.path is not None:
                r.path.unlink(missing_ok=True)
        self.intermediate_merges_ += 1
        return _Run(total, path=path)

    def _block_records(self, m: int) -> int:
        return max(_MIN_BLOCK, self.memory_budget_bytes // (_MERGE_SHARE * max(m, 1)))

    def _windows(self, runs: list[_Run]) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Yield the merged records of ``runs`` in sorted windows that never split a key."""
        m = len(runs)
        block = self._block_records(m)
        handles: list[BufferedReader | None] = []
        try:
            for r in runs:
                handles.append(r.open())
            nxt = [0] * m
            empty = (np.empty(0, np.uint64), np.empty(0, np.int64), np.empty(0, np.int64))
            win: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = [empty] * m

            def load(i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
                part = runs[i].read(handles[i], nxt[i], block)
                nxt[i] += part[0].shape[0]
                return part

            while True:
                for i in range(m):
                    if win[i][0].shape[0] == 0 and nxt[i] < runs[i].n:
                        win[i] = load(i)
                active = [i for i in range(m) if win[i][0].shape[0] > 0]
                if not active:
                    return
                unread = [i for i in active if nxt[i] < runs[i].n]
                frontier = min(win[i][0][-1] for i in unread) if unread else _MAX_KEY
                for i in unread:
                    while win[i][0][-1] == frontier and nxt[i] < runs[i].n:
                        more = load(i)
                        win[i] = tuple(np.concatenate((a, b)) for a, b in zip(win[i], more))  # type: ignore[assignment]
                held = sum(win[i][0].nbytes * 3 for i in active)
                chunks = []
                for i in active:
                    cut = int(np.searchsorted(win[i][0], frontier, side="right"))
                    if cut:
                        chunks.append(tuple(a[:cut] for a in win[i]))
                        win[i] = tuple(a[cut:] for a in win[i])  # type: ignore[assignment]
                if len(chunks) == 1:
                    out = chunks[0]
                else:
                    sizes = np.array([c[0].shape[0] for c in chunks], dtype=np.int64)
                    bounds = np.zeros(len(chunks) + 1, dtype=np.int64)
                    np.cumsum(sizes, out=bounds[1:])
                    flat = [np.concatenate([c[j] for c in chunks]) for j in range(3)]
                    del chunks
                    total = int(bounds[-1])
                    out = (np.empty(total, np.uint64), np.empty(total, np.int64), np.empty(total, np.int64))
                    _merge_chunks(flat[0], flat[1], flat[2], bounds, out[0], out[1], out[2])
                    del flat
                    held += out[0].nbytes * 3  # the merge's input copy (freed now)
                self.peak_merge_bytes_ = max(self.peak_merge_bytes_, held + out[0].nbytes * 3)
                yield out  # type: ignore[misc]
        finally:
            for fh in handles:
                if fh is not None:
                    fh.close()

    def _group_of_array(self, group_of: np.ndarray | None) -> np.ndarray | None:
        if group_of is None:
            return None
        arr = np.asarray(group_of)
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer) or arr.shape[0] <= self.max_doc_:
            raise ValueError(
                "The 'group_of' parameter of KeyOccurrences must be a 1-D integer array with one entry per "
                f"document (at least {self.max_doc_ + 1}). Got a {arr.ndim}-D {arr.dtype} array of shape "
                f"{arr.shape} instead."
            )
        return np.ascontiguousarray(arr, dtype=np.int64)

    def _grouped_windows(
        self, group_of: np.ndarray | None, min_distinct: int
    ) -> Iterator[tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray, np.ndarray]]:
        """Merged windows with their group boundaries and distinct counts."""
        self.finalize()
        go = np.empty(0, dtype=np.int64) if group_of is None else group_of
        for k, d, e in self._windows(self._runs):
            n = k.shape[0]
            starts = np.empty(n + 1, dtype=np.int64)
            distinct = np.empty(n, dtype=np.int64)
            g = _group_distinct(k, d, go, group_of is not None, min_distinct, starts, distinct)
            yield (k, d, e), starts[: g + 1], distinct[:g]

    def groups(
        self, min_distinct: int, group_of: np.ndarray | None = None, *, batch_records: int = 1 << 16
    ) -> Iterator[KeyGroups]:
        """Yield, in key order, batches of the keys found in ``>= min_distinct`` distinct documents.

        With ``group_of`` (``group_of[doc]`` = cluster id, e.g. union-find roots) a key
        counts distinct clusters instead, so copies inside one duplicate cluster count once;
        every occurrence is still returned. A batch ends at the first group boundary at or
        past ``batch_records`` occurrences (the last one may be shorter), so the batches do
        not depend on the memory budget. Calls :meth:`finalize`; may be called again. The
        arguments are checked at once, the merge runs as the batches are consumed.
        """
        self._check_open()
        min_distinct = _check_int(min_distinct, "min_distinct", 1, "KeyOccurrences.groups")
        batch_records = _check_int(batch_records, "batch_records", 1, "KeyOccurrences.groups")
        go = self._group_of_array(group_of)
        return self._iter_groups(min_distinct, go, batch_records)

    def _iter_groups(self, min_distinct: int, go: np.ndarray | None, batch_records: int) -> Iterator[KeyGroups]:
        pending: list[KeyGroups] = []
        pending_records = 0
        for (k, d, e), starts, distinct in self._grouped_windows(go, min_distinct):
            sizes = np.diff(starts)
            sel = distinct >= min_distinct
            if not sel.any():
                continue
            mask = np.repeat(sel, sizes)
            offsets = np.zeros(int(sel.sum()) + 1, dtype=np.int64)
            np.cumsum(sizes[sel], out=offsets[1:])
            pending.append(KeyGroups(k[starts[:-1][sel]], offsets, d[mask], e[mask], distinct[sel]))
            pending_records += int(offsets[-1])
            if pending_records >= batch_records:
                ready, rest = _cut_batches(_concat_groups(pending), batch_records)
                yield from ready
                pending = [rest] if len(rest) else []
                pending_records = rest.n_records
        if pending:
            yield _concat_groups(pending)

    def count_distinct(
        self, thresholds: Sequence[int] = (2, 3, 5, 10, 100, 1000), group_of: np.ndarray | None = None
    ) -> KeyCountStats:
        """Statistics of how many distinct documents (or clusters) each key occurs in.

        One streaming pass over all runs, like :meth:`groups`; see :class:`KeyCountStats`.
        """
        self._check_open()
        ks = [_check_int(t, "thresholds", 1, "KeyOccurrences.count_distinct") for t in thresholds]
        go = self._group_of_array(group_of)
        stats = KeyCountStats(counted="documents" if go is None else "clusters")
        stats.at_least = dict.fromkeys(ks, 0)
        stats.records_at_least = dict.fromkeys(ks, 0)
        for (k, _, _), starts, distinct in self._grouped_windows(go, 1):
            sizes = np.diff(starts)
            stats.n_records += int(k.shape[0])
            stats.n_keys += int(distinct.shape[0])
            if distinct.shape[0]:
                stats.max_distinct = max(stats.max_distinct, int(distinct.max()))
                _, exp = np.frexp(distinct.astype(np.float64))  # distinct = f * 2**exp, f in [0.5, 1)
                stats.log2_histogram += np.bincount(exp - 1, minlength=64)[:64].astype(np.int64)
            for t in ks:
                hit = distinct >= t
                stats.at_least[t] += int(hit.sum())
                stats.records_at_least[t] += int(sizes[hit].sum())
        return stats

    # -- lifetime ------------------------------------------------------------------------

    def close(self) -> None:
        """Drop the buffer and delete the spilled runs and their directory. Idempotent."""
        self._closed = True
        self._runs = []
        self._keys = np.empty(0, dtype=np.uint64)
        self._docs = np.empty(0, dtype=np.int64)
        self._extras = np.empty(0, dtype=np.int64)
        self._size = 0
        if self._cleanup is not None:
            self._cleanup()  # removes the directory once
        self._dir = None

    def __enter__(self) -> KeyOccurrences:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _concat_groups(parts: list[KeyGroups]) -> KeyGroups:
    if len(parts) == 1:
        return parts[0]
    offsets = [parts[0].offsets]
    base = int(parts[0].offsets[-1])
    for p in parts[1:]:
        offsets.append(p.offsets[1:] + base)
        base += int(p.offsets[-1])
    return KeyGroups(
        np.concatenate([p.keys for p in parts]),
        np.concatenate(offsets),
        np.concatenate([p.docs for p in parts]),
        np.concatenate([p.extras for p in parts]),
        np.concatenate([p.distinct for p in parts]),
    )


def _slice_groups(b: KeyGroups, lo: int, hi: int) -> KeyGroups:
    s, e = int(b.offsets[lo]), int(b.offsets[hi])
    return KeyGroups(b.keys[lo:hi], b.offsets[lo:hi + 1] - s, b.docs[s:e], b.extras[s:e], b.distinct[lo:hi])


def _cut_batches(b: KeyGroups, batch_records: int) -> tuple[list[KeyGroups], KeyGroups]:
    """Cut ``b`` after each group where the running count reaches ``batch_records``; return the rest."""
    ready = []
    lo = 0
    while lo < len(b):
        base = int(b.offsets[lo])
        hi = int(np.searchsorted(b.offsets, base + batch_records, side="left"))  # offsets[hi] >= base + batch
        if hi > len(b):
            break
        hi = max(hi, lo + 1)
        ready.append(_slice_groups(b, lo, hi))
        lo = hi
    return ready, _slice_groups(b, lo, len(b))
