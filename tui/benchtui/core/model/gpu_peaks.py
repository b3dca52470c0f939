"""Dense peak TFLOP/s of common NVIDIA GPUs, by device name and precision class.

Sources: NVIDIA's product datasheets (H100, H200, A100, L40S, L4, A10, V100, T4), and
for the GeForce cards the architecture whitepapers' appendix tables (Ada "NVIDIA ADA GPU
ARCHITECTURE" for the RTX 4090, "NVIDIA AMPERE GA102 GPU ARCHITECTURE" for the RTX 3090,
"NVIDIA GeForce GTX 1080" (Pascal GP104) for the GTX 1080). Figures are at boost clock.

Every figure is *dense*: datasheets print tensor-core figures "with sparsity" (2:4
structured sparsity, which no benchmark here uses); those are halved. The tensor-core
figures of GeForce cards are those with FP32 accumulation (what autocast uses), which
run at half the rate of FP16 accumulation on those cards.

Precision classes follow the plan's ``--precision``: ``fp32`` (CUDA cores, TF32 off),
``tf32`` (TF32 tensor cores), ``amp-fp16`` / ``amp-bf16`` (FP16 / BF16 tensor cores).
A GPU without TF32 tensor cores runs ``tf32`` plans in plain FP32: its FP32 peak is the
bound. A GPU without FP16/BF16 tensor cores has no peak for those classes (None): on
Pascal, FP16 runs at 1/64 of FP32 while cuDNN computes FP16 convolutions in FP32, so
no single figure bounds a mixed-precision run there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: ``--precision`` value -> precision class of the table.
PRECISION_CLASS = {"fp32": "fp32", "tf32": "tf32", "amp-fp16": "fp16", "amp-bf16": "bf16"}
CLASS_LABEL = {
    "fp32": "FP32",
    "tf32": "TF32 tensor core",
    "fp16": "FP16 tensor core",
    "bf16": "BF16 tensor core",
}


@dataclass(frozen=True)
class GpuPeak:
    """One GPU model: name patterns and dense peak TFLOP/s per precision class."""

    label: str
    patterns: tuple[str, ...]  # regular expressions on the normalized device name
    fp32: float
    tf32: float | None
    fp16: float | None
    bf16: float | None
    source: str

    def tflops(self, precision_class: str) -> float | None:
        if precision_class == "tf32" and self.tf32 is None:
            return self.fp32  # no TF32 tensor cores: TF32 mode computes in FP32
        return getattr(self, precision_class, None)


# Order matters: the first entry whose pattern matches wins, so variants come first.
GPUS: tuple[GpuPeak, ...] = (
    # H200 datasheet: FP32 67 (SXM) / 60 (NVL); TF32 989 / 835, BF16 and FP16 1,979 / 1,671 with sparsity.
    GpuPeak(
        "H200 NVL", (r"\bh200\b.*\bnvl\b",), 60.0, 417.5, 835.5, 835.5, "NVIDIA H200 datasheet (H200 NVL)"
    ),
    GpuPeak("H200 SXM", (r"\bh200\b",), 67.0, 494.5, 989.5, 989.5, "NVIDIA H200 datasheet (H200 SXM)"),
    # H100 datasheet: FP32 67 / 51 / 60; TF32 989 / 756 / 835, BF16 and FP16 1,979 / 1,513 / 1,671 with sparsity.
    GpuPeak(
        "H100 PCIe", (r"\bh100\b.*\bpcie\b",), 51.0, 378.0, 756.5, 756.5, "NVIDIA H100 datasheet (H100 PCIe)"
    ),
    GpuPeak(
        "H100 NVL", (r"\bh100\b.*\bnvl\b",), 60.0, 417.5, 835.5, 835.5, "NVIDIA H100 datasheet (H100 NVL)"
    ),
    GpuPeak("H100 SXM", (r"\bh100\b",), 67.0, 494.5, 989.5, 989.5, "NVIDIA H100 datasheet (H100 SXM)"),
    # A100 datasheet (40 GB and 80 GB, SXM and PCIe alike): FP32 19.5, TF32 156, BF16 and FP16 312 dense.
    GpuPeak("A100", (r"\ba100\b",), 19.5, 156.0, 312.0, 312.0, "NVIDIA A100 datasheet"),
    # L40S datasheet: FP32 91.6; TF32 366, BF16 and FP16 733 with sparsity (183 / 362.05 dense).
    GpuPeak("L40S", (r"\bl40s\b",), 91.6, 183.0, 362.05, 362.05, "NVIDIA L40S datasheet"),
    # L4 datasheet: FP32 30.3; TF32 120, BF16 and FP16 242 with sparsity.
    GpuPeak("L4", (r"\bl4\b",), 30.3, 60.0, 121.0, 121.0, "NVIDIA L4 datasheet"),
    # A10 datasheet: FP32 31.2; TF32 62.5, BF16 and FP16 125 dense.
    GpuPeak("A10", (r"\ba10\b",), 31.2, 62.5, 125.0, 125.0, "NVIDIA A10 datasheet"),
    # V100 datasheet: FP32 15.7 / 14 / 16.4, tensor (FP16 mixed) 125 / 112 / 130; no TF32, no BF16.
    GpuPeak("V100S PCIe", (r"\bv100s\b",), 16.4, None, 130.0, None, "NVIDIA V100S datasheet"),
    GpuPeak("V100 PCIe", (r"\bv100\b.*\bpcie\b",), 14.0, None, 112.0, None, "NVIDIA V100 datasheet (PCIe)"),
    GpuPeak(
        "V100 SXM2", (r"\bv100\b.*\b(sxm2|dgxs)\b",), 15.7, None, 125.0, None, "NVIDIA V100 datasheet (SXM2)"
    ),
    # T4 datasheet: FP32 8.1, mixed precision (FP16/FP32) 65; no TF32, no BF16.
    GpuPeak("T4", (r"\bt4\b",), 8.1, None, 65.0, None, "NVIDIA T4 datasheet"),
    # Ada whitepaper, appendix: FP32 82.6; TF32 82.6, FP16 and BF16 (FP32 accumulate) 165.2 dense.
    GpuPeak(
        "RTX 4090",
        (r"\brtx 4090\b(?! ?(ti|d)\b)",),
        82.6,
        82.6,
        165.2,
        165.2,
        "NVIDIA Ada GPU architecture whitepaper",
    ),
    # GA102 whitepaper, appendix: FP32 35.6; TF32 35.6, FP16 and BF16 (FP32 accumulate) 71 dense.
    GpuPeak(
        "RTX 3090",
        (r"\brtx 3090\b(?! ?ti\b)",),
        35.6,
        35.6,
        71.0,
        71.0,
        "NVIDIA Ampere GA102 GPU architecture whitepaper",
    ),
    # GP104 (GTX 1080): 2560 CUDA cores x 1733 MHz boost x 2 = 8.87 FP32; no tensor cores.
    GpuPeak(
        "GTX 1080", (r"\bgtx 1080\b(?! ?ti\b)",), 8.87, None, None, None, "NVIDIA GeForce GTX 1080 whitepaper"
    ),
)


def normalize(name: str) -> str:
    """'NVIDIA A100-SXM4-80GB' -> 'a100 sxm4 80gb': lower case, no vendor words, spaces only."""
    text = re.sub(r"[-_/()]+", " ", name.lower())
    words = [w for w in text.split() if w not in ("nvidia", "tesla", "geforce", "quadro")]
    return " ".join(words)


#: Parts whose name contains a table entry's name but not its peak: a MIG slice has a fraction
#: of the card's SMs ("A100-SXM4-40GB MIG 1g.5gb"), and a laptop part ("RTX 4090 Laptop GPU",
#: "Max-Q") runs at a fraction of the desktop card's clocks and power. No figure beats a wrong one.
NOT_THE_FULL_PART = re.compile(r"\b(mig|laptop|mobile|max q|maxq|notebook)\b|\b\d+g\.\d+gb\b")


def lookup(name: str | None) -> GpuPeak | None:
    """The table entry for a device name from NVML, torch, TensorFlow or JAX, or None."""
    if not name:
        return None
    text = normalize(name)
    if NOT_THE_FULL_PART.search(text):
        return None
    for gpu in GPUS:
        if any(re.search(p, text) for p in gpu.patterns):
            return gpu
    return None


def precision_class(precision: str | None) -> str:
    return PRECISION_CLASS.get(precision or "fp32", "fp32")


def peak_tflops(name: str | None, precision: str | None) -> tuple[float, str] | None:
    """(dense peak TFLOP/s, where it comes from) for a device name and a ``--precision``, or None."""
    gpu = lookup(name)
    if gpu is None:
        return None
    cls = precision_class(precision)
    value = gpu.tflops(cls)
    if value is None:
        return None
    used = cls if not (cls == "tf32" and gpu.tf32 is None) else "fp32"
    return value, f"{gpu.label} {CLASS_LABEL[used]} dense peak {value:g} TFLOP/s ({gpu.source})"
