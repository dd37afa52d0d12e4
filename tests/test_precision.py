"""bf16 only where the hardware computes it: the rule on CPUs other than this one, this machine's
answer against torch's own probe, and the recipes' `bf16: auto` through TRL's real parser."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
import torch

from thinc_bench import precision
from thinc_bench.train.launch import resolve_auto_bf16

X86_FLAGS_AVX2 = {"fpu", "sse2", "avx", "avx2", "fma"}  # an EPYC of the AVX2 generation
X86_FLAGS_AVX512 = X86_FLAGS_AVX2 | {"avx512f", "avx512bw", "avx512_vnni"}  # a Xeon without BF16


@pytest.mark.parametrize(
    ("machine", "flags", "native"),
    [
        ("x86_64", X86_FLAGS_AVX2, False),
        ("x86_64", X86_FLAGS_AVX512, False),  # AVX512 alone still emulates bf16 (4x float32 here)
        ("x86_64", X86_FLAGS_AVX512 | {"avx512_bf16"}, True),  # Cooper Lake, Zen 4
        ("x86_64", X86_FLAGS_AVX512 | {"amx_bf16", "amx_tile"}, True),  # Sapphire Rapids
        ("aarch64", {"fp", "asimd", "sve"}, False),  # Graviton 2
        ("aarch64", {"fp", "asimd", "sve", "bf16", "i8mm"}, True),  # Graviton 3, Neoverse V1
        ("riscv64", {"bf16"}, False),  # unknown architecture: float32
    ],
)
def test_native_bf16_follows_the_cpu_features(machine: str, flags: set[str], native: bool) -> None:
    support = precision.cpu_bf16_support(capability="X", flags=flags, machine=machine)
    assert (support.device, support.native) == ("cpu", native)
    assert support.reason  # said in the log and recorded


def test_this_machine_agrees_with_torchs_own_probe() -> None:
    support = precision.bf16_support("cpu")
    if platform.machine() in ("x86_64", "AMD64"):
        probed = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
        assert support.native == probed
    assert precision.auto_dtype("cpu") == ("bfloat16" if support.native else "float32")


def _parse_bf16(argv: list[str]) -> bool:
    from trl import SFTConfig, TrlParser

    (config,) = TrlParser((SFTConfig,)).parse_args_and_config(argv)
    return bool(config.bf16)


@pytest.mark.parametrize(
    ("yaml_bf16", "cli", "expected"),
    [
        ("auto", [], "native"),
        ("true", ["--bf16", "auto"], "native"),  # the command line wins over the config
        ("false", ["--bf16=auto"], "native"),
        ("true", [], True),  # an explicit choice is kept
        ("auto", ["--bf16", "false"], False),
        ("auto", ["--bf16"], True),  # the bare flag means true
    ],
)
def test_recipes_resolve_bf16_auto_before_trl_parses(
    tmp_path: Path, yaml_bf16: str, cli: list[str], expected: object
) -> None:
    config = tmp_path / "recipe.yaml"
    config.write_text(  # use_cpu as the CPU recipes set it: transformers refuses bf16 on a CPU otherwise
        f"output_dir: {tmp_path / 'out'}\nbf16: {yaml_bf16}\nlearning_rate: 1.0e-5\nuse_cpu: true\n"
    )
    argv, said = resolve_auto_bf16(["--config", str(config), *cli])
    native = precision.bf16_support("auto").native
    want = native if expected == "native" else expected
    if expected == "native" or not want:
        assert _parse_bf16(argv) is want
    else:  # bf16 true is refused by transformers on a CPU without it: the argv is left as given
        assert argv == ["--config", str(config), *cli]
    assert ("auto ->" in said) == (expected == "native")
