"""List the public names of pylance's Python API that lance_table lacks (indices and vector search aside).

Usage::

    python scripts/api_gaps.py [--all]

For each pylance module (``lance``, ``lance.dataset``, ``lance.fragment``, ``lance.file``, ...), every
public name it defines is looked up where lance_table keeps pylance's names (the same mapping as the
upstream-test shim, ``scripts/upstream_shim/_lt_shim.py``). For a class or function found in both,
its public members and keyword arguments are compared too. Names about indices, vector search and
full-text search are left out unless ``--all`` is given. Prints one line per gap, by module, and a
count. Needs pylance installed (as ``lance``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import re
import sys
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "upstream_shim"))
from _lt_shim import SOURCES

MODULES = (
    "lance",
    "lance.dataset",
    "lance.fragment",
    "lance.file",
    "lance.commit",
    "lance.optimize",
    "lance.schema",
    "lance.util",
    "lance.blob",
    "lance.udf",
    "lance.progress",
    "lance.types",
    "lance.arrow",
    "lance.debug",
)
# indices, vector search, full-text search: out of lance_table's scope
OUT_OF_SCOPE = re.compile(
    r"index|indices|vector|nearest|knn|ivf|hnsw|pq\b|_pq|fts|full_text|bm25|rerank|distance|"
    r"centroid|kmeans|partition|prefilter|fast_search|refine|nprobe|ef\b|minimum_nprobes|"
    r"maximum_nprobes|search|query|fragment_reuse|mem_wal|mem_wal_index|sampler|torch|hf\b|"
    r"namespace|otel|tracing|pydantic",
    re.IGNORECASE,
)

# names that are module plumbing, not API
SKIP = frozenset({"TYPE_CHECKING", "LOGGER"})


def _targets(pylance_module: str) -> list[types.ModuleType]:
    names = SOURCES.get(pylance_module) or ("lance_table" + pylance_module[len("lance") :],)
    out = []
    for name in names:
        with contextlib.suppress(ImportError):
            out.append(importlib.import_module(name))
    return out


def _public(module: types.ModuleType) -> list[str]:
    """The names a pylance module offers: its ``__all__``, else what it defines (not imports)."""
    names = getattr(module, "__all__", None)
    if names is not None:
        return sorted(names)
    out = []
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, types.ModuleType):
            continue
        home = getattr(value, "__module__", module.__name__)
        if isinstance(home, str) and home.startswith("lance") and home.startswith(module.__name__):
            out.append(name)
        elif not callable(value) and not isinstance(value, type) and name.isupper():
            out.append(name)  # constants
    return sorted(out)


def _members(cls: type) -> set[str]:
    """Public members, with the fields instances have (dataclass fields, annotations, slots)."""
    names = set(dir(cls))
    for klass in getattr(cls, "__mro__", (cls,)):
        names |= set(getattr(klass, "__annotations__", {}))
        slots = getattr(klass, "__slots__", ())
        names |= {slots} if isinstance(slots, str) else set(slots)
    return {n for n in names if not n.startswith("_")}


def _keywords(fn: Any) -> set[str] | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return None  # takes any keyword
    return {
        n for n, p in sig.parameters.items() if p.kind not in (p.VAR_POSITIONAL,) and n not in ("self", "cls")
    }


def _takes_any_keyword(fn: Any) -> bool:
    try:
        return any(p.kind is p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True


def _callable_gaps(where: str, theirs: Any, ours: Any) -> list[str]:
    want = _keywords(theirs)
    if want is None or _takes_any_keyword(ours):
        return []
    have = _keywords(ours) or set()
    return [f"{where}({kw}=)" for kw in sorted(want - have)]


def gaps(include_all: bool = False) -> list[str]:
    """Every gap, as ``module.Name``, ``module.Name.member`` or ``module.Name.method(keyword=)``."""
    out: list[str] = []
    keep = (lambda s: True) if include_all else (lambda s: not OUT_OF_SCOPE.search(s))
    seen: set[int] = set()  # a name re-exported by several modules is listed once
    for mod_name in MODULES:
        try:
            theirs_mod = importlib.import_module(mod_name)
        except ImportError:
            continue
        targets = _targets(mod_name)
        for name in _public(theirs_mod):
            where = f"{mod_name}.{name}"
            if not keep(where):
                continue
            theirs = getattr(theirs_mod, name, None)
            if name in SKIP or (callable(theirs) and id(theirs) in seen):
                continue
            seen.add(id(theirs))
            ours = next((getattr(m, name) for m in targets if hasattr(m, name)), None)
            if ours is None:
                out.append(where)
                continue
            if isinstance(theirs, type) and isinstance(ours, type):
                for member in sorted(_members(theirs) - _members(ours)):
                    if keep(f"{where}.{member}"):
                        out.append(f"{where}.{member}")
                for member in sorted(_members(theirs) & _members(ours)):
                    a, b = getattr(theirs, member, None), getattr(ours, member, None)
                    if callable(a) and callable(b) and keep(f"{where}.{member}"):
                        out += [g for g in _callable_gaps(f"{where}.{member}", a, b) if keep(g)]
                if keep(where):
                    out += [g for g in _callable_gaps(where, theirs.__init__, ours.__init__) if keep(g)]
            elif callable(theirs) and callable(ours):
                out += [g for g in _callable_gaps(where, theirs, ours) if keep(g)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--all", action="store_true", help="include indices and vector search")
    args = parser.parse_args()
    found = gaps(args.all)
    for line in found:
        print(line)
    print(f"{len(found)} gaps", file=sys.stderr)


if __name__ == "__main__":
    main()
