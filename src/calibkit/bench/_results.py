"""The results store indexed for tables and verdicts (:class:`Results`), the test that
compares two methods over seeds (:func:`compare`), with the names of the stored specs as
the store keeps them (:meth:`Results.short`): what the report, the verdicts, the study
tables and the tables of given networks share."""

from __future__ import annotations

import json
import warnings
from typing import Any

from scipy import stats

from .. import posthoc
from ._store import ALL, Store

#: The post-hoc reference the studies measure against (the calibration-size study, the
#: reliability diagrams, the premise "CE is over-confident"): temperature scaling. The
#: bench's presentation names it; the calibrators themselves carry no report knowledge.
REFERENCE = "ts"


def compare(a: dict[int, float], b: dict[int, float]) -> tuple[float, str] | None:
    """p-value of ``a`` against ``b`` (values by seed) and the test's name: paired over the
    seeds both have when they have the same seeds (at least 2), else Welch's two-sample
    t-test; None when either has fewer than 2 values or the test is undefined."""
    if len(a) < 2 or len(b) < 2:
        return None
    with warnings.catch_warnings():  # near-constant differences: scipy warns, p stays right
        warnings.simplefilter("ignore", RuntimeWarning)
        if set(a) == set(b):
            seeds = sorted(a)
            x, y = [a[s] for s in seeds], [b[s] for s in seeds]
            if all(u == v for u, v in zip(x, y, strict=True)):
                return None  # identical runs (a shared stage 1): nothing to test
            p, name = stats.ttest_rel(x, y).pvalue, "paired t-test"
        else:
            p = stats.ttest_ind(list(a.values()), list(b.values()), equal_var=False).pvalue
            name = "Welch t-test"
    return (float(p), name) if p == p else None


def spelled(name: str) -> tuple[str, dict[str, Any]]:
    """A method's name and the settings ``name`` spells, as the store keeps them (JSON
    values): ``("maccal", {"adaptive": "fixed", "q0": 1.0})`` for a control arm's
    ``"maccal:adaptive=fixed,q0=1.0"``; no settings for a plain name."""
    base, _, given = name.partition(":")
    if not given:
        return base, {}
    return base, json.loads(json.dumps(posthoc.REGISTRY.check(name).kwargs))


class Results:
    """The store's numbers, indexed for tables: values[(run_key, split, cal, size, metric)].

    ``methods`` follow the sweep's spec order (recorded in the store), and ``baseline`` is
    the spec's baseline; a store without that record keeps the order runs were written in
    and takes "CE" as the baseline if present, else the first method."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.runs = {r["key"]: r for r in store.runs()}
        #: every stored spec text's (name, settings): the store's, not parsed again
        self.specs = store.specs()
        self.values = {tuple(row[:5]): row[5] for row in store.metrics()}
        self.columns = sorted({(r["dataset"], r["model"]) for r in self.runs.values()})
        present: dict[str, int] = {}
        for r in self.runs.values():
            present.setdefault(r["method"], len(present))
        sweep = store.sweep() or {}
        spec_order = [m for m in sweep.get("methods", []) if m in present]
        self.methods = spec_order + [
            m for m in sorted(present, key=present.get) if m not in spec_order
        ]
        baseline = sweep.get("baseline")
        if baseline not in present:
            baseline = "CE" if "CE" in present else self.methods[0] if self.methods else None
        self.baseline = baseline
        # a store written before a method declared a kind its nature still holds such rows
        self.anomalies = [a for a in store.anomalies() if not self._expected(a[1], a[3])]

    def short(self, text: str) -> str:
        """A stored spec's name without its settings, for titles and headers (a text that
        is no stored spec, "uncalibrated" or an OOD split's name, is its own)."""
        return self.specs[text][0] if text in self.specs else text

    def settings(self, text: str) -> dict[str, Any]:
        """A stored spec's settings ({} for a text that is no stored spec)."""
        return self.specs[text][1] if text in self.specs else {}

    def method_class(self, calibrator: str) -> type[posthoc.Method] | None:
        """The registered class of a stored calibrator spec; None for ``"uncalibrated"``
        and for a method this version does not know."""
        name = self.short(calibrator)
        return posthoc.REGISTRY.factory(name) if name in posthoc.REGISTRY else None

    def _expected(self, calibrator: str, kind: str) -> bool:
        """Whether ``kind`` is in the ``expected_anomalies`` of the calibrator of that spec
        (a method this version does not know: keep what was flagged)."""
        cls = self.method_class(calibrator)
        return cls is not None and kind in cls.expected_anomalies

    def by_seed(
        self, method: str, column: tuple[str, str], split: str, cal: str, size: int, metric: str
    ) -> dict[int, float]:
        return {
            r["seed"]: self.values[(k, split, cal, size, metric)]
            for k, r in self.runs.items()
            if r["method"] == method
            and (r["dataset"], r["model"]) == column
            and (k, split, cal, size, metric) in self.values
        }

    def seeds(
        self, method: str, column: tuple[str, str], split: str, cal: str, size: int, metric: str
    ) -> list[float]:
        return list(self.by_seed(method, column, split, cal, size, metric).values())

    def replicates(
        self, method: str, column: tuple[str, str], cal: str, metric: str
    ) -> dict[int, list[float]]:
        """Bootstrap replicates of ``metric`` on the test split by seed (runs that stored
        them: resample seed 0 in every run, so replicate b of two runs is paired)."""
        if not hasattr(self, "_replicates"):
            self._replicates = {(k, c): d for k, _, c, d in self.store.curves("bootstrap")}
        out = {}
        for k, r in self.runs.items():
            data = self._replicates.get((k, cal), {})
            if r["method"] == method and (r["dataset"], r["model"]) == column and metric in data:
                out[r["seed"]] = data[metric]
        return out

    def flagged(self, method: str, column: tuple[str, str], cal: str, size: int = ALL) -> bool:
        """Whether any run of ``method`` in ``column`` has an anomaly for ``cal``."""
        keys = {
            k
            for k, r in self.runs.items()
            if r["method"] == method and (r["dataset"], r["model"]) == column
        }
        return any(a[0] in keys and a[1] == cal and a[2] == size for a in self.anomalies)

    def calibrator(self, name: str) -> str | None:
        """The stored calibrator spec (settings and all) that ``name`` names, if any: of
        those of its name, the one with the fewest settings; ``name`` spelled with settings
        (``neural-clamping:fit_delta=false``, a control arm) takes the one with those among
        its settings."""
        base, want = spelled(name)
        found = [c for c in self.calibrators() if self.short(c) == base]
        found = [c for c in found if want.items() <= self.settings(c).items()]
        return min(found, key=lambda c: (len(self.settings(c)), c), default=None)

    def reference(self) -> str | None:
        """The stored spec of the post-hoc reference (:data:`REFERENCE`), if the store has
        its fits."""
        return self.calibrator(REFERENCE)

    def calibrators(self) -> list[str]:
        return sorted({k[2] for k in self.values}, key=lambda c: (c != "uncalibrated", c))

    def sizes(self) -> list[int]:
        return sorted({k[3] for k in self.values})

    def ood_splits(self) -> list[str]:
        return sorted({k[4].split(":", 1)[1] for k in self.values if k[4].startswith("ood_auroc:")})
