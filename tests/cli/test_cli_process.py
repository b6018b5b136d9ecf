"""The command line as users run it: the installed ``lance-table`` script and ``python -m lance_table``
in their own processes (few runs: each pays for the imports)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pytest

import lance_table as lt
from lance_table.cli import EXIT_PROBLEMS

ROOT = Path(__file__).resolve().parents[2]


def _script() -> str | None:
    """The installed console script: next to this Python, else on PATH."""
    beside = Path(sys.executable).parent / "lance-table"
    return str(beside) if beside.exists() else shutil.which("lance-table")


def _python_m(*args: object) -> subprocess.CompletedProcess[str]:
    """``python -m lance_table ARGS`` importing this work tree's package."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "lance_table", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )


@pytest.fixture
def uri(tmp_path: Path) -> str:
    path = str(tmp_path / "ds")
    lt.write_dataset(pa.table({"id": np.arange(50), "name": [f"n{i}" for i in range(50)]}), path)
    return path


def test_python_m_reports_problems_and_errors_without_traceback(uri: str) -> None:
    next((Path(uri) / "data").iterdir()).unlink()
    found = _python_m("verify", uri)
    assert found.returncode == EXIT_PROBLEMS, found.stderr
    assert "missing (data file of fragment 0)" in found.stdout
    error = _python_m("inspect", uri)
    assert error.returncode == 1
    assert error.stderr.strip().splitlines() == [error.stderr.strip()]
    assert error.stderr.startswith("Error: LanceFileNotFoundError:") and "is a directory" in error.stderr


def test_the_installed_console_script(uri: str) -> None:
    script = _script()
    if script is None:
        pytest.skip(
            "no lance-table console script next to this Python or on PATH: install the project "
            "(pip install -e '.[cli]') to create it"
        )
    done = subprocess.run(
        [script, "scan", uri, "--filter", "id >= 45", "--format", "csv"], capture_output=True, check=True
    )
    expected = lance.dataset(uri).to_table(filter="id >= 45")
    assert pcsv.read_csv(io.BytesIO(done.stdout)).equals(expected)
