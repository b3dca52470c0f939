"""Several machines on the command line (issue 33): --nodes N|slurm, --node-rank, --rendezvous, --node-timeout,
Slurm's variables and host lists, and what a plan across nodes refuses, each in one line (exit 2)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from benchtui.cli import build_parser, main
from benchtui.commands.run import plan_from_args
from benchtui.core.plan import options
from benchtui.core.plan.estimate import nodes_words, sweep_words
from benchtui.core.plan.nodes import (
    DEFAULT_PORT,
    JOIN_TIMEOUT_S,
    SLURM_COUNTS,
    SLURM_LISTS,
    SLURM_RANK,
    Cluster,
    cluster_from_args,
    expand_hostlist,
    parse_rendezvous,
)
from benchtui.core.plan.plan import Plan, PlanError

#: A plan that runs in a second on paper: every refusal below is the flag's, not the plan's.
#: (A flag given again later wins: the cases below give --frameworks, --samples, --batch-size of their own.)
PLAN = [
    "--models",
    "resnet50",
    "--frameworks",
    "torch",
    "--device",
    "cpu",
    "--samples",
    "256",
    "--image-size",
    "32",
]
SLURM_VARIABLES = (*SLURM_COUNTS, *SLURM_LISTS, SLURM_RANK)


@pytest.fixture(autouse=True)
def no_slurm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside Slurm, whatever machine the tests run on; a test sets the variables it fakes."""
    for name in SLURM_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["run", *PLAN, *argv])


# -- Slurm's host lists, as `scontrol show hostnames` prints them ------------------------------------------
@pytest.mark.parametrize(
    "text, hosts",
    [
        ("node[01-03,07]", ["node01", "node02", "node03", "node07"]),
        ("a[1-2],b3", ["a1", "a2", "b3"]),
        ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
        ("node[8-10]", ["node8", "node9", "node10"]),  # as wide as the first number is written
        ("node[08-10]", ["node08", "node09", "node10"]),
        ("n[098-101]", ["n098", "n099", "n100", "n101"]),
        ("gpu[1-2]-ib", ["gpu1-ib", "gpu2-ib"]),  # text after the brackets kept
        ("host-a.example.org", ["host-a.example.org"]),
        ("b,a", ["b", "a"]),  # in the list's order, never sorted
        ("x[3,1,3]", ["x3", "x1", "x3"]),  # repeats kept
        ("a[1-2] c", ["a1", "a2", "c"]),  # blanks separate hosts too
        ("c[1-2]d[5]e[7-8]", ["c1d5e7", "c1d5e8", "c2d5e7", "c2d5e8"]),
    ],
)
def test_a_host_list_expands_as_scontrol_show_hostnames(text: str, hosts: list[str]) -> None:
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize(
    "text, said",
    [
        ("node[01-03", "leaves a bracket open"),
        ("node01-03]", "closes a bracket it never opened"),
        ("node[[1-2]]", "a bracket inside a bracket"),
        ("node[]", "not N or N-M"),
        ("node[a-c]", "not N or N-M"),
        ("node[1-2-3]", "not N or N-M"),
        ("node[1-]", "not N or N-M"),
        ("node[3-1]", "runs backwards: 3-1"),
        ("node[0-99999999]", "more than 65,536 hosts"),
        ("a[0-999]b[0-999]", "more than 65,536 hosts"),
        (" , ", "names no host"),
    ],
)
def test_a_malformed_host_list_is_one_line_naming_it(text: str, said: str) -> None:
    with pytest.raises(PlanError, match=said) as caught:
        expand_hostlist(text)
    assert repr(text) in str(caught.value) and "\n" not in str(caught.value)


# -- the rendezvous address --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, host, port",
    [
        ("10.0.0.1:29400", "10.0.0.1", 29400),
        ("head-node.cluster:1", "head-node.cluster", 1),
        ("[::1]:29500", "::1", 29500),
        ("[fe80::1%eth0]:29500", "fe80::1%eth0", 29500),
    ],
)
def test_a_rendezvous_is_host_and_port(text: str, host: str, port: int) -> None:
    assert parse_rendezvous(text) == (host, port)
    assert Cluster(2, 0, host, port).address == text  # said back as given


def test_a_bare_port_takes_slurms_first_host_and_nothing_its_port() -> None:
    assert parse_rendezvous("29555", default_host="node01") == ("node01", 29555)
    with pytest.raises(PlanError, match="give node 0's address and a port, HOST:PORT"):
        parse_rendezvous("29555")


# -- where this node stands: flags ------------------------------------------------------------------------
def test_the_flags_place_this_node_and_leave_the_plan_the_same_on_every_node() -> None:
    flags = ("--nodes", "2", "--rendezvous", "10.1.2.3:29500", "--node-timeout", "20")
    head, other = parse(*flags, "--node-rank", "0"), parse(*flags, "--node-rank", "1")
    assert cluster_from_args(head, {}) == Cluster(2, 0, "10.1.2.3", 29500, 20.0, "flags")
    assert cluster_from_args(other, {}) == Cluster(2, 1, "10.1.2.3", 29500, 20.0, "flags")
    assert cluster_from_args(head, {}).is_head and not cluster_from_args(other, {}).is_head  # type: ignore[union-attr]
    # Which node this is, where they meet and how long they wait are not the plan's: node 1's plan is
    # node 0's (the rendezvous compares them), and a plan that gives no flag of them is the same again.
    assert plan_from_args(head).to_dict() == plan_from_args(other).to_dict()
    assert plan_from_args(head).to_dict() == plan_from_args(parse("--nodes", "2")).to_dict()
    assert plan_from_args(head).nodes == 2 and plan_from_args(head).to_dict()["nodes"] == 2


def test_one_node_is_no_cluster_and_the_timeout_has_its_default() -> None:
    assert cluster_from_args(parse(), {}) is None
    assert cluster_from_args(parse("--nodes", "1"), {}) is None
    assert "nodes" not in plan_from_args(parse("--nodes", "1")).to_dict()  # recorded as before nodes
    at = cluster_from_args(parse("--nodes", "3", "--node-rank", "2", "--rendezvous", "h:5"), {})
    assert at is not None and at.timeout_s == JOIN_TIMEOUT_S


def test_the_node_flags_are_not_plan_options() -> None:
    """--node-rank, --rendezvous and --node-timeout say where this process stands: their own group, no
    plan field; --nodes shapes the plan (Plan.nodes) like --devices."""
    flags = {o.flag for o in options.NODE_OPTIONS}
    assert flags == {"--node-rank", "--rendezvous", "--node-timeout"}
    assert not flags & {o.flag for o in options.OPTIONS}
    assert all(not o.field for o in options.NODE_OPTIONS)
    assert options.BY_FLAG["--nodes"].field == "nodes" and options.BY_FLAG["--nodes"].shapes
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    group = next(g for g in sub.choices["run"]._action_groups if g.title == options.NODES_GROUP_TITLE)
    assert [a.option_strings for a in group._group_actions] == [[o.flag] for o in options.NODE_OPTIONS]


# -- where this node stands: Slurm ------------------------------------------------------------------------
def test_slurm_variables_place_this_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_NNODES", "4")
    monkeypatch.setenv("SLURM_NODEID", "2")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node[01-03,07]")
    args = parse("--nodes", "slurm")
    import os

    assert cluster_from_args(args, os.environ) == Cluster(
        4, 2, "node01", DEFAULT_PORT, JOIN_TIMEOUT_S, "slurm"
    )
    plan = plan_from_args(args)
    assert plan.nodes == 4 and plan.to_dict()["nodes"] == 4  # the plan records the count, not "slurm"
    # A port alone, or node 0's address named: the rendezvous is there.
    assert cluster_from_args(parse("--nodes", "slurm", "--rendezvous", "29555"), os.environ) == Cluster(
        4, 2, "node01", 29555, JOIN_TIMEOUT_S, "slurm"
    )
    named = cluster_from_args(parse("--nodes", "slurm", "--rendezvous", "[fd00::1]:7"), os.environ)
    assert named is not None and (named.host, named.port, named.node_rank) == ("fd00::1", 7, 2)


def test_slurm_variables_of_the_job_step_come_first() -> None:
    """srun --nodes 2 in a job of 4: SLURM_NODEID counts the step's nodes, whose node 0 is the step's first
    host; without the step's, the job's (and SLURM_JOB_NUM_NODES, SLURM_NODELIST) are read."""
    args = argparse.Namespace(nodes="slurm")
    step = {
        "SLURM_NNODES": "2",
        "SLURM_JOB_NUM_NODES": "4",
        "SLURM_NODEID": "0",
        "SLURM_STEP_NODELIST": "gpu[03-04]",
        "SLURM_JOB_NODELIST": "gpu[01-04]",
    }
    assert cluster_from_args(args, step) == Cluster(2, 0, "gpu03", DEFAULT_PORT, source="slurm")
    job = {"SLURM_JOB_NUM_NODES": "3", "SLURM_NODEID": "1", "SLURM_NODELIST": "r[1-2]-n[1-2]"}
    assert cluster_from_args(args, job) == Cluster(3, 1, "r1-n1", DEFAULT_PORT, source="slurm")
    assert cluster_from_args(args, {**job, "SLURM_JOB_NUM_NODES": "1", "SLURM_NODEID": "0"}) is None
    assert cluster_from_args(args, {"SLURM_NNODES": "1"}) is None  # one node: no rank or host list needed


# -- every refusal through the real command line: one line, exit 2, nothing started -------------------------
@pytest.mark.parametrize(
    "argv, env, said",
    [
        # where this node stands
        (
            ["--nodes", "2", "--node-rank", "2", "--rendezvous", "h:1"],
            {},
            "--node-rank 2 is beyond --nodes 2",
        ),
        (["--nodes", "2", "--node-rank", "-1", "--rendezvous", "h:1"], {}, "--node-rank -1 is beyond"),
        (["--nodes", "2", "--node-rank", "0"], {}, "--nodes 2 needs --rendezvous HOST:PORT"),
        (["--nodes", "2", "--rendezvous", "h:1"], {}, "--nodes 2 needs --node-rank R on each node"),
        (["--node-rank", "1"], {}, "--node-rank places this benchtui among several machines: add --nodes"),
        (["--rendezvous", "h:1"], {}, "--rendezvous places this benchtui among several machines"),
        (["--node-timeout", "5"], {}, "--node-timeout places this benchtui among several machines"),
        (
            ["--nodes", "2", "--node-rank", "0", "--rendezvous", "::1:29400"],
            {},
            "IPv6 address goes in brackets",
        ),
        (["--nodes", "2", "--node-rank", "0", "--rendezvous", "[::g]:1"], {}, "'::g' is not an IPv6 address"),
        (["--nodes", "2", "--node-rank", "0", "--rendezvous", "h:70000"], {}, "port must be a whole number"),
        (["--nodes", "2", "--node-rank", "0", "--rendezvous", "h:"], {}, "port must be a whole number"),
        (["--nodes", "2", "--node-rank", "0", "--rendezvous", "head"], {}, "HOST:PORT (as head:29400)"),
        (
            ["--nodes", "2", "--node-rank", "0", "--rendezvous", "29400"],
            {},
            "give node 0's address and a port",
        ),
        (["--nodes", "2", "--node-rank", "0", "--rendezvous", "a b:1"], {}, "'a b' is not a host name"),
        (
            ["--nodes", "2", "--node-rank", "0", "--rendezvous", "h:1", "--node-timeout", "0"],
            {},
            "--node-timeout must",
        ),
        (
            ["--nodes", "2", "--node-rank", "0", "--rendezvous", "h:1", "--node-timeout", "nan"],
            {},
            "--node-timeout must",
        ),
        (["--nodes", "two"], {}, "argument --nodes: a count of machines or slurm, got 'two'"),
        (["--nodes", "0"], {}, "--nodes must be a positive whole number, got 0"),
        (["--nodes", "2000"], {}, "--nodes must be at most 1,024"),
        # Slurm
        (["--nodes", "slurm"], {}, "--nodes slurm reads SLURM_NNODES, which is not set"),
        (
            ["--nodes", "slurm"],
            {"SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "n[1-2]"},
            "SLURM_NODEID, which is not set",
        ),
        (
            ["--nodes", "slurm"],
            {"SLURM_NNODES": "2", "SLURM_NODEID": "2", "SLURM_JOB_NODELIST": "n[1-2]"},
            "SLURM_NODEID 2 is beyond SLURM_NNODES 2: ranks go 0 to 1",
        ),
        (
            ["--nodes", "slurm"],
            {"SLURM_NNODES": "2", "SLURM_NODEID": "1", "SLURM_JOB_NODELIST": "node[01-02"},
            "SLURM_JOB_NODELIST: the host list 'node[01-02' leaves a bracket open",
        ),
        (
            ["--nodes", "slurm"],
            {"SLURM_NNODES": "3", "SLURM_NODEID": "1", "SLURM_JOB_NODELIST": "n[1-2]"},
            "SLURM_JOB_NODELIST names 2 hosts (n[1-2]), and SLURM_NNODES says 3",
        ),
        (
            ["--nodes", "slurm"],
            {"SLURM_NNODES": "2", "SLURM_NODEID": "1"},
            "node 0's host from SLURM_JOB_NODELIST",
        ),
        (["--nodes", "slurm"], {"SLURM_NNODES": "many"}, "SLURM_NNODES must be a whole number of at least 1"),
        (
            ["--nodes", "slurm", "--node-rank", "1"],
            {"SLURM_NNODES": "2", "SLURM_NODEID": "1", "SLURM_JOB_NODELIST": "n[1-2]"},
            "--nodes slurm reads this node's rank from SLURM_NODEID: drop --node-rank 1",
        ),
        # what a plan across nodes cannot measure
        (["--nodes", "2", "--frameworks", "keras-torch"], {}, "keras-torch cannot train across nodes"),
        (["--nodes", "2", "--task", "inference"], {}, "--task inference runs on one device"),
        (
            ["--nodes", "2", "--frameworks", "torch,tensorflow", "--device", "cpu", "--devices", "2"],
            {},
            "tensorflow on the CPU trains one replica a node across --nodes 2",
        ),
        (
            ["--nodes", "2", "--batch-size", "auto"],
            {},
            "--batch-size auto searches one device on one machine",
        ),
        (["--nodes", "2", "--best"], {}, "--best searches each framework's largest batch on one device"),
        (
            ["--nodes", "2", "--sweep", "batch=auto,8"],
            {},
            "--sweep batch auto searches one device on one machine",
        ),
        (
            ["--nodes", "2", "--profile"],
            {},
            "--profile keeps each run's traces on the machine that made them",
        ),
        (
            ["--nodes", "2", "--sweep", "devices=1,2"],
            {},
            "--sweep devices runs on one machine: across --nodes 2 use --scaling",
        ),
        (
            ["--nodes", "4", "--global-batch", "6"],
            {},
            "--global-batch 6 does not divide among 4 devices (4 nodes × 1 device)",
        ),
        (
            ["--nodes", "2", "--devices", "2", "--scaling", "--global-batch", "6"],
            {},
            "does not divide among 4 devices (2 nodes × 2 devices): choose a multiple of every count the runs "
            "train on (1 node × 1, 2 devices, then 2 nodes × 2 devices)",
        ),
        (
            ["--nodes", "4", "--batch-size", "32", "--samples", "64"],
            {},
            "the global batch 128 (4 nodes × 1 device) for resnet50 is larger than --samples 64",
        ),
        (
            ["--nodes", "4", "--sweep", "batch=8,32", "--samples", "64"],
            {},
            "--sweep batch 32 on 4 nodes × 1 device (128) is larger than --samples 64",
        ),
    ],
)
def test_a_plan_across_nodes_refuses_in_one_line(
    argv: list[str],
    env: dict[str, str],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if "--nodes" in argv and "--node-timeout" not in argv:
        argv = [*argv, "--node-timeout", "1"]  # were a refusal to fail, the nodes would not wait long for it
    code = main(["run", "--headless", *PLAN, *argv, "--sessions-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("benchtui: error: ") and said in lines[0], err
    assert list(tmp_path.iterdir()) == []  # nothing started, no session written


def test_a_refusal_from_the_installed_command(tmp_path: Path) -> None:
    """The same, as a user starts it: a fresh process, Slurm's variables in its environment."""
    from support import benchtui

    env = {"SLURM_NNODES": "4", "SLURM_NODEID": "7", "SLURM_JOB_NODELIST": "node[01-03,07]"}
    result = benchtui(
        "run",
        "--headless",
        *PLAN,
        "--nodes",
        "slurm",
        "--node-timeout",
        "1",
        "--sessions-dir",
        str(tmp_path),
        env=env,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert (
        result.stderr.strip()
        == "benchtui: error: --nodes slurm: SLURM_NODEID 7 is beyond SLURM_NNODES 4: ranks go 0 to 3"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_global_batch_divides_among_every_scale_point() -> None:
    """--global-batch is split among every run's devices on every node (scale_points): 8 divides among
    1, 2 and 4 (1 node × 1, 2 devices, 2 nodes × 2), 6 does not among 4; without --scaling only the plan's."""
    base = {"frameworks": ["torch"], "models": ["resnet50"], "device": "cpu", "samples": 64}
    Plan(**base, nodes=2, devices=2, scaling=True, global_batch=8).validate()
    with pytest.raises(PlanError, match=r"does not divide among 4 devices \(2 nodes × 2 devices\)"):
        Plan(**base, nodes=2, devices=2, scaling=True, global_batch=6).validate()
    Plan(**base, nodes=3, devices=1, global_batch=6).validate()  # 3 workers only: 1 is never run
    with pytest.raises(PlanError, match=r"among 3 devices \(3 nodes × 1 device\)"):
        Plan(**base, nodes=3, devices=1, global_batch=4).validate()
    with pytest.raises(
        PlanError, match=r"among 2 devices \(2 nodes × 1 device\)"
    ):  # scaling: 1, then 2 nodes
        Plan(**base, nodes=2, devices=1, scaling=True, global_batch=3).validate()


# -- the plan's size in words -------------------------------------------------------------------------------
def test_the_plans_size_says_its_nodes() -> None:
    # On GPUs: tensorflow trains one CPU replica a node (refused with --devices 2 on the CPU).
    base = {"frameworks": ["torch", "tensorflow"], "models": ["resnet50"], "device": "cuda", "samples": 256}
    across = Plan(**base, nodes=2).validate()
    assert nodes_words(across) == "on 2 nodes × 1 device"
    assert nodes_words(Plan(**base).validate()) == ""
    scaling = Plan(**base, nodes=4, devices=2, scaling=True).validate()
    assert nodes_words(scaling) == "at 1 node × 1, 2 devices, then 2, 4 nodes × 2 devices"
    assert nodes_words(Plan(**base, nodes=2, scaling=True).validate()) == (
        "at 1 node × 1 device, then 2 nodes × 1 device"
    )
    swept = Plan(**base, nodes=2, sweep={"precision": ["fp32", "amp-bf16"]}).validate()
    assert (
        sweep_words(swept, 2.0, gpu=True)
        == "2 points × 2 frameworks × 3 runs = 12 runs on 2 nodes × 1 device"
    )
    swept_scaling = Plan(
        **base, nodes=2, devices=2, scaling=True, runs=1, sweep={"precision": ["fp32", "tf32"]}
    )
    assert sweep_words(swept_scaling.validate(), 2.0, gpu=True) == (
        "2 points × 3 scale points × 2 frameworks × 1 run = 12 runs at 1 node × 1, 2 devices, then 2 nodes × 2 devices"
    )


def test_slurms_node_0_is_where_the_nodes_meet(tmp_path: Path) -> None:
    """Under srun (its variables faked), node 0 listens at the first host of the node list, at the port
    --rendezvous names alone, and node 1 looks for it there: each alone gives up after --node-timeout,
    naming that address, exit 2, no session."""
    import socket

    from support import benchtui

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "127.0.0.1,127.0.0.2"}
    flags = (
        "--nodes",
        "slurm",
        "--rendezvous",
        str(port),
        "--node-timeout",
        "1",
        "--sessions-dir",
        str(tmp_path),
    )
    for rank in (0, 1):
        result = benchtui(
            "run", "--headless", *PLAN, *flags, env={**env, "SLURM_NODEID": str(rank)}, timeout=60
        )
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith("benchtui: error: ") and f"127.0.0.1:{port} within 1 s" in last, result.stderr
    assert list(tmp_path.iterdir()) == []
