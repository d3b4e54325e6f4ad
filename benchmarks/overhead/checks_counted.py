"""How many times one calibkit command checks each value it is given (issue 27 §2 and issue
43: a value is checked once, where it enters, and trusted after).

Runs one ``calibkit`` command in this process with these counted, and prints each count:

- ``parse_spec`` on text (a ``Spec`` passed on is not parsed again), per spec;
- a calibrator's ``check_settings`` (per class), a ``TrainConfig.check`` that checks
  (one that returns a config checked and unchanged since is counted apart, as trusted);
- each value checked against its declaration (``Declared.check``, per setting name);
- ``pick_device`` on a name (a ``torch.device`` passed on is counted as trusted);
- a ``BinScheme`` made (it checks ``n_bins`` and ``binning`` where it is made).

Examples (the three walks of issue 43)::

    python benchmarks/overhead/checks_counted.py bench /tmp/walk.yaml -o /tmp/walk-bench
    python benchmarks/overhead/checks_counted.py evaluate \\
        ../shared/data/logits/resnet110_cifar10.npz --n-bins 15 --bootstrap 50 --json
    python benchmarks/overhead/checks_counted.py train --data digits --model mlp --epochs 1 \\
        --device cpu --stage2 ts -o /tmp/walk-run --json

where ``/tmp/walk.yaml`` holds ``methods: [{name: Pretrained}]``, ``datasets: [{logits:
../shared/data/logits/resnet110_cifar10.npz}]``, ``posthoc: [ts]``.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections import Counter
from collections.abc import Callable

import calibkit
import calibkit._registry as registry
from calibkit._settings import Declared
from calibkit.metrics._binning import BinScheme
from calibkit.posthoc._base import Method
from calibkit.training import _config as config

COUNTS: Counter[str] = Counter()


def _by_name(real: Callable, counting: Callable) -> None:
    """Every calibkit module that imported ``real`` by name gets ``counting``."""
    for info in pkgutil.walk_packages(calibkit.__path__, "calibkit."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an adapter whose library is not installed
            continue
        for name, value in list(vars(module).items()):
            if value is real:
                setattr(module, name, counting)


def _count_everything() -> None:
    parse, pick, declared = registry.parse_spec, config.pick_device, Declared.check
    settings, check, made = (
        Method.check_settings.__func__,
        config.TrainConfig.check,
        BinScheme.__post_init__,
    )

    def parse_counted(spec):
        if isinstance(spec, str):
            COUNTS[f"parse_spec {spec}"] += 1
        return parse(spec)

    def pick_counted(name):
        COUNTS["pick_device " + ("on a name" if isinstance(name, str) else "trusted")] += 1
        return pick(name)

    def declared_counted(self, value):
        COUNTS[f"declared {self.name}"] += 1
        return declared(self, value)

    def settings_counted(cls, **s):
        COUNTS[f"check_settings {cls.__name__}"] += 1
        return settings(cls, **s)

    def check_counted(self):
        values = getattr(self, "_values", None)  # (a version before the memo has none)
        trusted = values is not None and self.__dict__.get("_checked") == values()
        COUNTS["TrainConfig.check " + ("trusted" if trusted else "checking")] += 1
        return check(self)

    def made_counted(self):
        COUNTS["BinScheme made"] += 1
        return made(self)

    _by_name(parse, parse_counted)
    _by_name(pick, pick_counted)
    Declared.check = declared_counted
    Method.check_settings = classmethod(settings_counted)
    config.TrainConfig.check = check_counted
    BinScheme.__post_init__ = made_counted


def main(argv: list[str]) -> None:
    _count_everything()
    from calibkit.cli import cli

    try:
        cli.main(argv, standalone_mode=False)
    finally:
        print("count  check", file=sys.stderr)
        for what, n in sorted(COUNTS.items()):
            print(f"{n:5d}  {what}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
