"""Stage ``mgfn`` (config ``verifier``; paper E, the multi-granularity fusion network, and C, contrastive boundaries with Monte Carlo dropout): the neural verifier decides the candidate pairs that hashing cannot settle.

The linking stages (``lsh``, ``aw``, ``sph``) settle a pair on its hash score when both of its
documents are long enough for the estimate to mean something. A pair with a document shorter
than ``VerifierConfig.short_tokens`` tokens is *deferred* (:func:`semhash_llm.stages.base.deferral`):
on a short text, one changed word makes another document ("… in Delhi?" / "… in Mumbai?",
a PAWS word swap) while a few typos do not (an OCR copy), and a Jaccard estimate over a
handful of shingles cannot tell them apart. With the verifier behind them, SPH proposes each
document's nearest codes (a per-document neighbour budget) and every such pair is examined.

After the linking stages, this stage:

1. gathers their deferred pairs (de-duplicated, in a fixed order; pairs already joined by an
   accepted edge are skipped);
2. re-reads the texts of the documents involved from the source, ``screen_chunk_docs`` at a
   time, keeping only their character-trigram codes, and settles as *different, without the
   network* every pair whose character-trigram Jaccard is below ``screen``
   (:func:`semhash_llm.verify.features.screen_pairs`);
3. re-reads the texts of the pairs that pass;
4. runs MGFN on the rest, in batches: each document is encoded once (bytes, hashed tokens,
   the SPH student's embedding, document traits → the gated fusion), then ``mc_passes``
   Monte Carlo dropout passes of the projection head and the boundary network over every pair
   with its alignment features give a mean duplicate probability and a variance;
5. accepts (links) the pairs whose mean reaches the threshold (``VerifierConfig.threshold``, or
   by default the one stored with the weights), in a fixed order, and counts as
   *uncertain* those whose variance reaches ``uncertain_variance`` or whose mean lies within
   ``uncertain_margin`` of the threshold: when the LLM judge runs (stage ``judge``) these are
   not linked here but handed to it (:class:`Referred`), and it decides them.

``report.json`` (this stage's funnel row) gives the pairs deferred by each stage, screened,
verified, accepted and uncertain, the share of all candidate pairs and of all pairs the
network saw, its pairs per second and its time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from semhash_llm.config import ConfigError, NormalizeConfig, VerifierConfig
from semhash_llm.pipeline.capabilities import Capabilities, capabilities_of
from semhash_llm.pipeline.edges import EdgeKind
from semhash_llm.sketch.lsh import Deferred
from semhash_llm.sketch.unionfind import cluster_roots, uf_find, uf_union
from semhash_llm.stages.base import (
    CoverAnswer,
    CoverContext,
    CoverQuery,
    DecideContext,
    Decision,
    Deferral,
    DefersPairs,
    Edges,
    StageCover,
    StreamBatch,
    read_pair_texts,
)

__all__ = ["VerifierStage", "VERIFIED_EDGE_KIND", "Referred", "shipped_verifier_path"]

logger = logging.getLogger(__name__)

VERIFIED_EDGE_KIND = EdgeKind.VERIFIED


def shipped_verifier_path() -> str:
    """The verifier weights shipped in the package."""
    from importlib.resources import files

    return str(files("semhash_llm") / "assets" / "verifier" / "verifier.safetensors")


@dataclass
class Referred:
    """The verifier's uncertain pairs, handed to the LLM judge: global indices, the Monte Carlo
    mean and variance of each, the verifier's threshold and the candidate pairs of the linking
    stages (the judge's budget is a share of them)."""

    a: np.ndarray
    b: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    threshold: float
    candidate_pairs: int

    @classmethod
    def empty(cls, threshold: float = 0.5) -> Referred:
        return cls(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64), np.empty(0, np.float64),
                   threshold, 0)

    def __len__(self) -> int:
        return int(self.a.size)


def _judge_follows(ctx: DecideContext) -> bool:
    """Whether a stage that adjudicates uncertain pairs (the judge) runs after the verifier."""
    return any(capabilities_of(stage).adjudicates for stage in ctx.stages.values())


class VerifierStage:
    """Token counts while streaming; deferred pairs verified by MGFN after the linking stages."""

    name = "mgfn"
    capabilities = Capabilities(handoff_fields=("referred_",), cover_rank=90,
                                offers_deferral=True, refers_uncertain=True)
    """It takes the linking stages' pairs of short documents; its uncertain pairs go to the judge;
    the cover check asks it last (it reads the two texts)."""

    def __init__(self, config: VerifierConfig, normalize: NormalizeConfig | None = None) -> None:
        self.config = config
        self.normalize = normalize
        path = config.model_path or shipped_verifier_path()
        try:
            from semhash_llm.verify.mgfn import load_mgfn
        except ImportError as exc:
            raise ConfigError(f"The verifier stage (mgfn, on by default) needs PyTorch, which is not installed ({exc}). "
                              "Install the ml extra (pip install torch==2.13.0 --index-url "
                              "https://download.pytorch.org/whl/cpu, then pip install 'semhash-llm[ml]'), or pass "
                              "--no-mgfn") from None

        self.model_, extra = load_mgfn(path)
        self.model_path_ = path
        from semhash_llm.sph.student import load_student

        # The semantic level reads the shipped SPH student's embedding, the one it was trained with.
        self.student_ = load_student()
        if self.model_.config.semantic_dim != self.student_.dim:
            raise ConfigError(f"The verifier at {path} reads {self.model_.config.semantic_dim}-d student embeddings, "
                              f"but the shipped student gives {self.student_.dim}-d. Train the verifier again "
                              "(`semhash-llm train verifier`) or pass the verifier.safetensors that matches")
        # The threshold: the config's, else the one shipped with the weights (chosen by `train
        # verifier` on its held-apart pairs), else 0.5.
        self.threshold_ = float(config.threshold if config.threshold is not None else extra.get("threshold", 0.5))
        self._tokens: list[np.ndarray] = []
        self._rows: list[np.ndarray] = []
        self._counts: np.ndarray | None = None
        self.details_: dict[str, Any] = {}
        self.cover_pairs_ = 0
        self.cover_accepted_ = 0
        self.referred_ = Referred.empty(self.threshold_)

    # ------------------------------------------------------------------ streaming

    def process(self, batch: StreamBatch) -> None:
        """Keep the token count of every batch document (its global index with it)."""
        self._tokens.append(batch.tokens.num_tokens.astype(np.int32))
        self._rows.append(batch.index.astype(np.int64))
        self._counts = None

    def _token_counts(self) -> np.ndarray:
        """Token count per global document index (0 for documents never seen)."""
        if self._counts is None:
            size = max((int(r.max()) + 1 for r in self._rows if r.size), default=0)
            counts = np.zeros(size, dtype=np.int32)
            for rows, toks in zip(self._rows, self._tokens):
                counts[rows] = toks
            self._tokens, self._rows = [counts], [np.arange(size, dtype=np.int64)]
            self._counts = counts
        return self._counts

    def token_counts(self, docs: np.ndarray) -> np.ndarray:
        """Tokens of each of ``docs`` (global indices; 0 for a document the stage never saw)."""
        counts = self._token_counts()
        docs = np.asarray(docs, dtype=np.int64)
        out = np.zeros(docs.size, dtype=np.int64)
        seen = docs < counts.size
        out[seen] = counts[docs[seen]]
        return out

    def is_short(self, docs: np.ndarray) -> np.ndarray:
        """Whether each document is short enough that its pairs are the verifier's to decide
        (fewer than ``short_tokens`` tokens): no linking stage accepts such a pair on its hash."""
        return self.token_counts(docs) < self.config.short_tokens

    def in_range(self, docs: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Whether the model reads all of each document: at most its ``max_tokens`` tokens and
        ``max_chars`` characters (code points: a close bound on its bytes for mostly-ASCII text).
        Only pairs of two such documents are asked of it outside the deferral (the cover check):
        past that it would judge a long text by its first kilobyte."""
        mc = self.model_.config
        return (self.token_counts(docs) <= mc.max_tokens) & (np.asarray(lengths)[np.asarray(docs, np.int64)]
                                                             <= mc.max_chars)

    def deferral(self, rows: np.ndarray) -> Deferral:
        """What the linking stages hand over: pairs with a document of ``rows`` shorter than
        ``short_tokens`` tokens whose estimate reaches ``min_hash_score``."""
        rows = np.asarray(rows, dtype=np.int64)
        counts = self._token_counts()
        if rows.size and int(rows.max()) >= counts.size:
            raise RuntimeError(f"the verifier saw {counts.size} documents but was asked about document {int(rows.max())}")
        short = counts[rows] < self.config.short_tokens
        capacity = int(self.config.max_deferred_per_doc * max(int(np.count_nonzero(short)), 1))
        return Deferral(short, float(self.config.min_hash_score), Deferred.buffer(capacity))

    # ------------------------------------------------------------------ decide

    def decide(self, ctx: DecideContext) -> Decision:
        """Verify the deferred pairs; link the accepted ones."""
        t_start = time.perf_counter()
        cfg = self.config
        self.referred_ = Referred.empty(self.threshold_)
        parts_a: list[np.ndarray] = []
        parts_b: list[np.ndarray] = []
        by_stage: dict[str, int] = {}
        growths = 0
        proposed = 0
        for name, stage in ctx.stages.items():
            if not capabilities_of(stage).defers_pairs:  # a linking stage with a Deferred buffer
                continue
            linking = cast(DefersPairs, stage)
            buffer = linking.deferred_
            a, b, _score = buffer.pairs()
            by_stage[name] = int(a.size)
            growths += buffer.growths
            counters = linking.counters_
            if counters.size:
                proposed += int(counters[0])
            parts_a.append(np.minimum(a, b))
            parts_b.append(np.maximum(a, b))
        n = ctx.num_docs
        lo = np.concatenate(parts_a) if parts_a else np.empty(0, np.int64)
        hi = np.concatenate(parts_b) if parts_b else np.empty(0, np.int64)
        keys = np.unique(lo * n + hi)
        lo, hi = keys // n, keys % n
        parent = ctx.union_find.parent_
        open_pair = cluster_roots(parent, lo) != cluster_roots(parent, hi)  # not joined by an accepted edge yet
        lo, hi = lo[open_pair], hi[open_pair]
        details: dict[str, Any] = {
            "model": self.model_path_ if cfg.model_path else "shipped",
            "short_tokens": cfg.short_tokens,
            "threshold": self.threshold_,
            "screen": cfg.screen,
            "mc_passes": cfg.mc_passes,
            "pairs_deferred_by_stage": by_stage,
            "deferral_buffer_growths": growths,
            "pairs_distinct_open": int(lo.size),
        }
        accepted_a: list[int] = []
        accepted_b: list[int] = []
        accepted_s: list[float] = []
        verified = screened = uncertain = accepted = 0
        seconds_model = 0.0
        if lo.size:
            if ctx.read_texts is None:
                raise RuntimeError("the verifier re-reads the texts of the pairs it checks, and this source cannot "
                                   "be read again; pass files (or run with --no-mgfn)")
            keep, mean, var, seconds_model = self._read_screen_predict(lo, hi, ctx.read_texts)
            screened = int(np.count_nonzero(~keep))
            lo, hi = lo[keep], hi[keep]
            verified = int(lo.size)
            if verified:
                near = np.abs(mean - self.threshold_) < cfg.uncertain_margin
                unsure = (var >= cfg.uncertain_variance) | near
                uncertain = int(np.count_nonzero(unsure))
                accepted = int(np.count_nonzero(mean >= self.threshold_))
                if _judge_follows(ctx):
                    # The judge links (or not) the uncertain pairs itself; it reads them here.
                    self.referred_ = Referred(lo[unsure], hi[unsure], mean[unsure], var[unsure], self.threshold_,
                                              proposed)
                    hold = unsure
                else:
                    hold = np.zeros(lo.size, dtype=np.bool_)
                for x, y, p, held in zip(lo.tolist(), hi.tolist(), mean.tolist(), hold.tolist()):
                    if held:
                        continue
                    if p >= self.threshold_ and uf_find(parent, x) != uf_find(parent, y):
                        uf_union(parent, x, y)
                        accepted_a.append(x)
                        accepted_b.append(y)
                        accepted_s.append(p)
        seconds = time.perf_counter() - t_start
        all_pairs = n * (n - 1) // 2
        details.update({
            "pairs_screened_out": screened,
            "pairs_verified": verified,
            "pairs_accepted": accepted,
            "edges_linked": len(accepted_a),
            "pairs_uncertain": uncertain,
            "pairs_referred_to_judge": len(self.referred_),
            "candidate_pairs": proposed,
            "share_of_candidates_verified": round(verified / proposed, 6) if proposed else 0.0,
            "share_of_all_pairs_verified": float(f"{verified / all_pairs:.3g}") if all_pairs else 0.0,
            "verified_pairs_per_second": round(verified / seconds_model, 1) if seconds_model > 0 else 0.0,
            "model_seconds": round(seconds_model, 3),
        })
        self.details_ = details
        edges = Edges(np.asarray(accepted_a, np.int64), np.asarray(accepted_b, np.int64),
                      np.asarray(accepted_s, np.float32), np.full(len(accepted_a), VERIFIED_EDGE_KIND, np.uint8))
        logger.info("verifier: %d deferred pairs, %d screened out, %d verified, %d accepted in %.1f s",
                    int(keys.size), screened, verified, len(accepted_a), seconds)
        return Decision(edges, docs_in=int(np.unique(np.concatenate([lo, hi])).size) if lo.size else 0,
                        pairs_in=int(keys.size), pairs_out=len(accepted_a), details=details)

    def verify_pairs(self, a: np.ndarray, b: np.ndarray, read_texts: Callable[[np.ndarray], list[str]]) -> np.ndarray:
        """Whether the verifier accepts each pair ``(a[i], b[i])`` (global indices), by the same
        screen, model, threshold and per-pair dropout seeds as :meth:`decide`. The cover check
        asks it about removals that no accepted pair covers directly, for pairs within
        :meth:`in_range` only."""
        return self.verify_pairs_scored(a, b, read_texts)[0]

    def covers(self, ctx: CoverContext) -> StageCover | None:
        """The cover check's last question: does the verifier accept the pair? Asked, once per
        pair of exact classes, only of pairs nothing else covered and whose two texts lie within
        what the model reads (:meth:`in_range`); ``None`` when the texts cannot be re-read."""
        read_texts, lengths = ctx.read_texts, ctx.lengths
        if read_texts is None or lengths is None:
            return None
        n = ctx.num_docs
        verdicts: dict[int, bool] = {}
        probs: dict[int, float] = {}
        details = {"pairs_verified": 0, "pairs_verifier_accepted": 0}  # the select row's cover_check_* counts

        def answer(q: CoverQuery) -> CoverAnswer:
            out = CoverAnswer.none(q.docs.size)
            if not q.open.any():
                return out
            rest = np.flatnonzero(q.open)
            rest = rest[self.in_range(q.docs[rest], lengths) & self.in_range(q.keepers[rest], lengths)]
            keys = q.keys[rest]
            ask = np.unique(keys[np.array([k not in verdicts for k in keys.tolist()], dtype=np.bool_)])
            if ask.size:
                said, prob = self.verify_pairs_scored(ask // n, ask % n, read_texts)
                verdicts.update(zip(ask.tolist(), said.tolist()))
                probs.update(zip(ask.tolist(), prob.tolist()))
                details["pairs_verified"] += int(ask.size)
                details["pairs_verifier_accepted"] += int(np.count_nonzero(said))
            accepted = np.array([verdicts[k] for k in keys.tolist()], dtype=np.bool_)
            scores = np.array([probs[k] for k in keys[accepted].tolist()], dtype=np.float64)
            return out.mark(rest[accepted], VERIFIED_EDGE_KIND, scores)

        return StageCover(answer, details)

    def verify_pairs_scored(self, a: np.ndarray, b: np.ndarray, read_texts: Callable[[np.ndarray], list[str]]
                            ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`verify_pairs` and each pair's MC-dropout mean probability (NaN: screened out)."""
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        out = np.zeros(a.size, dtype=np.bool_)
        prob = np.full(a.size, np.nan, dtype=np.float64)
        if a.size:
            keep, mean, _var, _seconds = self._read_screen_predict(a, b, read_texts)
            prob[np.flatnonzero(keep)] = mean
            out[np.flatnonzero(keep)] = mean >= self.threshold_
        self.cover_pairs_ += int(a.size)
        self.cover_accepted_ += int(np.count_nonzero(out))
        return out, prob

    def _read_screen_predict(self, a: np.ndarray, b: np.ndarray, read_texts: Callable[[np.ndarray], list[str]]
                             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """Screen the pairs by character-trigram Jaccard (their documents re-read in bounded
        chunks, only trigram codes kept) and run the model on those that pass, re-reading just
        their texts: (pass mask over the pairs, MC mean and variance of the passing ones, the
        model's seconds)."""
        from semhash_llm.verify.features import screen_pairs

        # One order per pair (lower index first), so that the decide step and the cover check
        # give a pair the same verdict whichever way round they ask.
        a, b = np.minimum(a, b), np.maximum(a, b)
        keep = screen_pairs(read_texts, a, b, self.config.screen_chunk_docs) >= self.config.screen
        if not keep.any():
            return keep, np.empty(0, np.float64), np.empty(0, np.float64), 0.0
        texts, ia, ib = read_pair_texts(read_texts, a[keep], b[keep])
        t0 = time.perf_counter()
        mean, var = self._predict(texts, ia, ib)
        return keep, mean, var, time.perf_counter() - t0

    def _predict(self, texts: list[str], ia: np.ndarray, ib: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """MC-dropout mean and variance of every pair ``(texts[ia[i]], texts[ib[i]])``: each text
        of a pair encoded once, then the pairs in batches. Deterministic per pair: its dropout
        masks are seeded from its two texts' digests, so its verdict does not depend on the batch
        it sits in, nor on which step (decide, cover check) asks."""
        import torch

        from semhash_llm.verify.features import pair_features
        from semhash_llm.verify.mgfn import encode_texts, pair_seed, text_digests

        model = self.model_
        cfg = self.config
        used, inverse = np.unique(np.concatenate([ia, ib]), return_inverse=True)
        doc_texts = [texts[i] for i in used.tolist()]
        ta = [texts[i] for i in ia.tolist()]
        tb = [texts[i] for i in ib.tolist()]
        student = self.student_
        fused_parts: list[torch.Tensor] = []
        with torch.no_grad():
            for s in range(0, len(doc_texts), cfg.batch_size):
                chunk = doc_texts[s: s + cfg.batch_size]
                fused_parts.append(model.fuse(encode_texts(chunk, model.config, semantic=student.encode(chunk),
                                                           normalize=self.normalize)))
        fused = torch.cat(fused_parts)
        slot_a = torch.from_numpy(inverse[: ia.size].astype(np.int64))
        slot_b = torch.from_numpy(inverse[ia.size:].astype(np.int64))
        digests = text_digests(doc_texts)
        seeds = pair_seed(digests[inverse[: ia.size]], digests[inverse[ia.size:]])
        means: list[np.ndarray] = []
        variances: list[np.ndarray] = []
        for s in range(0, ia.size, cfg.batch_size):
            feats = None
            if model.config.pair_features:
                feats = torch.from_numpy(pair_features(ta[s: s + cfg.batch_size], tb[s: s + cfg.batch_size],
                                                         width=model.config.pair_features))
            m, v = model.mc_predict_fused(fused[slot_a[s: s + cfg.batch_size]], fused[slot_b[s: s + cfg.batch_size]],
                                          passes=cfg.mc_passes, features=feats, seeds=seeds[s: s + cfg.batch_size])
            means.append(m.numpy())
            variances.append(v.numpy())
        return np.concatenate(means).astype(np.float64), np.concatenate(variances).astype(np.float64)
