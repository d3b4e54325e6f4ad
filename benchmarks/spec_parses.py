"""How many times a calibkit command parses each spec it is given (issue 27 §2: a spec is
parsed once, where it enters, and kept as a ``Spec``).

Runs one ``calibkit`` command in this process with ``registry.parse_spec`` counted (calls
on text only: a ``Spec`` passed on is not parsed again) and prints each spec's count::

    python benchmarks/spec_parses.py train --data digits --model cnn --loss focal:gamma=3 \\
        --epochs 3 --stage2 ts -o /tmp/parses-run
    python benchmarks/spec_parses.py calibrate "neural-clamping:epochs=1" /tmp/parses-run/stage1
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections import Counter

import calibkit
import calibkit.registry as registry


def main(argv: list[str]) -> None:
    counts: Counter[str] = Counter()
    real = registry.parse_spec

    def counting(spec):
        if isinstance(spec, str):
            counts[spec] += 1
        return real(spec)

    # every module that imported the function by name gets the counting one
    for info in pkgutil.walk_packages(calibkit.__path__, "calibkit."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an adapter whose library is not installed
            continue
        if getattr(module, "parse_spec", None) is real:
            module.parse_spec = counting
    registry.parse_spec = counting
    from calibkit.cli import cli

    try:
        cli.main(argv, standalone_mode=False)
    finally:
        print("parses  spec", file=sys.stderr)
        for spec, n in counts.most_common():
            print(f"{n:6d}  {spec}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
