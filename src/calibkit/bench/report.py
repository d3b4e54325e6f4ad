"""Reports from the results store alone: ``report.md`` and one standalone ``report.html``
(figures inlined), in the shapes of the papers' tables.

Tables (mean ± std over seeds, best in bold, per (dataset, model) column):

- test ECE of every training method, uncalibrated (the headline);
- ECE before and after temperature scaling with the fitted temperature (BSCE-GRA Table 1),
  with a two-sample t-test against CE at 0.05 (Rethinking Table 2): † marks a method whose
  seeds differ significantly from CE's;
- calibratability: ECE after TS and after histogram binning (Rethinking §4);
- Brier, ECE and refinement AUROC side by side (Dark Side Tables 1–3);
- OOD AUROC and FPR95 for every out-of-distribution split (MaC-Cal Table 2);
- every post-hoc method, Neural Clamping included (Neural Clamping Table 2);
- ECE against the calibration-set size (Rethinking Fig. 3).

Figures: reliability diagrams, confidence of correct against incorrect predictions (Dark
Side Fig. 2), ECE and optimal ECE over epochs (Rethinking Fig. 4), max-logit histograms by
learned epoch (Rethinking Fig. 5), gradient norm against Brier score (BSCE-GRA Fig. 4) and
MaC-Cal's q_t (Fig. 8).
"""

from __future__ import annotations

import base64
import html
import io
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from scipy import stats

from ..io import write_text
from .store import ALL, Store

LOWER_IS_BETTER = {"ece", "aece", "mce", "classwise_ece", "nll", "brier", "ood_fpr95"}


def _fmt(values: list[float], scale: float = 100.0) -> str:
    if not values:
        return "–"
    mean = statistics.mean(values) * scale
    if len(values) == 1:
        return f"{mean:.2f}"
    return f"{mean:.2f} ± {statistics.stdev(values) * scale:.2f}"


class Results:
    """The store's numbers, indexed for tables: values[(run_key, split, cal, size, metric)]."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.runs = {r["key"]: r for r in store.runs()}
        self.values = {tuple(row[:5]): row[5] for row in store.metrics()}
        self.columns = sorted({(r["dataset"], r["model"]) for r in self.runs.values()})
        order: dict[str, int] = {}
        for r in self.runs.values():
            order.setdefault(r["method"], len(order))
        self.methods = sorted(order, key=order.get)

    def seeds(self, method: str, column: tuple[str, str], split: str, cal: str, size: int,
              metric: str) -> list[float]:  # fmt: skip
        return [
            self.values[(k, split, cal, size, metric)]
            for k, r in self.runs.items()
            if r["method"] == method and (r["dataset"], r["model"]) == column
            and (k, split, cal, size, metric) in self.values
        ]  # fmt: skip

    def calibrators(self) -> list[str]:
        return sorted({k[2] for k in self.values}, key=lambda c: (c != "uncalibrated", c))

    def sizes(self) -> list[int]:
        return sorted({k[3] for k in self.values})

    def ood_splits(self) -> list[str]:
        return sorted({k[4].split(":", 1)[1] for k in self.values if k[4].startswith("ood_auroc:")})


def _table(
    res: Results, rows: list[str], cell, metric: str, t_test: bool = False
) -> list[list[str]]:
    """Rows × columns of ``cell(row, column) -> list of seed values``, best bold."""
    header = ["method", *[f"{d} / {m}" for d, m in res.columns]]
    body = [[r] for r in rows]
    for column in res.columns:
        vals = {r: cell(r, column) for r in rows}
        means = {r: statistics.mean(v) for r, v in vals.items() if v}
        best = None
        if means:
            pick = min if metric in LOWER_IS_BETTER else max
            best = pick(means, key=means.get)
        base = vals.get(rows[0], []) if t_test else []
        for i, r in enumerate(rows):
            text = _fmt(vals[r], 1.0 if metric == "temperature" else 100.0)
            if t_test and r != rows[0] and len(vals[r]) > 1 and len(base) > 1:
                p = stats.ttest_ind(vals[r], base).pvalue
                if p == p and p < 0.05:
                    text += " †"
            body[i].append(f"**{text}**" if r == best and vals[r] else text)
    return [header, *body]


def build_tables(res: Results) -> dict[str, list[list[str]]]:
    t: dict[str, list[list[str]]] = {}
    methods = res.methods

    def seeds(split, cal, metric, size=ALL):
        return lambda m, c: res.seeds(m, c, split, cal, size, metric)

    t["Test ECE (%), uncalibrated"] = _table(
        res, methods, seeds("test", "uncalibrated", "ece"), "ece"
    )
    t["Test accuracy (%)"] = _table(
        res, methods, seeds("test", "uncalibrated", "accuracy"), "accuracy"
    )
    cals = res.calibrators()
    if "ts" in cals:
        t["ECE (%) after temperature scaling († differs from CE, t-test at 0.05)"] = _table(
            res, methods, seeds("test", "ts", "ece"), "ece", t_test=True
        )
        t["Temperature fitted by TS"] = _table(
            res, methods, seeds("test", "ts", "temperature"), "temperature"
        )
    if "hist-binning" in cals:
        t["ECE (%) after histogram binning (calibratability)"] = _table(
            res, methods, seeds("test", "hist-binning", "ece"), "ece", t_test=True
        )
    for metric, label in (
        ("brier", "Brier score (×100)"),
        ("refinement_auroc", "Refinement AUROC (%)"),
    ):
        t[label] = _table(res, methods, seeds("test", "uncalibrated", metric), metric)
    for ood in res.ood_splits():
        t[f"OOD AUROC (%) against {ood}"] = _table(
            res, methods, seeds("test", "uncalibrated", f"ood_auroc:{ood}"), "ood_auroc"
        )
        t[f"OOD FPR95 (%) against {ood}"] = _table(
            res, methods, seeds("test", "uncalibrated", f"ood_fpr95:{ood}"), "ood_fpr95"
        )
    base = methods[0]
    post = [c for c in cals]
    t[f"Post-hoc methods on {base}: test ECE (%)"] = _table(
        res, post, lambda c, col: res.seeds(base, col, "test", c, ALL, "ece"), "ece"
    )
    if len(res.sizes()) > 1 and "ts" in cals:
        sizes = res.sizes()
        label = {s: "all" if s == ALL else str(s) for s in sizes}
        size_of = {v: k for k, v in label.items()}
        t[f"ECE (%) after TS against calibration-set size ({base})"] = _table(
            res,
            [label[s] for s in sizes],
            lambda s, col: res.seeds(base, col, "test", "ts", size_of[s], "ece"),
            "ece",
        )
    return t


def _markdown(table: list[list[str]]) -> str:
    head, *body = table
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def _html_table(table: list[list[str]]) -> str:
    head, *body = table

    def cell(text: str, tag: str) -> str:
        bold = text.startswith("**") and text.endswith("**")
        inner = html.escape(text.strip("*"))
        return f"<{tag}>{'<b>' + inner + '</b>' if bold else inner}</{tag}>"

    rows = ["<tr>" + "".join(cell(h, "th") for h in head) + "</tr>"]
    rows += ["<tr>" + "".join(cell(c, "td") for c in row) + "</tr>" for row in body]
    return "<table>" + "".join(rows) + "</table>"


def build_figures(res: Results) -> dict[str, bytes]:
    """PNG bytes of every figure the store has data for."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures: dict[str, bytes] = {}

    def save(name: str, fig) -> None:
        buf = io.BytesIO()
        fig.tight_layout()
        fig.savefig(buf, format="png", dpi=100)
        plt.close(fig)
        figures[name] = buf.getvalue()

    def single(name: str, draw, **labels) -> None:
        """One-panel figure: ``draw(ax)``, then labels and a legend."""
        fig, ax = plt.subplots(figsize=(5, 3.2))
        draw(ax)
        ax.set(**labels)
        ax.legend(fontsize=7)
        save(name, fig)

    first = _first_runs(res)
    bins = {(k, c): d for k, _, c, d in res.store.curves("bins")}
    for column, key in first.items():
        fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
        for ax, cal in zip(axes, ("uncalibrated", "ts"), strict=True):
            d = bins.get((key, cal))
            if d is None:
                ax.set_visible(False)
                continue
            mids = [(a + b) / 2 for a, b in zip(d["edges"], d["edges"][1:], strict=False)]
            width = 1 / max(1, len(mids))
            ax.bar(mids, d["accuracy"][: len(mids)], width=width, edgecolor="k", label="accuracy")
            ax.plot([0, 1], [0, 1], "k--", lw=1)
            ax.set(title=f"{cal}", xlabel="confidence", ylabel="accuracy", xlim=(0, 1), ylim=(0, 1))
        fig.suptitle(f"Reliability, {res.runs[key]['method']} on {column[0]} / {column[1]}")
        save(f"reliability {column[0]} {column[1]}", fig)
    densities = {k: d for k, _, _, d in res.store.curves("confidence")}
    xs = [(i + 0.5) / 40 for i in range(40)]
    for column, key in first.items():
        method = res.runs[key]["method"]
        if key in densities:
            d = densities[key]
            single(
                f"confidence {column[0]} {column[1]}",
                lambda ax, d=d: [
                    ax.plot(xs, [c / (sum(d[lab]) or 1) * 40 for c in d[lab]], label=lab)
                    for lab in ("correct", "incorrect")
                ],
                xlabel="confidence", ylabel="density", title=f"Confidence, {method} ({column[0]})",
            )  # fmt: skip
        hist = res.store.history(key)
        if hist:
            epochs = [h["epoch"] for h in hist]
            single(
                f"epochs {column[0]} {column[1]}",
                lambda ax, h=hist, e=epochs: [
                    ax.plot(e, [r[k] for r in h], label=lab)
                    for k, lab in (("val_ece", "ECE"), ("val_optimal_ece", "optimal ECE"))
                ],
                xlabel="epoch", ylabel="validation",
                title=f"ECE over epochs, {method} ({column[0]})",
            )  # fmt: skip
    learned = {k: d for k, _, _, d in res.store.curves("learned_epoch")}
    for column, key in first.items():
        if key in learned:
            groups: dict[int, list[float]] = defaultdict(list)
            for e, v in zip(learned[key]["learned"], learned[key]["max_logit"], strict=True):
                groups[e].append(v)
            shown = sorted(groups)[:: max(1, len(groups) // 5)]
            single(
                f"learned {column[0]} {column[1]}",
                lambda ax, g=groups, sh=shown: [
                    ax.hist(g[e], bins=30, alpha=0.5, label=f"learned at {e}") for e in sh
                ],
                xlabel="max logit", ylabel="training samples",
                title=f"Max logit by learned epoch ({column[0]})",
            )  # fmt: skip
    grads = defaultdict(list)
    for k, _, _, d in res.store.curves("grad_norm"):
        grads[(res.runs[k]["dataset"], res.runs[k]["model"], res.runs[k]["method"])].append(d)
    for column in res.columns:
        chosen = [m for m in res.methods if (column[0], column[1], m) in grads][:3]
        if chosen:
            data = [(m, grads[(column[0], column[1], m)][0]) for m in chosen]
            single(
                f"gradnorm {column[0]} {column[1]}",
                lambda ax, data=data: [
                    ax.scatter(d["brier"], d["grad_norm"], s=4, alpha=0.5, label=m) for m, d in data
                ],
                xlabel="Brier score", ylabel="last-layer gradient norm",
                title=f"Gradient norm against Brier ({column[0]})",
            )  # fmt: skip
    for column in res.columns:
        curves = []
        for k, r in res.runs.items():
            if (r["dataset"], r["model"]) == column and r["spec"].get("stage2"):
                hist = res.store.history(k, stage=2)
                if hist and "eta" in hist[0]:
                    curves.append((f"{r['method']} s{r['seed']}", [h["q"] for h in hist]))
        if curves:
            single(
                f"maccal q {column[0]} {column[1]}",
                lambda ax, c=curves: [
                    ax.plot(range(1, len(q) + 1), q, lw=1, label=lab) for lab, q in c
                ],
                xlabel="stage-2 epoch", ylabel="q_t", title=f"MaC-Cal mask rate ({column[0]})",
            )  # fmt: skip
    sizes = res.sizes()
    if len(sizes) > 1 and "ts" in res.calibrators():
        names = ["all" if s == ALL else str(s) for s in sizes]
        for column in res.columns:
            lines = []
            for m in res.methods[:6]:
                means = [res.seeds(m, column, "test", "ts", s, "ece") for s in sizes]
                if all(means):
                    lines.append((m, [100 * statistics.mean(v) for v in means]))
            if lines:
                single(
                    f"calibration size {column[0]} {column[1]}",
                    lambda ax, ls=lines: [ax.plot(names, y, marker="o", label=m) for m, y in ls],
                    xlabel="calibration-set size", ylabel="test ECE after TS (%)",
                    title=f"ECE against calibration-set size ({column[0]})",
                )  # fmt: skip
    return figures


def _first_runs(res: Results) -> dict[tuple[str, str], str]:
    """Per column, a run of the first method (the baseline), lowest seed."""
    out: dict[tuple[str, str], str] = {}
    for k, r in sorted(res.runs.items(), key=lambda kv: kv[1]["seed"]):
        col = (r["dataset"], r["model"])
        if r["method"] == res.methods[0] and col not in out:
            out[col] = k
    return out


CSS = """body{font-family:sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse;
margin:1em 0}td,th{border:1px solid #999;padding:.25em .6em;text-align:right}
td:first-child,th:first-child{text-align:left}img{max-width:48%;margin:.3em}"""


def write_report(db: str | Path, out: str | Path) -> dict[str, Any]:
    """Write ``report.md``, ``report.html`` and ``figures/*.png`` from the store ``db``."""
    store = Store(db, create=False)
    res = Results(store)
    if not res.runs:
        raise ValueError(f"{db}: the store holds no finished run yet; nothing to report")
    out = Path(out)
    try:
        (out / "figures").mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"cannot write the report to {out}: {err.strerror}") from None
    tables = build_tables(res)
    figures = build_figures(res)
    n = len(res.runs)
    failed = store.runs("failed")
    intro = (f"{n} finished runs: {len(res.methods)} training methods × {len(res.columns)} "
             f"(dataset, model) pairs × seeds. Values: mean ± std over seeds, in % unless noted; "
             "best per column in bold.")  # fmt: skip
    if failed:
        intro += f" {len(failed)} runs failed: " + "; ".join(
            f"{r['method']} ({r['error']})" for r in failed[:5]
        )
    md = ["# Calibration benchmark", "", intro, ""]
    page = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Calibration benchmark</title>"
        f"<style>{CSS}</style></head><body><h1>Calibration benchmark</h1>"
        f"<p>{html.escape(intro)}</p>"
    ]
    for title, table in tables.items():
        md += [f"## {title}", "", _markdown(table), ""]
        page.append(f"<h2>{html.escape(title)}</h2>{_html_table(table)}")
    md.append("## Figures\n")
    page.append("<h2>Figures</h2>")
    for name, png in figures.items():
        file = re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-") + ".png"
        (out / "figures" / file).write_bytes(png)
        md.append(f"![{name}](figures/{file})")
        b64 = base64.b64encode(png).decode()
        page.append(
            f"<figure><img alt='{html.escape(name)}' src='data:image/png;base64,{b64}'></figure>"
        )
    page.append("</body></html>")
    write_text(out / "report.md", "\n".join(md) + "\n")
    write_text(out / "report.html", "\n".join(page))
    return {
        "tables": len(tables),
        "figures": len(figures),
        "runs": n,
        "headline": tables["Test ECE (%), uncalibrated"],
    }
