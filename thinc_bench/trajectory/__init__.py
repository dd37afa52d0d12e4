"""The trajectory IR: a model's text as plan | code | output | text | answer segments.

Contract: `parse(text, dialect).render() == text` for every string, malformed ones included; each
`Segment` keeps its exact raw slice (fences and tags included), its inner `content`, both character
spans and, once `with_token_spans` has run, its token span. A `Dialect` tells the rollout engine where
generation stops, what it appends after the stop string and which code block to execute. `exec_trigger`
decides, when generation stops, whether the model asked for code to run and which (`TurnTrigger`
decides the same for a rollout's growing text, scanning only what each turn added). The ThinC
conformance checks and `classify` read only this IR. The lexical rules for fences, tags and strings
live in `_scan` (docs/parsing.md lists the variants real models write and how each parses).
Five modules: `segments` (the IR, dialects, tool calls, `parse`), `turns` (what runs when), `boxes`
(where a text boxes its answer: the scanner grading reads answers with), `computation` (what counts as
computation in a plan) and `conformance` (the ThinC checks), each importing only the ones before it.
Pure: no IO, no logging, no tokenizer, and no answer grading (that is `grading`).
"""

from thinc_bench.trajectory.boxes import extract_answer, joined_answer
from thinc_bench.trajectory.computation import Finding, plan_computation
from thinc_bench.trajectory.conformance import (
    DEFAULT_MAX_PLAN_SHARE,
    DEFAULT_MAX_PROSE_CHARS,
    DEFAULT_MIN_CODE_BLOCKS,
    DEFAULT_SHARE_OF,
    Check,
    CheckName,
    Conformance,
    OutsideProse,
    ShareOf,
    ShareUnit,
    Style,
    check_conformance,
    classify,
    has_final_answer,
    plan_words,
    prose_outside_plan,
    unexecuted_code,
)
from thinc_bench.trajectory.segments import (
    DIALECTS,
    MARKDOWN,
    MAX_JSON_INT_DIGITS,
    TOOL_CALL,
    XML,
    ContentRule,
    Dialect,
    DialectName,
    Segment,
    SegmentKind,
    Span,
    ToolCall,
    Trajectory,
    get_dialect,
    loads_model_json,
    parse,
    parse_call,
    pending_calls,
)
from thinc_bench.trajectory.turns import (
    ExecOn,
    Trigger,
    TurnTrigger,
    exec_stops,
    exec_trigger,
    harness_block,
    model_prefix,
)

__all__ = [
    "Check",
    "CheckName",
    "Conformance",
    "ContentRule",
    "DEFAULT_MAX_PLAN_SHARE",
    "DEFAULT_MAX_PROSE_CHARS",
    "DEFAULT_MIN_CODE_BLOCKS",
    "DEFAULT_SHARE_OF",
    "DIALECTS",
    "Dialect",
    "DialectName",
    "ExecOn",
    "Finding",
    "MARKDOWN",
    "MAX_JSON_INT_DIGITS",
    "OutsideProse",
    "Segment",
    "SegmentKind",
    "ShareOf",
    "ShareUnit",
    "Span",
    "Style",
    "TOOL_CALL",
    "ToolCall",
    "Trajectory",
    "Trigger",
    "TurnTrigger",
    "XML",
    "check_conformance",
    "classify",
    "exec_stops",
    "exec_trigger",
    "extract_answer",
    "get_dialect",
    "harness_block",
    "joined_answer",
    "has_final_answer",
    "loads_model_json",
    "model_prefix",
    "parse",
    "parse_call",
    "pending_calls",
    "plan_computation",
    "plan_words",
    "prose_outside_plan",
    "unexecuted_code",
]
