"""Routing and the confidence-weighted ensemble of the verifier and the judge.

Confidences (each in [0, 1]):

* verifier: ``c_v = |2 p_v - 1| * max(0, 1 - 2 sigma_v)`` — its distance from a coin toss,
  shrunk by the spread of its Monte Carlo dropout passes (``sigma_v`` = their standard
  deviation; 0.5 is the largest a probability can have);
* judge: ``c_j = |2 p_j - 1|`` with ``p_j`` its calibrated duplicate probability.

The final probability is the confidence-weighted mean

    p = (c_v p_v + w c_j p_j) / (c_v + w c_j)        (p = p_v when both confidences are 0)

with ``w`` the judge's weight (``JudgeConfig.weight``, 2 by default): a confident verifier
dominates an unsure judge, a confident judge outweighs a verifier of equal confidence, and a
failed call leaves ``p = p_v``. The pair is linked when ``p`` reaches the verifier's threshold.

Routing: the judge reads the verifier's uncertain pairs (Monte Carlo variance at least
``VerifierConfig.uncertain_variance``, or the mean within ``uncertain_margin`` of the
threshold), least confident first (``c_v`` ascending), up to ``max_fraction`` of the
candidate pairs and ``max_calls`` paid calls.
"""

from __future__ import annotations

import numpy as np

__all__ = ["verifier_confidence", "judge_confidence", "fuse", "route_order", "calibrate", "fit_platt"]


def verifier_confidence(p: np.ndarray, var: np.ndarray) -> np.ndarray:
    """``|2p - 1| * max(0, 1 - 2 sqrt(var))``."""
    p = np.asarray(p, dtype=np.float64)
    sigma = np.sqrt(np.clip(np.asarray(var, dtype=np.float64), 0.0, None))
    return np.abs(2.0 * p - 1.0) * np.clip(1.0 - 2.0 * sigma, 0.0, 1.0)


def judge_confidence(p: np.ndarray) -> np.ndarray:
    """``|2p - 1|``."""
    return np.abs(2.0 * np.asarray(p, dtype=np.float64) - 1.0)


def fuse(p_v: np.ndarray, var_v: np.ndarray, p_j: np.ndarray, weight: float) -> np.ndarray:
    """The confidence-weighted mean of the two probabilities; ``p_v`` where ``p_j`` is NaN (no
    verdict) or both confidences are 0."""
    p_v = np.asarray(p_v, dtype=np.float64)
    p_j = np.asarray(p_j, dtype=np.float64)
    have = np.isfinite(p_j)
    c_v = verifier_confidence(p_v, var_v)
    c_j = np.where(have, judge_confidence(np.where(have, p_j, 0.5)), 0.0) * weight
    den = c_v + c_j
    with np.errstate(invalid="ignore", divide="ignore"):
        mixed = (c_v * p_v + c_j * np.where(have, p_j, 0.0)) / den
    return np.where(have & (den > 0), mixed, p_v)


def route_order(a: np.ndarray, b: np.ndarray, p_v: np.ndarray, var_v: np.ndarray) -> np.ndarray:
    """Indices of the pairs, least confident verifier first (ties: by document indices)."""
    return np.lexsort((np.asarray(b), np.asarray(a), verifier_confidence(p_v, var_v)))


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
