"""The triage of ``scripts/upstream_tests.py``: failure causes of the upstream tests, ranked.

A cause is a failure's exception type and first message line, with paths and numbers blanked, so
that every test stopped by one missing name, keyword or unsupported type counts under one cause.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any

# API areas, to sum the causes by (the first pattern that matches a cause names its area).
AREAS = [
    ("indices / vector search (out of scope)", r"\w_index|index_|indices|nearest|vector|fts|ivf|hnsw"),
    ("scanner object: ds.scanner() returns a bare reader", r"RecordBatchReader' object has no attribute"),
    (
        "scan options, ordering, sampling",
        r"(to_table|to_batches|scanner)\(\) got|ColumnOrdering|'sample'|ShardedBatchIterator",
    ),
    ("write_dataset / dataset options and argument order", r"(write_dataset|dataset)\(\) (got|takes)"),
    ("input types of write_dataset", r"cannot write data of type|object has no attribute 'schema'"),
    ("system columns and computed projections", r"is not in the dataset|unknown column '_row"),
    (
        "schema evolution (add/alter/drop columns, merge, update_columns)",
        r"add_columns|alter_columns|drop_columns|merge_columns|update_columns|'merge'|batch_udf|LanceSchema",
    ),
    ("merge_insert / update / insert", r"merge_insert|'update'|'insert'"),
    (
        "fragment API and write progress",
        r"LanceFragment|FragmentMetadata|FragmentWriteProgress|format_fragment",
    ),
    (
        "file API (lance.file)",
        r"LanceFile|FileMetadata|stable_version|writer is already closed|'int' object is not callable"
        r"|Table' object has no attribute 'to_table'",
    ),
    (
        "extension types (json, tensor, bfloat16) and lance.arrow",
        r"extension<|BFloat16|bfloat16|lance\.arrow\.",
    ),
    ("multi-base datasets", r"DatasetBasePath"),
    ("blobs", r"Blob"),
    ("SQL filters", r"FilterError"),
    ("optimize / compaction / cleanup", r"optimize|Compaction|[Cc]leanup"),
    ("commit API, transactions, config and metadata", r"commit|transaction|config|metadata|LanceOperation"),
    ("stats, tags, versions, checkout", r"stats|list_ordered|checkout|[Tt]ags"),
    ("wrong results and error messages", r"^(AssertionError|pytest\.raises)"),
]
OUT_OF_SCOPE = re.compile(AREAS[0][1])


def cause_of(record: dict[str, Any]) -> str:
    """A failure's cause: exception type and first message line, with paths and numbers blanked."""
    kind = record.get("type") or "Failure"
    lines = (record.get("message") or "").strip().splitlines()
    first = lines[0] if lines else ""
    if kind == "MissingInLanceTable":
        first = first.split(" (used as ")[0]  # one cause per missing name, whatever the test did with it
    if kind == "AssertionError" and first.startswith("Regex pattern did not match"):
        return "pytest.raises(match=...): the error message differs from pylance's"
    if kind == "AssertionError":
        return "AssertionError: a result differs from what pylance's test expects"
    if kind == "Failed" and first.startswith("DID NOT RAISE"):
        return f"pytest.raises: {first}"
    first = re.sub(r"(?:/tmp|/work|/home|/var)[^\s'\"]*", "<path>", first)
    first = re.sub(r"file://[^\s'\"]*", "<uri>", first)
    first = re.sub(r"0x[0-9a-fA-F]+", "0x?", first)
    first = re.sub(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", "N", first)
    return f"{kind}: {first[:180]}"


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")


def triage(
    runs: dict[str, dict[str, Any]], meta: dict[str, Any], top: int = 25
) -> tuple[str, dict[str, Any]]:
    """Render the markdown triage and the machine-readable summary."""
    ref, ours = runs["pylance"]["outcomes"], runs["lance_table"]["outcomes"]
    passing = sorted(n for n, r in ref.items() if r["outcome"] == "passed")
    for module, error in runs["lance_table"]["collect_errors"].items():
        for nodeid in passing:
            if nodeid.startswith(module) and nodeid not in ours:
                ours[nodeid] = {"outcome": "error", "type": "CollectionError", "message": error}
    ok = [n for n in passing if ours.get(n, {}).get("outcome") == "passed"]
    failing = [n for n in passing if ours.get(n, {}).get("outcome") != "passed"]
    causes: dict[str, list[str]] = defaultdict(list)
    for nodeid in failing:
        record = ours.get(nodeid, {"outcome": "missing", "type": "NotRun", "message": "not run"})
        if record["outcome"] == "skipped":
            record = {"type": "Skipped", "message": "skipped with lance_table"}
        causes[cause_of(record)].append(nodeid)
    ranked = sorted(causes.items(), key=lambda kv: (-len(kv[1]), kv[0]))

    per_module: dict[str, Counter[str]] = defaultdict(Counter)
    for nodeid, record in ref.items():
        per_module[module_of(nodeid)]["collected"] += 1
        per_module[module_of(nodeid)]["pylance"] += record["outcome"] == "passed"
    for nodeid in ok:
        per_module[module_of(nodeid)]["lance_table"] += 1
    out_of_scope = sum(len(v) for k, v in ranked if OUT_OF_SCOPE.search(k))

    def pct(a: int, b: int) -> str:
        return f"{100 * a / b:.0f}%" if b else "-"

    lines = [
        "# Upstream pylance tests on lance_table: triage",
        "",
        f"- upstream: lancedb/lance at `{meta['commit']}`; pylance {meta['pylance']}; "
        f"lance_table at `{meta['lance_table']}`",
        f"- modules: {', '.join(meta['modules'])}",
        f'- deselected by name (out of scope): `-k "{meta["keyword"]}"`; '
        f"per-test timeout {meta['timeout']:g}s ({meta['pylance_timeout']:g}s with pylance); "
        "stubbed optional modules: "
        f"{', '.join(sorted(meta['stubs'])) or 'none'}; optional test dependencies: "
        f"{', '.join(d.removesuffix('.dist-info') for d in meta['deps']) or 'none'}",
        "",
        f"**{len(ok)} of the {len(passing)} upstream tests that pass with pylance pass with lance_table "
        f"({pct(len(ok), len(passing))})**; {len(ref)} collected with pylance. "
        f"{out_of_scope} of the {len(failing)} failures have an index/vector cause (out of scope).",
        "",
        "| module | collected | pass with pylance | of those, pass with lance_table |",
        "|---|---:|---:|---:|",
    ]
    for module in sorted(per_module, key=lambda m: -per_module[m]["pylance"]):
        c = per_module[module]
        lines.append(
            f"| {module} | {c['collected']} | {c['pylance']} | {c['lance_table']} "
            f"({pct(c['lance_table'], c['pylance'])}) |"
        )
    uses = runs["lance_table"]["import_uses"]
    if uses:
        lines += [
            "",
            "Missing names the test modules use at import time (at module level). The harness lets the",
            "import go on with an inert value, so only the tests that touch it fail; without the",
            "harness's leniency every test of the module would fail to import:",
            "",
        ]
        lines += [f"- `{name}`" for name in uses]
    for label in ("pylance", "lance_table"):
        collect = runs[label]["collect_errors"]
        if collect:
            lines += ["", f"Modules that failed to import with {label}:", ""]
            lines += [f"- `{m}`: {e}" for m, e in collect.items()]
    lines += [
        "",
        f"## Failure causes, ranked by tests blocked (top {top} of {len(ranked)})",
        "",
        "A test counts once, under the first error it hit; fixing a cause may uncover the next one.",
        "`MissingInLanceTable: lance.x.Y` means the test used pylance's name `lance.x.Y` and lance_table",
        "has nothing under that name.",
        "",
        "| # | tests | cause | example test | raised at |",
        "|---:|---:|---|---|---|",
    ]
    for i, (cause, nodeids) in enumerate(ranked[:top], 1):
        example = nodeids[0]
        origin = ours.get(example, {}).get("origin") or ""
        scope = " *(index/vector)*" if OUT_OF_SCOPE.search(cause) else ""
        cell = cause.replace("|", "\\|")
        lines.append(f"| {i} | {len(nodeids)} | `{cell}`{scope} | `{example}` | `{origin}` |")
    areas: dict[str, list[str]] = defaultdict(list)
    for cause, nodeids in ranked:
        area = next((name for name, pattern in AREAS if re.search(pattern, cause)), "other")
        areas[area] += nodeids
    lines += ["", "## By API area (the causes summed)", "", "| tests | area |", "|---:|---|"]
    for area, nodeids in sorted(areas.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"| {len(nodeids)} | {area} |")
    rest = ranked[top:]
    if rest:
        lines += ["", "## The other causes", ""]
        lines += [f"{len(rest)} more causes block {sum(len(v) for _, v in rest)} tests:", ""]
        lines += [f"- {len(v)}: `{k}` (`{v[0]}`)" for k, v in rest]
    asserts = causes.get(cause_of({"type": "AssertionError"}), [])
    asserts += causes.get(cause_of({"type": "AssertionError", "message": "Regex pattern did not match"}), [])
    if asserts:
        lines += ["", "## Wrong results and error messages (AssertionError), one line each", ""]
        for nodeid in asserts:
            record = ours[nodeid]
            message = " / ".join((record.get("message") or "").splitlines()[:3])
            message = re.sub(r"(?:/tmp|/work|/home|/var)[^\s'\"]*", "<path>", message)
            lines.append(f"- `{nodeid}` at `{record.get('origin')}`: `{message[:300]}`")
    extra = sorted(n for n, r in ours.items() if r["outcome"] == "passed" and n not in passing)
    if extra:
        lines += ["", f"{len(extra)} tests pass with lance_table but not with pylance:", ""]
        lines += [f"- `{n}` (pylance: {ref.get(n, {}).get('outcome', 'not run')})" for n in extra]
    summary = {
        **meta,
        "collected": len(ref),
        "pass_pylance": len(passing),
        "pass_lance_table": len(ok),
        "causes": [{"cause": k, "count": len(v), "tests": v} for k, v in ranked],
        "outcomes": {"pylance": ref, "lance_table": ours},
    }
    return "\n".join(lines) + "\n", summary
