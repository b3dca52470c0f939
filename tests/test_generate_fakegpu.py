"""Generation on the faithful GPU fake (tests/fakegpu): who waits for the device, and how often.

PyTorch's generate (transformers' GPT2LMHeadModel.generate, static cache) runs under the fake, which records
every host wait on a device value with the line that caused it. Under window timing benchtui waits for
nothing per token: its own waits inside a step are the two calls' ids copied to the host, whatever N; the
waits transformers' own generate makes per call stay the same from N=4 to N=12, and its stop check (StopCheck:
``unfinished_sequences.max() == 0`` read on the host after every token; the deferred check is for mps only)
waits once per token, as the run's settings say (``host_sync_per_token``). Under ``--timing step`` benchtui
waits once per token (its stamping criterion).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.running.launcher import EXTRA_PATH_ENV
from support import run_runner

FAKEGPU = Path(__file__).resolve().parent / "fakegpu"
#: One epoch of two steps, two sequences each; an eight-token prompt.
TINY: dict[str, Any] = {
    "framework": "torch",
    "model": "gpt2_mini",
    "task": "generate",
    "prompt_len": 8,
    "samples": 4,
    "batch_size": 2,
    "epochs": 1,
    "device": "cuda",
    "threads": 1,
    "compile": "off",  # the fake runs on the CPU: no inductor
}
STEPS = 2


def faked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **config: Any) -> tuple[list[dict], list[dict]]:
    """A real runner under the fake torch GPU: its events and the host waits it recorded."""
    waits = tmp_path / f"waits-{os.urandom(4).hex()}.jsonl"
    monkeypatch.setenv(EXTRA_PATH_ENV, str(FAKEGPU))
    monkeypatch.setenv("BENCHTUI_FAKE_GPU", "torch")
    monkeypatch.setenv("BENCHTUI_FAKE_GPU_NAMES", "NVIDIA H100 80GB HBM3")
    monkeypatch.setenv("BENCHTUI_FAKE_GPU_LOG", str(tmp_path / "fakegpu.log"))
    monkeypatch.setenv("BENCHTUI_FAKE_GPU_WAITS", str(waits))
    monkeypatch.setenv("BENCHTUI_FAKE_GPU_PLANT", "")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    events = run_runner({**TINY, **config})
    assert events[-1]["type"] == "done", [e for e in events if e["type"] == "error"]
    recorded = [json.loads(line) for line in waits.read_text().splitlines()] if waits.exists() else []
    return events, recorded


def stop_check(wait: dict[str, Any]) -> bool:
    """transformers' own per-token wait: StopCheck.__call__ in generation/utils.py."""
    return any(
        f.split(":", 1)[0].endswith("transformers/generation/utils.py") and f.endswith(" __call__")
        for f in wait["stack"]
    )


def per_step(waits: list[dict[str, Any]]) -> dict[str, Counter[tuple[str, str]]]:
    """The waits inside timed steps, per step on average: benchtui's own (a frame in benchtui_runners at
    the top of the stack's runner frames: the runner's own line), transformers' stop check, and the rest of
    transformers' generate."""
    out: dict[str, Counter[tuple[str, str]]] = {
        "benchtui": Counter(),
        "stop_check": Counter(),
        "generate": Counter(),
    }
    for w in waits:
        if w["where"] != "step" or w["thread"] != "MainThread":
            continue
        who = (
            "stop_check"
            if stop_check(w)
            else "benchtui"
            if w["source"].startswith("benchtui_runners/")
            else "generate"
        )
        out[who][(w["kind"], w["source"])] += 1
    return {who: Counter({k: v / STEPS for k, v in c.items()}) for who, c in out.items()}


@pytest.mark.slow
def test_window_timing_adds_no_wait_per_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    runs = {n: faked(monkeypatch, tmp_path, new_tokens=n) for n in (4, 12)}
    counted = {n: per_step(waits) for n, (_, waits) in runs.items()}
    short, long = counted[4], counted[12]
    # benchtui: the two calls' ids copied to the host, per step, whatever N.
    assert short["benchtui"] == long["benchtui"]
    assert sum(short["benchtui"].values()) == 2 and all(k == "copy-to-host" for k, _ in short["benchtui"])
    # transformers' generate, per call (its cache made, its checks of the inputs): the same for any N.
    assert short["generate"] == long["generate"]
    # transformers' stop check: once per token of each call (1 + N), as settings.generation says.
    assert sum(short["stop_check"].values()) == 1 + 4 and sum(long["stop_check"].values()) == 1 + 12
    events = runs[4][0]
    record = next(e for e in events if e["type"] == "hello")["settings"]["generation"]
    assert "StopCheck" in record["host_sync_per_token"]
    assert {e["tokens"] for e in events if e["type"] == "tokens"} == {4}


@pytest.mark.slow
def test_step_timing_waits_once_per_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    events, waits = faked(monkeypatch, tmp_path, new_tokens=12, timing="step")
    mine = per_step(waits)["benchtui"]
    syncs = sum(v for (kind, _), v in mine.items() if kind == "synchronize")
    assert syncs == 12  # one per token: the stamping criterion waits for the device
    assert sum(v for (kind, _), v in mine.items() if kind == "copy-to-host") == 1  # the one call's ids
    tokens = [e for e in events if e["type"] == "tokens"]
    assert all(len(e["token_s"]) == 11 and e["decode_steps"] == 12 for e in tokens)
