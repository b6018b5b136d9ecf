"""The README's "S3, Azure and GCS" snippet runs against the three test servers: its option dicts and
URIs are replaced by the servers' (the rest of its text runs as written)."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

import lance_table as lt

pytestmark = [pytest.mark.s3, pytest.mark.azure, pytest.mark.gcs]

README = Path(__file__).parents[2] / "README.md"


def cloud_snippet() -> str:
    section = README.read_text().split("### S3, Azure and GCS", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "the README's S3, Azure and GCS section has no python block"
    return found.group(1)


def test_readme_cloud_snippet_runs(
    s3_uri: str,
    s3_options: dict[str, str],
    az_uri: str,
    azure_options: dict[str, str],
    gs_uri: str,
    gcs_options: dict[str, str],
) -> None:
    from lance_table.storage.azure import KNOWN_AZURE_OPTIONS
    from lance_table.storage.gcs import KNOWN_GCS_OPTIONS
    from lance_table.storage.options import KNOWN_S3_OPTIONS

    code = cloud_snippet()
    servers = {
        "s3": ("s3://bucket/events", s3_uri, s3_options, KNOWN_S3_OPTIONS),
        "az": ("az://container/events", az_uri, azure_options, KNOWN_AZURE_OPTIONS),
        "gs": ("gs://bucket/events", gs_uri, gcs_options, KNOWN_GCS_OPTIONS),
    }
    for name, (old_uri, uri, options, known) in servers.items():
        line = re.search(rf"^{name} = (\{{.*\}})$", code, re.M)
        assert line and f'"{old_uri}"' in code, name
        assert set(eval(line.group(1))) <= set(known), f"the README's {name} options are not all known"
        code = code.replace(line.group(0), f"{name} = {options!r}").replace(f'"{old_uri}"', repr(uri))
    table = pa.table({"id": pa.array(range(20), pa.int64())})
    exec(compile(code, "README.md:S3, Azure and GCS", "exec"), {"lt": lt, "table": table})
    for _, uri, options, _ in servers.values():
        assert lt.dataset(uri, storage_options=options).to_table().equals(table)
