"""The report's figures, from the results store alone (PNG bytes by name): reliability
diagrams of the baseline before and after TS, confidence of correct against wrong
predictions (Dark Side Fig. 2), ECE and optimal ECE over epochs (Rethinking Fig. 4), max
logits by learned epoch (Rethinking Fig. 5), gradient norm against Brier score (BSCE-GRA
Fig. 4), MaC-Cal's q_t (Fig. 8) and ECE after TS against the calibration-set size
(Rethinking Fig. 3)."""

from __future__ import annotations

import io
import math
import statistics
from collections import defaultdict

from ._results import Results
from ._store import ALL


def build_figures(res: Results) -> dict[str, bytes]:
    """PNG bytes of every figure the store has data for. Text is drawn as written: names
    from the store are never read as mathtext (``$\\foo$`` in a name is shown, not parsed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with plt.rc_context({"text.parse_math": False}):
        return _draw(res, plt)


def _draw(res: Results, plt) -> dict[str, bytes]:
    figures: dict[str, bytes] = {}

    def save(name: str, fig) -> None:
        buf = io.BytesIO()
        fig.tight_layout()
        fig.savefig(buf, format="png", dpi=130)
        plt.close(fig)
        figures[name] = buf.getvalue()

    def single(name: str, draw, **labels) -> None:
        """One-panel figure: ``draw(ax)``, then labels and a legend outside the data."""
        fig, ax = plt.subplots(figsize=(8.0, 4.2))
        draw(ax)
        ax.set(**labels)
        ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        save(name, fig)

    from ..plots import draw_reliability

    every = _baseline_runs(res)
    ref = res.reference()
    bins = {(k, c): d for k, _, c, d in res.store.curves("bins")}
    for column, keys in every.items():
        cals = [c for c in ("uncalibrated", ref) if any((k, c) in bins for k in keys)]
        if not cals:
            continue
        fig = plt.figure(figsize=(5.2 * len(cals), 6.2))
        grid = fig.add_gridspec(2, len(cals), height_ratios=[3, 1])
        for i, cal in enumerate(cals):
            top = fig.add_subplot(grid[0, i])
            bottom = fig.add_subplot(grid[1, i], sharex=top)
            pooled = pool_bins([bins[(k, cal)] for k in keys if (k, cal) in bins])
            draw_reliability(pooled, title=cal, ax=(top, bottom))
        seeds = len([k for k in keys if (k, cals[0]) in bins])
        fig.suptitle(
            f"{res.baseline}, {res.short(column[0])} / {column[1]}, the test splits of "
            f"{seeds} seed{'s' * (seeds != 1)} pooled",
            fontsize=11,
        )
        save(f"reliability {res.short(column[0])} {column[1]}", fig)
    densities = {k: d for k, _, _, d in res.store.curves("confidence")}
    xs = [(i + 0.5) / 40 for i in range(40)]
    for column, keys in every.items():
        name = res.short(column[0])
        dens = [densities[k] for k in keys if k in densities]
        if dens:
            single(
                f"confidence {name} {column[1]}",
                lambda ax, ds=dens: [
                    ax.plot(
                        xs,
                        [
                            statistics.mean(d[lab][i] / (sum(d[lab]) or 1) * 40 for d in ds)
                            for i in range(40)
                        ],
                        label=lab,
                    )
                    for lab in ("correct", "incorrect")
                ],
                xlabel="confidence",
                ylabel="density",
                title=f"Confidence, {res.baseline} ({name}), mean over {len(dens)} seeds",
            )
        hists = [h for h in (res.store.history(k) for k in keys) if h]
        if hists:
            single(
                f"epochs {name} {column[1]}",
                lambda ax, hs=hists: [
                    band(ax, [[r[k] for r in h] for h in hs], [r["epoch"] for r in hs[0]], lab)
                    for k, lab in (("val_ece", "ECE"), ("val_optimal_ece", "optimal ECE"))
                ],
                xlabel="epoch",
                ylabel="validation",
                title=f"ECE over epochs, {res.baseline} ({name}): mean and range over "
                f"{len(hists)} seeds",
            )
    learned = {k: d for k, _, _, d in res.store.curves("learned_epoch")}
    for column, keys in every.items():
        key = keys[0]  # one network's samples: the lowest seed's
        if key in learned:
            groups: dict[int, list[float]] = defaultdict(list)
            for e, v in zip(learned[key]["learned"], learned[key]["max_logit"], strict=True):
                groups[e].append(v)
            shown = sorted(groups)[:: max(1, len(groups) // 5)]
            # outlines of densities: no group's bars hide another's, whatever its size
            single(
                f"learned {res.short(column[0])} {column[1]}",
                lambda ax, g=groups, sh=shown: [
                    ax.hist(
                        g[e],
                        bins=30,
                        density=True,
                        histtype="step",
                        lw=1.4,
                        label=f"learned at epoch {e} (n={len(g[e])})",
                    )
                    for e in sh
                ],
                xlabel="max logit",
                ylabel="density",
                title=f"Max logit by learned epoch ({res.short(column[0])}, {res.baseline} seed "
                f"{res.runs[key]['seed']})",
            )
    for column in res.columns:
        data = _gradient_runs(res, column)
        if data:
            single(
                f"gradnorm {res.short(column[0])} {column[1]}",
                lambda ax, data=data: [
                    ax.scatter(d["brier"], d["grad_norm"], s=4, alpha=0.5, label=m) for m, d in data
                ],
                xlabel="Brier score",
                ylabel="last-layer gradient norm",
                title=f"Gradient norm against Brier by loss ({res.short(column[0])})",
            )
    for column in res.columns:
        curves = []
        for k, r in res.runs.items():
            if (r["dataset"], r["model"]) == column and r["spec"].get("stage2"):
                hist = res.store.history(k, stage=2)
                if hist and "eta" in hist[0]:
                    curves.append((f"{r['method']} s{r['seed']}", [h["q"] for h in hist]))
        if curves:
            single(
                f"maccal q {res.short(column[0])} {column[1]}",
                lambda ax, c=curves: [
                    ax.plot(range(1, len(q) + 1), q, lw=1, label=lab) for lab, q in c
                ],
                xlabel="stage-2 epoch",
                ylabel="q_t",
                title=f"MaC-Cal mask rate ({res.short(column[0])})",
            )
    sizes = res.sizes()
    if len(sizes) > 1 and ref is not None:
        names = ["all" if s == ALL else str(s) for s in sizes]
        for column in res.columns:
            lines = []
            shown = [res.baseline, *[m for m in res.methods if m != res.baseline][:5]]
            left = len(res.methods) - len(shown)
            for m in shown:
                means = [res.seeds(m, column, "test", ref, s, "ece") for s in sizes]
                if all(means):
                    lines.append((m, [100 * statistics.mean(v) for v in means]))
            if lines:
                single(
                    f"calibration size {res.short(column[0])} {column[1]}",
                    lambda ax, ls=lines: [ax.plot(names, y, marker="o", label=m) for m, y in ls],
                    xlabel="calibration-set size",
                    ylabel=f"test ECE after {res.short(ref)} (%)",
                    title=f"ECE against calibration-set size ({res.short(column[0])})"
                    + (
                        f"\n{len(shown)} of {len(res.methods)} methods shown; every method is "
                        "in the table beside it"
                        if left > 0
                        else ""
                    ),
                )
    return figures


def pool_bins(runs: list[dict]) -> dict:
    """One reliability diagram's bins from several runs' (the same edges): counts summed,
    accuracy and confidence averaged with the counts as weights (empty bins: NaN)."""
    count = [sum(r["count"][j] for r in runs) for j in range(len(runs[0]["count"]))]

    def weighted(field: str, j: int) -> float:
        if not count[j]:
            return math.nan
        return sum(r[field][j] * r["count"][j] for r in runs if r["count"][j]) / count[j]

    return {
        "edges": runs[0]["edges"],
        "count": count,
        "accuracy": [weighted("accuracy", j) for j in range(len(count))],
        "confidence": [weighted("confidence", j) for j in range(len(count))],
    }


def band(ax, series: list[list[float]], x: list[int], label: str) -> None:
    """The mean of ``series`` (one list per seed) with their range shaded."""
    n = min(len(s) for s in series)
    cols = [[s[i] for s in series] for i in range(n)]
    (line,) = ax.plot(x[:n], [statistics.mean(c) for c in cols], label=label)
    if len(series) > 1:
        ax.fill_between(
            x[:n],
            [min(c) for c in cols],
            [max(c) for c in cols],
            color=line.get_color(),
            alpha=0.2,
            lw=0,
        )


def _baseline_runs(res: Results) -> dict[tuple[str, str], list[str]]:
    """Per column, the baseline's runs, lowest seed first."""
    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    for k, r in sorted(res.runs.items(), key=lambda kv: kv[1]["seed"]):
        if r["method"] == res.baseline:
            out[(r["dataset"], r["model"])].append(k)
    return dict(out)


#: losses the gradient-norm figure compares (BSCE-GRA Fig. 4), in this order
GRADIENT_LOSSES = ("ce", "focal", "bsce-gra")


def _gradient_runs(res: Results, column: tuple[str, str]) -> list[tuple[str, dict]]:
    """(method, gradient data) of the lowest-seed stage-1 run of each loss in
    GRADIENT_LOSSES (plain training: no mixup, no stage 2, whose stage 1 repeats CE's)."""
    chosen: dict[str, tuple[str, dict]] = {}
    data = {k: d for k, _, _, d in res.store.curves("grad_norm")}
    for k, r in sorted(res.runs.items(), key=lambda kv: kv[1]["seed"]):
        spec = r["spec"]
        loss = res.short(spec.get("loss", "ce"))
        if (
            (r["dataset"], r["model"]) != column
            or k not in data
            or spec.get("stage2")
            or spec.get("mixup")
            or loss not in GRADIENT_LOSSES
        ):
            continue
        chosen.setdefault(loss, (r["method"], data[k]))
    return [chosen[loss] for loss in GRADIENT_LOSSES if loss in chosen]
