"""Lightning adapter: a callback that logs calibkit's metrics from any ``LightningModule``.

:class:`CalibrationCallback` feeds the validation outputs of each batch to a
:class:`~calibkit.metrics.CalibrationMeter` (O(bins) state, plus two numbers per sample for
the rank-based metrics), and at the end of each validation epoch reduces it across
processes (``meter.sync()``, a no-op on one), logs the chosen metrics with
``LightningModule.log`` and draws the reliability diagram from the same bin sums: a PNG per
epoch, also handed to the logger when it can take a figure (TensorBoard's ``add_figure``).

What ``validation_step`` returns is read as the logits (or probabilities, ``probs=True``)
and labels of the batch: a dict with ``"logits"`` and ``"labels"`` (``"probs"`` also names
the scores), a ``(logits, labels)`` pair, or a tensor of logits with the labels taken from
the batch (``batch[1]`` or ``batch["labels"]``). Anything else: pass ``outputs=``, a function
``(outputs, batch) -> (scores, labels)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "calibkit.adapters.lightning needs Lightning: pip install 'calibkit[lightning]'"
    ) from None

from ..metrics import CalibrationMeter
from ..metrics.table import METRICS, SAMPLE_METRICS

DEFAULT_METRICS = ("ece", "aece", "nll", "brier", "refinement_auroc")
_STREAMED = tuple(m for m in METRICS if m != "optimal_ece")

Extract = Callable[[Any, Any], tuple[Any, Any]]


def scores_and_labels(outputs: Any, batch: Any) -> tuple[Tensor, Tensor]:
    """The default reading of ``validation_step``'s return value; see the module docstring."""
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


class CalibrationCallback(Callback):
    """Log calibkit's metrics, and a reliability diagram, at the end of each validation.

    ``metrics``: names from :data:`calibkit.metrics.METRICS` (every one but optimal ECE,
    which needs the full logits), logged as ``prefix + name`` (``val/ece``). ``n_bins``,
    ``binning``, ``probs``: as in :func:`calibkit.metrics.evaluate`. ``outputs``: how to
    read scores and labels from ``validation_step``'s return value and the batch.
    ``diagram``: draw the reliability diagram each epoch into ``diagram_dir`` (default
    ``<trainer.log_dir>/reliability``) as ``epoch=NNN.png``. With several validation
    loaders, each gets its own meter and its names end in ``/dataloader_idx_I``.
    """

    def __init__(
        self,
        metrics: Sequence[str] = DEFAULT_METRICS,
        *,
        n_bins: int = 15,
        binning: str = "calibkit",
        probs: bool = False,
        prefix: str = "val/",
        outputs: Extract | None = None,
        diagram: bool = True,
        diagram_dir: str | os.PathLike | None = None,
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
        CalibrationMeter(**self.settings)  # checks the settings now, not after an epoch
        self.prefix, self.extract = prefix, outputs or scores_and_labels
        self.diagram = diagram
        self.diagram_dir = None if diagram_dir is None else Path(diagram_dir)
        self.meters: dict[int, CalibrationMeter] = {}
        self.diagrams: list[Path] = []  # every figure written, in order

    def on_validation_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self.meters = {}

    def on_validation_batch_end(
        self,
        trainer: Any,
        pl_module: Any,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        scores, labels = self.extract(outputs, batch)
        meter = self.meters.setdefault(dataloader_idx, CalibrationMeter(**self.settings))
        meter.update(_detached(scores), _detached(labels))

    def on_validation_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        if trainer.sanity_checking:
            return
        several = len(self.meters) > 1
        for idx, meter in sorted(self.meters.items()):
            meter.sync()  # every rank now holds the global statistics
            suffix = f"/dataloader_idx_{idx}" if several else ""
            values = meter.compute()
            logged = {f"{self.prefix}{m}{suffix}": values[m] for m in self.metrics}
            pl_module.log_dict(logged, add_dataloader_idx=False)
            if self.diagram and trainer.is_global_zero:
                self._draw(trainer, meter, suffix.replace("/", "-"))

    def _draw(self, trainer: Any, meter: CalibrationMeter, suffix: str) -> None:
        import matplotlib.pyplot as plt

        from ..plots import draw_reliability, save_figure

        title = f"epoch {trainer.current_epoch}{suffix}"
        fig = draw_reliability(meter.bins(), n_bins=meter.n_bins, title=title)
        folder = self.diagram_dir or Path(trainer.log_dir or trainer.default_root_dir)
        if self.diagram_dir is None:
            folder = folder / "reliability"
        path = folder / f"epoch={trainer.current_epoch:03d}{suffix}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        save_figure(fig, path)
        self.diagrams.append(path)
        for logger in trainer.loggers:
            add_figure = getattr(getattr(logger, "experiment", None), "add_figure", None)
            if callable(add_figure):
                add_figure(f"{self.prefix}reliability{suffix}", fig, trainer.global_step)
        plt.close(fig)


def _detached(x: Any) -> Any:
    return x.detach() if isinstance(x, Tensor) else torch.as_tensor(x)
