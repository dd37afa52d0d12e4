"""Dynamic sampling's filter: groups whose rewards are all equal leave the loss, denominator included.

A group whose rollouts all score the same (all solved, all failed) gets advantage 0 on every row,
so it adds nothing to the policy gradient; but TRL's `dapo` loss divides by the loss tokens of the
whole generation batch, so its tokens still dilute every other group's gradient. The share of such
groups grows as the policy solves more (4 epochs revisit solved problems): an implicit learning-rate
decay nobody scheduled. DAPO removes them (Yu et al. 2025, sec. 3.2: it over-samples and refills the
batch with groups of nonzero variance). Here their rows get loss mask 0 and the denominator is
recounted over the groups left, so the step is the one the batch without those groups would take.
This filter runs in every `dynamic_sampling` mode but `off`: alone (`filter`: the batch shrinks as
problems get solved), after DAPO's refill (`refill`: `stream_rollout` over-generates so the batch
is full of informative groups; the filter only meets what a batch still short after its last round
holds) or after ASTER's per-epoch drop of solved problems (`drop_solved`). Logged per step:
`dynamic_sampling/effective_prompts` (groups with differing rewards in the generation batch: the
prompts the update really learns from), `dynamic_sampling/zero_variance_groups` (share of groups
dropped) and `dynamic_sampling/dropped_tokens` (share of loss tokens dropped).

A group is dropped when every row's advantage is exactly 0 (gathered over all processes; a group
may span ranks): its scored rewards are all equal, or none is scored (an unscored row's advantage is
0 and its mask already 0, see `rollout_func`). With `beta` > 0 the dropped rows also leave the KL
term, as in DAPO, which drops the groups whole.

`with_zero_variance_filter(GRPOTrainer)` returns the subclass; it relies on TRL 1.16's private
`_generate_and_score_completions` output (`advantages`, `completion_mask`, `tool_mask`,
`num_items_in_batch`); the recipes pin `trl>=1.16`.
"""

from __future__ import annotations

from typing import Any

ZERO_VARIANCE_METRIC = "dynamic_sampling/zero_variance_groups"
DROPPED_TOKENS_METRIC = "dynamic_sampling/dropped_tokens"
EFFECTIVE_METRIC = "dynamic_sampling/effective_prompts"


def zero_variance_rows(advantages: Any, group: int) -> Any:
    """Per row (all processes' rows in order, groups contiguous), whether its group's advantages are all 0.

    Raises:
        ValueError: the rows do not split into whole groups of `group`.
    """
    if group < 1 or advantages.numel() % group:
        raise ValueError(f"{advantages.numel()} advantages do not split into groups of {group}")
    return (advantages.view(-1, group) == 0).all(dim=1).repeat_interleave(group)


def with_zero_variance_filter(trainer_cls: type) -> type:
    """A subclass of `trainer_cls` (TRL's GRPOTrainer) whose training batches leave out zero-variance groups."""

    class ZeroVarianceFilterTrainer(trainer_cls):  # type: ignore[misc]
        def _generate_and_score_completions(self, inputs: Any) -> Any:
            output = super()._generate_and_score_completions(inputs)
            if self.model.training:
                _drop_zero_variance_groups(self, output)
            return output

    ZeroVarianceFilterTrainer.__name__ = ZeroVarianceFilterTrainer.__qualname__ = (
        f"ZeroVarianceFilter{trainer_cls.__name__}"
    )
    return ZeroVarianceFilterTrainer


def _drop_zero_variance_groups(trainer: Any, output: dict[str, Any]) -> None:
    """Mask the rows of zero-variance groups out of the loss and recount TRL's DAPO denominator."""
    import torch

    advantages = output["advantages"]
    local = advantages.shape[0]
    every = trainer.accelerator.gather(advantages.detach().float().reshape(-1))
    zero = zero_variance_rows(every, trainer.num_generations)
    start = trainer.accelerator.process_index * local
    keep = (~zero[start : start + local]).to(output["completion_mask"].dtype).unsqueeze(1)
    before = (
        output["completion_mask"] * output["tool_mask"]
        if "tool_mask" in output
        else output["completion_mask"]
    )
    if "tool_mask" in output:
        output["tool_mask"] = output["tool_mask"] * keep.to(output["tool_mask"].dtype)
    else:
        output["completion_mask"] = output["completion_mask"] * keep
    after = before * keep
    counts = torch.stack([before.sum(), after.sum()]).to(advantages.device, torch.float32)
    total, kept = trainer.accelerator.gather(counts.unsqueeze(0)).view(-1, 2).sum(dim=0).tolist()
    output["num_items_in_batch"] = torch.tensor(kept, device=output["num_items_in_batch"].device).to(
        output["num_items_in_batch"].dtype
    )
    groups = zero.view(-1, trainer.num_generations)[:, 0]
    trainer._metrics["train"][ZERO_VARIANCE_METRIC].append(groups.float().mean().item())
    trainer._metrics["train"][EFFECTIVE_METRIC].append(float((~groups).sum().item()))
    trainer._metrics["train"][DROPPED_TOKENS_METRIC].append(1 - kept / total if total else 0.0)
