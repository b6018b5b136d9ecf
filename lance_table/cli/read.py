"""Commands that read rows or files: ``head``, ``scan`` and ``inspect``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any, TypeVar

import click
from rich.table import Table

from lance_table.cli.common import (
    cells,
    console,
    dataset_argument,
    emit_json,
    human_bytes,
    json_flag,
    open_dataset,
    storage_option,
    table,
    version_ref,
)
from lance_table.cli.output import FORMATS, check_format, print_table, write_rows

F = TypeVar("F", bound=Callable[..., Any])

#: Rows ``scan`` shows as a table when no ``--limit`` is given.
TABLE_ROWS = 100
#: Rows ``head`` shows by default.
HEAD_ROWS = 10


def _columns(values: tuple[str, ...]) -> list[str] | None:
    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    return names or None


_READ_OPTIONS = (
    click.option(
        "--columns",
        "-c",
        multiple=True,
        metavar="A,B",
        help="The columns to read (comma-separated or repeated; nested as s.x; default: all).",
    ),
    click.option("--filter", "-f", "filter_", metavar="SQL", help='A SQL filter, e.g. "price > 10".'),
    click.option(
        "--version", "version", metavar="VERSION", help="A version number or tag (default: latest)."
    ),
    click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="How to print the rows (json: one object per line).",
    ),
    click.option("--output", "-o", metavar="FILE", help="Write to FILE instead of standard output."),
)


def _read_options(f: F) -> F:
    for decorator in reversed(_READ_OPTIONS):
        f = decorator(f)
    return f


def _emit(
    uri: str,
    storage_options: Mapping[str, str],
    *,
    columns: tuple[str, ...],
    filter_: str | None,
    version: str | None,
    limit: int | None,
    fmt: str,
    output: str | None,
    table_rows: int,
) -> None:
    check_format(fmt, output)
    if fmt == "table" and output:
        raise click.UsageError("--output needs --format json, csv or parquet")
    ds = open_dataset(uri, storage_options, version_ref(version))
    names = _columns(columns)
    if fmt != "table":
        reader = ds.to_batches(columns=names, filter=filter_, limit=limit)
        write_rows(reader, reader.schema, fmt, output)
        return
    data = ds.to_table(columns=names, filter=filter_, limit=table_rows + 1 if limit is None else limit)
    note = None
    if limit is None and data.num_rows > table_rows:
        data = data.slice(0, table_rows)
        note = f"first {table_rows} rows (more match: --limit N shows more, --format csv|json|parquet all)"
    print_table(data, note=note)


@click.command()
@dataset_argument
@click.option("--num-rows", "-n", type=click.IntRange(min=0), default=HEAD_ROWS, show_default=True)
@_read_options
def head(
    uri: str,
    storage_options: Mapping[str, str],
    num_rows: int,
    columns: tuple[str, ...],
    filter_: str | None,
    version: str | None,
    fmt: str,
    output: str | None,
) -> None:
    """The first rows of the dataset at URI."""
    _emit(
        uri, storage_options, columns=columns, filter_=filter_, version=version, limit=num_rows, fmt=fmt,
        output=output, table_rows=num_rows,
    )  # fmt: skip


@click.command()
@dataset_argument
@click.option(
    "--limit", "-l", type=click.IntRange(min=0), default=None,
    help=f"At most this many rows (default: all; a table shows {TABLE_ROWS}).",
)  # fmt: skip
@_read_options
def scan(
    uri: str,
    storage_options: Mapping[str, str],
    limit: int | None,
    columns: tuple[str, ...],
    filter_: str | None,
    version: str | None,
    fmt: str,
    output: str | None,
) -> None:
    """Rows of the dataset at URI: the columns asked for, those the filter keeps, up to the limit,
    as a table or as JSON Lines, CSV or Parquet (streamed)."""
    _emit(
        uri, storage_options, columns=columns, filter_=filter_, version=version, limit=limit, fmt=fmt,
        output=output, table_rows=TABLE_ROWS,
    )  # fmt: skip


@click.command()
@click.argument("file")
@storage_option
@json_flag
def inspect(file: str, storage_options: Mapping[str, str], as_json: bool) -> None:
    """Format version, rows, sizes, schema and columns (pages, bytes, encodings) of one Lance data
    file (a .lance file, e.g. under a dataset's data/)."""
    from lance_table.file.inspect import summarize

    summary = summarize(file, dict(storage_options) or None)
    if as_json:
        emit_json(
            {
                "path": summary.path,
                "format_version": summary.format_version,
                "num_rows": summary.num_rows,
                "size": summary.size,
                "data_bytes": summary.data_bytes,
                "metadata_bytes": summary.metadata_bytes,
                "batches": summary.batches,
                "schema": [
                    {"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in summary.schema
                ],
                "columns": [asdict(c) for c in summary.columns],
            }
        )
        return
    out = console()
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    for row in (
        ("file", summary.path),
        ("format", summary.format_version + (" (legacy)" if summary.format_version == "0.1" else "")),
        ("rows", summary.num_rows),
        ("size", f"{human_bytes(summary.size)} ({summary.size} bytes)"),
        ("data", human_bytes(summary.data_bytes)),
        ("metadata", human_bytes(summary.metadata_bytes)),
    ):
        grid.add_row(*cells(*row))
    if summary.batches:
        grid.add_row(*cells("batches", summary.batches))
    out.print(grid)
    schema = table("schema", "column", "type", "nullable")
    for f in summary.schema:
        schema.add_row(*cells(f.name, f.type, "yes" if f.nullable else "no"))
    out.print(schema)
    if summary.columns:
        cols = table("columns", "#", "pages", "values", "bytes", "encodings")
        for c in summary.columns:
            cols.add_row(*cells(c.index, c.pages, c.values, human_bytes(c.bytes), "; ".join(c.encodings)))
        out.print(cols)


COMMANDS = (head, scan, inspect)
