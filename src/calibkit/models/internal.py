"""What calibkit's other packages share from the models beyond its face (issue 67 §2): the
check that a file is a checkpoint before any run reads it. Not public API: a name here may
change in any release; users import from :mod:`calibkit.models`. A test fails when
another package imports a private module of this one instead."""

from ._checkpoint import checkpoint_file

__all__ = ["checkpoint_file"]
