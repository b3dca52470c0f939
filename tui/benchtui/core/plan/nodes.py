"""Where this benchtui stands among several machines (issue 33): how many nodes, its rank, where they meet.

Every node runs the same plan (``Plan.nodes`` is the plan's); which node this process is and the address
of node 0's benchtui are not the plan's: they are a ``Cluster``, read from ``--nodes N --node-rank R
--rendezvous HOST:PORT`` or, with ``--nodes slurm``, from Slurm's variables (``SLURM_NNODES``,
``SLURM_NODEID``, the first host of ``SLURM_JOB_NODELIST``, expanded as ``scontrol show hostnames`` does).

Node 0's benchtui listens at the rendezvous address and records the session; the others join it
(``benchtui.core.running.cluster``). Standard library only.
"""

from __future__ import annotations

import ipaddress
import itertools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchtui.core.plan.errors import PlanError

#: The rendezvous port when none is named (``--nodes slurm`` with no ``--rendezvous``): torchrun's own.
DEFAULT_PORT = 29400
#: How long a node waits for the others at the rendezvous before it gives up (``--node-timeout``).
JOIN_TIMEOUT_S = 300.0
#: The longest ``--node-timeout`` (seconds): a week; beyond it a typo, not a queue.
MAX_JOIN_TIMEOUT_S = 7 * 86400.0
#: ``--nodes slurm``: the word that reads the nodes from Slurm's variables.
SLURM = "slurm"
#: Slurm's variables, each list in the order read: the job step's first (``srun --nodes 2`` inside a larger
#: allocation: SLURM_NODEID counts the step's nodes, and its node 0 is the step's first host), then the
#: job's. ``srun`` sets SLURM_NNODES and SLURM_NODELIST to the step's; sbatch's script sees the job's.
SLURM_COUNTS = ("SLURM_NNODES", "SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES")
SLURM_LISTS = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
SLURM_RANK = "SLURM_NODEID"
#: The most hosts one bracket range may name, as Slurm's hostlist.c (MAX_RANGE): beyond it, a typo.
MAX_RANGE = 64 * 1024
#: The most hosts a whole list may expand to (a product of several bracket groups included).
MAX_HOSTS = 64 * 1024
#: A host name as a node's address may be spelled: RFC 1123 labels (letters, digits, '-', '.'), and '_',
#: which sites use; an IPv4 address is one too. An IPv6 address goes in brackets.
HOST_RE = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?$")


@dataclass(frozen=True)
class Cluster:
    """This process's place among ``nodes`` machines: its ``node_rank`` (0 records the session) and node 0's
    benchtui's address (``host``:``port``), waited for at most ``timeout_s``; ``source``: "flags" or "slurm"."""

    nodes: int
    node_rank: int
    host: str
    port: int
    timeout_s: float = JOIN_TIMEOUT_S
    source: str = "flags"

    @property
    def address(self) -> str:
        """``host:port`` (an IPv6 host in brackets)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def is_head(self) -> bool:
        """Node 0: it listens, runs the plan's order and records the session."""
        return self.node_rank == 0


# -- Slurm's host lists, as `scontrol show hostnames` expands them ----------------------------------------
def expand_hostlist(text: str) -> list[str]:
    """The hosts a Slurm host list names, in its order, as ``scontrol show hostnames`` prints them.

    ``node[01-03,07]`` -> node01 node02 node03 node07 (a range's numbers as wide as its first one is
    written: ``[8-10]`` -> 8 9 10, ``[08-10]`` -> 08 09 10); ``a[1-2],b3`` -> a1 a2 b3 (commas or spaces
    between hosts, outside brackets); ``rack[1-2]-n[01-02]`` -> rack1-n01 rack1-n02 rack2-n01 rack2-n02
    (several bracket groups: every combination, the first group changing slowest); text after the last
    bracket is kept (``gpu[1-2]-ib``). Repeats are kept, nothing is sorted. A malformed list (an unclosed or
    nested bracket, an empty range, a range that runs backwards, a letter in it) is a PlanError naming it.
    """
    hosts: list[str] = []
    for word in _split_hosts(text):
        hosts.extend(_expand_host(word, text))
        if len(hosts) > MAX_HOSTS:
            raise PlanError(f"the host list {text!r} names more than {MAX_HOSTS:,} hosts")
    if not hosts:
        raise PlanError(f"the host list {text!r} names no host")
    return hosts


def _split_hosts(text: str) -> list[str]:
    """``a[1-2],b3 c`` -> ['a[1-2]', 'b3', 'c']: commas and blanks separate hosts outside brackets."""
    words, word, depth = [], "", 0
    for char in text:
        if char == "[":
            depth += 1
            if depth > 1:
                raise PlanError(f"the host list {text!r} has a bracket inside a bracket")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise PlanError(f"the host list {text!r} closes a bracket it never opened")
        if depth == 0 and (char == "," or char.isspace()):
            words.append(word)
            word = ""
        else:
            word += char
    if depth:
        raise PlanError(f"the host list {text!r} leaves a bracket open")
    words.append(word)
    return [w for w in words if w]


def _expand_host(word: str, text: str) -> list[str]:
    """``rack[1-2]-n[01-02]`` -> its hosts: the literal parts between the bracket groups, and each group's
    numbers, combined in order (the first group changing slowest, as Slurm's hostlist.c does)."""
    parts = re.split(r"\[([^\]]*)\]", word)  # literal, group, literal, group, ..., literal
    literals, groups = parts[0::2], parts[1::2]
    numbers = [_expand_ranges(group, text) for group in groups]
    if math.prod(len(n) for n in numbers) > MAX_HOSTS:
        raise PlanError(f"the host list {text!r} names more than {MAX_HOSTS:,} hosts")
    hosts = []
    for combination in itertools.product(*numbers):
        host = literals[0]
        for number, literal in zip(combination, literals[1:], strict=True):
            host += number + literal
        hosts.append(host)
    return hosts


def _expand_ranges(group: str, text: str) -> list[str]:
    """``01-03,07`` -> ['01', '02', '03', '07']: each range's numbers as wide as its first is written."""
    numbers: list[str] = []
    for item in group.split(","):
        item = item.strip()
        lo, dash, hi = item.partition("-")
        if not lo.isdigit() or not lo.isascii() or (dash and not (hi.isdigit() and hi.isascii())):
            raise PlanError(f"the host list {text!r} has a range that is not N or N-M: [{group}]")
        first, last = int(lo), int(hi) if dash else int(lo)
        if last < first:
            raise PlanError(f"the host list {text!r} has a range that runs backwards: {item}")
        if last - first + 1 > MAX_RANGE:
            raise PlanError(f"the host list {text!r} names more than {MAX_RANGE:,} hosts in {item}")
        numbers.extend(f"{n:0{len(lo)}d}" for n in range(first, last + 1))
    return numbers


# -- Slurm's variables ------------------------------------------------------------------------------------
def _first_set(environ: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str] | None:
    """The first of ``names`` set (and not blank) in ``environ``: (name, value)."""
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            return name, value
    return None


def _slurm_whole(name: str, value: str, least: int) -> int:
    if not (value.isdigit() and value.isascii()) or int(value) < least:
        raise PlanError(f"--nodes slurm: {name} must be a whole number of at least {least}, got {value!r}")
    return int(value)


def slurm_nodes(environ: Mapping[str, str]) -> int:
    """``--nodes slurm``: the nodes of the job step this benchtui runs in (SLURM_NNODES, else
    SLURM_STEP_NUM_NODES, else SLURM_JOB_NUM_NODES); PlanError outside Slurm, naming the variable."""
    found = _first_set(environ, SLURM_COUNTS)
    if found is None:
        raise PlanError(
            f"--nodes slurm reads {SLURM_COUNTS[0]}, which is not set (nor {', '.join(SLURM_COUNTS[1:])}): "
            "start benchtui with srun inside a Slurm job, or give --nodes N"
        )
    return _slurm_whole(*found, least=1)


def slurm_place(environ: Mapping[str, str], nodes: int) -> tuple[int, str]:
    """``--nodes slurm``: this node's rank (SLURM_NODEID) and node 0's host (the first of the job step's
    node list, expanded as ``scontrol show hostnames`` does), checked against ``nodes``."""
    rank_text = environ.get(SLURM_RANK, "").strip()
    if not rank_text:
        raise PlanError(
            f"--nodes slurm reads this node's rank from {SLURM_RANK}, which is not set: start benchtui with "
            "srun (one task per node), not from the batch script itself"
        )
    rank = _slurm_whole(SLURM_RANK, rank_text, least=0)
    count_name = (_first_set(environ, SLURM_COUNTS) or (SLURM_COUNTS[0], ""))[0]
    if rank >= nodes:
        raise PlanError(
            f"--nodes slurm: {SLURM_RANK} {rank} is beyond {count_name} {nodes}: ranks go 0 to {nodes - 1}"
        )
    found = _first_set(environ, SLURM_LISTS)
    if found is None:
        raise PlanError(
            f"--nodes slurm reads node 0's host from {SLURM_LISTS[1]}, which is not set (nor "
            f"{', '.join(n for n in SLURM_LISTS if n != SLURM_LISTS[1])}): start benchtui with srun inside a "
            "Slurm job, or give --rendezvous HOST:PORT"
        )
    name, text = found
    try:
        hosts = expand_hostlist(text)
    except PlanError as exc:
        raise PlanError(f"--nodes slurm: {name}: {exc}") from None
    if len(hosts) < nodes:
        raise PlanError(
            f"--nodes slurm: {name} names {len(hosts)} host{'s' if len(hosts) != 1 else ''} ({text}), and "
            f"{count_name} says {nodes}"
        )
    return rank, hosts[0]


# -- the command line -------------------------------------------------------------------------------------
def parse_rendezvous(text: str, default_host: str | None = None) -> tuple[str, int]:
    """``--rendezvous``: HOST:PORT, [IPV6]:PORT, or (with ``default_host``, node 0's host from Slurm) a bare
    PORT; (host, port), the host without brackets. PlanError, one line, for anything else."""
    said = text.strip()
    flag = f"--rendezvous {said!r}"
    if said.isdigit():
        if default_host is None:
            raise PlanError(f"{flag}: give node 0's address and a port, HOST:PORT (as 10.0.0.1:{said})")
        return default_host, _port(said, flag)
    if said.startswith("["):
        inside, closed, rest = said[1:].partition("]")
        if not closed or not rest.startswith(":"):
            raise PlanError(f"{flag}: an IPv6 address takes the form [ADDRESS]:PORT, as [::1]:{DEFAULT_PORT}")
        try:
            ipaddress.IPv6Address(inside)
        except ValueError:
            raise PlanError(f"{flag}: {inside!r} is not an IPv6 address") from None
        return inside, _port(rest[1:], flag)
    host, colon, port = said.rpartition(":")
    if not colon:
        raise PlanError(f"{flag}: give node 0's address and a port, HOST:PORT (as {said}:{DEFAULT_PORT})")
    if ":" in host:
        raise PlanError(f"{flag}: an IPv6 address goes in brackets, as [{host}]:{port}")
    if not HOST_RE.match(host):
        raise PlanError(f"{flag}: {host!r} is not a host name or an IPv4 address")
    return host, _port(port, flag)


def _port(text: str, flag: str) -> int:
    if not (text.isdigit() and text.isascii()) or not 1 <= int(text) <= 65535:
        raise PlanError(f"{flag}: the port must be a whole number from 1 to 65535, got {text!r}")
    return int(text)


def cluster_from_args(args: Any, environ: Mapping[str, str]) -> Cluster | None:
    """Where this benchtui stands, from ``--nodes``, ``--node-rank``, ``--rendezvous`` and ``--node-timeout``
    (with ``--nodes slurm``, from Slurm's variables in ``environ``): a Cluster, or None on one node.
    PlanError, one line, for flags that do not go together or an address that is not one."""
    nodes = getattr(args, "nodes", None)
    rank = getattr(args, "node_rank", None)
    rendezvous = getattr(args, "rendezvous", None)
    timeout = getattr(args, "node_timeout", None)
    slurm = getattr(args, "nodes_from", "flags") == SLURM
    if nodes is None:
        for flag, value in (("--node-rank", rank), ("--rendezvous", rendezvous), ("--node-timeout", timeout)):
            if value is not None:
                raise PlanError(
                    f"{flag} places this benchtui among several machines: add --nodes N (or --nodes slurm)"
                )
        return None
    if nodes == SLURM:  # a namespace the command line's parser did not read (it resolves the count)
        nodes, slurm = slurm_nodes(environ), True
    if timeout is None:
        timeout = JOIN_TIMEOUT_S
    elif not (isinstance(timeout, (int, float)) and 0 < timeout <= MAX_JOIN_TIMEOUT_S):
        raise PlanError(
            f"--node-timeout must be a number of seconds above 0, at most {MAX_JOIN_TIMEOUT_S:,.0f}, "
            f"got {timeout!r}"
        )
    if slurm:
        if rank is not None:
            raise PlanError(
                f"--nodes slurm reads this node's rank from {SLURM_RANK}: drop --node-rank {rank}"
            )
        if nodes == 1:  # a job of one node: nothing to meet (its batch script may run benchtui itself)
            return None
        rank, head = slurm_place(environ, nodes)
        host, port = parse_rendezvous(rendezvous, head) if rendezvous is not None else (head, DEFAULT_PORT)
        return Cluster(nodes, rank, host, port, float(timeout), SLURM)
    if rank is not None and not 0 <= rank < nodes:
        raise PlanError(
            f"--node-rank {rank} is beyond --nodes {nodes}: "
            + (f"ranks go 0 to {nodes - 1}" if nodes > 1 else "one node is node 0")
        )
    if nodes == 1:
        return None
    if rendezvous is None:
        raise PlanError(
            f"--nodes {nodes} needs --rendezvous HOST:PORT: node 0's address and a free port on it, the same "
            "on every node"
        )
    host, port = parse_rendezvous(rendezvous)
    if rank is None:
        raise PlanError(
            f"--nodes {nodes} needs --node-rank R on each node: 0 on the machine at {host} (it records the "
            f"session), 1 to {nodes - 1} on the others"
        )
    return Cluster(nodes, rank, host, port, float(timeout))
