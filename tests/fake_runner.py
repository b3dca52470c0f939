"""A stand-in runner for the parent's robustness: malformed lines between real events, or a run's losses.

Without ``--losses`` it writes malformed lines between real events (one epoch of one step).

``--losses JSON``: a clean run of the launcher's ``--config`` (its epochs, ``samples // batch_size``
steps an epoch) whose epoch events carry these losses: a JSON list, one entry per epoch, each a number,
``"nan"``, ``"inf"``, ``"-inf"`` (as the wire sends them) or ``[mean, min, max]`` (``loss_min`` and
``loss_max`` too); the last entry repeats for the epochs the list does not reach, so ``[2.3, "nan"]`` is a
loss NaN from epoch 2 on and ``[2.3026]`` a loss that never changes. A test starts it through a launcher::

    [python, "tests/fake_runner.py", "--losses", '[2.3, "nan"]', *args]
"""

import argparse
import json
import os
import sys
import time

fd = int(os.environ["BENCHTUI_EVENT_FD"])


def put(data: bytes) -> None:
    os.write(fd, data)


def event(type_: str, **fields) -> None:
    put((json.dumps({"v": 1, "type": type_, "t": time.monotonic(), **fields}) + "\n").encode())


def malformed() -> None:
    print("framework chatter on stdout", flush=True)
    event("hello", framework="torch", steps_per_epoch=1, samples_per_epoch=8)
    put(b"this is not json\n")
    put(b"\xff\xfe\xfd\n")
    put(b'["a list"]\n')
    event("phase", name="first_batch", edge="start")
    event("batch", epoch=1, step=1, seconds=0.5, samples=8)
    event("phase", name="first_batch", edge="end")
    put(b'{"type": "batch", "epoch": "one", "seconds": "slow"}\n')
    event("future_type", whatever=1)
    event("epoch", epoch=1, seconds=0.5, samples=8)
    event("done")


def loss_fields(entry) -> dict:
    """An entry of ``--losses`` as the epoch event's fields."""
    if isinstance(entry, list):
        mean, low, high = entry
        return {"loss": mean, "loss_min": low, "loss_max": high}
    return {"loss": entry}


def with_losses(losses: list, config: dict) -> None:
    """A run of ``config`` that trains cleanly, each epoch sending its entry of ``losses``."""
    bs = int(config["batch_size"])
    steps = max(1, int(config["samples"]) // bs)
    event("phase", name="import", edge="end")
    event(
        "hello",
        framework=config["framework"],
        versions={"python": sys.version.split()[0], "fake": "1"},
        device={"type": "cpu", "name": "fake"},
        config=config,
        settings={},
        steps_per_epoch=steps,
        samples_per_epoch=steps * bs,
    )
    for epoch in range(1, int(config["epochs"]) + 1):
        if epoch == 1:
            event("phase", name="first_batch", edge="start")
        event("batch", epoch=epoch, step=steps, seconds=0.01, samples=bs, steps=steps)
        if epoch == 1:
            event("phase", name="first_batch", edge="end")
        entry = losses[min(epoch, len(losses)) - 1]
        event("epoch", epoch=epoch, seconds=0.01 * steps, samples=steps * bs, **loss_fields(entry))
        event("memory", epoch=epoch, peak_bytes=1 << 20, source="fake")
    event("done", peak_bytes=1 << 20, source="fake")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--losses")
    parser.add_argument("--config")
    args, _ = parser.parse_known_args()
    if args.losses is None:
        malformed()
    else:
        with_losses(json.loads(args.losses), json.loads(args.config))


main()
