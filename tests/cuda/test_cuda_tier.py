"""The CUDA tier (issue 40 §2): the same cases on CUDA and on the CPU, compared. Marked
``cuda``; skipped with one line where no CUDA device exists, so CI (CPU only) stays green.
`pytest -m cuda` runs them alone; benchmarks/gpu/gpu_check.sh runs them on a GPU machine.

What each catches (on the code before issue 40):
- evaluate with optimal ECE on CUDA tensors crashed (temperatures._argmin_smallest_t indexed
  CPU temperatures with CUDA positions);
- affine fits (vector, matrix, Dirichlet) built their start and penalties on the CPU;
- histogram, scaling binning built their bin edges on the CPU (torch.quantile mixed devices);
- the training rate measured its matrix-product reference on the CPU after a GPU run;
- the rest hold the line: every metric, the meter, the adapters, save/load across devices,
  ONNX export, training, packed training, MaC-Cal, Neural Clamping, the bench.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from calibkit import metrics as M
from calibkit import posthoc
from tests.conftest import make_logits

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason="no CUDA device here (the CUDA tier runs on a GPU: benchmarks/gpu/gpu_check.sh)",
    ),
]

CUDA = torch.device("cuda")


@pytest.fixture(scope="module")
def zy():
    z, y = make_logits(3000, 10, 0, dtype=np.float32)
    return torch.as_tensor(z), torch.as_tensor(y)


FUNCTIONS = [
    "ece",
    "mce",
    "aece",
    "rms_ce",
    "classwise_ece",
    "nll",
    "brier",
    "ks_error",
    "smooth_ece",
    "refinement_auroc",
    "aurc",
    "accuracy",
    "optimal_ece",
]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_metric_on_cuda_equals_the_cpu(zy, name):
    z, y = zy
    fn = getattr(M, name)
    assert fn(z.to(CUDA), y.to(CUDA)) == pytest.approx(fn(z, y), rel=1e-6, abs=1e-9)


def test_evaluate_with_optimal_ece_and_the_bootstrap_on_cuda(zy):
    z, y = zy
    cpu = M.evaluate(z, y, bootstrap=100, seed=0)
    gpu = M.evaluate(z.to(CUDA), y.to(CUDA), bootstrap=100, seed=0)
    for k, v in cpu.metrics.items():
        assert gpu.metrics[k] == pytest.approx(v, rel=1e-6, abs=1e-9), k
    for k, (lo, hi) in cpu.intervals.items():
        assert gpu.intervals[k] == pytest.approx((lo, hi), rel=1e-5, abs=1e-7), k
    assert gpu.settings["optimal_temperature"] == cpu.settings["optimal_temperature"]


def test_the_meter_on_cuda(zy):
    z, y = zy
    meter = M.CalibrationMeter()
    for part in torch.arange(len(y)).split(700):
        meter.update(z[part].to(CUDA), y[part].to(CUDA))
    got, want = meter.compute(), M.evaluate(z, y, optimal=False).metrics
    for k, v in got.items():
        assert v == pytest.approx(want[k], rel=1e-6, abs=1e-9), k


LOGITS_METHODS = [n for n in posthoc.names() if posthoc.REGISTRY.factory(n).level == "logits"]
FAST = {
    "dir-l2": "dir-l2:lambdas=[0.01,1],folds=2",
    "dir-odir": "dir-odir:lambdas=[0.01,1],mus=[0.01,1],folds=2",
    "ms-odir": "ms-odir:lambdas=[0.01,1],mus=[0.01,1],folds=2",
}


@pytest.mark.parametrize("name", LOGITS_METHODS)
def test_every_calibrator_fits_on_cuda_as_on_the_cpu_and_loads_on_the_cpu(zy, name, tmp_path):
    z, y = zy
    zv, yv, zt = z[:1500], y[:1500], z[1500:]
    spec = FAST.get(name, name)
    cpu = posthoc.create(spec).fit(zv, yv)
    gpu = posthoc.create(spec).fit(zv.to(CUDA), yv.to(CUDA))
    out = gpu.predict_proba(zt.to(CUDA))
    assert out.device.type == "cuda"
    np.testing.assert_allclose(out.cpu().numpy(), cpu.predict_proba(zt).numpy(), atol=2e-4)
    path = gpu.save(tmp_path / "cal.safetensors")
    back = posthoc.load(path)  # on the CPU, as a machine without CUDA loads it
    np.testing.assert_allclose(back.predict_proba(zt).numpy(), out.cpu().numpy(), atol=1e-6)


def test_onnx_export_of_a_cuda_fitted_calibrator(zy, tmp_path):
    pytest.importorskip("onnxruntime")
    from calibkit.export import to_onnx

    z, y = zy
    cal = posthoc.create("ts").fit(z.to(CUDA), y.to(CUDA))
    assert to_onnx(cal, tmp_path / "ts.onnx").exists()  # checked against PyTorch inside


def test_torchmetrics_adapter_on_cuda(zy):
    pytest.importorskip("torchmetrics")
    from calibkit.adapters.torchmetrics import ECE, AdaptiveECE

    z, y = zy
    for cls, fn in ((ECE, M.ece), (AdaptiveECE, M.aece)):
        metric = cls().to(CUDA)
        metric.update(z.to(CUDA), y.to(CUDA))
        assert float(metric.compute()) == pytest.approx(fn(z, y), rel=1e-6)


def _train(tmp_path, device, name, **more):
    from calibkit.training import TrainConfig, train

    config = TrainConfig(
        data="digits:train_size=300", model="cnn", epochs=2, batch_size=32, device=device, **more
    )
    return train(config, tmp_path / name)


def test_one_epoch_of_training_on_cuda_is_close_to_the_cpu(tmp_path):
    gpu = _train(tmp_path, "cuda", "gpu").history[-1]
    cpu = _train(tmp_path, "cpu", "cpu").history[-1]
    assert json.loads((tmp_path / "gpu" / "run.json").read_text())["device"].startswith("cuda")
    assert abs(gpu["val_acc"] - cpu["val_acc"]) < 0.08  # bf16 autocast on CUDA
    assert gpu["train_loss"] == pytest.approx(cpu["train_loss"], rel=0.1)


def test_packed_members_on_cuda_match_networks_trained_alone(tmp_path):
    from calibkit.training import TrainConfig, train
    from calibkit.training._trainer import train_packed

    configs = [
        TrainConfig(
            data="digits:train_size=300",
            model="cnn",
            epochs=2,
            batch_size=32,
            device="cuda",
            loss=loss,
            seed=seed,
        )
        for loss, seed in (("ce", 1), ("focal:gamma=3", 2))
    ]
    train_packed(configs, [tmp_path / "p0", tmp_path / "p1"])
    for i, config in enumerate(configs):
        alone = train(config, tmp_path / f"a{i}").history[-1]
        packed = json.loads((tmp_path / f"p{i}" / "history.json").read_text())[-1]
        assert abs(alone["val_acc"] - packed["val_acc"]) < 0.03  # bf16: summation order
        assert packed["train_loss"] == pytest.approx(alone["train_loss"], rel=0.05)


def test_maccal_and_neural_clamping_on_cuda(tmp_path):
    from calibkit.runs import calibrate_run

    _train(tmp_path, "cuda", "stage1")
    cal = calibrate_run(tmp_path / "stage1", "maccal:epochs=2", tmp_path / "m", device="cuda")
    with np.load(tmp_path / "m" / "logits.npz") as f:
        assert np.isfinite(f["logits_test"]).all()
    assert cal.history()
    nc = calibrate_run(
        tmp_path / "stage1", "neural-clamping:epochs=3", tmp_path / "nc", device="cuda"
    )
    nc_cpu = calibrate_run(
        tmp_path / "stage1", "neural-clamping:epochs=3", tmp_path / "ncc", device="cpu"
    )
    assert float(nc.temperature_) == pytest.approx(float(nc_cpu.temperature_), rel=0.05)


def test_a_two_run_bench_on_cuda_packs_and_finishes(tmp_path):
    from calibkit.bench._runner import run_bench
    from calibkit.bench._spec import resolve
    from calibkit.bench._store import Store

    raw = {
        "name": "cuda",
        "seeds": [1, 2],
        "train": {"epochs": 2, "batch_size": 32},
        "datasets": [{"data": "digits:train_size=300", "models": ["cnn"]}],
        "methods": [{"name": "CE", "loss": "ce"}],
        "posthoc": ["ts", "hist-binning"],
    }
    seen = []
    counts = run_bench(
        resolve(raw), tmp_path, workers=1, progress=lambda *a, status=None: seen.append(status)
    )
    assert counts["done"] == 2 and counts["failed"] == 0
    assert any(s and s.startswith("pack of 2") for s in seen)
    runs = [json.loads(p.read_text()) for p in (tmp_path / "train").glob("*/run.json")]
    assert len(runs) == 2 and all(r["device"].startswith("cuda") for r in runs)
    assert all(r["packed"]["members"] == 2 for r in runs)
    assert Store(tmp_path / "results.sqlite").done()


@pytest.mark.parametrize("command", ["evaluate", "fit", "compare"])
def test_the_file_commands_compute_on_cuda(tmp_path, zy, capsys, command):
    from tests.test_cli import run_ok

    z, y = zy
    path = tmp_path / "z.npz"
    np.savez(
        path,
        logits_val=z[:1500].numpy(),
        labels_val=y[:1500].numpy(),
        logits_test=z[1500:].numpy(),
        labels_test=y[1500:].numpy(),
    )
    args = {
        "evaluate": ["evaluate", str(path), "--bootstrap", "50", "--json"],
        "fit": [
            "fit",
            "--method",
            "ts",
            "--val",
            str(path),
            "-o",
            str(tmp_path / "t.calib"),
            "--json",
        ],
        "compare": ["compare", "--file", str(path), "--methods", "ts,vector", "--json"],
    }
    on_cpu = json.loads(run_ok(args[command], capsys))
    if command == "fit":
        (tmp_path / "t.calib").unlink()
    on_gpu = json.loads(run_ok([*args[command], "--device", "cuda"], capsys))
    if command == "evaluate":
        assert on_gpu["metrics"]["ece"] == pytest.approx(on_cpu["metrics"]["ece"], rel=1e-6)
    elif command == "fit":
        assert on_gpu["after"]["ece"] == pytest.approx(on_cpu["after"]["ece"], rel=1e-5)
        apply = ["apply", str(tmp_path / "t.calib"), str(path), "-o", str(tmp_path / "o.npz")]
        run_ok([*apply, "--device", "cuda"], capsys)
        with np.load(tmp_path / "o.npz") as f:
            assert f["logits"].shape == (1500, 10)
    else:
        a, b = on_cpu["methods"]["ts"]["metrics"], on_gpu["methods"]["ts"]["metrics"]
        assert b["ece"] == pytest.approx(a["ece"], rel=1e-5)


def test_the_training_rate_reference_is_measured_on_the_gpu():
    """The GPU study's 'matmul GFLOP/s' was the CPU's product (160.8 on an H100 machine)
    beside the pack's 12,928 training GFLOP/s: the reference must run where training ran."""
    from calibkit.training._throughput import matmul_gflops

    assert matmul_gflops(CUDA, repeats=2) > 10 * matmul_gflops("cpu", repeats=2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_precision_probabilities_on_cuda_are_refused(zy, dtype):
    """Issue 54 §1 on the GPU: a half-precision softmax made on CUDA is refused, not read as
    logits, by the functions, the meter and the torchmetrics adapter."""
    from calibkit.adapters.torchmetrics import ECE
    from calibkit.metrics import CalibrationMeter

    z, y = (t.to(CUDA) for t in zy)
    p = torch.softmax(z, 1).to(dtype)
    for call in (
        lambda: M.ece(p, y),
        lambda: CalibrationMeter().update(p, y),
        lambda: ECE().to(CUDA)(p, y),
    ):
        with pytest.raises(ValueError, match="look like probabilities"):
            call()
