"""An offline sample corpus with planted duplicates, built from text that ships with Python.

The background documents are the docstrings of the standard library (real English prose
about real code, available on every machine with no download). Planted on top of them,
deterministically by seed:

* exact duplicates — the same text with other case or spacing (what the exact key folds);
* near duplicates — a few words replaced, dropped or repeated, a line added;
* a hot spot — one document copied many times, each copy with its own date line;
* short snippets in Chinese and Japanese (composed from a fixed vocabulary), with their
  copies, to exercise character n-grams.

The ground truth (which document duplicates which) is written beside the corpus.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import random
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SampleCorpus", "build_sample_corpus", "stdlib_paragraphs"]

_SKIP_PREFIXES = ("test", "idlelib", "tkinter", "turtle", "lib2to3", "ensurepip", "this", "antigravity",
                  "_", "pydoc_data", "xxsubtype", "venv", "msilib", "winreg", "winsound")
_CJK_WORDS = ["数据", "模型", "语言", "文本", "训练", "重复", "删除", "网页", "新闻", "研究", "方法", "结果",
              "我们", "系统", "处理", "大规模", "质量", "清洗", "评估", "实验"]
_JA_WORDS = ["データ", "モデル", "言語", "テキスト", "学習", "重複", "削除", "ウェブ", "ニュース", "研究",
             "方法", "結果", "システム", "処理", "品質", "評価", "実験", "大規模", "の", "を"]


def stdlib_paragraphs(min_chars: int = 250, max_docs: int = 20000) -> list[str]:
    """Distinct docstrings (modules, classes, functions) of the standard library, in a stable order."""
    with warnings.catch_warnings():  # deprecated modules warn when imported; their docs are still text
        warnings.simplefilter("ignore")
        return _stdlib_paragraphs(min_chars, max_docs)


def _stdlib_paragraphs(min_chars: int, max_docs: int) -> list[str]:
    names = sorted(
        m.name for m in pkgutil.iter_modules()
        if m.name in sys.stdlib_module_names and not m.name.startswith(_SKIP_PREFIXES)
    )
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        try:
            mod = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - some stdlib modules do not import on every platform
            continue
        objs: list[object] = [mod]
        for attr in sorted(vars(mod)):
            obj = getattr(mod, attr, None)
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and getattr(obj, "__module__", None) == name:
                objs.append(obj)
                if inspect.isclass(obj):
                    objs.extend(v for _, v in sorted(vars(obj).items()) if inspect.isfunction(v))
        for obj in objs:
            doc = inspect.getdoc(obj)
            if not doc:
                continue
            doc = doc.strip()
            key = re.sub(r"\W+", " ", doc.lower()).strip()
            if len(doc) < min_chars or key in seen:
                continue
            seen.add(key)
            out.append(doc)
            if len(out) >= max_docs:
                return out
    return out


@dataclass
class SampleCorpus:
    """Paths and counts of a built sample corpus."""

    corpus: Path
    truth: Path
    documents: int
    planted: dict[str, int]


def _perturb_exact(text: str, rng: random.Random) -> str:
    choice = rng.randrange(3)
    if choice == 0:
        return text.upper()
    if choice == 1:
        return "  ".join(text.split()) + "\n"
    return "\t" + text.swapcase().replace(" ", " \n ") + "  "


def _perturb_near(text: str, rng: random.Random) -> str:
    """Edit about one word in 150 (at least one): replace, drop or repeat it."""
    words = text.split()
    for _ in range(max(1, len(words) // 150)):
        pos = rng.randrange(len(words))
        op = rng.randrange(3)
        if op == 0:
            words[pos] = rng.choice(words)
        elif op == 1:
            del words[pos]
        else:
            words.insert(pos, words[pos])
    return " ".join(words)


def build_sample_corpus(out_dir: str | Path, seed: int = 0, max_background: int = 3000) -> SampleCorpus:
    """Write ``sample.jsonl`` and ``sample.truth.json`` into ``out_dir``."""
    rng = random.Random(seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    background = stdlib_paragraphs()[:max_background]
    docs: list[dict[str, str]] = [{"id": f"bg-{i:05d}", "text": t, "source": "stdlib"} for i, t in enumerate(background)]
    pairs: list[dict[str, str]] = []
    planted = {"exact": 0, "near": 0, "hotspot": 0, "cjk": 0}
    picks = rng.sample(range(len(background)), k=min(len(background), 600))
    # Near copies need enough words for one edit to stay above a Jaccard of 0.8 on 5-grams.
    long_enough = [i for i in picks[250:] if len(background[i].split()) >= 80]
    for n, i in enumerate(picks[:250]):
        docs.append({"id": f"exact-{n:04d}", "text": _perturb_exact(background[i], rng), "source": "planted"})
        pairs.append({"id": f"exact-{n:04d}", "duplicate_of": f"bg-{i:05d}", "kind": "exact"})
        planted["exact"] += 1
    for n, i in enumerate(long_enough[:300]):
        docs.append({"id": f"near-{n:04d}", "text": _perturb_near(background[i], rng), "source": "planted"})
        pairs.append({"id": f"near-{n:04d}", "duplicate_of": f"bg-{i:05d}", "kind": "near"})
        planted["near"] += 1
    hot = picks[-1]
    for n in range(200):
        date = f"Posted on 2026-{1 + n % 12:02d}-{1 + n % 28:02d}"
        docs.append({"id": f"hot-{n:04d}", "text": f"{date}\n{background[hot]}", "source": "planted"})
        pairs.append({"id": f"hot-{n:04d}", "duplicate_of": f"bg-{hot:05d}", "kind": "hotspot"})
        planted["hotspot"] += 1
    for n in range(40):
        vocab = _CJK_WORDS if n % 2 == 0 else _JA_WORDS
        text = "".join(rng.choice(vocab) for _ in range(60)) + "。"
        docs.append({"id": f"cjk-{n:04d}", "text": text, "source": "synthetic-cjk"})
        copy = text[:-1] + "！"  # the final stop differs: a near duplicate (character n-grams)
        docs.append({"id": f"cjk-{n:04d}-copy", "text": copy, "source": "planted"})
        pairs.append({"id": f"cjk-{n:04d}-copy", "duplicate_of": f"cjk-{n:04d}", "kind": "cjk"})
        planted["cjk"] += 1
    rng.shuffle(docs)
    corpus = out / "sample.jsonl"
    with open(corpus, "w", encoding="utf-8") as fh:
        for d in docs:
            fh.write(json.dumps(d, ensure_ascii=False) + "\n")
    truth = out / "sample.truth.json"
    truth.write_text(json.dumps({"seed": seed, "planted": planted, "pairs": pairs}, indent=1), encoding="utf-8")
    return SampleCorpus(corpus=corpus, truth=truth, documents=len(docs), planted=planted)
