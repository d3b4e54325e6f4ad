"""ONNX export checked in onnxruntime: every logits calibrator, a network with its calibrator
as one graph, the model-level methods, and `calibkit apply --onnx` on a calibrator file and on
a calibrated run reproduce PyTorch's outputs on batches of another size than the one traced;
bad cases fail with one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

from calibkit import posthoc
from calibkit.posthoc._checks import next_up
from tests.conftest import make_logits
from tests.test_cli import run_ok

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from calibkit.export import ExportError, ExportMismatchError, run_onnx, to_onnx

LOGITS_METHODS = [
    *posthoc.names("logits"),
    "isotonic:mode=one-vs-rest",
    "hist-binning:mode=one-vs-rest",
]


@pytest.fixture(scope="module")
def logits():
    z, y = make_logits(3000, 10, 0, dtype=np.float32)
    return torch.from_numpy(z), torch.from_numpy(y)


@pytest.mark.parametrize("spec", ["hist-binning", "isotonic", "scaling-binning"])
def test_confidence_maps_export_to_the_last_bit_on_a_real_network(spec, real_logits, tmp_path):
    """Issue 30.4: on the ResNet-110's test logits, top-label histogram binning differed in
    139 of 10,000 rows (up to 3.5e-4 relative, in the rescaled classes): 1 − c cancelled for
    confidences near 1, and onnxruntime's exp differs from PyTorch's in the last bit. The
    rescaling now divides by the sum of the other probabilities instead."""
    zv, yv, zt, _ = (torch.from_numpy(a) for a in real_logits)
    cal = posthoc.create(spec).fit(zv, yv)
    got, want = run_onnx(to_onnx(cal, tmp_path / "c.onnx", optimize=False), zt), cal(zt).numpy()
    assert np.allclose(got, want, rtol=2e-7, atol=0), float(np.abs(got / want - 1).max())
    assert (got == want).all(1).mean() > 0.999


@pytest.mark.parametrize("spec", LOGITS_METHODS)
def test_every_logits_calibrator_exports_to_the_same_numbers(spec, logits, tmp_path):
    z, y = logits
    spec = spec + (":folds=2,lambdas=[1],mus=[1]" if "odir" in spec else "")
    cal = posthoc.create(spec).fit(z[:1500], y[:1500])
    path = to_onnx(cal, tmp_path / "cal.onnx", optimize=False)
    got, want = run_onnx(path, z[1500:]), cal(z[1500:]).numpy()
    assert got.dtype == np.float32 and got.shape == (1500, 10)
    # the same float64 map, cast once: equal up to the last float32 bit
    assert np.allclose(got, want, rtol=2e-7, atol=0), float(np.abs(got - want).max())
    if cal.preserves_argmax:  # the float32 tie-break is in the graph too
        assert np.array_equal(got.argmax(1), z[1500:].argmax(1).numpy())


def test_probabilities_output_and_optimised_graph(logits, tmp_path):
    z, y = logits
    cal = posthoc.create("isotonic").fit(z[:1500], y[:1500])
    path = to_onnx(cal, tmp_path / "p.onnx", output="probs")  # onnxscript's optimiser on
    got = run_onnx(path, z[1500:1507])
    assert np.allclose(got, cal.predict_proba(z[1500:1507]).float().numpy(), atol=1e-7)
    assert np.allclose(got.sum(1), 1.0, atol=1e-6)


def test_network_and_calibrator_are_one_graph(tmp_path):
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 5),
    ).eval()
    x = torch.randn(400, 3, 16, 16)
    with torch.no_grad():
        z = net(x) * 4
    cal = posthoc.create("matrix").fit(z, torch.randint(5, (400,)))
    model = posthoc.CalibratedModel(net, cal)
    path = to_onnx(model, tmp_path / "net.onnx", example=x[:2], optimize=False)
    with torch.no_grad():
        want = model(x).numpy()
    assert np.allclose(run_onnx(path, x), want, rtol=1e-5, atol=1e-5)


def _toy():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 4))


def test_neural_clamping_exports(tmp_path):
    net = _toy()
    x = torch.rand(200, 3) * 4 - 2
    y = torch.randint(4, (200,))
    nc = posthoc.create("neural-clamping:epochs=5").fit(net, x, y)
    path = to_onnx(nc, tmp_path / "nc.onnx", example=x[:2], optimize=False)
    with torch.no_grad():
        want = nc(x).numpy()
    assert np.allclose(run_onnx(path, x), want, rtol=1e-5, atol=1e-6)


def test_maccal_exports(tmp_path):
    from calibkit import models

    torch.manual_seed(0)
    net = models.create("mlp:hidden=32", num_classes=4, input_shape=(3,))
    x, y = torch.rand(256, 3) * 4 - 2, torch.randint(4, (256,))
    mc = posthoc.create("maccal:epochs=2,width=16").fit(net, x, y)
    path = to_onnx(mc, tmp_path / "mc.onnx", example=x[:2], optimize=False)
    with torch.no_grad():
        want = mc(x).numpy()
    assert np.allclose(run_onnx(path, x), want, rtol=1e-5, atol=1e-6)


def test_errors_are_one_line(logits, tmp_path, monkeypatch):
    z, y = logits
    with pytest.raises(ValueError, match="not fitted yet"):
        to_onnx(posthoc.create("ts"), tmp_path / "x.onnx")
    with pytest.raises(ValueError, match="example: give one batch"):
        to_onnx(_toy(), tmp_path / "x.onnx")
    with pytest.raises(ValueError, match="at least 2 samples"):
        to_onnx(_toy(), tmp_path / "x.onnx", example=torch.zeros(1, 3))
    with pytest.raises(ValueError, match="output: expected one of logits, probs"):
        to_onnx(posthoc.create("ts").fit(z, y), tmp_path / "x.onnx", output="labels")

    class NoOnnxOp(nn.Module):  # ONNX has no nextafter
        def forward(self, x):
            return torch.nextafter(x, torch.zeros_like(x))

    with pytest.raises(ExportError, match=r"^cannot export NoOnnxOp to ONNX: ") as err:
        to_onnx(NoOnnxOp(), tmp_path / "x.onnx", example=torch.ones(2, 3))
    assert "\n" not in str(err.value) and not (tmp_path / "x.onnx").exists()

    import calibkit.export as export

    monkeypatch.setattr(export, "run_onnx", lambda path, x: np.full((len(x), 10), 7.0, np.float32))
    with pytest.raises(ExportMismatchError, match="onnxruntime's output differs"):
        to_onnx(posthoc.create("ts").fit(z, y), tmp_path / "x.onnx", optimize=False)


def test_missing_onnx_gives_the_install_hint(monkeypatch, tmp_path, logits):
    monkeypatch.setitem(__import__("sys").modules, "onnxruntime", None)
    cal = posthoc.create("ts").fit(*logits)
    with pytest.raises(ImportError, match=r"pip install 'calibkit\[onnx\]'$"):
        to_onnx(cal, tmp_path / "x.onnx")


def test_next_up_equals_nextafter_on_every_kind_of_float32():
    g = torch.Generator().manual_seed(0)
    bits = torch.randint(-(2**31), 2**31 - 1, (200_000,), generator=g).to(torch.int32)
    x = bits.view(torch.float32)
    x = x[torch.isfinite(x)]
    powers = torch.tensor([2.0**e for e in range(-149, 128)])
    special = torch.tensor([0.0, 1 - 2**-24, -708.3964, 3.4028235e38, 1e-45])
    x = torch.cat([x, powers, -powers, special, -special, torch.randn(10_000, generator=g)])
    want = torch.nextafter(x, torch.full_like(x, float("inf")))
    assert torch.equal(next_up(x), want)


def test_apply_exports_a_calibrator_file_and_a_calibrated_run(tmp_path, capsys):
    from calibkit.training import TrainConfig, train

    z, y = make_logits(600, 10, 1, dtype=np.float32)
    np.savez(tmp_path / "val.npz", logits=z, labels=y)
    run_ok(
        [
            "fit",
            "--method",
            "ts",
            "--val",
            str(tmp_path / "val.npz"),
            "-o",
            str(tmp_path / "ts.calib"),
        ],
        capsys,
    )
    out = json.loads(
        run_ok(
            ["apply", str(tmp_path / "ts.calib"), "--onnx", str(tmp_path / "ts.onnx"), "--json"],
            capsys,
        )
    )
    assert out == {
        "schema_version": 1,
        "onnx": {"path": str(tmp_path / "ts.onnx"), "output": "logits", "checked": True},
    }
    cal = posthoc.load(tmp_path / "ts.calib")
    assert np.array_equal(run_onnx(tmp_path / "ts.onnx", z), cal(torch.from_numpy(z)).numpy())

    train(TrainConfig(epochs=1), tmp_path / "run")
    run_ok(["calibrate", "ts", str(tmp_path / "run"), "-o", str(tmp_path / "run-ts")], capsys)
    text = run_ok(["apply", str(tmp_path / "run-ts"), "--onnx", str(tmp_path / "net.onnx")], capsys)
    assert "onnxruntime reproduces PyTorch's output" in text
    from calibkit.runs import run_evidence

    evidence, _ = run_evidence(tmp_path / "run-ts", device="cpu")
    x = evidence.inputs("test", None)
    with np.load(tmp_path / "run-ts" / "logits.npz") as saved:  # the calibrated run's logits
        want = saved["logits_test"]
    assert np.allclose(run_onnx(tmp_path / "net.onnx", x), want, rtol=1e-5, atol=1e-5)
