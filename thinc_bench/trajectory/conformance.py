"""The ThinC conformance checks and `classify`: one brief plan, then only code linked by its outputs.

They read only the parsed IR. No answer grading here (that is `grading`); whether the final text
boxes an answer is asked of the scanner the grader reads answers with (`boxes.joined_answer`). Where
the sources speak, the checks follow them: the plan share is counted over all the trajectory's
tokens by default ("planning below 50% of total tokens", both explainers; `share_of="model"` counts
model-written tokens only), and the plan carries no computation (`computation.plan_computation`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from thinc_bench.trajectory.boxes import joined_answer
from thinc_bench.trajectory.computation import plan_computation
from thinc_bench.trajectory.segments import Segment, Trajectory

Style = Literal["thinc", "interleaved", "no_code"]
CheckName = Literal[
    "has_plan",
    "no_text_between_code",
    "n_code_blocks",
    "plan_share",
    "answer_after_last_output",
    "code_followed_by_output",
    "short_prose_outside_plan",
    "no_code_in_plan",
    "no_computation_in_plan",
]
ShareUnit = Literal["tokens", "count_tokens", "chars"]
ShareOf = Literal["total", "model"]
"""What the plan share divides by: every token of the trajectory after the prompt, interpreter output
included (`total`, the sources' "total tokens"), or the model-written ones only (`model`)."""

DEFAULT_MIN_CODE_BLOCKS = 1  # a trajectory needs one executed block to be "thinking in code" at all
DEFAULT_MAX_PLAN_SHARE = 0.5  # the sources' filter: planning below 50% of total tokens
DEFAULT_SHARE_OF: ShareOf = "total"
DEFAULT_MAX_PROSE_CHARS = 120
"""Most prose characters before the first block and after the last, each (box excluded, whitespace
runs as one): a short sentence around the box ("The count is \\boxed{90}." measures 14), never a
paragraph of reasoning outside code."""


def has_final_answer(traj: Trajectory) -> bool:
    """True when the final text boxes an answer the grader reads: its last box closed and not empty
    (`\\boxed{}`, `\\fbox{}`, `\\boxed 42`); an answer cut off mid-box is no answer."""
    return joined_answer(traj.final_text) is not None


@dataclass(frozen=True)
class Check:
    """One named conformance check and why it passed or failed."""

    name: CheckName
    passed: bool
    detail: str


@dataclass(frozen=True)
class Conformance:
    """The ThinC conformance checks of one trajectory."""

    checks: tuple[Check, ...]
    plan_share: float
    plan_share_unit: ShareUnit

    @property
    def passed(self) -> bool:
        """True when every check passed."""
        return all(c.passed for c in self.checks)

    @property
    def failed(self) -> list[CheckName]:
        """Names of the checks that failed, in check order."""
        return [c.name for c in self.checks if not c.passed]

    def get(self, name: CheckName) -> Check:
        """Return the check called `name`."""
        return next(c for c in self.checks if c.name == name)


def _text_between_code(traj: Trajectory) -> list[Segment]:
    """Non-blank text (prose, or plan text around code drafts) after the first code block and before
    the last code or output block."""
    blocks = [i for i, s in enumerate(traj.segments) if s.kind in ("code", "output")]
    codes = [i for i in blocks if traj.segments[i].kind == "code"]
    if not codes:
        return []
    inside = traj.segments[codes[0] + 1 : blocks[-1]]
    return [s for s in inside if (s.kind == "text" and s.raw.strip()) or (s.kind == "plan" and s.content)]


def classify(traj: Trajectory) -> Style:
    """Return `no_code` without code blocks, `interleaved` with prose between them, else `thinc`.

    Code drafted in the plan counts as code, and plan text between drafts as prose; the
    `no_code_in_plan` conformance check names such trajectories.
    """
    if not any(s.kind == "code" for s in traj.segments):
        return "no_code"
    return "interleaved" if _text_between_code(traj) else "thinc"


def plan_words(traj: Trajectory) -> str:
    """The plan's own words: its text segments, without code drafted in it or their outputs."""
    return "\n".join(s.content for s in traj.segments if s.kind == "plan")


def _plan_share(
    traj: Trajectory, count_tokens: Callable[[str], int] | None, share_of: ShareOf
) -> tuple[float, ShareUnit]:
    token_spans = [s.token_span for s in traj.segments if s.token_span is not None]
    unit: ShareUnit
    if traj.segments and len(token_spans) == len(traj.segments):
        unit, sizes = "tokens", [end - start for start, end in token_spans]
    elif count_tokens is not None:
        unit, sizes = "count_tokens", [count_tokens(s.raw) for s in traj.segments]
    else:
        unit, sizes = "chars", [len(s.raw) for s in traj.segments]
    plan = sum(
        n
        for s, n in zip(traj.segments, sizes, strict=True)
        if s.kind == "plan" or (s.in_plan and s.kind == "code")
    )
    whole = sum(
        n for s, n in zip(traj.segments, sizes, strict=True) if share_of == "total" or s.kind != "output"
    )
    return (plan / whole if whole else 0.0), unit


def check_conformance(
    traj: Trajectory,
    *,
    min_code_blocks: int = DEFAULT_MIN_CODE_BLOCKS,
    max_plan_share: float = DEFAULT_MAX_PLAN_SHARE,
    count_tokens: Callable[[str], int] | None = None,
    max_prose_chars: int = DEFAULT_MAX_PROSE_CHARS,
    share_of: ShareOf = DEFAULT_SHARE_OF,
) -> Conformance:
    """Run the ThinC conformance checks.

    `plan_share` is plan / the trajectory's whole size (`share_of="total"`, interpreter outputs
    included, as the sources count it) or / its model-written size (`"model"`); code drafted in the
    plan is plan. It is counted in tokens when every segment has a token span, else with
    `count_tokens`, else in characters; `Conformance.plan_share_unit` says which.

    Args:
        traj: the trajectory.
        min_code_blocks: closed code blocks required (the SFT filter uses 3).
        max_plan_share: the plan share must be strictly below this.
        count_tokens: a tokenizer length function, used when token spans are unknown.
        max_prose_chars: most prose characters before the first block and after the last, each
            (see `prose_outside_plan`).
        share_of: the plan share's denominator (`ShareOf`).

    Returns:
        The checks in the order has_plan, no_text_between_code, n_code_blocks, plan_share,
        answer_after_last_output, code_followed_by_output, short_prose_outside_plan, no_code_in_plan,
        no_computation_in_plan.
    """
    plan = next((s for s in traj.segments if s.kind == "plan"), None)
    plan_text = traj.plan or ""
    has_plan = plan is not None and plan.closed and bool(plan_text)
    plan_detail = "no plan" if plan is None else f"{len(plan_text)} chars, closed={plan.closed}"
    prose = _text_between_code(traj)
    share, unit = _plan_share(traj, count_tokens, share_of)
    computed = plan_computation(plan_words(traj))
    kinds = [s.kind for s in traj.segments]
    last_output = max((i for i, k in enumerate(kinds) if k == "output"), default=-1)
    code_after = "code" in kinds[last_output + 1 :]
    boxed = has_final_answer(traj)
    drafts = [s for s in traj.segments if s.kind == "code" and s.in_plan]
    checks = (
        Check("has_plan", has_plan, plan_detail),
        Check(
            "no_text_between_code",
            not prose,
            "none" if not prose else f"{len(prose)} prose segment(s), first: {prose[0].raw.strip()[:60]!r}",
        ),
        Check(
            "n_code_blocks",
            traj.n_code_blocks >= min_code_blocks,
            f"{traj.n_code_blocks} closed code block(s), minimum {min_code_blocks}",
        ),
        Check(
            "plan_share",
            share < max_plan_share,
            f"{share:.3f} of {'all' if share_of == 'total' else 'model'} {unit}, maximum {max_plan_share}",
        ),
        Check(
            "answer_after_last_output",
            boxed and not code_after,
            "code after the last output"
            if code_after
            else ("\\boxed found" if boxed else "no \\boxed in final text"),
        ),
        _check_code_followed_by_output(traj),
        _check_prose_outside_plan(traj, max_prose_chars),
        Check(
            "no_code_in_plan",
            not drafts,
            "none" if not drafts else f"{len(drafts)} code block(s) inside <think>...</think>",
        ),
        Check(
            "no_computation_in_plan",
            not computed,
            "none"
            if not computed
            else f"{len(computed)} computation(s), first ({computed[0].kind}): {computed[0].text[:60]!r}",
        ),
    )
    return Conformance(checks, share, unit)


def unexecuted_code(traj: Trajectory) -> list[Segment]:
    """Closed code blocks not directly followed (blank text aside) by an output block of their own.

    Such a block never shows its own output: after the last output it never ran, and in `code, code,
    code, output` the harness runs the three together and answers them with one output block. In the
    tool_call dialect the calls of one turn are answered by the responses that follow, one each.
    """
    segments = [s for s in traj.segments if s.kind != "text" or s.raw.strip()]
    if traj.dialect == "tool_call":
        missing: list[Segment] = []
        calls: list[Segment] = []
        answered = False
        for s in segments:
            if s.kind == "code" and s.closed:
                if answered:  # a new turn's call: the last turn's unanswered calls never ran
                    missing, calls, answered = missing + calls, [], False
                calls.append(s)
            elif s.kind == "output":
                answered = True
                if calls:
                    calls.pop(0)
        return missing + calls
    return [
        s
        for s, after in zip(segments, [*segments[1:], None][: len(segments)], strict=True)
        if s.kind == "code" and s.closed and (after is None or after.kind != "output")
    ]


def _check_code_followed_by_output(traj: Trajectory) -> Check:
    missing = unexecuted_code(traj)
    if not missing:
        return Check("code_followed_by_output", True, "every code block has its output")
    first = missing[0].content.strip().splitlines()
    return Check(
        "code_followed_by_output",
        False,
        f"{len(missing)} code block(s) without output, first: {(first[0] if first else '')[:60]!r}",
    )


class OutsideProse(NamedTuple):
    """Prose outside the plan, `\\boxed{...}` removed and whitespace runs collapsed to one space."""

    lead: str
    """Before the first code or output block (after the plan)."""
    final: str
    """After the last code or output block; all non-plan text when there is no block."""


_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")
_SPACE_RUN = re.compile(r"\s+")


def _without_boxes(text: str) -> str:
    """`text` with every `\\boxed{...}` (balanced braces; to the end if unclosed) removed."""
    out, pos = [], 0
    while (opener := _BOX_OPEN.search(text, pos)) is not None:
        out.append(text[pos : opener.start()])
        depth, i = 1, opener.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        pos = i
    out.append(text[pos:])
    return "".join(out)


def prose_outside_plan(traj: Trajectory) -> OutsideProse:
    """The prose a ThinC trajectory writes outside its plan and blocks, measured without the box."""
    blocks = [i for i, s in enumerate(traj.segments) if s.kind in ("code", "output")]
    first, last = (blocks[0], blocks[-1]) if blocks else (0, -1)

    def prose(segments: Sequence[Segment]) -> str:
        text = "".join(s.raw for s in segments if s.kind in ("text", "answer"))
        return _SPACE_RUN.sub(" ", _without_boxes(text)).strip()

    return OutsideProse(prose(traj.segments[:first]), prose(traj.segments[last + 1 :]))


def _check_prose_outside_plan(traj: Trajectory, max_chars: int) -> Check:
    lead, final = prose_outside_plan(traj)
    return Check(
        "short_prose_outside_plan",
        len(lead) <= max_chars and len(final) <= max_chars,
        f"{len(lead)} chars before the first block, {len(final)} after the last (box excluded), "
        f"maximum {max_chars} each",
    )
