"""Run the real app in a pseudo-terminal with fake runners and measure the parent process.

Used by ui_throughput.py and cpu_usage.py. The app runs with Textual's real terminal
driver (not the headless test driver) on a pty whose output is read and discarded, so
rendering and writing escape codes are part of what is measured. The child measures
itself (getrusage of its own process only, so runner CPU is not counted) and writes
its figures as JSON; the parent prints them.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import resource
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FAKE_RUNNER = ROOT / "tests" / "data" / "fake_runner.py"


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # this process only, not its runners
    return usage.ru_utime + usage.ru_stime


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child(args: argparse.Namespace) -> None:
    """Run the app on this terminal; write measurements to args.out."""
    sys.path[:0] = [str(ROOT / "tui"), str(ROOT / "runners")]
    from benchtui.app import BenchApp
    from benchtui.core.plan.plan import Plan
    from benchtui.core.running.launcher import LocalLauncher
    from benchtui.screens.plan import GpuProbe

    class FakeLauncher(LocalLauncher):
        def command(self, python: str, cmd_args: list[str]) -> list[str]:
            return [
                python,
                str(FAKE_RUNNER),
                "--batch-s",
                str(args.batch_s),
                "--steps",
                str(args.steps),
                *cmd_args,
            ]

    result: dict[str, Any] = {"rss_start": rss_bytes()}
    marks: list[dict[str, float]] = []

    class Measured(BenchApp):
        def on_mount(self) -> None:
            super().on_mount()
            self._t0 = time.monotonic()
            self._cpu0 = cpu_seconds()
            self._done_at: float | None = None
            self._idle_cpu0 = 0.0
            self.set_interval(0.5, self._measure)

        def _measure(self) -> None:
            now = time.monotonic()
            engine = self.engine
            events = engine.model.events if engine is not None else 0
            marks.append(
                {"t": now - self._t0, "cpu": cpu_seconds() - self._cpu0, "rss": rss_bytes(), "events": events}
            )
            if args.mode == "plan":
                if now - self._t0 >= args.idle:
                    self.exit(0)
                return
            if self._done_at is None and engine is not None and not self.runs_going:
                self._done_at = now
                self._idle_cpu0 = cpu_seconds()
                result["run_s"] = now - self._t0
                result["run_cpu_s"] = self._idle_cpu0 - self._cpu0
                result["events"] = events
                result["status"] = self.session_status
            if self._done_at is not None and now - self._done_at >= args.idle:
                result["idle_s"] = now - self._done_at
                result["idle_cpu_s"] = cpu_seconds() - self._idle_cpu0
                self.exit(0)

    # The app as make_app builds it, plus the measuring hooks above.
    if args.mode == "plan":
        app = Measured(None, sessions_dir=args.sessions_dir, use_nvml=False, probe=GpuProbe((), "benchmark"))
    else:
        plan = Plan(
            frameworks=["torch", "tensorflow"],
            models=["resnet50"],
            image_size=32,
            samples=args.steps * 8,
            batch_sizes={"resnet50": 8},
            epochs=args.epochs,
            runs=args.runs,
            device="cpu",
        )
        app = Measured(
            plan,
            autostart=True,
            sessions_dir=args.sessions_dir,
            use_nvml=args.nvml,
            launcher=FakeLauncher(),
            probe=GpuProbe((), "benchmark"),
        )
    app.run()
    result["marks"] = marks
    result["rss_end"] = rss_bytes()
    Path(args.out).write_text(json.dumps(result))


def run_in_pty(extra: list[str], width: int = 120, height: int = 40, timeout: float = 600) -> dict[str, Any]:
    """Start this script's child mode on a new pty of the given size; return its measurements."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))
        env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor")
        proc = subprocess.Popen(
            [sys.executable, __file__, "child", "--out", str(out), "--sessions-dir", tmp, *extra],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
        os.close(slave)
        written = 0
        tail = b""
        deadline = time.monotonic() + timeout
        try:
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    chunk = os.read(master, 65536)  # drain the screen output like a terminal would
                except OSError:
                    break
                written += len(chunk)
                tail = (tail + chunk)[-4000:]
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            os.close(master)
        if not out.exists():
            raise SystemExit(
                f"the app did not write its measurements (exit {proc.returncode}):\n"
                + tail.decode("utf-8", "replace")
            )
        result = json.loads(out.read_text())
        result["terminal_bytes"] = written
        result["terminal_tail"] = tail.decode("utf-8", "replace")
        return result


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("child")
    c.add_argument("--out", required=True)
    c.add_argument("--sessions-dir", required=True)
    c.add_argument("--mode", choices=["run", "plan"], default="run")
    c.add_argument("--batch-s", type=float, default=0.0)
    c.add_argument("--steps", type=int, default=1000)
    c.add_argument("--epochs", type=int, default=2)
    c.add_argument("--runs", type=int, default=1)
    c.add_argument("--idle", type=float, default=5.0)
    c.add_argument("--nvml", action="store_true", help="sample with NVML/psutil as the real app does")
    args = parser.parse_args()
    child(args)


if __name__ == "__main__":
    main()
