"""A classifier whose calibration is known exactly: samples, and every metric's true value.

:class:`SyntheticClassifier` draws a top-label confidence c = 1/K + (1 − 1/K) u with
u ~ Beta(a, b), a predicted class ŷ uniform over the K classes, the other K − 1
probabilities equal to (1 − c)/(K − 1), and a label that is ŷ with probability

    f(c) = 1/K + (1 − 1/K) u^γ

and otherwise one of the other classes, uniformly. γ = 1 is perfectly calibrated
(f(c) = c), γ > 1 over-confident (f(c) < c for every c), γ < 1 under-confident. Because
the top scores lie above 1/K and the others below it, each class's calibration function
is known too, and every metric's population value (its limit as N → ∞ with the same bins)
is a one-dimensional integral over u: closed forms in regularised incomplete beta
functions where they exist (the binned errors, KS, accuracy), adaptive quadrature where
they do not (NLL, Brier, entropy, refinement AUROC, AURC). docs/metrics.md, "Do the
intervals cover?", uses it to measure the coverage of calibkit's bootstrap intervals.

For the binned errors the population value is that of the same bins: Σ_m |E[(a − c) 1{c ∈
B_m}]| for ECE. Over-confident or under-confident at every c (γ ≠ 1), the sign of f(c) − c
never changes, so binned ECE, AECE and KS error all equal the continuous ECE
E|f(c) − c| exactly; so does smooth ECE, whose kernel (reflected at 0 and 1) keeps the
mass of a residual that has one sign. The binned RMS error lies below the continuous one
(Jensen), and is what ``rms_ce`` estimates.

>>> m = SyntheticClassifier(10, gamma=2.0)
>>> t = m.truth()
>>> round(t["ece"], 6) == round(m.continuous_ece(), 6) == round(t["ks_error"], 6)
True
>>> probs, labels = m.sample(200_000, seed=0)
>>> from calibkit.metrics import ece
>>> abs(ece(probs, labels, probs=True) - t["ece"]) < 0.003
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import integrate, special, stats

from ._binning import BinScheme
from ._table import COMPUTED

#: the metrics :meth:`SyntheticClassifier.truth` gives: every row of the metric table that
#: is computed from the shared statistics (those with a bootstrap interval; optimal ECE and
#: the OOD metrics have none)
TRUE_METRICS = tuple(m.name for m in COMPUTED)


@dataclass(frozen=True)
class SyntheticClassifier:
    """K classes, confidences from Beta(``a``, ``b``) mapped onto [1/K, 1], accuracy at
    confidence c given by ``gamma`` (module docstring)."""

    n_classes: int
    a: float = 5.0
    b: float = 1.0
    gamma: float = 1.0

    def __post_init__(self) -> None:
        if self.n_classes < 2:
            raise ValueError(f"n_classes: expected 2 or more, got {self.n_classes}")
        if min(self.a, self.b, self.gamma) <= 0:
            raise ValueError("a, b and gamma must be positive")

    # -- sampling -------------------------------------------------------------------------
    def sample(self, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(probs (n, K) float64, labels (n,) int64) drawn with ``seed``."""
        k, rng = self.n_classes, np.random.default_rng(seed)
        u = rng.beta(self.a, self.b, n)
        c = 1 / k + (1 - 1 / k) * u
        top = rng.integers(k, size=n)
        right = rng.random(n) < 1 / k + (1 - 1 / k) * u**self.gamma
        wrong = (top + rng.integers(1, k, size=n)) % k
        probs = np.repeat(((1 - c) / (k - 1))[:, None], k, axis=1)
        probs[np.arange(n), top] = c
        return probs, np.where(right, top, wrong)

    # -- closed forms ---------------------------------------------------------------------
    def _moment(self, r: float, lo: np.ndarray | float, hi: np.ndarray | float) -> np.ndarray:
        """E[u^r 1{lo < u <= hi}] (bounds clipped to [0, 1])."""
        a, b = self.a, self.b
        lo, hi = np.clip(lo, 0, 1), np.clip(hi, 0, 1)
        scale = math.exp(special.betaln(a + r, b) - special.betaln(a, b))
        return scale * (special.betainc(a + r, b, hi) - special.betainc(a + r, b, lo))

    def _gap_mass(self, lo, hi) -> np.ndarray:
        """E[(f(c) − c) 1{lo < u <= hi}]."""
        return (1 - 1 / self.n_classes) * (
            self._moment(self.gamma, lo, hi) - self._moment(1, lo, hi)
        )

    def _u(self, c: np.ndarray) -> np.ndarray:
        """u of a top-label confidence c."""
        k = self.n_classes
        return (c - 1 / k) / (1 - 1 / k)

    def continuous_ece(self) -> float:
        """E|f(c) − c|: the calibration error without bins."""
        return float(abs(self._gap_mass(0.0, 1.0)))

    def continuous_rms(self) -> float:
        """sqrt(E (f(c) − c)²) without bins."""
        m, g = self._moment, self.gamma
        sq = m(2, 0, 1) - 2 * m(1 + g, 0, 1) + m(2 * g, 0, 1)
        return float((1 - 1 / self.n_classes) * math.sqrt(max(sq, 0.0)))

    def _quad(self, fn) -> float:
        """E[fn(u)] by adaptive quadrature against the Beta density."""
        pdf = stats.beta(self.a, self.b).pdf
        return integrate.quad(lambda u: fn(u) * pdf(u), 0, 1, limit=200, epsabs=1e-12)[0]

    def truth(self, n_bins: int = 15, binning: str = "calibkit") -> dict[str, float]:
        """Population value of each metric in :data:`TRUE_METRICS` with ``n_bins`` bins.

        ``binning``: an equal-width convention of :class:`~calibkit.metrics.BinScheme`
        (their edges agree; with continuous confidences where an edge's sample falls does
        not matter, so every convention has the same population value)."""
        BinScheme(n_bins, binning, np.float64)  # validates the settings
        k, g = self.n_classes, self.gamma
        edges = np.linspace(0, 1, n_bins + 1)
        lo, hi = self._u(edges[:-1]), self._u(edges[1:])
        d = self._gap_mass(lo, hi)  # per bin E[(a − c) 1{c in B_m}]
        mass = self._moment(0, lo, hi)
        full = mass > 0
        q = stats.beta(self.a, self.b).ppf(np.linspace(0, 1, n_bins + 1))
        d_mass = self._gap_mass(q[:-1], q[1:])
        # classwise: a class's score is c (prob 1/K, gap f − c) or (1 − c)/(K − 1) = (1 − u)/K
        # (prob (K − 1)/K, gap (c − f)/(K − 1)); per class, per bin:
        other = -self._gap_mass(1 - k * edges[1:], 1 - k * edges[:-1])
        classwise = np.abs(d + other).sum() / k
        rms2 = (d[full] ** 2 / mass[full]).sum()
        ks_grid = np.linspace(0, 1, 20_001)
        acc = 1 / k + (1 - 1 / k) * float(self._moment(g, 0, 1))
        conf = 1 / k + (1 - 1 / k) * float(self._moment(1, 0, 1))

        def f(u):
            return 1 / k + (1 - 1 / k) * u**g

        def c(u):
            return 1 / k + (1 - 1 / k) * u

        def rest(u):  # each of the K − 1 other probabilities
            return (1 - c(u)) / (k - 1)

        def nll(u):
            return -f(u) * math.log(c(u)) - (1 - f(u)) * math.log(max(rest(u), 1e-300))

        def brier(u):
            right = (k - 1) * rest(u) ** 2 + (1 - c(u)) ** 2
            wrong = c(u) ** 2 + (k - 2) * rest(u) ** 2 + (1 - rest(u)) ** 2
            return f(u) * right + (1 - f(u)) * wrong

        def entropy(u):
            r = rest(u)
            return -c(u) * math.log(c(u)) - (k - 1) * (r * math.log(r) if r > 0 else 0.0)

        def wrong_below(u):  # E[(1 − f) 1{U <= u}]
            return (1 - 1 / k) * float(self._moment(0, 0, u) - self._moment(g, 0, u))

        def wrong_above(u):
            return (1 - acc) - wrong_below(u)

        auroc = self._quad(lambda u: f(u) * wrong_below(u)) / (acc * (1 - acc))
        survival = stats.beta(self.a, self.b).sf
        # AURC = ∫ risk(coverage) d coverage, coverage = P(U > u): ∫ p(u) R(u) / S(u) du
        aurc = self._quad(lambda u: wrong_above(u) / max(survival(u), 1e-300))
        return {
            "accuracy": acc,
            "ece": float(np.abs(d).sum()),
            "aece": float(np.abs(d_mass).sum()),
            "mce": float((np.abs(d[full]) / mass[full]).max()),
            "ace": float((np.abs(d[full]) / mass[full]).mean()),
            "classwise_ece": float(classwise),
            "nll": self._quad(nll),
            "brier": self._quad(brier),
            "entropy": self._quad(entropy),
            "refinement_auroc": auroc,
            "ks_error": float(np.abs(self._gap_mass(0.0, ks_grid)).max()),
            "smooth_ece": self.continuous_ece(),
            "rms_ce": float(math.sqrt(rms2)),
            "debiased_rms_ce": float(math.sqrt(rms2)),
            "aurc": aurc,
            # AUGRC = ∫ P(wrong, accepted) d coverage = ∫ p(u) P(wrong, U > u) du
            "augrc": self._quad(wrong_above),
            "mean_confidence": conf,
            "gap": conf - acc,
            "overconfident": float(np.clip(-d, 0, None).sum()),
            "underconfident": float(np.clip(d, 0, None).sum()),
            "debiased_ece": float(np.abs(d).sum()),  # estimators of the same quantities
            "debiased_classwise_ece": float(classwise),
        }
