"""PyTorch data parallel: torchrun starts the runner once per rank, and this process relays their events.

``python -m benchtui_runners.torchrun --nproc-per-node N [--nnodes M --node-rank R --rdzv-endpoint
HOST:PORT --rdzv-id ID] -- --config JSON`` runs torchrun's own launcher in this process
(``torch.distributed.run``, the code behind the ``torchrun`` command: ``--standalone`` on one machine,
the c10d rendezvous across machines) on ``python -m benchtui_runners --config JSON``, with no restarts.
Across machines node 0 hosts the rendezvous's store (``--rdzv-conf is_host=1``, the others
``is_host=0``: on one host, as the tests run two nodes, each agent would otherwise try to host it), and a
node whose peers do not all join within ``config.rendezvous_timeout()`` seconds fails in one line naming
the endpoint (torchrun's ``join_timeout`` on node 0; a node that cannot reach the store retries
connecting for longer, so a timer here ends it).

torchrun starts its workers with no file descriptor of its own and each in a session of its own, so:

- the workers write to a FIFO this process reads (``FIFO_ENV``), and every line is copied whole
  to the event pipe: its node's lead's events (local rank 0), and the ``error`` of any rank that
  fails (held back and sent once the group is down, the root cause first: a rank killed by a signal
  says nothing itself);
- the group is stopped as a whole by stopping this process: torchrun's agent turns SIGTERM into a
  shutdown of every worker, and each worker dies with this process (``PR_SET_PDEATHSIG``) if it is
  killed outright.

A worker that dies makes torchrun stop the others and fail (``ChildFailedError``, which names
the rank and its exit); the run then fails with that rank's reason.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from typing import Any

from benchtui_runners.config import rendezvous_timeout
from benchtui_runners.protocol import FD_ENV, FIFO_ENV, EventWriter, ParentGone, die_with_parent


class Relay(threading.Thread):
    """Copies whole lines from the workers' FIFO to the event pipe; keeps error lines for the end."""

    def __init__(self, fifo: str, writer: EventWriter) -> None:
        super().__init__(daemon=True, name="benchtui-relay")
        self.read_fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self.hold_fd = os.open(fifo, os.O_WRONLY)  # ours: no end of file before the workers open it
        os.set_blocking(self.read_fd, True)
        self.writer = writer
        self.errors: list[dict[str, Any]] = []
        self.heard = threading.Event()  # a worker has written: the rendezvous is over

    def run(self) -> None:
        pending = b""
        while chunk := os.read(self.read_fd, 1 << 16):
            self.heard.set()
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self._forward(line + b"\n")
        if pending:
            self._forward(pending)

    def _forward(self, line: bytes) -> None:
        if b'"error"' in line:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if isinstance(event, dict) and event.get("type") == "error":
                    self.errors.append(event)
                    return
        with contextlib.suppress(ParentGone):  # the parent is gone: the writer is closed, lines dropped
            self.writer.send(line)

    def finish(self, timeout: float = 10.0) -> None:
        """Every worker has exited: close our own write end, read what is left, stop."""
        with contextlib.suppress(OSError):
            os.close(self.hold_fd)
        self.join(timeout)
        with contextlib.suppress(OSError):
            os.close(self.read_fd)


def torchrun_args(args: argparse.Namespace, runner: list[str], timeout: float = 60.0) -> list[str]:
    """torchrun's arguments: one machine (``--standalone``) or a rendezvous (node 0 hosting its store,
    ``timeout`` seconds for every node to join), no restarts, our runner."""
    where = (
        [
            "--nnodes",
            str(args.nnodes),
            "--node-rank",
            str(args.node_rank),
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            args.rdzv_endpoint,
            "--rdzv-id",
            args.rdzv_id,
            "--rdzv-conf",
            f"is_host={1 if args.node_rank == 0 else 0},join_timeout={max(1, round(timeout))}",
        ]
        if args.nnodes > 1
        else ["--standalone"]
    )
    return [
        *where,
        "--nproc-per-node",
        str(args.nproc_per_node),
        "--max-restarts",
        "0",
        "--monitor-interval",
        "0.2",
        "-m",
        "benchtui_runners",
        *runner,
    ]


def root_cause(failures: dict[int, Any], errors: list[dict[str, Any]]) -> tuple[str, str]:
    """(kind, message) of the failure that stopped the group.

    A rank killed by a signal that torchrun did not send first (it says nothing itself: the others
    then fail in their collectives), else the first error a rank sent, else torchrun's first failure.
    """
    killed = sorted(
        (rank, f) for rank, f in failures.items() if f.exitcode < 0 and -f.exitcode != signal.SIGTERM
    )
    if killed:
        rank, failure = killed[0]
        return "exception", f"rank {rank} was killed by {failure.signal_name()} (pid {failure.pid})"
    if errors:
        first = errors[0]
        return str(first.get("kind") or "exception"), str(first.get("message") or "a rank failed")
    if failures:
        rank, failure = sorted(failures.items())[0]
        how = (
            f"was killed by {failure.signal_name()}"
            if failure.exitcode < 0
            else f"exited with code {failure.exitcode}"
        )
        return "exception", f"rank {rank} {how} (pid {failure.pid})"
    return "exception", "torchrun failed"


def rendezvous_failed(args: argparse.Namespace, timeout: float, detail: str = "") -> str:
    """One line: the rendezvous at the endpoint did not complete, and what this node waited for."""
    return (
        f"torchrun's c10d rendezvous at {args.rdzv_endpoint} did not complete within {timeout:g} s: node "
        f"{args.node_rank} waited for all {args.nnodes} nodes (--rdzv-id {args.rdzv_id})"
        + (f" ({detail})" if detail else "")
    )


def _watch_rendezvous(
    args: argparse.Namespace,
    timeout: float,
    relay: Relay,
    writer: EventWriter,
    over: threading.Event,
    folder: str,
) -> None:
    """Several nodes: no worker has written ``timeout`` seconds (and a margin for torchrun's own
    join timeout to say it first) after this process started: the rendezvous never completed. Say so in
    one line and end this process (its workers, if any, die with it)."""

    margin = min(15.0, max(3.0, timeout / 2))

    def watch() -> None:
        if relay.heard.wait(timeout + margin) or over.is_set():
            return
        with contextlib.suppress(Exception):
            writer.error("exception", rendezvous_failed(args, timeout))
        print(f"benchtui torchrun: {rendezvous_failed(args, timeout)}", file=sys.stderr, flush=True)
        shutil.rmtree(folder, ignore_errors=True)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="benchtui-rendezvous").start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchtui_runners.torchrun")
    parser.add_argument("--nproc-per-node", type=int, required=True)
    parser.add_argument("--nnodes", type=int, default=1)
    parser.add_argument("--node-rank", type=int, default=0)
    parser.add_argument("--rdzv-endpoint", default="")
    parser.add_argument("--rdzv-id", default="benchtui")
    parser.add_argument("runner", nargs=argparse.REMAINDER, help="-- and the runner's own arguments")
    args = parser.parse_args(argv)
    runner = args.runner[1:] if args.runner[:1] == ["--"] else args.runner

    writer = EventWriter.from_env()
    if not writer.closed:
        die_with_parent()
    folder = tempfile.mkdtemp(prefix="benchtui-ranks-")
    fifo = os.path.join(folder, "events")
    os.mkfifo(fifo, 0o600)
    relay = Relay(fifo, writer)
    relay.start()
    os.environ[FIFO_ENV] = fifo
    os.environ.pop(FD_ENV, None)  # the workers do not have it
    failures: dict[int, Any] = {}
    code = 0
    timeout = rendezvous_timeout()
    over = threading.Event()
    if args.nnodes > 1:
        _watch_rendezvous(args, timeout, relay, writer, over, folder)
    try:
        try:
            from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
            from torch.distributed.run import parse_args, run
        except ImportError as exc:
            writer.error(
                "unavailable", f"torchrun is not available here ({exc}); pip install 'benchtui[torch]'"
            )
            return 3
        try:
            run(parse_args(torchrun_args(args, runner, timeout)))
        except ChildFailedError as exc:
            failures, code = dict(exc.failures), 1
        except Exception as exc:  # a rendezvous that fails, a signal: the run's reason
            signalled = type(exc).__name__ == "SignalException"  # stopped: the parent knows why
            if not signalled:
                name = type(exc).__name__
                detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                message = (
                    rendezvous_failed(args, timeout, f"{name}: {detail}" if detail else name)
                    if args.nnodes > 1 and not relay.heard.is_set()
                    else f"torchrun: {name}: {exc}"
                )
                with contextlib.suppress(ParentGone):
                    writer.error("exception", message)
            code = 143 if signalled else 2
    finally:
        over.set()
        relay.finish()
        shutil.rmtree(folder, ignore_errors=True)
    if code == 1 and not writer.closed:
        kind, message = root_cause(failures, relay.errors)
        others = [str(e.get("message")) for e in relay.errors if e.get("message") != message]
        trace = "\n".join([f"torchrun: {rank}: {f.message}" for rank, f in sorted(failures.items())] + others)
        with contextlib.suppress(ParentGone):
            writer.error(kind, message, trace)
    writer.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
