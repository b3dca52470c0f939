"""A user's own model in a plan: read from a model file or from ``--model-def`` flags, and checked as far
as it can be without importing the user's code or any framework.

The parent never imports torch, tensorflow, keras or jax, nor the user's module (which imports them):
it finds the module's file on the path the runner will have and reads it with ``ast``, so a typo in a
module or function name is one line at plan time; what only running can tell (the function raises,
returns something else, the model rejects its input) fails the run with that reason.
"""

from __future__ import annotations

import ast
import importlib.machinery
import json
import os
import stat
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

from benchtui.core.plan.plan import PlanError
from benchtui_runners import catalog

MAX_MODEL_FILE_BYTES = 1 << 20
#: The largest module whose top-level names are checked at plan time (a model file's own bound): a larger
#: one is not read, and the run tells whether it defines the function.
MAX_MODULE_BYTES = MAX_MODEL_FILE_BYTES


def read_model_file(path: str | Path) -> dict[str, Any]:
    """A model file (TOML, or JSON by its ``.json`` suffix) as a checked definition.

    Its ``paths`` are relative to the file's folder, which is itself the first of them: a module
    beside the file imports as it would from there.
    """
    file = Path(path).expanduser()
    try:
        if file.stat().st_size > MAX_MODEL_FILE_BYTES:
            raise PlanError(
                f"model file {file}: larger than {MAX_MODEL_FILE_BYTES // 1024} KiB, not a model file"
            )
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise PlanError(f"model file {file}: not UTF-8 text") from exc
    except OSError as exc:
        raise PlanError(f"model file {file}: {exc.strerror or exc}") from exc
    if file.suffix.lower() == ".json":
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PlanError(f"model file {file}: not JSON ({exc.msg}, line {exc.lineno})") from exc
    else:
        try:
            import tomllib
        except ImportError as exc:  # Python 3.10
            raise PlanError(f"model file {file}: TOML needs Python 3.11 or later; write it as JSON") from exc
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise PlanError(f"model file {file}: not TOML ({str(exc).splitlines()[0]})") from exc
    if not isinstance(raw, dict):
        raise PlanError(f"model file {file}: a table of fields (name, input, builders, ...)")
    folder = file.resolve().parent
    raw["file"] = str(file.resolve())
    extra = raw.get("paths", [])
    if isinstance(extra, list) and all(isinstance(p, str) and p for p in extra):
        found = [str(folder), *(str((folder / Path(p).expanduser()).resolve()) for p in extra)]
        raw["paths"] = list(dict.fromkeys(found))  # each folder once, the file's own first
    return check(raw, f"model file {file}: ")


def from_flags(
    defs: list[str], name: str | None, input_spec: str | None, cwd: Path | None = None
) -> dict[str, Any]:
    """A definition from ``--model-def FRAMEWORK=MODULE:FUNCTION`` (repeated), ``--model-name`` and
    ``--model-input image | tokens:VOCAB:SEQ_LEN | tensor:D1xD2...``; modules are found from ``cwd``."""
    builders: dict[str, str] = {}
    for item in defs:
        key, sep, spec = item.partition("=")
        if not sep or not key or not spec:
            raise PlanError(f"--model-def takes FRAMEWORK=MODULE:FUNCTION, got {item!r}")
        if key in builders:
            raise PlanError(f"--model-def names {key} twice")
        builders[key] = spec
    first = next(iter(builders.values()), "")
    raw: dict[str, Any] = {
        "name": name or first.partition(":")[0].rpartition(".")[2] or "custom",
        "builders": builders,
        "paths": [str((cwd or Path.cwd()).resolve())],
    }
    raw.update(_input(input_spec or "image"))
    return check(raw, "")


def _input(text: str) -> dict[str, Any]:
    kind, _, rest = text.partition(":")
    try:
        if kind == "image" and not rest:
            return {"input": "image"}
        if kind == "tokens":
            vocab, _, seq_len = rest.partition(":")
            return {"input": "tokens", "vocab": int(vocab), "seq_len": int(seq_len)}
        if kind == "tensor":
            return {"input": "tensor", "shape": [int(d) for d in rest.lower().split("x")]}
    except ValueError:
        pass
    raise PlanError(f"--model-input takes image, tokens:VOCAB:SEQ_LEN or tensor:D1xD2..., got {text!r}")


def check(raw: Any, where: str = "") -> dict[str, Any]:
    """``catalog.check_definition`` with its error as a PlanError (``where`` names the file)."""
    try:
        return catalog.check_definition(raw)
    except ValueError as exc:
        raise PlanError(f"{where}{exc}") from exc


def check_sources(definition: dict[str, Any], other_python: Collection[str] = ()) -> None:
    """Each builder, loss and optimizer's module is found and defines its function, without running it.

    Searched as the runner will: the definition's ``paths`` first, then this Python's path. A
    framework whose runs use another interpreter (``other_python``: ``--python``) is not checked
    when its module is not found here: that interpreter may have it.

    A module found through the user's own ``PYTHONPATH`` (``PYTHONPATH=src benchtui run --model-def
    torch=mynets:build``) is found there by the runners too: its folder, and only that one, is added to
    the definition's ``paths`` (the runners never get the parent's ``PYTHONPATH``, which may name the
    parent's own packages).
    """
    paths = list(definition.get("paths") or [])
    for table in ("builders", "losses", "optimizers"):
        for key, spec in (definition.get(table) or {}).items():
            module, _, attr = spec.partition(":")
            found = _find(module, paths)
            folder = _pythonpath_folder(module, paths) if found is not None else None
            if folder is not None and folder not in paths:
                paths.append(folder)
                definition["paths"] = list(paths)
            if found is None:
                if key in other_python or module.split(".")[0] in sys.builtin_module_names:
                    continue
                where = f"{', '.join(paths)} or this Python's path" if paths else "this Python's path"
                raise PlanError(f"{definition['name']}: {table}.{key}: no module {module} in {where}")
            try:
                names = _top_level_names(found)
            except PlanError as exc:
                raise PlanError(f"{definition['name']}: {table}.{key}: {exc}") from None
            if names is not None and attr.split(".")[0] not in names:
                raise PlanError(
                    f"{definition['name']}: {table}.{key}: {found} defines no {attr.split('.')[0]}"
                )


def _pythonpath_folder(module: str, paths: list[str]) -> str | None:
    """The folder of this process's ``PYTHONPATH`` that ``module``'s top-level package is found in, when
    the definition's ``paths`` do not have it (None: found there, or elsewhere on the path: the
    interpreter's own site-packages, which the runner's interpreter has its own of)."""
    top = module.split(".")[0]
    if importlib.machinery.PathFinder.find_spec(top, paths) is not None:
        return None
    entries = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for entry in (p for p in sys.path if p):  # in the order this Python searches them
        if os.path.abspath(entry) not in entries:
            if importlib.machinery.PathFinder.find_spec(top, [entry]) is not None:
                return None  # found first somewhere that is not the user's PYTHONPATH
            continue
        if importlib.machinery.PathFinder.find_spec(top, [entry]) is not None:
            return os.path.abspath(entry)
    return None


def _find(module: str, paths: list[str]) -> Path | None:
    """The file of ``module`` (a package's ``__init__.py``), found without importing anything."""
    locations: list[str] | None = [*paths, *(p for p in sys.path if p)]
    spec = None
    parts = module.split(".")
    for i in range(len(parts)):
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: i + 1]), locations)
        if spec is None:
            return None
        locations = list(spec.submodule_search_locations or [])
    if spec is None or not spec.origin or spec.origin in ("namespace", "built-in", "frozen"):
        return Path(module) if spec is not None else None
    return Path(spec.origin)


def _module_source(file: Path) -> bytes | None:
    """A module's bytes, or None when it is not a regular file of at most ``MAX_MODULE_BYTES`` (opened
    without blocking: a FIFO put in its place between the finding and the reading never hangs)."""
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    with open(fd, "rb") as fh:
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_MODULE_BYTES:
                return None
            data = fh.read(MAX_MODULE_BYTES + 1)
        except OSError:
            return None
    return data if len(data) <= MAX_MODULE_BYTES else None  # grew since fstat


def _top_level_names(file: Path) -> set[str] | None:
    """The names a Python source file defines at its top level; None when that cannot be known
    (not Python source, a ``*`` import, a module ``__getattr__``, a file that does not parse, one
    larger than ``MAX_MODULE_BYTES``). PlanError for one nested too deeply for Python's parser."""
    if file.suffix != ".py":
        return None
    source = _module_source(file)
    if source is None:
        return None
    try:
        tree = ast.parse(source, str(file))
    except (SyntaxError, ValueError):
        return None
    except (MemoryError, RecursionError):
        # The parser's own limits (its stack, the tree's depth): Python cannot import it either.
        raise PlanError(f"cannot read {file}: too deeply nested for Python's parser") from None
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> bool:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    if alias.name == "*":
                        return False
                    names.add(alias.asname or alias.name.split(".")[0])
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                blocks = [node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])]
                blocks += [h.body for h in getattr(node, "handlers", [])]
                if not all(visit(block) for block in blocks):
                    return False
        return True

    if not visit(tree.body) or "__getattr__" in names:
        return None
    return names
