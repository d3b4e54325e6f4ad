"""What calibkit's other packages share from the losses beyond its face (issue 67 §2): the
soft targets and the focal loss that Neural Clamping fits with. Not public API: a name
here may change in any release; users import from :mod:`calibkit.losses`. A test fails
when another package imports a private module of this one instead."""

from ._base import soft_targets
from ._weighted import Focal

__all__ = ["Focal", "soft_targets"]
