"""Routing and the confidence-weighted ensemble of the verifier and the judge, in log-odds.

The verifier's probability is first re-centred on its own threshold ``t`` (piecewise
linearly, ``t -> 0.5``), so that 0.5 is the boundary for both; its log-odds are shrunk by the
spread of its Monte Carlo dropout passes (``sigma`` = their standard deviation, 0.5 the
largest a probability can have):

    l_v = logit(p_v*) * max(0, 1 - 2 sigma)                       (the verifier's confidence)

The judge contributes the evidence of its answer: its calibrated probability against the
prior of the pairs it was calibrated on (``pi``; a judge that says the same whatever it reads
gives ``p_j = pi`` and no evidence), weighted by ``w`` = ``JudgeConfig.weight`` times its
reliability ``max(0, 2 AUC - 1)`` on held-apart pairs:

    l_j = logit(p_j) - logit(pi)
    p   = sigmoid(l_v + w l_j)                                    (linked when p >= 0.5)

A confident verifier (large ``|l_v|``) dominates a weak or unsure judge; a reliable judge's
confident answer (large ``|l_j|``) outweighs an unsure verifier; a failed call leaves the
verifier's own decision (``p_v >= t``). Routing: the judge reads the verifier's uncertain pairs
(Monte Carlo variance at least ``VerifierConfig.uncertain_variance``, or the mean within
``uncertain_margin`` of the threshold), least confident first (``|l_v|`` ascending), up to
``max_fraction`` of the candidate pairs and ``max_calls`` paid calls.
"""

from __future__ import annotations

import numpy as np

__all__ = ["recentre", "verifier_logit", "fuse", "route_order", "calibrate", "fit_platt"]


def recentre(p: np.ndarray, threshold: float) -> np.ndarray:
    """The verifier's probability mapped piecewise linearly so that ``threshold`` becomes 0.5."""
    p = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)
    t = min(max(float(threshold), 1e-6), 1 - 1e-6)
    return np.where(p < t, 0.5 * p / t, 0.5 + 0.5 * (p - t) / (1.0 - t))


def verifier_logit(p: np.ndarray, var: np.ndarray, threshold: float) -> np.ndarray:
    """``logit(recentre(p)) * max(0, 1 - 2 sqrt(var))``: the verifier's confidence, signed."""
    sigma = np.sqrt(np.clip(np.asarray(var, dtype=np.float64), 0.0, None))
    return _logit(recentre(p, threshold)) * np.clip(1.0 - 2.0 * sigma, 0.0, 1.0)


def fuse(p_v: np.ndarray, var_v: np.ndarray, p_j: np.ndarray, weight: float, threshold: float,
         prior: float = 0.5) -> np.ndarray:
    """The fused probability (boundary 0.5) of each pair; where ``p_j`` is NaN (no verdict) the
    verifier's re-centred probability, so the decision is its own."""
    p_j = np.asarray(p_j, dtype=np.float64)
    have = np.isfinite(p_j)
    evidence = np.where(have, _logit(np.where(have, p_j, 0.5)) - _logit(np.array(prior)), 0.0)
    fused = 1.0 / (1.0 + np.exp(-(verifier_logit(p_v, var_v, threshold) + weight * evidence)))
    return np.where(have, fused, recentre(p_v, threshold))


def route_order(a: np.ndarray, b: np.ndarray, p_v: np.ndarray, var_v: np.ndarray, threshold: float) -> np.ndarray:
    """Indices of the pairs, least confident verifier first (ties: by document indices)."""
    return np.lexsort((np.asarray(b), np.asarray(a), np.abs(verifier_logit(p_v, var_v, threshold))))


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def calibrate(p: np.ndarray, a: float, b: float) -> np.ndarray:
    """Platt scaling: ``sigmoid(a * logit(p) + b)``."""
    return 1.0 / (1.0 + np.exp(-(a * _logit(p) + b)))


def fit_platt(p: np.ndarray, labels: np.ndarray, iterations: int = 200) -> tuple[float, float]:
    """Fit ``(a, b)`` of :func:`calibrate` by Newton's method on the log loss (with Platt's
    smoothed targets, so separable data keeps finite weights)."""
    x = _logit(p)
    y = np.asarray(labels, dtype=np.float64)
    pos, neg = float(y.sum()), float(y.size - y.sum())
    t = np.where(y > 0.5, (pos + 1) / (pos + 2), 1 / (neg + 2))
    a, b = 1.0, 0.0
    for _ in range(iterations):
        q = 1.0 / (1.0 + np.exp(-(a * x + b)))
        g = np.array([np.sum((q - t) * x), np.sum(q - t)])
        w = q * (1 - q) + 1e-12
        h = np.array([[np.sum(w * x * x), np.sum(w * x)], [np.sum(w * x), np.sum(w)]]) + 1e-9 * np.eye(2)
        step = np.linalg.solve(h, g)
        a, b = a - float(step[0]), b - float(step[1])
        if float(np.abs(step).max()) < 1e-10:
            break
    return a, b
