"""The report of the ``real`` preset (:mod:`calibkit.bench.real`): tables, tests over
networks and verdicts, written as report.md and report.html (and docs/real.md on request).

Conventions: values are means over seeds (± the standard deviation where there are several),
ECE and friends in %. Average ranks rank the methods within each network (1 = best, ties
share the mean rank) and average over networks. The Friedman test asks whether any method
differs from the others over networks; each method is then compared with temperature
scaling by the Wilcoxon signed-rank test over networks (two-sided, † at p < 0.05, not
corrected for the number of methods: read † as a flag, not a proof).
"""

from __future__ import annotations

import html
import math
import re
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from ..io import write_section, write_text
from ..metrics.table import mean_std
from .real import FULL_MAPS, SETTINGS, SLOW_ON_100, spec_name
from .report import CSS, html_table, markdown_table
from .store import Store

Table = list[list[str]]
RANKED = {
    "ece": "ECE",
    "classwise_ece": "classwise ECE",
    "nll": "NLL",
    "brier": "Brier",
    "accuracy": "accuracy",
}


def _pct(v: float) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{100 * v:.2f}"


class RealResults:
    """values[(part, model, split, calibrator, metric)] → [value per seed]."""

    def __init__(self, db: str | Path) -> None:
        store = Store(db, create=False)
        runs = {r["key"]: r for r in store.runs()}
        self.values: dict[tuple, list[float]] = defaultdict(list)
        self.seconds: dict[str, float] = defaultdict(float)
        for key, split, cal, _, metric, value in store.metrics():
            r = runs.get(key)
            if r is None:
                continue
            part = r["method"]
            row = key.split("/")[1] if part == "maccal" else r["model"]
            if part == "posthoc":
                row = f"{r['dataset']}_{r['model']}"
            self.values[(part, row, split, spec_name(cal), metric)].append(
                float("nan") if value is None else value
            )
        for r in runs.values():
            self.seconds[r["method"]] += r["seconds"] or 0.0
        self.anomalies = store.anomalies()
        self.settings = store.meta("settings") or asdict(SETTINGS)
        self.wall = store.meta("wall_seconds")
        self.runs = runs

    def get(self, part: str, row: str, split: str, cal: str, metric: str) -> list[float]:
        return self.values.get((part, row, split, cal, metric), [])

    def mean(self, *key: str) -> float:
        v = [x for x in self.get(*key) if math.isfinite(x)]
        return float(np.mean(v)) if v else float("nan")

    def rows(self, part: str) -> list[str]:
        return sorted({k[1] for k in self.values if k[0] == part}, key=_natural)

    def calibrators(self, part: str) -> list[str]:
        names = {k[3] for k in self.values if k[0] == part}
        return ["uncalibrated", *sorted(names - {"uncalibrated"})]


def _natural(name: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def _ranks(matrix: np.ndarray, higher_better: bool) -> np.ndarray:
    """Ranks within each row (network) of ``matrix`` (networks × methods), 1 = best."""
    return np.vstack([stats.rankdata(-r if higher_better else r) for r in matrix])


def posthoc_tables(res: RealResults) -> tuple[dict[str, Table], dict[str, Any]]:
    """Average ranks with Friedman and Wilcoxon tests, per-network results and refinement."""
    nets = res.rows("posthoc")
    methods = res.calibrators("posthoc")
    facts: dict[str, Any] = {"networks": len(nets)}
    tables: dict[str, Table] = {}
    for label, subset in (
        ("all 28 networks", nets),
        ("the 10-class networks", [n for n in nets if not n.startswith("cifar100")]),
    ):
        present = [
            m for m in methods if all(res.get("posthoc", n, "test", m, "ece") for n in subset)
        ]
        header = ["method", *(f"{v} rank" for v in RANKED.values())]
        table, ranks_of = [header], {}
        ps = []
        for metric in RANKED:
            mat = np.array(
                [[res.mean("posthoc", n, "test", m, metric) for m in present] for n in subset]
            )
            r = _ranks(mat, metric == "accuracy")
            ranks_of[metric] = dict(zip(present, r.mean(0), strict=True))
            p_f = stats.friedmanchisquare(*mat.T).pvalue if len(present) > 2 else float("nan")
            ps.append(p_f)
            ts = present.index("ts") if "ts" in present else None
            for j, m in enumerate(present):
                if ts is None or j == ts or np.allclose(mat[:, j], mat[:, ts]):
                    continue
                if stats.wilcoxon(mat[:, j], mat[:, ts]).pvalue < 0.05:
                    ranks_of.setdefault(f"dagger:{metric}", set()).add(m)
        for m in present:
            table.append(
                [m]
                + [
                    f"{ranks_of[k][m]:.2f}"
                    + ("†" if m in ranks_of.get(f"dagger:{k}", set()) else "")
                    for k in RANKED
                ]
            )
        table.append(["Friedman p"] + [f"{p:.1e}" for p in ps])
        tables[f"Average ranks over {label} ({len(subset)})"] = table
        facts[label] = ranks_of
    per = [["network", "accuracy", "ECE uncal.", "ECE TS", "best ECE", "best classwise ECE"]]
    for n in nets:
        eces = {m: res.mean("posthoc", n, "test", m, "ece") for m in methods[1:]}
        eces = {m: v for m, v in eces.items() if math.isfinite(v)}  # methods that ran here
        cw = {m: res.mean("posthoc", n, "test", m, "classwise_ece") for m in eces}
        b, c = min(eces, key=eces.get), min(cw, key=cw.get)
        per.append(
            [
                n,
                mean_std(res.get("posthoc", n, "test", "uncalibrated", "accuracy"), scale=100.0),
                mean_std(res.get("posthoc", n, "test", "uncalibrated", "ece"), scale=100.0),
                mean_std(res.get("posthoc", n, "test", "ts", "ece"), scale=100.0),
                f"{_pct(eces[b])} ({b})",
                f"{_pct(cw[c])} ({c})",
            ]
        )
    tables["Per network: test ECE (%) over the seeds' 50/50 splits"] = per
    ref = [
        [
            "method",
            "networks",
            "AUROC before",
            "AUROC after",
            "Δ (points)",
            "networks with Δ < −0.5",
            "Spearman ρ(ECE before, Δ)",
        ]
    ]
    before = {n: res.mean("posthoc", n, "test", "uncalibrated", "refinement_auroc") for n in nets}
    ece0 = [res.mean("posthoc", n, "test", "uncalibrated", "ece") for n in nets]
    facts["refinement"] = {}
    for m in methods[1:]:
        after = {n: res.mean("posthoc", n, "test", m, "refinement_auroc") for n in nets}
        have = [n for n in nets if math.isfinite(after[n])]
        delta = np.array([after[n] - before[n] for n in have])
        rho = stats.spearmanr([ece0[nets.index(n)] for n in have], delta).statistic
        facts["refinement"][m] = float(delta.mean())
        ref.append(
            [
                m,
                str(len(have)),
                _pct(np.mean([before[n] for n in have])),
                _pct(np.mean([after[n] for n in have])),
                f"{100 * delta.mean():+.2f}",
                str(int((delta < -0.005).sum())),
                "—" if not math.isfinite(rho) else f"{rho:+.2f}",
            ]
        )
    tables[
        "Refinement (Dark Side): test AUROC of correct vs wrong (%), mean over the networks "
        "each method ran on"
    ] = ref
    return tables, facts


def clamp_tables(res: RealResults) -> tuple[dict[str, Table], dict[str, Any]]:
    tables, facts = {}, {}
    for net in res.rows("clamp"):
        methods = res.calibrators("clamp")
        table = [["method", "ECE", "classwise ECE", "NLL", "accuracy", "T"]]
        for m in methods:
            t = res.get("clamp", net, "test", m, "temperature")
            table.append(
                [
                    m,
                    mean_std(res.get("clamp", net, "test", m, "ece"), scale=100.0),
                    mean_std(res.get("clamp", net, "test", m, "classwise_ece"), scale=100.0),
                    mean_std(res.get("clamp", net, "test", m, "nll"), digits=4),
                    mean_std(res.get("clamp", net, "test", m, "accuracy"), scale=100.0),
                    mean_std(t, digits=3) if t else "",
                ]
            )
        tables[f"Neural Clamping against post-hoc methods, {net} (JPEG CIFAR-10 test images)"] = (
            table
        )
        post = {
            m: res.mean("clamp", net, "test", m, "ece")
            for m in methods
            if m not in ("uncalibrated", "neural-clamping")
        }
        best = min(post, key=post.get)
        facts[net] = (
            res.mean("clamp", net, "test", "neural-clamping", "ece"),
            best,
            post[best],
            res.mean("clamp", net, "test", "neural-clamping", "accuracy"),
            res.mean("clamp", net, "test", "uncalibrated", "accuracy"),
        )
    return tables, facts


def maccal_table(res: RealResults) -> tuple[Table, dict[str, Any]]:
    rows = res.rows("maccal")
    ablations = [r for r in rows if not r.startswith("gamma=")]
    gammas = [r for r in rows if r.startswith("gamma=")]
    first = rows[0] if rows else None
    table = [["head", "ECE", "NLL", "accuracy", "final q"]]
    for name, cal in (("pretrained head", "pretrained"), ("pretrained head + TS", "pretrained+ts")):
        table.append(
            [
                name,
                mean_std(res.get("maccal", first, "test", cal, "ece"), scale=100.0),
                mean_std(res.get("maccal", first, "test", cal, "nll"), digits=4),
                mean_std(res.get("maccal", first, "test", cal, "accuracy"), scale=100.0),
                "",
            ]
        )
    from ..posthoc.maccal import ABLATIONS

    order = [r for r in ABLATIONS if r in ablations] + sorted(gammas, key=_natural)
    for r in order:
        label = f"{r} (γ = 0.9)" if r in ABLATIONS and "adaptive" in r else r
        table.append(
            [
                label,
                mean_std(res.get("maccal", r, "test", "maccal", "ece"), scale=100.0),
                mean_std(res.get("maccal", r, "test", "maccal", "nll"), digits=4),
                mean_std(res.get("maccal", r, "test", "maccal", "accuracy"), scale=100.0),
                mean_std(res.get("maccal", r, "test", "maccal", "final_q"), digits=3),
            ]
        )
    full = "+ decaying adaptive sparsity"
    sweep = [res.mean("maccal", g, "test", "maccal", "ece") for g in gammas]
    if full in rows:
        sweep.append(res.mean("maccal", full, "test", "maccal", "ece"))
    facts = {
        "maccal": res.mean("maccal", full, "test", "maccal", "ece") if full in rows else math.nan,
        "plain": res.mean("maccal", first, "test", "pretrained", "ece") if first else math.nan,
        "ts": res.mean("maccal", first, "test", "pretrained+ts", "ece") if first else math.nan,
        "masked": res.mean("maccal", "masked retraining", "test", "maccal", "ece"),
        "gamma_spread": (max(sweep) - min(sweep)) if sweep else math.nan,
        "q_same": len(
            {round(res.mean("maccal", g, "test", "maccal", "final_q"), 12) for g in gammas}
        )
        <= 1,
    }
    return table, facts


def shift_table(res: RealResults) -> tuple[Table, dict[str, Any]]:
    table = [
        [
            "network",
            "accuracy exact",
            "accuracy JPEG",
            "ECE exact",
            "ECE JPEG",
            "AUROC exact",
            "AUROC JPEG",
            "TS: ECE exact",
            "TS: ECE JPEG",
            "T",
        ]
    ]
    facts = {}
    for net in res.rows("shift"):
        g = lambda split, cal, m, net=net: res.get("shift", net, split, cal, m)  # noqa: E731
        table.append(
            [
                net,
                mean_std(g("exact", "uncalibrated", "accuracy"), scale=100.0),
                mean_std(g("exact-jpeg", "uncalibrated", "accuracy"), scale=100.0),
                mean_std(g("exact", "uncalibrated", "ece"), scale=100.0),
                mean_std(g("exact-jpeg", "uncalibrated", "ece"), scale=100.0),
                mean_std(g("exact", "uncalibrated", "refinement_auroc"), scale=100.0),
                mean_std(g("exact-jpeg", "uncalibrated", "refinement_auroc"), scale=100.0),
                mean_std(g("exact", "ts", "ece"), scale=100.0),
                mean_std(g("exact-jpeg", "ts", "ece"), scale=100.0),
                mean_std(g("exact", "ts", "temperature"), digits=3),
            ]
        )
        facts[net] = {
            k: float(np.mean(g(*k.split("|"))))
            for k in (
                "exact|uncalibrated|ece",
                "exact-jpeg|uncalibrated|ece",
                "exact|ts|ece",
                "exact-jpeg|ts|ece",
            )
        }
    return table, facts


def verdicts(ph: dict, nc: dict, mc: dict, sh: dict) -> Table:
    """One line per claim the preset can test: holds / does not hold / not testable."""
    out = [["paper", "claim", "verdict", "evidence"]]
    ranks = ph.get("all 28 networks", {}).get("classwise_ece", {})
    if ranks:
        best = min(ranks, key=ranks.get)
        odir = {m: r for m, r in ranks.items() if m in ("ms-odir", "dir-odir")}
        ok = best in odir
        out.append(
            [
                "Kull et al. 2019",
                "ODIR-regularised maps (MS-ODIR, Dir-ODIR) calibrate classwise best "
                "(here cross-validated on a 3 × 3 grid, 3 folds)",
                "holds" if ok else "does not hold",
                f"average classwise-ECE rank over {ph['networks']} networks: "
                + ", ".join(f"{m} {r:.2f}" for m, r in sorted(odir.items()))
                + f"; best {best} {ranks[best]:.2f}",
            ]
        )
    if nc:
        wins = [n for n, v in nc.items() if v[0] < v[2]]
        ev = "; ".join(
            f"{n}: NC {_pct(v[0])} vs {v[1]} {_pct(v[2])}, accuracy {_pct(v[3])} "
            f"(plain {_pct(v[4])})"
            for n, v in nc.items()
        )
        verdict = (
            "holds"
            if len(wins) == len(nc)
            else ("does not hold" if not wins else f"holds on {len(wins)} of {len(nc)}")
        )
        out.append(
            [
                "Neural Clamping (Table 2)",
                "lower ECE than every post-hoc baseline",
                verdict + " (at this CPU budget)",
                ev,
            ]
        )
    if ph.get("refinement"):
        lost = {m: d for m, d in ph["refinement"].items() if d < -0.005}
        out.append(
            [
                "Dark Side (refinement)",
                "calibration can cost refinement (AUROC)",
                "holds" if lost else "does not hold",
                ("mean Δ AUROC: " + ", ".join(f"{m} {100 * d:+.2f}" for m, d in lost.items()))
                if lost
                else "no method lowers mean AUROC by 0.5 points",
            ]
        )
    if math.isfinite(mc.get("maccal", math.nan)):
        out.append(
            [
                "MaC-Cal (Table 5)",
                "MaC-Cal's head is better calibrated than the plain head",
                "holds" if mc["maccal"] < mc["plain"] else "does not hold",
                f"ECE {_pct(mc['maccal'])} vs plain {_pct(mc['plain'])} (TS {_pct(mc['ts'])}, "
                f"masked retraining {_pct(mc['masked'])})",
            ]
        )
        out.append(
            [
                "MaC-Cal (Fig. 7)",
                "ECE is insensitive to γ",
                "not testable here"
                if mc["q_same"]
                else ("holds" if mc["gamma_spread"] < 0.01 else "does not hold"),
                f"ECE spread over γ: {100 * mc['gamma_spread']:.2f} points"
                + (
                    "; every γ gave the same q_t: Conf_t − γ·Acc_t exceeded η_t in every epoch, "
                    "so Eq. 12's clipped update saturated and γ had no effect"
                    if mc["q_same"]
                    else ""
                ),
            ]
        )
    if sh:
        worse = [
            n
            for n, f in sh.items()
            if f["exact-jpeg|uncalibrated|ece"] > f["exact|uncalibrated|ece"]
        ]
        ts_worse = [n for n, f in sh.items() if f["exact-jpeg|ts|ece"] > f["exact|ts|ece"]]
        out.append(
            [
                "Dark Side (Table 3, shift)",
                "calibration degrades under a natural shift, and "
                "TS fitted in-distribution does not carry over",
                "holds"
                if len(worse) == len(ts_worse) == len(sh)
                else f"holds on {min(len(worse), len(ts_worse))} of {len(sh)}",
                "; ".join(
                    f"{n}: ECE {_pct(f['exact|uncalibrated|ece'])} → "
                    f"{_pct(f['exact-jpeg|uncalibrated|ece'])}, after TS "
                    f"{_pct(f['exact|ts|ece'])} → {_pct(f['exact-jpeg|ts|ece'])}"
                    for n, f in sh.items()
                ),
            ]
        )
    return out


def settings_text(s: dict[str, Any]) -> str:
    """The preset's settings in one paragraph."""
    return (
        f"Settings: zoo splits {s['zoo_fraction']:g}/{1 - s['zoo_fraction']:g} stratified × "
        f"{s['zoo_seeds']} seeds, calibrators {', '.join(s['posthoc'])} (on 100 classes without "
        f"{', '.join(FULL_MAPS)}, and {', '.join(SLOW_ON_100)} on seed 0 only); Neural "
        f"Clamping on {s['clamp_calibration']} calibration and {s['clamp_test']} test images "
        f"(stratified, {s['clamp_seeds']} seed(s)), settings {s['clamp']}; MaC-Cal stage 2 on "
        f"ResNet-{s['maccal_depth']}'s features, {s['maccal_epochs']} epochs, γ sweep "
        f"{', '.join(map(str, s['maccal_gammas']))} and 0.9; shift: TS on half of the 1,017 "
        f"exact images × {s['shift_seeds']} seeds."
    )


PROTOCOL = """Written by `calibkit bench real --data-root ../shared/data --doc docs/real.md`
from the real material in `../shared/data` (its README gives each file's origin). Where the
protocol departs from the papers, and why:

- **Zoo networks** have test logits only: each is split into stratified calibration and
  test halves, once per seed (`calibkit compare --split 0.5` does the same for one file).
  The cross-validated calibrators search a 3 × 3 grid (λ, μ ∈ {0.01, 1, 100}) with 3 folds
  instead of 7 × 7 with 5: the full search takes 70-80 s per fit on one core, hours over
  28 × 5 splits. On the 100-class networks matrix scaling and Dir-L2 are left out (10,100
  parameters on 5,000 samples interpolate the calibration half; matrix scaling took
  cifar100_resnet20 from 68.7 % to 49.7 % accuracy in a trial) and MS-/Dir-ODIR run on
  seed 0 only (25-40 s per fit).
- **Neural Clamping** runs on 500 calibration images for 4 epochs at batch 100 (the paper:
  100 epochs at batch 512 on 5,000), γ chosen from {0, 1, 2} by calibration ECE (§4.1); at
  the paper's scale one fit on ResNet-56 takes over an hour on this CPU. Its baselines are
  fitted on the same 500 images' logits and every method is measured on the same 2,000.
- **The pretrained ResNets** were trained on the original CIFAR-10 pixels and are measured
  on the JPEG tree, a natural shift (their accuracy falls from about 92 % to 82 %): the
  Neural Clamping and MaC-Cal tables are calibration under that shift, with calibration
  data from the shifted domain.
- **MaC-Cal** stage 2 retrains ResNet-20's head on its frozen features of the 50,000 JPEG
  training images (5,000 held out for validation), 20 epochs instead of 40, the paper's
  other settings; the baselines are the pretrained head and TS fitted on the held-out
  5,000.
- **Training**: these networks were trained elsewhere. The loss zoo trained from scratch on
  the JPEG CIFAR-10 tree (`calibkit bench train-cifar`, on the same bench harness as every
  other sweep) is the "Training study" section below."""


def write_real_report(db: str | Path, out: str | Path, doc: str | Path | None = None) -> dict:
    """report.md and report.html in ``out`` (and the markdown at ``doc``); returns a summary."""
    res = RealResults(db)
    ph_tables, ph = posthoc_tables(res) if res.rows("posthoc") else ({}, {})
    nc_tables, nc = clamp_tables(res)
    mc_table, mc = maccal_table(res) if res.rows("maccal") else (None, {})
    sh_table, sh = shift_table(res) if res.rows("shift") else (None, {})
    verdict = verdicts(ph, nc, mc, sh)
    kinds: dict[str, int] = defaultdict(int)
    for a in res.anomalies:
        kinds[a[3]] += 1
    anomalies = [["unit", "calibrator", "kind", "detail"]] + [
        [a[0], spec_name(a[1]), a[3], a[4]] for a in res.anomalies
    ]
    sections: list[tuple[str, str, Table | None]] = [
        ("Verdicts", "", verdict),
        *[(t, "", tab) for t, tab in ph_tables.items()],
        *[(t, "", tab) for t, tab in nc_tables.items()],
        (
            "MaC-Cal stage 2 on frozen ResNet features (JPEG CIFAR-10; test ECE and NLL)",
            "",
            mc_table,
        ),
        ("Natural shift: byte-exact test images against their JPEG versions", "", sh_table),
        (
            "Anomalies",
            f"{len(anomalies) - 1} flagged by the checks of docs/bench.md.",
            anomalies if len(anomalies) > 1 else None,
        ),
    ]
    seconds = ", ".join(f"{k} {v:.0f} s" for k, v in sorted(res.seconds.items()))
    wall = (
        f"The last `calibkit bench real` that ran units took {res.wall / 60:.1f} minutes wall "
        "(2 CPU cores; decoding the 60,000 JPEGs included). "
        if res.wall
        else ""
    )
    intro = wall + (
        f"{len(res.runs)} units of work (seconds by part, summed over units; the zoo units "
        f"run two at a time: {seconds}). "
        + settings_text(res.settings)
        + " Values: mean ± std over seeds, in % unless noted."
    )
    md = ["# The papers on real networks", "", intro, "", "## Protocol", "", PROTOCOL, ""]
    page = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>calibkit real</title>"
        f"<style>{CSS}</style></head><body><h1>The papers on real networks</h1>"
        f"<p>{html.escape(intro)}</p>"
    ]
    for title, text, table in sections:
        if table is None:
            continue
        md += [f"## {title}", ""] + ([text, ""] if text else []) + [markdown_table(table), ""]
        page.append(
            f"<h2>{html.escape(title)}</h2>"
            + (f"<p>{html.escape(text)}</p>" if text else "")
            + html_table(table)
        )
    page.append("</body></html>")
    Path(out).mkdir(parents=True, exist_ok=True)
    write_text(Path(out) / "report.md", "\n".join(md) + "\n")
    write_text(Path(out) / "report.html", "\n".join(page))
    if doc is not None:
        write_section(doc, "real", "\n".join(md))
    return {
        "units": len(res.runs),
        "verdicts": verdict,
        "anomalies": dict(kinds),
        "seconds": dict(res.seconds),
    }
