"""Stage ``judge`` (config ``judge``; paper D, LLM-as-judge): an instruction-tuned LLM reads the few pairs the verifier is unsure about.

The verifier (stage ``mgfn``) hands over its uncertain pairs instead of linking them
(:class:`semhash_llm.stages.mgfn.Referred`). This stage:

1. orders them least confident first and takes at most ``max_fraction`` of the candidate
   pairs (:func:`semhash_llm.judge.fusion.route_order`);
2. re-reads their texts, takes out every sentence that carries instructions to a model
   (:mod:`semhash_llm.judge.guard`; a pair where that cannot isolate them is ``guarded``:
   the verifier decides), looks each pair up in the SQLite cache (content hashes, model, prompt version and
   mode) and asks the backend about the rest, at most ``max_calls`` paid calls;
3. calibrates each answer (Platt scaling of the yes-probability) and fuses it with the
   verifier's probability by confidence (:func:`semhash_llm.judge.fusion.fuse`), the judge's
   weight scaled by its measured reliability (:class:`Calibration`);
4. links, in a fixed order, every referred pair whose final probability reaches the
   verifier's threshold — judged pairs as ``decided_by = judge``, the pairs past the budget
   or whose call failed on the verifier's probability alone, as without a judge.

``report.json`` (the ``judge`` row): ``pairs_in`` = pairs judged (answered by the backend or
the cache); pairs referred, routed, with instructions to a model taken out (up to five of the
phrases found), guarded, answered from the cache, calls made, failures by kind,
pairs left to the verifier by the budget, their share of the candidate pairs, seconds per
judged pair, and what the judge changed (pairs it flipped to duplicate and to distinct).
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from semhash_llm.config import ConfigError, JudgeConfig
from semhash_llm.judge.backends import Judge, LocalJudge, OpenAIJudge
from semhash_llm.judge.cache import JudgeCache, pair_key
from semhash_llm.judge.fusion import calibrate, fuse, route_order
from semhash_llm.judge.guard import Redacted, redact_instructions
from semhash_llm.judge.prompt import PROMPT_VERSION, Verdict
from semhash_llm.pipeline.capabilities import Capabilities
from semhash_llm.pipeline.edges import EdgeKind
from semhash_llm.sketch.unionfind import uf_find, uf_union
from semhash_llm.stages.base import DecideContext, Decision, Edges, StreamBatch, read_pair_texts, role_stage
from semhash_llm.stages.mgfn import VERIFIED_EDGE_KIND, Referred

__all__ = ["JudgeStage", "JUDGED_EDGE_KIND", "Calibration", "default_cache_path", "shipped_calibration_path",
           "load_calibration",
           "make_judge"]

logger = logging.getLogger(__name__)

JUDGED_EDGE_KIND = EdgeKind.JUDGED
_CHUNK = 32  # pairs per backend call batch (progress is reported between batches)


def default_cache_path() -> Path:
    """``$XDG_CACHE_HOME/semhash-llm/judge.sqlite`` (``~/.cache`` when unset)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "semhash-llm" / "judge.sqlite"


def shipped_calibration_path() -> Path:
    """The calibration shipped for the default local model and the current prompt version."""
    from importlib.resources import files

    return Path(str(files("semhash_llm") / "assets" / "judge" / "calibration.json"))


@dataclass(frozen=True)
class Calibration:
    """How a judge's yes-probability is read: Platt's ``a``, ``b`` and the judge's reliability,
    ``max(0, 2 AUC - 1)`` on the calibration's held-apart pairs (1 when unmeasured), which
    scales its confidence in the fusion: a judge whose answers do not separate duplicates
    from the rest on held-apart pairs cannot overrule the verifier, whatever its calibrated
    probability says (calibration alone pulls an uninformative judge to the prior of the
    calibration pairs, not to the pair in hand)."""

    a: float = 1.0
    b: float = 0.0
    reliability: float = 1.0
    prior: float = 0.5
    """Share of duplicates among the calibration pairs: the judge's evidence is measured against it."""
    source: str = "none"


def load_calibration(path: str | Path | None, model_id: str, mode: str) -> Calibration:
    """The calibration for this model, prompt version and mode: from ``path``, else the shipped
    file when it was fitted for them, else the identity with reliability 1."""
    if mode != "logprob":
        return Calibration(source="none (generate mode: the model's own confidence)")
    candidate = Path(path) if path else shipped_calibration_path()
    if not candidate.is_file():
        if path:
            raise ConfigError(f"The judge calibration {candidate} does not exist. Pass a file written by "
                              "`semhash-llm train judge`, or leave --judge-calibration unset")
        return Calibration()
    try:
        data = json.loads(candidate.read_text(encoding="utf-8"))
        a, b = float(data["a"]), float(data["b"])
        fitted_for = (str(data["model"]), str(data["prompt_version"]), str(data.get("mode", "logprob")))
        auc = data.get("heldout", {}).get("roc_auc")
        reliability = 1.0 if auc is None else min(max(2.0 * float(auc) - 1.0, 0.0), 1.0)
        prior = min(max(float(data.get("prior", 0.5)), 0.01), 0.99)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"The judge calibration {candidate} is not a calibration file ({exc}). Write one with "
                          "`semhash-llm train judge`") from None
    if fitted_for != (model_id, PROMPT_VERSION, mode):
        if path:
            raise ConfigError(f"The judge calibration {candidate} was fitted for model {fitted_for[0]!r}, prompt "
                              f"{fitted_for[1]!r}, mode {fitted_for[2]!r}, not for {model_id!r}, {PROMPT_VERSION!r}, "
                              f"{mode!r}. Fit one with `semhash-llm train judge` for this model")
        return Calibration(source="none (the shipped calibration is for another model)")
    return Calibration(a, b, reliability, prior, candidate.name if not path else str(candidate))


def make_judge(config: JudgeConfig) -> Judge:
    """The backend ``config`` names."""
    try:
        if config.backend == "local":
            return LocalJudge(config.model, mode=config.mode, max_chars=config.max_chars, n_ctx=config.n_ctx)
        if config.backend == "openai":
            return OpenAIJudge(config.url, str(config.model), mode=config.mode, max_chars=config.max_chars,
                               api_key_env=config.api_key_env, concurrency=config.concurrency,
                               timeout=config.timeout, retries=config.retries, backoff=config.backoff)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    raise ConfigError(f"The 'backend' parameter of JudgeConfig must be 'local' or 'openai' for the judge stage. "
                      f"Got {config.backend!r} instead.")


class JudgeStage:
    """Nothing while streaming; after the verifier, the uncertain pairs judged, fused and linked."""

    name = "judge"
    capabilities = Capabilities(handoff_fields=("log_",), adjudicates=True, logs_pairs=True)
    """It adjudicates the verifier's uncertain pairs; its pair log becomes judge_pairs.parquet."""

    def __init__(self, config: JudgeConfig, judge: Judge | None = None) -> None:
        self.config = config
        self.judge_ = judge if judge is not None else make_judge(config)
        self.calibration_ = load_calibration(config.calibration, self.judge_.model_id, config.mode)
        self.cache_: JudgeCache | None = None
        if config.use_cache:
            self.cache_ = JudgeCache(config.cache or default_cache_path())
        self.log_: dict[str, np.ndarray] = {}

    def process(self, batch: StreamBatch) -> None:
        """The judge needs nothing from the stream."""

    def pair_log(self) -> dict[str, np.ndarray]:
        """One row per referred pair (global indices ``a``, ``b``): the verifier's mean and
        variance, the judge's raw and calibrated probability (NaN: not judged), the fused one,
        whether it was linked, the verifier's own decision, the outcome (``judged``,
        ``cached``, ``budget``, ``guarded``: a document carries instructions to a model that
        could not be taken out, ``failed:<kind>``) and ``instructions_removed`` (sentences
        that speak to a model were taken out before the judge read the pair)."""
        return self.log_

    def decide(self, ctx: DecideContext) -> Decision:
        t_start = time.perf_counter()
        cfg = self.config
        verifier = role_stage(ctx.stages, "refers_uncertain")
        referred = verifier.referred_ if verifier is not None else None
        if not isinstance(referred, Referred):
            logger.warning("the judge reads the verifier's uncertain pairs, and the verifier (mgfn) is off: "
                           "nothing to judge")
            referred = Referred.empty()
        a, b, mean, var, thr = referred.a, referred.b, referred.mean, referred.var, referred.threshold
        n_ref = len(referred)
        budget = int(np.floor(cfg.max_fraction * referred.candidate_pairs))
        order = route_order(a, b, mean, var, thr)
        routed = np.sort(order[:budget])
        p_judge = np.full(n_ref, np.nan)
        outcome = np.full(n_ref, "budget", dtype=object)  # budget | cached | judged | guarded | failed:<kind>
        failures: dict[str, int] = {}
        cached = calls_made = 0
        instructions = np.zeros(n_ref, dtype=np.bool_)  # a document of the pair spoke to a model
        guard_examples: list[str] = []
        call_seconds = 0.0
        if routed.size:
            if ctx.read_texts is None:
                raise RuntimeError("the judge re-reads the texts of the pairs it checks, and this source cannot be "
                                   "read again; pass files (or run without --judge)")
            texts, ia, ib = read_pair_texts(ctx.read_texts, a[routed], b[routed])
            # What a document says to a model never reaches one: such sentences are taken out
            # (the judge reads, and the cache keys, the rest); where that cannot isolate them the
            # pair keeps the verifier's decision.
            seen = [redact_instructions(t) if cfg.guard else Redacted(t) for t in texts]
            pairs = [(seen[x].text, seen[y].text) for x, y in zip(ia.tolist(), ib.tolist())]
            model, prompt = f"{self.judge_.backend}:{self.judge_.model_id}", f"{PROMPT_VERSION}/{cfg.mode}"
            keys = [pair_key(x, y, model, prompt) for x, y in pairs]
            found = self.cache_.get_many(keys) if self.cache_ is not None else {}
            ask: list[int] = []
            for j, key in enumerate(keys):
                sa, sb = seen[int(ia[j])], seen[int(ib[j])]
                if sa.found or sb.found:
                    instructions[routed[j]] = True
                    for phrase in sa.found + sb.found:
                        if len(guard_examples) < 5 and phrase not in guard_examples:
                            guard_examples.append(phrase)
                if not (sa.clean and sb.clean):
                    outcome[routed[j]] = "guarded"
                    continue
                hit = found.get(key)
                if hit is not None and hit.p_yes is not None:
                    p_judge[routed[j]] = hit.p_yes
                    outcome[routed[j]] = "cached"
                    cached += 1
                else:
                    ask.append(j)
            if cfg.max_calls is not None:
                ask = ask[:cfg.max_calls]  # the rest stay with the verifier ("budget")
            if ask:
                t_calls = time.perf_counter()
                verdicts: list[Verdict] = []
                for start in range(0, len(ask), _CHUNK):  # in chunks, to show progress
                    verdicts.extend(self.judge_.judge([pairs[j] for j in ask[start:start + _CHUNK]]))
                    done = len(verdicts)
                    if ctx.progress is not None:
                        ctx.progress(self.name, done, len(ask))
                    logger.info("judge: %d/%d pairs asked (%.2f pairs/s)", done, len(ask),
                                done / max(time.perf_counter() - t_calls, 1e-9))
                call_seconds = time.perf_counter() - t_calls
                calls_made = len(ask)
                good: list[tuple[str, Verdict]] = []
                for j, verdict in zip(ask, verdicts):
                    if verdict.p_yes is None:
                        kind = verdict.error or "error"
                        failures[kind] = failures.get(kind, 0) + 1
                        outcome[routed[j]] = f"failed:{kind}"
                    else:
                        p_judge[routed[j]] = verdict.p_yes
                        outcome[routed[j]] = "judged"
                        good.append((keys[j], verdict))
                if self.cache_ is not None:
                    self.cache_.put_many(good, model, prompt)
        cal = self.calibration_
        have = np.isfinite(p_judge)
        p_cal = np.full(n_ref, np.nan)
        if have.any():
            p_cal[have] = calibrate(p_judge[have], cal.a, cal.b)
        final = fuse(mean, var, p_cal, cfg.weight * cal.reliability, thr, cal.prior)
        # Link in a fixed order (by document indices), as the verifier does.
        parent = ctx.union_find.parent_
        link = np.zeros(n_ref, dtype=np.bool_)
        edges_a: list[int] = []
        edges_b: list[int] = []
        edges_s: list[float] = []
        edges_k: list[int] = []
        for i in np.lexsort((b, a)).tolist():
            if final[i] >= 0.5:  # the fused probability's boundary (the verifier's threshold re-centred)
                link[i] = True
                x, y = int(a[i]), int(b[i])
                if uf_find(parent, x) != uf_find(parent, y):
                    uf_union(parent, x, y)
                    edges_a.append(x)
                    edges_b.append(y)
                    edges_s.append(float(final[i] if have[i] else mean[i]))  # judged: the fused probability
                    edges_k.append(JUDGED_EDGE_KIND if have[i] else VERIFIED_EDGE_KIND)
        automatic = mean >= thr
        judged = int(np.count_nonzero(have))
        to_dup = int(np.count_nonzero(have & link & ~automatic))
        to_distinct = int(np.count_nonzero(have & ~link & automatic))
        self.log_ = {"a": a.copy(), "b": b.copy(), "verifier_p": mean.copy(), "verifier_var": var.copy(),
                     "judge_p_raw": p_judge, "judge_p": p_cal, "final_p": final, "linked": link,
                     "automatic": automatic, "outcome": outcome.astype(str), "instructions_removed": instructions}
        seconds = time.perf_counter() - t_start
        details: dict[str, Any] = {
            "backend": self.judge_.backend,
            "model": self.judge_.model_id,
            "prompt_version": PROMPT_VERSION,
            "mode": cfg.mode,
            "calibration": {"a": round(cal.a, 4), "b": round(cal.b, 4), "reliability": round(cal.reliability, 4),
                            "prior": round(cal.prior, 4), "source": cal.source},
            "weight": cfg.weight,
            "effective_weight": round(cfg.weight * cal.reliability, 4),
            "pairs_referred": n_ref,
            "pairs_routed": int(routed.size),
            "budget_pairs": budget,
            "pairs_judged": judged,
            "pairs_from_cache": cached,
            "pairs_with_instructions": int(np.count_nonzero(instructions)),
            "pairs_guarded": int(np.count_nonzero(outcome == "guarded")),
            "instructions_found": guard_examples,
            "calls": calls_made,
            "failures": dict(sorted(failures.items())),
            "pairs_left_to_verifier": int(n_ref - judged),
            "candidate_pairs": referred.candidate_pairs,
            "share_of_candidates_judged": round(judged / referred.candidate_pairs, 6) if referred.candidate_pairs
            else 0.0,
            "seconds_per_call": round(call_seconds / calls_made, 4) if calls_made else 0.0,
            "flipped_to_duplicate": to_dup,
            "flipped_to_distinct": to_distinct,
            "pairs_linked": int(np.count_nonzero(link)),
        }
        logger.info("judge: %d uncertain pairs, %d judged (%d from the cache, %d calls, %d failed), %d flipped to "
                    "duplicate, %d to distinct, in %.1f s", n_ref, judged, cached, calls_made, sum(failures.values()),
                    to_dup, to_distinct, seconds)
        edges = Edges(np.asarray(edges_a, np.int64), np.asarray(edges_b, np.int64), np.asarray(edges_s, np.float32),
                      np.asarray(edges_k, np.uint8))
        return Decision(edges, docs_in=int(np.unique(np.concatenate([a, b])).size) if n_ref else 0,
                        pairs_in=judged, pairs_out=len(edges), details=details)
