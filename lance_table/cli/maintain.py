"""Commands that change or check a dataset: ``compact``, ``cleanup``, ``restore`` and ``verify``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import asdict

import click

from lance_table.cli import EXIT_PROBLEMS
from lance_table.cli.common import (
    Duration,
    cells,
    console,
    dataset_argument,
    emit_json,
    human_bytes,
    json_flag,
    open_dataset,
    progress_arguments,
    progress_option,
    table,
    version_ref,
)

#: Files a ``cleanup --dry-run`` lists at most (the counts cover all of them).
DRY_RUN_FILES = 1000


@click.command()
@dataset_argument
@click.option(
    "--target-rows-per-fragment", type=click.IntRange(min=1), help="Rows a rewritten fragment aims at."
)
@click.option("--max-rows-per-group", type=click.IntRange(min=1), help="Rows per row group (legacy files).")
@click.option(
    "--materialize-deletions/--no-materialize-deletions", default=None,
    help="Rewrite fragments whose deleted rows exceed the threshold.",
)  # fmt: skip
@click.option(
    "--materialize-deletions-threshold", type=click.FloatRange(0, 1),
    help="Share of deleted rows that makes a fragment worth rewriting.",
)  # fmt: skip
@click.option(
    "--max-bytes-per-file", type=click.IntRange(min=1), help="Bytes a rewritten data file may take."
)
@click.option("--num-threads", type=click.IntRange(min=1), help="Fragments rewritten at once.")
@click.option("--batch-size", type=click.IntRange(min=1), help="Rows read per batch while rewriting.")
@progress_option
def compact(
    uri: str,
    storage_options: Mapping[str, str],
    target_rows_per_fragment: int | None,
    max_rows_per_group: int | None,
    materialize_deletions: bool | None,
    materialize_deletions_threshold: float | None,
    max_bytes_per_file: int | None,
    num_threads: int | None,
    batch_size: int | None,
    progress: bool | None,
) -> None:
    """Rewrite the small fragments (and those with many deleted rows) of the dataset at URI into
    fewer, larger ones, as a new version (unset options take the library's defaults)."""
    ds = open_dataset(uri, storage_options)
    before = ds.version
    metrics = ds.compact_files(
        target_rows_per_fragment=target_rows_per_fragment,
        max_rows_per_group=max_rows_per_group,
        materialize_deletions=materialize_deletions,
        materialize_deletions_threshold=materialize_deletions_threshold,
        max_bytes_per_file=max_bytes_per_file,
        num_threads=num_threads,
        batch_size=batch_size,
        **progress_arguments(ds.compact_files, progress),
    )
    if ds.version == before:
        click.echo(f"nothing to compact (version {before})")
        return
    click.echo(
        f"compacted version {before} into version {ds.version}: {metrics.fragments_removed} fragments "
        f"-> {metrics.fragments_added}, {metrics.files_removed} files removed, {metrics.files_added} added"
    )


@click.command()
@dataset_argument
@click.option(
    "--older-than", type=Duration(), metavar="DURATION",
    help="Remove versions older than this: 7d, 12h, 1d12h, 30m, 2w (default without --retain-versions: 14d).",
)  # fmt: skip
@click.option(
    "--retain-versions", type=click.IntRange(min=1), help="Keep at least this many newest versions."
)
@click.option("--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
@click.option(
    "--delete-unverified", is_flag=True,
    help="Also remove files no version references that are younger than the grace period (7 days): "
    "only when no write is running.",
)  # fmt: skip
@click.option(
    "--error-if-tagged/--no-error-if-tagged", default=True, show_default=True,
    help="Fail when a tagged version is older than the cutoff (otherwise it is kept silently).",
)  # fmt: skip
@progress_option
def cleanup(
    uri: str,
    storage_options: Mapping[str, str],
    older_than: dt.timedelta | None,
    retain_versions: int | None,
    dry_run: bool,
    delete_unverified: bool,
    error_if_tagged: bool,
    progress: bool | None,
) -> None:
    """Remove the old versions of the dataset at URI and the files only they reference (never the
    latest version, never a tagged one)."""
    ds = open_dataset(uri, storage_options)
    options = {
        "older_than": older_than,
        "retain_versions": retain_versions,
        "delete_unverified": delete_unverified,
        "error_if_tagged_old_versions": error_if_tagged,
    }
    if dry_run:
        plan = ds.explain_cleanup_old_versions(**options, include_files=True, max_files=DRY_RUN_FILES)
        root = ds.uri.rstrip("/") + "/"
        files = table("would remove", "kind", "file", "size")
        for f in plan.candidate_files:
            path = f.path[len(root) :] if f.path.startswith(root) else f.path
            files.add_row(*cells(f.kind, path, human_bytes(f.size_bytes)))
        out = console()
        if plan.candidate_files:
            out.print(files)
        if plan.candidate_files_truncated:
            out.print(f"(first {plan.candidate_file_limit} files listed)")
        stats = plan.stats
        click.echo(
            f"dry run: would remove {stats.old_versions} versions and {stats.files_removed} files "
            f"({human_bytes(stats.bytes_removed)}); nothing was removed"
        )
        return
    stats = ds.cleanup_old_versions(**options, **progress_arguments(ds.cleanup_old_versions, progress))
    size = human_bytes(stats.bytes_removed)
    click.echo(f"removed {stats.old_versions} versions and {stats.files_removed} files ({size})")


@click.command()
@dataset_argument
@click.argument("version")
def restore(uri: str, storage_options: Mapping[str, str], version: str) -> None:
    """Make VERSION (a number or tag) of the dataset at URI the latest again, as a new version."""
    ds = open_dataset(uri, storage_options, version_ref(version))
    restored = ds.version
    ds.restore()
    click.echo(f"restored version {restored} as version {ds.version}")


@click.command()
@dataset_argument
@click.option("--version", "version", metavar="VERSION", help="A version number or tag (default: latest).")
@json_flag
def verify(uri: str, storage_options: Mapping[str, str], version: str | None, as_json: bool) -> None:
    """Check that every file the version references exists and agrees with the manifest: data
    files (size, rows, format, columns), deletion files, index files, the transaction file.
    Exits with 3 and lists the problems when there are any."""
    from lance_table.table.verify import verify as run_verify

    report = run_verify(open_dataset(uri, storage_options, version_ref(version)))
    if as_json:
        emit_json(
            {
                "uri": report.uri,
                "version": report.version,
                "ok": report.ok,
                "problems": [asdict(p) for p in report.problems],
                "checked": dict(report.checked),
                "skipped": dict(report.skipped),
            }
        )
    else:
        checked = ", ".join(f"{n} {kind}" for kind, n in report.checked.items())
        skipped = sum(report.skipped.values())
        elsewhere = f"; {skipped} files in other base paths not checked" if skipped else ""
        if report.ok:
            click.echo(f"version {report.version}: ok ({checked} files checked{elsewhere})")
        else:
            problems = table(
                f"version {report.version}: {len(report.problems)} problems", "kind", "file", "problem"
            )
            for p in report.problems:
                problems.add_row(*cells(p.kind, p.path, p.message))
            console().print(problems)
            click.echo(f"({checked} files checked{elsewhere})")
    if not report.ok:
        raise click.exceptions.Exit(EXIT_PROBLEMS)


COMMANDS = (compact, cleanup, restore, verify)
