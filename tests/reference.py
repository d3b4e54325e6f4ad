"""Slow, obvious references for every metric: plain Python loops over samples and bins.

They share no code with calibkit beyond the bin-edge convention itself (the edges are
``torch.linspace(0, 1, M + 1)`` in the scores' dtype, which is the definition).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch


def softmax_rows(z: np.ndarray) -> list[list[float]]:
    out = []
    for row in np.asarray(z, dtype=np.float64):
        m = max(row)
        e = [math.exp(v - m) for v in row]
        s = math.fsum(e)
        out.append([v / s for v in e])
    return out


def top_label(p: list[list[float]], y) -> tuple[list[float], list[int]]:
    conf, correct = [], []
    for row, label in zip(p, y, strict=True):
        k = max(range(len(row)), key=lambda j: (row[j], -j))  # first maximum
        conf.append(row[k])
        correct.append(int(k == int(label)))
    return conf, correct


def edges(n_bins: int, dtype=torch.float64) -> list[float]:
    return torch.linspace(0, 1, n_bins + 1, dtype=dtype).double().tolist()


def bins_lo_hi(values, e):
    """Bin of each value under (lo, hi] with 0 in the first bin."""
    out = []
    for v in values:
        b = 0
        for m in range(1, len(e) - 1):
            if v > e[m]:
                b = m
        out.append(b)
    return out


def ece_mce(conf, correct, n_bins, e=None):
    e = e or edges(n_bins)
    b = bins_lo_hi(conf, e)
    n = len(conf)
    ece, mce = 0.0, 0.0
    for m in range(n_bins):
        idx = [i for i in range(n) if b[i] == m]
        if not idx:
            continue
        acc = sum(correct[i] for i in idx) / len(idx)
        cf = math.fsum(conf[i] for i in idx) / len(idx)
        ece += len(idx) / n * abs(acc - cf)
        mce = max(mce, abs(acc - cf))
    return ece, mce


def over_under(conf, correct, n_bins):
    e = edges(n_bins)
    b = bins_lo_hi(conf, e)
    n = len(conf)
    over = under = 0.0
    for m in range(n_bins):
        idx = [i for i in range(n) if b[i] == m]
        if idx:
            d = (math.fsum(conf[i] for i in idx) - sum(correct[i] for i in idx)) / n
            over += max(d, 0.0)
            under += max(-d, 0.0)
    return over, under


def aece(conf, correct, n_bins):
    """Equal mass: nominal boundaries floor(mN/M), moved to the end of a straddling tie run."""
    n = len(conf)
    order = sorted(range(n), key=lambda i: conf[i])
    s = [conf[i] for i in order]
    bounds = []
    for m in range(1, n_bins):
        b = (m * n) // n_bins
        while 0 < b < n and s[b - 1] == s[b]:
            b += 1
        bounds.append(b)
    cuts = [0, *bounds, n]
    total = 0.0
    for lo, hi in itertools.pairwise(cuts):
        idx = order[lo:hi] if hi > lo else []
        if idx:
            total += abs(sum(correct[i] for i in idx) - math.fsum(conf[i] for i in idx)) / n
    return total


def classwise_ece(p, y, n_bins):
    e = edges(n_bins)
    n, k = len(p), len(p[0])
    total = 0.0
    for c in range(k):
        col = [row[c] for row in p]
        b = bins_lo_hi(col, e)
        for m in range(n_bins):
            idx = [i for i in range(n) if b[i] == m]
            if idx:
                acc = sum(int(y[i]) == c for i in idx)
                total += abs(acc - math.fsum(col[i] for i in idx)) / n
    return total / k


def nll(p, y):
    return math.fsum(-math.log(row[int(t)]) for row, t in zip(p, y, strict=True)) / len(p)


def brier(p, y):
    return math.fsum(
        math.fsum((v - (j == int(t))) ** 2 for j, v in enumerate(row))
        for row, t in zip(p, y, strict=True)
    ) / len(p)


def entropy(p):
    return math.fsum(math.fsum(-v * math.log(v) for v in row if v > 0) for row in p) / len(p)


def auroc(scores, positive):
    pos = [s for s, t in zip(scores, positive, strict=True) if t]
    neg = [s for s, t in zip(scores, positive, strict=True) if not t]
    hits = 0.0
    for a in pos:
        for b in neg:
            hits += 1.0 if a > b else 0.5 if a == b else 0.0
    return hits / (len(pos) * len(neg))


def ks(conf, correct):
    n = len(conf)
    worst = 0.0
    for t in sorted(set(conf)):
        worst = max(
            worst, abs(math.fsum(correct[i] - conf[i] for i in range(n) if conf[i] <= t) / n)
        )
    return worst


def fpr95(s_in, s_out):
    n = len(s_in)
    for t in sorted(set(s_in), reverse=True):
        if sum(v >= t for v in s_in) * 100 >= 95 * n:
            return sum(v >= t for v in s_out) / len(s_out)
    raise AssertionError("unreachable")


def smooth_ece_sigma(conf, correct, sigma, points=20001):
    """(1/N) ∫ |Σ_i r_i K(t, c_i)| dt with K reflected once at 0 and at 1, by trapezoid."""
    t = np.linspace(0, 1, points)
    c = np.asarray(conf, dtype=np.float64)
    r = c - np.asarray(correct, dtype=np.float64)

    def phi(x):
        return np.exp(-(x**2) / (2 * sigma**2)) / (math.sqrt(2 * math.pi) * sigma)

    R = np.zeros_like(t)
    for ci, ri in zip(c, r, strict=True):
        R += ri * (phi(t - ci) + phi(t + ci) + phi(t - (2 - ci)))
    return float(np.trapezoid(np.abs(R), t)) / len(c)


def smooth_ece(conf, correct):
    lo, hi = 1e-3, 1.0
    if smooth_ece_sigma(conf, correct, lo) <= lo:
        return smooth_ece_sigma(conf, correct, lo)
    for _ in range(30):
        mid = (lo + hi) / 2
        if smooth_ece_sigma(conf, correct, mid) > mid:
            lo = mid
        else:
            hi = mid
    return smooth_ece_sigma(conf, correct, hi)


def all_metrics(z, y, n_bins=15):
    """Every non-OOD metric of calibkit.evaluate on float64 logits ``z``."""
    p = softmax_rows(z)
    conf, correct = top_label(p, y)
    e, m = ece_mce(conf, correct, n_bins)
    over, under = over_under(conf, correct, n_bins)
    out = {
        "accuracy": sum(correct) / len(correct),
        "ece": e,
        "aece": aece(conf, correct, n_bins),
        "mce": m,
        "classwise_ece": classwise_ece(p, y, n_bins),
        "nll": nll(p, y),
        "brier": brier(p, y),
        "entropy": entropy(p),
        "ks_error": ks(conf, correct),
        "mean_confidence": math.fsum(conf) / len(conf),
        "overconfident": over,
        "underconfident": under,
    }
    out["gap"] = out["mean_confidence"] - out["accuracy"]
    if 0 < sum(correct) < len(correct):
        out["refinement_auroc"] = auroc(conf, correct)
    return out
