"""Host waits per PyTorch step on a GPU, counted by CUDA's own sync debug mode, and what they cost.

GPT-2's forward with and without transformers' mask builder, and amp-fp16's GradScaler wait
(timed by removing only that read, and against a fused optimizer). On a machine without a GPU it
dry-runs its code, tiny, on the CPU. What it printed on an H200 is
docs/gpu-acceptance/2026-11-26-h200-waits.json (the tables in docs/design-notes.md, issue 28).

    PYTHONPATH=runners python3 benchmarks/gpu_waits.py OUT.json
"""

import json
import sys
import time
import warnings

import torch

from benchtui_runners import torch_runner as tr
from benchtui_runners.config import RunConfig
from benchtui_runners.models import SDPA_WITHOUT_MASK, build_torch

DRY = not torch.cuda.is_available()  # a dry run of the script's code on the CPU, tiny
if DRY:
    torch.set_num_threads(1)
    torch.cuda.set_device = lambda d: None
    torch.cuda.synchronize = lambda d=None: None
    torch.cuda.set_sync_debug_mode = lambda m: None
    torch.cuda.get_device_name = lambda d=None: "dry"
    torch.cuda.get_device_capability = lambda d=None: (9, 0)
    torch.cuda.is_bf16_supported = lambda including_emulation=True: True
    torch.cuda.empty_cache = lambda: None
dev = torch.device("cpu") if DRY else torch.device("cuda", 0)
torch.cuda.set_device(dev)
torch.backends.cudnn.benchmark = True
out: dict = {
    "gpu": torch.cuda.get_device_name(dev),
    "capability": list(torch.cuda.get_device_capability(dev)),
    "bf16_native": torch.cuda.is_bf16_supported(including_emulation=False),
    "bf16_refusal": None,
    "torch": torch.__version__,
}
try:
    import transformers

    out["transformers"] = transformers.__version__
except ImportError:
    out["transformers"] = None
tr.refuse_emulated_bf16(
    RunConfig(framework="torch", model="resnet50", precision="amp-bf16"), torch.device("cuda", 0)
)
print(json.dumps(out), flush=True)


def syncs(step, n=3):
    """CUDA's count of synchronizing calls per step (torch.cuda.set_sync_debug_mode)."""
    step()
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode(1)
        try:
            for _ in range(n):
                step()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    hits = [str(w.message)[:80] for w in caught if "synchroniz" in str(w.message)]
    return len(hits) / n


def per_step(step, n, warm=5):
    if DRY:
        n, warm = 1, 1
    for _ in range(warm):
        step()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n


def ab(name, a, b, n):
    """A and B alternately, twice each; the median-of-two per side, in ms."""
    ta, tb = [], []
    for _ in range(2):
        ta.append(per_step(a, n))
        tb.append(per_step(b, n))
    res = {"a_ms": round(min(ta) * 1e3, 4), "b_ms": round(min(tb) * 1e3, 4)}
    res["b_vs_a_%"] = round((res["b_ms"] / res["a_ms"] - 1) * 100, 2)
    out[name] = res
    print(name, res, flush=True)


def step_of(model_id, task, bs, seq=0, size=224, precision="fp32", opt="sgd", fused=False):
    if DRY:
        model_id, bs, seq, size = ("gpt2_mini" if seq else model_id), 2, min(seq, 16), 32
    cfg = RunConfig(
        framework="torch",
        model=model_id,
        image_size=size,
        batch_size=bs,
        seq_len=seq,
        precision=precision,
        optimizer=opt,
        task=task,
        device="cuda",
    )
    torch.manual_seed(0)
    inf = task == "inference"
    model = build_torch(model_id, cfg.outputs, size, cfg.tokens, last_only=inf).to(dev)
    model.eval() if inf else model.train()
    optimizer = None
    if not inf:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=fused or None)
    amp = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}.get(precision)
    step = tr._step(model, optimizer, tr._loss(cfg), amp, dev)
    x = tr._inputs(cfg, bs, dev, torch.contiguous_format)
    y = tr._labels(cfg, bs, dev)
    ctx = torch.inference_mode() if inf else torch.enable_grad()

    def go():
        with ctx:
            step(x, y)

    return go, model, optimizer


def gpt2_pair(model_id, task, bs, seq, n):
    fixed, model, _ = step_of(model_id, task, bs, seq)
    assert model.lm.config._attn_implementation == SDPA_WITHOUT_MASK

    def stock():
        model.lm.config._attn_implementation = "sdpa"
        try:
            fixed()
        finally:
            model.lm.config._attn_implementation = SDPA_WITHOUT_MASK

    name = f"{model_id}_{task}_b{bs}_s{seq}"
    out[name + "_syncs_per_step"] = {"stock_sdpa": syncs(stock), "benchtui_sdpa": syncs(fixed)}
    print(name, out[name + "_syncs_per_step"], flush=True)
    ab(name + "_time(a=stock,b=fixed)", stock, fixed, n)
    model = None  # the model's memory back before the next pair
    torch.cuda.empty_cache()


gpt2_pair("gpt2_mini", "train", 16, 256, 40)
gpt2_pair("gpt2", "train", 8, 512, 20)
gpt2_pair("gpt2", "inference", 1, 128, 60)
gpt2_pair("gpt2_mini", "inference", 1, 64, 100)


def fp16_trio(model_id, bs, size, n, seq=0):
    default, model, opt = step_of(model_id, "train", bs, seq, size, "amp-fp16")
    fused, model2, opt2 = step_of(model_id, "train", bs, seq, size, "amp-fp16", fused=True)
    name = f"{model_id}_fp16_b{bs}_{size if not seq else seq}"
    out[name + "_syncs_per_step"] = {
        "gradscaler_foreach_sgd": syncs(default),
        "gradscaler_fused_sgd": syncs(fused),
        "recorded": tr.step_waits("amp-fp16", opt),
        "recorded_fused": tr.step_waits("amp-fp16", opt2),
    }
    print(name, out[name + "_syncs_per_step"], flush=True)
    # The sync alone: the same step with GradScaler's host read taken out (it then never skips).
    real = torch.amp.GradScaler._maybe_opt_step

    def no_read(self, optimizer, state, *args, **kwargs):
        return optimizer.step(*args, **kwargs)

    def default_no_read():
        torch.amp.GradScaler._maybe_opt_step = no_read
        try:
            default()
        finally:
            torch.amp.GradScaler._maybe_opt_step = real

    ab(name + "_time(a=default,b=read_removed)", default, default_no_read, n)
    ab(name + "_time(a=default,b=fused_sgd)", default, fused, n)


fp16_trio("resnet50", 64, 224, 20)
fp16_trio("resnet50", 16, 64, 60)
fp16_trio("gpt2_mini", 16, 0, 40, seq=256)

with open(sys.argv[1], "w") as fh:
    json.dump(out, fh, indent=1)
print("done", flush=True)
