"""pylance's Azure and GCS option names, the AWS_/AZURE_/GOOGLE_ environment variables pylance reads,
and the S3 names added last: mapped, refused with the reason, or a typed error (no server needed)."""

from __future__ import annotations

import json

import pytest

from lance_table.errors import InvalidURIError, StorageCredentialsError, StorageOptionsError
from lance_table.storage.azure import (
    EMULATOR_ACCOUNT,
    KNOWN_AZURE_OPTIONS,
    account_url,
    azure_settings,
    credential,
)
from lance_table.storage.gcs import DEFAULT_ATTEMPTS, KNOWN_GCS_OPTIONS, gcs_settings
from lance_table.storage.options import environment_options, s3fs_arguments


@pytest.fixture(autouse=True)
def no_cloud_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith(("AWS_", "AZURE_", "GOOGLE_", "AZURITE_")):
            monkeypatch.delenv(name)


# -- Azure ----------------------------------------------------------------------------------------


def test_azure_names_and_aliases_map_to_the_sdk_client() -> None:
    s = azure_settings(
        {
            "account_name": "acct",
            "Azure_Storage_Access_Key": "a2V5",
            "endpoint": "https://acct.example.net/",
            "timeout": "1m",
            "azure_connect_timeout": "500ms",
            "client_max_retries": "2",
            "allow_invalid_certificates": "true",
            "proxy_url": "http://proxy:3128",
            "user_agent": "me",
            "disable_tagging": "true",  # accepted: lance_table never tags blobs
            "http1_only": "true",  # pylance's HTTP client tuning: accepted, nothing to do
        },
        "ctr",
    )
    assert (s.account, s.key, account_url(s)) == ("acct", "a2V5", "https://acct.example.net")
    assert s.client == {
        "read_timeout": 60.0,
        "connection_timeout": 0.5,
        "retry_total": 2,
        "connection_verify": False,
        "proxies": {"http": "http://proxy:3128", "https": "http://proxy:3128"},
        "user_agent": "me",
    }


def test_azure_account_urls_and_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential

    plain = azure_settings({"azure_storage_account_name": "acct", "sas_token": "?sv=1&sig=x"}, "c")
    assert account_url(plain) == "https://acct.blob.core.windows.net"
    sas = credential(plain)
    assert isinstance(sas, AzureSasCredential) and sas.signature == "sv=1&sig=x"
    fabric = azure_settings({"account_name": "acct", "use_fabric_endpoint": "true"}, "c")
    assert account_url(fabric) == "https://acct.blob.fabric.microsoft.com"
    emulator = azure_settings({"azure_storage_use_emulator": "true"}, "c")
    assert account_url(emulator) == f"http://127.0.0.1:10000/{EMULATOR_ACCOUNT}"
    key = credential(emulator)
    assert isinstance(key, AzureNamedKeyCredential) and key.named_key.name == EMULATOR_ACCOUNT
    monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", "http://127.0.0.1:7")
    assert account_url(emulator) == f"http://127.0.0.1:7/{EMULATOR_ACCOUNT}"
    assert credential(azure_settings({"account_name": "a", "skip_signature": "true"}, "c")) is None
    with pytest.raises(StorageCredentialsError, match="azure_storage_account_name"):
        account_url(azure_settings({}, "c"))


def test_azure_environment_variables_are_read_and_options_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "from-env")
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", "a2V5")
    monkeypatch.setenv("AZURE_CONTAINER_NAME", "another")  # the URI's container wins, as in pylance
    monkeypatch.setenv("AZURE_FEDERATED_TOKEN_FILE", "/token")  # left to azure-identity
    s = azure_settings({}, "c")
    assert (s.account, s.key) == ("from-env", "a2V5")
    assert azure_settings({"account_name": "given"}, "c").account == "given"
    monkeypatch.setenv("AZURE_STORAGE_USE_EMULATOR", "maybe")
    with pytest.raises(StorageOptionsError, match=r"AZURE_STORAGE_USE_EMULATOR.*true or false"):
        azure_settings({}, "c")


@pytest.mark.parametrize(
    "options, problem",
    [
        ({"azure_msi_endpoint": "http://169.254.169.254"}, "DefaultAzureCredential"),
        ({"azure_federated_token_file": "/t"}, "AZURE_FEDERATED_TOKEN_FILE"),
        ({"azure_authority_host": "https://login"}, "AZURE_AUTHORITY_HOST"),
        ({"azure_fabric_session_token": "t"}, "Fabric"),
        ({"proxy_excludes": "localhost"}, "NO_PROXY"),
        ({"container_name": "other"}, "URI's container"),
        ({"use_emulator": "perhaps"}, "true or false"),
        ({"timeout": "soon"}, "duration"),
        ({"account_name": "a", "azure_storage_account_name": "b"}, "given twice"),
    ],
)
def test_azure_refusals_and_bad_values_name_the_option(options: dict[str, str], problem: str) -> None:
    with pytest.raises(StorageOptionsError, match=problem) as info:
        azure_settings(options, "ctr")
    assert info.value.option in options


def test_unknown_azure_option_lists_the_known_ones() -> None:
    from lance_table.storage import open_storage

    with pytest.raises(StorageOptionsError, match="not a known Azure storage option") as info:
        open_storage("az://ctr/ds", {"azure_storage_account_name": "a", "aws_region": "us-east-1"})
    assert info.value.option == "aws_region" and info.value.known == KNOWN_AZURE_OPTIONS
    assert "azure_storage_sas_token" in str(info.value) and "use_emulator" in str(info.value)


def test_azure_uris_name_a_container() -> None:
    from lance_table.storage import open_storage

    with pytest.raises(InvalidURIError, match="container"):
        open_storage("az:///ds", {"use_emulator": "true"})
    with pytest.raises(InvalidURIError, match="storage account"):
        open_storage("abfss://ctr@nowhere/ds", {"use_emulator": "true"})


# -- GCS ------------------------------------------------------------------------------------------


def test_gcs_names_map_to_gcsfs(tmp_path) -> None:
    account = tmp_path / "sa.json"
    account.write_text(json.dumps({"type": "service_account", "client_email": "x@y"}))
    s = gcs_settings({"service_account": str(account), "timeout": "30s", "connect_timeout": "2s"}, "b")
    assert s.kwargs == {"token": str(account)}
    assert (s.timeout, s.connect_timeout, s.attempts) == (30.0, 2.0, DEFAULT_ATTEMPTS)
    emulator = json.dumps({"gcs_base_url": "http://127.0.0.1:9/", "disable_oauth": True})
    s = gcs_settings({"google_service_account_key": emulator, "client_max_retries": "1"}, "b")
    assert s.kwargs == {"token": "anon", "endpoint_url": "http://127.0.0.1:9"} and s.attempts == 2
    s = gcs_settings({"google_application_credentials": "~/adc.json", "user_agent": "me"}, "b")
    assert s.kwargs["token"].endswith("/adc.json") and s.headers == {"User-Agent": "me"}
    anonymous = gcs_settings({"skip_signature": "true", "project": "p"}, "b")
    assert anonymous.kwargs == {"token": "anon", "project": "p"}


def test_gcs_environment_and_refusals(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("GOOGLE_SERVICE_ACCOUNT_KEY", json.dumps({"disable_oauth": True}))
    monkeypatch.setenv("GOOGLE_BUCKET", "another")  # the URI's bucket wins
    assert gcs_settings({}, "b").kwargs == {"token": "anon"}
    for options, problem in [
        ({"google_service_account": str(tmp_path / "missing.json")}, "readable service account"),
        ({"service_account_key": "not json, a secret"}, "JSON"),
        ({"bucket": "other"}, "URI's bucket"),
        ({"cache_timeout": 10}, "listing cache"),
        ({"allow_invalid_certificates": "true"}, "verifies certificates"),
        ({"azure_storage_account_name": "a"}, "not a known GCS storage option"),
    ]:
        with pytest.raises(StorageOptionsError, match=problem) as info:
            gcs_settings(options, "b")
        assert "a secret" not in str(info.value)
    with pytest.raises(StorageOptionsError) as info:
        gcs_settings({"nope": 1}, "b")
    assert info.value.known == KNOWN_GCS_OPTIONS and "google_service_account" in str(info.value)


# -- S3: the names added last, and AWS_* variables ------------------------------------------------


def test_s3_role_and_web_identity_names_are_left_to_botocore() -> None:
    for name in ("aws_web_identity_token_file", "aws_role_arn", "role_session_name"):
        with pytest.raises(StorageOptionsError, match="AWS_\\* environment variable") as info:
            s3fs_arguments({name: "x"}, "b")
        assert info.value.option == name


def test_s3_checksums_encryption_and_read_timeout() -> None:
    got = s3fs_arguments(
        {"aws_checksum_algorithm": "crc32c", "aws_server_side_encryption": "sse-c", "read_timeout": "5s"}, "b"
    )
    assert got["s3_additional_kwargs"] == {"ChecksumAlgorithm": "CRC32C"}
    assert got["config_kwargs"] == {"read_timeout": 5.0}
    with pytest.raises(StorageOptionsError, match="CRC32"):
        s3fs_arguments({"checksum_algorithm": "md5"}, "b")


def test_s3_reads_the_aws_variables_pylance_reads_and_options_win() -> None:
    environ = {
        "AWS_REGION": "eu-west-1",
        "AWS_ENDPOINT": "http://127.0.0.1:9",
        "AWS_SKIP_SIGNATURE": "true",
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "k",  # botocore reads it itself
        "AWS_BUCKET": "another",  # the URI's bucket wins
        "AWS_METADATA_ENDPOINT": "http://169.254.169.254",  # botocore's credential chain
        "AWS_PROFILE": "p",  # not an option
    }
    assert environment_options(environ) == {
        k: environ[k] for k in ("AWS_REGION", "AWS_ENDPOINT", "AWS_SKIP_SIGNATURE", "AWS_ALLOW_HTTP")
    }
    got = s3fs_arguments({"region": "us-west-2"}, "b", environ)
    assert got["client_kwargs"] == {"region_name": "us-west-2"}
    assert (got["endpoint_url"], got["anon"]) == ("http://127.0.0.1:9", True)
    with pytest.raises(StorageOptionsError, match="AWS_SKIP_SIGNATURE"):
        s3fs_arguments({}, "b", {"AWS_SKIP_SIGNATURE": "sometimes"})
