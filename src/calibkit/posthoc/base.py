"""The calibrator contract (scikit-learn's estimator contract, on tensors, as ``nn.Module``).

* keyword-only settings in ``__init__``, stored under the same names;
* ``fit(logits, labels) -> self`` on a calibration split; learned state ends in ``_``;
* ``forward(logits)`` returns calibrated logits (log-probabilities for binning and isotonic
  maps), ``predict_proba(logits)`` probabilities; both refuse another number of classes;
* ``fit_report_`` says what the fit did (objective before/after, iterations, converged);
* ``save(path)`` writes one safetensors file whose JSON metadata holds the class, settings,
  non-tensor results and a SHA-256 of everything; ``load(path)`` rebuilds it from the
  registry only, so a file can never run code, and a tampered file is refused.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from .._checks import as_labels
from ..io import FileFormatError, atomic_write
from ..metrics._prepare import prepare_scores

FORMAT_VERSION = 1


class NotFittedError(ValueError, AttributeError):
    """A calibrator was used before ``fit``."""


@dataclass
class FitReport:
    """What a fit did: the objective on the fit split before and after, and how it got there."""

    objective: str
    before: float
    after: float
    iterations: int = 0
    converged: bool = True
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        state = "converged" if self.converged else "NOT converged"
        extra = "".join(f", {k} = {v}" for k, v in self.details.items())
        return (
            f"{self.objective}: {self.before:.6g} -> {self.after:.6g} in {self.iterations} "
            f"iterations ({state}, {self.seconds * 1e3:.1f} ms){extra}"
        )


def check_fit_data(logits: Any, labels: Any) -> tuple[Tensor, Tensor]:
    """Validated float64 logits (N, K) and labels for fitting; one-line errors otherwise."""
    z = prepare_scores(logits, probs=False, name="logits")
    y = as_labels(labels, z.shape[1]).to(z.device)
    n, k = z.shape
    if len(y) != n:
        raise ValueError(f"logits and labels have different lengths ({n} vs {len(y)})")
    present = torch.unique(y)
    if len(present) < 2:
        raise ValueError(
            f"labels: the calibration split holds only class {int(present[0])}; fitting a "
            "calibrator needs samples of at least two classes"
        )
    if n < k:
        raise ValueError(
            f"the calibration split has fewer samples ({n}) than classes ({k}); "
            "fit on a larger split"
        )
    return z.double(), y


class Calibrator(nn.Module):
    """Base class of every post-hoc calibrator; see the module docstring."""

    name: ClassVar[str] = ""
    #: True when ``forward`` never changes the argmax of the logits.
    preserves_argmax: ClassVar[bool] = False
    #: What ``forward`` returns: "logits" or "log-probabilities".
    output: ClassVar[str] = "logits"

    def __init__(self) -> None:
        super().__init__()
        self.n_classes_: int | None = None
        self.fit_report_: FitReport | None = None

    # ------------------------------------------------------------------ contract

    def fit(self, logits: Any, labels: Any) -> Calibrator:
        """Fit on a calibration split: ``logits`` (N, K), integer ``labels`` (N,)."""
        z, y = check_fit_data(logits, labels)
        start = time.perf_counter()
        self.n_classes_ = z.shape[1]
        report = self._fit(z, y)
        report.seconds = time.perf_counter() - start
        self.fit_report_ = report
        return self

    def forward(self, logits: Tensor) -> Tensor:
        """Calibrated logits (or log-probabilities) for ``logits`` (N, K), in their dtype
        (float64 for other dtypes). Computed in float64; where rounding to float32 ties the
        predicted class with another, a calibrator that keeps the argmax raises the
        predicted class's entry by one float32 step, so that it still wins."""
        z = self._check_apply(logits)
        out = self._transform(z.double())
        if z.dtype != torch.float32:
            return out
        low = out.float()
        if self.preserves_argmax:
            pred = z.argmax(1)
            lost = (low.argmax(1) != pred).nonzero()[:, 0]
            if len(lost):
                row_max = low[lost].amax(1)
                low[lost, pred[lost]] = torch.nextafter(row_max, torch.full_like(row_max, 1e38))
        return low

    def predict_proba(self, logits: Any) -> Tensor:
        """Calibrated probabilities (N, K); rows sum to one."""
        return torch.softmax(self.forward(logits).double(), 1)

    # ------------------------------------------------------------------ to override

    def _fit(self, z: Tensor, y: Tensor) -> FitReport:
        raise NotImplementedError

    def _transform(self, z: Tensor) -> Tensor:
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers

    def _check_apply(self, logits: Any) -> Tensor:
        if self.n_classes_ is None:
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted yet; call fit(logits, labels) first"
            )
        z = prepare_scores(logits, probs=False, name="logits")  # finite, 2-D; tensors not copied
        if z.ndim != 2 or z.shape[1] != self.n_classes_:
            got = z.shape[1] if z.ndim == 2 else f"shape {tuple(z.shape)}"
            raise ValueError(
                f"logits have {got} classes but this {type(self).__name__} was fitted on "
                f"{self.n_classes_}; apply it to logits of the same model"
            )
        return z

    def settings(self) -> dict[str, Any]:
        """The keyword-only settings of ``__init__`` and their values."""
        sig = inspect.signature(type(self).__init__)
        return {
            p.name: getattr(self, p.name)
            for p in sig.parameters.values()
            if p.kind is p.KEYWORD_ONLY
        }

    def learned(self) -> dict[str, Any]:
        """Non-tensor learned values (chosen regularisation strengths, ...)."""
        return {}

    def _restore(self, learned: dict[str, Any]) -> None:
        """Set non-tensor learned values from :meth:`learned` output."""

    def state_tensors(self) -> dict[str, Tensor]:
        """Learned tensors by name (names end in ``_``)."""
        return {
            k: v for k, v in vars(self).items() if k.endswith("_") and isinstance(v, Tensor)
        } | {k: v for k, v in self._buffers.items() if k.endswith("_") and v is not None}

    # ------------------------------------------------------------------ files

    def save(self, path: str | Path) -> Path:
        """Write the fitted calibrator to ``path`` (safetensors with JSON metadata), atomically."""
        if self.n_classes_ is None:
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; nothing to save")
        tensors = {k: v.detach().cpu().contiguous() for k, v in self.state_tensors().items()}
        meta = {
            "format": "calibkit-calibrator",
            "version": FORMAT_VERSION,
            "method": self.name,
            "settings": self.settings(),
            "learned": self.learned(),
            "n_classes": self.n_classes_,
            "fit_report": asdict(self.fit_report_) if self.fit_report_ else None,
        }
        return write_checked(path, tensors, meta)

    @classmethod
    def load(cls, path: str | Path) -> Calibrator:
        """Read a calibrator written by :meth:`save`; refuses corrupted or altered files."""
        from . import REGISTRY

        meta, tensors = read_checked(path, "calibrator")
        if meta.get("method") not in REGISTRY.names():
            raise FileFormatError(f"{path}: unknown calibrator {meta.get('method')!r}")
        obj = REGISTRY.create(meta["method"], **meta["settings"])
        obj.n_classes_ = int(meta["n_classes"])
        for k, v in tensors.items():
            setattr(obj, k, v)
        obj._restore(meta.get("learned", {}))
        if meta.get("fit_report"):
            obj.fit_report_ = FitReport(**meta["fit_report"])
        return obj


def write_checked(path: str | Path, tensors: dict[str, Tensor], meta: dict[str, Any]) -> Path:
    """Tensors as safetensors with JSON metadata and a SHA-256 over both, written atomically."""
    from safetensors.torch import save_file

    text = json.dumps(meta, sort_keys=True, default=_json_default)
    digest = _digest(text, tensors)
    atomic_write(
        path,
        lambda tmp: save_file(tensors, tmp, metadata={"calibkit": text, "sha256": digest}),
        suffix=".tmp",
    )
    return Path(path)


def read_checked(path: str | Path, what: str) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """(metadata, tensors) of a file from :func:`write_checked`; refuses altered files, files
    of a newer format and anything that is not one (``what`` names the kind in messages)."""
    from safetensors import safe_open

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta_raw = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    except Exception as e:  # safetensors raises its own error types for bad headers
        raise FileFormatError(f"{path}: not a calibkit {what} file ({e})") from None
    text, digest = meta_raw.get("calibkit"), meta_raw.get("sha256")
    if text is None or digest is None:
        raise FileFormatError(f"{path}: not a calibkit {what} file (no calibkit metadata)")
    if _digest(text, tensors) != digest:
        raise FileFormatError(f"{path}: checksum mismatch; the file was altered or damaged")
    meta = json.loads(text)
    if meta.get("version", 0) > FORMAT_VERSION:
        raise FileFormatError(
            f"{path}: written by a newer calibkit (format {meta['version']}); upgrade calibkit"
        )
    return meta, tensors


def _json_default(o: Any) -> Any:
    if isinstance(o, Tensor):
        return o.tolist()
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"cannot store {type(o).__name__} in a calibrator file")


def _digest(text: str, tensors: dict[str, Tensor]) -> str:
    h = hashlib.sha256(text.encode())
    for k in sorted(tensors):
        t = tensors[k].contiguous()
        h.update(k.encode())
        h.update(str(t.dtype).encode() + str(tuple(t.shape)).encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()
