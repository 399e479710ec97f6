"""``semhash-llm train verifier``: train MGFN on self-supervised pairs (the weights of the ``mgfn`` stage).

1. Documents: by default the training part of the permitted sources under ``--data-dir``
   (:func:`semhash_llm.train.importance.permitted_documents`: Wikipedia CC BY-SA, public-domain
   addresses), or the corpus files given. Each document goes whole to the fitting or the
   held-apart side (a hash of its text).
2. Pairs: :func:`semhash_llm.train.pairs.make_pairs` on each side (other seeds): positives of
   types A–E and hard negatives, balanced, with ``--c-share`` times as many type C pairs (noisy
   copies from :mod:`semhash_llm.train.noise`; ``--misspellings`` adds the training half of
   codespell's list).
3. Inputs: bytes, hashed tokens, the shipped SPH student's embedding (the semantic level) and
   the document traits (:func:`semhash_llm.verify.mgfn.encode_texts`).
4. Training (``--init W --freeze-encoder``: only the projection head, margins and boundary
   network, on the frozen encoder of ``W``, each text encoded once): Adam on binary cross-entropy of the boundary network (positives weighted up to the
   negatives' count: a balanced prior) plus ``--contrastive`` times the contrastive loss
   (margins learned per type; a negative counts under the type it imitates). CPU, deterministic
   for a seed (single-threaded kernels where torch allows).
5. Held-apart evaluation: accuracy and ROC AUC overall and per type/family, precision and recall
   at several thresholds, and how well the Monte Carlo dropout variance flags the wrong answers
   (AUC of variance for "wrong"); the decision threshold stored with the weights is the lowest
   whose held-apart precision reaches ``--target-precision``. Writes ``verifier.safetensors``,
   ``train_report.json`` and ``MODEL_CARD.md`` to ``--out``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from semhash_llm.sph.evaluate import roc_auc
from semhash_llm.train.pairs import NEGATIVE_FAMILIES, POSITIVE_TYPES, TrainingPair, make_pairs

__all__ = ["train_verifier", "add_train_verifier_arguments", "run_train_verifier_command", "IMITATES", "SCREEN"]

logger = logging.getLogger(__name__)

#: Pairs below this character-trigram Jaccard are settled as different without the network.
SCREEN = 0.3

#: The duplicate type each hard-negative family imitates (its contrastive margin).
IMITATES: dict[str, str] = {"word_swap": "B", "entity_swap": "B", "word_replace": "C", "negation": "C",
                            "number_change": "C",
                            "same_template": "A", "same_topic": "D", "shared_passage": "E"}


def train_verifier(documents: Sequence[str], out_dir: str | Path, per_kind: int = 1000, heldout: float = 0.2,
                   epochs: int = 3, batch_size: int = 64, lr: float = 2e-3, contrastive: float = 0.5,
                   mc_passes: int = 16, seed: int = 0, screen: float = SCREEN, target_precision: float = 0.95,
                   command: str = "",
                   trained_on: str = "", c_share: int = 1, misspellings: dict[str, list[str]] | None = None,
                   init: str | Path | None = None, freeze_encoder: bool = False) -> dict[str, Any]:
    """Train, evaluate and write the verifier; returns the report (module docstring).

    ``init``: start from these weights (a ``verifier.safetensors``; the boundary network is
    made afresh where its input width differs, e.g. after pair features were added).
    ``freeze_encoder``: train only the projection head, the margins and the boundary network on
    the frozen encoder's fused vectors (each text encoded once: many more pairs in the same
    time). ``c_share`` and ``misspellings`` go to :func:`make_pairs`.

    Pairs whose character-trigram Jaccard is below ``screen`` are settled without the network
    in the cascade (:class:`semhash_llm.stages.verify.VerifierStage`), so they are left out of
    training and evaluation too (counted in the report)."""
    import torch

    from semhash_llm.sph.student import load_student
    from semhash_llm.verify.features import FEATURE_NAMES, NUM_PAIR_FEATURES, pair_features
    from semhash_llm.verify.mgfn import (CATEGORIES, MGFN, MGFNConfig, encode_texts, load_mgfn, pair_seed, save_mgfn,
                                         text_digests)

    if not 0.0 < heldout < 0.5:
        raise ValueError(f"--heldout must be in (0, 0.5); got {heldout}")
    if not 0.0 <= screen < 1.0:
        raise ValueError(f"--screen must be in [0, 1); got {screen}")
    if not 0.5 <= target_precision <= 1.0:
        raise ValueError(f"--target-precision must be in [0.5, 1]; got {target_precision}")
    t_start = time.perf_counter()
    torch.manual_seed(seed)
    fit_docs: list[str] = []
    held_docs: list[str] = []
    for text in documents:
        digest = int.from_bytes(hashlib.blake2b(f"verifier:{seed}:{text}".encode(), digest_size=8).digest(), "little")
        (held_docs if digest / 2**64 < heldout else fit_docs).append(text)
    student = load_student()
    config = MGFNConfig(semantic_dim=student.dim, pair_features=NUM_PAIR_FEATURES)
    if freeze_encoder and init is None:
        raise ValueError("freeze_encoder needs init: the weights whose encoder is kept")
    cat = {k: i for i, k in enumerate(CATEGORIES)}
    screened: dict[str, int] = {}
    char3 = FEATURE_NAMES.index("char3_jaccard")

    def tensors(pairs: list[TrainingPair]) -> tuple[list[TrainingPair], Any, Any, Any, Any, Any]:
        feats = pair_features([p.a for p in pairs], [p.b for p in pairs])
        keep = feats[:, char3] >= screen
        for p, k in zip(pairs, keep.tolist()):
            if not k:
                screened[p.kind] = screened.get(p.kind, 0) + 1
        pairs = [p for p, k in zip(pairs, keep.tolist()) if k]
        a_texts, b_texts = [p.a for p in pairs], [p.b for p in pairs]
        a = encode_texts(a_texts, config, semantic=student.encode(a_texts))
        b = encode_texts(b_texts, config, semantic=student.encode(b_texts))
        if freeze_encoder:  # the fused vectors stand in for the inputs: the encoder never changes
            a, b = fused(a), fused(b)
        y = torch.tensor([float(p.label) for p in pairs])
        c = torch.tensor([cat[p.kind] if p.kind in cat else cat[IMITATES[p.kind]] for p in pairs])
        return pairs, a, b, torch.from_numpy(feats[keep]), y, c

    model = MGFN(config)
    if init is not None:
        start, _extra = load_mgfn(init)
        own = model.state_dict()
        kept = {k: v for k, v in start.state_dict().items() if k in own and own[k].shape == v.shape}
        model.load_state_dict(kept, strict=False)
        logger.info("verifier: started from %s (%d of %d tensors; made afresh: %s)", init, len(kept), len(own),
                    sorted(set(own) - set(kept)))
    model.eval()

    def fused(batch: Any) -> Any:
        with torch.no_grad():
            return torch.cat([model.fuse(take(batch, slice(s, s + 512))) for s in range(0, batch.chars.shape[0], 512)])

    def take(batch: Any, idx: Any) -> Any:
        if isinstance(batch, torch.Tensor):
            return batch[idx]
        return type(batch)(batch.chars[idx], batch.tokens[idx], batch.semantic[idx], batch.traits[idx])

    t0 = time.perf_counter()
    fit_pairs, fa, fb, ff, fy, fc = tensors(make_pairs(fit_docs, per_kind, seed=seed, c_share=c_share,
                                                       misspellings=misspellings))
    held_pairs, ha, hb, hf, hy, _ = tensors(make_pairs(held_docs, max(10, int(per_kind * heldout)), seed=seed + 1,
                                                       c_share=c_share, misspellings=misspellings))
    encode_seconds = time.perf_counter() - t0
    trained = [p for name, p in model.named_parameters()
               if not freeze_encoder or name.startswith(("head.", "boundary.", "margin_raw"))]
    opt = torch.optim.Adam(trained, lr=lr)

    def encode(batch: Any) -> Any:
        return model.project(batch) if freeze_encoder else model.encode(batch)
    n = len(fit_pairs)
    # More negative families than positive types: weigh the positives up to a balanced prior.
    pos_weight = (n - fy.sum()) / fy.sum().clamp(min=1.0)
    gen = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    losses: list[float] = []

    for _epoch in range(epochs):
        model.train()
        order = torch.randperm(n, generator=gen)
        total = 0.0
        for s in range(0, n, batch_size):
            idx = order[s: s + batch_size]
            u, v = encode(take(fa, idx)), encode(take(fb, idx))
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model.logits(u, v, ff[idx]), fy[idx],
                                                                        pos_weight=pos_weight)
            loss = loss + contrastive * model.contrastive_loss(u, v, fy[idx], fc[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * idx.numel()
        losses.append(round(total / n, 4))
    train_seconds = time.perf_counter() - t0

    model.eval()
    t0 = time.perf_counter()
    with torch.no_grad():
        prob = torch.sigmoid(model.logits(encode(ha), encode(hb), hf)).numpy()
    infer_seconds = time.perf_counter() - t0
    # Seeded per pair from its texts, as the verifier stage does: the calibration sees the masks
    # that inference will draw.
    seeds = pair_seed(text_digests([p.a for p in held_pairs]), text_digests([p.b for p in held_pairs]))
    if freeze_encoder:
        mean, var = model.mc_predict_fused(ha, hb, passes=mc_passes, features=hf, seeds=seeds)
    else:
        mean, var = model.mc_predict(ha, hb, passes=mc_passes, features=hf, seeds=seeds)
    y = hy.numpy().astype(np.int64)
    kinds = np.array([p.kind for p in held_pairs])
    wrong = ((mean.numpy() > 0.5).astype(np.int64) != y).astype(np.int64)
    at: dict[str, Any] = {}
    for tau in (0.5, 0.7, 0.8, 0.9):
        accept = mean.numpy() >= tau
        at[str(tau)] = {"precision": round(float(y[accept].mean()) if accept.any() else 1.0, 4),
                        "recall": round(float(accept[y == 1].mean()), 4),
                        "false_accept_rate": round(float(accept[y == 0].mean()), 4)}
    # The decision threshold shipped with the weights: the lowest MC mean (in steps of 0.05) whose
    # held-apart precision reaches target_precision — chosen on the generator's held-apart pairs,
    # never on a benchmark.
    threshold = 0.95
    for tau in np.round(np.arange(0.5, 0.951, 0.05), 2).tolist():
        accept = mean.numpy() >= tau
        if accept.any() and float(y[accept].mean()) >= target_precision:
            threshold = tau
            break
    accept = mean.numpy() >= threshold
    at["chosen"] = {"threshold": threshold, "target_precision": target_precision,
                    "precision": round(float(y[accept].mean()) if accept.any() else 1.0, 4),
                    "recall": round(float(accept[y == 1].mean()), 4),
                    "false_accept_rate": round(float(accept[y == 0].mean()), 4)}
    scores: dict[str, Any] = {
        "accuracy": round(float(((prob > 0.5).astype(np.int64) == y).mean()), 4),
        "roc_auc": round(roc_auc(prob, y), 4),
        "mc_variance_auc_for_wrong": round(roc_auc(var.numpy(), wrong), 4),
        "at_threshold": at,
        "per_kind_accuracy": {k: round(float(((prob[kinds == k] > 0.5).astype(np.int64) == y[kinds == k]).mean()), 4)
                              for k in (*POSITIVE_TYPES, *NEGATIVE_FAMILIES) if (kinds == k).any()},
        "held_apart_pairs": len(held_pairs),
        "fitting_pairs": n,
        "screened_out_pairs": dict(sorted(screened.items())),
        "pairs_per_second_inference": round(len(held_pairs) / max(infer_seconds, 1e-9), 1),
        "margins": {k: round(float(m), 4) for k, m in zip(CATEGORIES, model.margins().detach().numpy())},
        "loss_per_epoch": losses,
    }
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_mgfn(model, out / "verifier.safetensors", extra={"screen": screen, "threshold": threshold})
    report = {
        "command": command, "trained_on": trained_on, "documents": {"fitting": len(fit_docs), "held_apart": len(held_docs)},
        "config": {"per_kind": per_kind, "c_share": c_share, "init": str(init) if init else None,
                   "freeze_encoder": freeze_encoder, "misspellings": len(misspellings or {}), "heldout": heldout, "epochs": epochs, "batch_size": batch_size, "lr": lr,
                   "contrastive": contrastive, "mc_passes": mc_passes, "seed": seed, "screen": screen,
                   "target_precision": target_precision,
                   "model": asdict(config)},
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "seconds": {"encode_inputs": round(encode_seconds, 1), "train": round(train_seconds, 1),
                    "total": round(time.perf_counter() - t_start, 1)},
        "scores": scores,
    }
    (out / "train_report.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    (out / "MODEL_CARD.md").write_text(_card(report))
    return report


def _card(report: dict[str, Any]) -> str:
    s = report["scores"]
    per_kind = "\n".join(f"| {k} | {v} |" for k, v in s["per_kind_accuracy"].items())
    at = "\n".join(f"| {v['threshold'] if t == 'chosen' else t}{' (shipped)' if t == 'chosen' else ''} | "
                   f"{v['precision']} | {v['recall']} | {v['false_accept_rate']} |" for t, v in s["at_threshold"].items())
    return f"""# SemHash-LLM verifier (MGFN) — the cascade's `mgfn` stage

Multi-granularity fusion network (`semhash_llm.verify.mgfn`): byte convolutions (widths
{report['config']['model']['kernel_sizes']}), a BiLSTM over hashed canonical tokens and the SPH student's embedding, gated
by document traits; contrastive projection with a margin per duplicate type; boundary network on
[u, v, u*v, |u-v|] plus {report['config']['model']['pair_features']} pair alignment features (`semhash_llm.verify.features`);
Monte Carlo dropout. {report['parameters']:,} parameters.

## Training
- Command: `{report['command']}`
- Text: {report['trained_on']} ({report['documents']['fitting']} fitting / {report['documents']['held_apart']} held-apart documents;
  each document on one side only).
- Pairs: `semhash_llm.train.pairs.make_pairs` (self-supervised, this project's own
  transformations and seeds, not the benchmark's: positives A–E, hard negatives
  {", ".join(f.replace("_", " ") for f in NEGATIVE_FAMILIES)}); pairs below the
  character-trigram screen ({report['config']['screen']}) are settled without the network in the cascade and left
  out here ({s['screened_out_pairs']}). {s['fitting_pairs']:,} fitting pairs.
- Settings: {json.dumps({k: v for k, v in report['config'].items() if k != 'model'})}.
- Time on this CPU (2 cores): {report['seconds']['train']} s of training, {report['seconds']['total']} s in all.

## Held-apart scores ({s['held_apart_pairs']} pairs from other documents)
Accuracy {s['accuracy']}, ROC AUC {s['roc_auc']}; MC-dropout variance flags the wrong answers
with AUC {s['mc_variance_auc_for_wrong']}. Learned margins: {s['margins']}. The decision threshold
shipped with the weights is the lowest MC mean whose held-apart precision reaches
{s['at_threshold']['chosen']['target_precision']}: {s['at_threshold']['chosen']['threshold']}.

| MC mean threshold | precision | recall | false accepts among negatives |
|---|---:|---:|---:|
{at}

| type / family | accuracy |
|---|---:|
{per_kind}

These are the generator's own pairs on held-apart documents. What the verifier does on the
development benchmark (the `−MGFN` row of `semhash-llm bench`) is in the README, *Quality*.
"""


def add_train_verifier_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the options of ``semhash-llm train verifier`` to ``parser``."""
    parser.add_argument("corpus", nargs="*", help="corpus files or folders (default: the permitted sources of --data-dir)")
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--out", required=True, help="output folder (verifier.safetensors, train_report.json, MODEL_CARD.md)")
    parser.add_argument("--per-kind", type=int, default=1000, help="fitting pairs per positive type and negative family")
    parser.add_argument("--heldout", type=float, default=0.2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--contrastive", type=float, default=0.5, help="weight of the contrastive loss")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target-precision", type=float, default=0.95,
                        help="the shipped decision threshold is the lowest whose held-apart precision reaches this")
    parser.add_argument("--c-share", type=int, default=1, help="type C pairs per pair of each other type and family")
    parser.add_argument("--misspellings", action="store_true",
                        help="type C copies also use real misspellings: the training half of codespell's list under --data-dir")
    parser.add_argument("--init", default=None, help="start from these verifier.safetensors")
    parser.add_argument("--freeze-encoder", action="store_true",
                        help="with --init: train only the projection head, margins and boundary network")
    parser.add_argument("--screen", type=float, default=SCREEN,
                        help="pairs below this character-trigram Jaccard are settled without the network (and not trained on)")
    return parser


def run_train_verifier_command(args: argparse.Namespace) -> int:
    """Run ``semhash-llm train verifier`` from parsed arguments; 0 on success."""
    from semhash_llm.train.importance import training_documents
    from semhash_llm.train.noise import read_misspellings

    documents, trained_on = training_documents(args.corpus, args.data_dir)
    command = "semhash-llm " + " ".join(sys.argv[1:]) if "verifier" in sys.argv else "train_verifier(...)"
    report = train_verifier(documents, args.out, per_kind=args.per_kind, heldout=args.heldout, epochs=args.epochs,
                            batch_size=args.batch_size, lr=args.lr, contrastive=args.contrastive, seed=args.seed, screen=args.screen,
                            target_precision=args.target_precision,
                            command=command, trained_on=trained_on, c_share=args.c_share,
                            misspellings=read_misspellings(args.data_dir) if args.misspellings else None,
                            init=args.init, freeze_encoder=args.freeze_encoder)
    s = report["scores"]
    print(f"verifier -> {args.out}/verifier.safetensors; held-apart accuracy {s['accuracy']}, ROC AUC {s['roc_auc']}, "
          f"MC variance AUC for wrong answers {s['mc_variance_auc_for_wrong']}; {report['seconds']['train']} s training")
    return 0
