"""Neural Clamping: with δ held at 0 it is temperature scaling fitted with focal loss; the
data-driven start is Theorem 3.2's formula; saving is safe; bad input fails clearly."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar
from torch import nn

from calibkit import posthoc
from calibkit.losses._weighted import Focal
from calibkit.posthoc._clamping import NeuralClamping, _fit_pool, init_delta
from tests.test_cli import run, run_ok


def toy_model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 4)).double()


def toy_data(n: int = 200, seed: int = 1):
    """Inputs, and labels drawn from softmax(3 f(x)) of toy_model(): f is under-confident."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 3, generator=g, dtype=torch.float64) * 4 - 2
    with torch.no_grad():
        p = torch.softmax(3 * toy_model()(x), 1)
    return x, torch.multinomial(p, 1, generator=g)[:, 0]


def test_delta_held_at_zero_is_focal_loss_temperature_scaling():
    model = toy_model()
    x, y = toy_data()
    nc = NeuralClamping(fit_delta=False, gamma_pool=(2.0,), lr=2e-4, epochs=3000)
    nc.fit(model, x, y)
    assert torch.equal(nc.delta_, torch.zeros(3, dtype=torch.float64))
    with torch.no_grad():
        z = model(x)
    focal = Focal(gamma=2.0, reduction="sum")
    best = minimize_scalar(
        lambda s: float(focal(z / math.exp(s), y)),
        bounds=(-5, 5),
        method="bounded",
        options={"xatol": 1e-10},
    )
    assert 0.2 < math.exp(best.x) < 0.6  # a finite optimum: the model is under-confident
    assert float(nc.temperature_) == pytest.approx(math.exp(best.x), rel=1e-4)


def test_data_driven_start_is_theorem_3_2():
    model = toy_model(3)
    x, _ = toy_data()
    settings = NeuralClamping.check_settings(init="data")
    bounds = (torch.full((3,), -2.5, dtype=x.dtype), torch.full((3,), 2.5, dtype=x.dtype))
    delta = init_delta(model, x, bounds, torch.Generator(), settings)
    xg = x.clone().requires_grad_(True)
    p = torch.softmax(model(xg), 1)
    (g,) = torch.autograd.grad(-(p * p.log()).sum(), xg)
    g = g.sum(0)
    lo, hi = x.amin(0), x.amax(0)
    expected = torch.where(g < 0, -(lo + 2.5), torch.where(g > 0, 2.5 - hi, 0.0))
    assert torch.allclose(delta, expected) and (delta != 0).all()
    assert bool(((x + delta) >= -2.5 - 1e-12).all()) and bool(((x + delta) <= 2.5 + 1e-12).all())


def test_gamma_is_chosen_from_the_pool_by_calibration_ece():
    from calibkit.metrics import ece

    model = toy_model()
    x, y = toy_data()
    scores = {}
    for gamma in (0.0, 3.0):
        one = NeuralClamping(gamma_pool=(gamma,), epochs=20).fit(model, x, y)
        with torch.no_grad():
            scores[gamma] = ece(one(x), y)
    both = NeuralClamping(gamma_pool=(0.0, 3.0), epochs=20).fit(model, x, y)
    assert both.gamma_ == min(scores, key=scores.get)


def test_lambda_is_chosen_with_gamma_by_calibration_ece():
    """Issue 68 §3: the paper chooses λ and γ by ECE on the calibration split (§4.1); with
    several ``lam_scale`` every (γ, λ) pair is fitted and the one of least ECE kept, equal
    to that pair fitted alone."""
    from calibkit.metrics import ece

    model = toy_model()
    x, y = toy_data()
    settings = {"epochs": 20, "lr": 0.01}
    scores, alone = {}, {}
    for gamma in (0.0, 3.0):
        for scale in (0.0, 30.0):
            one = NeuralClamping(gamma_pool=gamma, lam_scale=scale, **settings).fit(model, x, y)
            with torch.no_grad():
                scores[gamma, scale] = ece(one(x), y)
            alone[gamma, scale] = one
    assert len({round(v, 6) for v in scores.values()}) == 4  # λ changes the fit here
    pool = NeuralClamping(gamma_pool=(0.0, 3.0), lam_scale=[0.0, 30.0], **settings).fit(model, x, y)
    best = min(scores, key=scores.get)
    assert (pool.gamma_, pool.fit_report_.details["lam_scale"]) == best
    assert torch.allclose(pool.delta_, alone[best].delta_, atol=1e-10)
    with pytest.raises(ValueError, match=r"lam_scale: multiples of the initial loss in \[0, "):
        NeuralClamping(lam_scale=[0.1, -1]).checked()


def test_the_pool_fitted_in_shared_steps_equals_separate_fits(monkeypatch):
    """The γ of a pool are fitted in the same forward and backward passes, each step's batch
    in pieces with the gradients summed; each equals a fit of that γ alone in whole batches
    up to summation order (float64 toy model, a batch of 64: several steps per epoch, so the
    shared batch order matters)."""
    model = toy_model()
    x, y = toy_data()
    pool = (0.0, 1.0, 3.0)
    settings = NeuralClamping.check_settings(gamma_pool=pool, epochs=15, batch_size=64, lr=0.01)
    with monkeypatch.context() as m:
        m.setattr("calibkit.posthoc._clamping.CPU_INPUT_VALUES", 3 * 30)  # pieces of 10 samples
        together = _fit_pool(model, x, y, None, settings)
    for gamma, fit in zip(pool, together, strict=True):
        alone = _fit_pool(model, x, y, None, settings | {"gamma_pool": (gamma,)})[0]
        assert not torch.equal(fit["delta"], torch.zeros_like(fit["delta"]))
        torch.testing.assert_close(fit["delta"], alone["delta"], rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(fit["log_t"], alone["log_t"], rtol=1e-12, atol=1e-14)
        assert fit["end"] == pytest.approx(alone["end"], rel=1e-12)


def test_progress_is_reported_after_each_epoch_of_the_pool():
    calls = []
    NeuralClamping(gamma_pool=(0.0, 2.0), epochs=4).fit(
        toy_model(), *toy_data(), progress=lambda i, n, _: calls.append((i, n))
    )
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_the_history_is_the_objective_of_each_epoch():
    """One record per epoch of the chosen γ: the objective averaged over the epoch's samples
    as δ and T moved (with one full batch per epoch, the objective where the epoch starts),
    and T at the epoch's end; the objective falls on the toy model."""
    model = toy_model()
    x, y = toy_data()
    nc = NeuralClamping(gamma_pool=(2.0,), epochs=6, batch_size=len(y), lr=0.01).fit(model, x, y)
    h = nc.history()
    assert [r["epoch"] for r in h] == list(range(1, 7))
    assert h[-1]["temperature"] == pytest.approx(float(nc.temperature_), rel=1e-12)
    # epoch 1's one step is taken at the start: focal at the starting T plus λ'‖δ0‖²
    settings = NeuralClamping.check_settings(
        gamma_pool=(2.0,), epochs=6, batch_size=len(y), lr=0.01
    )
    fit = _fit_pool(model, x, y, None, settings)[0]
    assert h[0]["objective"] == pytest.approx(fit["start"], rel=1e-9)
    assert [r["objective"] for r in h] == [r["objective"] for r in fit["history"]]
    assert h[-1]["objective"] < h[0]["objective"]
    assert NeuralClamping(fit_delta=False, gamma_pool=(2.0,)).fit(model, x, y).history() == []


def test_save_load_round_trip_and_tampering(tmp_path):
    model = toy_model()
    x, y = toy_data()
    nc = NeuralClamping(epochs=5).fit(model, x, y)
    path = nc.save(tmp_path / "nc.safetensors")
    back = posthoc.load(path, model)
    assert torch.equal(back(x), nc(x)) and back.gamma_ == nc.gamma_
    raw = bytearray(path.read_bytes())
    raw[-3] ^= 0xFF
    (tmp_path / "bad.safetensors").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="checksum mismatch"):
        posthoc.load(tmp_path / "bad.safetensors", model)


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda m: NeuralClamping(init="data").fit(m, *toy_data()),
            "init='data' needs input_range",
        ),
        (
            lambda m: NeuralClamping(gamma_pool=(-1,)).fit(m, *toy_data()),
            r"gamma_pool: focal γ values in \[0, 20\]",
        ),
        (
            lambda m: NeuralClamping(init="zeros").fit(m, *toy_data()),
            "init: expected one of 'random', 'data'",
        ),
        (
            lambda m: posthoc.create("neural-clamping:epochs=0"),
            "epochs: expected an integer in 1..",
        ),
        (
            lambda m: NeuralClamping(init="data").fit(m, *toy_data(), input_range=(0, 1)),
            r"input_range: the calibration inputs span \[.*\], outside the range given",
        ),
        (
            lambda m: NeuralClamping().fit(m, torch.full((2, 3), math.nan), torch.zeros(2)),
            "NaN or inf",
        ),
        (lambda m: NeuralClamping()(torch.zeros(1, 3)), "not fitted yet"),
        (
            lambda m: NeuralClamping(epochs=1).fit(m, *toy_data())(torch.zeros(2, 5)),
            r"expected samples of shape \(3,\), got \(5,\)",
        ),
    ],
)
def test_bad_input_fails_with_one_line(make, message):
    with pytest.raises(ValueError, match=message):
        make(toy_model())


def test_calibrate_command_fits_any_method_on_a_run_and_writes_logits_for_compare(tmp_path, capsys):
    from calibkit.training import TrainConfig, train

    train(TrainConfig(epochs=2), tmp_path / "run")
    spec = "neural-clamping:epochs=3,init=data"
    out = json.loads(run_ok(["calibrate", spec, str(tmp_path / "run"), "--json"], capsys))
    assert out["fit"]["details"]["gamma"] == 1.0
    with np.load(tmp_path / "run-neural-clamping" / "logits.npz") as f:
        assert f["logits_test"].shape == (497, 10) and f["labels_val"].shape == (300,)
    back = posthoc.load(
        tmp_path / "run-neural-clamping" / "calibrator.safetensors", torch.nn.Linear(64, 10)
    )
    assert back.settings()["init"] == "data" and back.fit_report_.details["gamma"] == 1.0
    run_ok(["calibrate", "ts", str(tmp_path / "run"), "-o", str(tmp_path / "ts")], capsys)
    with (
        np.load(tmp_path / "ts" / "logits.npz") as f,
        np.load(tmp_path / "run" / "logits.npz") as g,
    ):
        t = float(posthoc.load(tmp_path / "ts" / "calibrator.safetensors").temperature_)
        assert np.allclose(f["logits_test"], g["logits_test"] / t, atol=1e-5)
    train(
        TrainConfig(epochs=1, data="gaussian-toy:n_train=20,n_test=10", model="mlp"),
        tmp_path / "toy",
    )
    code, _, err = run(["calibrate", spec, str(tmp_path / "toy")], capsys)
    assert code == 2 and "init='data' needs input_range" in err
    code, _, err = run(["calibrate", "ts", str(tmp_path / "nothing")], capsys)
    assert code == 2 and "is not a finished calibkit run" in err
    code, _, err = run(["calibrate", "neural-clamping:epochs=0", str(tmp_path / "run")], capsys)
    assert code == 2 and "epochs: expected an integer in 1.." in err


def test_convergence_is_measured_from_the_objective_and_the_temperature():
    """Issue 55 §1: the report said "converged" on a hard-coded True; NCToolkit's own demo
    ended with T still rising (1.78)."""
    from calibkit.posthoc._clamping import converged

    def history(objectives, temperatures):
        return [
            {"epoch": i + 1, "objective": o, "temperature": t}
            for i, (o, t) in enumerate(zip(objectives, temperatures, strict=True))
        ]

    flat = [0.5, 0.42, 0.401, 0.4, 0.4, 0.4, 0.4]
    assert converged(history(flat, [1.5, 1.7, 1.75, 1.76, 1.76, 1.76, 1.76]))
    assert not converged(history(flat, [1.5, 1.55, 1.6, 1.65, 1.7, 1.74, 1.78]))  # T rising
    assert not converged(history([0.9, 0.8, 0.7, 0.6, 0.5, 0.45, 0.4], [1.76] * 7))
    assert not converged(history(flat[:3], [1.76] * 3))  # fewer than 5 epochs: cannot tell


def test_lambda_is_taken_at_the_warm_temperature_or_at_t_1_as_the_paper_says():
    """Issue 55 §6: λ' = 0.1 × the initial focal loss; calibkit's default takes it at the
    warm-started T (smaller where T* is far from 1), ``lam_at="one"`` at T = 1 (§4.1)."""
    model = toy_model()
    x, y = toy_data()
    focal = Focal(gamma=1.0, reduction="mean")
    with torch.no_grad():
        z = model(x)  # δ held at 0: the network as it is
    warm = NeuralClamping(fit_delta=False, init_scale=1e-300).fit(model, x, y)
    one = NeuralClamping(fit_delta=False, init_scale=1e-300, lam_at="one").fit(model, x, y)
    t = float(warm.temperature_)
    assert one.lam_ == pytest.approx(0.1 * float(focal.compute(z, y)), rel=1e-9)
    assert warm.lam_ == pytest.approx(0.1 * float(focal.compute(z / t, y)), rel=1e-6)
    assert warm.lam_ < one.lam_  # the under-confident toy's optimum T < 1 lowers the loss
    with pytest.raises(ValueError, match="lam_at"):
        NeuralClamping(lam_at="start").checked()


def test_nctoolkit_objective_and_start_are_settings():
    """Issue 55 §5: NCToolkit's ``NCWrapper.train_NC`` penalises ‖δ‖ unsquared and starts T
    at 1; ``penalty="norm"`` and ``t_start="one"`` are those, and the fit's objective is
    then focal + λ'‖δ‖ (computed again here from the fitted δ and T)."""
    model = toy_model()
    x, y = toy_data()
    nc = NeuralClamping(penalty="norm", t_start="one", lam=0.01, epochs=5, lr=1e-3).fit(model, x, y)
    assert nc.fit_report_.details["temperature_start"] == 1.0
    assert nc.fit_report_.objective == "focal + λ'‖δ‖"
    with torch.no_grad():
        z = model(x + nc.delta_) / nc.temperature_
    focal = Focal(gamma=1.0, reduction="mean")
    expected = float(focal.compute(z, y)) + 0.01 * float(torch.linalg.vector_norm(nc.delta_))
    assert nc.fit_report_.after == pytest.approx(expected, rel=1e-12)
    squared = NeuralClamping(lam=0.01, epochs=5, lr=1e-3).fit(model, x, y)
    assert squared.fit_report_.details["temperature_start"] != 1.0  # the warm start
    with pytest.raises(ValueError, match="t_start: 'one' needs fit_delta=true"):
        NeuralClamping(t_start="one", fit_delta=False).checked()
    with pytest.raises(ValueError, match="penalty"):
        NeuralClamping(penalty="l1").checked()
