"""SFT token ids and loss masks for one trajectory, in a student tokenizer.

The teacher wrote the trajectory in its own tokens; the student is trained in its own. So the chat
prompt (system + user) is rendered with the student's chat template and generation header by
`prompts.render_prompt_ids` (the same ids evaluation uses), the trajectory is adapted to who opens the
plan (`for_student`), and its text is tokenized with offsets chunk by chunk, cut where the model and
the harness took turns. Each token takes its kind from the segment holding its first character
(`Trajectory.with_token_spans`). The mask is 1 on plan, code, answer and the closing
EOS, and 0 on the prompt and on every interpreter-output token. An output block's opening string
(```` ```output ````, the dialect's stop string) is the model's own (docs/DESIGN.md: the model opens the
block, the harness writes the rest), so its tokens are 1; in the tool_call dialect the model's own
part of a tool turn is the end-of-turn token that asked for it, and the template's markup and the
responses are 0; there each tool turn is rendered again with the student's template, so an example is
the student's own rollout (`_tool_call_example`). In a recovered trajectory, a failed execution's
block (code and output) is 0 as well (`without_failed_blocks`): the slip is context, only the
recovery is trained. Pure: no IO; the tokenizer is passed in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from thinc_bench.prompts.chat import PLAN_OPEN, opened_plan, render_prompt_ids
from thinc_bench.prompts.tools import neutralise_markup, tool_turn_text
from thinc_bench.trajectory import TOOL_CALL, Segment, Span, Trajectory, model_prefix, parse

_OPENER = re.compile(rf"\s*{PLAN_OPEN}(?:\r?\n)?")
THINK_END = re.compile(r"</think>")
_EMPTY_PLAN = re.compile(r"<think>\s*</think>(?:\r?\n)*")
_TURN_MARKUP = re.compile(r"(?:<\|[^<>|\s]{1,40}\|>[a-z_]{0,20}|\r?\n)*")
"""The chat markup after a tool turn's last `</tool_response>`, up to the next assistant turn (no plan)."""

"""The plan's opening tag with the space before it and its line break, as a template writes it."""


@dataclass(frozen=True)
class Tokenized:
    """A pre-tokenized SFT example.

    Attributes:
        input_ids: prompt, trajectory and EOS token ids.
        assistant_masks: 1 where the student is trained (plan, code, answer, EOS), 0 elsewhere.
        prompt_tokens: how many leading ids are the prompt.
        plan_tokens: tokens of the plan after its `<think>` opener (the same for a template that
            opens the plan in the prompt and one that leaves it to the model).
        model_tokens: trajectory tokens with mask 1, EOS and the `<think>` opener excluded: what the
            model writes (so the plan share is the same under both kinds of template).
        trajectory: the parsed trajectory with token spans relative to the trajectory's first token.
        total_tokens: every trajectory token, model and interpreter alike, EOS and the `<think>`
            opener excluded: the sources' "total tokens" the plan share is counted over.
    """

    input_ids: list[int]
    assistant_masks: list[int]
    prompt_tokens: int
    plan_tokens: int
    model_tokens: int
    trajectory: Trajectory
    total_tokens: int = 0

    @property
    def plan_share(self) -> float:
        """Plan tokens / all trajectory tokens (the sources' rule; 0 when there are none)."""
        return self.plan_tokens / self.total_tokens if self.total_tokens else 0.0


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
    mask: list[int] = []
    for segment in trajectory.segments:
        if segment.token_span is None:
            raise ValueError("completion_mask needs token spans: call Trajectory.with_token_spans first")
        for index in range(*segment.token_span):
            if segment.kind != "output":
                mask.append(1)
            else:
                model_end = segment.span.start + model_prefix(segment, trajectory.dialect)
                mask.append(int(offsets[index][0] < model_end))
    return mask


NATIVE_THINKING_RULE = (
    "the teacher thinks natively: each trajectory is the text after its first </think> (and the blank "
    "lines after it); its own thinking is dropped, never used as the ThinC plan"
)


def after_native_thinking(text: str) -> str:
    """The trajectory a natively thinking teacher wrote after its own thinking (`NATIVE_THINKING_RULE`):
    the text after the first `</think>`; '' when its thinking never closed (no trajectory at all)."""
    closer = THINK_END.search(text)
    return "" if closer is None else text[closer.end() :].lstrip("\r\n")


def for_student(text: str, *, opened: bool, dialect: str = "markdown") -> str:
    """The trajectory as the student writes it after its own generation prompt: one `<think>` in all.

    A student whose prompt already opened the plan (`opened_plan`, Qwen3-Thinking-2507) writes the
    plan from its first word, so the teacher's `<think>` and its line break are dropped; a student
    that opens the plan itself (Qwen3 hybrid) gets `<think>\\n` before a plan the teacher wrote
    without one. A text without a plan is returned as is (the conformance filter rejects it).
    """
    opener = _OPENER.match(text)
    if opened:
        return text if opener is None else text[opener.end() :]
    plan = next((s for s in parse(text, dialect).segments if s.kind == "plan"), None)
    return f"{PLAN_OPEN}\n{text}" if opener is None and plan is not None else text


def tokenize_example(
    tokenizer: Any,
    prompt_messages: list[dict[str, str]],
    trajectory: Trajectory,
    template_kwargs: Mapping[str, Any] | None = None,
    tools: list[dict[str, Any]] | None = None,
) -> Tokenized:
    """Token ids and assistant masks of prompt + trajectory + EOS in the student's tokenizer.

    The prompt is `prompts.render_prompt_ids`, the very ids evaluation gives the model. The trajectory
    is tokenized in the chunks inference produced them in (the model's text up to each output block's
    opener, the harness's output block, the model's text after it), so no token straddles a
    model/harness seam: a blank line the model writes after an output block stays the model's.

    Args:
        tokenizer: a fast (offset-reporting) Hugging Face tokenizer with a chat template.
        prompt_messages: the system and user turns, without the assistant turn.
        trajectory: the parsed trajectory (canonical dialect), as the teacher wrote it.
        template_kwargs: extra chat-template variables (e.g. `{"enable_thinking": False}`).
        tools: the tools the prompt declares (the tool_call dialect's `prompts.python_tool`).

    Returns:
        The tokenized example; its trajectory is the student's text (`for_student`).

    Raises:
        ValueError: the tokenizer cannot report character offsets (a slow tokenizer).
    """
    if trajectory.dialect == "tool_call" and tools:
        return _tool_call_example(tokenizer, prompt_messages, trajectory, template_kwargs, tools)
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"tokenizer {getattr(tokenizer, 'name_or_path', tokenizer)!r} cannot report offsets; "
            "pass --student-tokenizer with a fast tokenizer (tokenizer.json)"
        )
    prompt_ids = render_prompt_ids(tokenizer, prompt_messages, template_kwargs, tools)
    opened = opened_plan(tokenizer, prompt_ids)
    text = for_student(trajectory.render(), opened=opened, dialect=trajectory.dialect)
    parsed = parse(text, trajectory.dialect)
    opener = _OPENER.match(text)
    ids: list[int] = []
    offsets: list[tuple[int, int]] = []
    opener_tokens = 0
    for start, end in _chunks(parsed, 0 if opener is None else opener.end()):
        encoded = tokenizer(text[start:end], add_special_tokens=False, return_offsets_mapping=True)
        ids += [int(i) for i in encoded["input_ids"]]
        offsets += [(start + int(a), start + int(b)) for a, b in encoded["offset_mapping"]]
        if opener is not None and start == 0:
            opener_tokens = len(ids)
    spanned = parsed.with_token_spans(offsets)
    mask = completion_mask(spanned, offsets)
    plans = [s for s in spanned.segments if s.kind == "plan"]
    plan = sum(_length(s.token_span) for s in plans) - (opener_tokens if plans else 0)
    eos = tokenizer.eos_token_id
    tail = [] if eos is None else [int(eos)]
    return Tokenized(
        input_ids=prompt_ids + ids + tail,
        assistant_masks=[0] * len(prompt_ids) + mask + [1] * len(tail),
        prompt_tokens=len(prompt_ids),
        plan_tokens=plan,
        model_tokens=sum(mask) - opener_tokens,
        trajectory=spanned,
        total_tokens=len(ids) - opener_tokens,
    )


def without_failed_blocks(example: Tokenized, exec_statuses: Sequence[str]) -> Tokenized:
    """The example with every failed execution's block out of the loss: context, not a target.

    A recovered trajectory (`build_sft --recovery-share`) holds a block whose run failed (a teacher's
    slip, a timeout), its output, then the recovery. Trained as written, the student would learn to
    write the slip too. So from the failed block's code (its opening fence, or the tool call) to the
    end of its output block, the model's own opener and the template's markup included, the mask is
    0; the recovery after it stays trained. `model_tokens` drops by the tokens cleared; `total_tokens`
    keeps them (they are still in the trajectory). Executions pair with output blocks in order; a trajectory whose
    outputs and executions do not pair up is returned as is (the recovery filter rejects it: its
    answer cannot be vouched for), as is one whose executions all ran clean.

    Args:
        example: a `tokenize_example` result.
        exec_statuses: the trajectory's execution statuses in order (`SampleRecord.exec_statuses`).
    """
    segments = example.trajectory.segments
    outputs = [i for i, s in enumerate(segments) if s.kind == "output"]
    if all(s == "ok" for s in exec_statuses) or len(outputs) != len(exec_statuses):
        return example
    mask = list(example.assistant_masks)
    for n, (at, status) in enumerate(zip(outputs, exec_statuses, strict=True)):
        if status == "ok":
            continue
        since = outputs[n - 1] + 1 if n else 0  # the block's code lies after the previous output
        code = [j for j in range(since, at) if segments[j].kind == "code"]
        first, last = segments[code[-1] if code else at].token_span, segments[at].token_span
        if first is None or last is None:
            raise ValueError("without_failed_blocks needs a tokenize_example result (token spans)")
        start, end = example.prompt_tokens + first.start, example.prompt_tokens + last.end
        mask[start:end] = [0] * (end - start)
    cleared = sum(example.assistant_masks) - sum(mask)
    return replace(example, assistant_masks=mask, model_tokens=example.model_tokens - cleared)


def _tool_call_example(
    tokenizer: Any,
    prompt_messages: list[dict[str, str]],
    trajectory: Trajectory,
    template_kwargs: Mapping[str, Any] | None,
    tools: list[dict[str, Any]],
) -> Tokenized:
    """`tokenize_example` of a tool_call trajectory, written as the student's own rollout writes it.

    The teacher's tool turns are its template's; the student's rollout writes its own
    (`prompts.tool_turn_text`, the student's template and `template_kwargs`), so each tool turn is
    rendered again from its responses, and each later model turn is adapted to what the student's
    generation prompt already wrote, as `for_student` does for the first: one that opens the plan
    (2507) takes the turn's `<think>` opener (a turn without a plan then closes an empty one), one
    that writes an empty plan (`enable_thinking=False`) takes the turn's empty plan. The mask is the
    rollout's: 1 on what the model writes (its end-of-turn tokens included), 0 on every tool turn.
    """
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"tokenizer {getattr(tokenizer, 'name_or_path', tokenizer)!r} cannot report offsets; "
            "pass --student-tokenizer with a fast tokenizer (tokenizer.json)"
        )
    tool_name = str(tools[0]["function"]["name"])
    prompt_ids = render_prompt_ids(tokenizer, prompt_messages, template_kwargs, tools)
    opened = opened_plan(tokenizer, prompt_ids)
    teacher = for_student(trajectory.render(), opened=opened, dialect="tool_call")
    probe = tool_turn_text(tokenizer, tool_name, [""], template_kwargs)
    turn_opens = probe.rstrip().endswith(PLAN_OPEN)
    turn_empty = _EMPTY_PLAN.search(probe) is not None and probe.rstrip().endswith("</think>")
    chunks: list[tuple[str, int]] = []  # (text, 1 model / 0 harness), in the order the rollout wrote them
    parsed = parse(teacher, "tool_call")
    if opened and not any(s.kind == "plan" for s in parsed.segments):
        chunks.append(("</think>\n\n", 1))  # a teacher without a plan: the student closes the one opened
    start = 0
    for group in _tool_turns(parsed):
        first, last = group[0], group[-1]
        harness = first.span.start + model_prefix(first, "tool_call")
        chunks.append((teacher[start:harness], 1))
        outputs = [TOOL_CALL.guard(neutralise_markup(tokenizer, o.content)) for o in group]
        chunks.append((tool_turn_text(tokenizer, tool_name, outputs, template_kwargs), 0))
        close = teacher.find("</tool_response>", last.content_span.end) + len("</tool_response>")
        start = _TURN_MARKUP.match(teacher, close).end()  # type: ignore[union-attr]  # may match empty
        turn = teacher[start:]
        empty = _EMPTY_PLAN.match(turn)
        opener = _OPENER.match(turn)
        if turn_empty and empty is not None:
            start += empty.end()
        elif turn_opens and empty is not None:
            chunks.append(("</think>\n\n", 1))
            start += empty.end()
        elif turn_opens and opener is not None:
            start += opener.end()
        elif turn_opens:
            chunks.append(("</think>\n\n", 1))
    chunks.append((teacher[start:], 1))
    text = "".join(chunk for chunk, _ in chunks)
    ids: list[int] = []
    mask: list[int] = []
    offsets: list[tuple[int, int]] = []
    at = 0
    for chunk, owner in chunks:
        if chunk:
            encoded = tokenizer(chunk, add_special_tokens=False, return_offsets_mapping=True)
            ids += [int(i) for i in encoded["input_ids"]]
            mask += [owner] * len(encoded["input_ids"])
            offsets += [(at + int(a), at + int(b)) for a, b in encoded["offset_mapping"]]
        at += len(chunk)
    spanned = parse(text, "tool_call").with_token_spans(offsets)
    opener_tokens = 0
    if (lead := _OPENER.match(text)) is not None and chunks[0][0].startswith(lead.group()):
        opener_tokens = len(tokenizer(lead.group(), add_special_tokens=False)["input_ids"])
    plans = [s for s in spanned.segments if s.kind == "plan"]
    plan = sum(_length(s.token_span) for s in plans) - (opener_tokens if plans else 0)
    eos = tokenizer.eos_token_id
    tail = [] if eos is None else [int(eos)]
    return Tokenized(
        input_ids=prompt_ids + ids + tail,
        assistant_masks=[0] * len(prompt_ids) + mask + [1] * len(tail),
        prompt_tokens=len(prompt_ids),
        plan_tokens=plan,
        model_tokens=sum(mask) - opener_tokens,
        trajectory=spanned,
        total_tokens=len(ids) - opener_tokens,
    )


def _tool_turns(trajectory: Trajectory) -> list[list[Segment]]:
    """The tool turns of a tool_call trajectory: each run of responses (blank text between)."""
    groups: list[list[Segment]] = []
    previous: str | None = None
    for segment in trajectory.segments:
        if segment.kind == "output" and segment.closed:
            if previous == "output":
                groups[-1].append(segment)
            else:
                groups.append([segment])
            previous = "output"
        elif segment.kind != "text" or segment.raw.strip():
            previous = segment.kind
    return groups


def _chunks(trajectory: Trajectory, opener_end: int) -> list[tuple[int, int]]:
    """Character ranges in the order and cut inference wrote them: the plan opener alone (so both
    templates tokenize what follows it alike), then model text and harness output blocks in turn."""
    cuts = {0, opener_end}
    for segment in trajectory.segments:
        if segment.kind == "output":
            cuts |= {segment.span.start + model_prefix(segment, trajectory.dialect), segment.span.end}
    end = sum(len(s.raw) for s in trajectory.segments)
    ordered = sorted(c for c in cuts | {end} if 0 <= c <= end)
    return [(a, b) for a, b in zip(ordered, ordered[1:], strict=False) if b > a]


def _length(span: Span | None) -> int:
    return 0 if span is None else span.end - span.start
