"""``semhash-llm train judge``: calibrate a judge's yes-probability on generated pairs.

A small instruction-tuned model's next-token probability of "Yes" ranks pairs better than it
measures them (SmolLM2-135M leans to "No" whatever it reads). Platt scaling maps it to a
probability: the judge scores self-supervised pairs (:mod:`semhash_llm.train.pairs`: positives of
each type A–E and hard negatives of every family, made from permitted text with their own seed,
never from the benchmark), ``sigmoid(a * logit(p) + b)`` is fitted on half of them and measured
on the other half. The result (``calibration.json``) names the model, the prompt version and the
mode it holds for; the judge stage refuses it for any other.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from semhash_llm.judge.backends import Judge
from semhash_llm.judge.fusion import calibrate, fit_platt
from semhash_llm.judge.prompt import PROMPT_VERSION
from semhash_llm.sph.evaluate import roc_auc
from semhash_llm.train.pairs import make_pairs

__all__ = ["calibrate_judge", "add_train_judge_arguments", "run_train_judge_command"]

_PAIR_SEED_OFFSET = 7919  # the verifier's pairs use the seed itself: the judge sees other pairs


def calibrate_judge(judge: Judge, documents: Sequence[str], out: str | Path, per_kind: int = 15, seed: int = 0,
                    trained_on: str = "", command: str = "") -> dict[str, Any]:
    """Score generated pairs with ``judge``, fit Platt scaling on half, measure on the other half;
    write ``calibration.json`` into ``out`` and return its content."""
    pairs = make_pairs(documents, per_kind, seed=seed + _PAIR_SEED_OFFSET)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(pairs))
    pairs = [pairs[i] for i in order]
    t0 = time.perf_counter()
    verdicts = judge.judge([(p.a, p.b) for p in pairs])
    seconds = time.perf_counter() - t0
    ok = np.array([v.p_yes is not None for v in verdicts])
    raw = np.array([v.p_yes if v.p_yes is not None else np.nan for v in verdicts], dtype=np.float64)
    labels = np.array([p.label for p in pairs])
    kinds = np.array([p.kind for p in pairs])
    half = len(pairs) // 2
    fit = np.zeros(len(pairs), dtype=bool)
    fit[:half] = True
    use_fit, use_eval = fit & ok, ~fit & ok
    if use_fit.sum() < 4 or len(set(labels[use_fit].tolist())) < 2:
        raise ValueError(f"the judge answered {int(use_fit.sum())} of the {half} fitting pairs usably; a calibration "
                         "needs answers on both classes. Check the backend (a failed call is counted per kind)")
    a, b = fit_platt(raw[use_fit], labels[use_fit])
    cal = np.full(raw.shape, np.nan)
    cal[ok] = calibrate(raw[ok], a, b)
    ev_raw, ev_cal, ev_y = raw[use_eval], cal[use_eval], labels[use_eval]
    per_kind_acc = {k: round(float(((cal[use_eval & (kinds == k)] >= 0.5) == (labels[use_eval & (kinds == k)] == 1))
                                   .mean()), 3)
                    for k in sorted(set(kinds.tolist())) if (use_eval & (kinds == k)).any()}
    failures: dict[str, int] = {}
    for v in verdicts:
        if v.p_yes is None:
            failures[v.error or "error"] = failures.get(v.error or "error", 0) + 1
    report: dict[str, Any] = {
        "a": round(a, 6),
        "b": round(b, 6),
        "model": judge.model_id,
        "backend": judge.backend,
        "prompt_version": PROMPT_VERSION,
        "mode": judge.mode,
        "prior": round(float(labels[use_fit].mean()), 4),
        "pairs": len(pairs),
        "pairs_fit": int(use_fit.sum()),
        "pairs_heldout": int(use_eval.sum()),
        "failures": failures,
        "heldout": {
            "roc_auc": round(roc_auc(ev_raw, ev_y), 4),
            "accuracy_raw_at_0.5": round(float(((ev_raw >= 0.5) == (ev_y == 1)).mean()), 4),
            "accuracy_calibrated_at_0.5": round(float(((ev_cal >= 0.5) == (ev_y == 1)).mean()), 4),
            "brier_raw": round(float(np.mean((ev_raw - ev_y) ** 2)), 4),
            "brier_calibrated": round(float(np.mean((ev_cal - ev_y) ** 2)), 4),
            "mean_raw_p_yes_positives": round(float(ev_raw[ev_y == 1].mean()), 4) if (ev_y == 1).any() else None,
            "mean_raw_p_yes_negatives": round(float(ev_raw[ev_y == 0].mean()), 4) if (ev_y == 0).any() else None,
            "accuracy_by_kind": per_kind_acc,
        },
        "seconds_per_pair": round(seconds / max(len(pairs), 1), 3),
        "trained_on": trained_on,
        "command": command,
    }
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "calibration.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def add_train_judge_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the options of ``semhash-llm train judge`` to ``parser``."""
    parser.add_argument("corpus", nargs="*", help="corpus files or folders (default: the permitted sources of --data-dir)")
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--out", required=True, help="output folder (calibration.json)")
    parser.add_argument("--judge", dest="backend", choices=["local", "openai"], default="local")
    parser.add_argument("--judge-model", dest="model", help="GGUF file (local) or model name (openai)")
    parser.add_argument("--judge-url", dest="url", default="https://api.openai.com/v1")
    parser.add_argument("--judge-key-env", dest="api_key_env", default="OPENAI_API_KEY")
    parser.add_argument("--per-kind", type=int, default=15, help="pairs per positive type and negative family")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def run_train_judge_command(args: argparse.Namespace) -> int:
    """Run ``semhash-llm train judge`` from parsed arguments; 0 on success."""
    from semhash_llm.config import JudgeConfig
    from semhash_llm.stages.judge import make_judge
    from semhash_llm.train.importance import training_documents

    documents, trained_on = training_documents(args.corpus, args.data_dir)
    judge = make_judge(JudgeConfig(backend=args.backend, model=args.model, url=args.url, api_key_env=args.api_key_env))
    command = "semhash-llm " + " ".join(sys.argv[1:]) if "judge" in sys.argv else "calibrate_judge(...)"
    report = calibrate_judge(judge, documents, args.out, per_kind=args.per_kind, seed=args.seed,
                             trained_on=trained_on, command=command)
    h = report["heldout"]
    print(f"judge calibration -> {args.out}/calibration.json: a={report['a']} b={report['b']}; held-apart ROC AUC "
          f"{h['roc_auc']}, accuracy {h['accuracy_raw_at_0.5']} raw -> {h['accuracy_calibrated_at_0.5']} calibrated; "
          f"{report['seconds_per_pair']} s a pair")
    return 0
