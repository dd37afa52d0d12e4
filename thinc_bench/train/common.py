"""Small pieces both recipes share: loss labels from assistant masks, the attention kernel, the eval command.

Pure functions; the recipes do the IO. `labels_from_mask` turns the builder's `assistant_masks`
(1 = the model wrote it) into causal-LM labels with -100 on every prompt and interpreter-output
token, so TRL's collator needs neither `assistant_only_loss` nor a chat template that supports it.
"""

from __future__ import annotations

import importlib.util
import shlex
from collections.abc import Sequence

IGNORE_INDEX = -100
"""The label PyTorch's cross-entropy (and so every HF causal LM) skips."""


def labels_from_mask(input_ids: Sequence[int], assistant_masks: Sequence[int]) -> list[int]:
    """Labels for one example: the token id where the mask is 1, `IGNORE_INDEX` where it is 0.

    Raises:
        ValueError: the two sequences differ in length.
    """
    if len(input_ids) != len(assistant_masks):
        raise ValueError(f"input_ids has {len(input_ids)} tokens but assistant_masks {len(assistant_masks)}")
    return [int(t) if m else IGNORE_INDEX for t, m in zip(input_ids, assistant_masks, strict=True)]


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
