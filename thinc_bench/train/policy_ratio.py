"""The policy's importance ratio pi_theta / pi_old per optimizer step, which TRL's GRPOTrainer clips but never logs.

TRL logs how many tokens the clip caught (`clip_ratio/low_mean`, `clip_ratio/high_mean`), not the
ratio itself, so a run whose clip never acts (one update per generation batch: every ratio is 1)
looks the same as one where nothing was large enough to clip. `with_ratio_logging(GRPOTrainer)`
returns a subclass that logs `importance_ratio/mean`, `/min` and `/max` over the loss tokens of
each micro-batch (all processes), next to TRL's clip fractions. It keeps the log-probabilities the
loss pass computed (no second forward pass) and compares them with the generation batch's
`old_per_token_logps`; where TRL stored none (the batch was sampled from these very weights) the
ratio is exactly 1, as TRL's loss takes it. A micro-batch without a loss token on any process (its
group dropped by dynamic sampling) adds nothing, so it cannot turn the step's mean into NaN.

It relies on two private methods of TRL 1.16's GRPOTrainer (`_get_per_token_logps_and_entropies`,
`_compute_loss`); the recipes pin `trl>=1.16`. It never changes the loss.
"""

from __future__ import annotations

import math
from typing import Any

RATIO_METRICS = ("importance_ratio/mean", "importance_ratio/min", "importance_ratio/max")
"""The names logged per step (TRL averages a step's micro-batches)."""


def with_ratio_logging(trainer_cls: type) -> type:
    """A subclass of `trainer_cls` (TRL's GRPOTrainer) that logs the policy ratio's mean, min and max."""

    class RatioLoggingTrainer(trainer_cls):  # type: ignore[misc]
        _thinc_logps: Any = None

        def _get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any) -> Any:
            out = super()._get_per_token_logps_and_entropies(*args, **kwargs)
            self._thinc_logps = out[0]
            return out

        def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
            loss = super()._compute_loss(model, inputs)  # its first call above is the loss pass's
            if self.model.training and self._thinc_logps is not None:
                stats = _ratio_stats(self, inputs)  # a collective: every rank calls it
                if not math.isnan(stats[0]):  # no loss token here (a dropped group): nothing to average in
                    for name, value in zip(RATIO_METRICS, stats, strict=True):
                        self._metrics["train"][name].append(value)
            self._thinc_logps = None
            return loss

    RatioLoggingTrainer.__name__ = RatioLoggingTrainer.__qualname__ = f"RatioLogging{trainer_cls.__name__}"
    return RatioLoggingTrainer


def _ratio_stats(trainer: Any, inputs: dict[str, Any]) -> tuple[float, float, float]:
    """Mean, min and max of exp(logp - old logp) over every process's loss tokens of this micro-batch."""
    import torch

    logps = trainer._thinc_logps.detach().float()
    old = inputs.get("old_per_token_logps")
    ratio = torch.ones_like(logps) if old is None else torch.exp(logps - old.float())
    mask = inputs["completion_mask"].bool()
    if "tool_mask" in inputs:
        mask = mask & inputs["tool_mask"].bool()
    values = ratio[mask]
    local = torch.stack(
        [
            values.sum(),
            torch.tensor(float(values.numel()), device=values.device),
            values.min() if values.numel() else torch.tensor(float("inf"), device=values.device),
            values.max() if values.numel() else torch.tensor(float("-inf"), device=values.device),
        ]
    )
    every = trainer.accelerator.gather(local.unsqueeze(0)).view(-1, 4)
    total, count = every[:, 0].sum().item(), every[:, 1].sum().item()
    if not count:
        return float("nan"), float("nan"), float("nan")
    return total / count, every[:, 2].min().item(), every[:, 3].max().item()
