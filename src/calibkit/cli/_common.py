"""What every command shares: the group, one-line errors (exit code 2, no traceback), the
version, and the option names errors are told in (the shared options are in
:mod:`.options`, output in :mod:`.output`)."""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import warnings
from contextlib import contextmanager

import click

from .. import __version__
from .._allocator import retain_freed_memory

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


USER_ERRORS = (
    ValueError,
    TypeError,
    FileNotFoundError,
    PermissionError,
    NotADirectoryError,
    IsADirectoryError,
    KeyError,
    ImportError,  # an optional library is missing: the message is the install hint
)


class CalibkitGroup(click.Group):
    """Group that turns user errors into one line and exit code 2."""

    def main(self, *args, **kwargs):  # type: ignore[override]
        kwargs["standalone_mode"] = False
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _terminated)  # unwind: workers stopped, files closed
        with warnings.catch_warnings():
            warnings.showwarning = one_line_warning
            return self._main(*args, **kwargs)

    def _main(self, *args, **kwargs):
        given = kwargs.get("args") if kwargs.get("args") is not None else sys.argv[1:]
        newline = any("\n" in str(a) for a in given or [])
        try:
            return super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as e:
            click.echo(e.ctx.get_help() if e.ctx else str(e))
            sys.exit(2)
        except click.UsageError as e:
            hint = f" (see '{e.ctx.command_path} --help')" if e.ctx else ""
            click.echo(f"error: {e.format_message()}{hint}", err=True)
            sys.exit(2)
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except click.Abort as e:
            terminated = isinstance(e.__context__, Terminated)
            click.echo("terminated" if terminated else "aborted", err=True)
            sys.exit(143 if terminated else 130)
        except USER_ERRORS as e:
            msg = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
            msg = self._flags(msg, given or [])
            click.echo(f"error: {_one_line(msg, newline) or type(e).__name__}", err=True)
            sys.exit(2)
        except OSError as e:
            click.echo(f"error: {e.strerror or e}: {e.filename or ''}".rstrip(": "), err=True)
            sys.exit(2)

    def _flags(self, message: str, given: list[str]) -> str:
        """A library error in the words of the command that ``given`` invokes
        (:func:`in_flags`)."""
        command = self.commands.get(next((a for a in given if not a.startswith("-")), ""))
        return in_flags(message, command)


def in_flags(message: str, command: click.Command | None) -> str:
    """A library message in the command line's words: the library names what a Python
    caller passes (``resume=True``, ``labels_key=``, ``engine='ray'``), and each such
    parameter that ``command`` has as an option becomes its flag (``--resume``,
    ``--labels-key``, ``--engine ray``); one it has no option for stays as it is.
    ``probs=True`` is left out where the command has no ``--probs``; ``probs=False`` is
    ``--logits`` where it has one. A declared setting's
    error starts with its name (``n_bins: expected an integer in 1..100,000, got 0``): that
    name becomes the flag too (``--n-bins: ...``)."""
    options = {
        p.name: p for p in (command.params if command else ()) if isinstance(p, click.Option)
    }
    head, colon, rest = message.partition(": ")
    if colon and head in options:
        message = f"{max(options[head].opts, key=len)}: {rest}"
    if "probs" not in options:
        message = message.replace(
            "pass probs=True for probabilities, or probs=False for logits that look so",
            "pass their logarithm (log p) as logits",
        ).replace(", or probs=False for logits that look so", "")

    def flag(match: re.Match) -> str:
        option = options.get(match.group(1))
        if option is None:
            return match.group(0)
        name, value = max(option.opts, key=len), match.group(2).strip("'")
        if option.is_flag:  # --probs/--logits: probs=False is the second flag
            wanted = value != "False"
            if option.secondary_opts and not wanted:
                return option.secondary_opts[0]
            sets = option.flag_value is not False  # a pair's first flag sets True
            return name if sets == wanted else match.group(0)
        return f"{name} {value}" if value else name

    return _PARAMETER.sub(flag, message)


#: a parameter as a library message names it: ``name=`` and its value, if any (not a
#: setting inside a spec such as ``maccal:lr=0.5``)
_PARAMETER = re.compile(r"(?<![\w:,.=-])([a-z][a-z0-9_]*)=('[^']*'|[^\s,;)]*)")


def _one_line(message: str, newline_given: bool) -> str:
    """An error as one line: its first line; where an argument held a newline (a path), the
    whole message with each newline shown as \\n, so that the path is not cut."""
    if newline_given:
        return message.replace("\n", "\\n")
    return message.splitlines()[0] if message else ""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is so that it unwinds as after Ctrl-C."""


def _terminated(signum, frame) -> None:
    raise Terminated


def one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Show a warning as one ``warning: ...`` line on stderr, without its source line (a
    :class:`~calibkit.posthoc._anomalies.CalibrationWarning` names the method and what went
    wrong; any other warning its first line)."""
    text = str(message).strip().splitlines() or [category.__name__]
    click.echo(f"warning: {text[0]}", err=True)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: calibkit's version and which row scan serves the metrics."""
    if not value or ctx.resilient_parsing:
        return
    from ..metrics.internal import row_scan

    kernel = row_scan.kernel()
    scan = f"compiled ({kernel})" if kernel else "PyTorch"
    why = (
        ""
        if kernel
        else (
            f" ({row_scan.ENV}=0)"
            if os.environ.get(row_scan.ENV, "").strip() == "0"
            else " (the compiled scan is not built or this CPU lacks AVX2)"
        )
    )
    click.echo(f"calibkit, version {__version__}\nrow scan: {scan}{why}")
    ctx.exit()


@click.group(cls=CalibkitGroup, context_settings=CONTEXT)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and the row scan in use, and exit.",
)
def cli() -> None:
    """Measure, fix and benchmark the calibration of classifiers.

    \b
    Start here:
      calibkit demo                          # logits from a small digits model, measured
      calibkit evaluate run.npz --plot rel.png
    """
    retain_freed_memory()


@contextmanager
def options_named():
    """Name the command-line option in an error raised for a setting (``lr: ...`` becomes
    ``--lr: ...``)."""
    try:
        yield
    except ValueError as err:
        name, sep, rest = str(err).partition(": ")
        options = {p.name for p in click.get_current_context().command.params}
        if sep and name in options:
            raise ValueError(f"--{name.replace('_', '-')}: {rest}") from None
        raise
