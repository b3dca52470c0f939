"""Entry point of a runner process: ``python -m benchtui_runners --config JSON`` or ``--doctor FRAMEWORK``.

Everything that happens is reported as events on the pipe; exceptions become
``error`` events (kind oom / exception / unavailable) and a non-zero exit.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import time
import traceback
from types import ModuleType

_T0 = time.monotonic()  # before any framework import: the import phase starts here

from benchtui_runners import catalog  # noqa: E402
from benchtui_runners.config import (  # noqa: E402
    ClusterError,
    DeviceMissing,
    RunConfig,
    Unavailable,
    apply_gpu_memory_env,
    apply_memory_limit,
    apply_thread_env,
    is_oom,
)
from benchtui_runners.custom import ModelDefError  # noqa: E402
from benchtui_runners.protocol import FIFO_ENV, EventWriter, ParentGone, die_with_parent  # noqa: E402


def _configure_backend(framework: str) -> None:
    backend = catalog.FRAMEWORKS[framework][1]
    if backend:
        os.environ["KERAS_BACKEND"] = backend


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchtui_runners")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--config", help="the run's configuration as JSON")
    group.add_argument("--doctor", metavar="FRAMEWORK", help="report versions and devices")
    args = parser.parse_args(argv)

    writer = EventWriter.from_env()
    config: RunConfig | None = None
    if not writer.closed:
        # A torchrun worker dies outright with its relay: a rank stopped in a hung collective
        # (or by SIGSTOP) would never act on a SIGTERM.
        die_with_parent(signal.SIGKILL if os.environ.get(FIFO_ENV) else signal.SIGTERM)
    try:
        if args.doctor:
            if args.doctor not in catalog.FRAMEWORKS:
                raise Unavailable(f"unknown framework {args.doctor!r}")
            _configure_backend(args.doctor)
            # The runs' memory policy before any framework imports: every framework is probed at
            # once, and JAX would otherwise take 75% of the GPU while the others start beside it.
            memory_env = apply_gpu_memory_env()
            module = _runner_module(args.doctor)
            described = module.describe(args.doctor, "auto")
            from benchtui_runners.probe import cuda_build  # the framework is imported by now

            writer.hello(
                framework=args.doctor, **described, memory_env=memory_env, cuda_build=cuda_build(args.doctor)
            )
            writer.done()
            return 0

        config = RunConfig.from_json(args.config)  # registers a user's own model
        if config.framework not in catalog.FRAMEWORKS:
            raise Unavailable(f"unknown framework {config.framework!r}")
        if config.model not in catalog.MODELS:
            raise Unavailable(f"unknown model {config.model!r}")
        ok, reason = catalog.available(config.framework, config.model)
        if not ok:
            raise Unavailable(reason)
        apply_memory_limit(config.memory_limit_mb)
        apply_thread_env(config.threads)
        _configure_backend(config.framework)
        writer.phase("import", "start", at=_T0)
        module = _runner_module(config.framework)
        module.run(config, writer, import_started=_T0)
        return 0
    except Unavailable as exc:
        writer.error("unavailable", str(exc))
        return 3
    except DeviceMissing as exc:
        # The plan's GPU is not usable by this framework: a failed run with the fix, never the CPU.
        print(f"benchtui runner: {exc}", file=sys.stderr, flush=True)
        writer.error("device", str(exc))
        return 4
    except ClusterError as exc:  # the nodes did not meet, or disagree: one line naming the address
        print(f"benchtui runner: {exc}", file=sys.stderr, flush=True)
        writer.error("exception", str(exc))
        return 1
    except ModelDefError as exc:  # a user's builder, loss or optimizer: the line says which and what
        print(traceback.format_exc(), file=sys.stderr, flush=True)
        writer.error("exception", str(exc)[:500], traceback.format_exc()[-20000:])
        return 1
    except ParentGone:
        print("benchtui runner: the parent closed the event pipe; stopping", file=sys.stderr, flush=True)
        return 3
    except BaseException as exc:  # everything must reach the parent
        if isinstance(exc, KeyboardInterrupt):
            writer.error("exception", "interrupted")
            return 130
        kind = "oom" if is_oom(exc) else "exception"
        message = f"{type(exc).__name__}: {exc}".strip()
        if config is not None and config.model_def and writer.phases.get("first_batch") == "start":
            # A user's model that rejects its input fails in its first step: say which input.
            shape = (config.batch_size, *config.sample_shape(catalog.family(config.framework)))
            message = f"{config.model}: the first step, on a batch of shape {shape}, raised {message}"
        tb = traceback.format_exc()
        print(tb, file=sys.stderr, flush=True)
        writer.error(kind, message.splitlines()[0][:500] if message else kind, tb[-20000:])
        return 1
    finally:
        writer.close()


def _runner_module(framework: str) -> ModuleType:
    try:
        module = importlib.import_module(
            "benchtui_runners.torch_runner"
            if catalog.family(framework) == "torch"
            else "benchtui_runners.keras_runner"
        )
    except ImportError as exc:
        extra = catalog.FRAMEWORKS[framework][2]
        raise Unavailable(f"{framework} is not installed ({exc}); pip install 'benchtui[{extra}]'") from exc
    return module


if __name__ == "__main__":
    sys.exit(main())
