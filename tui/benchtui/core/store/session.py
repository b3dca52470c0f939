"""Session folders: writing them as a run goes, and loading and replaying them back.

    <UTC timestamp>_<slug>/
      session.json   schema, plan, host, provenance (benchtui version, commit, runner hash), status
      events.jsonl   append-only: every runner event tagged with its run, every GPU sample
      logs/<run>.log runner stdout/stderr
      summary.json   derived at the end; recomputable from events.jsonl

``SessionFolder`` is the one place that knows these paths and reads them back (with every
check); ``SessionWriter`` writes a new one.
"""

from __future__ import annotations

import json
import os
import platform
import re
import socket
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from benchtui.core.model.status import RunStatus
from benchtui.core.model.summary import SessionModel
from benchtui.core.plan.plan import Plan
from benchtui.core.provenance import cpu_model, provenance, recorded_by_other

SESSION_SCHEMA = 1
_DECODER = json.JSONDecoder()
DEFAULT_SESSIONS_DIR = "sessions"


class SessionError(ValueError):
    """A folder that is not a readable session; the message is one line for the user."""


def slugify(name: str, limit: int = 60) -> str:
    """A safe folder-name fragment: lowercase letters, digits, '-', '_' and '.' inside."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._")
    slug = re.sub(r"-{2,}", "-", slug)
    return slug[:limit].strip("-._") or "session"


def sessions_dir(path: str | os.PathLike[str] | None = None) -> Path:
    return Path(path or os.environ.get("BENCHTUI_SESSIONS_DIR") or DEFAULT_SESSIONS_DIR)


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def host_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
    }
    try:
        import psutil

        info["memory_bytes"] = psutil.virtual_memory().total
    except ImportError:
        pass
    return info


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


class SessionFolder:
    """One session's folder: every path in it, its checked session.json and plan, its events."""

    META = "session.json"
    EVENTS = "events.jsonl"
    SUMMARY = "summary.json"
    LOGS = "logs"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> SessionFolder:
        """An existing folder (SessionError when there is none)."""
        folder = cls(path)
        if not folder.path.is_dir():
            raise SessionError(f"no session folder at {folder.path}")
        return folder

    def __repr__(self) -> str:
        return f"SessionFolder({str(self.path)!r})"

    # -- paths ------------------------------------------------------------------------------
    @property
    def meta_path(self) -> Path:
        return self.path / self.META

    @property
    def events_path(self) -> Path:
        return self.path / self.EVENTS

    @property
    def summary_path(self) -> Path:
        return self.path / self.SUMMARY

    @property
    def logs_dir(self) -> Path:
        return self.path / self.LOGS

    def log_path(self, run_id: str) -> Path:
        """A runner's (or probe's) stdout and stderr."""
        return self.logs_dir / f"{run_id}.log"

    # -- reading ----------------------------------------------------------------------------
    def read_meta(self) -> dict[str, Any]:
        """session.json, checked: a benchtui session of a schema this version reads."""
        return read_meta(self.path)

    def read_plan(self, meta: dict[str, Any] | None = None) -> Plan:
        """The session's plan, checked: every framework and model known, counts that make sense."""
        meta = self.read_meta() if meta is None else meta
        try:
            plan = Plan.from_dict(meta["plan"])
        except (KeyError, TypeError, AttributeError) as exc:
            raise SessionError(f"{self.meta_path} has no usable plan ({exc})") from exc
        _check_plan(plan, self.path)
        return plan

    def events(self, warnings: list[str], gpu_tail: GpuTail | None = None) -> Iterator[dict[str, Any]]:
        """events.jsonl's events, damaged lines skipped with a warning (see ``iter_events``)."""
        return iter_events(self.path, warnings, gpu_tail)

    def gpu_samples(self) -> list[dict[str, Any]]:
        """Every GPU/host sample, in order; only lines that can be samples are parsed (most are batches)."""
        out: list[dict[str, Any]] = []
        if not self.events_path.exists():
            return out
        with open(self.events_path, "rb", buffering=1 << 20) as fh:
            for raw in fh:
                if b'"gpu"' not in raw or not raw.endswith(b"\n"):
                    continue
                try:
                    event = json.loads(raw)
                except ValueError:
                    continue
                if (
                    isinstance(event, dict)
                    and event.get("type") == "gpu"
                    and isinstance(event.get("t"), (int, float))
                ):
                    out.append(event)
        return out

    def load(self, keep_events: bool = False) -> LoadedSession:
        """Fold the events into a fresh model; warnings say what was skipped, cut off or recorded by other code."""
        meta = self.read_meta()
        plan = self.read_plan(meta)
        model = SessionModel(plan)
        warnings: list[str] = []
        other = recorded_by_other(meta.get("benchtui"))
        if other:
            warnings.append(other)
        kept: list[dict[str, Any]] = []
        # Without keep_events only the model's window of GPU samples is parsed (same model).
        tail = None if keep_events else GpuTail(model.gpu_samples.maxlen)
        for event in self.events(warnings, tail):
            model.apply(event)
            if keep_events:
                kept.append(event)
        if tail is not None:
            model.events += tail.dropped
        if meta.get("status") == "running":
            warnings.append(_unfinished(self.path, model))
        return LoadedSession(self.path, meta, plan, model, kept, warnings)


class SessionWriter:
    """Writes one session folder. Events are appended and flushed line by line."""

    def __init__(self, path: Path, plan: Plan, extra: dict[str, Any] | None = None) -> None:
        self.path = path
        self.folder = SessionFolder(path)
        self.folder.logs_dir.mkdir(parents=True, exist_ok=False)
        self.meta: dict[str, Any] = {
            "schema": SESSION_SCHEMA,
            "kind": "benchtui-session",
            "name": plan.name or path.name,
            "plan": plan.to_dict(),
            "host": host_info(),
            "benchtui": provenance(),
            "status": "running",
            "started": _utc_now(),
            "started_monotonic": time.monotonic(),
            "finished": None,
            **(extra or {}),
        }
        self.write_meta()
        self._events: IO[str] = open(self.folder.events_path, "a", encoding="utf-8")

    @classmethod
    def create(cls, plan: Plan, root: str | os.PathLike[str] | None = None, **extra: Any) -> SessionWriter:
        base = sessions_dir(root)
        base.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        slug = slugify(plan.name or plan.preset or "+".join(plan.frameworks))
        for n in range(1000):
            name = f"{stamp}_{slug}" + (f"-{n}" if n else "")
            path = base / name
            # Safe by construction (no separators, no dots at the ends); checked anyway.
            if path.resolve().parent != base.resolve():
                raise SessionError(f"refusing to write outside {base}")
            if not path.exists():
                try:
                    return cls(path, plan, extra)
                except FileExistsError:
                    continue
        raise SessionError(f"could not create a session folder in {base}")

    def write_meta(self) -> None:
        _write_json_atomic(self.folder.meta_path, self.meta)

    def update_meta(self, **fields: Any) -> None:
        self.meta.update(fields)
        self.write_meta()

    def log_path(self, run_id: str) -> Path:
        return self.folder.log_path(run_id)

    def append(self, event: dict[str, Any]) -> None:
        self._events.write(json.dumps(event, separators=(",", ":")) + "\n")
        self._events.flush()

    def append_raw(self, line: str) -> None:
        """Append one already-serialised event (no trailing newline)."""
        self._events.write(line + "\n")
        self._events.flush()

    def finish(self, status: str, summary: dict[str, Any]) -> None:
        _write_json_atomic(self.folder.summary_path, summary)
        self.update_meta(status=status, finished=_utc_now())
        self.close()

    @property
    def closed(self) -> bool:
        return self._events.closed

    def close(self) -> None:
        if not self._events.closed:
            self._events.close()


@dataclass
class LoadedSession:
    """A session read back from disk."""

    path: Path
    meta: dict[str, Any]
    plan: Plan
    model: SessionModel
    events: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def folder(self) -> SessionFolder:
        return SessionFolder(self.path)


def read_meta(path: Path) -> dict[str, Any]:
    meta_path = path / SessionFolder.META
    if not meta_path.is_file():
        raise SessionError(f"{path} is not a benchtui session (no session.json)")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SessionError(f"{meta_path} is unreadable: {exc}") from exc
    if not isinstance(meta, dict) or meta.get("kind") != "benchtui-session":
        raise SessionError(f"{path} is not a benchtui session")
    schema = meta.get("schema")
    if not isinstance(schema, int) or schema > SESSION_SCHEMA:
        raise SessionError(
            f"{path} was written with session schema {schema}; this benchtui reads up to "
            f"{SESSION_SCHEMA}: upgrade benchtui"
        )
    return meta


#: How the engine starts a GPU sample's line (json.dumps of {"type": "gpu", ...}).
GPU_LINE_PREFIX = b'{"type":"gpu",'


class GpuTail:
    """GPU sample lines held back unparsed while loading: only the newest ``maxlen`` are parsed.

    An hour of sampling is thousands of lines with nested objects; the model keeps only
    the last few hundred samples, so parsing the rest would be wasted work.
    """

    def __init__(self, maxlen: int | None) -> None:
        self.lines: deque[bytes] = deque(maxlen=maxlen)
        self.count = 0

    @property
    def dropped(self) -> int:
        """Samples seen but never parsed (older than the window)."""
        return self.count - len(self.lines)


def iter_events(path: Path, warnings: list[str], gpu_tail: GpuTail | None = None) -> Iterator[dict[str, Any]]:
    """Events of ``events.jsonl``; a half-written last line or a bad line is skipped with a warning.

    With ``gpu_tail``, GPU samples are held back and only the newest are parsed and
    yielded, after every other event (a damaged sample older than those goes uncounted).
    """
    events_path = path / SessionFolder.EVENTS
    if not events_path.exists():
        warnings.append("events.jsonl is missing: the session recorded nothing")
        return
    bad = 0
    # raw_decode on text skips json.loads' encoding detection and whitespace checks: about
    # a third faster per line, which is most of loading a long session. Anything it does
    # not take cleanly goes through json.loads, so what is accepted stays the same.
    decode = _DECODER.raw_decode
    with open(events_path, "rb", buffering=1 << 20) as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                warnings.append("the last line of events.jsonl was cut off mid-write and was skipped")
                break
            if gpu_tail is not None and raw.startswith(GPU_LINE_PREFIX):
                gpu_tail.lines.append(raw)
                gpu_tail.count += 1
                continue
            try:
                text = raw.decode("utf-8")
                event, end = decode(text)
                if end != len(text) - 1 and text[end:].strip(" \t\r\n"):
                    raise ValueError("extra data")
            except ValueError:  # JSONDecodeError, UnicodeDecodeError, extra data
                try:
                    event = json.loads(raw)
                except ValueError:
                    bad += 1
                    continue
            if isinstance(event, dict):
                yield event
            else:
                bad += 1
    for raw in gpu_tail.lines if gpu_tail is not None else ():
        try:
            event = json.loads(raw)
        except ValueError:
            bad += 1
            continue
        if isinstance(event, dict):
            yield event
        else:
            bad += 1
    if bad:
        warnings.append(f"{bad} unreadable line(s) in events.jsonl were skipped")


def load_session(path: str | os.PathLike[str], keep_events: bool = False) -> LoadedSession:
    """Read a session folder and fold its events into a fresh model."""
    return SessionFolder.open(path).load(keep_events)


def _check_plan(plan: Plan, folder: Path) -> None:
    """Refuse plans this version cannot fold (unknown ids, nonsense counts) with one line."""
    from benchtui_runners import catalog

    for label, values, known in (
        ("framework", plan.frameworks, catalog.FRAMEWORKS),
        ("model", plan.models, catalog.MODELS),
    ):
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise SessionError(f"{folder}/session.json: the plan's {label}s are not a list of names")
        for value in values:
            if value not in known:
                raise SessionError(
                    f"{folder} uses {label} {value!r}, unknown to this benchtui: upgrade benchtui"
                )
    for name in ("runs", "epochs"):
        value = getattr(plan, name)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= 100_000:
            raise SessionError(f"{folder}/session.json: the plan's {name} is {value!r}")
    if not isinstance(plan.batch_sizes, dict):
        raise SessionError(f"{folder}/session.json: the plan's batch_sizes are not a mapping")


#: A "running" session whose events were written this recently is probably still running.
LIVE_WINDOW_S = 60.0


def _unfinished(folder: Path, model: SessionModel) -> str:
    """One line on what a session that never finished lost; cut-off runs become "interrupted"."""
    try:
        age = time.time() - (folder / SessionFolder.EVENTS).stat().st_mtime
    except OSError:
        age = float("inf")
    if age < LIVE_WINDOW_S:
        return f"the session is still being written (last event {age:.0f} s ago): figures are partial"
    cut = [r for r in model.runs.values() if r.status is not RunStatus.QUEUED and not r.finished]
    queued = [r for r in model.runs.values() if r.status is RunStatus.QUEUED]
    never = len(queued)
    # The same states the engine records when a session is interrupted: the run in
    # progress is "interrupted", the runs it never reached are "skipped".
    for run in cut:
        run.status, run.reason = RunStatus.INTERRUPTED, "cut off: the session stopped during this run"
    for run in queued:
        run.status, run.reason = RunStatus.SKIPPED, "never started: the session was cut off before this run"
    where = ""
    if cut:
        run = cut[-1]
        where = f" during run {run.spec.run_id}"
        if run.current_epoch:
            where += f" (epoch {run.current_epoch} of {run.epochs_planned}, step {run.current_step})"
    lost = f"; {never} planned run(s) never started" if never else ""
    return f"the session was cut off{where} (its process was stopped or crashed){lost}"


def resolve_session(spec: str, root: str | os.PathLike[str] | None = None) -> Path:
    """A session folder from a path, or from a unique prefix of a session's folder name."""
    path = Path(spec)
    if path.is_dir():
        return path
    base = sessions_dir(root)
    if base.is_dir() and spec and "/" not in spec and "\0" not in spec and spec not in (".", ".."):
        folders = [p for p in base.iterdir() if p.is_dir()]
        # A prefix of the folder name (its timestamp) or of the name after the timestamp.
        matches = sorted(
            p for p in folders if p.name.startswith(spec) or p.name.partition("_")[2].startswith(spec)
        )
        exact = [p for p in matches if p.name == spec or p.name.partition("_")[2] == spec]
        if len(exact) == 1:
            return exact[0]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            names = ", ".join(p.name for p in matches[:5])
            raise SessionError(f"{spec!r} matches {len(matches)} sessions ({names}): give more of the name")
    raise SessionError(f"no session {spec!r} (not a folder, and no session in {base} starts with it)")


def _device_label(meta: dict[str, Any], plan: dict[str, Any], folder: Path) -> str:
    """What the session's runs trained on: the GPU's name, "cpu", or "mixed" when runs disagreed."""
    placement = meta.get("placement") if isinstance(meta.get("placement"), dict) else None
    if placement is None:  # sessions from before the launcher chose the device
        gpus = [g for g in meta.get("gpus") or [] if isinstance(g, dict)]
        device = (
            gpus[0].get("name", "GPU") if gpus and plan.get("device") != "cpu" else plan.get("device", "?")
        )
        if device == "auto":
            device = "auto (no GPU seen)" if "gpus" in meta else "auto"
        return str(device)
    gpu = placement.get("gpu") if isinstance(placement.get("gpu"), dict) else {}
    label = str(gpu.get("name") or placement.get("kind") or "?")
    try:  # the devices the runs reported, when the session has finished
        frameworks = json.loads((folder / SessionFolder.SUMMARY).read_text()).get("frameworks") or {}
        kinds = {
            str((env.get("device") or {}).get("type")) for env in frameworks.values() if isinstance(env, dict)
        }
    except (OSError, ValueError, AttributeError):
        kinds = set()
    kinds.discard("None")
    if len(kinds) > 1:
        return f"mixed: {'/'.join(sorted(kinds))}"
    return label


def list_sessions(root: str | os.PathLike[str] | None = None) -> list[dict[str, str]]:
    """One line of facts per session folder under ``root``, newest first; unreadable ones are said so."""
    base = sessions_dir(root)
    out: list[dict[str, str]] = []
    unreadable: list[dict[str, str]] = []  # listed last, with the reason
    if not base.is_dir():
        return out
    for folder in sorted((p for p in base.iterdir() if p.is_dir()), reverse=True):
        try:
            meta = read_meta(folder)
            plan = meta.get("plan", {})
            if not isinstance(plan, dict):
                raise SessionError("no usable plan")
        except SessionError as exc:
            if not (folder / SessionFolder.META).exists():
                continue  # not a session at all (a stray folder): nothing to say
            unreadable.append(
                {
                    "name": folder.name,
                    "path": str(folder),
                    "started": "",
                    "device": "",
                    "frameworks": "",
                    "models": "",
                    "status": "unreadable",
                    "label": "",
                    "error": str(exc).replace(str(folder), "").strip(),
                }
            )
            continue
        device = _device_label(meta, plan, folder)
        out.append(
            {
                "name": folder.name,
                "path": str(folder),
                "started": str(meta.get("started", "")).replace("+00:00", "").replace("T", " "),
                "device": str(device),
                "frameworks": ",".join(map(str, plan.get("frameworks") or [])),
                "models": ",".join(map(str, plan.get("models") or [])),
                "status": str(meta.get("status", "?")),
                "label": str(meta.get("name") or ""),
                "finished": str(meta.get("finished") or ""),
            }
        )
    return out + unreadable
