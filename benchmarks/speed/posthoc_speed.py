"""Speed of calibkit's post-hoc fits against netcal and plain recipes, with the NLL or ECE
each reaches beside its time (faster must not mean worse).

    python benchmarks/speed/posthoc_speed.py           # temperature and grid fits
    python benchmarks/speed/posthoc_speed.py --odir  # + 5-fold CV MS-ODIR and Dir-ODIR, 5,000 x 100
    python benchmarks/speed/posthoc_speed.py --odir-file ../shared/data/logits/zoo/cifar100_*.npz
        # the same on real networks' logits: a stratified half (5,000) of each's test logits,
        # NLL on the other half (--cv-max-iter 50: the cross-validation fits' old cap)

    python benchmarks/speed/posthoc_speed.py --odir-file F --against-dirichletcal [--at L M]
        # + Kull et al.'s dirichletcal at the lambda and mu calibkit's Dir-ODIR chose
        # (--at: fit both at lambda L and mu M alone, skipping the cross-validation)

TorchUncertainty's scalers are not timed: its ``post_processing`` package imports the
package root, which needs torchvision, and no CPU build of torchvision exists here. The
``dirichletcal`` package's setup fails here, so ``--against-dirichletcal`` imports it from
its unpacked sdist with JAX installed beside it (its only other need):
``pip download --no-deps --no-binary :all: dirichletcal==0.5.3`` (or the sdist from PyPI),
unpack it, ``pip install --target DIR jax jaxlib``, then run with
``PYTHONPATH=DIR:dirichletcal-0.5.3``. Its ``FullDirichletCalibrator(reg_lambda, reg_mu,
reg_norm=True, ref_row=False)`` minimises calibkit's Dir-ODIR objective (the mean NLL of
W log p + b, λ/(K(K−1)) Σ_{j≠k} W_jk² + μ/K Σ b²) on the probabilities' logarithm.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
import warnings

import torch

from calibkit import posthoc
from calibkit._allocator import retain_freed_memory
from calibkit.cli._progress import progress
from calibkit.metrics import ece
from calibkit.posthoc import _affine as affine


def timed(fn, reps: int = 7) -> tuple[float, object]:
    out, times = None, []
    for _ in range(reps):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def data(n: int, k: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    z = 2.0 * torch.randn(n, k, generator=g, dtype=torch.float64)
    y = torch.multinomial(torch.softmax(z, 1), 1, generator=g)[:, 0]
    return (2.5 * z).float(), y  # an over-confident model: calibrated logits x 2.5


def nll_at(z, y, t: float) -> float:
    return float(torch.nn.functional.cross_entropy(z.double() / t, y))


def lbfgs_recipe(z, y) -> float:
    """The common recipe: LBFGS on T directly (may go negative, stops at its own tolerance)."""
    t = torch.ones(1, requires_grad=True)
    opt = torch.optim.LBFGS([t], lr=0.01, max_iter=50)

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(z / t, y)
        loss.backward()
        return loss

    opt.step(closure)
    return float(t)


def lbfgs_wolfe(z, y) -> float:
    log_t = torch.zeros(1, requires_grad=True)
    opt = torch.optim.LBFGS(
        [log_t],
        lr=1,
        max_iter=100,
        line_search_fn="strong_wolfe",
        tolerance_grad=1e-12,
        tolerance_change=1e-15,
    )

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(z / log_t.exp(), y)
        loss.backward()
        return loss

    opt.step(closure)
    return float(log_t.exp())


def temperature_table() -> None:
    print("Temperature scaling: median fit time and the NLL gap to the optimum (calibkit's fit)")
    print(f"{'':34s}{'5000 x 10':>26s}{'5000 x 100':>26s}")
    rows: dict[str, list[str]] = {}
    for k in (10, 100):
        z, y = data(5000, k)
        t_cal, cal = timed(lambda z=z, y=y: posthoc.create("ts").fit(z, y))
        best = cal.fit_report_.after
        cases = {
            "calibkit ts": (t_cal, float(cal.temperature_)),
            "LBFGS on log T + strong Wolfe": timed(lambda z=z, y=y: lbfgs_wolfe(z, y)),
            "LBFGS on T, lr 0.01 (common)": timed(lambda z=z, y=y: lbfgs_recipe(z, y)),
        }
        try:
            from netcal.scaling import TemperatureScaling as NetcalTS

            p = torch.softmax(z.double(), 1).numpy()

            def netcal_fit(p=p, yn=y.numpy().copy()):  # noqa: B008
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m = NetcalTS()
                    m.fit(p, yn)
                return float(1.0 / float(m.weights[0])) if hasattr(m, "weights") else math.nan

            cases["netcal TemperatureScaling"] = timed(netcal_fit, reps=3)
        except ImportError:
            print("netcal not installed: skipped")
        for name, (secs, t) in cases.items():
            gap = nll_at(z, y, t) - best if t > 0 and math.isfinite(t) else math.nan
            rows.setdefault(name, []).append(f"{secs * 1e3:8.1f} ms  T={t:7.4f} ΔNLL={gap:8.1e}")
    for name, cells in rows.items():
        print(f"{name:34s}" + "".join(f"{c:>26s}" for c in cells))


def grid_table() -> None:
    import torchmetrics.functional.classification as tmf

    z, y = data(5000, 100)
    temps = torch.arange(1, 1001, dtype=torch.float64) / 100
    t_cal, cal = timed(lambda: posthoc.create("ts-grid").fit(z, y), reps=3)

    def tm_loop():
        eces = [float(tmf.multiclass_calibration_error(z / t, y, 100, n_bins=15)) for t in temps]
        return float(temps[int(torch.tensor(eces).argmin())])

    t_tm, t_best = timed(tm_loop, reps=1)
    print("\nTS-grid over 0.01..10 (1000 temperatures) by ECE, 5000 x 100")
    print(
        f"  calibkit ts-grid       {t_cal:8.3f} s   T = {float(cal.temperature_):.2f}  "
        f"ECE = {ece(z / cal.temperature_, y):.5f}"
    )
    print(
        f"  torchmetrics loop      {t_tm:8.3f} s   T = {t_best:.2f}  ECE = {ece(z / t_best, y):.5f}"
    )
    print(f"  ratio                  {t_tm / t_cal:8.1f}x  (target >= 10x)")


def odir_table(
    path: str | None = None, against: bool = False, at: tuple[float, float] | None = None
) -> None:
    if path is None:
        z, y, what = *data(5000, 100, seed=1), "synthetic"
        zt, yt = data(5000, 100, seed=2)
    else:
        import numpy as np

        from calibkit.posthoc._compare import stratified_split

        with np.load(path) as f:
            z_all, y_all = torch.from_numpy(f["logits"]), torch.from_numpy(f["labels"])
        cal, test = stratified_split(y_all, 0.5, seed=0)
        z, y, zt, yt, what = z_all[cal], y_all[cal], z_all[test], y_all[test], path
    n, k = z.shape
    how = (
        "5-fold CV over the 7 x 7 grid (lambda, mu in 1e-2..1e4)"
        if at is None
        else f"at lambda = {at[0]:g}, mu = {at[1]:g} alone (no cross-validation)"
    )
    print(
        f"\n{how}, {n} x {k} ({what}), cross-validation fits capped at "
        f"{affine.CV_MAX_ITER} iterations"
    )
    total = 0.0
    point = "" if at is None else f":lambdas=[{at[0]!r}],mus=[{at[1]!r}]"  # no CV
    with progress(2 + against, "ODIR fits", True) as tick:  # minutes: a line every few s
        c, secs, total = _odir_fits(point, z, y, zt, yt, tick)
        if against:
            dirichletcal_row(c, secs, at is not None, z, y, zt, yt)
            tick(1)
    print(f"  total      {total:6.1f} s   (target < 60 s)")


def _odir_fits(point: str, z, y, zt, yt, tick) -> tuple[object, float, float]:
    """MS-ODIR and Dir-ODIR fitted and reported in turn; (the Dir-ODIR fit, its seconds,
    both fits' seconds)."""
    total = 0.0
    for spec in ("ms-odir", "dir-odir"):
        start = time.perf_counter()
        c = posthoc.create(spec + point).fit(z, y)
        secs = time.perf_counter() - start
        total += secs
        r = c.fit_report_
        nll = float(torch.nn.functional.cross_entropy(c(zt).double(), yt))
        print(
            f"  {spec:10s} {secs:6.1f} s   lambda = {c.lambda_:g}, mu = {c.mu_:g}, final fit "
            f"{r.iterations} iterations, {'converged' if r.converged else 'NOT converged'}; "
            f"NLL on the other half {float(torch.nn.functional.cross_entropy(zt.double(), yt)):.5f}"
            f" -> {nll:.5f}"
        )
        tick(1)
    return c, secs, total


def odir_objective(w: torch.Tensor, b: torch.Tensor, logp: torch.Tensor, y, lam, mu) -> float:
    """Dir-ODIR's objective at (W, b): the mean NLL of W log p + b, λ/(K(K−1)) Σ_{j≠k}
    W_jk² and μ/K Σ b² (docs/methods.md)."""
    k = w.shape[0]
    nll = torch.nn.functional.cross_entropy(logp @ w.T + b, y)
    off = (w - torch.diag(torch.diag(w))).pow(2).sum() / (k * (k - 1))
    return float(nll + lam * off + mu * b.pow(2).sum() / k)


def dirichletcal_row(c, ours_secs: float, one_point: bool, z, y, zt, yt) -> None:
    """Kull et al.'s ``FullDirichletCalibrator`` at the λ and μ calibkit's fit ``c`` chose
    (in ``ours_secs``: the fit alone where ``one_point``, cross-validation included
    otherwise), on the same half: its time and its ratio to calibkit's, test NLL, objective
    and distance from calibkit's map."""
    from dirichletcal import FullDirichletCalibrator

    logp, logpt = (torch.log_softmax(t.double(), 1) for t in (z, zt))
    start = time.perf_counter()
    theirs = FullDirichletCalibrator(
        reg_lambda=c.lambda_, reg_mu=c.mu_, reg_norm=True, ref_row=False
    ).fit(logp.exp().numpy(), y.numpy())
    secs = time.perf_counter() - start
    weights = torch.as_tensor(theirs.weights, dtype=torch.float64)
    w, b = weights[:, :-1], weights[:, -1]
    ours_w, ours_b = c.weight_[0].double(), c.bias_[0].double()
    nll = float(torch.nn.functional.cross_entropy(logpt @ w.T + b, yt))
    ours_nll = float(torch.nn.functional.cross_entropy(c(zt).double(), yt))
    objective = odir_objective(w, b, logp, y, c.lambda_, c.mu_)
    ours_objective = odir_objective(ours_w, ours_b, logp, y, c.lambda_, c.mu_)
    print(
        f"  dirichletcal at the same lambda and mu: {secs:6.1f} s, {secs / ours_secs:.0f}x "
        f"calibkit's {'fit' if one_point else 'cross-validated fit'}; NLL on the other half "
        f"{nll:.5f} (calibkit {ours_nll:.5f}); objective {objective:.8f} (calibkit "
        f"{ours_objective:.8f}); "
        f"largest |W - W_calibkit| {float((w - ours_w).abs().max()):.2e}, "
        f"|b - b_calibkit| {float((b - ours_b).abs().max()):.2e}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--odir", action="store_true", help="also time the cross-validated ODIR fits (minutes)"
    )
    parser.add_argument(
        "--odir-file", nargs="+", help="only the ODIR fits, on each of these files' logits"
    )
    parser.add_argument(
        "--against-dirichletcal",
        action="store_true",
        help="with --odir-file: also fit dirichletcal at the lambda and mu calibkit chose",
    )
    parser.add_argument(
        "--at",
        nargs=2,
        type=float,
        metavar=("LAMBDA", "MU"),
        help="with --odir-file: fit at this lambda and mu alone (no cross-validation)",
    )
    parser.add_argument(
        "--cv-max-iter",
        type=int,
        default=affine.CV_MAX_ITER,
        help=f"iteration cap of the ODIR cross-validation fits (default {affine.CV_MAX_ITER})",
    )
    parser.add_argument(
        "--glibc-defaults",
        action="store_true",
        help="measure with glibc's malloc defaults instead of calibkit._allocator's setting",
    )
    args = parser.parse_args()
    retained = not args.glibc_defaults and retain_freed_memory()
    print(f"freed memory retained (calibkit._allocator, as the calibkit command): {retained}")
    affine.CV_MAX_ITER = args.cv_max_iter
    if args.odir_file:
        for path in args.odir_file:
            odir_table(path, args.against_dirichletcal, args.at)
        return
    temperature_table()
    grid_table()
    if args.odir:
        odir_table()


if __name__ == "__main__":
    main()
