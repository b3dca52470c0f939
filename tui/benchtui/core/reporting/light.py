"""A finished session read for a view that draws no batch (show, md, csv, the trackers, compare): its events
folded but the batch lines of a run that is running, when its summary cache holds (issue 35).

A million-event session is nine tenths batch lines, and a batch line sets only its run's batch fields
(``BATCH_FIELDS``) and its status to running. A view reads the summary (cached) and the runs' other fields
(epochs, phases, hello, status, GPU readings), never those: so the light load folds every other line as the
load does, holds a batch line back, undecoded, only while its run is running already (then it changes no
status either), and guards the batch fields of a run it held lines of: a read of one raises
``NeedsBatches``, and the view redoes its work from the full load. What the view gives is the full load's,
byte for byte, or the full load's own work.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from benchtui.core.model.runs import RunState
from benchtui.core.model.session_model import SessionModel
from benchtui.core.model.status import RunStatus
from benchtui.core.provenance import recorded_by_other
from benchtui.core.store import session as store
from benchtui.core.store.session import LoadedSession, SessionError, SessionFolder
from benchtui.core.wire.events import Malformed, fast_event

#: Whether views try the light load first (tests turn it off to compare with the full load's outputs).
ENABLED = True

#: What a batch line sets on its run besides its status: never read from a run whose batch lines were held.
BATCH_FIELDS = (
    "batch_seconds",
    "batch_epochs",
    "missing_steps",
    "window_max_s",
    "current_epoch",
    "current_step",
)

#: How the engine writes a runner's batch line: its run id (``{"run":"ID",``), then the runner's bytes.
RUN_PREFIX = b'{"run":"'
BATCH_AFTER_ID = b'","v":1,"type":"batch",'


class NeedsBatches(Exception):
    """A view (or the fold) read a batch field of a run whose batch lines the light load held back."""


def _guarded(name: str) -> property:
    """``name`` of a run as it is, until one of its batch lines is held back: then reading it raises."""

    def get(self: RunState) -> Any:
        if self.__dict__.get("_held_batches"):
            raise NeedsBatches(f"run {self.spec.run_id}: {name} is not folded")
        return self.__dict__[name]

    def put(self: RunState, value: Any) -> None:
        self.__dict__[name] = value

    return property(get, put)


#: A RunState whose batch fields are guarded (a data descriptor wins over the instance's own attribute).
LightRun: type[RunState] = type("LightRun", (RunState,), {name: _guarded(name) for name in BATCH_FIELDS})


def light_load(path: str | os.PathLike[str]) -> LoadedSession | None:
    """The session at ``path`` folded without its running runs' batch lines (its summary is the cache's); None
    where the full load must do it: no summary cache that holds (with the warnings a load recorded), a
    session.json that says other warnings now, a run whose held batch lines a later line would need, a file
    that changed while it was read. Never raises for a bad session: the full load says what is wrong."""
    if not ENABLED:
        return None
    with contextlib.suppress(SessionError, NeedsBatches, _Unusual, OSError, RecursionError):
        return _light_load(SessionFolder.open(path))
    return None


def _light_load(folder: SessionFolder) -> LoadedSession | None:
    hit = folder.summary_cache()
    if hit is None or "warnings" not in hit[1]:  # none, or the writer's (it never loaded the file)
        return None
    cache = hit[1]
    stamp = folder.events_stamp()
    warnings: list[str] = []
    meta = store.read_meta(folder.path, warnings)
    plan = folder.read_plan(meta)
    host = meta.get("host")
    model = SessionModel(plan, host=host if isinstance(host, dict) else None)
    other = recorded_by_other(meta.get("benchtui"))
    if other:
        warnings.append(other)
    said = list(cache["warnings"])
    if said[: len(warnings)] != warnings:  # session.json says otherwise since the cache was written
        return None
    if any(type(run) is not RunState for run in model.runs.values()):
        return None
    for run in model.runs.values():
        run.__class__ = LightRun
    tail = store.GpuTail(model.gpu_samples.maxlen)
    check = store.EventCheck()
    for event in _events(folder, model, tail, check):
        model.apply(event)
    model.events += tail.dropped
    folder.settle(meta, model, check)  # its runs left pending become interrupted; its words are cached
    if folder.events_stamp() != stamp or stamp is None:
        return None
    return LoadedSession(folder.path, meta, plan, model, [], said, stamp)


def is_light(loaded: LoadedSession) -> bool:
    """Whether ``loaded`` came from ``light_load``."""
    return any(isinstance(run, LightRun) for run in loaded.model.runs.values())


def full(loaded: LoadedSession) -> LoadedSession:
    """``loaded`` itself when the full load made it, else the full load of its folder (its warnings are the
    light load's: they were cached from a load of the same file)."""
    return store.load_session(loaded.path) if is_light(loaded) else loaded


class _Unusual(Exception):
    """What the light load leaves to the full load: a line over ``LONG_LINE_BYTES`` (the load's rules for
    long lines are its own), a read error."""


#: How much of events.jsonl is read at a time (its whole lines are taken; the rest waits for the next read).
BLOCK_BYTES = 4 << 20


def _events(
    folder: SessionFolder, model: SessionModel, tail: store.GpuTail, check: store.EventCheck
) -> Iterator[dict[str, Any]]:
    """``store.iter_events``' events, in its order and with its refusals (its warnings are the cache's), less
    the batch lines it holds back; ``_Unusual`` where a line is as long as ``LONG_LINE_BYTES`` or the file
    cannot be read. Without such lines iter_events' loop is: a line cut off at the end is skipped, a GPU
    sample goes to ``tail``, every other line is decoded; this is that loop, with one test before decoding.

    A line is held back when it is a batch line as the engine writes it (``{"run":"ID","v":1,"type":"batch",``)
    of a run of the plan that is running, with no other ``type``, ``run`` or ``node`` key and no escape after:
    whatever a decoder makes of it is that run's batch, or a refusal, and neither changes anything but the
    run's batch fields (its status stays running). The run is marked: its batch fields are guarded from then.
    The file is read a block at a time, so that a block without a backslash or a ``"node"`` anywhere spares
    its lines those two tests, and the last run's beginning is tried first: a million lines, a few tests each.
    """
    fh = store.open_session_file(folder.events_path)
    if fh is None:
        return
    ids = {run_id.encode(): run for run_id, run in model.runs.items() if _plain(run_id)}
    longest, gpu, running = store.LONG_LINE_BYTES, store.GPU_LINE_PREFIX, RunStatus.RUNNING
    # The last held line's beginning (at first, one no line has: they hold no newline), its length, its run, and
    # whether that run is running: a status changes only where a line is folded (after a yield), never here.
    head, rest, run, live = b"\n", 0, None, False
    with fh:
        carry = b""
        while True:
            try:
                block = fh.read(BLOCK_BYTES)
            except OSError as exc:
                raise _Unusual("a read error") from exc
            if carry:
                block = carry + block
            cut = block.rfind(b"\n") + 1
            carry = block[cut:]
            if len(carry) >= longest:
                raise _Unusual("a long line")
            if cut == 0:  # the end, and maybe a last line cut off mid-write (skipped, as the load does)
                break
            odd = b"\\" in block or b'"node"' in block
            lines = block[:cut].split(b"\n")
            lines.pop()  # after the last newline: nothing
            first = check.lines
            for number, raw in enumerate(lines, first + 1):
                if len(raw) >= longest:
                    raise _Unusual("a long line")
                if raw.startswith(head):
                    if (
                        live
                        and raw.find(b'"type"', rest) < 0
                        and raw.find(b'"run"', rest) < 0
                        and (not odd or (raw.find(b"\\", rest) < 0 and raw.find(b'"node"', rest) < 0))
                    ):
                        continue
                elif raw.startswith(gpu):
                    tail.lines.append((number, raw + b"\n"))
                    tail.count += 1
                    continue
                elif raw.startswith(RUN_PREFIX):
                    end = raw.find(b'"', len(RUN_PREFIX))
                    owner = (
                        ids.get(raw[len(RUN_PREFIX) : end]) if raw.startswith(BATCH_AFTER_ID, end) else None
                    )
                    if owner is not None:
                        head, rest, run = raw[: end + len(BATCH_AFTER_ID)], end + len(BATCH_AFTER_ID), owner
                        live = owner.status is running
                        if (
                            live
                            and raw.find(b'"type"', rest) < 0
                            and raw.find(b'"run"', rest) < 0
                            and (not odd or (raw.find(b"\\", rest) < 0 and raw.find(b'"node"', rest) < 0))
                        ):
                            owner.__dict__["_held_batches"] = True
                            continue
                check.lines = number
                event = _decoded(raw + b"\n", check)
                if event is not None:
                    yield event  # folded before the next line is read: its run's status may change
                    live = run is not None and run.status is running
            check.lines = first + len(lines)
    decode = store._DECODER.raw_decode
    for line, raw in tail.lines:
        try:
            event = fast_event(raw)
        except Malformed as exc:
            check.skip(str(exc), line)
            continue
        if event is None:
            event = store._event_of(raw, decode, check, line)
        if event is not None:
            yield event


def _decoded(raw: bytes, check: store.EventCheck) -> dict[str, Any] | None:
    """One line's event as iter_events decodes and checks it; None where it is refused (counted in ``check``)."""
    try:
        event = fast_event(raw)
    except Malformed as exc:
        check.skip(str(exc))
        return None
    if event is None:
        event = store._event_of(raw, store._DECODER.raw_decode, check)
        if event is None:
            return None
    if event["type"] == "session_end":
        check.end = event
    return event


def _plain(run_id: str) -> bool:
    """A run id JSON writes as its own characters (printable ASCII, no quote nor backslash): its line's bytes
    hold it as it is."""
    return run_id.isascii() and run_id.isprintable() and '"' not in run_id and "\\" not in run_id
