"""The statuses of a run, a cell and a session, the cautions a row carries, and one style for each.

Every status is a ``str`` enum, so it compares equal to the words written in events.jsonl
and summary.json ("ok", "failed", ...) and serializes as them: the files do not change.
"""

from __future__ import annotations

from enum import Enum
from typing import TypedDict


class RunStatus(str, Enum):
    """One runner process, from the plan's queue to its end."""

    QUEUED = "queued"
    STARTING = "starting"
    BUILDING = "building"
    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"
    UNAVAILABLE = "unavailable"
    STOPPED = "stopped"
    SKIPPED = "skipped"
    INTERRUPTED = "interrupted"
    # It ran to its end, but its loss went NaN/infinite or never changed: it did not train, and its
    # times are not a result (kept out of every figure, verdict and ratio).
    DIVERGED = "diverged"

    @classmethod
    def parse(cls, value: object, default: RunStatus | None = None) -> RunStatus:
        """The status a recorded word names; ``default`` (else FAILED) for a word this version does not know."""
        try:
            return cls(str(value))
        except ValueError:
            return default or cls.FAILED

    @property
    def final(self) -> bool:
        return self in FINAL

    def __str__(self) -> str:  # f-strings and messages show the word, not "RunStatus.OK"
        return self.value


FINAL = frozenset(
    {
        RunStatus.OK,
        RunStatus.FAILED,
        RunStatus.UNAVAILABLE,
        RunStatus.STOPPED,
        RunStatus.SKIPPED,
        RunStatus.INTERRUPTED,
        RunStatus.DIVERGED,
    }
)
#: Runs that ended early without failing: their cell is "incomplete", not "failed".
CUT_SHORT = frozenset({RunStatus.STOPPED, RunStatus.SKIPPED, RunStatus.INTERRUPTED})


class CellStatus(str, Enum):
    """One (framework, model) cell of the study's table: what its runs add up to."""

    OK = "ok"
    FAILED = "failed"
    UNAVAILABLE = "unavailable"
    INCOMPLETE = "incomplete"
    PENDING = "pending"
    DIVERGED = "diverged"  # every run of the cell diverged: no figures

    def __str__(self) -> str:
        return self.value


class SessionStatus(str, Enum):
    """A whole session, as session.json records it when it ends."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETE = "complete"
    INCOMPLETE = "incomplete"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    ABANDONED = "abandoned"  # "running" on disk, but the process writing it is gone

    @classmethod
    def parse(cls, value: object, default: SessionStatus | None = None) -> SessionStatus:
        try:
            return cls(str(value))
        except ValueError:
            return default or cls.INCOMPLETE

    def __str__(self) -> str:
        return self.value


class CautionKind(str, Enum):
    """Why a row's numbers deserve a second look: each view can pick the kinds it shows."""

    RUNS_DIFFER = "runs-differ"  # wide IQR of epoch times across runs
    BATCHES_VARY = "batches-vary"  # wide IQR of batch times
    SLOW_WARMUP = "slow-warmup"
    OUTLIER_RUN = "outlier-run"
    OUTLIER_BATCHES = "outlier-batches"
    CPU_CONTENTION = "cpu-contention"  # other processes busy on the CPU during a run
    GPU_SHARING = "gpu-sharing"  # other processes on the GPU during a run
    MIXED_DEVICES = "mixed-devices"  # a ratio refused: the frameworks ran on different devices
    MISSING_DATA = "missing-data"  # epochs or steps of a run are missing from its events
    ARCHITECTURE = "architecture"  # the frameworks do not build the same network (parameters or FLOPs differ)
    PROFILE = "profile"  # --profile: a run's profile failed or its trace was dropped (the run itself counts)
    PARTIAL = "partial"  # no run finished: the figures are what runs cut short completed before they stopped
    LOG_CUT = "log-cut"  # a run's log could not be written whole (a full disk): what it lost
    FLOPS_REFUSED = "flops-refused"  # a FLOP count that would put the run above its device's peak
    # A sweep's cell whose runs are another point's (an axis that changes nothing for it): a note, not a doubt.
    SAME_RUNS = "same-runs"
    DIVERGED = "diverged"  # a run's loss went NaN/infinite or never changed: left out of the figures

    def __str__(self) -> str:
        return self.value


class Caution(TypedDict):
    """A warning on a row: its kind (for code) and its sentence (for people). Plain JSON in summary.json."""

    kind: CautionKind
    message: str


def caution(kind: CautionKind, message: str) -> Caution:
    return {"kind": kind, "message": message}


#: Cautions that say what a row is, not a doubt about its numbers (a view that counts doubts skips them).
NOTES = frozenset({CautionKind.SAME_RUNS})


#: Rich style per status word, for every view that colours one (run, cell or session).
STATUS_STYLE: dict[str, str] = {
    "ok": "green",
    "done": "green",  # a results-table cell whose runs are all ok
    "complete": "bold green",
    "failed": "bold red",
    "diverged": "bold red",
    "unavailable": "yellow",
    "incomplete": "bold yellow",
    "interrupted": "bold magenta",
    "abandoned": "bold magenta",
    "stopped": "magenta",
    "skipped": "dim",
    "queued": "dim",
    "pending": "dim",
    "starting": "bold cyan",
    "building": "bold cyan",
    "running": "bold cyan",
    "searching": "bold cyan",
}


def status_style(status: object, default: str = "") -> str:
    """The style of a status word (an enum or its value); ``default`` for a word the map does not know."""
    return STATUS_STYLE.get(str(status), default)
