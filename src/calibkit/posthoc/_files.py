"""Calibrator files: safetensors with JSON metadata and a SHA-256 over both, written
atomically, and read back as if hostile. The checksum has no key: it catches damage, not
forgery, so every value read is validated (metadata types, every learned tensor present and
finite, a positive temperature, and a probe of logits through a loaded logits calibrator;
docs/posthoc.md)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .._outputs import atomic_write
from ..io import FileFormatError

FORMAT_VERSION = 1


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
    try:
        meta = json.loads(text)
    except (ValueError, RecursionError):
        raise FileFormatError(
            f"{path}: the metadata is not valid JSON (or nested too deep)"
        ) from None
    if not isinstance(meta, dict):
        raise FileFormatError(f"{path}: the metadata is a {type(meta).__name__}, not a mapping")
    version = meta.get("version", 0)
    if not isinstance(version, int) or isinstance(version, bool):
        raise FileFormatError(
            f"{path}: metadata 'version' must be an integer, got {type(version).__name__} "
            f"{version!r}"
        )
    if version > FORMAT_VERSION:
        raise FileFormatError(
            f"{path}: written by a newer calibkit (format {version}); upgrade calibkit"
        )
    return meta, tensors


def first_line(err: BaseException) -> str:
    return (str(err).splitlines() or [type(err).__name__])[0]


#: the metadata of a calibrator file and the type each entry must have (None allowed for
#: ``n_classes``): a checksum has no key, so a forged file is read as if hostile
META_TYPES = {"method": str, "settings": dict, "learned": dict, "n_classes": int,
              "fit_report": dict}  # fmt: skip


def check_meta(path: Path | str, meta: Any) -> None:
    if not isinstance(meta, dict):
        raise FileFormatError(f"{path}: the metadata is a {type(meta).__name__}, not a mapping")
    for key, kind in META_TYPES.items():
        value = meta.get(key)
        if key == "n_classes" and value is None:
            continue
        if not isinstance(value, kind) or isinstance(value, bool):
            raise FileFormatError(
                f"{path}: metadata {key!r} must be a {kind.__name__}, got {type(value).__name__}"
            )
    if meta["n_classes"] is not None and meta["n_classes"] < 2:
        raise FileFormatError(f"{path}: metadata n_classes must be at least 2")


#: rows of the probe that a loaded logits calibrator is applied to
PROBE_ROWS = 32


def loaded_problem(obj: Any, tensors: dict[str, Tensor]) -> str | None:
    """What is wrong with a loaded method, or None: the tensors it needs must all be there,
    be finite and hold a positive temperature; a logits calibrator must map a probe of
    logits (seeded normal, scale 3) to finite outputs of the probe's shape (probabilities
    that sum to 1 where it returns log-probabilities)."""
    expected = set(obj.state_tensors())
    missing = sorted(expected - set(tensors))
    if missing:
        return f"tensor {missing[0]!r} is missing"
    for name, t in tensors.items():
        if name in obj.nan_means_empty and t.is_floating_point() and t.ndim:
            if bool(torch.isnan(t.reshape(-1, t.shape[-1])).all(1).any()):
                return f"tensor {name!r} has a map with every bin empty (all NaN)"
            t = t[~torch.isnan(t)]
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            return f"tensor {name!r} holds NaN or infinite values"
        if t.dtype == torch.bool:
            return f"tensor {name!r} holds booleans, not numbers"
    t = getattr(obj, "temperature_", None)
    if isinstance(t, Tensor) and not bool((t > 0).all()):
        return f"temperature {t.flatten()[:3].tolist()} is not positive"
    try:
        broken = obj.invariant_problem()
    except AttributeError as err:  # a learned tensor the method needs is not in the file
        return f"a learned value is missing ({first_line(err)})"
    if broken:
        return broken
    k = getattr(obj, "n_classes_", None)
    if obj.level == "model":
        return None
    if k is None:
        return "the number of classes (n_classes) is missing"
    probe = 3 * torch.randn(
        PROBE_ROWS, k, generator=torch.Generator().manual_seed(0), dtype=torch.float64
    )
    try:
        with torch.no_grad():
            out = obj(probe)
    except AttributeError as err:  # a learned tensor the method uses is not in the file
        return f"a learned value is missing ({first_line(err)})"
    except (RuntimeError, ValueError, IndexError, TypeError) as err:
        return f"its values do not fit {k} classes ({first_line(err)})"
    if tuple(out.shape) != (PROBE_ROWS, k) or not bool(torch.isfinite(out).all()):
        return f"it maps {k}-class logits to non-finite values or to shape {tuple(out.shape)}"
    if getattr(obj, "output", "logits") == "log-probabilities":
        total = out.double().exp().sum(1)
        if not bool(torch.allclose(total, torch.ones_like(total), atol=1e-6)):
            return "its probabilities do not sum to 1"
    return None


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
