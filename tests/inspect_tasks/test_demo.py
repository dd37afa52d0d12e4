"""`inspect eval thinc_bench/nano` with no model: the bundled SmolLM2-135M through thinc_bench's hf
backend, offline, as `python -m thinc_bench.eval` runs its demo without `--model`."""

from __future__ import annotations

from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval

from thinc_bench.inspect_tasks import nano


@pytest.mark.slow
def test_the_nano_task_runs_the_bundled_model_offline_and_logs_our_metrics_and_the_trajectory(
    tmp_path: Path,
) -> None:
    (log,) = inspect_eval(
        nano(budget=256), limit=1, log_dir=str(tmp_path), display="none"
    )  # the demo's, shorter
    assert log.status == "success" and log.eval.model == "none/none"
    (sample,) = log.samples or []
    settings = sample.store["thinc_bench/settings"]
    assert settings["model"] == "bundled SmolLM2-135M demo" and settings["max_tokens"] == 256
    assert settings["few_shot"] == 1 and settings["exec_on"] == "code_close"  # the CLI's demo settings
    completion = sample.messages[2:]
    assert completion and completion[0].text.startswith("```python\n")  # the demo's prefill, then the model
    record = sample.scores["judge"].metadata["record"]  # type: ignore[index]
    assert record["response_tokens"] > 0 and record["finish_reason"] in (
        "answer",
        "eos",
        "max_tokens",
        "max_tool_calls",
    )
    assert log.results is not None
    ours = next(s for s in log.results.scores if s.name == "judge" and s.metrics)
    assert {"accuracy", "tool_calls", "response_tokens", "no_answer", "pass@1"} <= set(ours.metrics)
