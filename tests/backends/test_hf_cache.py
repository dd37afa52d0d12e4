"""The hf backend's continuous batch and retained KV caches, on the tiny random Qwen3 (fast).

Every generation is checked against the one-shot path the backend used before (`decode_batch` on
that one prompt, a whole fresh prefill): same token ids and the same processed logprobs, for greedy
and seeded sampling, over trajectories whose turns extend earlier ones, with rows of different
lengths joining and leaving, and with a cache budget small enough to evict. Random weights with a
peaked init give distinct logits, so a wrong position, mask or cache row changes tokens or moves
logprobs by far more than the tolerance.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import torch

from thinc_bench.backends._hf_batch import Row, decode_batch, plain_cache
from thinc_bench.backends._hf_cache import KVStore, _common_prefix
from thinc_bench.backends.base import Generation, SamplingParams
from thinc_bench.backends.hf import HFGenerator
from thinc_bench.errors import ConfigError

LOGPROB_ATOL = 1e-4
"""float32 on both sides: batching, padding and a shorter prefill change summation order only."""

HARNESS = "\n```output\n5\n```\n"
"""What the interpreter 'writes' between turns (ids appended by the harness, never sampled)."""

GREEDY = SamplingParams(temperature=0, logprobs=True)
SAMPLED = SamplingParams(temperature=0.8, top_k=50, seed=11, logprobs=True)

QUESTIONS = [
    ("What is 2 + 2?", 5),
    ("Compute the sum of the first ten primes, then explain each step in words.", 9),
    ("Hi", 14),
]
"""Prompts of different lengths with different per-turn budgets: rows join and leave mid-batch."""

Turn = tuple[list[int], SamplingParams, Generation]


@pytest.fixture(scope="module")
def qwen3(qwen3_models: dict[str, str]) -> str:
    return qwen3_models["hybrid"]


@pytest.fixture(scope="module")
def generator(qwen3: str) -> Iterator[HFGenerator]:
    gen = HFGenerator(qwen3, dtype="float32", device="cpu", max_batch_size=4, seed=0)
    yield gen
    asyncio.run(gen.aclose())


def chat(gen: HFGenerator, question: str) -> list[int]:
    ids: Any = gen.tokenizer.apply_chat_template(
        [{"role": "user", "content": question}], add_generation_prompt=True, tokenize=True
    )
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def before(gen: HFGenerator, prompt: list[int], params: SamplingParams) -> Generation:
    """The path before KV reuse: this prompt alone, prefilled whole, in a one-shot batch."""
    row = Row(list(prompt), params, gen._rng(params))
    (out,) = decode_batch(gen._model, gen.tokenizer, [row], eos_ids=gen._eos_ids, pad_id=gen._pad_id)
    return out


async def trajectory(gen: HFGenerator, question: str, budget: int, params: SamplingParams) -> list[Turn]:
    """Three turns, each prompt the previous one plus what the model wrote plus the interpreter's output."""
    harness = gen.tokenizer.encode(HARNESS, add_special_tokens=False)
    ids, turns = chat(gen, question), []
    for t in range(3):
        turn = replace(params, max_tokens=budget, seed=None if params.seed is None else params.seed + t)
        out = await gen.generate(ids, turn, request_id=question)
        turns.append((list(ids), turn, out))
        ids = ids + out.token_ids + harness
    return turns


def run_trajectories(gen: HFGenerator, params: SamplingParams) -> list[list[Turn]]:
    async def go() -> list[list[Turn]]:
        return list(await asyncio.gather(*(trajectory(gen, q, n, params) for q, n in QUESTIONS)))

    return asyncio.run(go())


def assert_same_as_before(gen: HFGenerator, trajectories: list[list[Turn]]) -> None:
    for turns in trajectories:
        for prompt, params, out in turns:
            expected = before(gen, prompt, params)
            assert out.token_ids == expected.token_ids
            assert out.logprobs is not None and expected.logprobs is not None
            assert (
                max(abs(a - b) for a, b in zip(out.logprobs, expected.logprobs, strict=True)) < LOGPROB_ATOL
            )


@pytest.mark.parametrize("params", [GREEDY, SAMPLED], ids=["greedy", "seeded"])
def test_turns_that_extend_earlier_ones_reuse_their_cache_and_match_a_fresh_prefill(
    generator: HFGenerator, params: SamplingParams
) -> None:
    start = generator.cache_stats()
    trajectories = run_trajectories(generator, params)
    assert_same_as_before(generator, trajectories)
    stats = {k: v - start[k] for k, v in generator.cache_stats().items()}
    prompts = [prompt for turns in trajectories for prompt, _, _ in turns]
    assert stats["prefilled_tokens"] + stats["reused_tokens"] == sum(len(p) for p in prompts)
    # A later turn finds every id its previous turn fed through the model: all but the last sampled one.
    carried = sum(
        len(turns[t][0]) + len(turns[t][2].token_ids) - 1 for turns in trajectories for t in range(2)
    )
    assert stats["reused_tokens"] >= carried
    assert stats["evictions"] == 0


BUDGET = 60
"""Room for one or two retained rows of these trajectories (20 to 66 tokens each), not for all three."""


def test_a_small_cache_budget_evicts_and_evicted_turns_prefill_again_with_the_same_output(qwen3: str) -> None:
    gen = HFGenerator(qwen3, dtype="float32", device="cpu", max_batch_size=4, seed=0, kv_cache_tokens=BUDGET)
    try:
        trajectories = run_trajectories(gen, SAMPLED)
        assert_same_as_before(gen, trajectories)
        stats = gen.cache_stats()
    finally:
        asyncio.run(gen.aclose())
    assert stats["evictions"] > 0 and stats["held_tokens"] <= BUDGET and stats["reused_tokens"] > 0
    prompts = [prompt for turns in trajectories for prompt, _, _ in turns]
    assert stats["prefilled_tokens"] + stats["reused_tokens"] == sum(len(p) for p in prompts)


def test_no_cache_budget_prefills_every_prompt_whole(qwen3: str) -> None:
    gen = HFGenerator(qwen3, dtype="float32", device="cpu", max_batch_size=4, seed=0, kv_cache_tokens=0)
    try:
        trajectories = run_trajectories(gen, GREEDY)
        assert_same_as_before(gen, trajectories)
        stats = gen.cache_stats()
    finally:
        asyncio.run(gen.aclose())
    prompts = [prompt for turns in trajectories for prompt, _, _ in turns]
    assert (stats["prefilled_tokens"], stats["reused_tokens"]) == (sum(len(p) for p in prompts), 0)


def test_concurrent_requests_of_different_lengths_each_match_their_own_run(generator: HFGenerator) -> None:
    """More requests than rows: later ones join as earlier ones leave; stops and EOS end rows early."""
    calls = [
        (chat(generator, "x" * n), SamplingParams(temperature=0, max_tokens=m, logprobs=True, stop=stop))
        for n, m, stop in [
            (1, 3, ()),
            (40, 12, ()),
            (7, 1, ()),
            (90, 6, (" ",)),
            (15, 20, ()),
            (3, 9, ("a",)),
        ]
    ]

    async def go() -> list[Generation]:
        return list(await asyncio.gather(*(generator.generate(p, s) for p, s in calls)))

    for (prompt, params), out in zip(calls, asyncio.run(go()), strict=True):
        expected = before(generator, prompt, params)
        assert (out.token_ids, out.finish_reason, out.stop) == (
            expected.token_ids,
            expected.finish_reason,
            expected.stop,
        )
        assert out.logprobs is not None and expected.logprobs is not None
        assert max(abs(a - b) for a, b in zip(out.logprobs, expected.logprobs, strict=True)) < LOGPROB_ATOL


def test_a_prompt_equal_to_a_retained_one_still_prefills_its_last_id(generator: HFGenerator) -> None:
    prompt = chat(generator, "Say something.")
    params = SamplingParams(temperature=0, max_tokens=4, logprobs=True)
    first = asyncio.run(generator.generate(prompt, params))
    reused = generator.cache_stats()["reused_tokens"]
    again = asyncio.run(generator.generate(prompt, params))
    assert again.token_ids == first.token_ids == before(generator, prompt, params).token_ids
    assert generator.cache_stats()["reused_tokens"] - reused == len(prompt) - 1


def test_weights_changed_in_place_drop_the_retained_caches(qwen3: str) -> None:
    """GRPO's live policy: after an optimizer step, a cache from the old weights would be wrong."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model: Any = AutoModelForCausalLM.from_pretrained(qwen3, dtype=torch.float32)
    model.eval()
    gen = HFGenerator.from_model(model, AutoTokenizer.from_pretrained(qwen3), seed=0)
    try:
        prompt = chat(gen, "What is 3 * 7?")
        params = SamplingParams(temperature=0, max_tokens=6, logprobs=True)
        first = asyncio.run(gen.generate(prompt, params))
        with torch.no_grad():
            for parameter in model.model.layers[0].self_attn.parameters():
                parameter.mul_(-1.5)
        longer = prompt + first.token_ids
        out = asyncio.run(gen.generate(longer, params))
        stats = gen.cache_stats()
    finally:
        asyncio.run(gen.aclose())
    assert stats["reused_tokens"] == 0 and stats["prefilled_tokens"] == len(prompt) + len(longer)
    expected = before(gen, longer, params)
    assert out.token_ids == expected.token_ids
    assert out.logprobs is not None and expected.logprobs is not None
    assert max(abs(a - b) for a, b in zip(out.logprobs, expected.logprobs, strict=True)) < LOGPROB_ATOL


def test_full_attention_models_are_served_continuously(generator: HFGenerator) -> None:
    assert plain_cache(generator._model) and generator._engine is not None
    assert generator.describe()["kv_cache_tokens"] > 0


def test_negative_cache_budget_is_refused(qwen3: str) -> None:
    with pytest.raises(ConfigError, match="kv_cache_tokens=-1"):
        HFGenerator(qwen3, device="cpu", kv_cache_tokens=-1)


def kv(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """A one-layer cache whose key at position i is i, so a slice shows which positions it kept."""
    positions = torch.arange(n, dtype=torch.float32).view(1, 1, n, 1)
    return [(positions, -positions)]


def test_store_gives_the_longest_shared_prefix_and_keeps_the_last_prompt_id_to_prefill() -> None:
    store = KVStore(100)
    store.put([1, 2, 3, 4], kv(4))
    store.put([1, 2, 9], kv(3))
    assert store.take([5, 1, 2]) == (None, 0)  # nothing shared at the start
    cache, reuse = store.take([1, 2, 3, 7, 7])  # shares 3 with the first entry, which stays
    assert reuse == 3 and cache is not None and cache[0][0].flatten().tolist() == [0, 1, 2]
    assert len(store) == 2
    cache, reuse = store.take([1, 2, 3, 4])  # the whole prompt is retained: its last id is prefilled
    assert reuse == 3 and len(store) == 2
    cache, reuse = store.take([1, 2, 3, 4, 8])  # the same row's next turn: the entry leaves
    assert reuse == 4 and len(store) == 1 and store.held_tokens == 3


def test_store_evicts_least_recently_used_entries_past_its_budget() -> None:
    store = KVStore(10)
    store.put([1] * 4, kv(4))
    store.put([2] * 4, kv(4))
    store.take([1, 1, 5])  # touches the first entry
    store.put([3] * 4, kv(4))  # 12 > 10: the second entry is the least recently used
    assert store.take([2, 2, 2]) == (None, 0)
    assert store.take([1, 1, 1, 1, 1])[1] == 4 and store.stats.evictions == 1
    store.put(list(range(11)), kv(11))  # larger than the whole budget: not kept, nothing evicted
    assert store.held_tokens == 4 and store.stats.evictions == 1


@pytest.mark.parametrize(
    ("a", "b", "shared"),
    [([], [1], 0), ([1], [], 0), ([1, 2], [2, 1], 0), ([1, 2, 3], [1, 2, 3], 3), ([1, 2, 3], [1, 2], 2)]
    + [([7] * k + [0] + [7] * 5, [7] * 40, k) for k in (1, 2, 17, 39)],
)
def test_common_prefix(a: list[int], b: list[int], shared: int) -> None:
    assert _common_prefix(a, b) == shared


def test_a_request_that_fails_its_prefill_fails_alone(generator: HFGenerator) -> None:
    good = chat(generator, "What is 6 * 7?")
    params = SamplingParams(temperature=0, max_tokens=5)

    async def go() -> list[Generation | BaseException]:
        calls = [generator.generate(good, params), generator.generate([1, 10**9, 2], params)]
        return list(await asyncio.gather(*calls, return_exceptions=True))

    out, failed = asyncio.run(go())
    assert isinstance(failed, IndexError)
    assert isinstance(out, Generation) and out.token_ids == before(generator, good, params).token_ids


def test_rows_that_join_longer_leave_or_are_dropped_match_their_own_runs_while_the_buffer_moves_and_grows(
    generator: HFGenerator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch's buffer allocated in 8-column steps, so it fills every few steps: the window moves to
    column 0 or the buffer grows, mid-batch. A longer row joining leaves skipped columns in the others;
    a dropped row's slot takes another row. Every row still matches its own one-shot run, and so does
    the next turn of each, built on the cache it left in the store (skipped columns left out)."""
    from thinc_bench.backends import _hf_batch

    monkeypatch.setattr(_hf_batch._SlotBuffer, "COLUMN_STEP", 8)
    relocations: list[str] = []
    relocate = _hf_batch._SlotBuffer.relocate

    def spy(buffer: Any, slots: int, span: int) -> int:
        shape = tuple(buffer._kv.shape)
        shift = relocate(buffer, slots, span)
        relocations.append("moved" if tuple(buffer._kv.shape) == shape else "grew")
        return shift

    monkeypatch.setattr(_hf_batch._SlotBuffer, "relocate", spy)
    engine = _hf_batch.ContinuousBatch(
        generator._model, generator.tokenizer, eos_ids=generator._eos_ids, store=KVStore(100_000)
    )
    harness = generator.tokenizer.encode(HARNESS, add_special_tokens=False)
    calls = {
        "a": (chat(generator, "x"), 20),
        "b": (chat(generator, "y" * 60), 9),  # longer than every live row when it joins
        "c": (chat(generator, "z z"), 40),  # outlives the others: the window's start moves up to it
        "dropped": (chat(generator, "w" * 20), 40),
        "e": (chat(generator, "v" * 30), 12),
    }
    joins = {0: ["a"], 3: ["dropped"], 5: ["b"], 12: ["e"], 16: ["c"]}
    finished: dict[str, Generation] = {}

    def run(schedule: dict[int, list[str]], prompts: dict[str, list[int]]) -> None:
        step = 0
        while step <= max(schedule) or len(engine):
            if step in schedule:
                rows = [
                    (Row(list(prompts[n]), greedy(calls[n][1]), generator._rng(GREEDY)), n)
                    for n in schedule[step]
                ]
                finished.update(engine.admit(rows))  # type: ignore[arg-type]
            if step == 9 and "dropped" in engine.owners:
                engine.drop(["dropped"])
            if len(engine):
                finished.update(engine.step())
            step += 1

    def greedy(max_tokens: int) -> SamplingParams:
        return SamplingParams(temperature=0, max_tokens=max_tokens, logprobs=True)

    def check(prompts: dict[str, list[int]]) -> None:
        for name in ("a", "b", "c", "e"):
            expected = before(generator, prompts[name], greedy(calls[name][1]))
            out = finished[name]
            assert out.token_ids == expected.token_ids, name
            assert out.logprobs is not None and expected.logprobs is not None
            assert (
                max(abs(a - b) for a, b in zip(out.logprobs, expected.logprobs, strict=True)) < LOGPROB_ATOL
            )

    first = {name: prompt for name, (prompt, _) in calls.items()}
    run(joins, first)
    assert "dropped" not in finished and len(finished) == 4
    check(first)
    second = {name: first[name] + finished[name].token_ids + harness for name in ("a", "b", "c", "e")}
    reused = engine.store.stats.reused_tokens
    finished.clear()
    run({0: ["a", "b"], 2: ["c"], 4: ["e"]}, second)
    check(second)
    assert {"moved", "grew"} <= set(relocations), relocations
    assert engine.store.stats.reused_tokens - reused >= sum(len(first[n]) for n in second)
