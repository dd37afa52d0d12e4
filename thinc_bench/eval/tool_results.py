"""A tool call's result written as the baseline's own tool wrote it back (`prompts.ToolSpec.result_format`).

A model trained with a tool learned to read that tool's answers: rStar2-Agent reads `Tool call success`
/ `Tool call failure` with labelled stdout and stderr and the run time (microsoft/rStar,
rstar2_agent/tools/code_judge_utils.py); ASTER reads the output, or its sandbox's runtime-error and
timeout messages (Rainyrou/ASTER, aster/sandbox/stateful_python.py). Giving them this harness's plain
interpreter transcript instead would measure how they cope with a format they never saw.

The sandbox interleaves stdout and stderr in one stream (so prints and tracebacks keep their order); a
failed run's traceback is its tail, so the formats that label the two streams split there: what comes
before the traceback is stdout, the traceback stderr. A successful run's whole output is stdout.
Harness notices (a session restart) stay in front, as in the plain format. Pure: no IO.
"""

from __future__ import annotations

from thinc_bench.prompts.tools import ResultFormat
from thinc_bench.sandbox import ExecResult

__all__ = ["render_result"]

TRACEBACK_HEAD = "Traceback (most recent call last):"
RSTAR2_REASONS = {"timeout": "worker_timeout"}
"""Code Judge's `reason` for a failed run (0xWJ/code-judge app/model.py `ResultReason`): a run past the
time limit is `worker_timeout`; any other failure leaves it unspecified (the empty string)."""
ASTER_RUNTIME_ERROR = "Runtime error occurred during execution."
ASTER_TIMEOUT = (
    "Execution timeout after {timeout:g} seconds. Consider optimizing your code for better performance or "
    "reducing computational complexity."
)


def render_result(result: ExecResult, result_format: ResultFormat, timeout_s: float) -> str:
    """The text the model reads for one call's `result`, in `result_format`.

    Args:
        result: the sandbox's result of the call (an injected failure included: it reads as a failed run).
        result_format: `plain` (the interpreter transcript), `rstar2` or `aster`.
        timeout_s: the run's time limit (ASTER's timeout message names it).
    """
    if result_format == "plain":
        return result.transcript.rstrip("\r\n")
    stdout, stderr = _streams(result)
    if result_format == "rstar2":
        lines = ["Tool call success"] if result.status == "ok" else ["Tool call failure"]
        if result.status != "ok":
            lines.append(f"reason: {RSTAR2_REASONS.get(result.status, '')}")
        lines += [f"stdout: {stdout}"] if stdout else []
        lines += [f"stderr: {stderr}"] if stderr else []
        lines.append(f"execution time: {result.elapsed_s:.2f}s")
        return result.notice_before + "\n".join(lines)
    if result.status == "ok":
        return result.notice_before + stdout
    if result.status == "timeout":
        text = ASTER_TIMEOUT.format(timeout=timeout_s)
        text += f"\n\nError output:\n{stderr}" if stderr else ""
    else:
        text = ASTER_RUNTIME_ERROR
        text += f"\n\nError details:\n{stderr}" if stderr else ""
        text += f"\n\nOutput before error:\n{stdout}" if stdout else ""
    return result.notice_before + text


def _streams(result: ExecResult) -> tuple[str, str]:
    """(stdout, stderr) of a run: a failed run's traceback (from its last `Traceback` line, or the
    whole output when there is none, e.g. a SyntaxError) is stderr; everything else is stdout."""
    output = result.output
    if result.status == "ok":
        return output, ""
    at = output.rfind(TRACEBACK_HEAD)
    if at < 0 or (at > 0 and output[at - 1] != "\n"):
        return ("", output) if result.status == "error" else (output, "")
    return output[:at], output[at:]
