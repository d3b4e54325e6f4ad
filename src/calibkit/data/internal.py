"""What calibkit's other packages share from the data beyond its face (issue 67 §2): the
augmentation a run names. Not public API: a name here may change in any release; users
import from :mod:`calibkit.data`. A test fails when another package imports a private
module of this one instead."""

from ._augment import augmentation

__all__ = ["augmentation"]
