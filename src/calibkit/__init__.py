"""calibkit: measure, fix, train for and benchmark the calibration of neural-network classifiers.

Logits and integer labels are the currency between layers; see docs/ (docs/architecture.md first).
The names below are imported on first use, so ``import calibkit`` alone does not import
PyTorch.
"""

from ._lazy import lazy_attributes

__version__ = "0.1.0"
__all__ = ["CalibrationMeter", "__version__", "compare_paired", "evaluate", "metrics"]

__getattr__ = lazy_attributes(
    __name__,
    {
        "metrics": ".metrics",
        "CalibrationMeter": ".metrics",
        "compare_paired": ".metrics",
        "evaluate": ".metrics",
    },
)
