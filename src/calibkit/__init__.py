"""calibkit: measure, fix, train for and benchmark the calibration of neural-network classifiers.

Logits and integer labels are the currency between layers; see docs/ (docs/architecture.md first).
"""

from . import metrics
from .metrics import CalibrationMeter, compare_paired, evaluate

__version__ = "0.1.0"
__all__ = ["CalibrationMeter", "__version__", "compare_paired", "evaluate", "metrics"]
