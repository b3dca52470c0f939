"""CPU the app uses while it sits idle, per screen: the real ``benchtui`` process in tmux, sampled from /proc.

    .venv/bin/python benchmarks/idle_cpu.py [--seconds 10] [--repeat 3] [--states plan,replay,...]

Each repeat starts a fresh app in its own tmux server (a private socket, 120x40 by default),
waits until the screen shows the state (read back with ``tmux capture-pane``), lets it settle,
then reads the app process's utime + stime (every thread; runners are children and not
counted) over ``--seconds`` of wall time: its share of one core. A busy machine slows the
app's work down but does not add to its CPU time, so the figure holds on a shared machine.

States: the plan screen at start-up (``benchtui``) and with a text field focused (a cursor), the
sessions screen (ctrl+o), a replay finished at ``--speed inf`` and at ``--speed 1``, a replay
paused mid-way, and the live screen after a real tiny CPU run has finished (PyTorch,
ResNet50, 32 px: about 20 s). The replayed sessions are written by tests/sessionfactory.py
(GPU panels, the batch-time comparison, two frameworks). Target: under 1% of a core in
every state. Prints figures (median, min–max over the repeats, and the raw samples);
asserts nothing. Textual's input thread alone wakes ten times a second: about 0.1–0.2%.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tui"), str(ROOT / "runners"), str(ROOT / "tests")]

from sessionfactory import make_session  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
FINISHED = r"(Complete|Failed|Incomplete|Interrupted) · "
LIVE_RUN = (
    "run --frameworks torch --models resnet50 --image-size 32 --samples 16 --batch-size 8 --epochs 2"
    " --runs 1 --device cpu --threads 1 --no-nvml"
).split()


def cpu_seconds(pid: int) -> float:
    """utime + stime of every thread of ``pid`` (not of its children)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Tmux:
    """One app in a tmux server of its own (``-L``), so other tmux sessions are never touched."""

    count = 0

    def __init__(self, width: int, height: int) -> None:
        Tmux.count += 1  # a fresh server each time: one being shut down cannot take the next call
        self.socket = f"benchtui-idle-{os.getpid()}-{Tmux.count}"
        self.socket_path: Path | None = None
        self.size = (width, height)

    def _tmux(self, *args: str) -> str:
        out = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=False)
        if out.returncode:
            raise SystemExit(f"tmux {' '.join(args[:1])} failed: {out.stderr.strip()}")
        return out.stdout

    def start(self, argv: list[str], cwd: Path) -> int:
        """Start ``argv`` as the pane's process (exec: the pane's pid is the app's); return its pid."""
        command = "exec " + " ".join(_quote(a) for a in argv)
        width, height = self.size
        self._tmux(
            "new-session", "-d", "-s", "app", "-x", str(width), "-y", str(height), "-c", str(cwd), command
        )
        pid, socket_path = self._tmux(
            "display-message", "-p", "-t", "app", "#{pane_pid} #{socket_path}"
        ).split()
        self.socket_path = Path(socket_path)
        return int(pid)

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "app")

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "app", *keys)

    def wait_for(self, pattern: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not re.search(pattern, screen := self.screen()):
            if time.monotonic() > deadline:
                raise SystemExit(f"the screen never showed {pattern!r}; it shows:\n{screen}")
            time.sleep(0.2)

    def stop(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, check=False)
        if self.socket_path is not None:
            self.socket_path.unlink(missing_ok=True)  # tmux leaves the socket file behind


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


@dataclass
class State:
    """How to reach one idle state: the app's arguments, then keys and screen text to wait for."""

    name: str
    argv: list[str]
    reach: Callable[[Tmux], None]
    samples: list[float] = field(default_factory=list)


def measure(state: State, cwd: Path, args: argparse.Namespace) -> float:
    tmux = Tmux(args.width, args.height)
    try:
        pid = tmux.start([sys.executable, "-m", "benchtui", *state.argv], cwd)
        state.reach(tmux)
        time.sleep(args.settle)  # a notification's timeout, a summary loading in its thread: not idling
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(args.seconds)
        cpu1, t1 = cpu_seconds(pid), time.monotonic()
        return (cpu1 - cpu0) / (t1 - t0) * 100
    finally:
        tmux.stop()


def states(replay: Path, long_replay: Path, big: Path, sessions: Path) -> list[State]:
    def waiting(pattern: str, timeout: float = 60.0) -> Callable[[Tmux], None]:
        return lambda tmux: tmux.wait_for(pattern, timeout)

    def field_focused(tmux: Tmux) -> None:
        tmux.wait_for("plan a benchmark", 30)
        # From the preset (where the focus starts) past the four framework boxes and the model list to
        # the first text field ("Your model"): a field with a cursor.
        tmux.keys(*["Tab"] * 6)

    def sessions_screen(tmux: Tmux) -> None:
        tmux.wait_for("plan a benchmark", 30)
        tmux.keys("C-o")
        tmux.wait_for("Sessions in ", 30)

    def paused(tmux: Tmux) -> None:
        tmux.wait_for(r"Run \d+ of", 30)
        tmux.keys("p")
        tmux.wait_for("playback paused", 30)

    return [
        State("plan screen", [], waiting("plan a benchmark")),
        State("plan screen (a field focused)", [], field_focused),
        State("sessions screen", [], sessions_screen),
        State(
            "replay --speed inf (finished)", ["replay", str(big), "--speed", "inf"], waiting(FINISHED, 120)
        ),
        State("replay --speed 1 (finished)", ["replay", str(replay), "--speed", "1"], waiting(FINISHED, 120)),
        State("replay --speed 1 (paused)", ["replay", str(long_replay), "--speed", "1"], paused),
        State(
            "live screen (run finished)",
            [*LIVE_RUN, "--sessions-dir", str(sessions)],
            waiting(r"benchtui " + FINISHED, 300),
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="wall seconds sampled per state")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds waited once the state shows")
    parser.add_argument("--repeat", type=int, default=3, help="fresh app processes per state")
    parser.add_argument(
        "--states",
        default="",
        help="run the states whose names start so (comma-separated; default all), e.g. plan,replay",
    )
    parser.add_argument("--width", type=int, default=120)
    parser.add_argument("--height", type=int, default=40)
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is needed: it is the terminal the app runs in")
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        sessions = cwd / "sessions"  # where ``benchtui`` (no arguments) looks, from this cwd
        # About 14 s at the recorded pace; 40 s for the paused one; ~40,000 events at once.
        replay = make_session(sessions, name="idle", runs=1, epochs=2, steps=100, time_scale=0.3)
        long_replay = make_session(sessions, name="idle-long", runs=2, epochs=3, steps=200, time_scale=0.3)
        big = make_session(
            sessions, name="idle-big", models=("resnet50", "inception_v3"), runs=2, epochs=3, steps=1500
        )
        wanted = [s.strip() for s in args.states.split(",") if s.strip()]
        chosen = [
            s
            for s in states(replay, long_replay, big, sessions)
            if not wanted or s.name.startswith(tuple(wanted))
        ]
        print(
            f"terminal {args.width}x{args.height}, {args.seconds:g} s sampled per state after {args.settle:g} s, "
            f"{args.repeat} fresh processes each; % of one core (utime+stime of the app process)"
        )
        for _ in range(args.repeat):  # states interleaved, so drift on the machine hits them all
            for state in chosen:
                state.samples.append(measure(state, cwd, args))
        width = max(len(s.name) for s in chosen)
        for state in chosen:
            xs = state.samples
            raw = ", ".join(f"{x:.2f}" for x in xs)
            print(
                f"{state.name:<{width}}  median {statistics.median(xs):5.2f}%  "
                f"(min–max {min(xs):.2f}–{max(xs):.2f}%)  [{raw}]"
            )


if __name__ == "__main__":
    main()
