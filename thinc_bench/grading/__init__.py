"""The one judge: the answer of a response, grading against a gold answer, equivalence, grounding.

Contract (docs/DESIGN.md "Grading", "Grounding"): the answer is `final_answer(response)`: the last
`\\boxed{}` of the final text (model text after the last output block; without code, after
`</think>`), or a final run of boxes (`\\boxed{1}, \\boxed{2}`) graded together as a list. Every
consumer (eval, maj@k through the recorded answer, the SFT filter, the GRPO reward) gets it from
`grade`. Equivalence is math-verify's, run in worker processes that are killed on a hard timeout,
so a pathological answer is `grader_timeout`, never a hang, and not correct: an answer that cannot
be judged in bounded time is the answer's fault, as math-verify's own timeout says "not equal". A
check that crashes its worker twice or raises is followed by a control check of the gold alone: if
that passes, the failure is the answer's (`unparseable_answer`, wrong); if it fails too, it is the
infrastructure's (`grader_error`, excluded, never a wrong answer; thinc_bench.outcomes). Plain-text
SymPy / Python forms (`-1 + sqrt(3)`, `2**(1/4)`, `pi/4`) are read as such, in answers and golds.
`JUDGE_VERSION` names the rules; records carry it (`judge_version()`). Grounding reads only what the code printed (`code_printed`). Golds keep their
source form ("025", "33,124,147", LaTeX). Exact fast paths (identical text, plain integers,
integer grounding by token match) skip math-verify; the common number forms skip its ANTLR parse
(`_direct`: math-verify's own trees, so no verdict changes). Verdicts are cached per (gold, answer) in this
process. Works in any process: a forked child gets its own workers. It does no IO, logging setup
or retries of model errors; timeouts and kills live in `_pool`.
"""

from thinc_bench.grading._judge import (
    JUDGE_VERSION,
    Grade,
    Grader,
    GradeRequest,
    GradeStatus,
    agrade,
    check_golds,
    equivalent,
    grade,
    grade_many,
    grounded,
    is_grounded,
    judge_version,
)
from thinc_bench.grading._printed import code_printed
from thinc_bench.grading._text import (
    as_trajectory,
    extract_answer,
    final_answer,
    final_text,
    normalize_answer,
)
from thinc_bench.trajectory import Trajectory

__all__ = [
    "JUDGE_VERSION",
    "Grade",
    "GradeRequest",
    "GradeStatus",
    "Grader",
    "Trajectory",
    "agrade",
    "as_trajectory",
    "check_golds",
    "code_printed",
    "equivalent",
    "extract_answer",
    "final_answer",
    "final_text",
    "grade",
    "grade_many",
    "grounded",
    "is_grounded",
    "judge_version",
    "normalize_answer",
]
