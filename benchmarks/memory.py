"""Peak memory of ``semhash-llm dedup`` as the corpus grows, to state the memory per million documents.

Writes synthetic JSONL corpora (the speed benchmark's generator, without planted copies,
of short documents so the files stay small; the per-document state the cascade keeps does
not depend on document length), runs ``semhash-llm dedup --no-kept`` on each in a fresh
process, and reads the peak resident memory from its ``report.json``. The slope between the
sizes is the memory per million documents; the intercept is the fixed cost (interpreter,
numba, Arrow, one batch).

    python benchmarks/memory.py --sizes 100000,1000000 --doc-chars 400
    python benchmarks/memory.py --sizes 100000,1000000 -- --no-sph     # flags after -- go to dedup
    python benchmarks/memory.py --line-words 12 -- --no-aw             # multi-line documents: AW weighs them
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from semhash_llm.bench.speed import make_speed_corpus


def _lines(text: str, words: int) -> str:
    w = text.split()
    return "\n".join(" ".join(w[i : i + words]) for i in range(0, len(w), words))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--doc-chars", type=int, default=400)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--line-words", type=int, default=0,
                    help="break each document into lines of this many words (0: one line); multi-line documents "
                    "are what AW-MinHash weighs and signs")
    ap.add_argument("dedup_args", nargs="*", help="extra `semhash-llm dedup` flags (after --)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="semhash-mem-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in sizes:
        path = work / (f"corpus-{n}.jsonl" if not args.line_words else f"corpus-{n}-lines{args.line_words}.jsonl")
        if not path.exists():
            chunk = 100_000
            with open(path, "wb") as fh:
                for start in range(0, n, chunk):
                    m = min(chunk, n - start)
                    corpus = make_speed_corpus(m, args.doc_chars, near_fraction=0.0, hot_copies=0, seed=start)
                    texts = corpus.texts if not args.line_words else [_lines(t, args.line_words) for t in corpus.texts]
                    fh.write(b"".join(orjson.dumps({"id": f"d{start + i}", "text": t}) + b"\n"
                                      for i, t in enumerate(texts)))
        out = work / f"out-{n}"
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "semhash_llm", "dedup", str(path), "-o", str(out), "--no-kept",
                        "--no-progress", *args.dedup_args], check=True, stdout=subprocess.DEVNULL)
        secs = time.perf_counter() - t0
        report = json.loads((out / "report.json").read_text())
        stages = {row["stage"]: row for row in report["funnel"]}
        rows.append((n, report["peak_rss_mb"], secs, report["documents_per_second"], stages.get("passages")))
    print("| documents | peak RSS MiB | wall s | docs/s (report) | passages | passage keys spilled MiB | passage s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n, mib, secs, dps, prow in rows:
        if prow is None:
            extra = "– | – | –"
        else:
            d = prow["details"]
            extra = f"{d.get('passages', 0):,} | {d.get('key_bytes_spilled', 0) / 2**20:,.0f} | {prow['seconds']:.1f}"
        print(f"| {n:,} | {mib:,.0f} | {secs:.1f} | {dps:,.0f} | {extra} |")
    if len(rows) >= 2:
        (n0, m0, *_), (n1, m1, *_) = rows[0], rows[-1]
        slope = (m1 - m0) / (n1 - n0) * 1e6
        print(f"\nmemory per million documents: {slope:,.0f} MiB (fixed cost about {m0 - slope * n0 / 1e6:,.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
