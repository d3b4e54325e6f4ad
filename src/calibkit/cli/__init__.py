"""The ``calibkit`` command (also ``python -m calibkit``): one module per command group,
each a thin layer over library functions.

* :mod:`.common`: the group, one-line errors (exit code 2, no traceback), the version;
* :mod:`.options`, :mod:`.output`, :mod:`.pretrained`, :mod:`.progress`: the shared
  options, what commands print, a pretrained network given by options, progress lines;
* :mod:`.measure`: ``evaluate``, ``demo``;
* :mod:`.calibrate`: ``fit``, ``apply``, ``methods``, ``calibrate``;
* :mod:`.compare`: ``compare``;
* :mod:`.train`: ``train``;
* :mod:`.bench`: ``bench``, ``report``.
"""

from __future__ import annotations

from . import bench, calibrate, compare, measure, train  # noqa: F401  (each registers its commands)
from .common import cli


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``calibkit`` script."""
    cli.main(args=argv, prog_name="calibkit")


__all__ = ["cli", "main"]
