"""The ``calibkit`` command (also ``python -m calibkit``): one module per command group,
each a thin layer over library functions.

* :mod:`._common`: the group, one-line errors (exit code 2, no traceback), the version;
* :mod:`._options`, :mod:`._output`, :mod:`._pretrained`, :mod:`._progress`: the shared
  options, what commands print, a pretrained network given by options, progress lines;
* :mod:`._measure`: ``evaluate``, ``demo``;
* :mod:`._calibrate`: ``fit``, ``apply``, ``methods``, ``calibrate``;
* :mod:`._compare`: ``compare``;
* :mod:`._train`: ``train``;
* :mod:`._bench`: ``bench``, ``report``.
"""

from __future__ import annotations

from . import _bench, _calibrate, _compare, _measure, _train  # noqa: F401  (each registers its commands)
from ._common import cli


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``calibkit`` script."""
    cli.main(args=argv, prog_name="calibkit")


__all__ = ["cli", "main"]
