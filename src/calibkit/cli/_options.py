"""The options several commands share: ``--device`` (resolved once, where the command
starts), ``--bootstrap``, ``--json``, the metric settings, the split and key options; and
:func:`declared_option`, an option built from a setting's declaration (its type, default,
meaning and bounds), which ``--help`` shows and click enforces as the library does."""

from __future__ import annotations

import re
import typing
from typing import Any

import click

from .._metric_settings import (
    Binary,
    Binning,
    Bootstrap,
    BootstrapSeed,
    Ci,
    Interval,
    MetricBins,
    Optimal,
    Probs,
    Smooth,
)
from .._settings import Bounds, Declared, OneOf

#: a Sphinx role (``:mod:`x.y```, ``:func:`~x.y```) or a literal (````x````) in a help text
_MARKUP = re.compile(r":\w+:`~?([^`]+)`|``([^`]+)``")


def plain(text: str) -> str:
    """A declaration's text for a terminal: roles and literals as their bare names."""
    return _MARKUP.sub(lambda m: m.group(1) or m.group(2), text)


def declared(name: str, alias: Any, default: Any) -> Declared:
    """The declaration of a setting named ``name`` whose annotation is ``alias``
    (``Annotated[type, Setting(...)]``, as the library's signatures use it)."""
    hint, setting = typing.get_args(alias)
    return Declared(name, hint, default, setting)


def declared_option(
    setting: Declared, flag: str | None = None, *, checked: bool = True, **changes: Any
):
    """A click option for one declared setting: ``--name`` (or ``flag``), its default, its
    meaning as help, and its values as click's type (``Bounds``: an int or float range,
    open where the bound is; ``OneOf``: a choice), so the command refuses what the library
    refuses, naming the flag; a bool is a flag, a list a repeatable option.
    ``checked=False``: a number is only read as one, for a command that checks the setting
    itself as soon as it starts, under :func:`~calibkit.cli._common.options_named` (the
    ``train`` command's :meth:`TrainConfig.check <calibkit.training.TrainConfig.check>`),
    so that it is checked once."""
    hint, values, default = setting.annotation, setting.setting.values, setting.default
    kind: dict[str, Any] = {"help": plain(setting.text()), "default": default}
    kind["show_default"] = default is not None and default != [] and hint is not bool
    if hint is bool or "/" in (flag or ""):  # a flag, or a pair: True, False, else None
        kind["is_flag"] = True
    elif typing.get_origin(hint) is list:
        kind |= {"multiple": True, "type": _first(typing.get_args(hint)[0])}
    elif isinstance(values, OneOf):
        kind["type"] = click.Choice(list(values.choices))
    elif isinstance(values, Bounds):
        number = click.INT if values.integer else click.FLOAT
        kind["type"] = Checked(setting, number) if checked else number
    else:
        kind["type"] = _first(hint)
    flag = flag or "--" + setting.name.replace("_", "-")
    return click.option(flag, setting.name, **(kind | changes))


class Checked(click.ParamType):
    """A number read as ``base`` reads it, then checked by its declaration where the command
    line enters: refused in the library's words under the flag's name
    (``--n-bins: expected an integer in 1..100,000, got 200000``)."""

    def __init__(self, setting: Declared, base: click.ParamType) -> None:
        self.setting, self.base, self.name = setting, base, f"{base.name} range"

    def get_metavar(self, param: Any, ctx: Any = None) -> str:
        return self.name.upper()

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        number = self.base.convert(value, param, ctx)
        try:
            return self.setting.check(number)
        except ValueError as err:
            flag = param.opts[0] if param is not None else self.setting.name
            message = str(err).removeprefix(f"{self.setting.name}: ")
            raise click.UsageError(f"{flag}: {message}", ctx) from None


def _first(hint: Any) -> Any:
    """The option type of a field's type: a union's first member other than None (a spec
    field, ``str | Spec``, takes text)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if args else hint


def _resolve_device(ctx: click.Context, param: click.Parameter, value: str):
    from ..training.internal import pick_device

    try:
        return pick_device(value)
    except ValueError as err:  # worded as every command's --device error, train's too
        raise click.UsageError(f"--device: {str(err).removeprefix('device: ')}", ctx) from None


def device_choice(default: str):
    """``--device``, resolved once where the command starts to a ``torch.device`` that
    the rest of the command trusts (:func:`~calibkit.training._config.pick_device`)."""
    return click.option(
        "--device",
        default=default,
        show_default=True,
        callback=_resolve_device,
        help="Where to compute: cpu, cuda, cuda:N, mps or auto (a GPU where there is one).",
    )


#: --device for the commands that compute on logits files (evaluate, fit, apply, compare)
device_option = device_choice("cpu")


class OutputFile(click.Path):
    """A file a command writes: ``click.Path(dir_okay=False)``, with a symbolic link at the
    path refused first, naming it (a link planted there, even to a folder, is never
    written through; :func:`calibkit._outputs.refuse_link`)."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False)

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        from .._outputs import LinkRefused, refuse_link

        try:
            refuse_link(value)
        except LinkRefused as err:
            self.fail(str(err), param, ctx)
        return super().convert(value, param, ctx)


def on_device(array: Any, device: Any, name: str) -> Any:
    """A loaded array as a tensor on ``device`` (None stays None), checked by calibkit first
    (:func:`calibkit._checks.to_tensor`: a column of text or dates, unsigned integers past
    int64 are named in one line; a read-only array is copied, without torch's warning)."""
    from .._checks import to_tensor

    return None if array is None else to_tensor(array, name).to(device)


def bootstrap_option(default: int):
    """--bootstrap N, shared by every command that reports intervals."""
    return declared_option(declared("bootstrap", Bootstrap, default))


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


#: a seed: a whole number that NumPy's and torch's generators both take
SEED = click.IntRange(0, 2**63 - 1)


METRIC_OPTIONS = [
    declared_option(declared("probs", Probs, None), "--probs/--logits"),
    declared_option(declared("n_bins", MetricBins, 15)),
    declared_option(declared("binning", Binning, "calibkit")),
    declared_option(declared("binary", Binary, "top-label")),
    bootstrap_option(0),
    declared_option(declared("seed", BootstrapSeed, 0)),
    declared_option(declared("ci", Ci, 0.95)),
    declared_option(declared("interval", Interval, "auto")),
    declared_option(declared("optimal", Optimal, True), "--optimal/--no-optimal"),
    declared_option(declared("smooth", Smooth, True), "--smooth/--no-smooth"),
    click.option(
        "--plot",
        type=OutputFile(),
        default=None,
        help="Write a reliability diagram (.png, .svg or .pdf).",
    ),
    json_option,
]


def metric_options(f):
    for option in reversed(METRIC_OPTIONS):
        f = option(f)
    return f


KEY_OPTIONS = [
    click.option(
        "--logits-key",
        default=None,
        help="Array (or CSV column) of logits (default: logits_<split> or logits).",
    ),
    click.option(
        "--labels-key",
        default=None,
        help="Array (or CSV column) of labels (default: labels_<split> or labels).",
    ),
]


#: the split whose keys apply and evaluate read (fit reads the calibration split, val)
split_option = click.option(
    "--split",
    default="test",
    show_default=True,
    help="Split whose keys to read from a file that holds several (logits_<split>).",
)


def key_options(f):
    for option in reversed(KEY_OPTIONS):
        f = option(f)
    return f


def data_roots(*specs) -> list[str]:
    """The folders that dataset specs read (their ``root`` settings): inputs that an output
    may not replace (:func:`calibkit._outputs.check_output`). Text is parsed; a parsed
    :class:`~calibkit._registry.Spec` is read as it is."""
    from .._registry import parse_spec

    roots = []
    for spec in specs:
        if spec is None:
            continue
        parsed = parse_spec(spec) if isinstance(spec, str) else spec
        root = parsed.kwargs.get("root")
        if isinstance(root, str):
            roots.append(root)
    return roots
