"""Regenerate docs/training.md: the losses of the BSCE-GRA paper's Table 1 on `digits`, and
its Gaussian-toy correlation study (§4.3), with calibkit's trainer.

    python scripts/training_report.py            # writes docs/training.md (about 10 minutes)

Every number in the page is computed here; the verdicts on the papers' claims are derived
from those numbers by the rules stated next to them, not typed by hand.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from calibkit import data, posthoc
from calibkit.losses.weighted import BSCE, DualFocal, Focal
from calibkit.metrics import accuracy, ece
from calibkit.training import TrainConfig, predict, train

ROOT = Path(__file__).resolve().parents[1]
SEEDS = (1, 2, 3, 4, 5)
EPOCHS = 30
METHODS = {  # row label -> (loss spec, mixup alpha)
    "CE": ("ce", 0.0),
    "Focal (γ=3)": ("focal:gamma=3", 0.0),
    "FLSD-53": ("flsd53", 0.0),
    "Dual focal (γ=5)": ("dual-focal:gamma=5", 0.0),
    "Label smoothing (0.05)": ("label-smoothing:epsilon=0.05", 0.0),
    "Mixup (α=0.2)": ("ce", 0.2),
    "Inverse focal (γ=3)": ("inverse-focal:gamma=3", 0.0),
    "BSCE (γ=β=2)": ("bsce", 0.0),
    "BSCE-GRA (γ=β=2)": ("bsce-gra", 0.0),
}


def mean_std(values: list[float], scale: float = 100.0) -> str:
    m = statistics.mean(values) * scale
    s = statistics.stdev(values) * scale if len(values) > 1 else 0.0
    return f"{m:.2f} ± {s:.2f}"


def table1(workdir: Path) -> tuple[str, dict[str, dict[str, list[float]]]]:
    rows, raw = [], {}
    for label, (loss, alpha) in METHODS.items():
        res: dict[str, list[float]] = {"acc": [], "ece": [], "ece_ts": [], "t": []}
        for seed in SEEDS:
            out = workdir / f"{loss.replace(':', '_')}_{alpha}_{seed}"
            cfg = TrainConfig(data="digits", model="cnn", loss=loss, mixup=alpha, epochs=EPOCHS,
                              seed=seed)  # fmt: skip
            train(cfg, out)

            with np.load(out / "logits.npz") as f:
                zv, yv = torch.from_numpy(f["logits_val"]), torch.from_numpy(f["labels_val"])
                zt, yt = torch.from_numpy(f["logits_test"]), torch.from_numpy(f["labels_test"])
            ts = posthoc.create("ts").fit(zv, yv)
            res["acc"].append(accuracy(zt, yt))
            res["ece"].append(ece(zt, yt))
            res["ece_ts"].append(ece(ts(zt.double()), yt))
            res["t"].append(float(ts.temperature_))
        raw[label] = res
        rows.append(
            f"| {label} | {mean_std(res['acc'])} | {mean_std(res['ece'])} | "
            f"{mean_std(res['ece_ts'])} | {statistics.mean(res['t']):.2f} |"
        )
        print(label, rows[-1], file=sys.stderr)
    head = (
        "| method | test accuracy (%) | ECE (%) | ECE after TS (%) | T |\n"
        "| --- | --- | --- | --- | --- |\n"
    )
    return head + "\n".join(rows), raw


def pearson(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double() - a.double().mean(), b.double() - b.double().mean()
    return float((a * b).sum() / (a.norm() * b.norm()))


GRID = {  # weight -> settings searched (the paper grid-searches each method)
    "FL: (1 − p_y)^γ": [Focal(gamma=g) for g in (0.25, 0.5, 1.0, 2.0, 3.0, 5.0)],
    "DFL: (1 − p_y + p_j)^γ": [DualFocal(gamma=g) for g in (0.25, 0.5, 1.0, 2.0, 3.0, 5.0)],
    "gBS: ‖p − e_y‖_β^γ": [
        BSCE(gamma=g, norm=b) for g in (0.25, 0.5, 1.0, 2.0) for b in (1.0, 2.0)
    ],
}


def toy_study(workdir: Path) -> tuple[str, dict[str, list[float]]]:
    toy = data.create("gaussian-toy")
    corr: dict[str, dict[str, list[float]]] = {k: {} for k in GRID}
    for seed in SEEDS:
        out = workdir / f"toy_{seed}"
        cfg = TrainConfig(data="gaussian-toy", model="mlp", loss="ce", epochs=15, seed=seed,
                          batch_size=256)  # fmt: skip
        result = train(cfg, out)
        z = predict(result.model, toy.test, toy, torch.device("cpu")).double()
        y = toy.test.y
        logp = torch.log_softmax(z, 1)
        p = logp.exp()
        truth = (toy.posterior(toy.test.x) - p).norm(dim=1)  # c(x) = ‖η(x) − p̂(x)‖ (Eq. 1)
        onehot = torch.nn.functional.one_hot(y, 5).double()
        for name, weights in GRID.items():
            for w in weights:
                u = w.weights(p, logp, onehot)
                u = u[:, 0] if u.shape[1] == 1 else u[torch.arange(len(y)), y]
                corr[name].setdefault(w.extra_repr(), []).append(pearson(u, truth))
    rows, best = [], {}
    for name, by_setting in corr.items():
        setting = max(by_setting, key=lambda s: statistics.mean(by_setting[s]))
        best[name] = by_setting[setting]
        rows.append(f"| {name} | {setting.replace('reduction=' + repr('mean') + ', ', '')} | "
                    f"{mean_std(by_setting[setting], 1.0)} |")  # fmt: skip
    head = (
        "| weight u | best setting | Pearson r with ‖η − p̂‖ (mean ± std) |\n| --- | --- | --- |\n"
    )
    return head + "\n".join(rows), best


def verdicts(raw: dict, toy: dict) -> str:
    def m(label: str, key: str) -> float:
        return statistics.mean(raw[label][key])

    ts_rank = sorted(raw, key=lambda k: m(k, "ece_ts"))
    raw_rank = sorted(raw, key=lambda k: m(k, "ece"))
    gra, ce = "BSCE-GRA (γ=β=2)", "CE"
    lines = [
        f"- *BSCE-GRA gives the lowest ECE after temperature scaling* (BSCE-GRA Table 1): "
        f"{'holds' if ts_rank[0] == gra else 'does not hold'} here; BSCE-GRA ranks "
        f"{ts_rank.index(gra) + 1} of {len(raw)} (best: {ts_rank[0]}).",
        f"- *BSCE-GRA gives the lowest ECE before temperature scaling*: "
        f"{'holds' if raw_rank[0] == gra else 'does not hold'}; it ranks "
        f"{raw_rank.index(gra) + 1} (best: {raw_rank[0]}).",
        f"- *Calibration-aware losses beat CE before TS*: "
        f"{sum(m(k, 'ece') < m(ce, 'ece') for k in raw if k != ce)} of {len(raw) - 1} do.",
        f"- *After TS the losses are close to each other* (Rethinking §4): the spread of mean "
        f"ECE after TS is {100 * (m(ts_rank[-1], 'ece_ts') - m(ts_rank[0], 'ece_ts')):.2f} "
        f"points, against {100 * (m(raw_rank[-1], 'ece') - m(raw_rank[0], 'ece')):.2f} before.",
        f"- *Networks trained with CE are over-confident, so TS picks T > 1* (all five papers): "
        f"{'holds' if statistics.mean(raw[ce]['t']) > 1 else 'does not hold'} for this CNN "
        f"(CE: T = {statistics.mean(raw[ce]['t']):.2f}); T > 1 only for "
        f"{', '.join(k for k in raw if statistics.mean(raw[k]['t']) > 1) or 'none'}.",
    ]
    means = {k: statistics.mean(v) for k, v in toy.items()}
    order = sorted(means, key=means.get, reverse=True)
    paper = ["gBS: ‖p − e_y‖_β^γ", "DFL: (1 − p_y + p_j)^γ", "FL: (1 − p_y)^γ"]
    lines.append(
        f"- *gBS correlates best with the true error, then DFL, then FL* (BSCE-GRA §4.3: 0.664, "
        f"0.638, 0.550): the order here is {' > '.join(k.split(':')[0] for k in order)}, so it "
        f"{'holds' if order == paper else 'does not hold'} at this scale."
    )
    return "\n".join(lines)


PAGE = """# Training for calibration

Written by `scripts/training_report.py` ({minutes:.0f} minutes on this machine); every
number comes from runs of `calibkit.training.train`.

## The losses on `digits` (the shape of BSCE-GRA's Table 1)

The CNN of `calibkit.models` (two 3x3 convolutions, 19,658 parameters) trained for {epochs}
epochs on calibkit's fixed digits split (train 1,000, validation 300, test 497) with SGD
(momentum 0.9, weight decay 5e-4, batch 128, learning rate 0.1 divided by 10 at epochs 13
and 21: the `cifar` schedule scaled to {epochs} epochs), for each loss and seeds {seeds}.
Temperature scaling is fitted on the validation split; accuracy and ECE (15 bins) are on
the test split, mean ± std over the seeds. `T` is the mean fitted temperature.

{table1}

## Which uncertainty weight tracks the true error (BSCE-GRA §4.3)

On `gaussian-toy` (5 classes in 2-D, the true posterior η known; see `calibkit.data`), an
MLP (two hidden layers of 256) trained with CE for 15 epochs, seeds {seeds}. On the 5,000
test points, the Pearson correlation between each weight u(p̂, y) and the true per-sample
error ‖η(x) − p̂(x)‖₂ (the paper's Eq. 1); each weight's setting is chosen by grid search,
as in the paper (γ in 0.25…5; for gBS, β in 1, 2). Note that with β = 1,
‖p − e_y‖₁ = 2 (1 − p_y), so gBS is then the focal weight up to a constant factor and
correlates exactly as much.

{toy}

## What holds at this scale

{verdicts}

Digits is tiny (1,000 training images) and a CNN reaches 100 % training accuracy within a
few epochs, so the regime differs from CIFAR-scale training in the papers: losses that
shrink the gradient of confident samples leave the model under-confident here rather than
correcting over-confidence. Run the same comparison at paper scale with `calibkit train
--data cifar10:root=... --model resnet50 --epochs 350` for each loss.

## Conventions

- Losses average over the batch (`reduction="mean"`); focal_calibration sums CE and focal
  losses but averages Brier and MMCE, which only rescales the learning rate for the summed
  ones.
- BSCE-GRA's weight is u = ‖p − e_y‖_β^γ, the form of the authors' code (their Eq. 11 is
  garbled); the defaults γ = β = 2 make u the Brier score.
- Mixup draws one λ ~ Beta(α, α) per batch and mixes with a permutation of the batch.
"""


def main() -> None:
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        t1, raw = table1(Path(tmp))
        toy_table, toy = toy_study(Path(tmp))
    page = PAGE.format(
        minutes=(time.perf_counter() - began) / 60,
        epochs=EPOCHS,
        seeds=", ".join(map(str, SEEDS)),
        table1=t1,
        toy=toy_table,
        verdicts=verdicts(raw, toy),
    )
    (ROOT / "docs" / "training.md").write_text(page)
    print(f"wrote {ROOT / 'docs' / 'training.md'}")


if __name__ == "__main__":
    main()
