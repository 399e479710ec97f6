"""Faults while writing: a full disk (a file-size limit, as the kernel reports it: EFBIG, like
ENOSPC a failed write) and an output path that cannot be a directory. A clear error, no
half-written output that looks complete, and the next run resumes (issue 13)."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
from helpers import ENV, resume_corpus


def _dedup(inp: Path, out: Path, file_limit: int | None = None) -> subprocess.CompletedProcess[str]:
    def limit() -> None:  # in the child: writes past `file_limit` bytes fail with EFBIG instead of a signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        if file_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    return subprocess.run([sys.executable, "-m", "semhash_llm", "dedup", str(inp), "-o", str(out), "--no-progress"],
                          capture_output=True, text=True, env=ENV, timeout=600, preexec_fn=limit)


def test_a_full_disk_leaves_no_output_that_looks_complete_and_the_run_resumes(tmp_path: Path) -> None:
    inp = resume_corpus(tmp_path)
    ref = _dedup(inp, tmp_path / "ref")
    assert ref.returncode == 0, ref.stderr
    # documents.parquet fits (and so does every checkpoint: a few hundred bytes each for this
    # corpus); a later output does not: the disk fills after the first output file was written
    limit = (tmp_path / "ref" / "documents.parquet").stat().st_size + 512
    assert max(p.stat().st_size for p in (tmp_path / "ref").iterdir()) > limit
    out = tmp_path / "out"
    full = _dedup(inp, out, file_limit=limit)
    assert full.returncode == 2, (full.returncode, full.stderr[-2000:])
    assert "writing the outputs into" in full.stderr and "File too large" in full.stderr
    assert "run the same command again to resume" in full.stderr
    left = sorted(p.name for p in out.iterdir())
    assert left == [".checkpoints"], left  # no documents.parquet, report.json or temporary file left behind
    again = _dedup(inp, out)
    assert again.returncode == 0, again.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["resumed_stages"][-1] == "select"  # every decision was reused
    assert pq.read_table(out / "documents.parquet").equals(pq.read_table(tmp_path / "ref" / "documents.parquet"))
    assert pq.read_table(out / "kept.parquet").equals(pq.read_table(tmp_path / "ref" / "kept.parquet"))


def test_an_output_path_that_cannot_be_a_directory(tmp_path: Path) -> None:
    inp = resume_corpus(tmp_path)
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    res = _dedup(inp, blocker / "out")
    assert res.returncode == 2
    assert "cannot create the output directory" in res.stderr and "choose another --output" in res.stderr
    assert "Traceback" not in res.stderr


def test_outputs_get_the_mode_of_any_new_file(tmp_path: Path) -> None:
    from helpers import write_jsonl

    from semhash_llm import Deduplicator, PipelineConfig

    old = os.umask(0o027)
    try:
        out = tmp_path / "out"
        Deduplicator(PipelineConfig.from_dict({"sph": {"enabled": False}, "verifier": {"enabled": False}})).run(
            [write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "one two three four five six"}])], out)
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in out.iterdir() if p.is_file()}
    assert modes and set(modes.values()) == {0o640}, modes  # not mkstemp's 0600
