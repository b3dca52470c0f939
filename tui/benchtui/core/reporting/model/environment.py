"""Where and how a session ran, in (label, text) facts: host, devices, frameworks, settings, telemetry."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from benchtui.core import fmt
from benchtui.core.fmt import plural
from benchtui.core.model.analysis import framework_label, model_label
from benchtui.core.model.cell import SessionSummary
from benchtui.core.plan.plan import command_text
from benchtui.core.store.session import LoadedSession
from benchtui_runners import catalog


def device_text(device: dict[str, Any]) -> str:
    """'cuda:0 NVIDIA H100 80GB HBM3, 80.0 GiB, compute capability 9.0' from a runner's hello."""
    if not device:
        return "unknown"
    kind = str(device.get("type", "?"))
    head = f"{kind}:{device['index']}" if "index" in device else kind
    parts = [f"{head} {device.get('name', '')}".strip()]
    if device.get("memory_bytes"):
        parts.append(fmt.bytes_(device["memory_bytes"]))
    if device.get("capability"):
        parts.append(f"compute capability {device['capability']}")
    if device.get("threads"):
        parts.append(fmt.plural(device["threads"], "thread"))
    known = {"type", "index", "name", "memory_bytes", "capability", "threads"}
    parts += [f"{k} {v}" for k, v in device.items() if k not in known and v not in (None, "")]
    return ", ".join(parts)


def _join(items: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in items.items() if v not in (None, ""))


def _listed(*parts: Any) -> str:
    return ", ".join(str(x) for x in parts if x)


def environment(
    loaded: LoadedSession, summary: SessionSummary, over_run: list[tuple[str, str]] | None = None
) -> list[tuple[str, str]]:
    """(label, text) lines describing where and how the session ran: GPU, driver, versions, settings
    (``over_run``: a watch's telemetry facts when the caller has read its samples: ``watch_facts``)."""
    meta, plan = loaded.meta, loaded.plan
    items: list[tuple[str, str]] = []
    gpus = meta.get("gpus") or []
    for gpu in gpus:
        mem = fmt.bytes_(gpu.get("memory_total")) if gpu.get("memory_total") else None
        cuda = gpu.get("cuda_driver")
        cuda_text = f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else cuda
        items.append(
            (
                f"GPU {gpu.get('index', '')}".strip(),
                _listed(
                    gpu.get("name"),
                    mem,
                    gpu.get("driver") and f"driver {gpu.get('driver')}",
                    cuda_text and f"CUDA driver {cuda_text}",
                    gpu.get("max_sm_clock_mhz") and f"max SM clock {gpu.get('max_sm_clock_mhz')} MHz",
                    gpu.get("power_limit_w") and f"power limit {gpu.get('power_limit_w'):.0f} W",
                ),
            )
        )
    # Clocks, temperature and throttle reasons at the start and the end: did the GPU slow down?
    for when, key in (("start", "gpus"), ("end", "gpus_end")):
        for gpu in meta.get(key) or []:
            throttle = gpu.get("throttle")
            state = _listed(
                gpu.get("sm_clock_mhz") is not None and f"SM clock {gpu['sm_clock_mhz']} MHz",
                gpu.get("temp_c") is not None and f"{gpu['temp_c']} °C",
                throttle is not None and ("throttle: " + (", ".join(throttle) or "none")),
            )
            if state:
                items.append((f"GPU {gpu.get('index', '')} at {when}", state))
    if not gpus:
        items.append(("GPU", "none recorded"))
    items.append(("Telemetry", str(meta.get("telemetry") or "not recorded")))
    host = meta.get("host") or {}
    items.append(
        (
            "Host",
            _listed(
                host.get("hostname"),
                host.get("platform"),
                host.get("python") and f"Python {host.get('python')}",
                host.get("cpu_model"),
                host.get("cpu_count") and f"{host.get('cpu_count')} CPUs",
                host.get("memory_bytes") and f"{fmt.bytes_(host.get('memory_bytes'))} RAM",
            ),
        )
    )
    for fw, env in (summary.frameworks or {}).items():
        label = framework_label(fw)
        versions = env.get("versions") or {}
        items.append((f"{label} versions", _join(versions) or "unknown"))
        items.append((f"{label} device", device_text(env.get("device") or {})))
        settings = env.get("settings") or {}
        items.append((f"{label} settings", settings_text(settings) or "unknown"))
    if plan.watch:  # benchtui watch: no plan, a command (or none), where it ran, what was sampled
        return items + watch_facts(loaded, over_run)
    sizes = ", ".join(f"{model_label(m)} {plan.batch_size(m)}" for m in plan.models)
    recorded = (meta.get("plan") or {}).get("timing")  # sessions before --timing recorded none
    timing = f", timing {recorded}" if isinstance(recorded, str) and recorded else ""
    # Token models have no image size: a session of only token models says none.
    tokens_only = bool(plan.models) and all(
        m in catalog.MODELS and catalog.MODELS[m].kind == "tokens" for m in plan.models
    )
    items.append(
        (
            "Plan",
            (
                ("" if tokens_only else f"{plan.image_size}×{plan.image_size} px, ")
                + f"{plural(plan.samples, 'sample')}, {plural(plan.epochs, 'epoch')}, "
                f"{plural(plan.runs, 'run')} per framework and model, order {plan.order}, device {plan.device}, "
                f"data {plan.data}, precision {plan.precision}, compile {compile_text(plan.compile)}, "
                f"{threads_text(plan)}{timing}, cuDNN autotune {'on' if plan.cudnn_autotune else 'off'}, channels_last "
                f"{'on' if plan.channels_last else 'off'}, {plan.num_classes} classes"
                + (f", preset {plan.preset}" if plan.preset else "")
                + workload_text(plan)
                + devices_text(plan)
            ),
        )
    )
    items.append(("Batch sizes", sizes))
    return items


def setting_value(value: Any, key: str = "") -> str:
    """A runner's setting in words: 'on' and 'off' for booleans, 'none', a list joined, a mapping as 'name
    value' pairs (names as words), environment variables (``key`` "env") as NAME=value ('NAME empty')."""
    if value is None or value == "":
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return ", ".join(setting_value(v) for v in value) or "none"
    if isinstance(value, dict) and key == "env":
        return (
            ", ".join(f"{k}={v}" if v not in ("", None) else f"{k} empty" for k, v in value.items()) or "none"
        )
    if isinstance(value, dict):
        return ", ".join(f"{setting_name(k)} {setting_value(v, str(k))}" for k, v in value.items()) or "none"
    return str(value)


def setting_name(key: Any) -> str:
    """A setting's key as words: 'intra_op_threads' is 'intra op threads'; 'env' is 'environment'."""
    return "environment" if key == "env" else str(key).replace("_", " ")


def settings_text(settings: Any) -> str:
    """A runner's settings in words, 'name: value' each, separated by ' · ' (a value may hold commas and
    semicolons): 'precision: fp32 · tf32 matmul: off · memory policy: counter process peak RSS (host memory),
    environment CUDA_VISIBLE_DEVICES empty'. Not Python's repr of a dict, in any view."""
    if not isinstance(settings, dict):
        return setting_value(settings)
    return " · ".join(f"{setting_name(k)}: {setting_value(v, str(k))}" for k, v in settings.items())


def compile_text(value: Any) -> str:
    """The plan's compile setting in words: 'on', 'off', or "each framework's default" (a session before the
    setting had three values recorded true or false)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return "each framework's default" if value in ("default", "", None) else str(value)


def threads_text(plan: Any) -> str:
    """'4 threads' for every framework's ops, or "threads: each framework's default"."""
    threads = getattr(plan, "threads", 0)
    return (
        plural(threads, "thread")
        if isinstance(threads, int) and threads > 0
        else "threads: each framework's default"
    )


#: The environment's lines that ``watch_facts`` makes (``show`` prints them under the table).
WATCH_LABELS = ("Watched", "Folder", "Batch size", "Over the run")


def watch_facts(
    loaded: LoadedSession, over_run: list[tuple[str, str]] | None = None
) -> list[tuple[str, str]]:
    """A watch session in (label, text) lines: the command, its folder, the hooks' batch, and its telemetry
    over the run (``telemetry_facts`` of every sample of the file, not only the model's window: ``over_run``
    when the caller has read them, a long watch's file read once); [] for a plan's session."""
    plan = loaded.plan
    if not plan.watch:
        return []
    command = plan.watch.get("command") or []
    items = [("Watched", command_text(command) if command else "no command: telemetry only")]
    if command:
        items.append(("Folder", str(plan.watch.get("cwd") or "?")))
        size = plan.batch_sizes.get(catalog.WATCH_MODEL)
        items.append(("Batch size", f"{size} (as the hooks said)" if size else "not known (no timing hooks)"))
    if over_run is None:
        over_run = telemetry_facts(
            [s for s in loaded.folder.gpu_samples() if s.get("run") is not None], bool(command)
        )
    return items + over_run


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _numbers(samples: list[dict[str, Any]], pick: Callable[[dict[str, Any]], Any]) -> list[float]:
    out = []
    for sample in samples:
        try:
            value = pick(sample)
        except (KeyError, TypeError, IndexError, AttributeError):
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append(float(value))
    return out


def telemetry_facts(samples: list[dict[str, Any]], command: bool) -> list[tuple[str, str]]:
    """What the sampler saw over a watch's run: the command's CPU and memory (its children's included),
    the machine's CPU, and each GPU's utilization, memory and power: means and peaks."""
    if not samples:
        return [("Over the run", "no sample was recorded")]
    span = float(samples[-1]["t"]) - float(samples[0]["t"])
    parts = [f"{len(samples)} samples over {span:.1f} s"]
    cpu = _numbers(samples, lambda s: s["host"]["cpu_percent"])
    rss = _numbers(samples, lambda s: s["host"]["rss"])
    busy = _numbers(samples, lambda s: s["host"]["system_busy_cores"])
    if command and cpu:
        parts.append(f"the command's CPU {(_mean(cpu) or 0) / 100:.2f} cores mean, {max(cpu) / 100:.2f} peak")
    if command and rss:
        parts.append(f"its memory (RSS) {fmt.bytes_(max(rss))} peak")
    if busy:
        parts.append(f"the machine's CPU {(_mean(busy) or 0):.2f} cores busy mean")
    items = [("Over the run", ", ".join(parts))]
    indices = sorted(
        {g["index"] for s in samples for g in s.get("gpus") or [] if isinstance(g.get("index"), int)}
    )
    for index in indices:
        readings = [g for s in samples for g in s.get("gpus") or [] if g.get("index") == index]
        util = _numbers(readings, lambda g: g["util"])
        mem = _numbers(readings, lambda g: g["mem_used"])
        power = _numbers(readings, lambda g: g["power_w"])
        own = _numbers(readings, lambda g: g["proc_mem"])
        gpu = [
            util and f"utilization {_mean(util):.0f}% mean",
            mem and f"memory {fmt.bytes_(max(mem))} peak",
            own and command and f"the command's {fmt.bytes_(max(own))} peak",
            power and f"power {_mean(power):.0f} W mean",
        ]
        items.append((f"GPU {index} over the run", ", ".join(str(x) for x in gpu if x) or "no reading"))
    return items


def workload_text(plan: Any) -> str:
    """', task inference (forward only), sequence length 128' for the plan line; '' for image training."""
    text = ""
    if getattr(plan, "task", "train") == "inference":
        text += ", task inference (forward only)"
    if getattr(plan, "task", "train") == "generate":  # issue 34: the prompt and the new tokens, not a length
        lengths = {
            m: plan.generate_lengths(m)
            if hasattr(plan, "generate_lengths")
            else (plan.prompt_len, plan.new_tokens)
            for m in plan.models
        }
        said = [
            (
                f"{catalog.MODELS[m].label if m in catalog.MODELS else m} "
                if len(set(lengths.values())) > 1
                else ""
            )
            + f"prompt {p} tokens, {n} new tokens"
            for m, (p, n) in lengths.items()
            if len(set(lengths.values())) > 1 or m == next(iter(lengths))
        ]
        return text + ", task generate (greedy, key/value cache), " + "; ".join(said)
    tokens = [m for m in plan.models if m in catalog.MODELS and catalog.MODELS[m].kind == "tokens"]
    if tokens:
        seq_len = getattr(plan, "seq_len", 0)
        text += f", sequence length {seq_len}" if seq_len else ", sequence length: each model's context"
    return text


def devices_text(plan: Any) -> str:
    """', data parallel on 4 devices (scaling over 1, 2, 4), batch sizes per device' for the plan line; '' on one."""
    if not getattr(plan, "multi_device", False):
        return ""
    ids = getattr(plan, "device_ids", None)
    text = f", data parallel on {plan.devices} devices" + (
        f" (GPUs {', '.join(map(str, ids))})" if ids else ""
    )
    nodes = getattr(plan, "nodes", 1)
    if nodes > 1:  # several machines (issue 33): the devices are each node's
        text += f" on each of {nodes} nodes"
        if plan.scaling:
            points = ", ".join(f"{at.nodes}×{at.devices}" for at in plan.scale_points())
            text += f", scaling over {points} (nodes × devices)"
    elif plan.scaling:
        text += f", scaling over {', '.join(map(str, plan.device_counts()))}"
    if plan.global_batch:
        return text + f", global batch {plan.global_batch} divided among the devices"
    return text + ", batch sizes per device"


def how_it_ran(frameworks: Mapping[str, Any]) -> list[str]:
    """One line per framework: what it compiled with (as resolved), its threads and timing, and
    what in its step waits for the device every step (the runner's ``host_sync_per_step``).

    ``frameworks`` is a summary's ``frameworks`` (versions, device and settings per framework).
    """
    out = []
    for fw, env in frameworks.items():
        settings = env.get("settings") or {}
        parts = [str(settings.get("compile") or "compile not recorded")]
        threads = env.get("threads") if isinstance(env.get("threads"), dict) else {}
        if isinstance(threads.get("text"), str) and threads["text"]:
            # '1 thread per rank × 2 ranks (2 in all)'; said equal when another framework's total is the same
            said = threads["text"]
            same = [
                framework_label(other)
                for other, o in frameworks.items()
                if other != fw
                and isinstance(o, dict)
                and isinstance(o.get("threads"), dict)
                and o["threads"].get("total") == threads.get("total")
                and o["threads"].get("per_process") != threads.get("per_process")
            ]
            if same and isinstance(threads.get("total"), int):
                said += f", the same {threads['total']} in all as {', '.join(same)}"
            parts.append(said)
        elif settings.get("intra_op_threads"):
            parts.append(fmt.plural(settings["intra_op_threads"], "thread"))
        if isinstance(settings.get("timing"), str):
            parts.append(settings["timing"].split(":")[0] + " timing")
        if settings.get("optimizer") and settings.get("task") != "generate":  # generate trains nothing
            parts.append(f"{settings['optimizer']}, {settings.get('loss', '')}".rstrip(", "))
        generation = settings.get("generation")
        if isinstance(generation, dict) and generation.get("engine"):  # issue 34: what generates
            parts.append(str(generation["engine"]))
        if settings.get("host_sync_per_step"):
            parts.append(f"waits for the device every step: {settings['host_sync_per_step']}")
        if isinstance(settings.get("unlike_default"), str) and settings["unlike_default"]:
            parts.append(
                settings["unlike_default"]
            )  # what a default script of the framework would do instead
        out.append(f"{framework_label(fw)}: {'; '.join(parts)}")
    return out


def header_facts(loaded: LoadedSession) -> list[tuple[str, str]]:
    meta = loaded.meta
    return [
        ("Session", loaded.path.name),
        ("Status", str(meta.get("status", "?"))),
        ("Started", str(meta.get("started") or "?")),
        ("Finished", str(meta.get("finished") or "never (cut off)")),
    ]
