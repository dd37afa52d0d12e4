"""What the grading pool and its workers say to each other: tasks in, results out.

Both sides import these types from here, so the pool (which starts workers) and the worker (which
serves tasks) never import each other. Plain NamedTuples: they cross a pipe as pickles.
"""

from typing import Literal, NamedTuple

TaskKind = Literal["verify", "check_gold", "ground"]
Outcome = Literal[
    "correct", "incorrect", "unparseable_answer", "gold_error", "grader_timeout", "grader_error"
]


class Task(NamedTuple):
    """One unit of worker work; `a` plays the gold role, `b` the prediction role."""

    kind: TaskKind
    a: str
    b: str


class Result(NamedTuple):
    """The verdict on one task, with the exception text for grader_error / grader_timeout."""

    outcome: Outcome
    detail: str | None = None
