"""Small corpus builders shared by the tests."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

WORDS = ("data model corpus token train page news web text dedup hash band signature cluster keep remove "
         "copy near exact bloom filter stage verify judge passage fragment quality score table column river "
         "mountain city music garden window paper light story market energy water forest").split()


def random_text(rng: random.Random, n_words: int = 120) -> str:
    return " ".join(rng.choice(WORDS) + str(rng.randrange(50)) for _ in range(n_words))


def edit_words(rng: random.Random, text: str, n_edits: int = 2) -> str:
    words = text.split()
    for _ in range(n_edits):
        words[rng.randrange(len(words))] = "edited" + str(rng.randrange(1000))
    return " ".join(words)


def make_corpus(n_unique: int = 60, seed: int = 0) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Unique docs, exact copies (case and spacing changed: what the exact key folds), near copies;
    returns (records, truth)."""
    rng = random.Random(seed)
    records: list[dict[str, Any]] = []
    truth: dict[str, str] = {}
    for i in range(n_unique):
        records.append({"id": f"u{i}", "text": random_text(rng)})
    for i in range(0, n_unique, 6):
        src = records[i]
        records.append({"id": f"x{i}", "text": "  " + src["text"].upper().replace(" ", "  \t") + "\n"})
        truth[f"x{i}"] = src["id"]
    for i in range(3, n_unique, 6):
        src = records[i]
        records.append({"id": f"n{i}", "text": edit_words(rng, src["text"], 1)})
        truth[f"n{i}"] = src["id"]
    return records, truth


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path


# Short questions for the verifier and judge stages: one typo copy, one changed entity, one stranger.
QUESTION = "What are some tips on making it through the job interview process at Liberty Broadband?"
RECORDS = [
    {"id": "q1", "text": QUESTION},
    {"id": "q2", "text": QUESTION.replace("Broadband", "Interactive")},  # another company: another question
    {"id": "q3", "text": QUESTION.replace("interview", "intervew")},  # a typo: the same question
    {"id": "far", "text": "Heavy rain is expected across the northern valleys this weekend, officials said."},
]


ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


def resume_corpus(tmp: Path) -> Path:
    """Exact and near copies, short questions (the verifier), an excerpt (passages)."""
    records, _ = make_corpus(40, seed=5)
    rng = random.Random(5)
    long_doc = " ".join(random_text(rng, 40) + "." for _ in range(12))
    records.append({"id": "long", "text": long_doc})
    records.append({"id": "excerpt", "text": long_doc[len(long_doc) // 3: 2 * len(long_doc) // 3]})
    records += [dict(r) for r in RECORDS]
    records.append({"id": "q4", "text": QUESTION.replace("tips", "tipps")})
    return write_jsonl(tmp / "in.jsonl", records)


def dedup_cli(inp: Path, out: Path, *extra: str, failpoint: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(ENV)
    if failpoint:
        env["SEMHASH_LLM_FAILPOINT"] = failpoint
    return subprocess.run([sys.executable, "-m", "semhash_llm", "dedup", str(inp), "-o", str(out), "--no-progress",
                           *extra], capture_output=True, text=True, env=env, timeout=600)
