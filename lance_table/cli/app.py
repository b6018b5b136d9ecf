"""The ``lance-table`` command group: the commands of :mod:`.describe`, :mod:`.read` and
:mod:`.maintain` under one program with ``--version`` and ``--debug``."""

from __future__ import annotations

from collections.abc import Sequence

import click

from lance_table import __version__
from lance_table.cli import describe, maintain, read
from lance_table.cli.common import DEBUG_ENV, Group

PROG_NAME = "lance-table"


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name=PROG_NAME)
@click.option(
    "--debug", is_flag=True, help=f"Show Python tracebacks instead of one-line errors (also ${DEBUG_ENV})."
)
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Inspect, read and maintain Lance datasets (local paths, file:, memory:// and s3:// URIs).

    Errors are one line on standard error with exit code 1; bad usage exits with 2; `verify` exits
    with 3 when it finds problems.
    """
    ctx.obj = {"debug": debug}


for _command in (*describe.COMMANDS, *read.COMMANDS, *maintain.COMMANDS):
    cli.add_command(_command)


def run(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: the process's arguments); the exit code."""
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name=PROG_NAME)
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0


__all__ = ["PROG_NAME", "cli", "run"]
