"""``benchtui doctor``: every framework asked at once, answers kept per interpreter, progress on stderr.

Each framework's environment here is a stand-in interpreter (``BENCHTUI_ENVS``): a real executable
that the real doctor starts through the real launcher, which answers ``--doctor`` at once (after a
pause, to show the probes overlap) without importing any framework, and runs the doctor's look at
its packages (``-c``) as this Python would. The cache, its key, the progress and the
report are the real code; the one real framework probe is test_integration's.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from benchtui.commands.setup import _age, cmd_doctor
from benchtui.core.running import doctor
from benchtui.core.running.sampler import Sampler, list_gpus
from benchtui_runners import catalog
from support import ROOT
from test_sampler import FakeNVML

FRAMEWORKS = list(catalog.FRAMEWORKS)

#: A framework's interpreter that answers ``--doctor`` itself. FAKE_PROBE_SECONDS: how long it
#: takes (FAKE_SLOW: the frameworks that take a second more); FAKE_FAIL / FAKE_NO_GPU: the
#: frameworks that fail, or that do not see the GPU; FAKE_CUDA_BUILD: ``fw=version,...``, the CUDA
#: each framework says it was built for.
FAKE_PYTHON = """#!{python}
import json, os, sys, time

if "--doctor" in sys.argv:
    fw = sys.argv[sys.argv.index("--doctor") + 1]
    with open({log!r}, "a") as fh:
        fh.write(f"start {{fw}} {{time.monotonic()}}\\n")
    time.sleep(float(os.environ.get("FAKE_PROBE_SECONDS", "0")))
    if fw in os.environ.get("FAKE_SLOW", "").split(","):
        time.sleep(1.0)
    event = {{"v": 1, "type": "hello", "t": time.monotonic(), "framework": fw,
             "versions": {{fw: "9.9"}}, "devices": [{{"type": "cpu", "name": "fake"}}],
             "gpu": {{"sees_gpu": fw not in os.environ.get("FAKE_NO_GPU", "").split(","), "why": "fake"}},
             "cuda_build": dict(x.split("=") for x in os.environ.get("FAKE_CUDA_BUILD", "").split(",") if x).get(fw)}}
    if fw in os.environ.get("FAKE_FAIL", "").split(","):
        event = {{"v": 1, "type": "error", "t": time.monotonic(), "kind": "unavailable",
                 "message": f"{{fw}} is not installed (fake)"}}
    os.write(int(os.environ["BENCHTUI_EVENT_FD"]), (json.dumps(event) + "\\n").encode())
    with open({log!r}, "a") as fh:
        fh.write(f"end {{fw}} {{time.monotonic()}}\\n")
    sys.exit(3 if event["type"] == "error" else 0)
if sys.argv[1] == "-c":  # the doctor's look at this interpreter's packages: run as ``python -c`` would
    code, sys.argv = sys.argv[2], ["-c"]
    exec(compile(code, "<string>", "exec"))
    sys.exit(0)
os.execv({python!r}, [{python!r}, *sys.argv[1:]])
"""


@pytest.fixture
def fake_envs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every framework's environment a stand-in interpreter; a fresh cache; no GPU. The probes' log."""
    log = tmp_path / "probes.log"
    for fw in FRAMEWORKS:
        python = tmp_path / "envs" / fw / "bin" / "python"
        python.parent.mkdir(parents=True)
        python.write_text(FAKE_PYTHON.format(python=sys.executable, log=str(log)))
        python.chmod(0o755)
    (tmp_path / "site").mkdir()
    monkeypatch.setenv("BENCHTUI_ENVS", str(tmp_path / "envs"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    # A folder on every probe's path: a package installed there is a package installed.
    monkeypatch.setenv("BENCHTUI_RUNNER_PYTHONPATH", str(tmp_path / "site"))
    monkeypatch.setenv("COLUMNS", "200")
    for name in (
        "FAKE_PROBE_SECONDS",
        "FAKE_SLOW",
        "FAKE_FAIL",
        "FAKE_NO_GPU",
        "FAKE_CUDA_BUILD",
        "CUDA_VISIBLE_DEVICES",
    ):
        monkeypatch.delenv(name, raising=False)
    use_gpus(monkeypatch, None)
    return log


def use_gpus(monkeypatch: pytest.MonkeyPatch, nvml: FakeNVML | None) -> None:
    """What NVML sees for the doctor: ``nvml``'s GPUs, or (None) no NVML at all."""
    monkeypatch.setattr(doctor, "list_gpus", lambda: list_gpus(nvml=nvml, use_nvml=nvml is not None))


def probes(log: Path) -> list[list[str]]:
    """Each probe process's start and end, in order: ``[edge, framework, monotonic time]``."""
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


def asked(log: Path) -> list[str]:
    return sorted(fw for edge, fw, _ in probes(log) if edge == "start")


def run_doctor(
    capsys: pytest.CaptureFixture[str], log: Path, fresh: bool = False
) -> tuple[str, str, list[str]]:
    """``benchtui doctor`` in this process: its stdout, its stderr, and the frameworks it started a probe for."""
    log.unlink(missing_ok=True)
    assert cmd_doctor(argparse.Namespace(fresh=fresh)) == 0
    out, err = capsys.readouterr()
    return out, err, asked(log)


def rows(out: str) -> dict[str, str]:
    return {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 3}


def test_every_framework_is_asked_at_once_with_a_line_on_stderr_as_each_answers(
    fake_envs: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_PROBE_SECONDS", "1.0")
    out, err, started = run_doctor(capsys, fake_envs)

    assert started == sorted(FRAMEWORKS)
    edges = probes(fake_envs)
    last_start = max(float(t) for edge, _, t in edges if edge == "start")
    first_end = min(float(t) for edge, _, t in edges if edge == "end")
    assert last_start < first_end, f"a probe waited for another: {edges}"

    lines = err.splitlines()
    assert lines[0] == f"doctor: asking {', '.join(FRAMEWORKS)} what they see, each in its own process"
    answers = lines[1:]
    assert len(answers) == 4 and sorted(a.split()[1] for a in answers) == sorted(FRAMEWORKS)
    for n, line in enumerate(answers, 1):
        assert line.startswith("doctor: ") and " ok (" in line and line.endswith(f" s) [{n}/4]"), line
    assert "doctor:" not in out and "(cached)" not in out
    assert all("ok" in row and "9.9" in row for fw, row in rows(out).items() if fw in FRAMEWORKS)


def test_a_kept_answer_is_given_without_a_probe_until_what_it_depends_on_changes(
    fake_envs: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    run_doctor(capsys, fake_envs)
    cache = json.loads((tmp_path / "cache" / "benchtui" / "doctor.json").read_text())
    assert cache["format"] == doctor.CACHE_FORMAT and len(cache["entries"]) == 4

    out, err, started = run_doctor(capsys, fake_envs)
    assert started == []
    assert all("ok (cached)" in rows(out)[fw] and "9.9" in rows(out)[fw] for fw in FRAMEWORKS)
    assert "kept answers, from less than a minute ago" in out and "--fresh asks again" in out
    assert all(line.endswith(f"ok (cached) [{n}/4]") for n, line in enumerate(err.splitlines()[1:], 1))

    # A package installed (a new dist-info on the interpreter's path): every framework is asked again.
    (tmp_path / "site" / "torch-9.10.dist-info").mkdir()
    assert run_doctor(capsys, fake_envs)[2] == sorted(FRAMEWORKS)
    # An environment variable that frameworks read.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert run_doctor(capsys, fake_envs)[2] == sorted(FRAMEWORKS)
    # One that they do not: still kept.
    monkeypatch.setenv("SOME_TERMINAL_THING", "1")
    assert run_doctor(capsys, fake_envs)[2] == []
    # --fresh asks anyway, and keeps what it heard.
    out, _, started = run_doctor(capsys, fake_envs, fresh=True)
    assert started == sorted(FRAMEWORKS) and "(cached)" not in out
    assert run_doctor(capsys, fake_envs)[2] == []


def test_gpus_are_part_of_the_key_and_a_failure_or_a_missed_gpu_is_never_kept(
    fake_envs: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_FAIL", "keras-jax")
    run_doctor(capsys, fake_envs)  # no GPU: the three that answered are kept
    out, _, started = run_doctor(capsys, fake_envs)
    assert started == ["keras-jax"] and "missing" in rows(out)["keras-jax"]  # a failure: asked every time
    use_gpus(monkeypatch, FakeNVML())
    monkeypatch.setenv("FAKE_NO_GPU", "tensorflow")
    out, _, started = run_doctor(capsys, fake_envs)
    assert started == sorted(FRAMEWORKS)  # a GPU now: what each sees is asked again
    assert "sees it" in rows(out)["torch"] and "no GPU" in rows(out)["tensorflow"]
    assert "missing" in rows(out)["keras-jax"]

    out, _, started = run_doctor(capsys, fake_envs)
    assert started == ["keras-jax", "tensorflow"]  # the failure and the missed GPU: asked every time
    assert "ok (cached)" in rows(out)["torch"] and "sees it" in rows(out)["torch"]
    assert "GPU 0: Fake H200" in out  # NVML's view: read anew, never kept

    use_gpus(monkeypatch, FakeNVML(names=["Fake B200"]))  # another card
    assert run_doctor(capsys, fake_envs)[2] == sorted(FRAMEWORKS)


def test_a_framework_built_for_a_newer_cuda_than_the_driver_runs_is_driver_too_old_not_no_gpu(
    fake_envs: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    use_gpus(monkeypatch, FakeNVML())  # driver 560.1, CUDA 12.6 at most
    monkeypatch.setenv("FAKE_NO_GPU", "torch,tensorflow,keras-jax")
    monkeypatch.setenv("FAKE_CUDA_BUILD", "torch=13.2,tensorflow=12.5.1,keras-jax=13")
    out, _, _ = run_doctor(capsys, fake_envs)
    table = rows(out)
    assert "driver too old" in table["torch"] and "driver too old" in table["keras-jax"]
    assert (
        "no GPU" in table["tensorflow"] and "driver too old" not in table["tensorflow"]
    )  # CUDA 12: the driver runs it
    assert "sees it" in table["keras-torch"]
    text = " ".join(out.split())
    assert (
        "✗ PyTorch: driver too old for this build: torch 9.9 is built for CUDA 13.2, which needs NVIDIA driver "
        "580 or newer; driver 560.1 runs CUDA 12.6 at most. Update the driver, or install a PyTorch wheel for CUDA 12"
    ) in text
    assert "✗ Keras/JAX: driver too old for this build" in text and "pip install 'jax[cuda12]'" in text


def test_an_environment_holding_two_cuda_majors_of_one_library_is_named_with_what_to_do(
    fake_envs: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, _, _ = run_doctor(capsys, fake_envs)
    assert "holds CUDA" not in out
    for dist in ("nvidia_cudnn_cu12-9.28.0.42", "nvidia_cudnn_cu13-9.26.0.51", "nvidia_nccl_cu12-2.32.3",
                 "nvidia_nccl_cu13-2.30.7", "nvidia_cublas-13.4.1.3"):  # fmt: skip
        (tmp_path / "site" / f"{dist}.dist-info").mkdir()  # on every framework's interpreter's path
    monkeypatch.setenv("FAKE_CUDA_BUILD", "torch=13.2,tensorflow=12.5.1")
    out, _, _ = run_doctor(capsys, fake_envs)
    text = " ".join(out.split())
    torch_python = str(tmp_path / "envs" / "torch" / "bin" / "python")
    assert (
        f"✗ {torch_python} holds CUDA 12 and CUDA 13 builds of the same libraries: "
        "cudnn (nvidia-cudnn-cu12 9.28.0.42, nvidia-cudnn-cu13 9.26.0.51: both install nvidia/cudnn/lib/libcudnn*.so.9); "
        "nccl (nvidia-nccl-cu12 2.32.3, nvidia-nccl-cu13 2.30.7: both install nvidia/nccl/lib/libnccl.so.2)."
    ) in text
    assert (
        f"Here torch needs CUDA 13. Keep CUDA 13 here: {torch_python} -m pip uninstall -y nvidia-cudnn-cu12 "
        f"nvidia-nccl-cu12; then {torch_python} -m pip install --force-reinstall --no-deps "
        "nvidia-cudnn-cu13==9.26.0.51 nvidia-nccl-cu13==2.30.7"
    ) in text
    tf_python = str(tmp_path / "envs" / "tensorflow" / "bin" / "python")
    tf = text[text.index(f"✗ {tf_python} holds") :]
    tf = tf[: tf.index("✗", 1)] if "✗" in tf[1:] else tf
    # TensorFlow's interpreter keeps CUDA 12: every CUDA 13 package goes, the CUDA 12 cuDNN and NCCL return.
    assert f"Here tensorflow needs CUDA 12. Keep CUDA 12 here: {tf_python} -m pip uninstall -y " in tf
    assert all(f" {d} " in tf for d in ("nvidia-cublas", "nvidia-cudnn-cu13", "nvidia-nccl-cu13"))
    assert tf.rstrip().endswith(
        "--force-reinstall --no-deps nvidia-cudnn-cu12==9.28.0.42 nvidia-nccl-cu12==2.32.3"
    ) or ("--force-reinstall --no-deps nvidia-cudnn-cu12==9.28.0.42 nvidia-nccl-cu12==2.32.3 " in tf)


def test_one_environment_for_every_framework_with_two_majors_says_which_framework_moves_out() -> None:
    dists = [("nvidia-cudnn-cu12", "9.28.0.42"), ("nvidia-cudnn-cu13", "9.26.0.51"), ("nvidia-cufft-cu12", "11.4"),
             ("jax-cuda12-plugin", "0.12"), ("torch", "2.15.0")]  # fmt: skip
    needs = {"torch": 13, "tensorflow": 12, "keras-jax": 12, "keras-torch": 13}
    lines = doctor.cuda_mix_report("/env/bin/python", dists, needs)
    text = " ".join(" ".join(lines).split())
    assert "Here tensorflow, keras-jax need CUDA 12; torch, keras-torch need CUDA 13." in text
    # Two for each: PyTorch's major stays, the other frameworks get environments of their own.
    assert (
        "Keep CUDA 13 here: benchtui envs create --gpu tensorflow keras-jax (environments of their own, used by "
        "plans from then on); then /env/bin/python -m pip uninstall -y jax-cuda12-plugin nvidia-cudnn-cu12 "
        "nvidia-cufft-cu12; then /env/bin/python -m pip install --force-reinstall --no-deps nvidia-cudnn-cu13==9.26.0.51"
    ) in text
    assert doctor.cuda_mix_report("/env/bin/python", dists[1:], needs) == []


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe binary",
        b"[]",
        b'{"format": 1, "entries": []}',
        b'{"format": 1, "entries": {"torch x": {"key": 5}}}',
        b'{"format": 1, "entries": {"torch x": {"key": "k", "probed_at": 1, "result": {"ok": false}}}}',
        b'{"format": 999, "entries": {}}',
    ],
)
def test_a_malformed_cache_holds_nothing(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "doctor.json"
    path.write_bytes(content)
    assert doctor.load_cache(path) == {}


def test_a_corrupt_cache_is_ignored_and_rewritten(
    fake_envs: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "cache" / "benchtui" / "doctor.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"format": 1, "entries": {"torch \xff')
    out, err, started = run_doctor(capsys, fake_envs)
    assert started == sorted(FRAMEWORKS) and "Traceback" not in err
    assert all("ok" in rows(out)[fw] for fw in FRAMEWORKS)
    assert len(doctor.load_cache(path)) == 4
    assert run_doctor(capsys, fake_envs)[2] == []


def test_a_kept_answer_with_another_key_is_not_given(
    fake_envs: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run_doctor(capsys, fake_envs)
    path = tmp_path / "cache" / "benchtui" / "doctor.json"
    data = json.loads(path.read_text())
    name = next(n for n in data["entries"] if n.startswith("torch "))
    data["entries"][name]["key"] = "0" * 64
    data["entries"][name]["result"]["versions"] = {"torch": "stale"}
    path.write_text(json.dumps(data))
    out, _, started = run_doctor(capsys, fake_envs)
    assert started == ["torch"] and "stale" not in out


def test_the_command_line_keeps_the_report_on_stdout_and_a_live_line_on_a_terminal(
    fake_envs: Path, tmp_path: Path
) -> None:
    """The real ``benchtui doctor``, its stderr a terminal: one status line redrawn, the table on stdout."""
    primary, secondary = pty.openpty()
    received = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # the other end is closed
                return
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "benchtui", "doctor"],
            stdout=subprocess.PIPE,
            stderr=secondary,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            env={**os.environ, "FAKE_SLOW": "keras-torch", "COLUMNS": "200", "TERM": "xterm"},
            timeout=60,
        )
        # Everything the child wrote is read before its end of the terminal closes (Linux may drop what a
        # closed pty still held): wait until nothing more arrives.
        deadline, seen = time.monotonic() + 5, -1
        while time.monotonic() < deadline and len(received) != seen:
            seen = len(received)
            time.sleep(0.3)
    finally:
        os.close(secondary)
        reader.join(5)
        os.close(primary)
    status = received.decode(errors="replace")
    assert result.returncode == 0, status
    out = result.stdout.decode()
    assert "doctor:" not in status  # no lines: a status redrawn in place
    # Its first frame: the question, or (on a busy machine, where the first refresh comes after the fastest
    # answers) the first answers with several still awaited, the slow one among them.
    assert "Asking torch, tensorflow, keras-jax, keras-torch what they see" in status or re.search(
        r"; waiting for [a-z-]+(, [a-z-]+)*, keras-torch…", status
    )
    assert "; waiting for keras-torch…" in status  # redrawn as the others answered
    assert all(f"{fw} ok (" in status for fw in FRAMEWORKS)
    assert all("ok" in rows(out)[fw] for fw in FRAMEWORKS) and "Asking" not in out


def test_age() -> None:
    assert [_age(s) for s in (5, 59, 60, 150, 3600, 7199, 86400 * 3)] == [
        "less than a minute ago",
        "less than a minute ago",
        "1 minute ago",
        "2 minutes ago",
        "1 hour ago",
        "1 hour ago",
        "3 days ago",
    ]


def test_nothing_in_the_key_moves_between_two_calls(fake_envs: Path) -> None:
    """The key of one framework is the same twice over when nothing changed (no clock, no pid in it),
    and changes with a package rewritten in place."""
    import asyncio

    env = doctor.probe_env({"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    python = str(fake_envs.parent / "envs" / "torch" / "bin" / "python")
    gpus: list[dict[str, Any]] = Sampler(1.0, lambda s: None, nvml=FakeNVML()).gpus()
    keys = []
    facts = ""
    for _ in range(2):
        facts = asyncio.run(doctor.interpreter_facts(python, env)) or ""
        assert str(fake_envs.parent / "site") in facts
        keys.append(doctor.probe_key("torch", python, facts, env, gpus))
    assert keys[0] == keys[1]
    gpus[0]["temp_c"], gpus[0]["sm_clock_mhz"] = 99, 1  # readings move; the card is the same
    assert doctor.probe_key("torch", python, facts, env, gpus) == keys[0]
    assert doctor.probe_key("keras-torch", python, facts, env, gpus) != keys[0]
    # A package reinstalled in place (its dist-info rewritten, the folder's entries the same).
    dist = fake_envs.parent / "site" / "torch-9.9.dist-info"
    dist.mkdir()
    facts = asyncio.run(doctor.interpreter_facts(python, env)) or ""
    before = doctor.probe_key("torch", python, facts, env, gpus)
    os.utime(dist, ns=(dist.stat().st_atime_ns, dist.stat().st_mtime_ns + 10**9))
    facts = asyncio.run(doctor.interpreter_facts(python, env)) or ""
    assert doctor.probe_key("torch", python, facts, env, gpus) != before
