"""``semhash-llm explain A B --run OUT``: why two documents were or were not merged.

Each stage's score for the pair is computed again from the two texts with the run's config
(the same code the stages run: MinHash and AW-MinHash signatures, SPH codes, the verifier's
screen and Monte Carlo dropout, the passage stage's containment test), beside the thresholds
in force and what the run decided for each document (``documents.parquet``) and, when the
judge ran, its logged verdict (``judge_pairs.parquet``). Scores are those of the pair alone:
whether a stage *proposed* the pair in the run also depended on the other documents (LSH
bucket sizes, SPH's neighbour budget, which cluster representative met which).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from semhash_llm.config import PipelineConfig
from semhash_llm.pipeline.registry import stages as registered_stages
from semhash_llm.runview import RunView
from semhash_llm.stages.base import DocStatus, StreamBatch
from semhash_llm.text.normalize import char_classes, normalize_batch
from semhash_llm.text.tokenize import tokenize_batch

__all__ = ["explain_pair", "format_explanation"]

logger = logging.getLogger(__name__)


def _batch(texts: list[str], config: PipelineConfig) -> StreamBatch:
    normalized = normalize_batch(texts, config.normalize)
    tb = tokenize_batch(normalized, char_classes(config.normalize.strip_punctuation), config.shingle)
    st = np.zeros(len(texts), dtype=np.uint8)
    st[tb.num_tokens == 0] = DocStatus.NO_TOKENS
    return StreamBatch(np.arange(len(texts), dtype=np.int64), texts, tb, st, st == DocStatus.OK, normalized)


def _hamming(a: np.ndarray, b: np.ndarray) -> int:
    x = np.bitwise_xor(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))
    return int(np.unpackbits(x).sum())


def _stage_scores(texts: list[str], config: PipelineConfig) -> dict[str, dict[str, Any]]:
    """Every stage's score for ``texts[0]`` against ``texts[1]``, with the thresholds in force."""
    runs = {info.name: info.runs(config) for info in registered_stages()}
    batch = _batch(texts, config)
    tokens = batch.tokens.num_tokens.astype(int).tolist()
    out: dict[str, dict[str, Any]] = {}
    same = bool(batch.tokens.digest_hi[0] == batch.tokens.digest_hi[1]
                and batch.tokens.digest_lo[0] == batch.tokens.digest_lo[1] and min(tokens) > 0)
    out["bloom"] = {"on": runs["bloom"], "score": 1.0 if same else 0.0, "threshold": 1.0, "accepts": same,
                    "what": "same normalized text (BLAKE2b-128 key)"}
    mh = config.minhash
    from semhash_llm.stages.lsh import MinHashLSHStage

    lsh = MinHashLSHStage(mh)
    sigs = lsh.compute(texts, config.normalize, config.shingle)["signatures"]
    jac = float(np.mean(sigs[0] == sigs[1]))
    r = lsh.rows_per_band
    bands = [bool(np.array_equal(sigs[0, j * r:(j + 1) * r], sigs[1, j * r:(j + 1) * r]))
             for j in range(lsh.num_bands)]
    short = min(tokens) < config.verifier.short_tokens and runs["mgfn"]
    out["lsh"] = {"on": runs["lsh"], "score": jac, "threshold": mh.threshold, "accepts": jac >= mh.threshold and not short,
                  "what": f"MinHash Jaccard estimate ({mh.num_perm} slots); {sum(bands)} of {lsh.num_bands} bands "
                          f"of {r} rows shared (a candidate needs one)",
                  "candidate": any(bands), "deferred_to_verifier": bool(short)}
    aw = config.aw
    if runs["aw"]:
        from semhash_llm.stages.aw import AWMinHashStage

        stage = AWMinHashStage(aw, config.normalize)
        stage.process(batch)
        wsigs, rows = stage.signatures()
        if rows.size == 2:
            wj = float(np.mean(wsigs[0] == wsigs[1]))
            out["aw"] = {"on": True, "score": wj, "threshold": aw.threshold,
                         "accepts": wj >= aw.threshold and not short, "deferred_to_verifier": bool(short),
                         "what": "weighted Jaccard estimate (ICWS over importance-weighted shingles"
                                 + ("; document frequencies of the pair alone, not the run's sample" if aw.idf else "")
                                 + ")"}
        else:
            out["aw"] = {"on": True, "score": None, "threshold": aw.threshold, "accepts": False,
                         "what": f"not weighted: fewer than {aw.min_lines} lines in "
                                 f"{'both' if rows.size == 0 else 'one'} (lsh and sph confirm on plain MinHash)"}
    else:
        out["aw"] = {"on": False, "score": None, "threshold": aw.threshold, "accepts": False, "what": "off in this run"}
    sp = config.sph
    if runs["sph"]:
        from semhash_llm.stages.sph import SPHStage

        codes = SPHStage(sp).compute(texts, config.normalize, config.shingle)["codes"]
        dist = _hamming(codes[0:1], codes[1:2])
        ok = dist <= sp.radius and jac >= sp.min_jaccard and not short
        out["sph"] = {"on": True, "score": dist, "threshold": sp.radius, "accepts": ok,
                      "what": f"Hamming distance of the {sp.bits}-bit SPH codes (radius {sp.radius}, then the "
                              f"MinHash estimate must reach {sp.min_jaccard}: {jac:.3f})",
                      "deferred_to_verifier": bool(short and dist <= sp.radius)}
    else:
        out["sph"] = {"on": False, "score": None, "threshold": sp.radius, "accepts": False, "what": "off in this run"}
    if runs["mgfn"]:
        from semhash_llm.stages.mgfn import VerifierStage
        from semhash_llm.verify.features import screen_pairs

        ver = VerifierStage(config.verifier, config.normalize)

        def read(docs: np.ndarray) -> list[str]:
            return [texts[int(d)] for d in np.asarray(docs).tolist()]

        a, b = np.array([0], np.int64), np.array([1], np.int64)
        screen = float(screen_pairs(read, a, b)[0])
        entry: dict[str, Any] = {"on": True, "screen": screen, "screen_threshold": config.verifier.screen,
                                 "threshold": ver.threshold_, "short_tokens": config.verifier.short_tokens,
                                 "tokens": tokens, "reached": bool(short),
                                 "what": "MGFN probability (Monte Carlo dropout mean and variance) after a "
                                         "character-trigram screen; it decides pairs with a document under "
                                         f"{config.verifier.short_tokens} tokens"}
        if screen >= config.verifier.screen:
            _keep, mean, var, _s = ver._read_screen_predict(a, b, read)
            entry.update(score=float(mean[0]), variance=float(var[0]), accepts=bool(mean[0] >= ver.threshold_),
                         uncertain=bool(var[0] >= config.verifier.uncertain_variance
                                        or abs(mean[0] - ver.threshold_) < config.verifier.uncertain_margin))
        else:
            entry.update(score=None, variance=None, accepts=False, uncertain=False)
        out["mgfn"] = entry
    else:
        out["mgfn"] = {"on": False, "score": None, "accepts": False, "what": "off in this run"}
    pc = config.passages
    if runs["passages"]:
        from semhash_llm.text.containment import shingle_containment

        child, parent = (0, 1) if len(texts[0]) <= len(texts[1]) else (1, 0)
        cont = shingle_containment(texts[child], texts[parent], config=config.normalize)
        ratio = len(texts[parent]) / max(len(texts[child]), 1)
        out["passages"] = {"on": True, "score": cont, "threshold": pc.containment,
                           "accepts": cont >= pc.containment and ratio >= pc.parent_min_ratio,
                           "what": f"containment of the shorter document ({'A' if child == 0 else 'B'}) in the "
                                   f"longer (character and word n-grams); the parent must be {pc.parent_min_ratio}x "
                                   f"longer (is {ratio:.2f}x)"}
    else:
        out["passages"] = {"on": False, "score": None, "accepts": False, "what": "off in this run"}
    return out


def _judge_verdict(view: RunView, id_a: str, id_b: str) -> dict[str, Any] | None:
    path = view.root / "judge_pairs.parquet"
    if not path.is_file():
        return None
    table = pq.read_table(path)
    for row in table.to_pylist():
        if {str(row.get("id_a")), str(row.get("id_b"))} == {str(id_a), str(id_b)}:
            return {k: v for k, v in row.items() if k not in ("id_a", "id_b")}
    return {"outcome": "not referred: the verifier was confident (or the pair never reached it)"}


def explain_pair(view: RunView, id_a: str, id_b: str) -> dict[str, Any]:
    """Why documents ``id_a`` and ``id_b`` of the run ``view`` were or were not merged."""
    ra, rb = view.row(id_a), view.row(id_b)
    rec_a, rec_b = view.record(ra), view.record(rb)
    texts = view.texts([ra, rb])
    ca, cb = rec_a.get("cluster_id"), rec_b.get("cluster_id")
    merged = ca is not None and ca == cb
    if merged:
        verdict = f"merged: both are in the cluster of {ca!r}"
    elif "skipped" in (rec_a.get("relation"), rec_b.get("relation")):
        verdict = "not merged: a document was skipped by the reader"
    else:
        verdict = "not merged: no accepted link joins them"
    direct = (rec_a.get("duplicate_of") == rec_b["id"]) or (rec_b.get("duplicate_of") == rec_a["id"])
    scores = _stage_scores(texts, view.config)
    accepted = [name for name, s in scores.items() if s.get("on") and s.get("accepts")]
    return {"a": {**rec_a, "chars": len(texts[0])}, "b": {**rec_b, "chars": len(texts[1])},
            "merged": merged, "direct_link": direct, "verdict": verdict, "stages": scores,
            "would_accept_alone": accepted, "judge": _judge_verdict(view, id_a, id_b),
            "note": "scores of the pair alone, with the run's config; in the run a pair was proposed only when "
                    "the other documents let it (bucket sizes, neighbour budgets, cluster representatives), and "
                    "a merge may also come through a chain of links via other documents"}


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)


def format_explanation(e: dict[str, Any]) -> str:
    """The explanation as text for the terminal."""
    lines = [e["verdict"] + (" (a direct link)" if e["direct_link"] else "")]
    for key in ("a", "b"):
        r = e[key]
        lines.append(f"  {key.upper()} {r['id']!r}: {r['action']}"
                     + (f", {r['relation']} of {r['duplicate_of']!r} by {r['decided_by']} (score {_fmt(r['score'])})"
                        if r.get("duplicate_of") else "")
                     + (f", cluster {r['cluster_id']!r}" if r.get("cluster_id") else "") + f", {r['chars']:,} chars")
    lines.append(f"{'stage':<9} {'on':<4} {'score':>9} {'threshold':>10} {'accepts':>8}  what")
    for name, s in e["stages"].items():
        lines.append(f"{name:<9} {_fmt(s.get('on')):<4} {_fmt(s.get('score')):>9} {_fmt(s.get('threshold')):>10} "
                     f"{_fmt(s.get('accepts') if s.get('on') else None):>8}  {s['what']}")
        if name == "mgfn" and s.get("on"):
            lines.append(f"{'':<9} screen {_fmt(s['screen'])} (needs {_fmt(s['screen_threshold'])}), variance "
                         f"{_fmt(s.get('variance'))}, uncertain {_fmt(s.get('uncertain'))}, tokens {s['tokens']}; "
                         f"the pair reaches it: {_fmt(s['reached'])}")
        if s.get("deferred_to_verifier"):
            lines.append(f"{'':<9} a document is short: this stage hands the pair to the verifier")
    if e["judge"] is not None:
        lines.append("judge: " + ", ".join(f"{k}={_fmt(v)}" for k, v in e["judge"].items()))
    lines.append("note: " + e["note"])
    return "\n".join(lines)
