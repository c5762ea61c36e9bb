"""Every import is declared: a module imports the standard library, taplog's own packages, or a
distribution that pyproject.toml declares for the part of the tree it sits in, and nothing else.

The source (proxy/, recorder/) may import the main dependencies and the `fast` and `fleet`
extras; the tests also the `test` extra; bench/ every extra. A package that is only installed
because some other package needs it is not declared, so a test that imports it would break the
day that other package stops needing it.

taplog imports as `taplog.proxy` and `taplog.recorder`. The repository's root is on sys.path
under pytest, so `import proxy` would still work there, and load a second copy of every module
it touches: that spelling is refused everywhere.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests import ROOT

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
OWN = {"taplog", "tests", "bench"}
OLD_NAMES = {"proxy", "recorder"}  # the folders' names, importable only as taplog.proxy/recorder
EXTRAS = {
    "proxy": ("fast", "fleet", "otel"),
    "recorder": ("fast", "fleet"),
    "tests": ("fast", "fleet", "otel", "test"),
}
TREES = ("proxy", "recorder", "tests", "bench")
# The standard library, and what a newer Python added that is imported behind a version
# check (a backport declared for the older ones): 3.14's compression.zstd.
STDLIB = sys.stdlib_module_names | {"compression"}


def _declared(extras: tuple[str, ...]) -> set[str]:
    requirements = [*PROJECT["dependencies"]]
    for extra in extras:
        requirements += PROJECT["optional-dependencies"][extra]
    return {canonicalize_name(Requirement(line).name) for line in requirements}


def _modules() -> list[Path]:
    found = [path for tree in TREES for path in sorted((ROOT / tree).rglob("*.py"))]
    return [path for path in found if "__pycache__" not in path.parts]


def _imported(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every absolute import in the module, wherever it stands."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append((node.lineno, node.module))
    return names


def test_every_module_imports_only_what_pyproject_declares():
    distributions = packages_distributions()
    all_extras = tuple(PROJECT["optional-dependencies"])
    undeclared = []
    for path in _modules():
        tree = path.relative_to(ROOT).parts[0]
        declared = _declared(EXTRAS.get(tree, all_extras))
        for line, name in _imported(path):
            top = name.partition(".")[0]
            if top in OWN or top in OLD_NAMES or top in STDLIB:
                continue  # the old names are the next test's to refuse
            # an import that is not installed here (uvloop without the `fast` extra) is
            # taken to be named as its distribution is
            providers = {canonicalize_name(d) for d in distributions.get(top, [top])}
            if not providers & declared:
                where = f"{path.relative_to(ROOT)}:{line}"
                undeclared.append(f"{where}: {name} (from {sorted(providers) or 'nowhere'})")
    assert undeclared == [], "imports that pyproject.toml does not declare:\n" + "\n".join(
        undeclared
    )


def test_no_module_imports_proxy_or_recorder_by_their_old_top_level_names():
    old = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in _modules()
        for line, name in _imported(path)
        if name.partition(".")[0] in OLD_NAMES
    ]
    assert old == [], "import these as taplog.proxy / taplog.recorder:\n" + "\n".join(old)


def test_every_folder_of_tests_is_a_package():
    """Test modules import by their full name (tests.proxy.failover.test_breaker): two folders
    may hold files of the same name, and `from tests.fakes… import` finds the module pytest
    loaded. A folder without __init__.py would be imported under its bare file names instead."""
    folders = {path.parent for path in (ROOT / "tests").rglob("*.py")}
    missing = [f for f in sorted(folders) if "__pycache__" not in f.parts]
    missing = [f.relative_to(ROOT) for f in missing if not (f / "__init__.py").is_file()]
    assert missing == []
