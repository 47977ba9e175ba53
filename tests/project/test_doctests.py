"""The examples in pysframe's docstrings run, module by module, as part of the suite; and every
module imports without the optional packages (fuzzing, plots, Dask), which only the functions
that need them import."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import subprocess
import sys
import textwrap

import pytest

import pysframe

#: Packages pysframe uses only when asked (extras "plot", "dask"; fuzzing with atheris).
OPTIONAL = ("atheris", "dask", "distributed", "matplotlib")

#: Modules that are not imported to be read: ``python -m pysframe`` runs the command line.
SCRIPTS = {"pysframe.__main__"}

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(pysframe.__path__, "pysframe.")
    if info.name not in SCRIPTS
)


def _import(name: str) -> object:
    """Import ``name``; skip the test when an optional package it needs is missing."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as missing:
        if (missing.name or "").split(".")[0] in OPTIONAL:
            pytest.skip(f"{name} needs the optional package {missing.name}")
        raise


@pytest.mark.parametrize("name", ["pysframe", *MODULES])
def test_docstring_examples_run(name: str) -> None:
    module = _import(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report: list[str] = []
    for test in finder.find(module, name):
        runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)


def test_the_examples_are_found() -> None:
    """The modules known to have examples have them (the test above is not vacuous)."""
    counted = {}
    for name in ("pysframe", "pysframe.errors", "pysframe.format.section"):
        tests = doctest.DocTestFinder(exclude_empty=True).find(importlib.import_module(name))
        counted[name] = sum(len(test.examples) for test in tests)
    assert all(count > 0 for count in counted.values()), counted


def test_every_module_imports_without_the_optional_packages() -> None:
    program = textwrap.dedent(
        f"""
        import importlib, sys
        for optional in {OPTIONAL!r}:
            sys.modules[optional] = None  # import raises ModuleNotFoundError
        for name in {MODULES!r}:
            importlib.import_module(name)
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
