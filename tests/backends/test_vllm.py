"""The vllm backend for real: vLLM's async engine (CPU build) on SmolLM2, run in the vLLM interpreter.

vLLM's CPU build needs an older transformers than this venv, so one child process (`THINC_VLLM_PYTHON`)
builds the engine through `load_generator("vllm", ...)`, runs every scenario below, and prints the
results as JSON; each test checks one property of them. Without vLLM the module is skipped, and the
fast tier still checks that `load_generator("vllm")` fails with the pip command (test_base.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

ENGINE_RUN_S = 480
"""Engine start (30-90 s on 2 busy cores) plus a few short generations; beyond this it is stuck."""

SCRIPT = r"""
import asyncio, json, sys
from thinc_bench.backends import BackendUnavailable, SamplingParams, load_generator
from thinc_bench.errors import ConfigError, ContextExceeded


def chat(tok, question):
    ids = tok.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


SAMPLED = {
    "t07": {"temperature": 0.7},
    "all": {"temperature": 0.7, "top_k": 20, "min_p": 0.05, "repetition_penalty": 1.3,
            "presence_penalty": 0.5, "frequency_penalty": 0.3},
}


def oracle(folder, prompt, processed):
    # Teacher-forced transformers logprobs of each sampled token: raw, and processed as vLLM defines
    # it (penalties, temperature, min-p, top-k, then log-softmax), written apart from the backends.
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    result = {}
    for name, got in processed.items():
        p = {"top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0, "presence_penalty": 0.0,
             "frequency_penalty": 0.0, **SAMPLED[name]}
        out = got["token_ids"]
        with torch.no_grad():
            all_logits = model(torch.tensor([prompt + out])).logits[0].float()
        raw, expected = [], []
        for i, token in enumerate(out):
            logits = all_logits[len(prompt) - 1 + i].clone()
            raw.append(float(torch.log_softmax(logits, -1)[token]))
            before = out[:i]
            seen = torch.tensor(sorted(set(prompt) | set(before)))
            logits[seen] = torch.where(logits[seen] > 0, logits[seen] / p["repetition_penalty"],
                                       logits[seen] * p["repetition_penalty"])
            for t in set(before):
                logits[t] -= p["frequency_penalty"] * before.count(t) + p["presence_penalty"]
            logits = logits / p["temperature"]
            probs = torch.softmax(logits, -1)
            logits[probs < p["min_p"] * probs.max()] = float("-inf")
            if p["top_k"]:
                logits[logits < torch.topk(logits, p["top_k"]).values[-1]] = float("-inf")
            expected.append(float(torch.log_softmax(logits, -1)[token]))
        result[name] = {"returned": got["logprobs"], "processed": expected, "raw": raw}
    return result


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
        await gen.generate([1] * 2048, SamplingParams(max_tokens=4))
        out["too_long"] = "no error"
    except ContextExceeded as exc:
        out["too_long"] = "ContextExceeded: " + str(exc)
    out["near_context"] = record(await gen.generate([1] * 2040, SamplingParams(temperature=0, max_tokens=100)))
    out["near_again"] = record(await gen.generate([1] * 2040, SamplingParams(temperature=0, max_tokens=1)))
    out["context_length"] = gen.context_length
    processed = {}
    for name, params in SAMPLED.items():
        g = await gen.generate(story, SamplingParams(**params, max_tokens=24, seed=3, logprobs=True))
        processed[name] = {"token_ids": g.token_ids, "logprobs": g.logprobs}
    out["usage"] = gen.describe()["usage"]
    out["counted"] = gen.generated_tokens  # what a progress bar read, step by step
    out["prompt_lengths"] = {"code": len(code), "story": len(story), "hello": len(chat(gen.tokenizer, "Say hello."))}
    await gen.aclose()
    out["processed"] = oracle(folder, story, processed)
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
    vllm_python: str,
    vllm_env: dict[str, str],
    smollm2_folder: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    script = tmp_path_factory.mktemp("vllm") / "run_vllm.py"
    script.write_text(SCRIPT, encoding="utf-8")
    done = subprocess.run(
        [vllm_python, str(script), smollm2_folder],
        capture_output=True,
        text=True,
        timeout=ENGINE_RUN_S,
        env=vllm_env,  # this checkout's thinc_bench, whatever the vLLM venv has installed
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


def test_prompt_filling_max_model_len_is_context_exceeded(results: dict[str, Any]) -> None:
    assert results["context_length"] == 2048
    assert results["too_long"].startswith("ContextExceeded: request None: prompt of 2048 tokens fills")


def test_generation_near_the_context_is_capped_with_finish_length(results: dict[str, Any]) -> None:
    near = results["near_context"]
    assert (near["finish_reason"], len(near["token_ids"])) == ("length", 8)  # 2048 - 2040


@pytest.mark.parametrize("case", ["t07", "all"])
def test_logprobs_are_processed_like_teacher_forced_sampling(results: dict[str, Any], case: str) -> None:
    got = results["processed"][case]
    assert got["returned"] is not None and len(got["returned"]) == 24
    gaps = [abs(a - b) for a, b in zip(got["returned"], got["processed"], strict=True)]
    assert max(gaps) < 2e-2, gaps
    raw_gaps = [abs(a - b) for a, b in zip(got["returned"], got["raw"], strict=True)]
    assert max(raw_gaps) > 0.1  # the raw model's logprobs are not what the sampler used


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
    assert info["logprobs_mode"] == "processed_logprobs"
    assert (info["tensor_parallel_size"], info["data_parallel_size"]) == (1, 1)  # the engine's own record


def test_usage_counts_every_request_and_the_prefix_cache_hits(results: dict[str, Any]) -> None:
    # The requests the engine served: stop, inside, eos, length, 8 seeded, near_context, near_again and
    # 2 processed (too_long is refused before the engine, the closed one after aclose).
    usage = results["usage"]
    assert usage["requests"] == 16
    served = ("stop", "inside", "eos", "length", "near_context", "near_again")
    assert usage["generated_tokens"] == (
        sum(len(results[k]["token_ids"]) for k in served)
        + sum(len(r["token_ids"]) for r in results["seeded"])
        + sum(len(p["returned"]) for p in results["processed"].values())
    )
    assert results["counted"] == usage["generated_tokens"]  # the engine's steps, counted as they streamed
    n = results["prompt_lengths"]
    assert usage["prompt_tokens"] == 3 * n["code"] + n["hello"] + 10 * n["story"] + 2 * 2040
    # near_again resends near_context's 2,040 tokens: the engine finds its full KV blocks in its cache
    # (the CPU build's blocks are 128 tokens; the short chat prompts fill none).
    assert 1024 <= usage["cached_prompt_tokens"] < usage["prompt_tokens"] - 2040
    assert usage["prefix_cache_hit_rate"] == round(usage["cached_prompt_tokens"] / usage["prompt_tokens"], 4)
