"""The installed environment holds no surprises: no unknown start-up hooks, no known-bad releases.

A `.pth` file in site-packages runs its `import` lines at every Python start:
the compromised litellm 1.82.7 and 1.82.8 shipped one. CI installs the project
from scratch and then runs this, so a dependency that starts planting one
fails the build instead of running on every machine that installs taplog.
"""

from __future__ import annotations

import fnmatch
import site
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from tests import ROOT

# Start-up hooks we know: setuptools' distutils shim, and pip's editable installs of taplog.
KNOWN_PTH = ("distutils-precedence.pth", "__editable__.taplog-*.pth")

KNOWN_BAD = {"litellm": ("1.82.7", "1.82.8")}


def _requirements() -> list[Requirement]:
    """Every requirement line, extras included (`litellm` is in two: main and `bench`)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = [r for group in project["optional-dependencies"].values() for r in group]
    return [Requirement(line) for line in project["dependencies"] + extras]


def test_no_unknown_pth_file_is_installed():
    found = sorted(p.name for folder in site.getsitepackages() for p in Path(folder).glob("*.pth"))
    unknown = [name for name in found if not any(fnmatch.fnmatch(name, k) for k in KNOWN_PTH)]
    assert unknown == [], f"unexpected start-up hooks in site-packages: {unknown}"


def test_known_bad_releases_are_excluded_by_the_pins_and_not_installed():
    for name, bad_versions in KNOWN_BAD.items():
        pins = [req for req in _requirements() if req.name == name]
        assert pins, f"{name} is not a dependency any more: update KNOWN_BAD"
        for req, bad in ((req, bad) for req in pins for bad in bad_versions):
            assert bad not in req.specifier, f"{req} allows {bad}"
        assert metadata.version(name) not in bad_versions


def test_every_dependency_has_an_upper_bound():
    unbounded = [
        str(req)
        for req in _requirements()
        if not any(spec.operator in ("<", "<=", "==", "~=") for spec in req.specifier)
    ]
    assert unbounded == []
