"""On a CPU, SFT and GRPO score their tokens through one plain LM-head projection, not TRL's chunked head.

TRL 1.16's SFTTrainer patches the model (`add_fused_lm_head`) so that its loss pass never builds
the [batch, length, vocab] logits: on a GPU at 32K tokens and Qwen3's 151K vocabulary those would
take tens of GB. It pays for that by recomputing every chunk's logits in the backward pass and,
off Triton devices, by scoring every position, prompt and padding included. On a CPU the trade
goes the other way: a nano batch (4 x 296 tokens, SmolLM2's 49K vocabulary) took 3.7 s in the
chunked head against 1.8 s for the plain projection and cross-entropy over every position,
about a fifth of the whole step (docs/LOG.md).

GRPOTrainer patches its policy the same way and calls it for every update and for the old policy's
log-probabilities; there only the completion tokens are scored (about a third of the positions of
a nano rollout), which TRL's head off Triton devices also scores every position of.

`use_plain_lm_head(model)` keeps TRL's contract: called with `fused_lm_head=True`, the model
returns the same `FusedCausalLMOutput` fields the trainers read (per-token `log_probs`, `entropy`,
`is_top1`, zero where the label is -100, `label_mask`, and the loss TRL defines), under the same
sampling temperature and fp32 cast GRPO gives TRL's head, so the trainer, its loss and its logged
metrics are unchanged. It projects only the positions whose label is scored, in one piece; entropy
carries a gradient only where the trainer adds an entropy bonus to its loss, and top-1 never does.
Every other call goes to TRL's forward as before.
"""

from __future__ import annotations

import functools
import types
from typing import Any

IGNORE_INDEX = -100

_SCALED_HEAD = (
    "final_logit_softcapping",
    "logit_scale",
    "output_multiplier",
    "lm_head_multiplier",
    "logits_scaling",
)
"""Config fields of models whose logits are scaled or capped after the projection: those keep TRL's head."""


def plain_head_applies(model: Any) -> str | None:
    """None when the plain head can stand in for TRL's on `model`, else why not (logged by the recipe)."""
    config = model.config.get_text_config()
    if any(getattr(config, name, None) is not None for name in _SCALED_HEAD):
        return "its logits are scaled or capped after the projection"
    if getattr(config, "output_router_logits", False):
        return "it is a mixture of experts (TRL adds the router's load-balancing loss)"
    forward = getattr(
        model, "forward", None
    )  # TRL's patch is a bound `_fused_forward` (named `forward` by wraps)
    if not isinstance(forward, types.MethodType) or forward.__func__.__code__.co_name != "_fused_forward":
        return "TRL's fused head is not on it"
    return None


def use_plain_lm_head(
    model: Any, *, temperature: float = 1.0, entropy_grad: bool = False, cast_to_fp32: bool = False
) -> None:
    """Answer TRL's `fused_lm_head=True` calls on `model` with one projection of the scored positions.

    Args:
        model: a model TRL's `add_fused_lm_head` patched (SFTTrainer and GRPOTrainer do).
        temperature: what the logits are divided by (GRPO scores under its sampling temperature).
        entropy_grad: give the entropy a gradient (GRPO's entropy bonus puts it in the loss).
        cast_to_fp32: project in float32 outside autocast (GRPO's `cast_lm_head_to_fp32`).
    """
    import contextlib

    import torch
    from trl.trainer.utils import FusedCausalLMOutput

    why_not = plain_head_applies(model)
    if why_not is not None:
        raise ValueError(f"the plain LM head cannot replace TRL's on this model: {why_not}")
    trl_forward = model.forward

    @functools.wraps(type(model).forward)
    def forward(
        self: Any,
        *args: Any,
        fused_lm_head: bool = False,
        labels: Any = None,
        shift_labels: Any = None,
        num_items_in_batch: Any = None,
        **kwargs: Any,
    ) -> Any:
        if not fused_lm_head:
            return trl_forward(
                *args,
                labels=labels,
                shift_labels=shift_labels,
                num_items_in_batch=num_items_in_batch,
                **kwargs,
            )
        kwargs["use_cache"] = False
        hidden = self.base_model(*args, **kwargs).last_hidden_state
        if shift_labels is None:
            hidden, labels = hidden[:, :-1], labels[:, 1:]
        else:
            labels = shift_labels
        head = self.get_output_embeddings()
        labels = labels.to(head.weight.device)
        mask = labels != IGNORE_INDEX
        scored = hidden.to(head.weight.device)[mask]
        if cast_to_fp32:
            with torch.autocast(scored.device.type, enabled=False):
                logits = torch.nn.functional.linear(scored.float(), head.weight.float(), _float(head.bias))
        else:
            logits = head(scored).float()  # [scored tokens, vocab]
        if temperature != 1.0:
            logits = logits / temperature
        targets = labels[mask]
        log_z = torch.logsumexp(logits, dim=-1)
        picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - log_z
        with contextlib.nullcontext() if entropy_grad else torch.no_grad():
            entropy = log_z - (torch.softmax(logits, dim=-1) * logits).sum(-1)
        with torch.no_grad():
            top1 = (logits.detach().argmax(-1) == targets).to(picked.dtype)

        def spread(values: Any) -> Any:  # zero at unscored positions, still connected to the graph
            return values.new_zeros(mask.shape).masked_scatter(mask, values)

        log_probs = spread(picked)
        denominator = mask.sum().clamp(min=1) if num_items_in_batch is None else num_items_in_batch
        return FusedCausalLMOutput(
            loss=-log_probs.sum() / denominator,
            log_probs=log_probs,
            entropy=spread(entropy),
            is_top1=spread(top1),
            label_mask=mask,
        )

    model.forward = types.MethodType(forward, model)


def _float(bias: Any) -> Any:
    return None if bias is None else bias.float()


LM_HEADS = ("auto", "plain", "trl")
"""recipes/sft.py's and recipes/grpo.py's --lm_head values."""


def choose_lm_head(requested: str, device_type: str, model: Any) -> str:
    """The head the loss scores with, and why: 'plain ...' or 'trl ...' (the recipes log and record it)."""
    if requested not in LM_HEADS:
        raise SystemExit(f"--lm_head {requested!r}: choose one of {', '.join(LM_HEADS)}")
    if requested == "trl":
        return "trl (requested)"
    why_not = plain_head_applies(model)
    if requested == "plain":
        if why_not is not None:
            raise SystemExit(f"--lm_head plain: {why_not}; use --lm_head trl")
        return "plain (requested)"
    if device_type != "cpu":
        return f"trl (auto: on {device_type} the full logits would take the memory TRL's chunked head saves)"
    if why_not is not None:
        return f"trl (auto: {why_not})"
    return "plain (auto: on CPU one projection of the scored tokens is faster than TRL's chunked head)"


def install_lm_head(trainer: Any, requested: str) -> str:
    """Put the head `choose_lm_head` picks on a TRL trainer's model; return the choice (recipes log and record it).

    The plain head takes the settings the trainer gave TRL's: GRPOTrainer scores under its sampling
    temperature and `cast_lm_head_to_fp32`, with an entropy in its loss when its entropy bonus is on;
    SFTTrainer uses TRL's defaults (it has none of these attributes). A reference model that carries
    TRL's head gets the plain one too.
    """
    head = choose_lm_head(requested, trainer.args.device.type, trainer.model)
    if head.startswith("plain"):
        temperature = float(getattr(trainer, "temperature", 1.0))
        cast_to_fp32 = bool(getattr(trainer.args, "cast_lm_head_to_fp32", False))
        # TRL's own switch for GRPO's entropy bonus (GRPOTrainer.__init__)
        entropy_grad = bool(getattr(trainer, "_entropy_bonus_enabled", False))
        use_plain_lm_head(
            trainer.model, temperature=temperature, entropy_grad=entropy_grad, cast_to_fp32=cast_to_fp32
        )
        reference = getattr(trainer, "ref_model", None)
        if reference is not None and plain_head_applies(reference) is None:
            use_plain_lm_head(reference, temperature=temperature, cast_to_fp32=cast_to_fp32)
    return head
