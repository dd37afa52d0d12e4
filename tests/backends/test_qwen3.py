"""The students' architecture (Qwen3, as the explainers name them) on the real engines: the tiny random Qwen3 (QK-norm, real
vocabulary, both chat templates) through the hf backend's rollout and vLLM's CPU engine.

Each engine's sampling logprobs are checked against a plain transformers forward pass over the same
ids (teacher forcing), so a layer an engine loads wrongly (the QK-norm, tied embeddings) shows as a
logprob gap, not as a test that merely ran. The prompt is `prompts.render_prompt_ids` in both venvs:
vLLM's older transformers must render the same ids.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM

from thinc_bench.backends import SamplingParams, load_generator
from thinc_bench.eval.rollout import RolloutLimits, rollout
from thinc_bench.prompts import build_messages, load_system_prompt, opened_plan, render_prompt_ids
from thinc_bench.sandbox import Sandbox

pytestmark = pytest.mark.slow

NEW_TOKENS = 16
LOGPROB_ATOL = 2e-3
"""float32 on both sides: kernels differ in summation order only (a wrong layer moves logprobs by ~1)."""
ENGINE_RUN_S = 480
"""vLLM engine start (30-90 s on 2 busy cores) plus two short generations."""


def messages() -> list[dict[str, str]]:
    return build_messages("Compute 1/2 + 1/3.", load_system_prompt("thinc"))


def teacher_forced(folder: str, prompt: list[int], completion: list[int]) -> list[float]:
    """log p(completion[i] | prompt + completion[:i]) from a plain transformers forward pass."""
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1]
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    return [float(logprobs[i, t]) for i, t in enumerate(completion)]


def test_hf_rollout_on_tiny_qwen3_matches_a_plain_forward_pass(qwen3_models, qwen3_template) -> None:
    folder = qwen3_models[qwen3_template]
    generator = load_generator("hf", folder, dtype="float32", device="cpu", max_batch_size=2)
    prompt = render_prompt_ids(generator.tokenizer, messages())
    assert opened_plan(generator.tokenizer, prompt) is (qwen3_template == "thinking")
    params = SamplingParams(temperature=1.0, max_tokens=NEW_TOKENS, seed=5, logprobs=True)
    limits = RolloutLimits(max_tokens=len(prompt) + NEW_TOKENS, max_tool_calls=2)

    async def go() -> Any:
        with Sandbox() as sandbox, sandbox.session() as session:
            try:
                return await rollout(generator, session, prompt, params, limits=limits, request_id="q/0")
            finally:
                await generator.aclose()

    result = asyncio.run(go())
    assert result.prompt_ids == prompt and result.stop_reason in ("max_tokens", "eos", "answer")
    assert 0 < len(result.completion_ids) <= NEW_TOKENS and result.total_tokens <= limits.max_tokens
    assert len(result.env_mask) == len(result.completion_ids) == len(result.logprobs)
    model_ids = [t for t, m in zip(result.completion_ids, result.env_mask, strict=True) if m]
    assert result.text.startswith(generator.tokenizer.decode(model_ids[:1], skip_special_tokens=True))
    if result.n_tool_calls == 0:
        expected = teacher_forced(folder, prompt, result.completion_ids)
        assert result.logprobs == pytest.approx(expected, abs=LOGPROB_ATOL)


VLLM_SCRIPT = r"""
import asyncio, json, sys
from transformers import AutoTokenizer
from thinc_bench.backends import SamplingParams, load_generator
from thinc_bench.prompts import build_messages, load_system_prompt, render_prompt_ids


async def main(folders):
    gen = load_generator("vllm", folders["thinking"], dtype="float32", max_model_len=2048, seed=0, enforce_eager=True)
    messages = build_messages("Compute 1/2 + 1/3.", load_system_prompt("thinc"))
    out = {"describe": gen.describe()}
    for name, folder in folders.items():
        prompt = render_prompt_ids(AutoTokenizer.from_pretrained(folder), messages)
        g = await gen.generate(prompt, SamplingParams(temperature=1.0, max_tokens=16, seed=5, logprobs=True), request_id=name)
        out[name] = {"prompt": prompt, "token_ids": g.token_ids, "logprobs": g.logprobs}
    await gen.aclose()
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
"""


@pytest.fixture(scope="module")
def vllm_results(
    vllm_python: str,
    vllm_env: dict[str, str],
    qwen3_models: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    script = tmp_path_factory.mktemp("vllm-qwen3") / "run_vllm.py"
    script.write_text(VLLM_SCRIPT, encoding="utf-8")
    done = subprocess.run(
        [vllm_python, str(script), json.dumps(qwen3_models)],
        capture_output=True,
        text=True,
        timeout=ENGINE_RUN_S,
        env=vllm_env,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        pytest.fail(f"vLLM run failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    parsed: dict[str, Any] = json.loads(lines[-1].removeprefix("RESULT "))
    return parsed


@pytest.mark.vllm
def test_vllm_renders_the_same_prompt_ids_as_this_venv(
    vllm_results, qwen3_tokenizers, qwen3_template
) -> None:
    assert vllm_results[qwen3_template]["prompt"] == render_prompt_ids(
        qwen3_tokenizers[qwen3_template], messages()
    )


@pytest.mark.vllm
def test_vllm_loads_qwen3_and_its_logprobs_match_a_plain_forward_pass(
    vllm_results, qwen3_models, qwen3_template
) -> None:
    run = vllm_results[qwen3_template]
    assert vllm_results["describe"]["backend"] == "vllm" and 0 < len(run["token_ids"]) <= NEW_TOKENS
    expected = teacher_forced(qwen3_models[qwen3_template], run["prompt"], run["token_ids"])
    assert run["logprobs"] == pytest.approx(expected, abs=LOGPROB_ATOL)
