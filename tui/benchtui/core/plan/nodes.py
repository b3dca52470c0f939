"""Where this benchtui stands among several machines (issue 33): how many nodes, its rank, where they meet.

Every node runs the same plan (``Plan.nodes`` is the plan's); which node this process is and the address
of node 0's benchtui are not the plan's: they are a ``Cluster``, read from ``--nodes N --node-rank R
--rendezvous HOST:PORT`` or, with ``--nodes slurm``, from Slurm's variables (``SLURM_NNODES``,
``SLURM_NODEID``, the first host of ``SLURM_JOB_NODELIST``, expanded as ``scontrol show hostnames`` does).

Node 0's benchtui listens at the rendezvous address and records the session; the others join it
(``benchtui.core.running.cluster``). Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The rendezvous port when none is named (``--nodes slurm`` with no ``--rendezvous``): torchrun's own.
DEFAULT_PORT = 29400
#: How long a node waits for the others at the rendezvous before it gives up (``--node-timeout``).
JOIN_TIMEOUT_S = 300.0


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
