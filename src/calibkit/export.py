"""ONNX export of a calibrator, or of a network together with its calibrator, as one graph.

:func:`to_onnx` takes a fitted logits calibrator (the graph maps logits to calibrated
logits), a :class:`~calibkit.posthoc.CalibratedModel` (inputs to calibrated logits: the
network and its calibrator in one graph) or a model-level method (Neural Clamping,
MaC-Cal: inputs to calibrated logits). The batch dimension is dynamic. It uses PyTorch's
``torch.export``-based exporter (``pip install 'calibkit[onnx]'`` for onnx, onnxscript and
onnxruntime), writes the file atomically, and, with ``check=True`` (the default), runs the
written graph in onnxruntime on the example input and raises :class:`ExportMismatchError`
unless it reproduces PyTorch's output.

The graph is the calibrator's own traceable map (``Calibrator.calibrated``, which
``forward`` runs after its input checks): computed in float64, returned in the input's dtype,
with the predicted class lifted by one float32 step on a row where rounding to float32 would
tie it with another (for the calibrators that keep the argmax). Python float constants that
float32 cannot hold are written as float64 tensors in the maps, because the exporter stores
a Python float as float32. ``output="probs"`` ends the graph in a softmax (computed in
float64) instead.

Example::

    cal = posthoc.create("ts").fit(val_logits, val_labels)
    to_onnx(cal, "ts.onnx")  # logits -> calibrated logits
    to_onnx(posthoc.CalibratedModel(net, cal), "net-ts.onnx", example=x[:8])
    run_onnx("net-ts.onnx", x)  # onnxruntime's output, (N, K)
"""

from __future__ import annotations

import contextlib
import io as _stdio
import logging
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from ._docs import documented
from ._outputs import atomic_write
from .posthoc import CalibratedModel, Calibrator, Method

__all__ = ["ExportError", "ExportMismatchError", "run_onnx", "to_onnx"]

OUTPUTS = ("logits", "probs")
INSTALL_HINT = "ONNX export needs onnx, onnxscript and onnxruntime: pip install 'calibkit[onnx]'"


class ExportError(ValueError):
    """The module could not be exported (an operation ONNX or the exporter lacks).

    Examples
    --------
    Every export failure is a ``ValueError``, with a one-line message:

    >>> from calibkit.export import ExportError, ExportMismatchError
    >>> issubclass(ExportMismatchError, ExportError), issubclass(ExportError, ValueError)
    (True, True)
    """


class ExportMismatchError(ExportError):
    """The exported graph, run in onnxruntime, does not reproduce PyTorch's output.

    Examples
    --------
    :func:`to_onnx` raises it after its check (``check=True``, the default) finds the file's
    output further from PyTorch's than ``rtol`` and ``atol`` allow; the file is still there
    to inspect:

    >>> from calibkit.export import ExportError, ExportMismatchError
    >>> issubclass(ExportMismatchError, ExportError)
    True
    """


class Graph(nn.Module):
    """What is exported: ``method``'s map of the input, with softmax for ``output="probs"``."""

    def __init__(self, method: nn.Module, output: str = "logits") -> None:
        super().__init__()
        if output not in OUTPUTS:
            raise ValueError(f"output: expected one of {', '.join(OUTPUTS)}, got {output!r}")
        self.method, self.output = method, output

    def forward(self, x: Tensor) -> Tensor:
        m = self.method
        if isinstance(m, CalibratedModel):
            z = m.model(x)
            out = m.calibrator.calibrated(z)
        elif isinstance(m, Calibrator):
            z, out = x, m.calibrated(x)
        else:
            z = out = m(x)
        if self.output == "probs":
            return torch.softmax(out.double(), 1).to(z.dtype)
        return out


@documented(
    {},
    "Path: the file written.",
    method=(
        "nn.Module",
        "A fitted logits calibrator, a ``CalibratedModel`` or a fitted model-level method.",
    ),
    path=("str or PathLike", "The ONNX file to write (atomically)."),
    example=(
        "array-like, Tensor or None, default None",
        "One batch (N >= 2, ...) of inputs in "
        "the network's dtype; None: zero logits, for a logits calibrator.",
    ),
    output=("str, default 'logits'", "What the graph returns: 'logits' or 'probs'."),
    check=("bool, default True", "Run the file in onnxruntime on ``example`` and compare."),
    optimize=("bool, default True", "Run onnxscript's graph optimiser (constant folding)."),
    rtol=("float, default 1e-4", "Relative tolerance of the check."),
    atol=("float, default 1e-5", "Absolute tolerance of the check."),
)
def to_onnx(
    method: nn.Module,
    path: str | os.PathLike,
    *,
    example: Any = None,
    output: str = "logits",
    check: bool = True,
    optimize: bool = True,
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> Path:
    """Write ``method`` as an ONNX graph to ``path`` and return the path.

    ``method``: a fitted logits calibrator, a ``CalibratedModel`` or a fitted model-level
    method. ``example``: one batch of inputs (N, ...) in the network's dtype, needed for a
    network (for a logits calibrator the default is a batch of zero logits). Inputs are
    named ``input``, outputs ``logits`` (or ``probs``); dimension 0 is dynamic.
    ``check``: run the file in onnxruntime on ``example`` and compare with PyTorch within
    ``rtol``/``atol`` (elementwise, as ``numpy.allclose``). ``optimize``: run onnxscript's
    graph optimiser (constant folding; about half the export time).
    Raises :class:`ExportError` for a module the exporter cannot write.

    Examples
    --------
    >>> from calibkit import export, posthoc
    >>> from calibkit.data import demo_logits
    >>> d = demo_logits()
    >>> ts = posthoc.TemperatureScaling().fit(d["logits_val"], d["labels_val"])
    >>> path = export.to_onnx(ts, getfixture("tmp_path") / "ts.onnx", output="probs",
    ...                       optimize=False)  # checked in onnxruntime against PyTorch
    >>> path.name
    'ts.onnx'
    """
    _require_onnx(check)
    inner = method.calibrator if isinstance(method, CalibratedModel) else method
    if isinstance(inner, Method):
        inner._require_fitted()
    if example is None:
        if not isinstance(method, Calibrator):
            raise ValueError("example: give one batch of the network's inputs to trace")
        example = torch.zeros(2, method.n_classes_)
    x = torch.as_tensor(example)
    if x.ndim < 1 or len(x) < 2:
        raise ValueError("example: give a batch of at least 2 samples (the batch size is traced)")
    graph = Graph(method, output).eval()
    with torch.no_grad():
        want = graph(x)
    atomic_write(path, lambda tmp: _export(graph, x, tmp, output, optimize))
    if check:
        got = run_onnx(path, x)
        if got.shape != want.shape or not np.allclose(got, want.numpy(), rtol=rtol, atol=atol):
            diff = float(np.abs(got - want.numpy()).max()) if got.shape == want.shape else "-"
            raise ExportMismatchError(
                f"{path}: onnxruntime's output differs from PyTorch's (max abs difference "
                f"{diff}, shapes {got.shape} and {tuple(want.shape)})"
            )
    return Path(path)


@documented(
    {},
    "ndarray: the graph's output.",
    path=("str or PathLike", "An ONNX file written by :func:`to_onnx`."),
    inputs=("array-like or Tensor, shape (N, ...)", "One batch of inputs."),
)
def run_onnx(path: str | os.PathLike, inputs: Any) -> np.ndarray:
    """Run an exported graph in onnxruntime on ``inputs`` (N, ...); returns its output.

    Examples
    --------
    >>> from calibkit import export, posthoc
    >>> from calibkit.data import demo_logits
    >>> d = demo_logits()
    >>> ts = posthoc.TemperatureScaling().fit(d["logits_val"], d["labels_val"])
    >>> path = export.to_onnx(ts, getfixture("tmp_path") / "ts.onnx", output="probs",
    ...                       optimize=False)  # checked in onnxruntime against PyTorch
    >>> import numpy as np
    >>> probs = export.run_onnx(path, d["logits_test"][:3])
    >>> probs.shape, bool(np.allclose(probs, ts.predict_proba(d["logits_test"][:3]), atol=1e-6))
    ((3, 10), True)
    """
    _require_onnx(True)
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = torch.as_tensor(inputs).detach().cpu().numpy()
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def _export(graph: Graph, x: Tensor, tmp: str, output: str, optimize: bool) -> None:
    batch = torch.export.Dim("batch", min=1)
    # the exporter reports each step on stdout, and warns through `warnings` and its logger
    # about its own internals (torchvision's ops missing); keep calibkit's output to calibkit's
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(_stdio.StringIO()),
        torch.no_grad(),
    ):
        warnings.simplefilter("ignore")
        logger.setLevel(logging.ERROR)
        try:
            program = torch.onnx.export(
                graph,
                (x,),
                dynamo=True,
                input_names=["input"],
                output_names=[output],
                dynamic_shapes={"x": {0: batch}},
                external_data=False,
                optimize=optimize,
                verbose=False,
            )
        except Exception as err:  # the exporter's errors are many kinds and pages long
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise ExportError(f"cannot export {_name(graph.method)} to ONNX: {first}") from err
        finally:
            logger.setLevel(level)
        program.save(tmp)


def _name(method: nn.Module) -> str:
    return getattr(method, "name", None) or type(method).__name__


def _require_onnx(runtime: bool) -> None:
    names = ("onnx", "onnxscript") + (("onnxruntime",) if runtime else ())
    for name in names:
        try:
            __import__(name)
        except ImportError:
            raise ImportError(INSTALL_HINT) from None
