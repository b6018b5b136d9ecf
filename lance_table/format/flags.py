"""Manifest feature flags: which ones exist, which ones lance_table can honour, how they are computed."""

from __future__ import annotations

DELETION_FILES = 1
STABLE_ROW_IDS = 2
USE_V2_FORMAT_DEPRECATED = 4
TABLE_CONFIG = 8
BASE_PATHS = 16
DISABLE_TRANSACTION_FILE = 32
FIRST_UNKNOWN = 64

NAMES = {
    DELETION_FILES: "deletion files",
    STABLE_ROW_IDS: "stable row ids",
    USE_V2_FORMAT_DEPRECATED: "v2 format (deprecated flag)",
    TABLE_CONFIG: "table config",
    BASE_PATHS: "multiple base paths",
    DISABLE_TRANSACTION_FILE: "inline transactions only",
}

# What lance_table implements. Writes maintain row-id sequences (new rows get the next ids, deletes
# keep them, compaction carries them to the rewritten rows).
# Datasets with base paths (multi-base datasets, shallow clones) are read and written: files resolve
# against the base their ``base_id`` names; new files go to the dataset's own directory unless a
# write targets a base.
READABLE = (
    DELETION_FILES
    | STABLE_ROW_IDS
    | USE_V2_FORMAT_DEPRECATED
    | TABLE_CONFIG
    | BASE_PATHS
    | DISABLE_TRANSACTION_FILE
)
WRITABLE = READABLE  # every feature read is also written


def describe(flags: int) -> str:
    """Human-readable names of the set bits."""
    parts = []
    bit = 1
    while bit <= flags:
        if flags & bit:
            parts.append(NAMES.get(bit, f"unknown flag {bit}"))
        bit <<= 1
    return ", ".join(parts) or "none"


def unsupported(flags: int, supported: int) -> int:
    """The bits of ``flags`` outside ``supported``."""
    return flags & ~supported


def compute(
    *, has_deletions: bool, has_row_ids: bool, has_config: bool, has_base_paths: bool
) -> tuple[int, int]:
    """(reader, writer) flags recomputed from a manifest's contents, as every commit must."""
    reader = writer = 0
    if has_deletions:
        reader |= DELETION_FILES
        writer |= DELETION_FILES
    if has_row_ids:
        reader |= STABLE_ROW_IDS
        writer |= STABLE_ROW_IDS
    if has_config:
        writer |= TABLE_CONFIG
    if has_base_paths:
        reader |= BASE_PATHS
        writer |= BASE_PATHS
    return reader, writer
