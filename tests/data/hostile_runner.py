"""A hostile stand-in runner: a well-formed run, with what ``BENCHTUI_HOSTILE`` names done to it.

Started through ``--python FRAMEWORK=<a script that execs this>``, so the parent starts it
exactly as it starts a real runner (``<python> -m benchtui_runners --config JSON``); it
ignores everything but ``--config``. Modes (comma-separated):

  bad-values   events whose values are nonsense: zero, 1e308, NaN and Infinity seconds,
               a hello whose steps_per_epoch is a dict, then a string; steps out of the plan
  run-tag      every event carries its own ``"run"`` (another run's id)
  stall        sends its hello and first step, then stops itself (SIGSTOP)
  grandchild   leaves a child that holds the event pipe open for 10 minutes, then exits
  flood        writes 80 MB to stdout before training
  chatter      writes 64 KB to stdout before training
  overlong     one 2 MiB event line before training
  control      fails with an error whose message holds terminal escape sequences
  exit-early   exits with code 3 after the first epoch
  huge-int     a batch line whose samples is an integer of 5,000 digits (past Python's int limit)
  parent-types sends the parent's own types: run_end "ok", energy, gpu, counters, session_end,
               probe_start, probe (without seconds), batch_choice
  huge-window  a batch line standing for 10**7 steps (schema-valid, beyond the plan; 10**9 took 8 GB)
  second-hello a second hello mid-run saying 10**12 samples per epoch
  huge-flops   a flops event of 1e30 per step
  dup-epoch    epoch 1 again after epoch 1, 100 times slower
  hang-after-1 stops sending after epoch 1 (waits to be interrupted)
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

MODES = set(filter(None, os.environ.get("BENCHTUI_HOSTILE", "").split(",")))
FD = int(os.environ["BENCHTUI_EVENT_FD"])
CONFIG = json.loads(sys.argv[sys.argv.index("--config") + 1])
RUN_TAG = {"run": "001-torch-resnet50-1"} if "run-tag" in MODES else {}


def put(raw: bytes) -> None:
    os.write(FD, raw)


def event(type_: str, **fields: object) -> None:
    put((json.dumps({"v": 1, "type": type_, "t": time.monotonic(), **RUN_TAG, **fields}) + "\n").encode())


def main() -> int:
    if "flood" in MODES:
        chunk = b"x" * 1023 + b"\n"
        for _ in range(80 * 1024):
            os.write(1, chunk)
    if "chatter" in MODES:
        os.write(1, (b"x" * 1023 + b"\n") * 64)
    if "overlong" in MODES:
        put(b'{"type":"error","message":"' + b"y" * (2 << 20) + b'"}\n')
    bs, epochs = int(CONFIG["batch_size"]), int(CONFIG["epochs"])
    steps = max(1, int(CONFIG["samples"]) // bs)
    event("phase", name="import", edge="start")
    event("phase", name="import", edge="end")
    event(
        "hello",
        pid=os.getpid(),
        framework=CONFIG["framework"],
        versions={"python": sys.version.split()[0]},
        device={"type": "cpu", "name": "hostile"},
        settings={},
        steps_per_epoch=steps,
        samples_per_epoch=steps * bs,
    )
    event("phase", name="build", edge="start")
    event("phase", name="build", edge="end")
    if "bad-values" in MODES:
        event("hello", steps_per_epoch={"a": 1})
        event("hello", steps_per_epoch="many")
    if "huge-int" in MODES:
        put(b'{"type":"batch","epoch":1,"step":1,"seconds":0.01,"samples":' + b"9" * 5000 + b"}\n")
    if "parent-types" in MODES:
        event("run_end", status="ok", reason="", returncode=0, malformed=0)
        event("energy", epoch=1, mj=7.7e12)
        event("gpu", gpus=[], host={})
        event("counters", available=True, source="hostile")
        event("session_end", lines=3, status="complete")
        event("probe_start", probe="p", framework="torch", model="resnet50", batch_size=1)
        event("probe", probe="p", framework="torch", model="resnet50", batch_size=1, result="ok")
        event("batch_choice", model="resnet50", policy="min", upper=8, found={}, chosen={})
    if "control" in MODES:
        event("error", kind="exception", message="boom \x1b[2J\x1b]0;owned\x07 \x9b31m =HYPERLINK(1)")
        return 1
    event("phase", name="first_batch", edge="start")
    event("batch", epoch=1, step=1, seconds=0.01, samples=bs, steps=1)
    event("phase", name="first_batch", edge="end")
    if "huge-window" in MODES:
        event("batch", epoch=1, step=1 + 10**7, seconds=0.01, samples=bs, steps=10**7)
    if "second-hello" in MODES:
        event("hello", framework=CONFIG["framework"], steps_per_epoch=steps, samples_per_epoch=10**12)
    if "grandchild" in MODES and os.fork() == 0:
        time.sleep(600)  # holds the pipe (and stdout) open
        os._exit(0)
    if "stall" in MODES:
        os.kill(os.getpid(), signal.SIGSTOP)
    for epoch in range(1, epochs + 1):
        for step in range(2 if epoch == 1 else 1, steps + 1):
            if "bad-values" in MODES and step == 2:
                for bad in (b"0", b"1e308", b"NaN", b"Infinity", b"-1"):
                    put(b'{"type":"batch","epoch":1,"step":2,"samples":1,"seconds":' + bad + b"}\n")
                event("batch", epoch=epochs + 5, step=1, seconds=0.01, samples=bs)
                event("epoch", epoch=epochs + 5, seconds=1.0, samples=bs)
                put(b'{"type":"epoch","epoch":1,"seconds":1e999}\n')
            event("batch", epoch=epoch, step=step, seconds=0.01, samples=bs, steps=1)
        event("epoch", epoch=epoch, seconds=0.01 * steps, samples=steps * bs)
        if "dup-epoch" in MODES and epoch == 1:
            event("epoch", epoch=1, seconds=1.0 * steps, samples=steps * bs)
        if "hang-after-1" in MODES:
            time.sleep(600)
        if "exit-early" in MODES:
            return 3
    if "huge-flops" in MODES:
        event("flops", per_step=1e30, per_image=1e30 / bs, batch_size=bs, method="hostile", counted="all")
    event("done", peak_bytes=1 << 20, source="hostile")
    return 0


if __name__ == "__main__":
    sys.exit(main())
