"""Datasets on Azure Blob Storage (Azurite, started by the tests): every URI spelling, reads and writes,
commits that race, pylance on the same data in both directions, and pylance's azure_* options."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest
from cloud_servers import AZURE_ACCOUNT, AZURE_CONTAINER, AZURE_KEY

import lance_table as lt
from lance_table.errors import StorageCredentialsError, StorageUnreachableError
from lance_table.fragment import write_fragments

pytestmark = pytest.mark.azure


def _table(start: int, n: int = 50) -> pa.Table:
    ids = pa.array(range(start, start + n), pa.int64())
    return pa.table({"id": ids, "name": pa.array([f"row {i}" for i in range(start, start + n)])})


def test_create_append_delete_read_under_every_uri_spelling(az_uri: str, azure_options: dict[str, str]):
    ds = lt.write_dataset(_table(0), az_uri, storage_options=azure_options)
    lt.write_dataset(_table(50), az_uri, mode="append", storage_options=azure_options)
    ds = lt.dataset(az_uri, storage_options=azure_options)
    ds.delete("id < 10")
    path = az_uri.removeprefix("az://")
    hadoop = {k: v for k, v in azure_options.items() if k != "azure_storage_account_name"}
    for uri, options in [
        (az_uri, azure_options),
        (f"abfs://{path}", azure_options),
        (f"abfss://{path}", azure_options),
        # the Hadoop form names the account in the host
        (f"abfss://{AZURE_CONTAINER}@{AZURE_ACCOUNT}.dfs.core.windows.net/{path.split('/', 1)[1]}", hadoop),
    ]:
        got = lt.dataset(uri, storage_options=options)
        assert got.version == 3
        assert got.to_table().sort_by("id").equals(_table(10, 90))
    assert [v["version"] for v in ds.versions()] == [1, 2, 3]


def test_pylance_reads_ours_and_we_read_pylances(az_uri: str, azure_options: dict[str, str]) -> None:
    import lance

    lt.write_dataset(_table(0), az_uri, storage_options=azure_options)
    theirs = lance.dataset(az_uri, storage_options=azure_options)
    assert theirs.to_table().equals(_table(0))
    lance.write_dataset(_table(50), az_uri, mode="append", storage_options=azure_options)
    ours = lt.dataset(az_uri, storage_options=azure_options)
    assert ours.version == 2
    assert ours.to_table().sort_by("id").equals(_table(0, 100))


def test_pylance_on_the_emulator_option(az_uri: str, azurite_endpoint: str, monkeypatch) -> None:
    """``azure_storage_use_emulator``: the well-known account and key, at $AZURITE_BLOB_STORAGE_URL."""
    import lance

    monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", azurite_endpoint.rsplit("/", 1)[0])
    options = {"azure_storage_use_emulator": "true", "azure_storage_account_name": AZURE_ACCOUNT}
    lance.write_dataset(_table(0), az_uri, storage_options=options)
    assert lt.dataset(az_uri, storage_options={"use_emulator": "true"}).to_table().equals(_table(0))


def test_racing_commits_all_land_once(az_uri: str, azure_options: dict[str, str]) -> None:
    """Two commits from the same read version: the second rebases. Four appends at once: each lands
    in its own version (the manifest create is conditional, so no two take the same version)."""
    lt.write_dataset(_table(0), az_uri, storage_options=azure_options)
    frags = [write_fragments(_table(s), az_uri, storage_options=azure_options) for s in (50, 100)]
    for f in frags:
        op = lt.LanceOperation.Append(f)
        lt.LanceDataset.commit(az_uri, op, read_version=1, storage_options=azure_options)
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def append(start: int) -> None:
        barrier.wait()
        try:
            lt.write_dataset(_table(start), az_uri, mode="append", storage_options=azure_options)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(s,)) for s in (150, 200, 250, 300)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    ds = lt.dataset(az_uri, storage_options=azure_options)
    assert [v["version"] for v in ds.versions()] == list(range(1, 8))
    assert ds.to_table().sort_by("id").equals(_table(0, 350))


def test_unreachable_endpoint_is_a_typed_error_within_the_timeout(azure_options: dict[str, str]) -> None:
    from cloud_servers import free_port

    options = {
        **azure_options,
        "azure_storage_endpoint": f"http://127.0.0.1:{free_port()}/{AZURE_ACCOUNT}",
        "connect_timeout": "1s",
        "client_max_retries": "0",
    }
    with pytest.raises(StorageUnreachableError) as info:
        lt.dataset(f"az://{AZURE_CONTAINER}/nothing", storage_options=options)
    assert isinstance(info.value, ConnectionError)


def test_a_wrong_key_is_a_credentials_error(az_uri: str, azure_options: dict[str, str]) -> None:
    options = {**azure_options, "azure_storage_account_key": AZURE_KEY[::-1]}
    with pytest.raises(StorageCredentialsError) as info:
        lt.write_dataset(_table(0), az_uri, storage_options=options)
    assert isinstance(info.value, PermissionError)
