"""The vllm backend for real: vLLM's async engine (CPU build) on SmolLM2, run in the vLLM interpreter.

vLLM's CPU build needs an older transformers than this venv, so one child process (`THINC_VLLM_PYTHON`)
builds the engine through `load_generator("vllm", ...)`, runs every scenario below, and prints the
results as JSON; each test checks one property of them. Without vLLM the module is skipped, and the
fast tier still checks that `load_generator("vllm")` fails with the pip command (test_base.py).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

REPO_ROOT = Path(__file__).resolve().parents[2]

ENGINE_RUN_S = 480
"""Engine start (30-90 s on 2 busy cores) plus a few short generations; beyond this it is stuck."""

SCRIPT = r"""
import asyncio, json, sys
from thinc_bench.backends import BackendUnavailable, SamplingParams, load_generator
from thinc_bench.errors import ConfigError


def chat(tok, question):
    ids = tok.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def record(g):
    return {"token_ids": g.token_ids, "text": g.text, "finish_reason": g.finish_reason, "stop": g.stop}


async def main(folder):
    gen = load_generator("vllm", folder, dtype="float32", max_model_len=2048, seed=0)
    code = chat(gen.tokenizer, "Write Python code in a ```python block that prints 2+3.")
    story = chat(gen.tokenizer, "Tell me a story.")
    out = {"describe": gen.describe(), "eos_id": gen.tokenizer.eos_token_id}
    out["stop"] = record(await gen.generate(code, SamplingParams(temperature=0, max_tokens=64, stop=("```\n",)), request_id="p/0"))
    out["inside"] = record(await gen.generate(code, SamplingParams(temperature=0, max_tokens=64, stop=("# Pr",)), request_id="p/1"))
    out["eos"] = record(await gen.generate(chat(gen.tokenizer, "Say hello."), SamplingParams(temperature=0, max_tokens=200)))
    out["length"] = record(await gen.generate(code, SamplingParams(temperature=0, max_tokens=3)))
    seeds = [gen.generate(story, SamplingParams(max_tokens=24, seed=s), request_id="same/0") for s in (7, 8, 7, 9, 10, 11, 12, 13)]
    out["seeded"] = [record(g) for g in await asyncio.gather(*seeds)]
    try:
        await gen.generate([1] * 2100, SamplingParams(max_tokens=4))
        out["too_long"] = "no error"
    except ConfigError as exc:
        out["too_long"] = "ConfigError: " + str(exc)
    await gen.aclose()
    try:
        await gen.generate(code, SamplingParams(max_tokens=4))
        out["closed"] = "no error"
    except BackendUnavailable as exc:
        out["closed"] = "BackendUnavailable: " + str(exc)
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
"""


@pytest.fixture(scope="module")
def results(
    vllm_python: str, smollm2_folder: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    script = tmp_path_factory.mktemp("vllm") / "run_vllm.py"
    script.write_text(SCRIPT, encoding="utf-8")
    # This checkout's thinc_bench, whatever the vLLM venv has installed; 1 GiB of KV cache is plenty.
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [vllm_python, str(script), smollm2_folder],
        capture_output=True,
        text=True,
        timeout=ENGINE_RUN_S,
        env=env,
        cwd=Path.cwd(),
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        pytest.fail(f"vLLM run failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    parsed: dict[str, Any] = json.loads(lines[-1].removeprefix("RESULT "))
    return parsed


def test_stop_string_is_kept_at_the_end(results: dict[str, Any]) -> None:
    stop = results["stop"]
    assert (stop["finish_reason"], stop["stop"]) == ("stop", "```\n")
    assert stop["text"].endswith("```\n") and stop["text"].count("```\n") == 1


def test_text_is_the_decode_of_the_ids(results: dict[str, Any], smollm2_tokenizer: Any) -> None:
    stop = results["stop"]
    assert stop["text"] == smollm2_tokenizer.decode(stop["token_ids"], skip_special_tokens=True)


def test_stop_ending_inside_a_token_keeps_the_whole_token(results: dict[str, Any]) -> None:
    inside = results["inside"]
    assert inside["stop"] == "# Pr" and inside["text"].endswith("# Print")


def test_eos_ends_with_the_eos_id_and_no_stop_string(results: dict[str, Any]) -> None:
    eos = results["eos"]
    assert (eos["finish_reason"], eos["stop"], eos["token_ids"][-1]) == ("stop", None, results["eos_id"])


def test_max_tokens_ends_with_length(results: dict[str, Any]) -> None:
    assert (results["length"]["finish_reason"], len(results["length"]["token_ids"])) == ("length", 3)


def test_concurrent_requests_sharing_a_request_id_all_complete(results: dict[str, Any]) -> None:
    assert [len(g["token_ids"]) for g in results["seeded"]] == [24] * 8


def test_same_seed_gives_the_same_sample_under_concurrency(results: dict[str, Any]) -> None:
    first, other, again = (results["seeded"][i]["token_ids"] for i in (0, 1, 2))
    assert first == again and first != other


def test_prompt_over_max_model_len_is_a_config_error(results: dict[str, Any]) -> None:
    assert results["too_long"].startswith("ConfigError: vllm rejected request")


def test_closed_engine_raises_backend_unavailable(results: dict[str, Any]) -> None:
    assert results["closed"].startswith("BackendUnavailable:")


def test_describe_records_engine_options(results: dict[str, Any]) -> None:
    info = results["describe"]
    assert (info["backend"], info["device"], info["dtype"], info["max_model_len"]) == (
        "vllm",
        "cpu",
        "float32",
        2048,
    )
    assert info["enable_prefix_caching"] is True and info["vllm"].startswith("0.32")
