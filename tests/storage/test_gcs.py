"""Datasets on GCS (fake-gcs-server, started by the tests): reads and writes, racing commits made safe
by ``ifGenerationMatch=0``, and typed errors.

pylance cannot be checked against this server: its client speaks GCS's XML API for object uploads
(``PUT /bucket/key``), which fake-gcs-server does not serve (it answers 400 "invalid uploadType").
"""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest
from cloud_servers import GCS_BUCKET, free_port

import lance_table as lt
from lance_table.errors import StorageUnreachableError
from lance_table.fragment import write_fragments

pytestmark = pytest.mark.gcs


def _table(start: int, n: int = 50) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def test_create_append_delete_read(gs_uri: str, gcs_options: dict[str, str]) -> None:
    lt.write_dataset(_table(0), gs_uri, storage_options=gcs_options)
    lt.write_dataset(_table(50), gs_uri, mode="append", storage_options=gcs_options)
    lt.dataset(gs_uri, storage_options=gcs_options).delete("id < 10")
    ds = lt.dataset(gs_uri.replace("gs://", "gcs://"), storage_options=gcs_options)
    assert ds.version == 3
    assert ds.to_table().sort_by("id").equals(_table(10, 90))
    assert lt.dataset(gs_uri, version=1, storage_options=gcs_options).to_table().equals(_table(0))


def test_racing_commits_all_land_once(gs_uri: str, gcs_options: dict[str, str]) -> None:
    lt.write_dataset(_table(0), gs_uri, storage_options=gcs_options)
    for start in (50, 100):  # both from version 1: the second rebases
        op = lt.LanceOperation.Append(write_fragments(_table(start), gs_uri, storage_options=gcs_options))
        lt.LanceDataset.commit(gs_uri, op, read_version=1, storage_options=gcs_options)
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []

    def append(start: int) -> None:
        barrier.wait()
        try:
            lt.write_dataset(_table(start), gs_uri, mode="append", storage_options=gcs_options)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(s,)) for s in (150, 200, 250)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    ds = lt.dataset(gs_uri, storage_options=gcs_options)
    assert [v["version"] for v in ds.versions()] == list(range(1, 7))
    assert ds.to_table().sort_by("id").equals(_table(0, 300))


def test_unreachable_endpoint_is_a_typed_error_within_the_timeout(gcs_endpoint: str) -> None:
    options = {
        "endpoint_url": f"http://127.0.0.1:{free_port()}",
        "token": "anon",
        "connect_timeout": "1s",
        "client_max_retries": "0",
    }
    with pytest.raises(StorageUnreachableError) as info:
        lt.dataset(f"gs://{GCS_BUCKET}/nothing", storage_options=options)
    assert isinstance(info.value, ConnectionError)
