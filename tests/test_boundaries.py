"""What the import contracts cannot see: the CLI's entry point loads only what ``--help`` needs.

The boundaries themselves (the parent never imports a framework, the core never imports
textual, runners never import the parent, the core's layers) are import-linter contracts in
pyproject.toml, checked by ``lint-imports`` with the rest of the project's checks.
"""

from __future__ import annotations

import subprocess
import sys

FRAMEWORKS = ("torch", "tensorflow", "keras", "jax", "torchvision", "pretrainedmodels")


def test_cli_entry_stays_light() -> None:
    """Imports inside functions keep ``benchtui --help`` fast: no UI library, NumPy or framework at start."""
    code = "import sys, benchtui.cli; print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(result.stdout.split())
    assert not loaded & {"textual", "rich", "numpy", *FRAMEWORKS}, loaded
