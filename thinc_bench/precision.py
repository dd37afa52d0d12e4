"""Which float format this machine computes fast: bfloat16 where the hardware has it, float32 elsewhere.

bf16 halves memory traffic and is the usual GPU training format, but on a CPU without native bf16
instructions every bf16 matmul is emulated: a Linear(576, 1536) forward+backward took 2,120 ms under
bf16 autocast against 135-167 ms in float32 on an AVX2 EPYC, and 4x float32's time on an AVX512 Xeon
without AVX512-BF16 (docs/LOG.md). So "auto" means bf16 only on CUDA devices that support it and on
CPUs with AVX512-BF16, AMX or Arm's BF16 extension; everywhere else float32. Recipes (`bf16: auto`)
and eval (`--dtype auto`, the default) ask here, log the reason, and record the choice.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Bf16Support", "auto_dtype", "bf16_support", "cpu_bf16_support"]


@dataclass(frozen=True)
class Bf16Support:
    """Whether `device` computes bf16 natively, and the evidence, for logs and run records."""

    device: str
    native: bool
    reason: str


def _cpu_flags() -> set[str]:
    """The CPU feature flags Linux reports (empty elsewhere: then only torch's own checks count)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):  # x86, Arm
            return set(value.split())
    return set()


def cpu_bf16_support(
    *, capability: str | None = None, flags: set[str] | None = None, machine: str | None = None
) -> Bf16Support:
    """Native bf16 on this CPU: x86 with AVX512-BF16 or AMX-BF16, or Arm with the BF16 extension.

    The keyword arguments replace what is read from the machine (torch's dispatch capability, the
    kernel's feature flags, the architecture); tests use them to check the rule on other CPUs.
    """
    import torch

    capability = capability if capability is not None else torch.backends.cpu.get_cpu_capability()
    machine = (machine if machine is not None else platform.machine()).lower()
    if flags is None:
        flags = _cpu_flags()
        # torch's own probe sees what a container's /proc may hide; trust either.
        if getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)():
            flags.add("avx512_bf16")
        if getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)():
            flags.add("amx_bf16")
    if machine in ("x86_64", "amd64", "i686", "x86"):
        found = sorted(flags & {"avx512_bf16", "amx_bf16"})
        if found:
            return Bf16Support("cpu", True, f"CPU has {'/'.join(found)} (torch dispatch {capability})")
        return Bf16Support(
            "cpu",
            False,
            f"CPU ({capability}) lacks AVX512-BF16 and AMX: bf16 would be emulated, several times "
            "slower than float32",
        )
    if machine in ("aarch64", "arm64"):
        if "bf16" in flags:
            return Bf16Support("cpu", True, f"Arm CPU with the BF16 extension (torch dispatch {capability})")
        return Bf16Support("cpu", False, "Arm CPU without the BF16 extension: bf16 would be emulated")
    return Bf16Support("cpu", False, f"unknown CPU architecture {machine!r}: float32 is the safe choice")


def bf16_support(device: str = "auto") -> Bf16Support:
    """Native bf16 on `device` ("auto": CUDA when available, else the CPU)."""
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
            return Bf16Support(device, True, f"{torch.cuda.get_device_name()} supports bf16")
        return Bf16Support(device, False, "this CUDA device does not support bf16")
    return cpu_bf16_support()


def auto_dtype(device: str = "auto") -> str:
    """The model dtype "auto" stands for on `device`: "bfloat16" where native, else "float32"."""
    return "bfloat16" if bf16_support(device).native else "float32"
