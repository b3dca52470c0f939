"""A stand-in runner that writes malformed lines between real events (parent robustness test)."""

import json
import os
import time

fd = int(os.environ["BENCHTUI_EVENT_FD"])


def put(data: bytes) -> None:
    os.write(fd, data)


def event(type_: str, **fields) -> None:
    put((json.dumps({"v": 1, "type": type_, "t": time.monotonic(), **fields}) + "\n").encode())


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
