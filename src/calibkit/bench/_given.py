"""Tables of networks trained elsewhere (the ``real`` preset; docs/real.md), from the store:

- **over networks** (networks given by logits files; Kull et al. 2019, Tables 3–4): each
  calibrator's average rank over the networks (1 = best, ties share the mean rank; a
  network's value is its mean over seeds), the Friedman test of whether any calibrator
  differs, and † where a calibrator differs from TS by the Wilcoxon signed-rank test over
  networks (two-sided, p < 0.05, not corrected for the number of calibrators: a flag, not a
  proof); the best calibrator per network; refinement AUROC before and after each calibrator
  (Dark Side);
- **calibrators** (a pretrained checkpoint; Neural Clamping Table 2): every calibrator's ECE,
  classwise ECE, NLL, accuracy, temperature and fit time on the baseline method's runs;
- **splits** (extra evaluation splits, e.g. byte-exact images against their JPEG versions):
  accuracy, ECE and refinement AUROC on every split, before and after TS;
- **methods** (stage-2 variants of one network, e.g. MaC-Cal Table 5): each method's ECE,
  NLL, accuracy and its stage 2's last recorded sparsity q.

Values are means over seeds ± the standard deviation, in % except NLL, T and seconds.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
from scipy import stats

from ..io import load_split
from ..metrics.internal import mean_std, shown, spread
from ._results import REFERENCE, Results
from ._store import ALL

Table = list[list[str]]
RANKED = ("ece", "classwise_ece", "nll", "brier", "accuracy")
Column = tuple[str, str]


def given_by(res: Results, column: Column) -> str | None:
    """How ``column``'s networks were given: "logits" (files), "checkpoint", or None
    (trained by the sweep)."""
    for r in res.runs.values():
        if (r["dataset"], r["model"]) == column:
            spec = r["spec"]
            return (
                "logits" if spec.get("logits") else "checkpoint" if spec.get("checkpoint") else None
            )
    return None


def _natural(name: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def _names(res: Results, columns: list[Column], method: str) -> list[str]:
    """The calibrators stored for ``method`` in any of ``columns``, by name (uncalibrated
    first)."""
    keys = {
        k
        for k, r in res.runs.items()
        if r["method"] == method and (r["dataset"], r["model"]) in columns
    }
    names = {c for k, _, c, _, _ in res.values if k in keys}
    return sorted(names, key=lambda c: (c != "uncalibrated", res.short(c)))


def network_mean(res: Results, column: Column, split: str, cal: str, metric: str) -> float:
    """The baseline method's mean over seeds in ``column`` (NaN where it has none)."""
    v = [x for x in res.seeds(res.baseline, column, split, cal, ALL, metric) if math.isfinite(x)]
    return float(np.mean(v)) if v else math.nan


def ranks_table(res: Results, columns: list[Column]) -> Table:
    """Average ranks over ``columns`` of the calibrators that ran on all of them."""
    cals = [
        c
        for c in _names(res, columns, res.baseline)
        if all(math.isfinite(network_mean(res, n, "test", c, "ece")) for n in columns)
    ]
    table = [["calibrator", *(f"{shown(m).label} rank" for m in RANKED)]]
    ranks, flags, ps = {}, {}, []
    for m in RANKED:
        mat = np.array([[network_mean(res, n, "test", c, m) for c in cals] for n in columns])
        sign = -1 if shown(m).direction > 0 else 1
        ranks[m] = np.vstack([stats.rankdata(sign * row) for row in mat]).mean(0)
        with warnings.catch_warnings():  # identical columns: scipy warns, p is kept
            warnings.simplefilter("ignore", RuntimeWarning)
            ps.append(stats.friedmanchisquare(*mat.T).pvalue if len(cals) > 2 else math.nan)
            ts = next((j for j, c in enumerate(cals) if c == res.reference()), None)
            flags[m] = {
                j
                for j in range(len(cals))
                if ts is not None
                and j != ts
                and not np.allclose(mat[:, j], mat[:, ts])
                and stats.wilcoxon(mat[:, j], mat[:, ts]).pvalue < 0.05
            }
    for j, c in enumerate(cals):
        table.append(
            [res.short(c)] + [f"{ranks[m][j]:.2f}" + ("†" if j in flags[m] else "") for m in RANKED]
        )
    table.append(["Friedman p"] + [f"{p:.1e}" for p in ps])
    return table


def per_network_table(res: Results, columns: list[Column]) -> Table:
    """Per network: accuracy, ECE before and after TS, the best ECE and classwise ECE."""
    table = [
        [
            "network",
            *map(spread, ("accuracy", "ECE uncal.", "ECE TS")),
            "best ECE",
            "best classwise ECE",
        ]
    ]
    ts = res.reference() or REFERENCE
    for n in columns:
        seeds = lambda cal, m, n=n: res.seeds(res.baseline, n, "test", cal, ALL, m)  # noqa: E731
        cals = _names(res, [n], res.baseline)[1:]
        best = {
            m: min(cals, key=lambda c, m=m: _finite(network_mean(res, n, "test", c, m)))
            for m in ("ece", "classwise_ece")
        }
        table.append(
            [
                f"{n[0]}_{n[1]}",
                mean_std(seeds("uncalibrated", "accuracy"), scale=100),
                mean_std(seeds("uncalibrated", "ece"), scale=100),
                mean_std(seeds(ts, "ece"), scale=100),
                *(
                    f"{100 * network_mean(res, n, 'test', best[m], m):.2f} ({res.short(best[m])})"
                    for m in ("ece", "classwise_ece")
                ),
            ]
        )
    return table


def _finite(v: float) -> float:
    return v if math.isfinite(v) else math.inf


def refinement_table(res: Results, columns: list[Column]) -> Table:
    """Dark Side: refinement AUROC (%) before and after each calibrator, over networks."""
    table = [
        [
            "calibrator",
            "networks",
            "AUROC before",
            "AUROC after",
            "Δ (points)",
            "networks with Δ < −0.5",
            "Spearman ρ(ECE before, Δ)",
        ]
    ]
    before = {n: network_mean(res, n, "test", "uncalibrated", "refinement_auroc") for n in columns}
    ece = {n: network_mean(res, n, "test", "uncalibrated", "ece") for n in columns}
    for c in _names(res, columns, res.baseline)[1:]:
        after = {n: network_mean(res, n, "test", c, "refinement_auroc") for n in columns}
        have = [n for n in columns if math.isfinite(after[n]) and math.isfinite(before[n])]
        if not have:
            continue
        delta = np.array([after[n] - before[n] for n in have])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a constant input: ρ is undefined, shown as —
            rho = (
                stats.spearmanr([ece[n] for n in have], delta).statistic
                if len(have) > 2
                else math.nan
            )
        table.append(
            [
                res.short(c),
                str(len(have)),
                f"{100 * np.mean([before[n] for n in have]):.2f}",
                f"{100 * np.mean([after[n] for n in have]):.2f}",
                f"{100 * delta.mean():+.2f}",
                str(int((delta < -0.005).sum())),
                "—" if not math.isfinite(rho) else f"{rho:+.2f}",
            ]
        )
    return table


def calibrator_table(res: Results, column: Column) -> Table:
    """Every calibrator of the baseline method's runs in ``column`` on the test split; for
    an iterative fit with a history (Neural Clamping), its objective in the first and last
    epoch and the last epoch's change (a fit that has flattened changes by well under 1 %)."""
    table = [
        [
            "calibrator",
            *map(spread, ("ECE", "classwise ECE", "NLL", "accuracy", "T", "fit seconds")),
            "fit objective: first → last epoch (last change)",
        ]
    ]
    keys = {
        k
        for k, r in res.runs.items()
        if r["method"] == res.baseline and (r["dataset"], r["model"]) == column
    }
    curves = {}
    for key, _, cal, data in res.store.curves("fit_history"):
        if key in keys:
            curves.setdefault(cal, []).append(data)
    for c in _names(res, [column], res.baseline):
        get = lambda m, c=c: res.seeds(res.baseline, column, "test", c, ALL, m)  # noqa: E731
        table.append(
            [
                c,
                mean_std(get("ece"), scale=100),
                mean_std(get("classwise_ece"), scale=100),
                mean_std(get("nll"), digits=4),
                mean_std(get("accuracy"), scale=100),
                mean_std(get("temperature"), digits=3),
                mean_std(get("fit_seconds"), digits=1),
                "; ".join(_objective(h) for h in curves.get(c, [])),
            ]
        )
    return table


def _objective(history: list[dict]) -> str:
    """'first → last (last epoch's relative change)' of a fit's per-epoch objective."""
    v = [h["objective"] for h in history]
    if len(v) < 2:
        return f"{v[0]:.4f}" if v else ""
    return f"{v[0]:.4f} → {v[-1]:.4f} ({100 * (v[-1] - v[-2]) / abs(v[-2]):+.2f} %)"


def history_table(res: Results, column: Column) -> Table | None:
    """The per-epoch objective and temperature of every iterative fit (Neural Clamping) of
    the baseline's runs in ``column``: the curve that shows whether a fit has flattened."""
    keys = {
        k: r["seed"]
        for k, r in res.runs.items()
        if r["method"] == res.baseline and (r["dataset"], r["model"]) == column
    }
    fits = [
        (f"{res.short(cal)} (seed {keys[k]})", data)
        for k, _, cal, data in res.store.curves("fit_history")
        if k in keys
    ]
    if not fits:
        return None
    head = ["epoch"] + [f"{name}: {what}" for name, _ in fits for what in ("objective", "T")]
    rows = [head]
    for e in range(max(len(h) for _, h in fits)):
        row = [str(e + 1)]
        for _, h in fits:
            row += (
                [f"{h[e]['objective']:.5f}", f"{h[e]['temperature']:.4f}"]
                if e < len(h)
                else ["", ""]
            )
        rows.append(row)
    return rows


def split_names(res: Results, column: Column) -> list[str]:
    """The evaluation splits stored for ``column`` (test first)."""
    keys = {k for k, r in res.runs.items() if (r["dataset"], r["model"]) == column}
    names = {s for k, s, *_ in res.values if k in keys}
    return sorted(names, key=lambda s: (s != "test", s))


def splits_table(res: Results, columns: list[Column]) -> Table:
    """Per network and split: accuracy, ECE and refinement AUROC, and ECE after TS (%)."""
    ts = res.reference() or REFERENCE
    table = [
        ["network", "split", *map(spread, ("accuracy", "ECE", "refinement AUROC", "ECE after TS"))]
    ]
    for n in columns:
        for split in split_names(res, n):
            get = lambda cal, m, s=split, n=n: res.seeds(res.baseline, n, s, cal, ALL, m)  # noqa: E731
            table.append(
                [
                    n[1],
                    split,
                    mean_std(get("uncalibrated", "accuracy"), scale=100),
                    mean_std(get("uncalibrated", "ece"), scale=100),
                    mean_std(get("uncalibrated", "refinement_auroc"), scale=100),
                    mean_std(get(ts, "ece"), scale=100),
                ]
            )
    return table


def methods_table(res: Results, column: Column) -> Table:
    """Each method of ``column`` (uncalibrated, test split) and its stage 2's last q."""
    table = [["method", "seeds", *map(spread, ("ECE", "NLL", "accuracy", "final q"))]]
    for method in res.methods:
        get = lambda m, method=method: res.seeds(method, column, "test", "uncalibrated", ALL, m)  # noqa: E731
        if not get("ece"):
            continue
        q = [
            h[-1]["q"]
            for k, r in res.runs.items()
            if r["method"] == method and (r["dataset"], r["model"]) == column
            for h in [res.store.history(k, stage=2)]
            if h and "q" in h[-1]
        ]
        table.append(
            [
                method,
                str(len(get("ece"))),
                mean_std(get("ece"), scale=100),
                mean_std(get("nll"), digits=4),
                mean_std(get("accuracy"), scale=100),
                mean_std(q, digits=3) if q else "",
            ]
        )
    return table


def given_sections(res: Results) -> list[tuple[str, Table]]:
    """(title, table) of every table above that the store's given networks allow."""
    files = sorted(
        (c for c in res.columns if given_by(res, c) == "logits"),
        key=lambda c: _natural(f"{c[0]}_{c[1]}"),
    )
    nets = sorted(
        (c for c in res.columns if given_by(res, c) == "checkpoint"),
        key=lambda c: (c[0], _natural(c[1])),
    )
    out: list[tuple[str, Table]] = []
    if len(files) >= 2:
        groups = {"every network": files}
        provenance = res.store.provenance()
        few = [c for c in files if n_classes(res, c, provenance) <= 10]
        if 2 <= len(few) < len(files):
            groups["the networks with 10 classes or fewer"] = few
        for label, cols in groups.items():
            out.append(
                (
                    f"Average ranks over {label} ({len(cols)}; Kull et al. 2019 Tables 3–4)",
                    ranks_table(res, cols),
                )
            )
        out.append(
            ("Per network: test ECE (%) over the seeds' splits", per_network_table(res, files))
        )
        out.append(
            (
                "Refinement (Dark Side): test AUROC of correct against wrong (%), mean over "
                "the networks each calibrator ran on",
                refinement_table(res, files),
            )
        )
    for c in nets:
        out.append(
            (
                f"Calibrators on {c[1]} ({res.short(c[0])}; Neural Clamping Table 2)",
                calibrator_table(res, c),
            )
        )
    for c in nets:
        curve = history_table(res, c)
        if curve is not None:
            out.append((f"Fit objective by epoch on {c[1]} ({res.short(c[0])})", curve))
    shifted = [c for c in nets if len(split_names(res, c)) > 1]
    if shifted:
        out.append(
            (
                "Evaluation splits (a natural shift: byte-exact images against their JPEG "
                "versions)",
                splits_table(res, shifted),
            )
        )
    for c in nets:
        if sum(1 for m in res.methods if res.seeds(m, c, "test", "uncalibrated", ALL, "ece")) > 1:
            out.append(
                (
                    f"Methods on {c[1]} ({res.short(c[0])}; MaC-Cal Table 5 and Fig. 7)",
                    methods_table(res, c),
                )
            )
    return out


def n_classes(res: Results, column: Column, provenance: dict[str, dict]) -> int:
    """The number of classes of a logits-file column, as its runs recorded it (a store
    written before they did: read from the file)."""
    for key, r in res.runs.items():
        if (r["dataset"], r["model"]) == column and r["spec"].get("logits"):
            k = provenance.get(key, {}).get("n_classes")
            return int(k) if k else load_split(r["spec"]["logits"], "test")[0].shape[1]
    return 0
