"""Affine calibrator fits against scipy's L-BFGS-B on the same objective, at the same optimum.

Each of vector scaling, matrix scaling, MS-ODIR, Dir-L2 and Dir-ODIR (at a fixed λ, μ: the
final fit after cross-validation) is fitted by calibkit's ``fit_affine`` and by
``scipy.optimize.minimize(method="L-BFGS-B", jac=True)`` on a float64 NumPy implementation
of the same objective (mean NLL of the affine map plus its penalty) with its closed-form
gradient, from the same start (identity, zero), to the same gradient tolerance. Printed: the
median time of several fits, iterations and objective evaluations, time per evaluation, the
objective reached by each (its difference must be ~0: faster must not mean a worse optimum),
and the time ratio (target: calibkit within 2x of scipy).

``--cold`` times instead the first vector-scaling fit of a fresh process (imports done,
nothing fitted yet), three processes for each tool: what a user's one-off script pays.
calibkit's target is again 2x scipy's; its fit once imported ``torch._dynamo`` through
``torch.optim`` and paid about 1.5 s there (issue 54).

    python benchmarks/speed/affine_speed.py [--data ../shared/data/logits/resnet110_cifar10.npz]
    python benchmarks/speed/affine_speed.py --cold

Without the ResNet-110 file it uses synthetic over-confident logits of the same shape.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from scipy.optimize import minimize
from scipy.special import log_softmax

from calibkit.posthoc._affine_fit import FINAL_TOL, fit_affine

#: (name, matrix, dirichlet features, regulariser, λ, μ)
METHODS = [
    ("vector", False, False, None, 0.0, 0.0),
    ("matrix", True, False, None, 0.0, 0.0),
    ("ms-odir λ=1 μ=1", True, False, "odir", 1.0, 1.0),
    ("dir-l2 λ=1", True, True, "l2", 1.0, 0.0),
    ("dir-odir λ=1 μ=1", True, True, "odir", 1.0, 1.0),
]


def load(path: Path) -> tuple[np.ndarray, np.ndarray, str]:
    if path.exists():
        with np.load(path) as d:
            return d["logits_val"].astype(np.float64), d["labels_val"], path.name
    g = np.random.default_rng(0)
    z = 2.0 * g.standard_normal((5000, 10))
    p = np.exp(log_softmax(z, 1))
    y = np.array([g.choice(10, p=row) for row in p])
    return 2.5 * z, y, "synthetic 5000 x 10"


def scipy_objective(x, y, matrix, reg, lam, mu):
    """Mean NLL of x W^T + b (or x * w + b) plus the penalty, and its gradient."""
    n, k = x.shape
    onehot = np.eye(k)[y]
    off = 1 - np.eye(k)

    def f(theta):
        w = theta[: k * k].reshape(k, k) if matrix else theta[:k]
        b = theta[k * k :] if matrix else theta[k:]
        out = x @ w.T + b if matrix else x * w + b
        logp = log_softmax(out, 1)
        loss = -(logp * onehot).sum() / n
        g = (np.exp(logp) - onehot) / n  # d loss / d out
        gw = g.T @ x if matrix else (g * x).sum(0)
        gb = g.sum(0)
        wm = w if matrix else np.diag(w)
        if reg == "odir":
            loss += lam / (k * (k - 1)) * ((wm * off) ** 2).sum() + mu / k * (b**2).sum()
            gw = gw + (2 * lam / (k * (k - 1)) * wm * off if matrix else 0)
            gb = gb + 2 * mu / k * b
        elif reg == "l2":
            loss += lam / (k * k) * (wm**2).sum()
            gw = gw + 2 * lam / (k * k) * w
        return loss, np.concatenate([np.ravel(gw), gb])

    return f


def fit_scipy(x, y, matrix, reg, lam, mu):
    k = x.shape[1]
    f = scipy_objective(x, y, matrix, reg, lam, mu)
    theta0 = np.concatenate([np.eye(k).ravel() if matrix else np.ones(k), np.zeros(k)])
    res = minimize(
        f,
        theta0,
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 5000, "gtol": FINAL_TOL, "ftol": 1e-15},
    )
    return res.fun, res.nit, res.nfev, float(np.abs(res.jac).max())


def fit_calibkit(x, y, matrix, reg, lam, mu):
    calls = {"n": 0}
    real = torch.log_softmax

    def counting(*args, **kwargs):  # one log_softmax per evaluation of the objective
        calls["n"] += 1
        return real(*args, **kwargs)

    torch.log_softmax = counting
    try:
        _, _, iters, converged, loss = fit_affine(
            x, y, matrix=matrix, reg=reg, lam=lam, mu=mu, max_iter=5000
        )
    finally:
        torch.log_softmax = real
    return loss, iters, calls["n"], converged


def timed(fn, reps, *args):
    times, out = [], None
    for _ in range(reps):
        start = time.perf_counter()
        out = fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def first_fit(tool: str, data: Path) -> float:
    """Seconds of the first vector-scaling fit in this process (imports already done)."""
    z, y, _ = load(data)
    if tool == "scipy":
        start = time.perf_counter()
        fit_scipy(z, y, False, None, 0.0, 0.0)
        return time.perf_counter() - start
    from calibkit import posthoc

    zt, yt = torch.from_numpy(z), torch.from_numpy(y).long()
    start = time.perf_counter()
    posthoc.create("vector").fit(zt, yt)
    seconds = time.perf_counter() - start
    if "torch._dynamo" in sys.modules:
        print("note: the calibkit fit imported torch._dynamo", file=sys.stderr)
    return seconds


def cold(data: Path, runs: int = 3) -> None:
    """Print the first fit's time in ``runs`` fresh processes per tool, and the ratio."""
    times: dict[str, list[float]] = {}
    for tool in ("calibkit", "scipy"):
        for _ in range(runs):
            out = subprocess.run(
                [sys.executable, __file__, "--data", str(data), "--first-fit", tool],
                capture_output=True,
                text=True,
                check=True,
            )
            times.setdefault(tool, []).append(float(out.stdout.split()[-1]))
    for tool, ts in times.items():
        print(f"{tool:9s} first fit: " + ", ".join(f"{t * 1e3:.0f} ms" for t in ts))
    ratio = statistics.median(times["calibkit"]) / statistics.median(times["scipy"])
    print(f"ratio of the medians (calibkit / scipy, target <= 2): {ratio:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared = Path(__file__).resolve().parents[3] / "shared"
    default = shared / "data/logits/resnet110_cifar10.npz"
    parser.add_argument("--data", type=Path, default=default)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--cold", action="store_true", help="time the first fit of a process")
    parser.add_argument("--first-fit", choices=["calibkit", "scipy"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_fit:
        print(first_fit(args.first_fit, args.data))
        return
    if args.cold:
        cold(args.data)
        return
    z, y, what = load(args.data)
    print(
        f"{what}: {z.shape[0]} x {z.shape[1]} validation logits, torch threads "
        f"{torch.get_num_threads()}, gradient tolerance {FINAL_TOL:g}\n"
    )
    head = (
        f"{'method':18s} {'calibkit':>9s} {'it':>5s} {'evals':>5s} {'ms/eval':>7s}   "
        f"{'scipy':>9s} {'it':>5s} {'evals':>5s} {'ms/eval':>7s}   {'Δ objective':>11s} "
        f"{'ratio':>6s}"
    )
    print(head)
    for name, matrix, dirichlet, reg, lam, mu in METHODS:
        x64 = log_softmax(z, 1) if dirichlet else z
        xt, yt = torch.from_numpy(x64), torch.from_numpy(y).long()
        setting = (matrix, reg, lam, mu)
        fit_calibkit(xt, yt, *setting)  # warm-up
        t_ck, (l_ck, it_ck, ev_ck, conv) = timed(fit_calibkit, args.reps, xt, yt, *setting)
        t_sp, (l_sp, it_sp, ev_sp, _) = timed(fit_scipy, args.reps, x64, y, *setting)
        flag = "" if conv else "  (calibkit: not converged)"
        print(
            f"{name:18s} {t_ck * 1e3:7.1f}ms {it_ck:5d} {ev_ck:5d} {t_ck / ev_ck * 1e3:7.2f}   "
            f"{t_sp * 1e3:7.1f}ms {it_sp:5d} {ev_sp:5d} {t_sp / ev_sp * 1e3:7.2f}   "
            f"{l_ck - l_sp:11.2e} {t_ck / t_sp:5.2f}x{flag}"
        )
    print("\nratio = calibkit time / scipy time (target <= 2); Δ objective = calibkit - scipy")


if __name__ == "__main__":
    main()
