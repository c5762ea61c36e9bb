"""Names a reader cannot confuse: no fixture defined twice, no two classes of one name.

A fixture defined in two test files means two things under one name (pytest picks the
nearest); one class name in two modules makes a traceback or a grep ambiguous. The one
exception is the contract each API's module of a kind exports under the same name
(`Progress` in every `wire.py`, `Fitter` in every `splice.py`), which callers reach
through `recorder/vendors/apis.py` and never import side by side.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests import ROOT

PER_API_CONTRACT = {"Progress": "wire.py", "Fitter": "splice.py"}


def _definitions(folders: tuple[str, ...], wanted) -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if wanted(node):
                    found[node.name].append(path.relative_to(ROOT).as_posix())
    return found


def _is_fixture(node: ast.AST) -> bool:
    if not isinstance(node, ast.FunctionDef):
        return False
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if getattr(target, "attr", getattr(target, "id", None)) == "fixture":
            return True
    return False


def test_no_fixture_is_defined_twice():
    fixtures = _definitions(("tests",), _is_fixture)
    assert len(fixtures) > 20  # the check reads the suite's fixtures
    assert {name: files for name, files in fixtures.items() if len(files) > 1} == {}


def test_no_two_classes_share_a_public_name():
    classes = _definitions(
        ("proxy", "recorder"),
        lambda node: isinstance(node, ast.ClassDef) and not node.name.startswith("_"),
    )
    shared = {
        name: files
        for name, files in classes.items()
        if len(files) > 1 and not all(Path(f).name == PER_API_CONTRACT.get(name) for f in files)
    }
    assert shared == {}
