"""The token path against a real `vllm serve` (vLLM's CPU build, SmolLM2): Inspect's `vllm/NAME` with
`base_url` runs thinc_bench's rollout through the served model's token-id completions, and scores what
`python -m thinc_bench.eval --backend openai` scores on the same server, greedy, record for record."""

from __future__ import annotations

from pathlib import Path

import pytest
from backends.test_openai import VllmServer, vllm_server  # noqa: F401  (the module's fixture)
from inspect_ai.model import get_model

from thinc_bench.inspect_tasks import benchmark

from .test_tasks import assert_same_run, run_cli, run_inspect


@pytest.mark.slow
@pytest.mark.vllm
def test_inspects_vllm_provider_on_a_served_model_scores_as_the_cli(
    vllm_server: VllmServer,  # noqa: F811
    smollm2_path: str,
    two_problem_benchmark: Path,
    tmp_path: Path,
) -> None:
    settings = {"budget": 192, "temperature": 0, "few_shot": 1, "exec_on": "code_close"}
    task = benchmark(name=str(two_problem_benchmark), tokenizer=smollm2_path, **settings)
    model = get_model("vllm/smollm2", base_url=vllm_server.base_url)
    log = run_inspect(task, model, tmp_path / "logs")
    assert log.status == "success"
    cli = ["--backend", "openai", "--base-url", vllm_server.base_url, "--model", "smollm2"]
    cli += ["--tokenizer", smollm2_path, "--benchmarks", str(two_problem_benchmark), "--samples", "1"]
    cli += ["--max-tokens", "192", "--temperature", "0", "--few-shot", "1", "--exec-on", "code_close"]
    summary, records = run_cli(tmp_path, *cli, "--recovery-k", "0")
    assert_same_run(log, summary, records)
