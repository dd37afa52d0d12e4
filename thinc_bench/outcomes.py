"""Who a sample's failure belongs to: the one rule eval's rates, build_sft's filter and GRPO's reward share.

A benchmark is trusted for its denominators. A failure that the model's own output can trigger must
never take its sample out of a rate: otherwise every harness bug that strange output meets, and every
answer too deep to judge, flatters the model that wrote it (issue 49: two wrong answers whose tool
calls broke the harness made accuracy read 1.0 over 1 problem instead of 0.33 over 3). So:

- **The model's** (`MODEL_FAILURE_STATUSES`): its output could not be processed (`harness_error`: any
  exception while handling one trajectory that is not infrastructure) or judged in bounded time
  (`grader_timeout`). Counted as wrong in every rate, GRPO's reward 0, build_sft rejects it; counted
  apart so a reader sees how many wrong answers are of this kind.
- **Infrastructure, with evidence** (`EXCLUDED_STATUSES`): a backend outage or the sandbox's own
  machinery failing twice (`infra_error`, raised only through the machinery's own exception types),
  or the grading machinery failing on a control check as well as on the answer (`grader_error`).
  Left out of every rate, counted (`excluded`), retried on resume; GRPO leaves the rollout out of
  the loss; build_sft counts it as not produced.

Everything else is a plain verdict (`correct`, `incorrect`, `no_answer`, `unparseable_answer`,
`gold_error`). No IO; imports nothing of the package.
"""

from __future__ import annotations

INFRA_STATUS = "infra_error"
"""A sample infrastructure kept from being produced: a backend outage, the sandbox's machinery."""

HARNESS_STATUS = "harness_error"
"""A sample whose processing raised (not through an infrastructure exception): the model's output
met a case the harness could not handle. The model's: wrong, counted apart, retried on resume (a
fixed harness may then score it) and by `python -m thinc_bench.eval.regrade`."""

GRADER_ERROR_STATUS = "grader_error"
"""The grading machinery failed on an answer and on a control check of the same gold: infrastructure."""

GRADER_TIMEOUT_STATUS = "grader_timeout"
"""An answer too large or deep to judge in bounded time (twice, in a fresh worker): the answer's."""

EXCLUDED_STATUSES: tuple[str, ...] = (INFRA_STATUS, GRADER_ERROR_STATUS)
"""Infrastructure with evidence: out of every rate, counted in `excluded`, retried on resume."""

MODEL_FAILURE_STATUSES: tuple[str, ...] = (HARNESS_STATUS, GRADER_TIMEOUT_STATUS)
"""The model's output could not be processed or judged: wrong in every rate, counted apart."""

RETRIED_STATUSES = frozenset({INFRA_STATUS, HARNESS_STATUS})
"""Samples a resumed run produces again (`grader_error` ones are graded again instead): an outage
says nothing about the model, and a harness fixed since may score a `harness_error` sample."""


def is_excluded(status: str) -> bool:
    """Whether a sample with this status is left out of every rate (infrastructure, with evidence)."""
    return status in EXCLUDED_STATUSES


def is_model_failure(status: str) -> bool:
    """Whether the status is a failure of the model's output that counts as a wrong answer."""
    return status in MODEL_FAILURE_STATUSES
