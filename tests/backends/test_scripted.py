"""The scripted backend replays exact turns with real token ids, keyed by problem id and call count."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from thinc_bench.backends import Generation, SamplingParams, load_generator
from thinc_bench.backends.scripted import ScriptedGenerator
from thinc_bench.errors import BackendUnavailable, ConfigError, ContextExceeded, DatasetError

STOP = ("```output",)
PLAN = "<think>\nAdd the two numbers with one line of code.\n</think>\n```python\n# add them\nprint(2 + 3)\n```\n```output"
FINAL = "The sum is \\boxed{5}."


def write_script(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def script(tmp_path: Path) -> Path:
    return write_script(
        tmp_path / "script.jsonl",
        [
            {"problem_id": "tiny-1", "turns": [PLAN, FINAL]},
            {"problem_id": "test/algebra/1.json", "turns": ["A", "B"]},
            {"problem_id": "test/algebra/1.json/x", "turns": ["C"]},
        ],
    )


@pytest.fixture
def generator(script: Path, smollm2_path: str, smollm2_tokenizer: Any) -> ScriptedGenerator:
    gen = load_generator("scripted", str(script), tokenizer=smollm2_path)
    assert isinstance(gen, ScriptedGenerator)
    return gen


def run(gen: ScriptedGenerator, request_id: str | None, params: SamplingParams | None = None) -> Generation:
    return asyncio.run(gen.generate([1, 2, 3], params or SamplingParams(stop=STOP), request_id=request_id))


def test_turn_text_is_returned_exactly(generator: ScriptedGenerator) -> None:
    assert run(generator, "tiny-1/0").text == PLAN


def test_token_ids_are_the_real_tokenizer_encoding(generator: ScriptedGenerator) -> None:
    assert run(generator, "tiny-1/0").token_ids == generator.tokenizer.encode(PLAN, add_special_tokens=False)


def test_turn_ending_with_the_output_opener_reports_that_stop(generator: ScriptedGenerator) -> None:
    generation = run(generator, "tiny-1/0")
    assert (generation.finish_reason, generation.stop) == ("stop", "```output")


def test_final_turn_stops_with_eos_and_no_stop_string(generator: ScriptedGenerator) -> None:
    run(generator, "tiny-1/0")
    final = run(generator, "tiny-1/0")
    assert (final.text, final.finish_reason, final.stop) == (FINAL, "stop", None)
    assert final.token_ids[-1] == generator.tokenizer.eos_token_id


def test_each_request_id_counts_its_own_turns(generator: ScriptedGenerator) -> None:
    run(generator, "tiny-1/0")
    assert run(generator, "tiny-1/1").text == PLAN


def test_longest_matching_problem_id_wins_when_ids_contain_slashes(generator: ScriptedGenerator) -> None:
    assert run(generator, "test/algebra/1.json/x/3").text == "C"
    assert run(generator, "test/algebra/1.json/7").text == "A"


def test_request_id_equal_to_a_problem_id_is_accepted(generator: ScriptedGenerator) -> None:
    assert run(generator, "tiny-1").text == PLAN


def test_missing_problem_id_is_a_clear_error(generator: ScriptedGenerator) -> None:
    with pytest.raises(ConfigError, match=r"no script for request 'aime-9/0'.*3 problems"):
        run(generator, "aime-9/0")


def test_missing_request_id_is_a_clear_error(generator: ScriptedGenerator) -> None:
    with pytest.raises(ConfigError, match="needs request_id"):
        run(generator, None)


def test_asking_past_the_last_turn_is_an_error(generator: ScriptedGenerator) -> None:
    run(generator, "tiny-1/0")
    run(generator, "tiny-1/0")
    with pytest.raises(ConfigError, match="asked for turn 3 but problem 'tiny-1' has 2 turns"):
        run(generator, "tiny-1/0")


def test_max_tokens_cuts_the_turn_with_finish_length(generator: ScriptedGenerator) -> None:
    generation = run(generator, "tiny-1/0", SamplingParams(stop=STOP, max_tokens=4))
    assert (len(generation.token_ids), generation.finish_reason, generation.stop) == (4, "length", None)
    assert PLAN.startswith(generation.text)


def test_context_length_cuts_a_turn_like_a_model_and_refuses_a_full_prompt(script: Path) -> None:
    gen = load_generator("scripted", str(script), context_length=8)
    assert gen.context_length == 8 and gen.describe()["context_length"] == 8
    generation = run(gen, "tiny-1/0")  # 3 prompt tokens: 5 left for the turn
    assert (len(generation.token_ids), generation.finish_reason) == (5, "length")
    with pytest.raises(ContextExceeded, match="prompt of 8 tokens fills the model's context of 8"):
        asyncio.run(gen.generate([1] * 8, SamplingParams(stop=STOP), request_id="tiny-1/1"))
    assert run(gen, "tiny-1/1").token_ids == generation.token_ids  # the refused call used no turn
    with pytest.raises(ConfigError, match="context_length=1"):
        load_generator("scripted", str(script), context_length=1)


def test_stop_string_inside_a_turn_is_rejected(tmp_path: Path, smollm2_path: str) -> None:
    path = write_script(tmp_path / "s.jsonl", [{"problem_id": "p", "turns": ["```output\nmore text"]}])
    gen = ScriptedGenerator(path, tokenizer=smollm2_path)
    with pytest.raises(DatasetError, match="contains stop string '```output' before its end"):
        run(gen, "p/0")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", r"s.jsonl:1: not JSON"),
        ('{"problem_id": "", "turns": ["a"]}', "'problem_id' must be a non-empty string"),
        ('{"problem_id": "p", "turns": []}', "'turns' of 'p' must be a non-empty list"),
        (
            '{"problem_id": "p", "turns": ["a"]}\n{"problem_id": "p", "turns": ["b"]}',
            r"s.jsonl:2: problem_id 'p' appears twice",
        ),
    ],
)
def test_malformed_script_names_file_and_line(
    tmp_path: Path, smollm2_path: str, line: str, message: str
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=message):
        ScriptedGenerator(path, tokenizer=smollm2_path)


def test_missing_script_file_is_a_dataset_error(tmp_path: Path, smollm2_path: str) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        ScriptedGenerator(tmp_path / "nope.jsonl", tokenizer=smollm2_path)


def test_closed_generator_raises_backend_unavailable(generator: ScriptedGenerator) -> None:
    asyncio.run(generator.aclose())
    with pytest.raises(BackendUnavailable):
        run(generator, "tiny-1/0")


def test_describe_names_backend_script_hash_and_tokenizer(generator: ScriptedGenerator, script: Path) -> None:
    info = generator.describe()
    assert info["backend"] == "scripted" and info["model"] == str(script) and len(info["script_sha256"]) == 64
    assert info["tokenizer"].endswith(".gguf") and info["problems"] == 3


def test_default_tokenizer_is_the_bundled_smollm2(script: Path, smollm2_tokenizer: Any) -> None:
    gen = ScriptedGenerator(script)
    assert gen.tokenizer.encode(PLAN) == smollm2_tokenizer.encode(PLAN)
