"""The package layout as the imports draw it: import-linter's contracts (pyproject.toml), no
import cycles between modules (imports inside functions and under ``TYPE_CHECKING`` included:
a cycle that only the type checker sees is still two modules that need each other).  Modules
are cut by concern, not by length: each package's docstring says what each is for."""

from __future__ import annotations

import os
import re
from pathlib import Path

import grimp
import pytest
from importlinter.cli import EXIT_STATUS_SUCCESS, lint_imports

ROOT = Path(__file__).resolve().parent.parent.parent
SOURCE = ROOT / "src" / "pysframe"


def test_import_contracts_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    config = str(ROOT / "pyproject.toml")
    status = lint_imports(config_filename=config, no_logo=True, cache_dir=None)
    assert status == EXIT_STATUS_SUCCESS


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    modules = sorted(m for m in graph.modules if m.startswith("pysframe"))
    edges = {
        m: sorted(t for t in graph.find_modules_directly_imported_by(m) if t.startswith("pysframe"))
        for m in modules
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            targets = edges.get(node, [])
            if child < len(targets):
                work.append((node, child + 1))
                target = targets[child]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def test_no_import_cycles() -> None:
    graph = grimp.build_graph("pysframe", exclude_type_checking_imports=False)
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for name in ("pysframe", "pysframe.a", "pysframe.b", "pysframe.c"):
        graph.add_module(name)
    graph.add_import(importer="pysframe.a", imported="pysframe.b")
    graph.add_import(importer="pysframe.b", imported="pysframe.a")
    graph.add_import(importer="pysframe.b", imported="pysframe.c")
    assert _cycles(graph) == [["pysframe.a", "pysframe.b"]]


def test_header_layout_spelled_in_one_module() -> None:
    spelled = sorted(
        str(path.relative_to(SOURCE))
        for path in SOURCE.rglob("*.py")
        if "HBBBbbBIIIII" in path.read_text()
    )
    assert spelled == [os.path.join("format", "layout.py")]


@pytest.mark.parametrize(
    "package", ["format", "elf", "generate", "unwind", "perf", "sources", "tools", "cli"]
)
def test_each_package_says_what_each_module_is_for(package: str) -> None:
    """Modules are cut by concern, not by length: each package's docstring names each of its
    modules with its job, so a module that appears unexplained fails here."""
    import importlib
    import pkgutil

    module = importlib.import_module(f"pysframe.{package}")
    names = [info.name for info in pkgutil.iter_modules(module.__path__)]
    missing = [name for name in names if re.search(rf"\b{name}\b", module.__doc__ or "") is None]
    assert not missing, f"pysframe.{package}'s docstring does not name {missing}"
