"""The hf backend on the real SmolLM2-135M (CPU): stop strings, finish reasons, batching, seeds, KV reuse.

Marked slow: the model loads in about 2 s from the per-machine cache (35 s the first time) and each
test decodes a few dozen tokens. The throughput test prints batch-1 vs batch-8 tokens/s (`-s`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from thinc_bench import precision
from thinc_bench.backends import BackendUnavailable, Generation, SamplingParams, load_generator
from thinc_bench.backends.hf import HFGenerator
from thinc_bench.errors import ContextExceeded

pytestmark = pytest.mark.slow

CODE_QUESTION = "Write Python code in a ```python block that prints 2+3."
GREEDY = SamplingParams(temperature=0, max_tokens=48)


@pytest.fixture(scope="module")
def hf(smollm2_path: str) -> Iterator[HFGenerator]:
    # float32: these tests compare token ids and logprobs exactly across batch shapes and paths, which
    # holds in float32 only (bf16 reductions, the auto dtype on CPUs with native bf16, follow the shape).
    gen = load_generator("hf", smollm2_path, max_batch_size=8, seed=0, dtype="float32")
    assert isinstance(gen, HFGenerator)
    yield gen
    asyncio.run(gen.aclose())


def prompt(gen: HFGenerator, question: str) -> list[int]:
    messages = [{"role": "user", "content": question}]
    ids: Any = gen.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def run(gen: HFGenerator, *calls: tuple[list[int], SamplingParams]) -> list[Generation]:
    async def go() -> list[Generation]:
        return list(
            await asyncio.gather(*(gen.generate(p, s, request_id=f"t/{i}") for i, (p, s) in enumerate(calls)))
        )

    return asyncio.run(go())


def test_stop_string_is_kept_and_generation_ends_at_its_first_occurrence(hf: HFGenerator) -> None:
    (out,) = run(
        hf, (prompt(hf, CODE_QUESTION), SamplingParams(temperature=0, max_tokens=64, stop=("```\n",)))
    )
    assert (out.finish_reason, out.stop) == ("stop", "```\n")
    assert out.text.endswith("```\n") and out.text.count("```\n") == 1


def test_stop_ending_inside_a_token_keeps_the_whole_token(hf: HFGenerator) -> None:
    # Greedy SmolLM2 writes "# Print 2+3"; the stop "# Pr" ends inside the token " Print".
    (out,) = run(
        hf, (prompt(hf, CODE_QUESTION), SamplingParams(temperature=0, max_tokens=64, stop=("# Pr",)))
    )
    assert out.stop == "# Pr" and out.text.endswith("# Print")
    assert "# Pr" not in hf.tokenizer.decode(out.token_ids[:-1])


def test_text_is_the_decode_of_the_token_ids(hf: HFGenerator) -> None:
    (out,) = run(hf, (prompt(hf, CODE_QUESTION), GREEDY))
    assert out.text == hf.tokenizer.decode(out.token_ids, skip_special_tokens=True)


def test_eos_ends_with_the_eos_id_and_no_stop_string(hf: HFGenerator) -> None:
    (out,) = run(hf, (prompt(hf, "Say hello."), SamplingParams(temperature=0, max_tokens=200)))
    assert (out.finish_reason, out.stop, out.token_ids[-1]) == ("stop", None, hf.tokenizer.eos_token_id)


def test_max_tokens_ends_with_length(hf: HFGenerator) -> None:
    (out,) = run(hf, (prompt(hf, CODE_QUESTION), SamplingParams(temperature=0, max_tokens=5)))
    assert (out.finish_reason, out.stop, len(out.token_ids)) == ("length", None, 5)


def test_each_row_of_a_batch_keeps_its_own_max_tokens_and_stops(hf: HFGenerator) -> None:
    p = prompt(hf, CODE_QUESTION)
    short, stopped, long = run(
        hf,
        (p, SamplingParams(temperature=0, max_tokens=3)),
        (p, SamplingParams(temperature=0, stop=("```\n",))),
        (p, GREEDY),
    )
    assert (len(short.token_ids), stopped.stop, len(long.token_ids) > len(stopped.token_ids)) == (
        3,
        "```\n",
        True,
    )


def test_greedy_rows_in_a_mixed_batch_match_greedy_alone(hf: HFGenerator) -> None:
    questions = ["Say hello.", CODE_QUESTION, "What is the capital of France?"]
    alone = [run(hf, (prompt(hf, q), GREEDY))[0].token_ids for q in questions]
    sampled = SamplingParams(temperature=1.0, max_tokens=48, seed=1)
    batched = run(
        hf, *((prompt(hf, q), GREEDY) for q in questions), (prompt(hf, "Tell me a story."), sampled)
    )
    assert [g.token_ids for g in batched[:3]] == alone


def test_same_seed_gives_the_same_sample_and_another_seed_differs(hf: HFGenerator) -> None:
    p = prompt(hf, "Tell me a story.")
    first, other, again = run(hf, *((p, SamplingParams(max_tokens=24, seed=s)) for s in (7, 8, 7)))
    assert first.token_ids == again.token_ids and first.token_ids != other.token_ids


def test_concurrent_requests_are_decoded_as_one_batch(smollm2_path: str) -> None:
    # A fresh generator: the module's has decoded other batches. 16 tokens each, so requests that
    # reach the worker a little apart on a loaded machine still join the running batch.
    gen = load_generator("hf", smollm2_path, max_batch_size=8, seed=0, dtype="float32")
    assert isinstance(gen, HFGenerator)
    try:
        p = prompt(gen, "Tell me a story.")
        outs = run(gen, *((p, SamplingParams(max_tokens=16, seed=s)) for s in range(8)))
        assert gen.cache_stats()["widest_batch"] == 8
        assert len({tuple(o.token_ids) for o in outs}) > 1  # eight rows, not one row copied
    finally:
        asyncio.run(gen.aclose())


def test_batch_of_8_has_higher_throughput_than_batch_of_1(hf: HFGenerator) -> None:
    questions = [f"Tell me a story about the number {i}." for i in range(8)]
    params = SamplingParams(temperature=1.0, max_tokens=48, seed=3)
    rates = []
    for calls in ([(prompt(hf, questions[0]), params)], [(prompt(hf, q), params) for q in questions]):
        started = time.perf_counter()
        outs = run(hf, *calls)
        rates.append(sum(len(o.token_ids) for o in outs) / (time.perf_counter() - started))
    print(
        f"\nhf SmolLM2-135M CPU: batch 1 {rates[0]:.1f} tok/s, batch 8 {rates[1]:.1f} tok/s ({rates[1] / rates[0]:.1f}x)"
    )
    assert rates[1] > 1.5 * rates[0]


def test_prompt_that_fills_the_context_is_context_exceeded(hf: HFGenerator) -> None:
    assert hf.context_length == 8192  # SmolLM2's max_position_embeddings
    with pytest.raises(ContextExceeded, match="prompt of 8192 tokens fills the model's context of 8192"):
        run(hf, ([1] * 8192, GREEDY))


def test_describe_names_the_file_hash_dtype_and_device(hf: HFGenerator, smollm2_path: str) -> None:
    info: dict[str, Any] = hf.describe()
    assert (info["backend"], info["model"], info["dtype"], info["device"]) == (
        "hf",
        smollm2_path,
        "float32",
        "cpu",
    )
    assert info["dtype_reason"] == "given" and len(info["file_sha256"]) == 64
    auto = load_generator("hf", smollm2_path)  # dtype auto follows the CPU
    try:
        native = precision.bf16_support("cpu").native
        described: dict[str, Any] = auto.describe()
        assert described["dtype"] == ("bfloat16" if native else "float32")
        assert described["dtype_reason"].startswith("auto: CPU")
    finally:
        asyncio.run(auto.aclose())


def test_closed_generator_finishes_queued_work_then_refuses(smollm2_path: str) -> None:
    gen = load_generator("hf", smollm2_path)

    async def go() -> Generation:
        pending = asyncio.ensure_future(gen.generate([1, 9690], SamplingParams(temperature=0, max_tokens=2)))
        await asyncio.sleep(0)
        await gen.aclose()
        return await pending

    assert len(asyncio.run(go()).token_ids) == 2
    with pytest.raises(BackendUnavailable, match="closed"):
        asyncio.run(gen.generate([1], GREEDY))


def _teacher_forced(model: Any, ids: list[int]) -> list[float]:
    """Independent oracle: log-probabilities of each token given the ones before, in one forward pass."""
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].float()
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0].tolist()


def test_logprobs_are_the_models_own_for_each_sampled_token(hf: HFGenerator) -> None:
    ids = prompt(hf, CODE_QUESTION)
    params = SamplingParams(temperature=1.0, max_tokens=24, seed=5, logprobs=True)
    sampled, greedy = run(hf, (ids, params), (ids, GREEDY))  # one batch: padding must not shift them
    assert greedy.logprobs is None  # not asked for
    assert sampled.logprobs is not None and len(sampled.logprobs) == len(sampled.token_ids)
    reference = _teacher_forced(hf._model, ids + sampled.token_ids)[len(ids) - 1 :]
    assert max(abs(a - b) for a, b in zip(sampled.logprobs, reference, strict=True)) < 1e-3


def _processed_oracle(model: Any, prompt_ids: list[int], out: list[int], p: SamplingParams) -> list[float]:
    """Independent oracle of vLLM's processed logprobs: teacher-forced logits of each generated token,
    then repetition penalty (prompt and output so far), presence and frequency penalties (output so
    far), temperature, min-p, top-k, and the log-softmax of what is left."""
    import torch

    ids = prompt_ids + out
    with torch.no_grad():
        all_logits = model(torch.tensor([ids])).logits[0].float()
    values = []
    for i, token in enumerate(out):
        logits = all_logits[len(prompt_ids) - 1 + i].clone()
        before = out[:i]
        for t in set(prompt_ids) | set(before):
            logits[t] = (
                logits[t] / p.repetition_penalty if logits[t] > 0 else logits[t] * p.repetition_penalty
            )
        for t in set(before):
            logits[t] -= p.frequency_penalty * before.count(t) + p.presence_penalty
        logits = logits / p.temperature
        probs = torch.softmax(logits, -1)
        logits[probs < p.min_p * probs.max()] = float("-inf")
        assert p.top_k is not None
        logits[logits < torch.topk(logits, p.top_k).values[-1]] = float("-inf")
        values.append(float(torch.log_softmax(logits, -1)[token]))
    return values


def test_logprobs_are_processed_after_penalties_temperature_and_filters(hf: HFGenerator) -> None:
    ids = prompt(hf, "Tell me a story.")
    params = SamplingParams(
        temperature=0.7,
        top_k=20,
        min_p=0.05,
        repetition_penalty=1.3,
        presence_penalty=0.5,
        frequency_penalty=0.3,
        max_tokens=24,
        seed=5,
        logprobs=True,
    )
    (out,) = run(hf, (ids, params))
    assert out.logprobs is not None
    reference = _processed_oracle(hf._model, ids, out.token_ids, params)
    assert max(abs(a - b) for a, b in zip(out.logprobs, reference, strict=True)) < 1e-3
    raw = _teacher_forced(hf._model, ids + out.token_ids)[len(ids) - 1 :]
    assert max(abs(a - b) for a, b in zip(out.logprobs, raw, strict=True)) > 0.1  # not the raw ones


def test_repetition_penalty_changes_greedy_decoding(hf: HFGenerator) -> None:
    ids = prompt(hf, "Repeat the word cat ten times.")
    plain, penalised = run(
        hf,
        (ids, SamplingParams(temperature=0, max_tokens=24)),
        (ids, SamplingParams(temperature=0, max_tokens=24, repetition_penalty=2.0)),
    )
    assert plain.token_ids != penalised.token_ids
    assert len(set(penalised.token_ids)) >= len(set(plain.token_ids))


def test_from_model_serves_an_in_memory_model_like_the_loaded_one(hf: HFGenerator) -> None:
    """GRPO's live policy: same weights in memory, same greedy output, no second copy loaded."""
    ids = prompt(hf, CODE_QUESTION)
    live = HFGenerator.from_model(hf._model, hf.tokenizer, max_batch_size=4, seed=0)
    try:
        (ours,) = run(live, (ids, GREEDY))
        (theirs,) = run(hf, (ids, GREEDY))
    finally:
        asyncio.run(live.aclose())
    assert ours.token_ids == theirs.token_ids
    assert live.describe()["in_memory"] is True
    with pytest.raises(BackendUnavailable, match="closed"):
        asyncio.run(live.generate(ids, GREEDY))


def test_next_turns_reuse_the_cache_and_match_the_one_shot_path(hf: HFGenerator) -> None:
    """Two ThinC-shaped trajectories of three turns on the real model: each turn's prompt extends the
    last with what the model wrote and an output block; tokens and logprobs equal a fresh one-shot
    prefill of the same prompt (`decode_batch`, the path before KV reuse), and later turns prefill
    only what the harness added."""
    from thinc_bench.backends._hf_batch import Row, decode_batch

    output = hf.tokenizer.encode("\n```output\n5\n```\n", add_special_tokens=False)

    async def trajectory(question: str, seed: int) -> list[tuple[list[int], SamplingParams, Generation]]:
        ids, turns = prompt(hf, question), []
        for t in range(3):
            params = SamplingParams(temperature=0.8, max_tokens=12 + 6 * t, seed=seed + t, logprobs=True)
            out = await hf.generate(ids, params)
            turns.append((list(ids), params, out))
            ids = ids + out.token_ids + output
        return turns

    async def both() -> list[list[tuple[list[int], SamplingParams, Generation]]]:
        return list(await asyncio.gather(trajectory(CODE_QUESTION, 1), trajectory("Say hello.", 9)))

    start = hf.cache_stats()
    trajectories = asyncio.run(both())
    reused = hf.cache_stats()["reused_tokens"] - start["reused_tokens"]
    for turns in trajectories:
        for ids, params, out in turns:
            row = Row(ids, params, hf._rng(params))
            (expected,) = decode_batch(hf._model, hf.tokenizer, [row], eos_ids=hf._eos_ids, pad_id=hf._pad_id)
            assert out.token_ids == expected.token_ids
            assert out.logprobs is not None and expected.logprobs is not None
            assert max(abs(a - b) for a, b in zip(out.logprobs, expected.logprobs, strict=True)) < 1e-3
    # Every id a turn fed through the model (all but its last sampled one) is not prefilled again.
    assert reused >= sum(len(ts[t][0]) + len(ts[t][2].token_ids) - 1 for ts in trajectories for t in range(2))
