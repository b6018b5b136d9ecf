"""What every command shares: the dataset argument and its storage options, argument parsers
(durations, versions), error handling, the console, and the one place progress reporting is wired."""

from __future__ import annotations

import datetime as dt
import inspect
import io
import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from lance_table.cli import EXIT_ERROR
from lance_table.errors import LanceTableError

F = TypeVar("F", bound=Callable[..., Any])

#: Storage options (``key=value``, separated by spaces) every command also takes from the environment.
STORAGE_OPTIONS_ENV = "LANCE_TABLE_STORAGE_OPTIONS"
#: Set to any value to get Python tracebacks instead of one-line errors (as ``--debug``).
DEBUG_ENV = "LANCE_TABLE_DEBUG"
# Errors of the library (and the built-in ones it raises for bad arguments or failing storage)
# that become a one-line message; anything else is a bug and keeps its traceback.
REPORTED = (LanceTableError, OSError, ValueError, NotImplementedError, ImportError)
# The width of tables when the output is not a terminal and COLUMNS is not set (rich's default, 80,
# would cut values in files and pipes).
PIPE_WIDTH = 200

_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


class CommandError(click.ClickException):
    """A library error, shown as one line (``Error: <kind>: <message>``) with exit code 1."""

    exit_code = EXIT_ERROR


class Group(click.Group):
    """A click group whose commands report library errors as one line instead of a traceback
    (``--debug`` or :data:`DEBUG_ENV` keep the traceback)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # the reader went away (``| head``): stop quietly, and keep Python's exit-time flush
            # of standard output from failing again
            _silence_stdout()
            raise click.exceptions.Exit(EXIT_ERROR) from None
        except REPORTED as exc:
            if (ctx.obj or {}).get("debug") or os.environ.get(DEBUG_ENV):
                raise
            message = " ".join(str(exc).split()) or "(no message)"
            raise CommandError(f"{type(exc).__name__}: {message}") from exc


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass  # not a real file (a test runner's buffer): nothing will flush it


def console() -> Console:
    """A console on the current standard output (tables as wide as a terminal, or
    :data:`PIPE_WIDTH` when piped)."""
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else PIPE_WIDTH
    return Console(width=width, highlight=False, soft_wrap=False)


def table(title: str | None, *columns: str) -> Table:
    """A rich table with these column headers."""
    out = Table(title=title, title_justify="left", show_lines=False)
    for name in columns:
        out.add_column(name)
    return out


def cells(*values: Any) -> list[Text]:
    """Values as table cells, never read as markup."""
    return [Text("" if v is None else str(v)) for v in values]


def human_bytes(n: int | None) -> str:
    """``1536`` -> ``"1.5 KiB"``; None -> ``"?"``."""
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def emit_json(value: Any) -> None:
    """Print ``value`` as indented JSON (datetimes as ISO text)."""
    click.echo(json.dumps(value, indent=2, default=_json_default))


def _json_default(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return sorted(value) if isinstance(value, (set, frozenset)) else list(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


# -- arguments --------------------------------------------------------------------------------------


def parse_duration(text: str) -> dt.timedelta:
    """``"7d"``, ``"12h"``, ``"1d12h"``, ``"90m"``, ``"2w"``, ``"30s"`` as a timedelta.

    Raises:
        click.BadParameter: the text is not such a duration.
    """
    compact = text.strip().lower().replace(" ", "")
    pos, seconds = 0, 0.0
    for m in _DURATION_PART.finditer(compact):
        if m.start() != pos:
            break
        seconds += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if not compact or pos != len(compact):
        raise click.BadParameter(
            f"{text!r} is not a duration: a number and a unit (s, m, h, d, w), e.g. 7d, 12h, 1d12h"
        )
    return dt.timedelta(seconds=seconds)


class Duration(click.ParamType):
    """A click parameter type for :func:`parse_duration`."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> dt.timedelta:
        if isinstance(value, dt.timedelta):
            return value
        try:
            return parse_duration(str(value))
        except click.BadParameter as exc:
            self.fail(exc.message, param, ctx)


def version_ref(text: str | None) -> int | str | None:
    """A version argument: a number, or else a tag name."""
    if text is None:
        return None
    return int(text) if text.strip().isdigit() else text


def _storage_options(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not key=value", ctx, param)
        out[key.strip()] = value
    return out


def storage_option(f: F) -> F:
    """The ``--storage-option KEY=VALUE`` option (repeatable; also from :data:`STORAGE_OPTIONS_ENV`)."""
    return click.option(
        "--storage-option",
        "-s",
        "storage_options",
        multiple=True,
        envvar=STORAGE_OPTIONS_ENV,
        metavar="KEY=VALUE",
        callback=_storage_options,
        help=(
            "A storage option, e.g. aws_region=us-east-1 (repeatable; the library's option names, "
            f"also read from ${STORAGE_OPTIONS_ENV} as space-separated pairs)."
        ),
    )(f)


def dataset_argument(f: F) -> F:
    """The ``URI`` argument of a dataset and its storage options."""
    return click.argument("uri")(storage_option(f))


def json_flag(f: F) -> F:
    """The ``--json`` flag: print the result as JSON instead of tables."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")(f)


def open_dataset(uri: str, storage_options: Mapping[str, str], version: int | str | None = None) -> Any:
    """The dataset at ``uri`` (at ``version``, a number or tag, when given).

    Raises:
        DatasetNotFoundError: there is no dataset there.
        VersionNotFoundError: the version does not exist.
    """
    from lance_table.table.entry import dataset

    return dataset(uri, version=version, storage_options=dict(storage_options) or None)


# -- progress ---------------------------------------------------------------------------------------


def progress_option(f: F) -> F:
    """The ``--progress/--no-progress`` switch of a long command (default: the library's choice,
    a bar on standard error when it is a terminal)."""
    return click.option(
        "--progress/--no-progress",
        default=None,
        help="Show a progress bar on standard error, or never (default: when it is a terminal).",
    )(f)


def progress_arguments(call: Callable[..., Any], choice: bool | None) -> dict[str, Any]:
    """The keyword arguments that give a long library call (``compact_files``,
    ``cleanup_old_versions``) the progress reporting asked for: the one place the command line
    wires the library's ``progress=`` argument. Nothing when the user did not choose (the
    library's default applies).

    Raises:
        click.UsageError: a choice was made but this version of the library takes no ``progress=``.
    """
    if choice is None:
        return {}
    if "progress" not in inspect.signature(call).parameters:
        raise click.UsageError("--progress/--no-progress: this version of lance_table reports no progress")
    return {"progress": choice}
