"""Small pieces both recipes share: the attention kernel and the eval command.

Pure functions; the recipes do the IO. (SFT labels are TRL's own: for a pre-tokenized dataset TRL
1.16 builds them from the builder's `assistant_masks` column, -100 wherever the mask is 0.)
"""

from __future__ import annotations

import importlib.util
import shlex
from collections.abc import Sequence

IGNORE_INDEX = -100
"""The label PyTorch's cross-entropy (and so every HF causal LM) skips; TRL writes it where the mask is 0."""


def eval_command(model_dir: str, extra: Sequence[str] = ()) -> str:
    """The exact shell command that evaluates a recipe's output folder with `thinc_bench.eval`."""
    return shlex.join(["python", "-m", "thinc_bench.eval", "--model", str(model_dir), *extra])


def attn_implementation(requested: str | None) -> str | None:
    """The attention kernel to load the model with: the requested one, else FlashAttention-2 on a GPU
    when `flash_attn` is installed (no quadratic mask at 32K tokens), else None (transformers' SDPA)."""
    if requested is not None:
        return requested
    import torch

    if torch.cuda.is_available() and importlib.util.find_spec("flash_attn") is not None:
        return "flash_attention_2"
    return None
