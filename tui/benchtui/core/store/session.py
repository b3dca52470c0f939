"""Session folders: writing them as a run goes, and loading and replaying them back.

    <UTC timestamp>_<slug>/
      session.json   schema, plan, host, provenance (benchtui version, commit, runner hash), status
      events.jsonl   append-only: every runner event tagged with its run, every GPU sample
      logs/<run>.log runner stdout/stderr
      traces/<run>.* each profiled run's raw trace (--profile; the runner adds its profiler's extension)
      summary.json   derived at the end; recomputable from events.jsonl

``SessionFolder`` is the one place that knows these paths and reads them back (with every
check); ``SessionWriter`` writes a new one.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import gc
import hashlib
import json
import math
import os
import platform
import re
import shutil
import socket
import stat
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal, overload

from benchtui.core.fmt import bytes_
from benchtui.core.model.session_model import SessionModel
from benchtui.core.model.status import RunStatus, SessionStatus
from benchtui.core.plan.options import LIMITS
from benchtui.core.plan.plan import MAX_RUNS_IN_PLAN, Plan, repeated, watch_label
from benchtui.core.provenance import (
    benchtui_version,
    cpu_model,
    provenance,
    recorded_by_other,
    runner_code_hash,
)
from benchtui.core.wire.events import (
    MAX_LINE_BYTES,
    Malformed,
    batch_of,
    check_event,
    fast_event,
    gpu_sample_of,
    loads_strict,
    prune_gpu_sample,
    scrub_surrogates,
)

SESSION_SCHEMA = 1


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# NaN and Infinity are not JSON: a line holding one is unreadable (the hook costs nothing on others).
_DECODER = json.JSONDecoder(parse_constant=_no_constant)
DEFAULT_SESSIONS_DIR = "sessions"
RESERVE_BYTES = 512 * 1024
#: The largest session.json read. A writer's is a few KB (the plan, the host, the GPUs: 3.5 KB for 4
#: frameworks x 21 models); parsed, 1 MiB of the smallest JSON values (``[{},{},...]``) is under 30 MB,
#: and ``compare`` holds two.
MAX_META_BYTES = 1 << 20
#: The largest summary.json read (only the list reads it, one folder at a time). One row per framework
#: and model: 0.8 MB for 4 frameworks x 21 models at 3 device counts; 4 MiB of ``[{},{},...]`` parses
#: into about 105 MB. Over it, the list labels the device from session.json alone.
MAX_SUMMARY_BYTES = 4 << 20
#: The longest line of events.jsonl read (its newline aside): twice the wire's MAX_LINE_BYTES. The
#: parent writes a runner's line with its run tag in front, or (a runner that sent a tag of its own)
#: re-serialised, where \u escapes double text of 3-byte characters. A longer line is one skipped
#: line. One line is parsed at a time: at worst (``[{},{},...]``) about 55 MB while it is.
MAX_EVENT_LINE_BYTES = 2 * MAX_LINE_BYTES
#: How far past that bound a line's newline is looked for (in chunks, never held): a hole of zeros
#: left by a crash, or a 20 GB sparse file, has none, and the file is read no further there.
MAX_SKIP_BYTES = 64 << 20
#: The longest GPU sample line kept while loading (the newest few hundred are held as bytes, then
#: parsed): a sampler's is about 450 bytes a GPU, so 64 KiB is a node of over a hundred GPUs.
MAX_GPU_LINE_BYTES = 64 << 10
#: Lines longer than ``LONG_LINE_BYTES`` (a traceback, a profile) that one load takes in all: parsed,
#: what a hello or a profile holds stays in the model, and the densest JSON is about 24 times its
#: text in Python objects. A session's long lines are tracebacks of failed runs (tens of KB each);
#: past the budget they are skipped and counted.
#: The largest summary.json the summary cache reads or writes (``SessionFolder.summary_cache``): a real one is
#: under it (0.8 MB for 4 frameworks x 21 models at 3 device counts); a larger one is folded as before, so
#: that no look at a session parses more than about 30 MB of the densest JSON for its cache.
MAX_CACHED_SUMMARY_BYTES = 1 << 20
LONG_LINE_BYTES = 64 << 10
LONG_LINES_BUDGET = 4 << 20
#: Most batch events ``iter_events`` gathers into one list for the load (``batches``): a few hundred KB.
BATCH_RUN = 4096


class SessionError(ValueError):
    """A folder that is not a readable session; the message is one line for the user."""


class StorageError(SessionError):
    """A session that cannot be written (a full disk, a read-only folder); one line for the user."""


_STORAGE_WORDS = {
    errno.ENOSPC: "disk full",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EIO: "I/O error",
    errno.ENOTDIR: "not a folder",
    errno.EEXIST: "a file is in the way",
}


def storage_problem(exc: OSError) -> str:
    """A failed write in a few words: "disk full", "read-only file system", ..."""
    return _STORAGE_WORDS.get(exc.errno or 0) or (exc.strerror or str(exc)).lower()


def _what_is(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path: Path, buffering: int = -1) -> BinaryIO | None:
    """``path`` opened for reading if it is a regular file; None for a FIFO, a device, a folder.

    Opened without following a link at its end (O_NOFOLLOW: the open fails) and without waiting
    (O_NONBLOCK: a FIFO would block its reader for good); what is opened is checked with fstat, so
    nothing can be swapped in between. Raises OSError when it cannot be opened.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags | getattr(os, "O_BINARY", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb", buffering=buffering)


def open_session_file(path: Path) -> BinaryIO | None:
    """A file of a session folder opened for reading (``open_regular``); None when there is nothing at
    ``path``. A session folder can come from anyone: anything but a regular file, a link included (even
    to a file: a writer never makes one), is a SessionError that says what is there."""
    try:
        fh = open_regular(path, buffering=1 << 20)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if path.is_symlink():  # ELOOP (EMLINK on some BSDs): O_NOFOLLOW met a link
            raise SessionError(
                f"{path} is a link, not a file (links in a session folder are not followed)"
            ) from exc
        what = "a socket" if exc.errno == errno.ENXIO else storage_problem(exc)
        raise SessionError(f"{path} cannot be read: {what}") from exc
    if fh is None:
        try:
            what = _what_is(os.lstat(path).st_mode)
        except OSError:  # gone meanwhile
            what = "not a regular file"
        raise SessionError(f"{path} is {what}, not a file")
    return fh


def read_json_file(path: Path, limit: int, parse: Callable[[bytes], Any] = loads_strict) -> Any:
    """A session's JSON file (session.json, summary.json), parsed by ``parse``.

    None when there is none; SessionError (one line) for anything but a regular file of at most
    ``limit`` bytes holding JSON. ``loads_strict`` (the default) takes no NaN, no key twice, no
    nesting past the interpreter's limit, no integer longer than Python converts, and replaces lone
    surrogates; it is several times slower than ``json.loads`` on a file of many small objects.
    """
    fh = open_session_file(path)
    if fh is None:
        return None
    with fh:
        try:
            size = os.fstat(fh.fileno()).st_size
            data = fh.read(limit + 1) if size <= limit else b""
        except OSError as exc:
            raise SessionError(f"{path} cannot be read: {storage_problem(exc)}") from exc
    if size > limit or len(data) > limit:
        size = max(size, len(data))
        raise SessionError(f"{path} is {bytes_(size)}, more than the {bytes_(limit)} a session's file may be")
    try:
        return parse(data)
    except ValueError as exc:  # Malformed, or what json.loads raises
        raise SessionError(f"{path} is unreadable: {exc}") from exc
    except RecursionError as exc:  # nesting the parser took, too deep for what walks it after
        raise SessionError(f"{path} is unreadable: nested too deeply") from exc


def usable_sessions_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """The sessions folder, created if missing and checked writable; StorageError (one line) if not.

    Called before anything starts, so a folder that cannot hold a session stops nothing midway.
    """
    base = sessions_dir(path)
    try:
        if base.exists() and not base.is_dir():
            raise StorageError(f"the sessions folder {base} is a file, not a folder")
        base.mkdir(parents=True, exist_ok=True)
        probe = base / f".benchtui-write-test-{os.getpid()}"
        try:
            with open(probe, "wb") as fh:
                fh.write(b"x")
        finally:
            with contextlib.suppress(OSError):
                probe.unlink()
    except OSError as exc:
        raise StorageError(f"cannot write sessions in {base}: {storage_problem(exc)}") from exc
    return base


def json_safe(value: Any) -> Any:
    """``value`` with every NaN or infinity made None: what strict JSON parsers can read."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def slugify(name: str, limit: int = 60) -> str:
    """A safe folder-name fragment: lowercase letters, digits, '-', '_' and '.' inside."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._")
    slug = re.sub(r"-{2,}", "-", slug)
    return slug[:limit].strip("-._") or "session"


def user_sessions_dir() -> Path:
    """The user's own sessions folder, the platform's data folder's: $XDG_DATA_HOME/benchtui/sessions
    (~/.local/share/benchtui/sessions where XDG_DATA_HOME is unset or relative), on macOS
    ~/Library/Application Support/benchtui/sessions, on Windows %LOCALAPPDATA%\\benchtui\\sessions."""
    home = Path.home()
    if sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
    else:
        xdg = os.environ.get("XDG_DATA_HOME", "")
        base = Path(xdg) if os.path.isabs(xdg) else home / ".local" / "share"
    return base / "benchtui" / "sessions"


def sessions_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """The sessions folder: ``path`` (--sessions-dir), else $BENCHTUI_SESSIONS_DIR, else ./sessions where
    that folder exists (a project's own), else the user's (``user_sessions_dir``), so that every command
    finds the same sessions from any folder."""
    named = path or os.environ.get("BENCHTUI_SESSIONS_DIR")
    if named:
        return Path(named)
    local = Path(DEFAULT_SESSIONS_DIR)
    return local if local.is_dir() else user_sessions_dir()


def sessions_dir_words(path: str | os.PathLike[str] | None = None) -> str:
    """The sessions folder as a message names it: its absolute path, and how it was chosen where the user
    named none ('/home/u/.local/share/benchtui/sessions (the user's folder: no ./sessions in /tmp/x)')."""
    base = sessions_dir(path)
    where = os.path.abspath(base)
    if path:
        return where
    if os.environ.get("BENCHTUI_SESSIONS_DIR"):
        return f"{where} (BENCHTUI_SESSIONS_DIR)"
    if base == Path(DEFAULT_SESSIONS_DIR):
        return where
    return (
        f"{where} (the user's folder: there is no ./{DEFAULT_SESSIONS_DIR} in {os.path.abspath(os.curdir)})"
    )


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
    """Write strict JSON (no NaN) through a temporary file: the old file stays whole if this fails."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    text = json.dumps(json_safe(data), indent=2, sort_keys=False, allow_nan=False) + "\n"
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


class SessionFolder:
    """One session's folder: every path in it, its checked session.json and plan, its events."""

    META = "session.json"
    EVENTS = "events.jsonl"
    SUMMARY = "summary.json"
    #: The summary cache's key (issue 35): what summary.json was folded from (events.jsonl's size and mtime,
    #: the code), beside it, so summary.json stays the summary and nothing else.
    SUMMARY_CACHE = "summary-cache.json"
    LOGS = "logs"
    TRACES = "traces"
    RESERVE = ".reserve"

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
    def summary_cache_path(self) -> Path:
        return self.path / self.SUMMARY_CACHE

    @property
    def reserve_path(self) -> Path:
        """Space a writer holds for its last writes (removed when it finishes)."""
        return self.path / self.RESERVE

    @property
    def logs_dir(self) -> Path:
        return self.path / self.LOGS

    def log_path(self, run_id: str) -> Path:
        """A runner's (or probe's) stdout and stderr."""
        return self.logs_dir / f"{run_id}.log"

    @property
    def traces_dir(self) -> Path:
        """Profiled runs' raw traces (``--profile``); only sessions that profile have the folder."""
        return self.path / self.TRACES

    def trace_path(self, run_id: str) -> Path:
        """Where a profiled run writes its trace, without an extension: the runner adds its profiler's."""
        return self.traces_dir / run_id

    def trace_file(self, name: object) -> Path | None:
        """The trace a ``profile`` event names (a file name in traces/), or None for anything that is not
        a plain file name: the event comes from a runner or a file, and must not point elsewhere."""
        if not isinstance(name, str) or name in ("", ".", "..") or any(c in name for c in "/\\\0"):
            return None
        return self.traces_dir / name

    # -- reading ----------------------------------------------------------------------------
    def read_meta(self, warnings: list[str] | None = None) -> dict[str, Any]:
        """session.json, checked: a benchtui session of a schema this version reads (see ``read_meta``)."""
        return read_meta(self.path, warnings)

    def read_plan(self, meta: dict[str, Any] | None = None) -> Plan:
        """The session's plan, checked: every framework and model known, counts that make sense."""
        meta = self.read_meta() if meta is None else meta
        try:
            plan = Plan.from_dict(meta["plan"])
        except (KeyError, TypeError, AttributeError) as exc:
            raise SessionError(f"{self.meta_path} has no usable plan ({exc})") from exc
        _check_plan(plan, self.path)
        return plan

    def events(
        self, warnings: list[str], gpu_tail: GpuTail | None = None, check: EventCheck | None = None
    ) -> Iterator[dict[str, Any]]:
        """events.jsonl's events, damaged lines skipped with a warning (see ``iter_events``)."""
        return iter_events(self.path, warnings, gpu_tail, check)

    def gpu_samples(self) -> list[dict[str, Any]]:
        """Every GPU/host sample, in order; only lines that can be samples are parsed (most are batches)."""
        out: list[dict[str, Any]] = []
        try:
            fh = open_session_file(self.events_path)
        except SessionError:  # not a file: loading has said so (``iter_events``)
            return out
        if fh is None:
            return out
        skipped = EventCheck()  # counted by loading already
        with fh, contextlib.suppress(OSError), no_gc_passes():
            fh.seek(_samples_of_blocks(fh, out, skipped))
            for raw in event_lines(fh):  # what the blocks left: from a line they could not hold whole
                if not raw.endswith(b"\n"):  # cut off mid-write, or longer than a writer writes
                    if len(raw) > MAX_EVENT_LINE_BYTES and _skip_rest(fh):
                        continue
                    break  # loading said so
                if b'"gpu"' not in raw or len(raw) > MAX_GPU_LINE_BYTES:  # a longer one: loading counted it
                    continue
                if (sample := _gpu_sample(raw, skipped)) is not None:
                    out.append(sample)
        return out

    # -- the summary cache ----------------------------------------------------------------------
    def events_stamp(self) -> tuple[int, int] | None:
        """events.jsonl's size and modification time (ns), what a cached summary was folded from; None
        when it is not a regular file (nothing is cached of it)."""
        try:
            st = os.lstat(self.events_path)
        except OSError:
            return None
        return (st.st_size, st.st_mtime_ns) if stat.S_ISREG(st.st_mode) else None

    def summary_cache(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """summary.json's summary and its cache entry (summary-cache.json) when they still hold: the session
        finished, its events.jsonl has the size and mtime the summary was folded from, and this code folds
        and summarises as the code that wrote it (``summary_code``). None otherwise (the caller folds), never
        an error."""
        try:
            cache = read_json_file(self.summary_cache_path, MAX_CACHED_SUMMARY_BYTES)
            if not isinstance(cache, dict):
                return None
            data = read_json_file(self.summary_path, MAX_CACHED_SUMMARY_BYTES)
            if not isinstance(data, dict):
                return None
            if cache.get("code") != summary_code() or self.read_meta().get("status") not in FINISHED:
                return None
        except SessionError:
            return None
        stamp = self.events_stamp()
        if stamp is None or [cache.get("events_size"), cache.get("events_mtime_ns")] != list(stamp):
            return None
        summary = cache.get("summary", data)
        warnings = cache.get("warnings", [])  # the writer's cache has none: a load's adds them
        if not isinstance(summary, dict) or not isinstance(warnings, list):
            return None
        if not all(isinstance(w, str) for w in warnings):
            return None
        return summary, cache

    def cached_summary(self) -> dict[str, Any] | None:
        """summary.json's summary when it still holds for events.jsonl and this code (``summary_cache``),
        as ``SessionModel.summary()`` gives it after JSON; None: fold the events as before."""
        hit = self.summary_cache()
        return hit[0] if hit is not None else None

    def cached_warnings(self) -> list[str] | None:
        """What loading the session said (``LoadedSession.warnings``) when a load cached its summary; None
        without a cache that holds, or with the writer's (which has not loaded the file)."""
        hit = self.summary_cache()
        return list(hit[1]["warnings"]) if hit is not None and "warnings" in hit[1] else None

    def write_summary_cache(
        self, summary: dict[str, Any], warnings: list[str], stamp: tuple[int, int] | None
    ) -> bool:
        """Record beside summary.json (summary-cache.json) that ``summary`` (``SessionModel.summary()`` of a
        load) is what events.jsonl folds into while its size and mtime are ``stamp`` (taken before that load
        read it). summary.json stays as the writer wrote it; when the load's summary differs (the writer's
        live model saw what the file does not), the load's is kept in the cache entry. Only a finished
        session whose events are as they were and whose summary.json exists; False when nothing was
        written (a read-only folder included)."""
        if stamp is None or self.events_stamp() != stamp:
            return False
        try:
            if self.read_meta().get("status") not in FINISHED:
                return False
            data = read_json_file(self.summary_path, MAX_CACHED_SUMMARY_BYTES)
        except SessionError:
            return False
        if not isinstance(data, dict):
            return False
        fresh = json.loads(json.dumps(json_safe(summary), allow_nan=False))
        cache: dict[str, Any] = {
            "events_size": stamp[0],
            "events_mtime_ns": stamp[1],
            "code": summary_code(),
            "warnings": list(warnings),
        }
        if data != fresh:
            cache["summary"] = fresh
        try:
            if read_json_file(self.summary_cache_path, MAX_CACHED_SUMMARY_BYTES) == cache:
                return True
        except SessionError:
            pass  # none yet, or one that is not a cache entry: written anew
        try:
            _write_json_atomic(self.summary_cache_path, cache)
        except (OSError, ValueError):
            return False
        return True

    def load(self, keep_events: bool = False) -> LoadedSession:
        """Fold the events into a fresh model; warnings say what was skipped, cut off or recorded by other code."""
        stamp = self.events_stamp()
        warnings: list[str] = []
        meta = read_meta(self.path, warnings)
        plan = self.read_plan(meta)
        host = meta.get("host")
        model = SessionModel(plan, host=host if isinstance(host, dict) else None)
        other = recorded_by_other(meta.get("benchtui"))
        if other:
            warnings.append(other)
        kept: list[dict[str, Any]] = []
        # Without keep_events only the model's window of GPU samples is parsed (same model).
        tail = None if keep_events else GpuTail(model.gpu_samples.maxlen)
        check = EventCheck()
        # Batch lines come as lists of the wire's Struct (``batch_of``), folded from their fields (a million in
        # a long session: no dict is made of them); every other event, and every batch with keep_events, as a
        # dict.
        apply, fold_batches = model.apply, model.fold_batches
        for event in iter_events(self.path, warnings, tail, check, batches=not keep_events):
            if isinstance(event, list):
                fold_batches(event)
                continue
            apply(event)
            if keep_events:
                kept.append(event)
        if tail is not None:
            model.events += tail.dropped
        warnings += self.settle(meta, model, check)
        return LoadedSession(self.path, meta, plan, model, kept, warnings, stamp)

    def settle(self, meta: dict[str, Any], model: SessionModel, check: EventCheck) -> list[str]:
        """After every event is folded: what the file lost, said; runs that cannot go on, ended.

        A "running" session whose writer is gone becomes "abandoned"; in a session that never
        finished, or a finished one whose file lacks lines, no run is left pending or running.
        Loading and the end of a replay both call this, so both show the same.
        """
        status = meta.get("status")
        if status == "running":
            if writer_alive(meta.get("writer")) is False:
                meta["status"] = "abandoned"
                return [_unfinished(self.path, model, abandoned=True)]
            return [_unfinished(self.path, model)]
        if status in FINISHED:
            return _lost_lines(meta, model, check)
        return []


#: The words session.json's status may hold ("pending" is only ever in memory).
SESSION_STATUSES = frozenset(SessionStatus) - {SessionStatus.PENDING}
#: The session statuses a writer records when it is done.
FINISHED = SESSION_STATUSES - {SessionStatus.RUNNING, SessionStatus.ABANDONED}


def _lost_lines(meta: dict[str, Any], model: SessionModel, check: EventCheck) -> list[str]:
    """A finished session whose events.jsonl lacks lines (cut at a line boundary, lines deleted).

    Sessions from this version end with a ``session_end`` line holding the line count; every
    session's runs must have ended. A run that did not is marked "interrupted", never left pending.
    """
    out: list[str] = []
    end = check.end
    if end is not None and end["lines"] > check.lines:
        out.append(
            f"events.jsonl has {check.lines} line(s) where its writer wrote {end['lines']}: "
            f"{end['lines'] - check.lines} line(s) are missing, figures may lack what they held"
        )
    elif end is None and "writer" in meta:  # written by a version that ends its file so
        out.append("events.jsonl ends early (its last line is missing): the file was cut")
    cut = [r for r in model.runs.values() if not r.finished]
    for run in cut:
        run.status, run.reason = RunStatus.INTERRUPTED, "its end is missing from events.jsonl"
    if cut:
        out.append(
            f"{len(cut)} run(s) have no end in events.jsonl (first: {cut[0].spec.run_id}): "
            "they show as interrupted"
        )
    for run in model.runs.values():
        missing = run.missing_epochs()
        if missing and run.status is RunStatus.OK:
            out.append(
                f"run {run.spec.run_id}: epoch {', '.join(map(str, missing))} missing from events.jsonl; "
                "its figures leave the missing epoch(s) out"
            )
    return out


def _process_started(pid: int) -> float | None:
    """When process ``pid`` started (seconds since boot, from /proc), to tell it from a later one with its pid."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def writer_identity() -> dict[str, Any]:
    """Who writes a session: enough to tell later whether that process is still alive."""
    pid = os.getpid()
    return {"pid": pid, "hostname": socket.gethostname(), "process_started": _process_started(pid)}


def writer_alive(writer: object) -> bool | None:
    """Whether the process that wrote a session is alive: None when that cannot be told (another host)."""
    if not isinstance(writer, dict) or writer.get("hostname") != socket.gethostname():
        return None
    pid = writer.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    except OSError:
        return None
    started = writer.get("process_started")
    if isinstance(started, (int, float)) and (now := _process_started(pid)) is not None:
        return abs(now - started) < 1.0  # the same pid, a later process: the writer is gone
    return True


class SessionWriter:
    """Writes one session folder. Events are appended and flushed line by line.

    A write that fails (a full disk, an I/O error) raises StorageError once and leaves the
    writer ``failure`` set; later writes are dropped, and ``finish`` records what it still can.
    """

    def __init__(
        self, path: Path, plan: Plan, extra: dict[str, Any] | None = None, started: datetime | None = None
    ) -> None:
        self.path = path
        self.folder = SessionFolder(path)
        self.folder.logs_dir.mkdir(parents=True, exist_ok=False)
        self.failure = ""  # what made a write fail ("disk full: ..."); "" while every write worked
        self.lines = 0  # lines appended to events.jsonl: session_end records it, a reader checks it
        self.meta: dict[str, Any] = {
            "schema": SESSION_SCHEMA,
            "kind": "benchtui-session",
            "name": plan.name or path.name,
            "plan": plan.to_dict(),
            "host": host_info(),
            "benchtui": provenance(),
            "status": "running",
            # The instant the folder's id was stamped with, so that the two never disagree by a second.
            "started": (started or datetime.now(timezone.utc)).isoformat(timespec="seconds"),
            "started_monotonic": time.monotonic(),
            "finished": None,
            "writer": writer_identity(),
            **(extra or {}),
        }
        self.write_meta()
        self._events: IO[str] = open(self.folder.events_path, "a", encoding="utf-8")
        # Room kept for the end: when the disk fills up, this is freed so that summary.json and
        # the "failed: disk full" status can still be written.
        with open(self.folder.reserve_path, "wb") as fh:
            fh.write(bytes(RESERVE_BYTES))

    @classmethod
    def create(cls, plan: Plan, root: str | os.PathLike[str] | None = None, **extra: Any) -> SessionWriter:
        """A new session folder under ``root``; StorageError (one line) when none can be written."""
        base = usable_sessions_dir(root)
        now = datetime.now(timezone.utc)
        stamp = now.strftime("%Y%m%dT%H%M%SZ")
        slug = slugify(plan.name or plan.preset or ("watch" if plan.watch else "+".join(plan.frameworks)))
        for n in range(1000):
            name = f"{stamp}_{slug}" + (f"-{n}" if n else "")
            path = base / name
            # Safe by construction (no separators, no dots at the ends); checked anyway.
            if path.resolve().parent != base.resolve():
                raise SessionError(f"refusing to write outside {base}")
            if not path.exists():
                try:
                    return cls(path, plan, extra, started=now)
                except FileExistsError:
                    continue
                except (OSError, StorageError) as exc:
                    shutil.rmtree(path, ignore_errors=True)  # nothing half-made left behind
                    why = storage_problem(exc) if isinstance(exc, OSError) else str(exc)
                    raise StorageError(f"cannot write a session in {base}: {why}") from exc
        raise SessionError(f"could not create a session folder in {base}")

    def failed_write(self, exc: OSError, what: str) -> StorageError:
        """Record the first failed write (``failure``) and return the one-line error that says it."""
        if not self.failure:
            self.failure = f"{storage_problem(exc)} while writing {what}"
        return StorageError(f"{self.failure} in {self.path}")

    def write_meta(self) -> None:
        try:
            _write_json_atomic(self.folder.meta_path, self.meta)
        except OSError as exc:
            raise self.failed_write(exc, SessionFolder.META) from exc

    def update_meta(self, **fields: Any) -> None:
        self.meta.update(fields)
        self.write_meta()

    def log_path(self, run_id: str) -> Path:
        return self.folder.log_path(run_id)

    def trace_path(self, run_id: str) -> Path:
        """Where a profiled run writes its trace (absolute: the runner starts in the session folder),
        its folder made; OSError when it cannot be."""
        self.folder.traces_dir.mkdir(exist_ok=True)
        return self.folder.trace_path(run_id).absolute()

    def append(self, event: dict[str, Any]) -> None:
        self.append_raw(json.dumps(json_safe(event), separators=(",", ":"), allow_nan=False))

    def append_raw(self, line: str) -> None:
        """Append one already-serialised event (no trailing newline); dropped once a write has failed."""
        if self.failure:
            return
        try:
            self._events.write(line + "\n")
            self._events.flush()
        except OSError as exc:
            raise self.failed_write(exc, SessionFolder.EVENTS) from exc
        self.lines += 1

    def finish(self, status: str, summary: dict[str, Any]) -> None:
        """The last line of events.jsonl, summary.json and the final status: each as far as the disk lets.

        After a failed write the session is recorded "failed" with the reason in ``failure``
        (when session.json can still be written); nothing raises from here.
        """
        with contextlib.suppress(OSError):
            self.folder.reserve_path.unlink()  # its space is the room for what follows on a full disk
        end = {
            "type": "session_end",
            "t": time.monotonic(),
            "run": None,
            "lines": self.lines + 1,
            "status": status,
        }
        steps: tuple[Callable[[], object], ...] = (
            lambda: self.append(end),
            lambda: _write_json_atomic(self.folder.summary_path, summary),
            lambda: self._write_cache(status, summary),
        )
        for step in steps:
            if self.failure:
                break
            try:
                step()
            except StorageError:
                pass
            except OSError as exc:
                self.failed_write(exc, SessionFolder.SUMMARY)
        fields: dict[str, Any] = {"status": "failed" if self.failure else status, "finished": _utc_now()}
        if self.failure:
            fields["failure"] = self.failure
        self.meta.update(fields)
        with contextlib.suppress(StorageError):
            self.write_meta()
        self.close()

    def _write_cache(self, status: str, summary: dict[str, Any]) -> None:
        """summary.json's cache entry (``SessionFolder.cached_summary``) when the session is complete: every
        run ended, so what its live model summarised is what the file folds into (a load recomputes it the
        same). events.jsonl is whole (its last line flushed) when this is called. A cache is a convenience:
        one that cannot be written is no failure of the session (it is folded when read)."""
        stamp = self.folder.events_stamp()
        if status != SessionStatus.COMPLETE or self.failure or "rows" not in summary or stamp is None:
            return
        cache = {"events_size": stamp[0], "events_mtime_ns": stamp[1], "code": summary_code()}
        with contextlib.suppress(OSError, ValueError):
            _write_json_atomic(self.folder.summary_cache_path, cache)

    @property
    def closed(self) -> bool:
        return self._events.closed

    def close(self) -> None:
        if not self._events.closed:
            try:
                self._events.close()
            except OSError as exc:  # the last buffered bytes could not be written
                self.failed_write(exc, SessionFolder.EVENTS)


@dataclass
class LoadedSession:
    """A session read back from disk."""

    path: Path
    meta: dict[str, Any]
    plan: Plan
    model: SessionModel
    events: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: events.jsonl's (size, mtime ns) before it was read: what the summary cache is keyed on.
    events_stamp: tuple[int, int] | None = None

    @property
    def folder(self) -> SessionFolder:
        return SessionFolder(self.path)

    def summary(self) -> dict[str, Any]:
        """``SessionModel.summary()`` as summary.json holds it (after JSON), cached: a finished session's
        summary is written into its summary.json's ``cache`` once computed (``write_summary_cache``), and
        read from there while events.jsonl and the code stay the same. The writer's entry (a session that ended
        "complete": it never read the file back) gains this load's warnings, which makes it a load's: the one
        the views' light load reads (``reporting.light``), so show and compare skip the batch lines from then on."""
        folder = self.folder
        hit = folder.summary_cache()
        if hit is not None:
            if "warnings" not in hit[1]:
                folder.write_summary_cache(hit[0], self.warnings, self.events_stamp)
            return hit[0]
        summary = self.model.summary()
        self.folder.write_summary_cache(summary, self.warnings, self.events_stamp)
        normal: dict[str, Any] = json.loads(json.dumps(json_safe(summary), allow_nan=False))
        return normal


#: The packages whose code decides a summary's figures: reading, checking, folding, summarising.
_SUMMARY_PACKAGES = ("model", "wire", "store", "plan")


@functools.cache
def summary_code() -> str:
    """Which code folded and summarised a cached summary: a hash of benchtui's version, the parent's
    reading, checking, folding and summarising code (``_SUMMARY_PACKAGES``) and the runner package's
    (its wire and catalog). Any change to them makes every cached summary stale."""
    core = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256(f"{benchtui_version()}\0{runner_code_hash()}\0".encode())
    for package in _SUMMARY_PACKAGES:
        for path in sorted((core / package).rglob("*.py")):
            digest.update(path.relative_to(core).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


#: session.json's fields that views read, and the type each must have: a field of another type
#: (a hand edit, another tool) is dropped with a warning, so no view meets it.
META_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "host": (dict,),
    "gpus": (list,),
    "gpus_end": (list,),
    "placement": (dict,),
    "telemetry": (str,),
    "benchtui": (dict,),
    "status": (str,),
    "started": (str,),
    "finished": (str, type(None)),
    "started_monotonic": (int, float),
    "writer": (dict,),
    "failure": (str,),
}


def read_meta(path: Path, warnings: list[str] | None = None) -> dict[str, Any]:
    """session.json, checked: a benchtui session of a schema this version reads, its fields of their types."""
    meta = read_json_file(path / SessionFolder.META, MAX_META_BYTES)
    if meta is None:
        raise SessionError(f"{path} is not a benchtui session (no session.json)")
    if not isinstance(meta, dict) or meta.get("kind") != "benchtui-session":
        raise SessionError(f"{path} is not a benchtui session")
    schema = meta.get("schema")
    if not isinstance(schema, int) or schema > SESSION_SCHEMA:
        raise SessionError(
            f"{path} was written with session schema {schema}; this benchtui reads up to "
            f"{SESSION_SCHEMA}: upgrade benchtui"
        )
    dropped = [k for k, types in META_TYPES.items() if k in meta and not isinstance(meta[k], types)]
    for key in ("gpus", "gpus_end"):
        if key in meta and key not in dropped and not all(isinstance(g, dict) for g in meta[key]):
            dropped.append(key)
    for key in dropped:
        del meta[key]
    if "status" in meta and meta["status"] not in SESSION_STATUSES:
        dropped.append("status")
        meta["status"] = "incomplete"  # a word no view knows: shown as what it is, not finished whole
    if dropped and warnings is not None:
        warnings.append(f"session.json: {', '.join(dropped)} had the wrong type and were ignored")
    return meta


@contextlib.contextmanager
def no_gc_passes() -> Iterator[None]:
    """The cyclic garbage collector paused (as it was, after). A pass that keeps every sample of a file
    makes a few hundred thousand small dicts and lists that live on, none in a cycle: each collection
    walks all of them again (a third of ``gpu_samples``' time on a session of a million events, and a
    quarter of drawing the html's plots of them). What such a pass leaves in a cycle is collected later."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


#: How much of events.jsonl ``gpu_samples`` searches at a time for sample lines.
GPU_SCAN_BYTES = 4 << 20


def _samples_of_blocks(fh: BinaryIO, out: list[dict[str, Any]], skipped: EventCheck) -> int:
    """The samples of ``fh``'s whole lines, read a block at a time and appended to ``out``; the offset of
    the first line left to ``gpu_samples``' line-by-line reading (the file's end when none is).

    Nine lines in ten of a run are batches: the lines that hold '"gpu"' are found by searching the
    block, not by splitting it into lines and testing each. A line whose newline is in a block is the
    line ``event_lines`` reads there: one over ``MAX_EVENT_LINE_BYTES`` is read past the same way (no
    block is longer than that and ``MAX_SKIP_BYTES``: its newline is within the skip), and a line over
    ``MAX_GPU_LINE_BYTES`` (or read past) is passed over by both. What a block does not end (a line cut off at the file's end, one with no newline within a
    block) and a failed read are left to the line-by-line reading, which does what it always did there.
    """
    offset, rest = 0, b""
    while True:
        try:
            data = fh.read(GPU_SCAN_BYTES)
        except OSError:
            return offset
        block = rest + data
        end = block.rfind(b"\n") + 1  # the block's whole lines
        if not end or len(block) > MAX_EVENT_LINE_BYTES + 1 + MAX_SKIP_BYTES:
            return offset
        start = 0  # always a line's first byte
        while (at := block.find(b'"gpu"', start, end)) >= 0:
            first = block.rfind(b"\n", start, at) + 1 or start
            last = block.index(b"\n", at) + 1
            if (
                last - first <= min(MAX_GPU_LINE_BYTES, MAX_EVENT_LINE_BYTES + 1)
                and (sample := _gpu_sample(block[first:last], skipped)) is not None
            ):
                out.append(sample)
            start = last
        offset += end
        rest = block[end:]


def _gpu_sample(raw: bytes, skipped: EventCheck) -> dict[str, Any] | None:
    """The sample of a line that holds '"gpu"', pruned (``prune_gpu_sample``); None when it is none."""
    if (sample := gpu_sample_of(raw)) is not None:  # the sampler's own: nothing to prune, no copy
        return sample
    try:
        event = fast_event(raw)
    except Malformed:
        return None
    if event is None:
        event = _event_of(raw, _DECODER.raw_decode, skipped)
    if event is not None and event["type"] == "gpu" and isinstance(event.get("t"), (int, float)):
        return prune_gpu_sample(event)  # the sampler's fields: a plot's worth, not a file's
    return None


#: How the engine starts a GPU sample's line (json.dumps of {"type": "gpu", ...}).
GPU_LINE_PREFIX = b'{"type":"gpu",'


class GpuTail:
    """GPU sample lines held back unparsed while loading: only the newest ``maxlen`` are parsed.

    An hour of sampling is thousands of lines with nested objects; the model keeps only
    the last few hundred samples, so parsing the rest would be wasted work.
    """

    def __init__(self, maxlen: int | None) -> None:
        self.lines: deque[tuple[int, bytes]] = deque(maxlen=maxlen)  # (line number, the line)
        self.count = 0

    @property
    def dropped(self) -> int:
        """Samples seen but never parsed (older than the window)."""
        return self.count - len(self.lines)


class EventCheck:
    """What reading events.jsonl skipped, and why: one warning line at the end."""

    def __init__(self) -> None:
        self.bad = 0
        self.first = ""  # the first skipped line's number and reason
        self.lines = 0  # complete lines read
        self.end: dict[str, Any] | None = None  # the session_end event, when the writer finished
        self.long_bytes = 0  # bytes of lines over LONG_LINE_BYTES taken so far (LONG_LINES_BUDGET)

    def skip(self, why: str, line: int = 0) -> None:
        """One unusable line: the one being read, or ``line`` (a sample held back and parsed last)."""
        self.bad += 1
        if not self.first:
            self.first = f"line {line or self.lines}: {why}"

    def warning(self) -> str:
        return f"{self.bad} unreadable line(s) in events.jsonl were skipped (first, {self.first})"


def _parsed(raw: bytes, decode: Any) -> Any:
    """One line's JSON value; ValueError (not JSON, not UTF-8) or RecursionError when it has none."""
    try:
        text = raw.decode("utf-8")
        value, end = decode(text)
        if end != len(text) - 1 and text[end:].strip(" \t\r\n"):
            raise ValueError("extra data")
    except ValueError:  # JSONDecodeError, UnicodeDecodeError, extra data: what json.loads says of it
        value = json.loads(raw, parse_constant=_no_constant)
    return value


def event_lines(fh: BinaryIO) -> Iterator[bytes]:
    """The lines of an open events.jsonl, newline included, none longer than ``MAX_EVENT_LINE_BYTES``.

    A line that does not end with a newline was cut mid-write (the last one), or is longer than the
    bound (``_skip_rest`` reads past it): it is never read into memory whole, a 20 GB hole of zeros
    included. ``readline`` with a size, called from C: as fast as iterating the file.
    """
    return iter(functools.partial(fh.readline, MAX_EVENT_LINE_BYTES + 1), b"")


def _skip_rest(fh: BinaryIO) -> bool:
    """Read past the rest of an over-long line, a chunk at a time; False when no newline (nor the
    file's end) came within ``MAX_SKIP_BYTES``."""
    left = MAX_SKIP_BYTES
    while left > 0:
        chunk = fh.readline(min(left, 1 << 20))
        if not chunk or chunk.endswith(b"\n"):
            return True
        left -= len(chunk)
    return False


#: ``_event_of``'s line has not been parsed yet.
_NOT_PARSED: Any = object()


def _event_of(
    raw: bytes, decode: Any, check: EventCheck, line: int = 0, event: Any = _NOT_PARSED
) -> dict[str, Any] | None:
    """One line's event (``event``: the line already parsed, whole), checked and its lone surrogates
    replaced; None (counted in ``check``, as line ``line`` when it is not the one being read) when unusable."""
    try:
        if event is _NOT_PARSED:
            try:
                event = _parsed(raw, decode)
            except ValueError as exc:  # not JSON (an integer over Python's 4,300 digits too), not UTF-8
                check.skip("not UTF-8" if isinstance(exc, UnicodeDecodeError) else "not JSON", line)
                return None
        if not isinstance(event, dict):
            check.skip("not an event object", line)
            return None
        if event.get("type") == "batch":  # check_event scrubs the rest; a batch it passes as it is
            event = scrub_surrogates(event)  # may still carry a field of its own with a surrogate
        return check_event(event)
    except Malformed as exc:
        check.skip(str(exc), line)
        return None
    except RecursionError:  # nested deeper than the parser, or what walks the value after it, can go
        check.skip("nested too deeply", line)
        return None


@overload
def iter_events(
    path: Path,
    warnings: list[str],
    gpu_tail: GpuTail | None = None,
    check: EventCheck | None = None,
    batches: Literal[False] = False,
) -> Iterator[dict[str, Any]]: ...


@overload
def iter_events(
    path: Path, warnings: list[str], gpu_tail: GpuTail | None, check: EventCheck | None, batches: bool
) -> Iterator[dict[str, Any] | list[Any]]: ...


def iter_events(
    path: Path,
    warnings: list[str],
    gpu_tail: GpuTail | None = None,
    check: EventCheck | None = None,
    batches: bool = False,
) -> Iterator[dict[str, Any] | list[Any]]:
    """Events of ``events.jsonl``, each checked as a runner's line is (``check_event``).

    ``batches``: batch lines that ``batch_of`` vouches for come as its Structs (the wire's batch event's
    fields), not dicts: a list of those in a row (at most ``BATCH_RUN``), yielded before the next event;
    for the load, which folds them from their fields (``SessionModel.fold_batches``).

    A half-written last line, a line that is not JSON and an event whose fields are out of
    type or range are skipped, counted and said in one warning. With ``gpu_tail``, GPU samples
    are held back and only the newest are parsed and yielded, after every other event (a
    damaged sample older than those goes uncounted). An events.jsonl that is not a regular file
    is not read (a warning says what it is); a line longer than ``MAX_EVENT_LINE_BYTES`` is one
    skipped line, and one with no newline within ``MAX_SKIP_BYTES`` ends the reading (``event_lines``).
    """
    try:
        fh = open_session_file(path / SessionFolder.EVENTS)
    except SessionError as exc:
        warnings.append(f"{exc}: no event was read")
        return
    if fh is None:
        warnings.append("events.jsonl is missing: the session recorded nothing")
        return
    check = check or EventCheck()
    # raw_decode on text skips json.loads' encoding detection and whitespace checks: about
    # a third faster per line, which is most of loading a long session. Anything it does
    # not take cleanly goes through json.loads, so what is accepted stays the same.
    decode = _DECODER.raw_decode
    gathered: list[Any] = []  # batch events in a row (``batches``), not yielded yet
    with fh:
        try:
            for check.lines, raw in enumerate(event_lines(fh), 1):  # the count is the point
                if not raw.endswith(b"\n"):
                    if len(raw) <= MAX_EVENT_LINE_BYTES:
                        check.lines -= 1
                        warnings.append("the last line of events.jsonl was cut off mid-write and was skipped")
                        break
                    if _skip_rest(fh):
                        check.skip(f"longer than {MAX_EVENT_LINE_BYTES >> 20} MiB, which no writer writes")
                        continue
                    check.lines -= 1
                    warnings.append(
                        f"line {check.lines + 1} of events.jsonl runs on for more than {MAX_SKIP_BYTES >> 20} MiB "
                        "without a newline: the file is damaged there and was read no further"
                    )
                    break
                if len(raw) > LONG_LINE_BYTES:
                    if raw.startswith(GPU_LINE_PREFIX) and len(raw) > MAX_GPU_LINE_BYTES:
                        check.skip(f"a GPU sample of {len(raw)} bytes (at most {MAX_GPU_LINE_BYTES})")
                        continue
                    check.long_bytes += len(raw)
                    if check.long_bytes > LONG_LINES_BUDGET:
                        check.skip(
                            f"long lines past {LONG_LINES_BUDGET >> 20} MiB in all, which no session holds"
                        )
                        continue
                if gpu_tail is not None and raw.startswith(GPU_LINE_PREFIX):
                    gpu_tail.lines.append((check.lines, raw))
                    gpu_tail.count += 1
                    continue
                if batches and (batch := batch_of(raw)) is not None:
                    gathered.append(batch)
                    if len(gathered) >= BATCH_RUN:
                        yield gathered
                        gathered = []
                    continue
                if gathered:
                    yield gathered
                    gathered = []
                # Decoded and checked by msgspec (``fast_event``) where it certainly gives what the exact
                # path gives; else through _event_of, which says why a line is refused.
                try:
                    event = fast_event(raw)
                except Malformed as exc:
                    check.skip(str(exc))
                    continue
                if event is None:
                    event = _event_of(raw, decode, check)
                    if event is None:
                        continue
                if event["type"] == "session_end":
                    check.end = event
                yield event
        except OSError as exc:  # a disk's read error: what was read stands
            warnings.append(f"events.jsonl could not be read past line {check.lines}: {storage_problem(exc)}")
    if gathered:
        yield gathered
    for line, raw in gpu_tail.lines if gpu_tail is not None else ():
        try:
            event = fast_event(raw)
        except Malformed as exc:
            check.skip(str(exc), line)
            continue
        if event is None:
            event = _event_of(raw, decode, check, line)
        if event is not None:
            yield event
    if check.bad:
        warnings.append(check.warning())


def load_session(path: str | os.PathLike[str], keep_events: bool = False) -> LoadedSession:
    """Read a session folder and fold its events into a fresh model."""
    return SessionFolder.open(path).load(keep_events)


def _check_plan(plan: Plan, folder: Path) -> None:
    """Refuse plans this version cannot fold (unknown ids, nonsense counts) with one line.

    A session.json is a file anyone can write: a plan ``benchtui run`` refuses (a model named
    5,000 times, 100,000 runs) is refused here by the same bounds (``LIMITS``, ``MAX_RUNS_IN_PLAN``),
    before any run is made of it.
    """
    from benchtui_runners import catalog

    # A watch session's run keeps the pseudo-framework when its command sent no hello; its model is
    # the catalog's WATCH_MODEL, which only a watch session may name.
    frameworks = {*catalog.FRAMEWORKS, catalog.WATCH_FRAMEWORK} if plan.watch else set(catalog.FRAMEWORKS)
    models = set(catalog.MODELS) if plan.watch else set(catalog.MODELS) - {catalog.WATCH_MODEL}
    for label, values, known in (("framework", plan.frameworks, frameworks), ("model", plan.models, models)):
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise SessionError(f"{folder}/session.json: the plan's {label}s are not a list of names")
        for value in values:
            if value not in known:
                raise SessionError(
                    f"{folder} uses {label} {value!r}, unknown to this benchtui: upgrade benchtui"
                )
        twice = repeated(values)
        if twice is not None:
            raise SessionError(f"{folder}/session.json: the plan names the {label} {twice!r} twice")
    for name in ("runs", "epochs"):
        value = getattr(plan, name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise SessionError(f"{folder}/session.json: the plan's {name} is {value!r}")
    # The verdict's contention rule reads the plan's --threads (0: none given) for a runner that did not
    # report its pool: a number, as every writer records it.
    if not isinstance(plan.threads, int) or isinstance(plan.threads, bool) or plan.threads < 0:
        raise SessionError(f"{folder}/session.json: the plan's threads is {plan.threads!r}")
    for flag, (name, most) in LIMITS.items():
        value = getattr(plan, name)
        if isinstance(value, int) and value > most:
            raise SessionError(
                f"{folder}/session.json: the plan's {name} is {value:,}, more than benchtui runs ({flag} {most:,})"
            )
    total = len(plan.frameworks) * len(plan.models) * plan.runs * len(plan.device_counts())
    if total > MAX_RUNS_IN_PLAN:
        raise SessionError(
            f"{folder}/session.json: the plan has {total:,} runs, more than benchtui runs ({MAX_RUNS_IN_PLAN:,})"
        )
    if not isinstance(plan.batch_sizes, dict):
        raise SessionError(f"{folder}/session.json: the plan's batch_sizes are not a mapping")


#: A "running" session whose events were written this recently is probably still running.
LIVE_WINDOW_S = 60.0


def _unfinished(folder: Path, model: SessionModel, abandoned: bool = False) -> str:
    """One line on what a session that never finished lost; cut-off runs become "interrupted".

    ``abandoned``: its writer is known to be gone (its pid is not alive on this host).
    """
    try:
        age = time.time() - (folder / SessionFolder.EVENTS).stat().st_mtime
    except OSError:
        age = float("inf")
    if age < LIVE_WINDOW_S and not abandoned:
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
            of = f" of {run.epochs_planned}" if run.epochs_planned else ""  # a watch: no planned count
            where += f" (epoch {run.current_epoch}{of}, step {run.current_step})"
    lost = f"; {never} planned run(s) never started" if never else ""
    if abandoned:
        return f"the session was abandoned{where}: the process writing it is gone{lost}"
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
            shown = 5 if len(matches) > 6 else len(matches)  # "and 1 more" would take the room of its name
            names = ", ".join(p.name for p in matches[:shown])
            more = f" and {len(matches) - shown} more" if len(matches) > shown else ""
            raise SessionError(
                f"{spec!r} matches {len(matches)} sessions ({names}{more}): give more of the name"
            )
    raise SessionError(
        f"no session {spec!r} (not a folder, and no session in {sessions_dir_words(root)} starts with it)"
    )


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
    label = next((v for v in (gpu.get("name"), placement.get("kind")) if isinstance(v, str) and v), "?")
    try:  # the devices the runs reported, when the session has finished
        # json.loads, not loads_strict: the list is read on the sessions screen's UI thread, and a
        # summary of many small objects parses several times faster so (what is shown is scrubbed).
        summary = read_json_file(folder / SessionFolder.SUMMARY, MAX_SUMMARY_BYTES, json.loads) or {}
        kinds = {
            str((env.get("device") or {}).get("type"))
            for env in (summary.get("frameworks") or {}).values()
            if isinstance(env, dict)
        }
    except (SessionError, AttributeError):  # none, not a file, not a summary: the placement says it
        kinds = set()
    kinds.discard("None")
    if len(kinds) > 1:
        return str(scrub_surrogates(f"mixed: {'/'.join(sorted(kinds))}"))
    return label


def _models_text(plan: dict[str, Any]) -> str:
    """A listed session's models: the plan's ids, or for a watch what it watched ('watch: python train.py')."""
    watch = plan.get("watch")
    if isinstance(watch, dict) and watch:
        command = watch.get("command")
        return "watch: " + watch_label(
            {"command": [str(w) for w in command] if isinstance(command, list) else []}
        )
    return ",".join(map(str, plan.get("models") or []))


def _listed_status(meta: dict[str, Any]) -> str:
    status = str(meta.get("status", "?"))
    if status == "running" and writer_alive(meta.get("writer")) is False:
        return "abandoned"  # the process writing it is gone: it will never finish
    return status


def own_name(info: dict[str, str]) -> str:
    """A listed session's name, or '' when it is only its id (a session started without --name is
    labelled with its folder's name: saying it twice only takes room)."""
    name = info.get("label", "")
    return "" if name == info.get("name") else name


def list_sessions(root: str | os.PathLike[str] | None = None) -> list[dict[str, str]]:
    """One line of facts per session folder under ``root``, newest first; unreadable ones are said so."""
    base = sessions_dir(root)
    out: list[dict[str, str]] = []
    unreadable: list[dict[str, str]] = []  # listed last, with the reason
    if not base.is_dir():
        return out
    for folder in sorted((p for p in base.iterdir() if p.is_dir()), reverse=True):
        try:
            out.append(_listed(folder))
        except Exception as exc:  # one folder, whatever it holds, never hides the others
            if not os.path.lexists(folder / SessionFolder.META):
                continue  # not a session at all (a stray folder): nothing to say
            why = str(exc) if isinstance(exc, SessionError) else f"{type(exc).__name__}: {exc}"
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
                    "error": why.replace(f"{folder}{os.sep}", "").replace(str(folder), "").strip(),
                }
            )
    return out + unreadable


def _listed(folder: Path) -> dict[str, str]:
    """One session's line in the list (SessionError, or anything a damaged folder raises, when unreadable)."""
    meta = read_meta(folder)
    plan = meta.get("plan", {})
    if not isinstance(plan, dict):
        raise SessionError("no usable plan")
    for key in ("frameworks", "models"):
        if not isinstance(plan.get(key) or [], list):
            raise SessionError(f"the plan's {key} are not a list of names")
    return {
        "name": folder.name,
        "path": str(folder),
        "started": str(meta.get("started", "")).replace("+00:00", "").replace("T", " "),
        "device": _device_label(meta, plan, folder),
        "frameworks": ",".join(map(str, plan.get("frameworks") or [])),
        "models": _models_text(plan),
        "status": _listed_status(meta),
        "label": str(meta.get("name") or ""),
        "finished": str(meta.get("finished") or ""),
    }
