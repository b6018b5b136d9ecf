"""The architecture holds: layers import only downward, and no two modules import each other.

Every import counts, the lazy ones inside functions and the ones only for type checking too.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("lance_table", "pyspark_lance_table")

# Bottom to top. A module may import its own layer and the layers below it.
LAYERS = [
    (
        "lance_table.errors",
        "lance_table._proto",
        "lance_table._lazy",  # names of a package imported on first use (PEP 562)
        "lance_table._parallel",
        "lance_table._lru",  # the bounded LRU map of every cache
        "lance_table._buffers",  # large arrays from Arrow's memory pool
        "lance_table._numpy",  # numpy helpers faster than numpy's own (sorted_unique)
        "lance_table.logical_types",  # Lance logical type strings
        "lance_table.schema",
        "lance_table.extensions",  # extension types in Lance schemas
        "lance_table.jsonb",
        "lance_table.udf",  # pylance's ``lance.udf``: batch UDFs and their checkpoints (no imports)
        "lance_table.arrow_images",  # pylance's image extension types (in ``lance.arrow``)
        "lance_table.arrow",  # pylance's ``lance.arrow``: bfloat16 and the image extension types
        "lance_table.blob_values",  # pylance's blob v2 builders (in ``lance.blob``)
        "lance_table.blob_descriptors",  # pylance's BlobDescriptor(ArrayBuilder)
        "lance_table.util",  # pylance's ``lance.util`` time helpers
        "lance_table.log",  # pylance's ``lance.log``
        "lance_table.io",  # pylance's ``lance.io`` (empty, as pylance's)
        "lance_table.pydantic",  # pylance's ``lance.pydantic`` (pydantic is optional)
    ),
    ("lance_table.storage", "lance_table.format"),
    ("lance_table.file",),
    ("lance_table.filters",),
    # pylance's module names: lance_table.fragment, lance_table.commit, lance_table.optimize,
    # lance_table.progress
    (
        "lance_table.table",
        "lance_table.fragment",
        "lance_table.commit",
        "lance_table.optimize",
        "lance_table.progress",
        "lance_table.debug",  # pylance's lance.debug
        "lance_table.blob",  # pylance's lance.blob
        "lance_table.migration",  # pylance's lance.lance.manifest_needs_migration
        "lance_table._dataset",  # pylance's lance._dataset (ShardedBatchIterator)
    ),
    ("lance_table.spark",),
    ("pyspark_lance_table",),
    # the command line (``lance-table``, ``python -m lance_table``) at the edge
    ("lance_table.cli", "lance_table.__main__"),
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "_proto" not in path.parts:
                out[_module_name(path)] = path
    return out


def _imports(path: Path, name: str, is_package: bool) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return {m for m in found if m.split(".")[0] in PACKAGES}


def _layer(module: str) -> int:
    for i, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    raise AssertionError(f"{module} belongs to no layer")


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        targets = _imports(path, name, path.name == "__init__.py")
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def test_every_import_points_down_or_sideways():
    upward = []
    for module, targets in _graph().items():
        if module == "lance_table":  # the package root re-exports the public API
            continue
        for target in targets:
            if target != "lance_table" and _layer(target) > _layer(module):
                upward.append(f"{module} -> {target}")
    assert not upward, "imports from a higher layer:\n" + "\n".join(sorted(upward))


def test_no_module_imports_lance_table_root_but_for_the_version():
    for module, path in _modules().items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "lance_table" and not node.level:
                names = {a.name for a in node.names}
                assert names <= {"__version__"}, f"{module} imports {names} from the package root"


def test_no_import_cycles():
    graph = _graph()
    # a package's __init__ re-exporting its own modules is not a cycle between concerns
    edges = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_checker_sees_imports():
    graph = _graph()
    assert "lance_table.storage.sources" in graph["lance_table.file.reader"]
    assert "lance_table.table.snapshot" in graph["lance_table.table.dataset"]
    assert len(graph) > 50


def test_importing_the_package_leaves_sqlglot_unloaded() -> None:
    """sqlglot (the SQL parser) loads with the first filter, not with ``import lance_table``."""
    import subprocess
    import sys

    code = (
        "import sys, lance_table; assert 'sqlglot' not in sys.modules, 'sqlglot loaded on import'; "
        # nor the command line's libraries (the 'cli' extra)
        "loaded = [m for m in ('click', 'rich') if m in sys.modules]; assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
