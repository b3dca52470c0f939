"""What ``benchtui doctor`` reports, as data: what is installed, what each framework sees, NVML status.

Every framework is asked at once, each in its own process. Importing one takes seconds (PyTorch
with torchvision, or TensorFlow: ten and more on a small machine), and its answer cannot change
while the interpreter, its packages, the runner code, the environment variables that frameworks
read and the GPUs NVML sees stay as they were; so a good answer is kept in the user's cache under
a key made of exactly those, and given again until one of them changes (``fresh`` asks anyway).
NVML's own view (the GPUs, the driver, the telemetry status) is read anew every time, and a failed
probe, or one that does not see the GPU NVML sees, is never kept: that is what a user is fixing.

Two checks need no framework at all. An interpreter whose packages hold two CUDA majors of the same
library (``nvidia-cudnn-cu12`` beside ``nvidia-cudnn-cu13``: the same files, the last installed
won) is named with the libraries, the frameworks that need each major and the commands that
separate them. A framework built for a newer CUDA than the driver runs is "driver too old for this
build" (NVML's CUDA driver version against the CUDA the probe says it was built for), not "no GPU".
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchtui.core.plan import envs
from benchtui.core.provenance import RUNNER_PACKAGE, runner_code_hash
from benchtui.core.running import launcher
from benchtui.core.running.launcher import collect_events, start_runner
from benchtui.core.running.sampler import list_gpus
from benchtui_runners import catalog
from benchtui_runners.protocol import FD_ENV

#: Bumped when the file's layout or the meaning of a kept answer changes: older files are ignored.
CACHE_FORMAT = 1
#: The most answers kept (one per framework and interpreter): the oldest go first.
CACHE_ENTRIES = 64
#: Environment variables that can change what a framework imports or sees. The others (TERM,
#: SSH_AUTH_SOCK, ...) differ from one terminal to the next and would only make the cache miss.
KEY_ENV_PREFIXES = (
    "BENCHTUI_",
    "CUDA",
    "CUDNN",
    "NVIDIA_",
    "NCCL_",
    "LD_",
    "PYTHON",
    "TF_",
    "XLA_",
    "JAX_",
    "KERAS",
    "TORCH",
    "PYTORCH_",
    "OMP_",
    "MKL_",
    "HIP_",
    "ROCR_",
    "TPU_",
)
#: What names a GPU and what its driver is (not its clocks, temperature or link state, which move).
KEY_GPU_FIELDS = ("index", "uuid", "name", "pci_bus_id", "mig_mode", "memory_total", "driver", "cuda_driver")

#: Run by each interpreter a framework uses: its version and ``sys.path``, each folder with its
#: mtime and the packages in it (dist-info names, which carry versions, and their mtimes). Any
#: install, upgrade or removal changes one of them. Standard library only, and no framework import.
_INTERPRETER_FACTS = r"""
import json, os, sys
path = []
for entry in sys.path:
    try:
        item = [entry, os.stat(entry).st_mtime_ns]
    except OSError:
        path.append([entry, None])
        continue
    try:
        names = sorted(os.listdir(entry)) if os.path.isdir(entry) else []
    except OSError:
        names = []
    for name in names:
        if name.endswith((".dist-info", ".egg-info", ".egg-link", ".pth")):
            try:
                item.append([name, os.stat(os.path.join(entry, name)).st_mtime_ns])
            except OSError:
                pass
    path.append(item)
print(json.dumps({"executable": sys.executable, "version": sys.version, "prefix": sys.prefix, "path": path}))
"""


async def probe(
    framework: str, python: str = sys.executable, timeout: float = 120.0, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Ask a runner process what ``framework`` sees: versions and devices, or why it cannot run."""
    with tempfile.TemporaryFile() as log:
        proc = await start_runner(python, ["--doctor", framework], log, env_extra=env)
        try:
            events = await asyncio.wait_for(collect_events(proc), timeout)  # asyncio.timeout is 3.11+
        except asyncio.TimeoutError:
            await proc.terminate()
            return {"ok": False, "reason": f"no answer within {timeout:.0f} s"}
        finally:
            proc.close()
        for event in events:
            if event["type"] == "hello":
                return {"ok": True, **event}
            if event["type"] == "error":
                return {"ok": False, "reason": event.get("message", "error")}
        log.seek(0)
        tail = log.read()[-300:].decode(errors="replace").strip().splitlines()
        return {"ok": False, "reason": tail[-1] if tail else f"runner exited with {proc.process.returncode}"}


def driver_cuda(gpus: list[dict[str, Any]]) -> tuple[int, int] | None:
    """The newest CUDA the NVIDIA driver runs, (major, minor), from NVML (12060 -> (12, 6)); None unknown."""
    raw = gpus[0].get("cuda_driver") if gpus else None
    if isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
        return None
    return raw // 1000, raw % 1000 // 10


def build_major(info: dict[str, Any]) -> int | None:
    """The CUDA major a probed framework was built for (the probe's ``cuda_build``), or None."""
    head = str(info.get("cuda_build") or "").split(".")[0]
    return int(head) if head.isdigit() else None


#: Where each framework finds a build for an older CUDA, when the driver cannot be updated.
OLDER_BUILD = {
    "torch": "a PyTorch wheel for CUDA {major} (pip install torch --index-url https://download.pytorch.org/whl/cu{major}X, X at most {minor})",
    "keras-torch": "a PyTorch wheel for CUDA {major} (pip install torch --index-url https://download.pytorch.org/whl/cu{major}X, X at most {minor})",
    "keras-jax": "JAX's CUDA {major} plugin (pip install 'jax[cuda{major}]', in an environment of its own)",
    "tensorflow": "",  # TensorFlow's GPU builds are all for one CUDA: only a newer driver helps
}


def driver_too_old(fw: str, info: dict[str, Any], gpus: list[dict[str, Any]]) -> str:
    """The fix when ``fw``'s build needs a newer CUDA than the driver runs ('' when it does not)."""
    driver, major = driver_cuda(gpus), build_major(info)
    if driver is None or major is None or major <= driver[0]:
        return ""
    label = catalog.FRAMEWORK_LABELS.get(fw, fw)
    versions = info.get("versions") or {}
    package = {"torch": "torch", "keras-torch": "torch", "tensorflow": "tensorflow", "keras-jax": "jax"}.get(
        fw, fw
    )
    name = f"{package} {versions.get(package)}" if versions.get(package) else package
    needs = envs.DRIVER_FOR_CUDA.get(major)
    line = (
        f"{label}: driver too old for this build: {name} is built for CUDA {info.get('cuda_build')}"
        + (f", which needs NVIDIA driver {needs} or newer" if needs else "")
        + f"; driver {gpus[0].get('driver') or '?'} runs CUDA {driver[0]}.{driver[1]} at most. Update the driver"
    )
    older = OLDER_BUILD.get(fw, "").format(major=driver[0], minor=driver[1])
    return f"{line}, or install {older}" if older else line


def verdicts(
    frameworks: list[str], results: list[dict[str, Any]], gpus: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Per framework: installed or not, whether it sees the GPU that NVML sees, and the fix when not.

    ``gpu`` is "sees it", "no GPU" (NVML sees one and this framework cannot use it: its runs
    would fail, never fall back to the CPU), "driver too old" (the framework is built for a newer
    CUDA than the driver runs) or "" when the machine has no GPU.
    """
    out = []
    for fw, info in zip(frameworks, results, strict=True):
        extra = catalog.FRAMEWORKS[fw][2]
        row: dict[str, Any] = {"framework": fw, "ok": bool(info.get("ok")), "gpu": "", "fix": ""}
        if not info.get("ok"):
            row["fix"] = f"pip install 'benchtui[{extra}]' (or benchtui envs create {fw})"
            row["reason"] = str(info.get("reason", ""))
        elif gpus:
            seen = info.get("gpu") or {}
            if seen.get("sees_gpu"):
                row["gpu"] = "sees it"
            elif driver_too_old(fw, info, gpus):
                row["gpu"] = "driver too old"
                row["fix"] = driver_too_old(fw, info, gpus)
            else:
                row["gpu"] = "no GPU"
                row["fix"] = str(seen.get("why") or f"{fw} sees no GPU; benchtui envs create --gpu {fw}")
        out.append(row)
    return out


def cuda_mix_report(python: str, dists: list[tuple[str, str]], needs: dict[str, int | None]) -> list[str]:
    """What to say about an interpreter whose packages hold two CUDA majors of one library: which
    libraries, which frameworks need which major, and the commands that give each its own; [] if none.

    ``needs``: each framework run with this interpreter -> the CUDA major its build needs (None: unknown).
    """
    mixes = envs.cuda_mixes(dists)
    if not mixes:
        return []
    majors = sorted({m for mix in mixes for m in mix.majors})
    wanted = [m for m in needs.values() if m in majors]
    # Keep what most of this interpreter's frameworks need (PyTorch's on a tie), else the newest.
    torch_major = needs.get("torch")
    keep = max(majors, key=lambda m: (wanted.count(m), m == torch_major, m))
    move = [fw for fw, m in needs.items() if m is not None and m != keep]
    listed = "; ".join(
        f"{mix.library.removeprefix('nvidia-')} ({', '.join(f'{d} {v}' for _, d, v in mix.builds)}"
        + (f": both install {mix.path}" if mix.path else "")
        + ")"
        for mix in mixes
    )
    lines = [
        f"{python} holds CUDA {' and CUDA '.join(map(str, majors))} builds of the same libraries: {listed}.",
        "  Whichever was installed last won: a framework built for the other CUDA loads a library that is not its own."
        if any(mix.path for mix in mixes)
        else "  One environment, one CUDA major: a framework may load the other major's library first.",
    ]
    by_major = {m: [fw for fw, need in needs.items() if need == m] for m in majors}
    said = [f"{', '.join(fws)} need{'s' * (len(fws) == 1)} CUDA {m}" for m, fws in by_major.items() if fws]
    if said:
        lines.append(f"  Here {'; '.join(said)}.")
    others = sorted(n for n, v in dists if (found := envs.cuda_major(n, v)) is not None and found[1] != keep)
    restore = sorted(f"{d}=={v}" for mix in mixes if mix.path for major, d, v in mix.builds if major == keep)
    steps = []
    if move:
        own = "an environment of its own" if len(move) == 1 else "environments of their own"
        steps.append(f"benchtui envs create --gpu {' '.join(move)} ({own}, used by plans from then on)")
    steps.append(f"{python} -m pip uninstall -y {' '.join(others)}")
    if restore:
        steps.append(f"{python} -m pip install --force-reinstall --no-deps {' '.join(restore)}")
    lines.append(f"  Keep CUDA {keep} here: " + "; then ".join(steps))
    return lines


def cache_path() -> Path:
    """``$XDG_CACHE_HOME/benchtui/doctor.json`` (``~/.cache/benchtui/doctor.json``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "benchtui" / "doctor.json"


def _kept(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("key"), str)
        and isinstance(entry.get("probed_at"), (int, float))
        and isinstance(entry.get("result"), dict)
        and entry["result"].get("ok") is True
    )


def load_cache(path: Path) -> dict[str, dict[str, Any]]:
    """The kept answers, by framework and interpreter; none from a missing, unreadable or malformed file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    entries = data.get("entries") if isinstance(data, dict) and data.get("format") == CACHE_FORMAT else None
    if not isinstance(entries, dict):
        return {}
    return {name: entry for name, entry in entries.items() if isinstance(name, str) and _kept(entry)}


def save_cache(path: Path, updates: dict[str, dict[str, Any]]) -> None:
    """Add ``updates`` to what the file holds now (another doctor may have written since) and replace it
    whole, so a reader never sees half a file. A cache that cannot be written only costs time: no error."""
    entries = {**load_cache(path), **updates}
    newest = sorted(entries.items(), key=lambda item: item[1]["probed_at"], reverse=True)[:CACHE_ENTRIES]
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".doctor-", suffix=".json", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"format": CACHE_FORMAT, "entries": dict(newest)}, fh)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _entry_name(framework: str, python: str) -> str:
    return f"{framework} {python}"


def cacheable(result: dict[str, Any], gpus: list[dict[str, Any]]) -> bool:
    """A framework that answered, and sees the GPU when NVML sees one: what a user is fixing is never kept."""
    return result.get("ok") is True and (not gpus or bool((result.get("gpu") or {}).get("sees_gpu")))


def probe_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a probe runs in (the launcher's, without the event pipe's number)."""
    out = launcher.runner_env(0, env)
    out.pop(FD_ENV, None)
    return out


async def interpreter_facts(python: str, env: dict[str, str], timeout: float = 30.0) -> str | None:
    """What ``python`` says of itself and its packages (``_INTERPRETER_FACTS``), or None when it does not answer."""
    try:
        proc = await asyncio.create_subprocess_exec(
            python,
            "-c",
            _INTERPRETER_FACTS,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=launcher.runner_root(RUNNER_PACKAGE),
        )
    except OSError:
        return None
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        return None
    return out.decode(errors="replace") if proc.returncode == 0 and out else None


def probe_key(
    framework: str, python: str, facts: str, env: dict[str, str], gpus: list[dict[str, Any]]
) -> str:
    """A digest of everything a framework's answer depends on; a kept answer is given only under the same one."""
    real = os.path.realpath(python)
    try:
        stat = os.stat(real)
        executable: list[Any] = [real, stat.st_mtime_ns, stat.st_size]
    except OSError:
        executable = [real, None, None]
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    parts = {
        "format": CACHE_FORMAT,
        "framework": framework,
        "python": python,
        "executable": executable,
        "interpreter": facts,
        "runner": runner_code_hash(RUNNER_PACKAGE),
        "env": {k: v for k, v in sorted(env.items()) if k.startswith(KEY_ENV_PREFIXES) and k != FD_ENV},
        "cpus": [os.cpu_count(), affinity],
        "kernel": platform.release(),
        "gpus": [{k: gpu.get(k) for k in KEY_GPU_FIELDS} for gpu in gpus],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class ProbeDone:
    """One framework's answer as it arrives, for progress while the others are still being asked."""

    framework: str
    ok: bool
    seconds: float  # since the doctor started asking (a kept answer: as long as checking its key took)
    cached_at: float | None  # when a kept answer was given (``time.time()``); None: asked now
    pending: tuple[str, ...]  # the frameworks still being asked
    total: int


async def ask_all(
    frameworks: list[str],
    pythons: dict[str, str],
    gpus: list[dict[str, Any]],
    env: dict[str, str],
    kept: dict[str, dict[str, Any]],
    on_done: Callable[[ProbeDone], None] | None = None,
    facts_out: dict[str, str | None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, float], dict[str, float], dict[str, dict[str, Any]]]:
    """Every framework's answer, all asked at once (or given from ``kept`` under an unchanged key).

    Returns the answers, each framework's seconds, when each kept answer given was made, and the
    new answers worth keeping. Each interpreter describes itself once, whatever number of
    frameworks use it; a framework with no kept answer is asked without waiting for that.
    """
    started = time.monotonic()
    penv = probe_env(env)
    facts = {
        python: asyncio.ensure_future(interpreter_facts(python, penv)) for python in set(pythons.values())
    }
    pending = list(frameworks)
    seconds: dict[str, float] = {}
    cached_at: dict[str, float] = {}
    updates: dict[str, dict[str, Any]] = {}

    async def key_of(fw: str) -> str | None:
        found = await facts[pythons[fw]]
        return None if found is None else probe_key(fw, pythons[fw], found, penv, gpus)

    async def one(fw: str) -> dict[str, Any]:
        name = _entry_name(fw, pythons[fw])
        entry = kept.get(name)
        result: dict[str, Any]
        if entry is None:
            result, key = await asyncio.gather(probe(fw, pythons[fw], env=env), key_of(fw))
        else:
            key = await key_of(fw)
            if key is not None and key == entry["key"]:
                result = entry["result"]
                cached_at[fw] = float(entry["probed_at"])
            else:
                result = await probe(fw, pythons[fw], env=env)
        seconds[fw] = time.monotonic() - started
        if fw not in cached_at and key is not None and cacheable(result, gpus):
            updates[name] = {"key": key, "probed_at": time.time(), "seconds": seconds[fw], "result": result}
        pending.remove(fw)
        if on_done is not None:
            on_done(
                ProbeDone(
                    fw,
                    bool(result.get("ok")),
                    seconds[fw],
                    cached_at.get(fw),
                    tuple(pending),
                    len(frameworks),
                )
            )
        return result

    results = list(await asyncio.gather(*(one(fw) for fw in frameworks)))
    if facts_out is not None:  # what each interpreter said of its packages (``facts_out``: python -> facts)
        for python, found in facts.items():
            facts_out[python] = await found
    return results, seconds, cached_at, updates


@dataclass
class Diagnosis:
    """What ``benchtui doctor`` found: per framework its probe and verdict, the GPUs NVML sees, this Python."""

    frameworks: list[str]
    results: list[dict[str, Any]]  # each framework's probe (see ``probe``)
    verdicts: list[dict[str, Any]]  # each framework's verdict (see ``verdicts``)
    pythons: dict[str, str]  # the interpreter each framework's runners use
    gpus: list[dict[str, Any]]
    telemetry: str  # the sampler's status line
    nvml: bool
    python: str = sys.executable
    cpus: int | None = field(default_factory=os.cpu_count)
    seconds: dict[str, float] = field(default_factory=dict)  # per framework, until its answer came
    cached: dict[str, float] = field(default_factory=dict)  # the kept answers given: when each was made
    #: Per interpreter whose packages hold two CUDA majors of one library: what to say (``cuda_mix_report``).
    cuda_mixes: dict[str, list[str]] = field(default_factory=dict)


def diagnose(fresh: bool = False, on_done: Callable[[ProbeDone], None] | None = None) -> Diagnosis:
    """Ask every framework, each in its own process and all at once, what it sees (or give the kept
    answer when nothing it depends on has changed; ``fresh``: ask anyway); and NVML what GPUs there are.
    ``on_done`` hears of each answer as it arrives."""
    from benchtui.core.plan.plan import Plan

    found = list_gpus()
    gpus = found.gpus
    plan = Plan()
    frameworks = list(catalog.FRAMEWORKS)
    pythons = {fw: plan.python_for(fw) for fw in frameworks}
    # The same view of the GPUs as a run has: PCI order, so CUDA's indices are NVML's.
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    path = cache_path()
    kept = {} if fresh else load_cache(path)
    facts: dict[str, str | None] = {}
    results, seconds, cached, updates = asyncio.run(
        ask_all(frameworks, pythons, gpus, env, kept, on_done, facts)
    )
    if updates:
        save_cache(path, updates)
    mixes = {}
    for python, said in facts.items():
        needs = {
            fw: build_major(r) for fw, r in zip(frameworks, results, strict=True) if pythons[fw] == python
        }
        report = cuda_mix_report(python, envs.dists_of(said or ""), needs)
        if report:
            mixes[python] = report
    return Diagnosis(
        frameworks=frameworks,
        results=results,
        verdicts=verdicts(frameworks, results, gpus),
        pythons=pythons,
        gpus=gpus,
        telemetry=found.status,
        nvml=found.nvml,
        seconds=seconds,
        cached=cached,
        cuda_mixes=mixes,
    )
