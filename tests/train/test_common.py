"""The recipes' shared pieces: the attention kernel a model is loaded with."""

from __future__ import annotations

import importlib.util

import torch

from thinc_bench.train.common import attn_implementation


def test_a_requested_attention_kernel_is_kept_and_flash_attention_needs_a_gpu_and_the_package() -> None:
    assert attn_implementation("eager") == "eager"
    flash = torch.cuda.is_available() and importlib.util.find_spec("flash_attn") is not None
    assert attn_implementation(None) == ("flash_attention_2" if flash else None)
