"""``python -m calibkit``: the command line (:mod:`calibkit.cli`)."""

from .cli import main

main()
