"""Import boundaries: the parent never loads a framework, the core never loads textual,
runners never load the parent."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FRAMEWORKS = ("torch", "tensorflow", "keras", "jax", "torchvision", "pretrainedmodels")


def _modules(package: str) -> list[str]:
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append(".".join(parts))
    return out


def _loaded_after_import(module: str) -> set[str]:
    code = f"import sys, {module}; print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())


@pytest.mark.parametrize("module", _modules("tui"))
def test_parent_never_imports_a_framework(module: str) -> None:
    loaded = _loaded_after_import(module)
    assert not loaded & set(FRAMEWORKS), f"{module} pulls in {loaded & set(FRAMEWORKS)}"


@pytest.mark.parametrize("module", _modules("tui/core"))
def test_headless_core_never_imports_textual(module: str) -> None:
    assert "textual" not in _loaded_after_import(module)


def test_cli_entry_and_engine_stay_light() -> None:
    loaded = _loaded_after_import("tui.cli")
    assert not loaded & {"textual", "rich", "numpy", *FRAMEWORKS}


@pytest.mark.parametrize("path", sorted((ROOT / "runners").rglob("*.py")), ids=lambda p: p.name)
def test_runners_never_import_the_parent_or_textual(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            assert name.split(".")[0] not in {"tui", "textual", "rich"}, f"{path.name} imports {name}"


@pytest.mark.parametrize("module", ["runners.protocol", "runners.catalog", "runners.config", "runners.models"])
def test_light_runner_modules_load_no_framework(module: str) -> None:
    loaded = _loaded_after_import(module)
    assert not loaded & set(FRAMEWORKS) and "tui" not in loaded
