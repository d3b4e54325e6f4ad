"""Reports from the results store alone: ``report.md`` and one standalone ``report.html``
(figures inlined), in the shapes of the papers' tables.

Methods keep the spec's order; the spec names the baseline (default: its first method).
Every comparison is against the baseline: a paired t-test over seeds where both methods ran
the same seeds (Welch's t-test otherwise), at 0.05; † marks a difference, and each caption
names the test. Bold marks the best value of a column only where the metric has a direction
(lower or higher is better); a fitted temperature has none.

A table of contents, then the verdicts (one line per headline claim of the papers that the
sweep can test, see :mod:`calibkit.bench._verdicts`), then the tables (mean ± std over
seeds, per (dataset, model) column; ⚠ marks a cell whose runs the checks of
:mod:`calibkit.posthoc._anomalies` flagged):

- test ECE of every training method, uncalibrated (the headline);
- ECE before and after temperature scaling with the fitted temperature (BSCE-GRA Table 1),
  with the t-test against the baseline (Rethinking Table 2);
- calibratability: ECE after TS and after histogram binning (Rethinking §4);
- Brier, ECE and refinement AUROC side by side (Dark Side Tables 1–3);
- OOD AUROC and FPR95 for every out-of-distribution split (MaC-Cal Table 2);
- every post-hoc method on the baseline, Neural Clamping included (Neural Clamping Table 2),
  ECE and accuracy;
- ECE against the calibration-set size (Rethinking Fig. 3);

then the anomalies, grouped by calibrator and kind (every flagged fit behind a
``<details>``), and the figures.

Figures: reliability diagrams of the baseline (:func:`calibkit.plots.draw_reliability`),
confidence of correct against incorrect predictions (Dark
Side Fig. 2), ECE and optimal ECE over epochs (Rethinking Fig. 4), max-logit histograms by
learned epoch (Rethinking Fig. 5), gradient norm against Brier score for CE, focal loss and
BSCE-GRA (BSCE-GRA Fig. 4) and MaC-Cal's q_t (Fig. 8).
"""

from __future__ import annotations

import base64
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from .._escape import Strong, html_text, md_text
from .._outputs import inside, write_files
from ..metrics.internal import direction, in_percent, mean_std, shown, spread
from ._figures import build_figures
from ._given import given_sections
from ._results import Results, compare
from ._store import ALL, Store
from ._verdicts import TESTS_TEXT, premises_text, verdict_table

#: The tables a method gets of its own in a report, by method name: (metric, title). The
#: reference's come first.
REPORT_TABLES = {
    "ts": (
        ("ece", "ECE (%) after temperature scaling"),
        ("temperature", "Temperature fitted by TS (no direction: not bold)"),
    ),
    "hist-binning": (("ece", "ECE (%) after histogram binning (calibratability)"),),
}

ALPHA = 0.05


def _table(
    res: Results, rows: list[str], cell, metric: str, base: str | None = None, flag=None
) -> list[list[str]]:
    """Rows × columns of ``cell(row, column) -> {seed: value}``. With ``base``, every other
    row is tested against that row (:func:`compare`) and marked † at p < ALPHA; ``flag(row,
    column)`` marks a cell ⚠. Bold: the best mean where the metric has a direction."""
    header = ["method", *[spread(f"{res.short(d)} / {m}") for d, m in res.columns]]
    body = [[r] for r in rows]
    sign = direction(metric) or None  # bold only where a metric has one
    scale = 100.0 if in_percent(metric) else 1.0
    for column in res.columns:
        vals = {r: cell(r, column) for r in rows}
        means = {r: statistics.mean(v.values()) for r, v in vals.items() if v}
        best = None
        if means and sign is not None:
            best = (min if sign < 0 else max)(means, key=means.get)
        for i, r in enumerate(rows):
            text = mean_std(vals[r].values(), scale=scale)
            if base is not None and r != base and vals[r]:
                test = compare(vals[r], vals.get(base, {}))
                if test is not None and test[0] < ALPHA:
                    text += " †"
            if flag is not None and vals[r] and flag(r, column):
                text += " ⚠"
            body[i].append(Strong(f"**{text}**") if r == best and vals[r] else text)
    return [header, *body]


TEST = "paired t-test over seeds (Welch's where seeds differ) at 0.05"


def build_tables(res: Results) -> dict[str, list[list[str]]]:
    t: dict[str, list[list[str]]] = {}
    methods, base = res.methods, res.baseline

    def seeds(split, cal, metric, size=ALL):
        return lambda m, c: res.by_seed(m, c, split, cal, size, metric)

    def flag(cal, size=ALL):
        return lambda m, c: res.flagged(m, c, cal, size)

    t["Test ECE (%), uncalibrated"] = _table(
        res, methods, seeds("test", "uncalibrated", "ece"), "ece"
    )
    t[f"Test accuracy (%) († differs from {base}, {TEST})"] = _table(
        res, methods, seeds("test", "uncalibrated", "accuracy"), "accuracy", base
    )
    cals, ref = res.calibrators(), res.reference()
    # the tables a method asks for (TS: its ECE and temperature), the reference's first; a
    # spec with settings is named, so that two of one method keep a table each
    for cal in sorted(cals, key=lambda c: c != ref):
        named = f" ({cal})" if cal != res.short(cal) else ""
        for metric, title in REPORT_TABLES.get(res.short(cal), ()):
            against = base if direction(metric) else None
            t[title + named + (f" († differs from {base}, {TEST})" if against else "")] = _table(
                res, methods, seeds("test", cal, metric), metric, against, flag(cal)
            )
    for metric in ("brier", "refinement_auroc"):
        t[f"{shown(metric).heading} († differs from {base})"] = _table(
            res, methods, seeds("test", "uncalibrated", metric), metric, base
        )
    for ood in res.ood_splits():
        t[f"{shown('ood_auroc').heading} against {res.short(ood)}"] = _table(
            res, methods, seeds("test", "uncalibrated", f"ood_auroc:{ood}"), "ood_auroc", base
        )
        t[f"{shown('ood_fpr95').heading} against {res.short(ood)}"] = _table(
            res, methods, seeds("test", "uncalibrated", f"ood_fpr95:{ood}"), "ood_fpr95", base
        )
    if base is not None:
        for metric, label in (("ece", "test ECE (%)"), ("accuracy", "test accuracy (%)")):
            t[f"Post-hoc methods on {base}: {label} († differs from uncalibrated)"] = _table(
                res,
                cals,
                lambda c, col, m=metric: res.by_seed(base, col, "test", c, ALL, m),
                metric,
                "uncalibrated",
                lambda c, col: res.flagged(base, col, c),
            )
    if len(res.sizes()) > 1 and ref is not None and base is not None:
        sizes = res.sizes()
        label = {s: "all" if s == ALL else str(s) for s in sizes}
        size_of = {v: k for k, v in label.items()}
        t[f"ECE (%) after {res.short(ref)} against calibration-set size ({base})"] = _table(
            res,
            [label[s] for s in sizes],
            lambda s, col: res.by_seed(base, col, "test", ref, size_of[s], "ece"),
            "ece",
        )
    return t


def anomaly_table(res: Results) -> list[list[str]]:
    """One row per anomaly: method, column, seed, calibrator, size, kind, detail."""
    rows = [["method", "dataset / model", "seed", "calibrator", "size", "anomaly", "detail"]]
    for key, cal, size, kind, detail in sorted(res.anomalies, key=lambda a: (a[3], a[1], a[0])):
        r = res.runs.get(key)
        if r is None:
            continue
        rows.append(
            [
                r["method"],
                f"{res.short(r['dataset'])} / {r['model']}",
                str(r["seed"]),
                cal,
                "all" if size == ALL else str(size),
                kind,
                detail,
            ]
        )
    return rows


def anomaly_summary(res: Results) -> list[list[str]]:
    """One row per (calibrator, kind of anomaly), most flagged first: how many of the
    calibrator's fits (run × calibration size) were flagged, on which training methods and
    sizes, and the first one's detail."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for key, cal, size, kind, detail in res.anomalies:
        r = res.runs.get(key)
        if r is None:
            continue
        g = groups.setdefault((cal, kind), {"n": 0, "methods": {}, "sizes": {}, "detail": detail})
        g["n"] += 1
        g["methods"][r["method"]] = None
        g["sizes"]["all" if size == ALL else str(size)] = None
    fits = defaultdict(int)
    for key, split, cal, _, metric in res.values:
        if split == "test" and metric == "ece" and key in res.runs:
            fits[cal] += 1
    rows = [["calibrator", "anomaly", "fits flagged", "training methods", "sizes", "first"]]
    for (cal, kind), g in sorted(groups.items(), key=lambda kv: -kv[1]["n"]):
        order = {m: i for i, m in enumerate(res.methods)}
        methods = sorted(g["methods"], key=lambda m: order.get(m, len(order)))  # spec order
        shown = ", ".join(methods[:3]) + (
            f" and {len(methods) - 3} more" if len(methods) > 3 else ""
        )
        rows.append(
            [
                cal,
                kind,
                f"{g['n']} of {fits[cal] or g['n']}",
                shown,
                ", ".join(g["sizes"]),
                g["detail"],
            ]
        )
    return rows


def anchor(title: str) -> str:
    """The fragment a heading gets (GitHub's rule: lower case, punctuation dropped, spaces
    to hyphens), used by the table of contents of both report.md and report.html."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def _bold(text: str) -> tuple[str, bool]:
    """A cell's text and whether it is bold: only a :class:`~calibkit._escape.Strong` cell
    (a best value, a verdict that holds) is; any other, a name that reads ``**x**``
    included, is text as written."""
    return (text[2:-2], True) if isinstance(text, Strong) else (text, False)


def markdown_table(table: list[list[str]]) -> str:
    """``table`` (header row first) as a Markdown table; every cell escaped
    (:func:`calibkit._escape.md_text`), so a name can add no cell, row or markup."""

    def cell(text: str) -> str:
        inner, bold = _bold(text)
        return f"**{md_text(inner)}**" if bold else md_text(inner)

    head, *body = table
    lines = ["| " + " | ".join(map(cell, head)) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in body]
    return "\n".join(lines)


def html_table(table: list[list[str]]) -> str:
    """``table`` (header row first) as an HTML table, every cell escaped."""
    head, *body = table

    def cell(text: str, tag: str) -> str:
        inner, bold = _bold(text)
        number = NUMBER.match(inner) is not None  # numbers right, words left
        inner = html_text(inner)
        return f"<{tag}{' class=n' * number}>{'<b>' + inner + '</b>' if bold else inner}</{tag}>"

    rows = ["<tr>" + "".join(cell(h, "th") for h in head) + "</tr>"]
    rows += ["<tr>" + "".join(cell(c, "td") for c in row) + "</tr>" for row in body]
    return "<table>" + "".join(rows) + "</table>"


#: a cell that starts with a number (signed, or a ± spread) is right-aligned in HTML
NUMBER = re.compile(r"^[-−+±]?\s?\d")
CSS = """body{font-family:sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse;
margin:1em 0}td,th{border:1px solid #999;padding:.25em .6em;text-align:left;vertical-align:top}
.n{text-align:right}figure{margin:1em 0}
img{width:100%;max-width:56em}summary{cursor:pointer;color:#1f5fa8}nav ol{columns:2}"""


def write_report(db: str | Path, out: str | Path) -> dict[str, Any]:
    """Write ``report.md``, ``report.html`` and ``figures/*.png`` from the store ``db``,
    which is opened read-only (a report never writes to its input).

    Examples
    --------
    >>> from calibkit.bench import load_spec, run_bench, write_report
    >>> tmp = getfixture("tmp_path")
    >>> _ = (tmp / "sweep.yaml").write_text('''
    ... name: tiny
    ... seeds: [1]
    ... train: {epochs: 2, batch_size: 64, lr: 0.05, schedule: constant}
    ... datasets: [{data: "digits:train_size=200", models: [mlp]}]
    ... methods: [{name: CE, loss: ce}, {name: Focal, loss: "focal:gamma=3"}]
    ... posthoc: [ts]
    ... ''')
    >>> spec = load_spec(tmp / "sweep.yaml")
    >>> _ = run_bench(spec, tmp / "out")
    >>> info = write_report(tmp / "out" / "results.sqlite", tmp / "report")
    >>> info["runs"], sorted(p.name for p in (tmp / "report").iterdir())
    (2, ['figures', 'report.html', 'report.md'])
    """
    store = Store(db, create=False)
    res = Results(store)
    if not res.runs or not res.values:
        raise ValueError(f"{db}: the store holds no finished run with results; nothing to report")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"cannot write the report to {out}: it is a file, not a folder")
    inside(out, "figures")  # a link planted there: refused before any work
    verdicts = verdict_table(res)
    anomalies = anomaly_table(res)
    tables = build_tables(res)
    figures = build_figures(res)
    n = len(res.runs)
    failed = store.runs("failed")
    intro = (
        f"{n} finished runs: {len(res.methods)} training methods × {len(res.columns)} "
        f"(dataset, model) pairs × seeds. Baseline: {res.baseline}. Values: mean ± std "
        "over seeds, in % unless noted; best per column in bold where the metric has a "
        "direction; † a significant difference from the baseline (the test is in each "
        "caption); ⚠ a cell whose runs were flagged (see Anomalies)."
    )
    if failed:
        intro += f" {len(failed)} runs failed: " + "; ".join(
            f"{r['method']} seed {r['seed']} ({r['error']})" for r in failed[:5]
        )
    flagged = len(anomalies) - 1
    sections: list[tuple[str, str, list[list[str]] | None]] = (
        [
            (
                "Verdicts",
                "One line per headline claim of the papers that this sweep can test, "
                "with the premise it rests on; where the premise fails, the claim is not testable "
                "here. " + TESTS_TEXT + " " + premises_text(),
                verdicts,
            ),
        ]
        + [(title, "", table) for title, table in tables.items()]
        + [
            (title, "", table)
            for title, table in given_sections(res)  # networks trained elsewhere
        ]
        + [
            (
                "Anomalies",
                f"{flagged} fits flagged by the runs' checks, by calibrator and kind"
                + (
                    " (every one below the table): these numbers are not results to trust; the "
                    "kinds a method declares its nature (histogram binning's higher NLL) are not "
                    "flagged."
                    if flagged
                    else "."
                ),
                anomaly_summary(res) if flagged else None,
            ),
        ]
    )
    titles = [title for title, _, _ in sections] + ["Figures"]
    md = ["# Calibration benchmark", "", md_text(intro), ""]
    md += [f"- [{md_text(t)}](#{anchor(t)})" for t in titles] + [""]
    page = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Calibration benchmark</title>"
        f"<style>{CSS}</style></head><body><h1>Calibration benchmark</h1>"
        f"<p>{html_text(intro)}</p><nav><b>Contents</b><ol>"
        + "".join(f"<li><a href='#{anchor(t)}'>{html_text(t)}</a></li>" for t in titles)
        + "</ol></nav>"
    ]
    for title, text, table in sections:
        md += [f"## {md_text(title)}", ""] + ([md_text(text), ""] if text else [])
        page.append(
            f"<h2 id='{anchor(title)}'>{html_text(title)}</h2>"
            + (f"<p>{html_text(text)}</p>" if text else "")
        )
        if table is not None:
            md += [markdown_table(table), ""]
            page.append(html_table(table))
        if title == "Anomalies" and flagged:
            summary = f"Every flagged fit ({flagged})"
            md += [
                "<details><summary>" + summary + "</summary>",
                "",
                markdown_table(anomalies),
                "",
                "</details>",
                "",
            ]
            page.append(f"<details><summary>{summary}</summary>{html_table(anomalies)}</details>")
    md.append("## Figures\n")
    page.append(f"<h2 id='{anchor('Figures')}'>Figures</h2>")
    files: dict[Path, bytes | str] = {}
    for name, png in figures.items():
        file = re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-") + ".png"
        files[out / "figures" / file] = png
        md.append(f"![{md_text(name)}](figures/{file})")
        b64 = base64.b64encode(png).decode()
        page.append(
            f"<figure><img alt='{html_text(name)}' src='data:image/png;base64,{b64}'></figure>"
        )
    page.append("</body></html>")
    files[out / "report.md"] = "\n".join(md) + "\n"
    files[out / "report.html"] = "\n".join(page)
    write_files(files, out)  # all or none: a full disk leaves no partial report
    kinds: dict[str, int] = defaultdict(int)
    for a in res.anomalies:
        kinds[a[3]] += 1
    return {
        "tables": sum(table is not None for _, _, table in sections),
        "figures": len(figures),
        "runs": n,
        "headline": tables["Test ECE (%), uncalibrated"],
        "verdicts": verdicts,
        "anomalies": dict(kinds),
    }
