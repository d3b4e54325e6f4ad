"""The report's figures, from the results store alone (PNG bytes by name): reliability
diagrams of the baseline before and after TS, confidence of correct against wrong
predictions (Dark Side Fig. 2), ECE and optimal ECE over epochs (Rethinking Fig. 4), max
logits by learned epoch (Rethinking Fig. 5), gradient norm against Brier score (BSCE-GRA
Fig. 4), MaC-Cal's q_t (Fig. 8) and ECE after TS against the calibration-set size
(Rethinking Fig. 3)."""

from __future__ import annotations

import io
import statistics
from collections import defaultdict

from ..registry import parse_spec
from .results import Results, short
from .store import ALL


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
        """One-panel figure: ``draw(ax)``, then labels and a legend outside the data."""
        fig, ax = plt.subplots(figsize=(6.4, 3.4))
        draw(ax)
        ax.set(**labels)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        save(name, fig)

    from ..plots import draw_reliability

    first = _first_runs(res)
    bins = {(k, c): d for k, _, c, d in res.store.curves("bins")}
    for column, key in first.items():
        cals = [c for c in ("uncalibrated", "ts") if (key, c) in bins]
        if not cals:
            continue
        fig = plt.figure(figsize=(4.2 * len(cals), 5.2))
        grid = fig.add_gridspec(2, len(cals), height_ratios=[3, 1])
        for i, cal in enumerate(cals):
            top = fig.add_subplot(grid[0, i])
            bottom = fig.add_subplot(grid[1, i], sharex=top)
            draw_reliability(bins[(key, cal)], title=cal, ax=(top, bottom))
        fig.suptitle(f"{res.runs[key]['method']}, {short(column[0])} / {column[1]}, seed "
                     f"{res.runs[key]['seed']}", fontsize=10)  # fmt: skip
        save(f"reliability {short(column[0])} {column[1]}", fig)
    densities = {k: d for k, _, _, d in res.store.curves("confidence")}
    xs = [(i + 0.5) / 40 for i in range(40)]
    for column, key in first.items():
        method, name = res.runs[key]["method"], short(column[0])
        if key in densities:
            d = densities[key]
            single(
                f"confidence {name} {column[1]}",
                lambda ax, d=d: [
                    ax.plot(xs, [c / (sum(d[lab]) or 1) * 40 for c in d[lab]], label=lab)
                    for lab in ("correct", "incorrect")
                ],
                xlabel="confidence", ylabel="density", title=f"Confidence, {method} ({name})",
            )  # fmt: skip
        hist = res.store.history(key)
        if hist:
            epochs = [h["epoch"] for h in hist]
            single(
                f"epochs {name} {column[1]}",
                lambda ax, h=hist, e=epochs: [
                    ax.plot(e, [r[k] for r in h], label=lab)
                    for k, lab in (("val_ece", "ECE"), ("val_optimal_ece", "optimal ECE"))
                ],
                xlabel="epoch", ylabel="validation",
                title=f"ECE over epochs, {method} ({name})",
            )  # fmt: skip
    learned = {k: d for k, _, _, d in res.store.curves("learned_epoch")}
    for column, key in first.items():
        if key in learned:
            groups: dict[int, list[float]] = defaultdict(list)
            for e, v in zip(learned[key]["learned"], learned[key]["max_logit"], strict=True):
                groups[e].append(v)
            shown = sorted(groups)[:: max(1, len(groups) // 5)]
            # outlines of densities: no group's bars hide another's, whatever its size
            single(
                f"learned {short(column[0])} {column[1]}",
                lambda ax, g=groups, sh=shown: [
                    ax.hist(g[e], bins=30, density=True, histtype="step", lw=1.4,
                            label=f"learned at epoch {e} (n={len(g[e])})") for e in sh
                ],
                xlabel="max logit", ylabel="density",
                title=f"Max logit by learned epoch ({short(column[0])})",
            )  # fmt: skip
    for column in res.columns:
        data = _gradient_runs(res, column)
        if data:
            single(
                f"gradnorm {short(column[0])} {column[1]}",
                lambda ax, data=data: [
                    ax.scatter(d["brier"], d["grad_norm"], s=4, alpha=0.5, label=m) for m, d in data
                ],
                xlabel="Brier score", ylabel="last-layer gradient norm",
                title=f"Gradient norm against Brier by loss ({short(column[0])})",
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
                f"maccal q {short(column[0])} {column[1]}",
                lambda ax, c=curves: [
                    ax.plot(range(1, len(q) + 1), q, lw=1, label=lab) for lab, q in c
                ],
                xlabel="stage-2 epoch", ylabel="q_t",
                title=f"MaC-Cal mask rate ({short(column[0])})",
            )  # fmt: skip
    sizes = res.sizes()
    if len(sizes) > 1 and "ts" in res.calibrators():
        names = ["all" if s == ALL else str(s) for s in sizes]
        for column in res.columns:
            lines = []
            shown = [res.baseline, *[m for m in res.methods if m != res.baseline][:5]]
            for m in shown:
                means = [res.seeds(m, column, "test", "ts", s, "ece") for s in sizes]
                if all(means):
                    lines.append((m, [100 * statistics.mean(v) for v in means]))
            if lines:
                single(
                    f"calibration size {short(column[0])} {column[1]}",
                    lambda ax, ls=lines: [ax.plot(names, y, marker="o", label=m) for m, y in ls],
                    xlabel="calibration-set size", ylabel="test ECE after TS (%)",
                    title=f"ECE against calibration-set size ({short(column[0])})",
                )  # fmt: skip
    return figures


def _first_runs(res: Results) -> dict[tuple[str, str], str]:
    """Per column, the baseline's run of the lowest seed."""
    out: dict[tuple[str, str], str] = {}
    for k, r in sorted(res.runs.items(), key=lambda kv: kv[1]["seed"]):
        col = (r["dataset"], r["model"])
        if r["method"] == res.baseline and col not in out:
            out[col] = k
    return out


#: losses the gradient-norm figure compares (BSCE-GRA Fig. 4), in this order
GRADIENT_LOSSES = ("ce", "focal", "bsce-gra")


def _gradient_runs(res: Results, column: tuple[str, str]) -> list[tuple[str, dict]]:
    """(method, gradient data) of the lowest-seed stage-1 run of each loss in
    GRADIENT_LOSSES (plain training: no mixup, no stage 2, whose stage 1 repeats CE's)."""
    chosen: dict[str, tuple[str, dict]] = {}
    data = {k: d for k, _, _, d in res.store.curves("grad_norm")}
    for k, r in sorted(res.runs.items(), key=lambda kv: kv[1]["seed"]):
        spec = r["spec"]
        loss = parse_spec(spec.get("loss", "ce")).name
        if ((r["dataset"], r["model"]) != column or k not in data or spec.get("stage2")
                or spec.get("mixup") or loss not in GRADIENT_LOSSES):  # fmt: skip
            continue
        chosen.setdefault(loss, (r["method"], data[k]))
    return [chosen[loss] for loss in GRADIENT_LOSSES if loss in chosen]
