"""The one judge: the answer of a response, grading against a gold answer, equivalence, grounding.

Contract (docs/DESIGN.md "Grading", "Grounding"): the answer is `final_answer(response)`: the last
`\\boxed{}` of the final text (model text after the last output block; without code, after
`</think>`), or a final run of boxes (`\\boxed{1}, \\boxed{2}`) graded together as a list. Every
consumer (eval, maj@k through the recorded answer, the SFT filter, the GRPO reward) gets it from
`grade`. Equivalence is math-verify's, run in worker processes that are killed on a hard timeout,
so a pathological answer is `grader_timeout`, never a hang, and not correct: an answer that cannot
be judged in bounded time is the answer's fault, as math-verify's own timeout says "not equal"; a
crashed worker is `grader_error`, the infrastructure's, never a wrong answer. Grounding reads only what the code printed (`code_printed`). Golds keep their
source form ("025", "33,124,147", LaTeX). Exact fast paths (identical text, plain integers,
integer grounding by token match) skip math-verify; the common number forms skip its ANTLR parse
(`_direct`: math-verify's own trees, so no verdict changes). Verdicts are cached per (gold, answer) in this
process. Works in any process: a forked child gets its own workers. It does no IO, logging setup
or retries of model errors; timeouts and kills live in `_pool`.
"""

from thinc_bench.grading._judge import (
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
    "normalize_answer",
]
