"""Rows out of the command line: a rich table on the terminal, or JSON Lines, CSV or Parquet
streamed batch by batch to a file or standard output."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import sys
from collections.abc import Iterable
from typing import IO, Any

import click
import pyarrow as pa
from rich.text import Text

from lance_table.cli.common import console, table

FORMATS = ("table", "json", "csv", "parquet")
# Table cells longer than this are cut (the other formats write every value whole).
MAX_CELL = 60
# The binary formats, written only to a file (--output).
BINARY_FORMATS = ("parquet",)


def _cell(value: Any) -> Text:
    if value is None:
        return Text("null", style="dim")
    text = f"0x{value.hex()}" if isinstance(value, bytes) else str(value)
    if len(text) > MAX_CELL:
        text = text[: MAX_CELL - 1] + "…"
    return Text(text)


def print_table(data: pa.Table, *, note: str | None = None) -> None:
    """Print rows as a rich table (values cut to :data:`MAX_CELL` characters), then ``note``."""
    out = table(None, *data.column_names)
    for row in data.to_pylist():
        out.add_row(*(_cell(v) for v in row.values()))
    con = console()
    con.print(out)
    con.print(Text(note or f"{data.num_rows} rows", style="dim"))


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return str(value)


def _nested_column(schema: pa.Schema) -> pa.Field | None:
    for f in schema:
        t = f.type
        if pa.types.is_nested(t) or (isinstance(t, pa.ExtensionType) and pa.types.is_nested(t.storage_type)):
            return f
    return None


def check_format(fmt: str, output: str | None, schema: pa.Schema | None = None) -> None:
    """Refuse what a format cannot do: Parquet without ``--output``, CSV with nested columns.

    Raises:
        click.UsageError: the format cannot write this.
    """
    if fmt in BINARY_FORMATS and not output:
        raise click.UsageError(f"--format {fmt} is binary: name a file with --output FILE")
    if fmt == "csv" and schema is not None:
        nested = _nested_column(schema)
        if nested is not None:
            raise click.UsageError(
                f"CSV cannot hold column {nested.name!r} ({nested.type}): "
                "use --format json or parquet, or leave it out with --columns"
            )


def write_rows(batches: Iterable[pa.RecordBatch], schema: pa.Schema, fmt: str, output: str | None) -> int:
    """Write rows as ``fmt`` (``json``: one JSON object per line, binary values as base64;
    ``csv`` with a header; ``parquet``) to the file ``output`` or standard output. Returns the
    number of rows written.

    Raises:
        click.UsageError: see :func:`check_format`.
        OSError: the output file cannot be written.
    """
    check_format(fmt, output, schema)
    if output:
        with open(output, "wb") as target:
            return _write(batches, schema, fmt, target)
    sys.stdout.flush()
    stdout: IO[bytes] = sys.stdout.buffer
    count = _write(batches, schema, fmt, stdout)
    stdout.flush()
    return count


def _write(batches: Iterable[pa.RecordBatch], schema: pa.Schema, fmt: str, stream: IO[bytes]) -> int:
    count = 0
    if fmt == "json":
        for batch in batches:
            lines = [json.dumps(row, default=_json_value, ensure_ascii=False) for row in batch.to_pylist()]
            if lines:
                stream.write(("\n".join(lines) + "\n").encode())
            count += batch.num_rows
    elif fmt == "csv":
        import pyarrow.csv as pcsv

        with pcsv.CSVWriter(stream, schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
                count += batch.num_rows
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        with pq.ParquetWriter(stream, schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
                count += batch.num_rows
    else:  # pragma: no cover - click checks the choice
        raise click.UsageError(f"unknown format {fmt!r}")
    return count
