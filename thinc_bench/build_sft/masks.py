"""SFT token ids and loss masks for one trajectory, in a student tokenizer.

The teacher wrote the trajectory in its own tokens; the student is trained in its own. So the chat
prompt (system + user) is rendered with the student's chat template and generation header, and the
trajectory text is tokenized once with offsets. Each token takes its kind from the segment holding its
first character (`Trajectory.with_token_spans`). The mask is 1 on plan, code, answer and the closing
EOS, and 0 on the prompt and on every interpreter-output token. An output block's opening string
(```` ```output ````, the dialect's stop string) is the model's own (DESIGN.md: the model opens the
block, the harness writes the rest), so its tokens are 1. Pure: no IO; the tokenizer is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from thinc_bench.trajectory import DIALECTS, Span, Trajectory


@dataclass(frozen=True)
class Tokenized:
    """A pre-tokenized SFT example.

    Attributes:
        input_ids: prompt, trajectory and EOS token ids.
        assistant_masks: 1 where the student is trained (plan, code, answer, EOS), 0 elsewhere.
        prompt_tokens: how many leading ids are the prompt.
        plan_tokens: tokens of the plan segment.
        model_tokens: trajectory tokens with mask 1 (EOS excluded): what the model writes.
        trajectory: the parsed trajectory with token spans relative to the trajectory's first token.
    """

    input_ids: list[int]
    assistant_masks: list[int]
    prompt_tokens: int
    plan_tokens: int
    model_tokens: int
    trajectory: Trajectory

    @property
    def plan_share(self) -> float:
        """Plan tokens / model tokens (0 when the model wrote nothing)."""
        return self.plan_tokens / self.model_tokens if self.model_tokens else 0.0


def render_prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of the chat prompt with the assistant generation header, from the tokenizer's template."""
    encoded: Any = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    ids = encoded["input_ids"] if hasattr(encoded, "keys") else encoded
    return [int(i) for i in ids]


def completion_mask(trajectory: Trajectory, offsets: list[tuple[int, int]]) -> list[int]:
    """Per trajectory token, 1 if the model wrote it, 0 if the interpreter did.

    Args:
        trajectory: the trajectory with token spans (see `Trajectory.with_token_spans`).
        offsets: per token, its (start, end) characters in the trajectory text.

    Returns:
        The mask, one entry per token.

    Raises:
        ValueError: the trajectory has no token spans.
    """
    stop = DIALECTS[trajectory.dialect].stop
    mask: list[int] = []
    for segment in trajectory.segments:
        if segment.token_span is None:
            raise ValueError("completion_mask needs token spans: call Trajectory.with_token_spans first")
        for index in range(*segment.token_span):
            if segment.kind != "output":
                mask.append(1)
            else:
                model_end = segment.span.start + (len(stop) if segment.raw.startswith(stop) else 0)
                mask.append(int(offsets[index][0] < model_end))
    return mask


def tokenize_example(
    tokenizer: Any, prompt_messages: list[dict[str, str]], trajectory: Trajectory
) -> Tokenized:
    """Token ids and assistant masks of prompt + trajectory + EOS in the student's tokenizer.

    Args:
        tokenizer: a fast (offset-reporting) Hugging Face tokenizer with a chat template.
        prompt_messages: the system and user turns, without the assistant turn.
        trajectory: the parsed trajectory (canonical dialect).

    Returns:
        The tokenized example.

    Raises:
        ValueError: the tokenizer cannot report character offsets (a slow tokenizer).
    """
    prompt_ids = render_prompt_ids(tokenizer, prompt_messages)
    text = trajectory.render()
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"tokenizer {getattr(tokenizer, 'name_or_path', tokenizer)!r} cannot report offsets; "
            "pass --student-tokenizer with a fast tokenizer (tokenizer.json)"
        )
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = [int(i) for i in encoded["input_ids"]]
    offsets = [(int(a), int(b)) for a, b in encoded["offset_mapping"]]
    spanned = trajectory.with_token_spans(offsets)
    mask = completion_mask(spanned, offsets)
    plan = sum(_length(s.token_span) for s in spanned.segments if s.kind == "plan")
    eos = tokenizer.eos_token_id
    tail = [] if eos is None else [int(eos)]
    return Tokenized(
        input_ids=prompt_ids + ids + tail,
        assistant_masks=[0] * len(prompt_ids) + mask + [1] * len(tail),
        prompt_tokens=len(prompt_ids),
        plan_tokens=plan,
        model_tokens=sum(mask),
        trajectory=spanned,
    )


def _length(span: Span | None) -> int:
    return 0 if span is None else span.end - span.start
