"""Commands that describe a dataset: ``info``, ``versions`` and ``tags list|create|delete``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import click
from rich.table import Table

from lance_table._parallel import METADATA, map_on
from lance_table.cli.common import (
    cells,
    console,
    dataset_argument,
    emit_json,
    human_bytes,
    json_flag,
    open_dataset,
    table,
    version_ref,
)
from lance_table.format import flags, paths


def _timestamp(ns: int) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc) if ns else None


def dataset_info(ds: Any) -> dict[str, Any]:
    """What ``info`` shows of a dataset handle's version, as plain values."""
    manifest = ds.manifest
    frags = manifest.fragments
    own = [f for frag in frags for f in frag.files if f.base_id is None]
    unknown = [paths.data_file_path(f.path) for f in own if f.file_size_bytes is None]
    sizes = map_on(METADATA, ds._storage.size, unknown) if unknown else []
    data_bytes = sum(f.file_size_bytes or 0 for f in own) + sum(sizes)
    indices = [
        {
            "name": d.name,
            "type": d.index_type,
            "fields": d.field_names,
            "rows_indexed": d.num_rows_indexed,
            "segments": len(d.segments),
            "size_bytes": d.total_size_bytes,
        }
        for d in ds.describe_indices()
    ]
    writer = " ".join(p for p in (manifest.writer_library, manifest.writer_version) if p)
    return {
        "uri": ds.uri,
        "version": ds.version,
        "latest_version": ds.latest_version,
        "timestamp": _timestamp(manifest.timestamp_ns),
        "rows": manifest.num_rows,
        "deleted_rows": sum(f.num_deleted for f in frags),
        "fragments": len(frags),
        "data_files": sum(len(f.files) for f in frags),
        "deletion_files": sum(f.deletion_file is not None for f in frags),
        "data_bytes": data_bytes,
        "data_format": ds.data_storage_version,
        "writer": writer,
        "reader_feature_flags": flags.describe(manifest.reader_feature_flags),
        "writer_feature_flags": flags.describe(manifest.writer_feature_flags),
        "schema": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in ds.schema],
        "indices": indices,
        "config": dict(manifest.config),
        "metadata": dict(manifest.table_metadata),
    }


@click.command()
@dataset_argument
@click.option("--version", "version", metavar="VERSION", help="A version number or tag (default: latest).")
@json_flag
def info(uri: str, storage_options: Mapping[str, str], version: str | None, as_json: bool) -> None:
    """Schema, version, rows, fragments, files, sizes, data format, feature flags and indices of
    the dataset at URI."""
    data = dataset_info(open_dataset(uri, storage_options, version_ref(version)))
    if as_json:
        emit_json(data)
        return
    out = console()
    summary = Table.grid(padding=(0, 2))
    summary.add_column(style="bold")
    summary.add_column()
    latest = "" if data["version"] == data["latest_version"] else f" (latest: {data['latest_version']})"
    rows = [
        ("dataset", data["uri"]),
        ("version", f"{data['version']}{latest}"),
        ("created", data["timestamp"].isoformat(timespec="seconds") if data["timestamp"] else "?"),
        ("rows", f"{data['rows']} ({data['deleted_rows']} deleted)"),
        ("fragments", data["fragments"]),
        ("files", f"{data['data_files']} data, {data['deletion_files']} deletion"),
        ("size", f"{human_bytes(data['data_bytes'])} of data files"),
        ("data format", data["data_format"]),
        ("writer", data["writer"]),
        ("reader flags", data["reader_feature_flags"]),
        ("writer flags", data["writer_feature_flags"]),
    ]
    rows += [(f"config {k}", v) for k, v in data["config"].items()]
    rows += [(f"metadata {k}", v) for k, v in data["metadata"].items()]
    for row in rows:
        summary.add_row(*cells(*row))
    out.print(summary)
    schema = table("schema", "column", "type", "nullable")
    for f in data["schema"]:
        schema.add_row(*cells(f["name"], f["type"], "yes" if f["nullable"] else "no"))
    out.print(schema)
    if data["indices"]:
        idx = table("indices", "name", "type", "fields", "rows indexed", "segments", "size")
        for i in data["indices"]:
            idx.add_row(
                *cells(
                    i["name"],
                    i["type"],
                    ", ".join(i["fields"]),
                    i["rows_indexed"],
                    i["segments"],
                    human_bytes(i["size_bytes"]),
                )
            )
        out.print(idx)
    else:
        out.print("indices: none")


@click.command()
@dataset_argument
@json_flag
def versions(uri: str, storage_options: Mapping[str, str], as_json: bool) -> None:
    """The versions of the dataset at URI: when, which operation, rows, tags."""
    ds = open_dataset(uri, storage_options)
    tagged: dict[int, list[str]] = {}
    for name, tag in ds.tags.list().items():
        tagged.setdefault(tag.version, []).append(name)
    history = [
        {
            "version": v["version"],
            "timestamp": v["timestamp"],
            "operation": v.get("operation"),
            "rows": int(v["metadata"]["total_rows"]) if "total_rows" in v.get("metadata", {}) else None,
            "fragments": (
                int(v["metadata"]["total_fragments"]) if "total_fragments" in v.get("metadata", {}) else None
            ),
            "tags": sorted(tagged.get(v["version"], [])),
            "message": v.get("commit_message"),
        }
        for v in ds.versions()
    ]
    if as_json:
        emit_json(history)
        return
    out = table(None, "version", "timestamp (UTC)", "operation", "rows", "fragments", "tags", "message")
    for v in history:
        when = v["timestamp"].isoformat(sep=" ", timespec="seconds") if v["timestamp"] else ""
        out.add_row(
            *cells(
                v["version"],
                when,
                v["operation"],
                v["rows"],
                v["fragments"],
                ", ".join(v["tags"]),
                v["message"],
            )
        )
    console().print(out)


@click.group()
def tags() -> None:
    """List, create and delete the tags of a dataset."""


@tags.command("list")
@dataset_argument
@json_flag
def tags_list(uri: str, storage_options: Mapping[str, str], as_json: bool) -> None:
    """The tags of the dataset at URI, oldest version first."""
    ordered = open_dataset(uri, storage_options).tags.list_ordered("asc")
    rows = [
        {"name": name, "version": tag.version, "created_at": tag.created_at, "updated_at": tag.updated_at}
        for name, tag in ordered
    ]
    if as_json:
        emit_json(rows)
        return
    if not rows:
        click.echo("no tags")
        return
    out = table(None, "tag", "version", "created (UTC)", "updated (UTC)")
    for r in rows:
        out.add_row(
            *cells(
                r["name"],
                r["version"],
                r["created_at"].isoformat(sep=" ", timespec="seconds"),
                r["updated_at"].isoformat(sep=" ", timespec="seconds"),
            )
        )
    console().print(out)


@tags.command("create")
@dataset_argument
@click.argument("name")
@click.argument("version", required=False)
def tags_create(uri: str, storage_options: Mapping[str, str], name: str, version: str | None) -> None:
    """Name VERSION (a number or another tag; default: the latest) of the dataset at URI."""
    ds = open_dataset(uri, storage_options)
    ds.tags.create(name, version_ref(version))
    click.echo(f"tag {name!r} -> version {ds.tags.get_version(name)}")


@tags.command("delete")
@dataset_argument
@click.argument("name")
def tags_delete(uri: str, storage_options: Mapping[str, str], name: str) -> None:
    """Remove the tag NAME of the dataset at URI (the version stays)."""
    open_dataset(uri, storage_options).tags.delete(name)
    click.echo(f"tag {name!r} deleted")


COMMANDS = (info, versions, tags)
