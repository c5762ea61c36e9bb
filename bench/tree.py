"""The tree under measurement: `import taplog` loads the code of the tree this script sits in.

The repository maps proxy/ and recorder/ under the `taplog` name only when installed, and
the venv's install may be another tree's (`pip install -e` of a different checkout). So
every bench script, and every process it starts, finds `taplog` first in a folder of links
into this tree (build/import/taplog/{proxy,recorder}): one tree can be measured against
another from the same venv.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def import_folder(tree: Path) -> Path:
    """A folder on whose path `import taplog` means `tree`'s code."""
    folder = tree / "build" / "import"
    (folder / "taplog").mkdir(parents=True, exist_ok=True)
    for part in ("proxy", "recorder"):
        link = folder / "taplog" / part
        if not link.is_symlink():
            link.symlink_to(tree / part, target_is_directory=True)
    return folder


def environment(tree: Path = ROOT) -> dict[str, str]:
    """This process's environment, for a child Python process that runs `tree`'s code."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(import_folder(tree)), str(tree)])}


if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(import_folder(ROOT)))
