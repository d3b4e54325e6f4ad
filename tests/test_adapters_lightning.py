"""Lightning callback in real ``Trainer`` runs on CPU: what it logs each epoch equals
calibkit's functions on the module's validation logits, the reliability diagrams are
written, the ways of returning outputs all work, and under two DDP processes the logged
numbers are those of the whole validation set."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch
from sklearn.datasets import load_digits

from calibkit import metrics as M

L = pytest.importorskip("lightning.pytorch")

from calibkit import posthoc  # noqa: E402
from calibkit.adapters.lightning import (  # noqa: E402
    CalibrationCallback,
    PostHocCallback,
    scores_and_labels,
)


def _digits():
    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x / 16.0, dtype=torch.float32)
    return x[:1200], torch.tensor(y[:1200]), x[1200:1600], torch.tensor(y[1200:1600])


class Digits(L.LightningModule):
    """A linear classifier; ``style`` says what validation_step returns."""

    def __init__(self, style: str = "dict") -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Linear(64, 10)
        self.style = style

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        if self.style.startswith("log-only"):  # the usual step: logs, returns None
            if self.style == "log-only":
                z = self(x)
            elif self.style == "log-only-submodule":  # a submodule's forward, not self's
                z = self.net(x)
            else:  # no module's forward at all
                z = torch.nn.functional.linear(x, self.net.weight, self.net.bias)
            self.log("val_loss", torch.nn.functional.cross_entropy(z, y))
            return None
        z = self.net(x)
        if self.style == "dict":
            return {"logits": z, "labels": y}
        if self.style == "pair":
            return z, y
        return z  # labels from the batch

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.5)


def _loaders(batch_size=100):
    xt, yt, xv, yv = _digits()
    ds = torch.utils.data.TensorDataset
    return (
        torch.utils.data.DataLoader(ds(xt, yt), batch_size=batch_size, shuffle=True),
        torch.utils.data.DataLoader(ds(xv, yv), batch_size=batch_size),
    )


def _trainer(tmp_path, callback, **kwargs):
    return L.Trainer(
        max_epochs=2,
        accelerator="cpu",
        logger=L.loggers.CSVLogger(tmp_path),
        callbacks=[callback],
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        log_every_n_steps=1,
        default_root_dir=tmp_path,
        **kwargs,
    )


def _logged(trainer) -> list[dict[str, float]]:
    """The CSV logger's rows that hold the callback's values, one per epoch (the file of the
    one version written; after ddp_spawn the main process's logger would name a new one)."""
    (path,) = Path(trainer.logger.root_dir).glob("version_*/metrics.csv")
    with open(path) as f:
        rows = [
            r for r in csv.DictReader(f) if any(k.startswith("val/") and v for k, v in r.items())
        ]
    return [{k: float(v) for k, v in r.items() if v} for r in rows]


@pytest.mark.parametrize("style", ["dict", "pair", "tensor", "log-only", "log-only-submodule"])
def test_logs_calibkit_metrics_each_epoch(tmp_path, style):
    torch.manual_seed(0)
    model = Digits(style)
    callback = CalibrationCallback(["ece", "aece", "nll", "refinement_auroc", "aurc"])
    trainer = _trainer(tmp_path, callback)
    trainer.fit(model, *_loaders())
    rows = _logged(trainer)
    assert [int(r["epoch"]) for r in rows] == [0, 1]
    _, _, xv, yv = _digits()
    with torch.no_grad():
        z = model.net(xv)
    last = rows[-1]  # the weights have not moved since the last validation
    for name, fn in [
        ("ece", M.ece),
        ("aece", M.aece),
        ("nll", M.nll),
        ("refinement_auroc", M.refinement_auroc),
        ("aurc", M.aurc),
    ]:
        assert last[f"val/{name}"] == pytest.approx(fn(z, yv), rel=1e-6), name
    assert rows[0]["val/ece"] != last["val/ece"]  # the first epoch's own numbers
    assert [p.name for p in callback.diagrams] == ["epoch=000.png", "epoch=001.png"]
    assert all(p.stat().st_size > 10_000 for p in callback.diagrams)  # real PNG figures
    assert callback.diagrams[0].parent == tmp_path / "lightning_logs/version_0/reliability"


def test_test_time_is_logged_and_later_diagrams_are_named_for_what_they_are(tmp_path):
    """Issue 30.4: trainer.test() logs test/<metric>; validate() after fit no longer writes
    a diagram named like a fourth epoch (epoch=002.png after two epochs)."""

    class WithTest(Digits):
        def test_step(self, batch, batch_idx):
            return self.validation_step(batch, batch_idx)

    model = WithTest()
    callback = CalibrationCallback(["ece", "nll"])
    trainer = _trainer(tmp_path, callback)
    train, val = _loaders()
    trainer.fit(model, train, val)
    (result,) = trainer.test(model, val, verbose=False)
    _, _, xv, yv = _digits()
    with torch.no_grad():
        z = model.net(xv)
    assert result["test/ece"] == pytest.approx(M.ece(z, yv), rel=1e-6)
    assert result["test/nll"] == pytest.approx(M.nll(z, yv), rel=1e-6)
    trainer.validate(model, val, verbose=False)
    assert [p.name for p in callback.diagrams] == [
        "epoch=000.png",
        "epoch=001.png",
        "test-after-002-epochs.png",
        "validate-after-002-epochs.png",
    ]


def test_post_hoc_callback_fits_on_the_final_validation_and_keeps_it_in_the_checkpoint(
    tmp_path,
):
    """Issue 30.4: TS (any logits method) fitted on the validation logits after training,
    saved with the checkpoint, read back without pickle."""
    model = Digits()
    callback = PostHocCallback("ts")
    trainer = L.Trainer(
        max_epochs=2,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        callbacks=[callback, L.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt")],
    )
    trainer.fit(model, *_loaders())
    _, _, xv, yv = _digits()
    with torch.no_grad():
        z = model.net(xv)
    direct = posthoc.create("ts").fit(z, yv)
    assert float(callback.calibrator_.temperature_) == pytest.approx(
        float(direct.temperature_), rel=1e-6
    )
    (ckpt,) = (tmp_path / "ckpt").glob("*.ckpt")  # written after the last validation
    back = PostHocCallback.from_checkpoint(ckpt)
    assert float(back.temperature_) == float(callback.calibrator_.temperature_)
    fresh = PostHocCallback("ts")
    fresh.load_state_dict(callback.state_dict())
    assert torch.equal(fresh.calibrator_(z), callback.calibrator_(z))
    with pytest.raises(ValueError, match="does not calibrate logits"):
        PostHocCallback("neural-clamping")


def test_custom_outputs_and_two_loaders(tmp_path):
    _, _, xv, yv = _digits()

    class TwoLoaders(Digits):
        def validation_step(self, batch, batch_idx, dataloader_idx=0):
            x, y = batch
            return {"scores": torch.softmax(self.net(x), 1), "target": y}

    callback = CalibrationCallback(
        ["ece", "brier"],
        probs=True,
        outputs=lambda out, batch: (out["scores"], out["target"]),
        diagram_dir=tmp_path / "figs",
    )
    train, val = _loaders()
    half = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(xv[:200], yv[:200]), batch_size=50
    )
    model = TwoLoaders()
    trainer = _trainer(tmp_path, callback)
    trainer.fit(model, train, [val, half])
    last = _logged(trainer)[-1]
    with torch.no_grad():
        p = torch.softmax(model.net(xv), 1)
    assert last["val/ece/dataloader_idx_0"] == pytest.approx(M.ece(p, yv, probs=True), rel=1e-6)
    want = M.brier(p[:200], yv[:200], probs=True)
    assert last["val/brier/dataloader_idx_1"] == pytest.approx(want, rel=1e-6)
    assert sorted(p.name for p in (tmp_path / "figs").iterdir())[-1] == (
        "epoch=001-dataloader_idx_1.png"
    )


def test_bad_settings_and_outputs_fail_clearly():
    with pytest.raises(ValueError, match="unknown or unstreamable metrics \\['optimal_ece'\\]"):
        CalibrationCallback(["ece", "optimal_ece"])
    with pytest.raises(ValueError, match="n_bins"):
        CalibrationCallback(n_bins=0)
    with pytest.raises(ValueError, match="validation_step must return"):
        scores_and_labels({"loss": torch.tensor(1.0)}, None)
    z, y = torch.zeros(2, 3), torch.tensor([0, 1])
    assert scores_and_labels(z, {"labels": y})[1] is y
    assert scores_and_labels({"probs": z, "labels": y}, None)[0] is z


class GlooReleased(L.Callback):
    """Each rank destroys its process group where its fit ends. Lightning destroys only an
    NCCL group (at exit); a gloo group left to the interpreter's exit made a spawned rank
    abort there ("terminate called without an active exception", SIGABRT) in 4 of 20 runs
    of the next test with PyTorch's AVX2 kernels, 0 with AVX-512's."""

    def teardown(self, trainer, pl_module, stage):
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def test_two_ddp_processes_log_the_whole_validation_set(tmp_path):
    model = Digits()
    callback = CalibrationCallback(["ece", "aece"], diagram=False)
    trainer = _trainer(tmp_path, callback, devices=2, strategy="ddp_spawn")
    trainer.callbacks.append(GlooReleased())
    trainer.fit(model, *_loaders())
    last = _logged(trainer)[-1]
    _, _, xv, yv = _digits()
    with torch.no_grad():
        z = model.net(xv)  # ddp_spawn copies the trained weights back into `model`
    assert last["val/ece"] == pytest.approx(M.ece(z, yv), rel=1e-6)
    assert last["val/aece"] == pytest.approx(M.aece(z, yv), rel=1e-6)
    half = M.ece(z[::2], yv[::2])  # what one rank alone would log
    assert abs(last["val/ece"] - half) > 1e-6


def test_a_step_without_forward_or_return_is_refused_and_no_logger_writes_no_file(
    tmp_path, monkeypatch
):
    """Issue 42 §5: logger=False writes no PNG into the working folder; a step that returns
    nothing and calls no forward of the module says what to do."""
    monkeypatch.chdir(tmp_path)
    callback = CalibrationCallback(["ece"])
    trainer = L.Trainer(
        max_epochs=1,
        accelerator="cpu",
        logger=False,
        callbacks=[callback],
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
    )
    trainer.fit(Digits("log-only"), *_loaders())
    assert callback.diagrams == [] and list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="returned nothing and called no forward"):
        _trainer(tmp_path, CalibrationCallback(["ece"])).fit(
            Digits("log-only-functional"), *_loaders()
        )


DDP_RUN = """
import sys
sys.path.insert(0, sys.argv[2])
import lightning.pytorch as L
from lightning.pytorch.callbacks import ModelCheckpoint
from calibkit.adapters.lightning import CalibrationCallback, PostHocCallback
from tests.test_adapters_lightning import Digits, _loaders

out = sys.argv[1]
trainer = L.Trainer(
    max_epochs=2, accelerator="cpu", devices=2, strategy="ddp", default_root_dir=out,
    logger=L.loggers.CSVLogger(out),
    callbacks=[CalibrationCallback(), PostHocCallback("ts"),
               ModelCheckpoint(dirpath=out + "/checkpoints", save_last=True)],
    enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=1,
)
trainer.fit(Digits("log-only-submodule"), *_loaders())
"""


def test_real_ddp_with_the_default_callbacks_never_hangs(tmp_path):
    """Issue 54 §4: two processes under ``strategy="ddp"`` with the tour's callbacks and
    their defaults (the diagram on), a ``validation_step`` that returns nothing and calls a
    submodule, and ``last.ckpt`` as the README writes it. Before, only rank 0 asked for
    ``trainer.log_dir`` (a broadcast) and every rank waited at the first validation end: the
    timeout turns a hang into a failure instead of a blocked CI."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "ddp_run.py"
    script.write_text(DDP_RUN)
    began = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path), str(Path(__file__).resolve().parents[1])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the ranks in one group: a hang is killed whole
    )
    try:
        _, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("the two-process DDP run hung (300 s)")
    assert proc.returncode == 0, err[-3000:]
    # the callback's values are global: Lightning has no advice to sync them (the module's
    # own val_loss still draws it)
    assert "self.log('val/" not in err and "self.log('val_loss', ..., sync_dist=True)" in err
    seconds = time.perf_counter() - began
    figures = sorted(p.name for p in tmp_path.glob("lightning_logs/version_0/reliability/*.png"))
    assert figures == ["epoch=000.png", "epoch=001.png"], (figures, seconds)
    ts = PostHocCallback.from_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    assert ts.fitted and 0.1 < float(ts.temperature_) < 10
