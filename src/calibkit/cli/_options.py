"""The options several commands share: ``--device`` (resolved once, where the command
starts), ``--bootstrap``, ``--json``, the metric settings, the split and key options."""

from __future__ import annotations

from typing import Any

import click

from .._conventions import BINNINGS, INTERVALS


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
    return click.option(
        "--bootstrap",
        default=default,
        show_default=True,
        type=click.IntRange(min=0),
        help="Bootstrap resamples for 95 % intervals (0: none).",
    )


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


#: a seed: a whole number that NumPy's and torch's generators both take
SEED = click.IntRange(0, 2**63 - 1)


METRIC_OPTIONS = [
    click.option("--probs", is_flag=True, help="Scores are probabilities, not logits."),
    click.option(
        "--n-bins",
        default=15,
        show_default=True,
        type=click.IntRange(min=1),
        help="Number of equal-width (and equal-mass) bins.",
    ),
    click.option(
        "--binning",
        default="calibkit",
        show_default=True,
        type=click.Choice(list(BINNINGS)),
        help="Bin-edge convention (docs/metrics.md).",
    ),
    click.option(
        "--binary",
        default="top-label",
        show_default=True,
        type=click.Choice(["top-label", "positive"]),
        help="Binary problems: top label, or P(class 1) against y = 1.",
    ),
    bootstrap_option(0),
    click.option("--seed", default=0, show_default=True, type=SEED, help="Bootstrap seed."),
    click.option(
        "--ci",
        default=0.95,
        show_default=True,
        type=click.FloatRange(0, 1, min_open=True, max_open=True),
        help="Interval level.",
    ),
    click.option(
        "--interval",
        default="auto",
        show_default=True,
        type=click.Choice(INTERVALS),
        help="Bootstrap interval: auto picks each metric's by the coverage study "
        "(docs/metrics.md).",
    ),
    click.option("--no-optimal", is_flag=True, help="Skip optimal ECE (1000 temperatures)."),
    click.option("--no-smooth", is_flag=True, help="Skip smooth ECE."),
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
