"""The report's fixed words: table titles and headers, and the notes under them."""

from __future__ import annotations

from benchtui.core.model.parity import PARITY_MARK, PARITY_TOLERANCE
from benchtui.core.model.scaling import STRAGGLER_RATIO
from benchtui.core.model.why import OVERHEAD_WARN

EFFICIENCY_HEADER = [
    "Model",
    "Framework",
    "FLOPs / step",
    "FLOPs / image",
    "TFLOP/s",
    "% of peak",
    "Peak (dense)",
    "J / image",
]


EFFICIENCY_NOTE = (  # a training session of images; ``efficiency_note`` words any other
    "FLOPs of one training step (forward + loss + backward; convolution and matmul multiply-adds "
    "counted as 2 FLOPs; element-wise ops and the optimizer update not counted), counted by each "
    "framework at the run's batch and image size. FLOP/s (in the unit its size reads in: TFLOP/s, "
    "GFLOP/s): FLOPs per step × the steps of the epochs after the first, over their time (the same data "
    "as images/s). % of peak: of the GPU's dense peak "
    "for the run's precision (NVIDIA datasheets); none on CPU, a MIG slice, a laptop part or an unknown GPU. "
    "J / image: the GPU's energy (NVML's counter) over the epochs after the first, per image; none on CPU."
)


WARMUP_HEADER = [
    "Model",
    "Framework",
    "Warm-up batches (per run)",
    "Warm-up time (s)",
    "First batch (s)",
    "Steady median batch (s)",
    "Steady images/s",
]


LATENCY_TITLE = "Latency per batch (inference: forward only)"


LATENCY_NOTE = (
    "Per batch, after the warm-up detected in each run: the 50th, 90th and 99th percentiles of the "
    "batch times of every run of the cell (ms); throughput is total samples over total time, excluding "
    "the first epoch."
)


WINDOW_NOTE = (
    "Timed by windows of steps (--timing window): a batch's time is its window's mean, so these are "
    "percentiles of window means, narrower than those of single batches; --timing step times every batch."
)


PARITY_TITLE = "Parity: do the frameworks build the same network?"


PARITY_NOTE = (
    "Parameters: all, and trainable (what is compared; BatchNorm statistics are not trainable). "
    "FLOPs per sample as each runner counted them (a training step: forward and backward; inference: "
    f"forward). '{PARITY_MARK}' after a model's name, in any table: its "
    f"frameworks differ by more than {PARITY_TOLERANCE:.0%} in trainable parameters or FLOPs per sample, "
    "so its raw ratio compares different networks (the verdict's 'per FLOP' ratio sets the sizes apart)."
)


WARMUP_NOTE = (
    "Warm-up is detected from each run's batch times: the first batches until a window of them stays "
    "within 10% (plus 3 robust SDs) of the median of the run's second half."
)


SIDE_BY_SIDE_TITLE = "The study's four figures, side by side (seconds)"


#: What brackets mean, in every view that prints them (show, headless, md, html): always the 95% CI.
CI_NOTE = "[in brackets]: the 95% confidence interval (seeded bootstrap over runs, then epochs within runs)."


#: Under the study's tables of a session on several devices: what its batch column says.
DEVICES_NOTE = (
    "Batch on several devices: the per-device batch × devices = the global batch; every figure is the "
    "whole data-parallel job's (throughput over every device)."
)


SCALING_NOTE = (
    "Speedup: throughput at N devices over one device's (the 1-device row is the reference); efficiency: "
    "the speedup over N (100%: linear scaling). Global batch: the per-device batch × N."
)


#: After SCALING_NOTE where the table has an interval to read.
SCALING_CI_NOTE = (
    "[in brackets]: the 95% CI (seeded bootstrap over runs, then epochs, of the seconds per sample at N "
    "devices and at one)."
)


PER_DEVICE_TITLE = "Per device: each rank's step time and its GPU"


#: The per-device note, a sentence per kind of column, each said only where the table has those columns.
PER_DEVICE_RANK_NOTE = "Device i is rank i."


PER_DEVICE_STEP_NOTE = (
    "Step time: the rank's mean time per step, where the framework runs one process "
    "per device (PyTorch); '–' where one process drives every device. vs fastest: its step time over the "
    "fastest rank's; the largest is the straggler ratio (above "
    f"{STRAGGLER_RATIO:.2f}×, one rank holds the others back at every all-reduce)."
)


PER_DEVICE_GPU_NOTE = "GPU util, power: means over the runs' samples; peak memory: the most used on that GPU."


PER_DEVICE_NOTE = " ".join((PER_DEVICE_RANK_NOTE, PER_DEVICE_STEP_NOTE, PER_DEVICE_GPU_NOTE))


WIRING_TITLE = "Data parallel: how each framework wires it"


WIRING_NOTE = "As each framework's runner recorded it, at the plan's device count."


#: The wiring's first rows, in this order; any other key follows, sorted.
WIRING_KEYS = {
    "engine": "Engine",
    "all_reduce": "All-reduce",
    "bucket": "Buckets",
    "overlap": "Overlap",
    "nodes": "Nodes",
    "link": "Inter-node link",
}
SCALING_NODES_NOTE = (
    "On several machines N is the workers, nodes × devices: 1 × 1 is the reference, and the per-device batch "
    "× N is the global batch."
)
#: What a runner records of its own node only (several nodes): said per node in the Nodes table, not here.
WIRING_PER_NODE = frozenset({"node_rank", "ranks"})
NODES_NOTE = (
    "A row per machine. Ranks: the global ranks of its processes, as its runner named them. Step time: its "
    "mean seconds per step over the epochs after the first (its own batch windows), a mean over the cell's "
    "runs; vs fastest: over the fastest node's. Slowest rank: its rank with the longest mean step (each "
    "rank's own pace, where the framework times each rank). GPU figures: the means over its GPUs, as its "
    "benchtui sampled them."
)


WHY_NOTE = (
    "ms/step: each framework's share of a profiled step (its own profiler, a few steps after the timed "
    "epochs) times its timed step (the same data as its throughput), so a column adds up to the step behind "
    "the verdict's ratio; (%): the share. Difference: the second framework's milliseconds less the first's, "
    "largest first. The profiler's overhead is its profiled step against the timed one: above "
    f"{OVERHEAD_WARN:+.0%}, the profile may not divide the step as it runs untraced."
)


WHY_TOP_NOTE = (
    "The longest ops of each framework's profile: ms/step is the op's share of the profiled step times the "
    "timed step; share: of the profiled step (the mean over the runs that list it); calls per step."
)


#: The answer's title in every view (the verdict per model).
ANSWER_TITLE = "The verdict: frameworks compared"


#: Under a generate session's verdicts (issue 34): what their ratio is of, in place of ``VERDICT_NOTE``.
GENERATE_VERDICT_NOTE = (
    "The batch's tokens/s after the first token, one framework's over the other's (the inverse ratio of "
    "their time per token), over the generate calls after the first epoch; time to first token beside it "
    "(medians); 95% CIs by seeded bootstrap."
)
VERDICT_NOTE = (
    "Time per {one}, one framework's over the other's (so the inverse ratio of {plural}/s), from the times "
    "each verdict names; 95% CIs by seeded bootstrap."
)


#: Added to the note when a verdict says so.
ABOUT_SAME_NOTE = (
    "'about the same': the ratio rounds to 1.00× or its CI holds 1, so neither framework is faster."
)


UNRELIABLE_NOTE = (
    "'unreliable': other processes kept the machine's cores busy while a side ran, so the machine, not the "
    "framework, may have decided the ratio; no winner is claimed (the ratio measured follows it, not a "
    "verdict). Run again on an idle machine, or with --threads set to the cores left idle."
)


#: An epoch whose wait before its first batch is at least this share of the epoch's time, and at least
#: STALL_MIN_S, is said under the warm-up table: an epoch-start stall (a data iterator rebuilt, a thread
#: pool started anew), not a slow step.
STALL_SHARE = 0.2


STALL_MIN_S = 0.1


#: The warm-up table's column of each epoch's wait before its first batch (rows that recorded it).
STALL_HEADER = "Before first batch, per epoch (s)"
