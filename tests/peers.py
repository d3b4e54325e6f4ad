"""The peers that cannot be imported whole, loaded for the tests and benchmarks that use
them as oracles.

TorchUncertainty's package ``__init__`` imports torchvision, whose wheels pin another torch
and pull CUDA; its metric modules need only torch, torchmetrics and matplotlib. It is
installed with ``pip install --no-deps torch-uncertainty==0.13.0`` (the README's test
command does), and its modules are loaded from their files here.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path

__all__ = ["torch_uncertainty"]


def torch_uncertainty(module: str) -> types.ModuleType | None:
    """TorchUncertainty's ``metrics/classification/<module>`` (dots for sub-packages:
    ``"calibration.smooth_calibration_error"``), or None where it is not installed."""
    spec = importlib.util.find_spec("torch_uncertainty")
    if spec is None:
        return None
    base = Path(spec.submodule_search_locations[0]) / "metrics" / "classification"
    for name, folder in (("_tu", base), ("_tu.calibration", base / "calibration")):
        if name not in sys.modules:
            pkg = types.ModuleType(name)
            pkg.__path__ = [str(folder)]
            sys.modules[name] = pkg
    return importlib.import_module(f"_tu.{module}")
