"""Lightning adapter: a callback that logs calibkit's metrics from any ``LightningModule``
(validation and test), and one that fits a calibrator on the validation logits and keeps
it in the checkpoint (:class:`PostHocCallback`).

:class:`CalibrationCallback` feeds the validation outputs of each batch to a
:class:`~calibkit.metrics.CalibrationMeter` (O(bins) state, plus two numbers per sample for
the rank-based metrics), and at the end of each validation epoch reduces it across
processes (``meter.sync()``, a no-op on one), logs the chosen metrics with
``LightningModule.log`` and draws the reliability diagram from the same bin sums: a PNG per
epoch, also handed to the logger when it can take a figure (TensorBoard's ``add_figure``).

What ``validation_step`` returns is read as the logits (or probabilities, ``probs=True``)
and labels of the batch: a dict with ``"logits"`` and ``"labels"`` (``"probs"`` also names
the scores), a ``(logits, labels)`` pair, or a tensor of logits with the labels taken from
the batch (``batch[1]`` or ``batch["labels"]``). A step that returns nothing (the usual one,
which only calls ``self.log``) is read through forward hooks on the module and every
submodule: the last two-dimensional tensor a ``forward`` returned in the step (``self(x)``,
or ``self.net(x)``; the outermost call finishes last, a loss module's scalar is passed over)
is taken as the logits, with the labels from the batch. Anything else: pass ``outputs=``, a
function ``(outputs, batch) -> (scores, labels)``.

Under DDP every collective is reached on every rank or on none: the diagram's folder
(``trainer.log_dir``, a broadcast) is asked on every rank, and only rank 0 draws.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import torch
from torch import Tensor

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "calibkit.adapters.lightning needs Lightning: pip install 'calibkit[lightning]'"
    ) from None

from .._settings import Setting, checks_declared
from ..metrics import METRICS, CalibrationMeter
from ..metrics.internal import SAMPLE_METRICS, Binning, MetricBins, Probs

__all__ = [
    "DEFAULT_METRICS",
    "CalibrationCallback",
    "Extract",
    "LastForward",
    "PostHocCallback",
    "figure_name",
    "scores_and_labels",
]

DEFAULT_METRICS = ("ece", "aece", "nll", "brier", "refinement_auroc")
_STREAMED = tuple(m for m in METRICS if m != "optimal_ece")
Prefix = Annotated[str, Setting("Text before each logged name (``val/`` logs ``val/ece``)")]
Diagram = Annotated[bool, Setting("Draw the reliability diagram at the end of each validation")]

Extract = Callable[[Any, Any], tuple[Any, Any]]


def scores_and_labels(outputs: Any, batch: Any) -> tuple[Tensor, Tensor]:
    """The default reading of ``validation_step``'s return value; see the module docstring.

    Examples
    --------
    >>> import torch
    >>> from calibkit.adapters.lightning import scores_and_labels
    >>> logits, labels = torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 1])
    >>> batch = (torch.zeros(2, 3), labels)  # (inputs, labels), as a DataLoader gives
    >>> for returned in ({"logits": logits, "labels": labels}, (logits, labels), logits):
    ...     scores, found = scores_and_labels(returned, batch)
    ...     print(scores.shape, found.tolist())
    torch.Size([2, 2]) [0, 1]
    torch.Size([2, 2]) [0, 1]
    torch.Size([2, 2]) [0, 1]
    """
    if isinstance(outputs, dict):
        scores = outputs.get("logits", outputs.get("probs"))
        labels = outputs.get("labels")
        if scores is not None and labels is not None:
            return scores, labels
    elif isinstance(outputs, tuple | list) and len(outputs) == 2:
        return outputs[0], outputs[1]
    elif isinstance(outputs, Tensor):
        if isinstance(batch, dict) and "labels" in batch:
            return outputs, batch["labels"]
        if isinstance(batch, tuple | list) and len(batch) >= 2:
            return outputs, batch[1]
    raise ValueError(
        "CalibrationCallback: validation_step must return {'logits': ..., 'labels': ...}, "
        "(logits, labels), or logits with (inputs, labels) batches; "
        f"got {type(outputs).__name__}. Pass outputs=fn(outputs, batch) -> (logits, labels)"
    )


class LastForward:
    """The last two-dimensional tensor returned by a ``forward`` of a module or any of its
    submodules, kept by forward hooks while attached: what a validation step computed when
    it returns nothing (``self(x)`` or ``self.net(x)``).

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from calibkit.adapters.lightning import LastForward
    >>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    >>> seen = LastForward()
    >>> seen.attach(net)
    >>> _ = net(torch.randn(5, 3))
    >>> seen.outputs(None).shape  # the step returned nothing: the last 2-D forward output
    torch.Size([5, 2])
    >>> seen.detach()
    """

    def __init__(self) -> None:
        self._handles: list[Any] = []
        self._output: Any = None

    def attach(self, module: torch.nn.Module) -> None:
        self.detach()
        self._handles = [m.register_forward_hook(self._keep) for m in module.modules()]

    def _keep(self, module: Any, args: Any, output: Any) -> None:
        if isinstance(output, Tensor) and output.ndim == 2:
            self._output = output

    def detach(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles, self._output = [], None

    def outputs(self, returned: Any) -> Any:
        """``returned`` where the step returned something, else the last forward output
        (taken, so a later step without a forward call cannot reuse it)."""
        if returned is not None:
            return returned
        out, self._output = self._output, None
        if out is None:
            raise ValueError(
                "validation_step returned nothing and called no forward of the module: return "
                "the logits (or a dict with 'logits' and 'labels'), or pass outputs=fn"
            )
        return out


class CalibrationCallback(Callback):
    """Log calibkit's metrics, and a reliability diagram, at the end of each validation.

    ``metrics``: names from :data:`calibkit.metrics.METRICS` (every one but optimal ECE,
    which needs the full logits), logged as ``prefix + name`` (``val/ece``). ``n_bins``,
    ``binning``, ``probs``: as in :func:`calibkit.metrics.evaluate`. ``outputs``: how to
    read scores and labels from ``validation_step``'s return value and the batch.
    ``diagram``: draw the reliability diagram each epoch into ``diagram_dir`` (default
    ``<trainer.log_dir>/reliability``) as ``epoch=NNN.png`` (:func:`figure_name`); a
    trainer without a logger (``logger=False``) has no log folder, so no file is written
    there unless ``diagram_dir`` is given. With
    several validation loaders, each gets its own meter and its names end in
    ``/dataloader_idx_I``. ``trainer.test()`` logs the same metrics as ``test_prefix +
    name`` (``test/ece``), from ``test_step``'s outputs read the same way.

    Examples
    --------
    >>> import lightning as L, torch
    >>> from torch import nn
    >>> from torch.utils.data import DataLoader, TensorDataset
    >>> from calibkit import data
    >>> class Net(L.LightningModule):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, 10))
    ...     def forward(self, x):
    ...         return self.net(x)
    ...     def training_step(self, batch, _):
    ...         return nn.functional.cross_entropy(self(batch[0]), batch[1])
    ...     def validation_step(self, batch, _):
    ...         self(batch[0])  # returns nothing: the callback reads what forward returned
    ...     def configure_optimizers(self):
    ...         return torch.optim.Adam(self.parameters(), lr=1e-2)
    >>> digits = data.create("digits")
    >>> train = DataLoader(TensorDataset(digits.train.x, digits.train.y), batch_size=100)
    >>> val = DataLoader(TensorDataset(digits.val.x, digits.val.y), batch_size=100)
    >>> quiet = dict(max_epochs=2, enable_progress_bar=False, enable_model_summary=False)
    >>> from calibkit.adapters.lightning import CalibrationCallback
    >>> callback = CalibrationCallback(["ece", "nll"], diagram=False)
    >>> trainer = L.Trainer(callbacks=[callback], logger=False, enable_checkpointing=False,
    ...                     **quiet)
    >>> trainer.fit(Net(), train, val)
    >>> sorted(k for k in trainer.callback_metrics if k.startswith("val/"))
    ['val/ece', 'val/nll']
    """

    @checks_declared
    def __init__(
        self,
        metrics: Sequence[str] = DEFAULT_METRICS,
        *,
        n_bins: MetricBins = 15,
        binning: Binning = "calibkit",
        probs: Probs = None,
        prefix: Prefix = "val/",
        outputs: Extract | None = None,
        diagram: Diagram = True,
        diagram_dir: str | os.PathLike | None = None,
        test_prefix: Prefix = "test/",
    ) -> None:
        unknown = [m for m in metrics if m not in _STREAMED]
        if unknown or not metrics:
            raise ValueError(
                f"CalibrationCallback: unknown or unstreamable metrics {unknown or '(none)'}; "
                f"choose from {', '.join(_STREAMED)}"
            )
        self.metrics = tuple(metrics)
        self.settings = {
            "n_bins": n_bins,
            "binning": binning,
            "probs": probs,
            "keep_samples": any(m in SAMPLE_METRICS for m in self.metrics),
        }
        self.prefix, self.test_prefix = prefix, test_prefix
        self.extract = outputs or scores_and_labels
        self.diagram = diagram
        self.diagram_dir = None if diagram_dir is None else Path(diagram_dir)
        self.meters: dict[int, CalibrationMeter] = {}
        self.diagrams: list[Path] = []  # every figure written, in order
        self._forward = LastForward()

    def on_validation_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self.meters = {}
        self._forward.attach(pl_module)

    on_test_epoch_start = on_validation_epoch_start  # trainer.test(): the same, test_step's

    def on_validation_batch_end(
        self,
        trainer: Any,
        pl_module: Any,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._update(outputs, batch, dataloader_idx)

    on_test_batch_end = on_validation_batch_end

    def _update(self, outputs: Any, batch: Any, dataloader_idx: int) -> None:
        scores, labels = self.extract(self._forward.outputs(outputs), batch)
        meter = self.meters.get(dataloader_idx)
        if meter is None:  # the first batch of this loader in this epoch
            meter = self.meters[dataloader_idx] = CalibrationMeter(**self.settings)
        meter.update(_detached(scores), _detached(labels))

    def on_validation_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._forward.detach()
        if not trainer.sanity_checking:
            self._log(trainer, pl_module, self.prefix)

    def on_test_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._forward.detach()
        self._log(trainer, pl_module, self.test_prefix)

    def _log(self, trainer: Any, pl_module: Any, prefix: str) -> None:
        several = len(self.meters) > 1
        for idx, meter in sorted(self.meters.items()):
            meter.sync()  # every rank now holds the global statistics
            suffix = f"/dataloader_idx_{idx}" if several else ""
            values = meter.compute()
            logged = {f"{prefix}{m}{suffix}": values[m] for m in self.metrics}
            # the values are global already (sync above), equal on every rank: reducing them
            # by max is exact and keeps Lightning from advising sync_dist=True at each epoch
            pl_module.log_dict(logged, add_dataloader_idx=False, sync_dist=True, reduce_fx="max")
            has_folder = self.diagram_dir is not None or bool(trainer.loggers)
            if self.diagram and has_folder:
                folder = self._folder(trainer)  # on every rank: log_dir is a collective
                if trainer.is_global_zero:
                    self._draw(trainer, meter, prefix, suffix.replace("/", "-"), folder)

    def _folder(self, trainer: Any) -> Path:
        """Where the diagrams go. ``trainer.log_dir`` broadcasts from rank 0 under DDP, so
        every rank asks for it; a rank that alone asked would wait for ever."""
        if self.diagram_dir is not None:
            return self.diagram_dir
        return Path(trainer.log_dir or trainer.default_root_dir) / "reliability"

    def _draw(
        self, trainer: Any, meter: CalibrationMeter, prefix: str, suffix: str, folder: Path
    ) -> None:
        import matplotlib.pyplot as plt

        from ..plots import draw_reliability, save_figure

        stem, title = figure_name(trainer)
        fig = draw_reliability(meter.bins(), n_bins=meter.n_bins, title=title + suffix)
        path = folder / f"{stem}{suffix}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        save_figure(fig, path)
        self.diagrams.append(path)
        for logger in trainer.loggers:
            add_figure = getattr(getattr(logger, "experiment", None), "add_figure", None)
            if callable(add_figure):
                add_figure(f"{prefix}reliability{suffix}", fig, trainer.global_step)
        plt.close(fig)


def figure_name(trainer: Any) -> tuple[str, str]:
    """(file stem, title) of a reliability diagram: ``epoch=002`` for the validation of
    epoch 2 during ``fit``; ``validate-after-003-epochs`` (``test-...``) for a
    ``trainer.validate()`` (``test()``) call, whose ``current_epoch`` counts the epochs
    trained so far rather than naming one.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from calibkit.adapters.lightning import figure_name
    >>> fitting = SimpleNamespace(state=SimpleNamespace(fn="fit"), current_epoch=2)
    >>> validating = SimpleNamespace(state=SimpleNamespace(fn="validate"), current_epoch=3)
    >>> figure_name(fitting), figure_name(validating)
    (('epoch=002', 'epoch 2'), ('validate-after-003-epochs', 'validate, after 3 epochs'))
    """
    fn = str(getattr(trainer.state.fn, "value", trainer.state.fn))
    if fn in ("validate", "test"):
        done = trainer.current_epoch
        return f"{fn}-after-{done:03d}-epochs", f"{fn}, after {done} epochs"
    return f"epoch={trainer.current_epoch:03d}", f"epoch {trainer.current_epoch}"


class PostHocCallback(Callback):
    """Fit a calibkit calibrator on the validation logits after every validation of
    ``fit``, and keep it in the checkpoint beside the weights it was fitted for.

    ``method``: any logits method's spec (``"ts"``, ``"dir-odir:folds=3"``; `calibkit
    methods`). ``outputs``: as :class:`CalibrationCallback`'s. After ``trainer.fit``,
    ``calibrator_`` is the method fitted on the last validation epoch, i.e. on the final
    weights; its fit report says how the fit went, and the checks of
    :mod:`calibkit.posthoc._anomalies` run as on every fit. A checkpoint written after a
    validation (``ModelCheckpoint``) holds the calibrator fitted on that validation, in
    calibkit's safetensors format (no pickle); ``PostHocCallback.from_checkpoint(path)``
    gives it back. The validation logits are gathered from every process.

    Examples
    --------
    >>> import lightning as L, torch
    >>> from torch import nn
    >>> from torch.utils.data import DataLoader, TensorDataset
    >>> from calibkit import data
    >>> class Net(L.LightningModule):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, 10))
    ...     def forward(self, x):
    ...         return self.net(x)
    ...     def training_step(self, batch, _):
    ...         return nn.functional.cross_entropy(self(batch[0]), batch[1])
    ...     def validation_step(self, batch, _):
    ...         self(batch[0])  # returns nothing: the callback reads what forward returned
    ...     def configure_optimizers(self):
    ...         return torch.optim.Adam(self.parameters(), lr=1e-2)
    >>> digits = data.create("digits")
    >>> train = DataLoader(TensorDataset(digits.train.x, digits.train.y), batch_size=100)
    >>> val = DataLoader(TensorDataset(digits.val.x, digits.val.y), batch_size=100)
    >>> quiet = dict(max_epochs=2, enable_progress_bar=False, enable_model_summary=False)
    >>> from lightning.pytorch.callbacks import ModelCheckpoint
    >>> from calibkit.adapters.lightning import PostHocCallback
    >>> folder = getfixture("tmp_path")
    >>> save = ModelCheckpoint(dirpath=folder, save_last=True)
    >>> trainer = L.Trainer(callbacks=[PostHocCallback("ts"), save], logger=False, **quiet)
    >>> trainer.fit(Net(), train, val)
    >>> ts = PostHocCallback.from_checkpoint(folder / "last.ckpt")  # no pickle is run
    >>> type(ts).__name__, ts.fit_report_.objective
    ('TemperatureScaling', 'nll')
    """

    def __init__(self, method: str = "ts", *, outputs: Extract | None = None) -> None:
        from .. import posthoc

        if posthoc.REGISTRY.factory(posthoc.REGISTRY.check(method).name).level != "logits":
            raise ValueError(f"PostHocCallback: {method!r} does not calibrate logits")
        self.method, self.extract = method, outputs or scores_and_labels
        self.calibrator_: Any = None
        self._scores: list[Tensor] = []
        self._labels: list[Tensor] = []
        self._forward = LastForward()

    def on_validation_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self._scores, self._labels = [], []
        self._forward.attach(pl_module)

    def on_validation_batch_end(
        self,
        trainer: Any,
        pl_module: Any,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if dataloader_idx == 0:  # the first validation loader is the calibration split
            scores, labels = self.extract(self._forward.outputs(outputs), batch)
            self._scores.append(_detached(scores).float().cpu())
            self._labels.append(_detached(labels).long().cpu())

    def on_validation_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._forward.detach()
        if trainer.sanity_checking or not self._scores or trainer.state.fn != "fit":
            return
        from .. import posthoc

        z, y = torch.cat(self._scores), torch.cat(self._labels)
        if trainer.world_size > 1:  # every rank fits the same calibrator on every row
            z = pl_module.all_gather(z).reshape(-1, z.shape[1]).cpu()
            y = pl_module.all_gather(y).reshape(-1).cpu()
        self.calibrator_ = posthoc.create(self.method).fit(z, y)

    def state_dict(self) -> dict[str, Any]:
        if self.calibrator_ is None:
            return {"method": self.method}
        return {"method": self.method, "calibrator": _to_bytes(self.calibrator_)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.method = state_dict["method"]
        blob = state_dict.get("calibrator")
        self.calibrator_ = None if blob is None else _from_bytes(blob)

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike) -> Any:
        """The calibrator a Lightning checkpoint holds (read with ``weights_only=True``: a
        checkpoint file never runs code)."""
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        for key, state in ckpt.get("callbacks", {}).items():
            if key.startswith(cls.__name__) and state.get("calibrator") is not None:
                return _from_bytes(state["calibrator"])
        raise ValueError(f"{path}: no calibrator of a {cls.__name__} in this checkpoint")


def _to_bytes(calibrator: Any) -> bytes:
    """A fitted calibrator as the bytes of its safetensors file (SHA-256-checked on load)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        return Path(calibrator.save(Path(tmp) / "c.calib")).read_bytes()


def _from_bytes(blob: bytes) -> Any:
    import tempfile

    from .. import posthoc

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.calib"
        path.write_bytes(bytes(blob))
        return posthoc.load(path)


def _detached(x: Any) -> Any:
    return x.detach() if isinstance(x, Tensor) else torch.as_tensor(x)
