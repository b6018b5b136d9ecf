"""The lance-table commands, run in-process through click's test runner; pylance is the oracle for
what they read and write. (The real console script and ``python -m lance_table`` are run as
processes in test_cli_process.py.)"""

from __future__ import annotations

import datetime as dt
import inspect
import io
import json
import shutil
import sys
from pathlib import Path

import lance
import lance.file
import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

import lance_table as lt
from lance_table.cli import EXIT_PROBLEMS, main
from lance_table.cli.app import cli
from lance_table.cli.common import STORAGE_OPTIONS_ENV, parse_duration
from lance_table.cli.read import TABLE_ROWS


def run(*args: object, code: int = 0, env: dict[str, str] | None = None) -> Result:
    result = CliRunner().invoke(cli, [str(a) for a in args], env=env)
    assert result.exit_code == code, (result.output, result.exception)
    if code == 1:  # a library error: one line, no traceback
        assert result.exception is None or isinstance(result.exception, SystemExit)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.output
    return result


@pytest.fixture(autouse=True)
def no_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``COLUMNS`` (pytest-xdist's workers set it to 80): the commands' tables are as wide as
    when piped, so long file paths are not wrapped."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture
def uri(tmp_path: Path) -> str:
    """pylance's dataset: 3 fragments of 100 rows, 10 rows deleted, a BTree index, a tag."""
    path = str(tmp_path / "ds")
    table = pa.table(
        {"id": np.arange(300), "name": [f"n{i}" for i in range(300)], "score": np.linspace(0, 1, 300)}
    )
    ds = lance.write_dataset(table, path, max_rows_per_file=100)
    ds.create_scalar_index("id", "BTREE")
    ds.delete("id < 10")
    ds.tags.create("indexed", 2)
    return path


def test_info_reports_what_pylance_sees(uri: str) -> None:
    data = json.loads(run("info", uri, "--json").stdout)
    ds = lance.dataset(uri)
    assert data["version"] == data["latest_version"] == ds.version
    assert data["rows"] == ds.count_rows() == 290 and data["deleted_rows"] == 10
    assert data["fragments"] == len(ds.get_fragments()) == 3
    assert (data["data_files"], data["deletion_files"]) == (3, 1)
    assert data["data_bytes"] == sum(p.stat().st_size for p in (Path(uri) / "data").iterdir())
    assert data["data_format"] == ds.data_storage_version
    assert data["reader_feature_flags"] == "deletion files"
    assert [f["name"] for f in data["schema"]] == ds.schema.names
    assert [(i["name"], i["type"], i["fields"]) for i in data["indices"]] == [("id_idx", "BTree", ["id"])]

    text = run("info", uri).stdout
    for shown in ("290 (10 deleted)", "id_idx", "BTree", "deletion files", "score", "double"):
        assert shown in text
    assert json.loads(run("info", uri, "--version", "indexed", "--json").stdout)["deleted_rows"] == 0


def test_versions_and_tags(uri: str) -> None:
    history = json.loads(run("versions", uri, "--json").stdout)
    assert [v["version"] for v in history] == [v["version"] for v in lance.dataset(uri).versions()]
    assert [v["operation"] for v in history] == ["overwrite", "create_index", "delete"]
    assert [v["tags"] for v in history] == [[], ["indexed"], []]
    assert "create_index" in run("versions", uri).stdout

    assert "version 1" in run("tags", "create", uri, "first", "1").stdout
    assert "version 3" in run("tags", "create", uri, "latest").stdout
    assert "version 1" in run("tags", "create", uri, "again", "first").stdout  # by another tag
    assert {n: t["version"] for n, t in lance.dataset(uri).tags.list().items()} == {
        "indexed": 2, "first": 1, "latest": 3, "again": 1,
    }  # fmt: skip
    listed = json.loads(run("tags", "list", uri, "--json").stdout)
    assert [t["version"] for t in listed] == [1, 1, 2, 3]
    assert "TagError" in run("tags", "create", uri, "first", "2", code=1).stderr
    run("tags", "delete", uri, "first")
    assert "first" not in lance.dataset(uri).tags.list()
    assert "TagError" in run("tags", "delete", uri, "first", code=1).stderr
    assert "VersionNotFoundError" in run("tags", "create", uri, "x", "99", code=1).stderr


def test_scan_in_every_format_matches_pylance(uri: str, tmp_path: Path) -> None:
    expected = lance.dataset(uri).to_table(columns=["id", "name"], filter="id >= 250", limit=20)
    args = ("scan", uri, "-c", "id,name", "--filter", "id >= 250", "--limit", "20")
    lines = run(*args, "--format", "json").stdout.splitlines()
    assert [json.loads(line) for line in lines] == expected.to_pylist()
    csv = run(*args, "--format", "csv").stdout_bytes
    assert pcsv.read_csv(io.BytesIO(csv)).equals(expected)
    out = tmp_path / "rows.parquet"
    assert run(*args, "--format", "parquet", "--output", out).stdout == ""
    assert pq.read_table(out).equals(expected)
    # repeated --columns, and the whole dataset streamed
    every = run("scan", uri, "-c", "id", "-c", "score", "--format", "csv").stdout_bytes
    assert pcsv.read_csv(io.BytesIO(every)).equals(lance.dataset(uri).to_table(columns=["id", "score"]))

    shown = run(*args).stdout
    assert "n250" in shown and "n269" in shown and "20 rows" in shown
    capped = run("scan", uri, "-c", "id").stdout
    assert f"first {TABLE_ROWS} rows" in capped


def test_head_and_binary_json(tmp_path: Path) -> None:
    uri = str(tmp_path / "b")
    lt.write_dataset(pa.table({"k": [1, 2, 3], "raw": [b"\x00\xff", None, b"x"]}), uri)
    assert [json.loads(x) for x in run("head", uri, "-n", "2", "--format", "json").stdout.splitlines()] == [
        {"k": 1, "raw": "AP8="},  # base64
        {"k": 2, "raw": None},
    ]
    shown = run("head", uri).stdout
    assert "0x00ff" in shown and "null" in shown and "3 rows" in shown


def test_output_formats_refuse_what_they_cannot_write(tmp_path: Path) -> None:
    uri = str(tmp_path / "nested")
    lt.write_dataset(pa.table({"id": [1], "tags": [["a", "b"]]}), uri)
    assert "--output" in run("scan", uri, "--format", "parquet", code=2).stderr
    assert "'tags'" in run("scan", uri, "--format", "csv", code=2).stderr
    assert "--format" in run("scan", uri, "--output", tmp_path / "x", code=2).stderr
    assert json.loads(run("scan", uri, "--format", "json").stdout) == {"id": 1, "tags": ["a", "b"]}
    assert "SchemaError" in run("scan", uri, "-c", "nope", code=1).stderr
    assert "FilterError" in run("scan", uri, "--filter", "id >", code=1).stderr


def test_compact_matches_pylance(uri: str, tmp_path: Path) -> None:
    theirs = str(tmp_path / "theirs")
    shutil.copytree(uri, theirs)
    out = run("compact", uri, "--target-rows-per-fragment", "1000", "--materialize-deletions").stdout
    assert "3 fragments -> 1" in out
    lance.dataset(theirs).optimize.compact_files(target_rows_per_fragment=1000, materialize_deletions=True)
    ours, ref = lance.dataset(uri), lance.dataset(theirs)
    assert len(ours.get_fragments()) == len(ref.get_fragments()) == 1
    assert ours.to_table().equals(ref.to_table())
    assert "nothing to compact" in run("compact", uri).stdout
    # --no-progress reaches the library's progress= (a usage error where the library has none)
    takes_progress = "progress" in inspect.signature(lt.LanceDataset.compact_files).parameters
    run("compact", uri, "--no-progress", code=0 if takes_progress else 2)


def test_cleanup_dry_run_lists_exactly_what_cleanup_removes(uri: str) -> None:
    def files() -> set[str]:
        return {p.relative_to(uri).as_posix() for p in Path(uri).rglob("*") if p.is_file()}

    before = files()
    args = ("cleanup", uri, "--older-than", "0s", "--no-error-if-tagged")
    plan = run(*args, "--dry-run").stdout
    assert files() == before and "nothing was removed" in plan
    listed = {f for f in before if f in plan}
    assert "TagError" in run("cleanup", uri, "--older-than", "0s", code=1).stderr  # version 2 is tagged
    assert "removed 1 versions" in run(*args).stdout
    assert before - files() == listed and listed
    assert [v["version"] for v in lance.dataset(uri).versions()] == [2, 3]  # the tagged one stays


def test_restore(uri: str) -> None:
    assert "restored version 2 as version 4" in run("restore", uri, "indexed").stdout
    ds = lance.dataset(uri)
    assert ds.version == 4 and ds.count_rows() == 300
    assert "VersionNotFoundError" in run("restore", uri, "42", code=1).stderr


def test_verify(uri: str) -> None:
    assert "ok (3 data, 1 deletion, 2 index, 1 transaction files checked)" in run("verify", uri).stdout
    data = sorted((Path(uri) / "data").iterdir())
    data[0].unlink()
    report = run("verify", uri, code=EXIT_PROBLEMS)
    assert data[0].name in report.stdout and "missing" in report.stdout
    found = json.loads(run("verify", uri, "--json", code=EXIT_PROBLEMS).stdout)
    assert not found["ok"] and [p["kind"] for p in found["problems"]] == ["data"]
    assert (
        json.loads(run("verify", uri, "--version", "indexed", "--json", code=EXIT_PROBLEMS).stdout)["version"]
        == 2
    )


def test_inspect_a_data_file(uri: str, tmp_path: Path) -> None:
    path = sorted((Path(uri) / "data").iterdir())[0]
    summary = json.loads(run("inspect", path, "--json").stdout)
    meta = lance.file.LanceFileReader(str(path)).metadata()
    assert summary["num_rows"] == meta.num_rows == 100
    assert summary["format_version"] == f"{meta.major_version}.{meta.minor_version}"
    assert summary["size"] == path.stat().st_size
    assert len(summary["columns"]) == len(meta.columns)
    assert [c["pages"] for c in summary["columns"]] == [len(c.pages) for c in meta.columns]
    assert all(c["encodings"] for c in summary["columns"])
    assert "MiniBlockLayout" in run("inspect", path).stdout

    assert "is a directory" in run("inspect", uri, code=1).stderr
    assert "no such file" in run("inspect", tmp_path / "nope.lance", code=1).stderr
    (tmp_path / "x.txt").write_text("hello, not a lance file " * 3)
    assert "CorruptFileError" in run("inspect", tmp_path / "x.txt", code=1).stderr


def test_errors_are_one_line(tmp_path: Path) -> None:
    assert "DatasetNotFoundError" in run("info", tmp_path / "none", code=1).stderr
    assert "'7x'" in run("cleanup", tmp_path, "--older-than", "7x", code=2).stderr
    debug = CliRunner().invoke(cli, ["--debug", "info", str(tmp_path / "none")])
    assert isinstance(debug.exception, lt.DatasetNotFoundError)


def test_storage_options_from_arguments_and_environment(tmp_path: Path) -> None:
    assert "'nonsense'" in run("info", "s3://bucket/x", "-s", "nonsense=1", code=1).stderr
    env = {STORAGE_OPTIONS_ENV: "aws_region=us-east-1 nonsense=1"}
    assert "'nonsense'" in run("versions", "s3://bucket/x", code=1, env=env).stderr
    assert "key=value" in run("info", "s3://bucket/x", "-s", "novalue", code=2).stderr


@pytest.mark.s3
def test_a_dataset_on_s3(s3_uri: str, s3_options: dict[str, str]) -> None:
    lt.write_dataset(pa.table({"id": np.arange(5)}), s3_uri, storage_options=s3_options)
    options = [arg for key, value in s3_options.items() for arg in ("-s", f"{key}={value}")]
    assert json.loads(run("info", s3_uri, *options, "--json").stdout)["rows"] == 5
    assert "ok" in run("verify", s3_uri, *options).stdout


def test_version_and_missing_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("--version").stdout.strip() == f"lance-table, version {lt.__version__}"
    monkeypatch.setitem(sys.modules, "rich", None)  # as if the 'cli' extra were not installed
    assert main(["--version"]) == 2
    assert "pip install 'lance_table[cli]'" in capsys.readouterr().err


def test_durations() -> None:
    assert parse_duration("7d") == dt.timedelta(days=7)
    assert parse_duration("1d12h") == parse_duration("36h") == dt.timedelta(hours=36)
    assert parse_duration("2w 30m") == dt.timedelta(weeks=2, minutes=30)
    assert parse_duration("1.5h") == dt.timedelta(minutes=90)
    for bad in ("", "7", "7x", "d7", "1h-"):
        with pytest.raises(Exception, match="duration"):
            parse_duration(bad)


def test_readme_command_line_snippet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command of the README's "Command line" section runs as written (its dataset and file
    names pointed at a dataset here)."""
    import re
    import shlex

    text = (Path(__file__).parents[2] / "README.md").read_text()
    section = text[text.index("## Command line") :]
    snippet = re.search(r"```bash\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    uri = str(tmp_path / "events")
    rows = pa.table({"id": np.arange(30), "kind": ["buy", "view"] * 15, "score": np.linspace(0, 1, 30)})
    for i in range(3):
        lt.write_dataset(rows.slice(i * 10, 10), uri, mode="append")
    data_file = next((Path(uri) / "data").iterdir()).name
    monkeypatch.chdir(tmp_path)
    commands = [shlex.split(line, comments=True) for line in snippet.splitlines() if line.strip()]
    assert len(commands) >= 12 and all(c[0] == "lance-table" for c in commands)
    for command in commands:
        args = [a.replace("/data/events", uri).replace("FILE.lance", data_file) for a in command[1:]]
        run(*args)
    assert pq.read_table(tmp_path / "events.parquet").num_rows == 30
    assert lance.dataset(uri).tags.list()["clean"]["version"] == 3
