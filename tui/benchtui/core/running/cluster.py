"""Several nodes (issue 33): node 0's benchtui gathers the others, drives each run across them and records
what every node sends; node k follows.

The control channel is benchtui's own: newline-delimited JSON over one TCP connection per node (asyncio
streams), each message ``{"op": ..., ...}`` on one line. The frameworks' collectives carry gradients, not
telemetry: a node's runner events, its GPU samples and its run's end are what its benchtui already records
on one machine, so node k relays them as they are (``event``) and node 0 checks each again (``parse_line``)
and records it tagged ``node: k``. The frameworks meet on their own (torchrun's c10d store, TF_CONFIG's
workers, JAX's coordinator) at addresses node 0 hands out per run (``go``).

On node 0 the channel runs in a thread of its own (``Head``): the join happens before the session exists,
and the engine's loop only sees what arrives through ``call_soon_threadsafe``, as it sees the sampler's
samples. Node k runs everything on one loop (``Follower``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchtui.core.plan.nodes import Cluster
from benchtui.core.plan.plan import Plan, RunSpec
from benchtui.core.provenance import benchtui_version
from benchtui.core.running.engine import Engine
from benchtui.core.running.launcher import read_event_line
from benchtui.core.running.sampler import Sampler
from benchtui.core.running.source import Listener
from benchtui.core.store.session import SessionWriter, json_safe
from benchtui.core.wire.events import MAX_LINE_BYTES, Malformed, parse_line
from benchtui_runners.config import RunConfig, tf_config

#: The longest message read: an event line of the wire's longest, and the envelope around it.
MESSAGE_LIMIT = MAX_LINE_BYTES + 64 * 1024
#: How long node 0 waits, once its own runner ended, for the other nodes' ends of the same run.
RUN_END_GRACE_S = 30.0
#: Between two tries to reach node 0 (it may not listen yet).
RETRY_S = 0.2
#: A run on node k whose runner ended at another node's request: not that node's fault.
STOPPED = "stopped"
#: A node's run that ended so fails the run on every node (``diverged`` is the run's own: node 0's says it).
FAULTS = ("failed", "interrupted", "unavailable", "skipped")
#: Plan fields a node may differ in: where each machine's interpreters are.
LOCAL_FIELDS = ("python",)


class ClusterError(Exception):
    """The nodes could not meet (one line; the command exits 2 and nothing is left running)."""


class NodeLost(Exception):
    """A node went away, or did not answer: the reason, in one line."""


def address(host: str, port: int) -> str:
    """``host:port``, an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def free_port() -> int:
    """A TCP port free on every interface of this machine now (the framework binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def _words(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(_words(v) for v in value) or "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _first_difference(ours: Any, theirs: Any, where: str) -> tuple[str, Any, Any] | None:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in [*ours, *(k for k in theirs if k not in ours)]:
            if not where and key in LOCAL_FIELDS:
                continue
            found = _first_difference(ours.get(key), theirs.get(key), f"{where}.{key}" if where else str(key))
            if found is not None:
                return found
        return None
    return None if ours == theirs else (where, ours, theirs)


def plan_difference(ours: dict[str, Any], theirs: Any, node: int) -> str:
    """'' when node ``node``'s plan is node 0's, else one line naming the first difference."""
    if not isinstance(theirs, dict):
        return f"node {node} sent no plan"
    found = _first_difference(ours, theirs, "")
    if found is None:
        return ""
    key, mine, other = found
    return (
        f"node {node}'s plan differs from node 0's: {key} {_words(other)} on node {node}, "
        f"{_words(mine)} on node 0"
    )


def os_words(exc: OSError) -> str:
    """An OSError in words, without the call's details: 'connection refused', 'address already in use'."""
    return (os.strerror(exc.errno) if exc.errno else str(exc)).lower()


def _lost_words(node: int, host: str) -> str:
    return f"node {node} ({host}) was lost: its connection closed"


class Channel:
    """One node-to-node connection: a JSON object a line each way."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        peer = writer.get_extra_info("peername")
        self.peer = str(peer[0]) if isinstance(peer, tuple) and peer else ""

    def send(self, message: dict[str, Any]) -> None:
        """Queue ``message`` (sent as the loop gets to it); dropped once the connection is closed."""
        self.send_raw(json.dumps(message, separators=(",", ":"), allow_nan=False))

    def send_raw(self, text: str) -> None:
        if self.writer.is_closing():
            return
        with contextlib.suppress(ConnectionError, RuntimeError):
            self.writer.write(text.encode() + b"\n")

    async def flush(self) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        """The next message; None once the connection closed. A line that is no message (not JSON, no
        ``op``, longer than ``MESSAGE_LIMIT``) is ``{"op": "malformed"}``."""
        try:
            line = await read_event_line(self.reader)
        except (ConnectionError, OSError):
            return None
        if line == b"":
            return None
        try:
            message = json.loads(line) if line is not None else None
        except ValueError:
            message = None
        if isinstance(message, dict) and isinstance(message.get("op"), str):
            return message
        return {"op": "malformed"}

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.writer.close()


async def _open(host: str, port: int) -> Channel:
    reader, writer = await asyncio.open_connection(host, port, limit=MESSAGE_LIMIT)
    return Channel(reader, writer)


# -- node 0 ------------------------------------------------------------------------------------------------
@dataclass
class Member:
    """A node that joined node 0: who it is, and the connection to it."""

    node: int
    host: str
    address: str
    pid: int
    gpus: list[Any]
    logs_root: str
    offset: float  # node 0's monotonic clock minus this node's
    channel: Channel
    lost: str = ""

    def meta(self, session_id: str) -> dict[str, Any]:
        return {
            "node": self.node,
            "host": self.host,
            "address": self.address,
            "pid": self.pid,
            "gpus": self.gpus,
            "logs": str(Path(self.logs_root) / f"{session_id}-node{self.node}") if self.logs_root else "",
        }


def _whole(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


class Head:
    """Node 0's side of the channel, on a loop in a thread of its own: ``listen``, ``gather`` (blocking, before
    the session exists), ``welcome``; then, for ``HeadEngine``, each run's ``prepare`` and what arrives."""

    def __init__(self, cluster: Cluster, plan: Plan) -> None:
        self.cluster = cluster
        self.plan = plan.to_dict()
        self.members: dict[int, Member] = {}
        self.session_id = ""
        self.engine: HeadEngine | None = None
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="benchtui-nodes", daemon=True)
        self._server: asyncio.Server | None = None
        self._changed: asyncio.Event | None = None
        self._failure = ""
        self._ready: dict[str, dict[int, asyncio.Future[int]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.ended = False

    # -- from the main thread ---------------------------------------------------------------------------
    def _call(self, coro: Any, timeout: float | None = None) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def listen(self) -> None:
        """Listen on every interface at the rendezvous port; ClusterError when it cannot."""
        self._thread.start()
        self._call(self._listen())

    def gather(self) -> None:
        """Wait until every other node joined with node 0's plan; ClusterError (one line) when one did not
        within the timeout, or was refused. Interruptible (KeyboardInterrupt)."""
        future = asyncio.run_coroutine_threadsafe(self._gather(), self.loop)
        while True:
            try:
                future.result(0.2)
                return
            except concurrent.futures.TimeoutError:
                continue

    def welcome(self, session_id: str) -> None:
        """The session exists: tell every node its id, and start reading what they send."""
        self.session_id = session_id
        self._call(self._welcome())

    def nodes_meta(self) -> list[dict[str, Any]]:
        return [m.meta(self.session_id) for _, m in sorted(self.members.items())]

    def send(self, node: int, message: dict[str, Any]) -> None:
        """Send from any thread."""
        member = self.members.get(node)
        if member is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(member.channel.send, message)

    def prepare_future(self, spec: RunSpec) -> concurrent.futures.Future[dict[str, Any]]:
        return asyncio.run_coroutine_threadsafe(self._prepare(spec), self.loop)

    def end(self, status: str) -> None:
        """The session ended: tell every node (they exit), then close."""
        if self.ended or self.loop.is_closed() or not self._thread.is_alive():
            return
        self.ended = True
        with contextlib.suppress(Exception):
            self._call(self._end({"op": "end", "status": status}), timeout=10)

    def refuse(self, reason: str) -> None:
        """Node 0 gives up before the session: every node that joined hears why."""
        if self.ended or self.loop.is_closed() or not self._thread.is_alive():
            return
        self.ended = True
        with contextlib.suppress(Exception):
            self._call(self._end({"op": "refused", "reason": reason}), timeout=10)

    def close(self) -> None:
        """Stop listening, close every connection, and stop the thread."""
        if self.loop.is_closed():
            return
        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                self._call(self._close(), timeout=10)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()

    # -- on the channel's loop ----------------------------------------------------------------------------
    async def _listen(self) -> None:
        self._changed = asyncio.Event()
        try:
            self._server = await asyncio.start_server(
                self._on_connect, host=None, port=self.cluster.port, limit=MESSAGE_LIMIT, reuse_address=True
            )
        except OSError as exc:
            raise ClusterError(f"cannot listen on {self.cluster.address}: {os_words(exc)}") from None

    async def _gather(self) -> None:
        assert self._changed is not None
        deadline = time.monotonic() + self.cluster.timeout_s
        want = set(range(1, self.cluster.nodes))
        while not self._failure and set(self.members) != want:
            left = deadline - time.monotonic()
            if left <= 0:
                missing = min(want - set(self.members))
                raise ClusterError(
                    f"node {missing} did not join the rendezvous at {self.cluster.address} within "
                    f"{self.cluster.timeout_s:g} s"
                )
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)
        if self._failure:
            raise ClusterError(self._failure)

    def _refusal(self, hello: dict[str, Any]) -> str:
        node = hello.get("node")
        if not isinstance(node, int) or not _whole(node, 1, 1 << 20):
            return f"a node joined with no node rank ({node!r})"
        if node >= self.cluster.nodes:
            return f"node {node} joined a rendezvous of {self.cluster.nodes} nodes (ranks 0 to {self.cluster.nodes - 1})"
        if node in self.members:
            return f"node {node} joined twice (from {self.members[node].address} and another)"
        return plan_difference(self.plan, hello.get("plan"), node)

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        channel = Channel(reader, writer)
        try:
            hello = await asyncio.wait_for(channel.receive(), max(1.0, self.cluster.timeout_s))
        except asyncio.TimeoutError:
            hello = None
        if hello is None or hello.get("op") != "hello" or self._failure or self.session_id:
            channel.close()
            return
        reason = self._refusal(hello)
        if reason:
            channel.send({"op": "refused", "reason": reason})
            await channel.flush()
            channel.close()
            self._failure = self._failure or reason  # refused on both sides
            if self._changed is not None:
                self._changed.set()
            return
        sent_t = hello.get("t")
        node = int(hello.get("node") or 0)
        gpus = hello.get("gpus")
        member = Member(
            node=node,
            host=str(hello.get("host") or channel.peer)[:200],
            address=channel.peer,
            pid=hello["pid"] if _whole(hello.get("pid"), 0, 1 << 31) else 0,
            gpus=gpus if isinstance(gpus, list) else [],
            logs_root=str(hello.get("logs_root") or "")[:4096],
            offset=time.monotonic() - sent_t if isinstance(sent_t, (int, float)) else 0.0,
            channel=channel,
        )
        self.members[node] = member
        if self._changed is not None:
            self._changed.set()
        # Until the welcome, a node that leaves is forgotten (it may come back).
        task = asyncio.ensure_future(self._watch_unwelcomed(member))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _watch_unwelcomed(self, member: Member) -> None:
        while not self.session_id and not self.ended:
            if member.channel.reader.at_eof():
                if self.members.get(member.node) is member:
                    del self.members[member.node]
                return
            await asyncio.sleep(0.1)

    async def _welcome(self) -> None:
        if self._server is not None:
            self._server.close()  # nobody else joins
        nodes = self.nodes_meta()
        for member in self.members.values():
            member.channel.send({"op": "welcome", "session": self.session_id, "nodes": nodes})
            task = asyncio.ensure_future(self._read(member))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _read(self, member: Member) -> None:
        """Everything node ``member`` sends, until its connection closes (then it is lost)."""
        channel = member.channel
        while True:
            message = await channel.receive()
            if message is None:
                break
            op = message.get("op")
            if op == "malformed" and self.engine is not None:
                self.engine.call(self.engine.relayed_malformed, None)
            elif op == "event":
                self._relay(member, message.get("event"))
            elif op == "ready":
                futures = self._ready.get(str(message.get("run")), {})
                future = futures.get(member.node)
                port = message.get("port")
                if future is not None and not future.done():
                    if isinstance(port, int) and _whole(port, 1, 65535):
                        future.set_result(port)
                    else:
                        future.set_exception(NodeLost(f"node {member.node} ({member.host}) sent no port"))
        if self.ended:
            return
        member.lost = _lost_words(member.node, member.host)
        for futures in self._ready.values():
            future = futures.get(member.node)
            if future is not None and not future.done():
                future.set_exception(NodeLost(member.lost))
        engine = self.engine
        if engine is not None:
            engine.call(engine.node_lost, member.node, member.lost)

    def _relay(self, member: Member, raw: Any) -> None:
        """One event node k recorded: checked again, its clock moved onto node 0's, tagged, handed over."""
        engine = self.engine
        if engine is None:
            return
        run = raw.get("run") if isinstance(raw, dict) else None
        try:
            if not isinstance(raw, dict):
                raise Malformed("not an object")
            if isinstance(raw.get("t"), (int, float)) and not isinstance(raw.get("t"), bool):
                raw["t"] = raw["t"] + member.offset
            raw.pop("node", None)
            event = parse_line(json.dumps(raw, separators=(",", ":"), allow_nan=False))
        except (Malformed, ValueError, TypeError):
            engine.call(engine.relayed_malformed, run if isinstance(run, str) else None)
            return
        event["node"] = member.node
        engine.call(engine.node_event, member.node, event)

    async def _prepare(self, spec: RunSpec) -> dict[str, Any]:
        """``prepare`` to the run's other nodes, their ``ready`` (each with a free port), then ``go`` with
        where the frameworks meet; the go message (NodeLost when a node is gone or does not answer)."""
        nodes = range(1, spec.nodes)
        for k in nodes:
            if self.members[k].lost:
                raise NodeLost(self.members[k].lost)
        futures = {k: self.loop.create_future() for k in nodes}
        self._ready[spec.run_id] = futures
        try:
            for k in nodes:
                self.members[k].channel.send({"op": "prepare", "run": spec.run_id})
            ports: dict[int, int] = {}
            for k in nodes:
                try:
                    ports[k] = await asyncio.wait_for(futures[k], self.cluster.timeout_s)
                except asyncio.TimeoutError:
                    member = self.members[k]
                    raise NodeLost(
                        f"node {k} ({member.host}) did not answer within {self.cluster.timeout_s:g} s"
                    ) from None
        finally:
            del self._ready[spec.run_id]
        go = {
            "op": "go",
            "run": spec.run_id,
            "rendezvous": address(self.cluster.host, free_port()),
            "cluster": [
                address(self.cluster.host, free_port()),
                *(address(self.members[k].address, ports[k]) for k in nodes),
            ],
            "rendezvous_id": f"benchtui-{self.session_id}-{spec.run_id}"[:200],
        }
        for k in nodes:
            self.members[k].channel.send(go)
        return go

    async def _end(self, message: dict[str, Any]) -> None:
        for member in self.members.values():
            member.channel.send(message)
        for member in self.members.values():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(member.channel.flush(), 5)

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for member in self.members.values():
            member.channel.close()
        for task in list(self._tasks):
            task.cancel()


def set_meeting(config: RunConfig, env: dict[str, str], node: int, go: dict[str, Any]) -> None:
    """A run's configuration on node ``node`` from node 0's ``go``: where its framework meets the others."""
    config.node_rank = node
    config.rendezvous = str(go.get("rendezvous") or "")
    config.cluster = [str(x) for x in go.get("cluster") or []]
    config.rendezvous_id = str(go.get("rendezvous_id") or "")
    if config.framework == "tensorflow":
        env["TF_CONFIG"] = tf_config(config)


@dataclass
class _RunAcross:
    """What node 0 knows of the run in progress on several nodes."""

    spec: RunSpec
    ends: dict[int, tuple[str, str]] = field(default_factory=dict)
    fault: str = ""
    #: Each failure of another node's run: (when it ended, on node 0's clock; its reason).
    faults: list[tuple[float, str]] = field(default_factory=list)
    aborted: bool = False
    own_done: bool = False
    settled: asyncio.Event = field(default_factory=asyncio.Event)


class HeadEngine(Engine):
    """Node 0's engine: the plan's runs in order as on one node, each run on several nodes met through
    ``Head`` and ended only once every node's run ended; the other nodes' events recorded node-tagged."""

    def __init__(self, plan: Plan, writer: SessionWriter, head: Head, **kwargs: Any) -> None:
        super().__init__(plan, writer, **kwargs)
        self.head = head
        head.engine = self
        self._across: _RunAcross | None = None
        self._relayed_bad: dict[str | None, int] = {}
        self._lost = ""  # the first node lost: every later run fails with it

    def call(self, fn: Callable[..., object], *args: Any) -> None:
        """Run ``fn(*args)`` on the engine's loop (from the channel's thread)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(fn, *args)

    def _begin(self) -> None:
        super()._begin()
        gpus = self.writer.meta.get("gpus") or []
        own = {
            "node": 0,
            "host": socket.gethostname(),
            "address": self.head.cluster.host,
            "pid": os.getpid(),
            "gpus": gpus,
            "logs": str(self.writer.folder.logs_dir.absolute()),
        }
        self._write(self.writer.update_meta, nodes=[own, *self.head.nodes_meta()])

    def _end(self) -> None:
        super()._end()
        self.head.end(self.status)

    # -- what the other nodes send (on the engine's loop) ---------------------------------------------
    def relayed_malformed(self, run: str | None) -> None:
        """A line another node sent that was no event: counted in the run's run_end (the run in progress
        when it names none, or one that is not the plan's)."""
        if (run is None or run not in self.model.runs) and self._across is not None:
            run = self._across.spec.run_id
        self._relayed_bad[run] = self._relayed_bad.get(run, 0) + 1

    def node_event(self, node: int, event: dict[str, Any]) -> None:
        run = event.get("run")
        if run is not None and run not in self.model.runs:
            self.relayed_malformed(run)
            return
        self._record(event)
        across = self._across
        if event["type"] != "run_end" or across is None or run != across.spec.run_id:
            return
        status, reason = str(event.get("status")), str(event.get("reason") or "")
        across.ends[node] = (status, reason)
        if status in FAULTS:  # a run node 0 stopped ends "stopped" there: not that node's fault
            host = self.head.members[node].host
            self._fault(across, f"node {node} ({host}): {reason or status}", float(event["t"]))
        self._check_settled(across)

    def node_lost(self, node: int, reason: str) -> None:
        self._lost = self._lost or reason
        across = self._across
        if across is not None and node < across.spec.nodes and node not in across.ends:
            across.ends[node] = ("failed", reason)
            self._fault(across, reason, time.monotonic())
            self._check_settled(across)

    def _fault(self, across: _RunAcross, reason: str, when: float) -> None:
        """A node's run failed, or a node was lost: node 0's runner stops at once, and the others'."""
        across.faults.append((when, reason))
        if across.fault:
            return
        across.fault = reason
        self._abort(across, reason)
        if not across.own_done and self.current is not None:
            asyncio.ensure_future(self.current.terminate())

    def _abort(self, across: _RunAcross, reason: str) -> None:
        if across.aborted:
            return
        across.aborted = True
        for k in range(1, across.spec.nodes):
            if k not in across.ends:
                self.head.send(k, {"op": "abort", "run": across.spec.run_id, "reason": reason})

    def _check_settled(self, across: _RunAcross) -> None:
        if across.own_done and all(k in across.ends for k in range(1, across.spec.nodes)):
            across.settled.set()

    # -- the run's hooks --------------------------------------------------------------------------------
    async def _run_one(self, spec: RunSpec) -> None:
        if self._lost:
            self._parent_event("run_end", spec.run_id, status="failed", reason=self._lost)
            return
        await super()._run_one(spec)

    async def _meet(self, spec: RunSpec, config: RunConfig, env: dict[str, str]) -> str:
        self._across = _RunAcross(spec)
        try:
            go = await asyncio.wrap_future(self.head.prepare_future(spec))
        except NodeLost as exc:
            self._lost = self._lost or str(exc)
            self._abort(self._across, str(exc))
            self._across = None
            return str(exc)
        set_meeting(config, env, 0, go)
        return ""

    async def _settle(self, spec: RunSpec, status: str, reason: str) -> tuple[str, str]:
        across = self._across
        if across is None:
            return status, reason
        across.own_done, ended = True, time.monotonic()
        if status not in ("ok", "diverged") and not across.fault:
            self._abort(across, f"node 0: {reason or status}")
        self._check_settled(across)
        try:
            await asyncio.wait_for(across.settled.wait(), RUN_END_GRACE_S)
        except asyncio.TimeoutError:
            missing = [k for k in range(1, spec.nodes) if k not in across.ends]
            words = f"node {missing[0]} ({self.head.members[missing[0]].host}) did not finish the run"
            across.faults.append((time.monotonic(), words))
            self._abort(across, words)
        finally:
            self._across = None
        if not across.faults or status in ("stopped", "interrupted"):
            return status, reason
        # The run failed on several nodes: the first to fail is its cause (a node killed takes its peers'
        # collectives down with it), node 0 included when its own runner failed first.
        when, why = min(across.faults)
        if status in ("ok", "diverged") or when <= ended:
            return "failed", why
        return status, reason

    def _end_run(
        self,
        spec: RunSpec,
        status: str,
        reason: str,
        returncode: int | None,
        malformed: int,
        log_problem: str | None = None,
    ) -> None:
        malformed += self._relayed_bad.pop(spec.run_id, 0)
        super()._end_run(spec, status, reason, returncode, malformed, log_problem)


# -- node k ----------------------------------------------------------------------------------------------
class RelayWriter(SessionWriter):
    """Node k's stand-in for a session: every event goes to node 0, its runners' logs to a folder of its own."""

    def __init__(self, path: Path, plan: Plan, channel: Channel) -> None:  # no session folder: no super()
        self.path = path
        self.channel = channel
        self.failure = ""
        self.lines = 0
        self.meta = {"plan": plan.to_dict()}
        self._closed = False

    def write_meta(self) -> None:
        pass

    def log_path(self, run_id: str) -> Path:
        return self.path / f"{run_id}.log"

    def trace_path(self, run_id: str) -> Path:
        return (self.path / f"{run_id}.trace").absolute()

    def append(self, event: dict[str, Any]) -> None:
        if not self._closed:
            self.channel.send({"op": "event", "event": json_safe(event)})  # as a session writes it

    def append_raw(self, line: str) -> None:
        if not self._closed:
            self.channel.send_raw('{"op":"event","event":' + line + "}")

    def finish(self, status: str, summary: dict[str, Any]) -> None:
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True


class Follower(Engine):
    """Node k's engine: no plan order of its own; each run node 0 prepares is started on its ``go``, and
    everything it would record goes to node 0 (``RelayWriter``). ``exit_code`` says how the session ended."""

    def __init__(
        self,
        plan: Plan,
        cluster: Cluster,
        sessions_root: Path,
        sampler: Sampler | None = None,
        listener: Listener | None = None,
        launcher: Any = None,
        gpus: list[dict[str, Any]] | None = None,
    ) -> None:
        self.cluster = cluster
        self.sessions_root = sessions_root
        self._gpus = gpus or []
        self.channel: Channel | None = None
        self._plan = plan
        self._listener, self._sampler, self._launcher = listener, sampler, launcher
        self.end_status = ""
        self.lost = ""
        self._go: dict[str, dict[str, Any]] = {}
        self._aborts: dict[str, str] = {}
        self._runs: set[asyncio.Task[None]] = set()
        self._leaving = asyncio.Event()

    async def join(self) -> None:
        """Reach node 0 (retrying until the timeout), say who this node is, and wait for its welcome:
        ClusterError (one line) when node 0 cannot be reached, or refuses."""
        cluster = self.cluster
        deadline = time.monotonic() + cluster.timeout_s
        why = "no answer"
        channel: Channel | None = None
        while channel is None:
            try:
                channel = await asyncio.wait_for(
                    _open(cluster.host, cluster.port), max(0.1, deadline - time.monotonic())
                )
            except asyncio.TimeoutError:
                why = "no answer"
            except OSError as exc:
                why = os_words(exc)
            if channel is None:
                if time.monotonic() + RETRY_S >= deadline:
                    raise ClusterError(
                        f"cannot reach node 0 at {cluster.address} within {cluster.timeout_s:g} s: {why}"
                    )
                await asyncio.sleep(RETRY_S)
        channel.send(
            {
                "op": "hello",
                "node": cluster.node_rank,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "version": benchtui_version(),
                "plan": self._plan.to_dict(),
                "gpus": self._gpus,
                "logs_root": str(self.sessions_root.absolute()),
                "t": time.monotonic(),
            }
        )
        # Node 0 waits for every node before it welcomes any: as long as its own timeout, and a little.
        try:
            answer = await asyncio.wait_for(channel.receive(), cluster.timeout_s + 30)
        except asyncio.TimeoutError:
            answer = None
        if answer is None:
            channel.close()
            raise ClusterError(
                f"node 0 at {cluster.address} closed the connection before the session started"
            )
        if answer.get("op") != "welcome":
            channel.close()
            raise ClusterError(str(answer.get("reason") or "node 0 refused this node"))
        session = str(answer.get("session") or "session")
        path = self.sessions_root / f"{os.path.basename(session)}-node{cluster.node_rank}"
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            channel.close()
            raise ClusterError(f"cannot make {path}: {exc.strerror}") from None
        self.channel = channel
        super().__init__(
            self._plan,
            RelayWriter(path, self._plan, channel),
            listener=self._listener,
            sampler=self._sampler,
            launcher=self._launcher,
        )
        self._specs = {spec.run_id: spec for spec in self.specs}

    @property
    def exit_code(self) -> int:
        return 0 if self.end_status == "complete" and not self.lost else 1

    async def run(self) -> str:
        """Follow node 0 until it ends the session (or is lost); return node 0's status."""
        try:
            await self.measure_cpu()
            self._begin()
            await self._follow()
        except asyncio.CancelledError:
            self._cancelled = True
            raise
        except Exception as exc:
            self.crashed(exc)
        finally:
            if self.current is not None:
                self.current.kill_now()
            for task in list(self._runs):
                task.cancel()
            self._end()
            if self.channel is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.channel.flush(), 5)
                self.channel.close()
        return self.end_status or ("interrupted" if self._cancelled else "failed")

    def cancel(self) -> None:
        """Ctrl+C on this node: its runner stopped, its run's end ("interrupted") sent, then it leaves
        (node 0 fails the run with that reason, and every later one: this node is gone)."""
        super().cancel()
        self._leaving.set()

    async def _follow(self) -> None:
        assert self.channel is not None
        channel = self.channel
        receiving = asyncio.ensure_future(channel.receive())
        leaving = asyncio.ensure_future(self._leaving.wait())
        while True:
            await asyncio.wait({receiving, leaving}, return_when=asyncio.FIRST_COMPLETED)
            if leaving.done():
                receiving.cancel()
                break
            message = receiving.result()
            if message is None:
                if not self._cancelled:
                    self.lost = f"node 0 at {self.cluster.address} was lost: its connection closed"
                    self.error = self.error or self.lost
                    if self.current is not None:
                        await self.current.terminate()
                break
            receiving = asyncio.ensure_future(channel.receive())
            op, run = message.get("op"), str(message.get("run"))
            if op == "prepare" and run in self._specs:
                channel.send({"op": "ready", "run": run, "port": free_port()})
            elif op == "go" and run in self._specs:
                self._go[run] = message
                task = asyncio.ensure_future(self._run_one(self._specs[run]))
                self._runs.add(task)
                task.add_done_callback(self._runs.discard)
            elif op == "abort":
                self._aborts[run] = str(message.get("reason") or "")
                if (
                    self.current is not None
                    and self.current_spec is not None
                    and self.current_spec.run_id == run
                ):
                    await self.current.terminate()
            elif op == "end":
                self.end_status = str(message.get("status") or "")
                receiving.cancel()
                break
        leaving.cancel()
        if self._runs:
            await asyncio.gather(*self._runs, return_exceptions=True)

    async def _meet(self, spec: RunSpec, config: RunConfig, env: dict[str, str]) -> str:
        if spec.run_id in self._aborts:
            return f"stopped by node 0: {self._aborts[spec.run_id]}"
        set_meeting(config, env, self.cluster.node_rank, self._go.pop(spec.run_id, {}))
        return ""

    async def _settle(self, spec: RunSpec, status: str, reason: str) -> tuple[str, str]:
        if spec.run_id in self._aborts and status != "ok":
            return STOPPED, f"stopped by node 0: {self._aborts[spec.run_id]}"
        return status, reason
