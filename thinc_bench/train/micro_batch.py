"""Micro-batches trimmed to their own longest completion, not the generation batch's.

TRL pads a whole generation batch (128 prompts x 8 rollouts) to its longest completion, then cuts it
into micro-batches that keep that width: at one row per device, a 3K-token trajectory is trained as
a 32K-token row (the padding is masked, but every layer still computes it, forward and backward).
`with_trimmed_padding(GRPOTrainer)` returns a subclass that, before each loss pass, cuts the
completion columns after the micro-batch's last real token (`completion_mask`). That is exact:
completions are right-padded and attention is causal, so no real token ever attends to a column
cut, and every per-token tensor (masks, old / reference / sampling log-probabilities, per-token
importance weights) is cut alike. With `per_device_train_batch_size: 1` a row costs its own length.

The prompt's left padding stays: the model takes positions from the column index (TRL passes no
position ids), and the old log-probabilities were computed on the padded prompt, so cutting it
would move the ratio off 1; it is at most the longest prompt (~1.7K tokens), against up to 32K of
completion padding.

It relies on TRL 1.16's private `_prepare_inputs` and the key names of its training batch; a batch
with a key it does not know to be per-prompt or per-completion-token (a vision model's) is left whole.
"""

from __future__ import annotations

from typing import Any

PER_TOKEN = (
    "completion_ids",
    "completion_mask",
    "tool_mask",
    "old_per_token_logps",
    "ref_per_token_logps",
    "sampling_per_token_logps",
    "importance_sampling_ratio",
)
"""Training-batch keys whose second dimension is the completion's tokens (the ratio only when per token)."""
WHOLE = ("prompt_ids", "prompt_mask", "advantages", "num_items_in_batch", "num_images", "num_tiles")
"""Keys left as they are: per prompt token, per row, or scalars."""


def trim_completion_padding(inputs: dict[str, Any]) -> dict[str, Any]:
    """A new batch whose per-completion-token tensors end at the last real completion token of any row
    (at least one column); `inputs` itself is not changed (TRL reuses it for every pass over it)."""
    if any(key not in PER_TOKEN and key not in WHOLE for key in inputs):
        return inputs
    mask = inputs["completion_mask"]
    width = mask.shape[1]
    real = mask.sum(dim=0).nonzero()
    keep = max(1, int(real[-1]) + 1 if real.numel() else 1)
    if keep == width:
        return inputs
    out = dict(inputs)
    for key in PER_TOKEN:
        value = out.get(key)
        if value is not None and value.dim() == 2 and value.shape[1] == width:
            out[key] = value[:, :keep]
    return out


def with_trimmed_padding(trainer_cls: type) -> type:
    """A subclass of `trainer_cls` (TRL's GRPOTrainer) that trains each micro-batch at its own width."""

    class TrimmedPaddingTrainer(trainer_cls):  # type: ignore[misc]
        def _prepare_inputs(self, generation_batch: Any) -> Any:
            inputs = super()._prepare_inputs(generation_batch)
            return trim_completion_padding(inputs) if self.model.training else inputs

    TrimmedPaddingTrainer.__name__ = TrimmedPaddingTrainer.__qualname__ = (
        f"TrimmedPadding{trainer_cls.__name__}"
    )
    return TrimmedPaddingTrainer
