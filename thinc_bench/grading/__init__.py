"""The one judge: answer extraction, grading against a gold answer, answer equivalence, grounding.

Contract (DESIGN.md "Grading", "Grounding"): the answer is the content of the last `\\boxed{}`;
equivalence is math-verify's, run in worker processes that are killed on a hard timeout, so a
pathological answer is `grader_timeout`, never a hang; a crashed worker is `grader_error`, never a
wrong answer. Golds keep their source form ("025", "33,124,147", LaTeX). Exact fast paths (both
sides plain integers; integer grounding by token match) skip math-verify. Verdicts are cached per
(gold, answer) in this process. This is the only module that calls math-verify (via its workers).
It does no IO, logging setup or retries of model errors; timeouts and kills live in `_pool`.
"""

from thinc_bench.grading._judge import (
    Grade,
    Grader,
    GradeRequest,
    GradeStatus,
    Trajectory,
    agrade,
    check_golds,
    equivalent,
    grade,
    grade_many,
    grounded,
    is_grounded,
)
from thinc_bench.grading._text import extract_answer

__all__ = [
    "Grade",
    "GradeRequest",
    "GradeStatus",
    "Grader",
    "Trajectory",
    "agrade",
    "check_golds",
    "equivalent",
    "extract_answer",
    "grade",
    "grade_many",
    "grounded",
    "is_grounded",
]
