"""The one prompt renderer, on the real Qwen3 tokenizer with both of its students' templates.

Evaluation and SFT examples render through `render_prompt_ids`, so the prompt an SFT example starts
with is, id for id, the prompt `python -m thinc_bench.eval` gives the model (checked end to end
through both CLIs). Scripted replays in Qwen3 tokens, for the hybrid template (the model writes
`<think>`) and the Thinking-2507 one (the prompt opens it), produce the right segments and verdicts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report.pages import viewer_data
from transformers import AutoTokenizer

from thinc_bench import trajectory
from thinc_bench.build_sft import __main__ as build_sft
from thinc_bench.errors import ConfigError
from thinc_bench.eval import EvalConfig
from thinc_bench.eval import __main__ as thinc_eval
from thinc_bench.prompts import build_messages, opened_plan, parse_template_kwargs, render_prompt_ids

MESSAGES = [{"role": "system", "content": "Solve with code."}, {"role": "user", "content": "Compute 2 + 3."}]
HEADERS = {"hybrid": "<|im_start|>assistant\n", "thinking": "<|im_start|>assistant\n<think>\n"}
PLAN = "Add the fractions exactly with Fraction, then check the float value."
TURNS = [
    f"{PLAN}\n</think>\n```python\nfrom fractions import Fraction\nx = Fraction(1, 2) + Fraction(1, 3)\nprint(x)\n```\n```output",
    "```python\nprint(float(x))\n```\n```output",
    "The sum is \\boxed{\\frac{5}{6}}.",
]
"""tiny-2 as a Thinking-2507 model writes it; the hybrid model writes `<think>\\n` first."""
SIMPLE = [f"{PLAN}\n</think>\n```python\nprint(2 + 3)\n```\n```output", "\\boxed{5}"]


def turns_for(template: str, tmp_path: Path) -> Path:
    opener = "<think>\n" if template == "hybrid" else ""
    rows = [("tiny-1", SIMPLE), ("tiny-2", TURNS)]
    path = tmp_path / f"turns-{template}.jsonl"
    lines = [json.dumps({"problem_id": p, "turns": [opener + t[0], *t[1:]]}) for p, t in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_each_template_ends_the_prompt_with_its_own_generation_header(
    qwen3_tokenizers, qwen3_template
) -> None:
    tokenizer = qwen3_tokenizers[qwen3_template]
    ids = render_prompt_ids(tokenizer, MESSAGES)
    text = tokenizer.decode(ids)
    assert text == (
        "<|im_start|>system\nSolve with code.<|im_end|>\n<|im_start|>user\nCompute 2 + 3.<|im_end|>\n"
        + HEADERS[qwen3_template]
    )
    assert opened_plan(tokenizer, ids) is (qwen3_template == "thinking")


def test_enable_thinking_false_closes_an_empty_plan_in_the_hybrid_prompt(qwen3_tokenizers) -> None:
    tokenizer = qwen3_tokenizers["hybrid"]
    ids = render_prompt_ids(tokenizer, MESSAGES, {"enable_thinking": False})
    assert tokenizer.decode(ids).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert ids[: len(render_prompt_ids(tokenizer, MESSAGES))] == render_prompt_ids(tokenizer, MESSAGES)
    assert not opened_plan(tokenizer, ids)


def test_a_tokenizer_without_a_chat_template_is_a_config_error(qwen3_tokenizer_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(qwen3_tokenizer_dir)
    tokenizer.chat_template = None
    with pytest.raises(ConfigError, match="no chat template"):
        render_prompt_ids(tokenizer, MESSAGES)


@pytest.mark.parametrize("text", ["{enable_thinking: false}", "[1]", '"x"'])
def test_template_kwargs_must_be_a_json_object(text: str) -> None:
    with pytest.raises(ConfigError, match="--chat-template-kwargs"):
        parse_template_kwargs(text)
    with pytest.raises(ConfigError, match="--chat-template-kwargs"):
        EvalConfig(model="m", chat_template_kwargs=text)


def test_template_kwargs_parse_and_default_to_none() -> None:
    assert parse_template_kwargs('{"enable_thinking": false}') == {"enable_thinking": False}
    assert parse_template_kwargs(None) == {} and parse_template_kwargs("") == {}


def run_eval(template: str, folder: str, benchmark: Path, tmp_path: Path, *extra: str) -> Path:
    out = tmp_path / f"eval-{template}"
    args = ["--backend", "scripted", "--model", str(turns_for(template, tmp_path)), "--tokenizer", folder]
    args += ["--benchmarks", str(benchmark), "--samples", "2", "--out", str(out), *extra]
    assert thinc_eval.main(args) == 0
    return out


def test_scripted_qwen3_replay_reads_plan_code_outputs_and_answer(
    qwen3_tokenizer_folders, qwen3_template, two_problem_benchmark, tmp_path
) -> None:
    out = run_eval(qwen3_template, qwen3_tokenizer_folders[qwen3_template], two_problem_benchmark, tmp_path)
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    record = next(r for r in records if r["problem_id"] == "tiny-2")
    assert record["text"].startswith("<think>\n" if qwen3_template == "hybrid" else PLAN)
    parsed = trajectory.parse(record["text"])
    assert parsed.plan == PLAN
    assert parsed.code_blocks == [
        "from fractions import Fraction\nx = Fraction(1, 2) + Fraction(1, 3)\nprint(x)",
        "print(float(x))",
    ]
    assert parsed.outputs == ["5/6", "0.8333333333333334"]
    assert (record["answer"], record["correct"], record["grounded"], record["style"]) == (
        "\\frac{5}{6}",
        True,
        True,
        "thinc",
    )
    assert trajectory.check_conformance(parsed, min_code_blocks=2).passed
    assert all(r["correct"] and r["grounded"] for r in records) and len(records) == 4
    prompts = [json.loads(line) for line in (out / "prompts.jsonl").read_text().splitlines()]
    assert sorted(p["problem_id"] for p in prompts) == [
        "tiny-1",
        "tiny-2",
    ]  # once per problem, not per sample
    row = next(p for p in prompts if p["problem_id"] == "tiny-2")
    assert row["text"].endswith("Compute 1/2 + 1/3.<|im_end|>\n" + HEADERS[qwen3_template])
    assert row["opened_plan"] is (qwen3_template == "thinking")
    assert record["prompt_tokens"] == row["prompt_tokens"] == len(row["prompt_ids"])
    shown = next(
        v for v in viewer_data((out / "report.html").read_text())["samples"] if v["problem_id"] == "tiny-2"
    )
    assert (shown["prompt"], shown["prompt_tokens"]) == (
        row["text"],
        row["prompt_tokens"],
    )  # the report shows it
    assert (
        record["total_tokens"]
        == record["prompt_tokens"]
        + len(AutoTokenizer.from_pretrained(qwen3_tokenizer_folders[qwen3_template]).encode(record["text"]))
        + 1
    )  # the completion ends in <|im_end|>


def test_chat_template_kwargs_reach_the_prompt_and_the_run_config(
    qwen3_tokenizer_folders, two_problem_benchmark, tmp_path
) -> None:
    out = run_eval(
        "hybrid",
        qwen3_tokenizer_folders["hybrid"],
        two_problem_benchmark,
        tmp_path,
        "--chat-template-kwargs",
        '{"enable_thinking": false}',
    )
    config = json.loads((out / "config.json").read_text())
    assert config["settings"]["chat_template_kwargs"] == '{"enable_thinking": false}'
    prompts = [json.loads(line) for line in (out / "prompts.jsonl").read_text().splitlines()]
    assert all(p["text"].endswith("<think>\n\n</think>\n\n") and not p["opened_plan"] for p in prompts)
    assert (
        "chat_template_kwargs <code>{&#34;enable_thinking&#34;: false}</code>"
        in (out / "report.html").read_text()
    )


def test_sft_examples_start_with_the_exact_prompt_ids_eval_gives_the_model(
    qwen3_tokenizer_folders, qwen3_template, two_problem_benchmark, benchmark_dir, tmp_path
) -> None:
    """Both CLIs, one problem set, one system prompt: the ids agree token for token."""
    folder = qwen3_tokenizer_folders[qwen3_template]
    prompts = run_eval(qwen3_template, folder, two_problem_benchmark, tmp_path) / "prompts.jsonl"
    eval_ids = {p["problem_id"]: p["prompt_ids"] for p in map(json.loads, prompts.read_text().splitlines())}
    out = tmp_path / f"sft-{qwen3_template}"
    args = [
        "--teacher",
        str(turns_for("hybrid", tmp_path)),
        "--backend",
        "scripted",
        "--source",
        str(two_problem_benchmark),
    ]
    args += ["--student-tokenizer", folder, "--decontam-data-dir", str(benchmark_dir), "--out", str(out)]
    assert build_sft.main([*args, "--min-code-blocks", "1", "--samples-per-problem", "1"]) == 0
    rows = [json.loads(line) for line in _dataset_rows(out)]
    assert sorted(r["id"] for r in rows) == ["tiny-1", "tiny-2"]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    for row in rows:
        prompt = eval_ids[row["id"]]
        assert row["input_ids"][: len(prompt)] == prompt
        assert set(row["assistant_masks"][: len(prompt)]) == {0} and row["assistant_masks"][len(prompt)] == 1
        turn = row["input_ids"][len(prompt) - prompt[::-1].index(151644) - 1 :]  # from <|im_start|>assistant
        assert turn.count(151667) == 1 and turn.count(151668) == 1  # one <think>, one </think>
        completion = tokenizer.decode(row["input_ids"][len(prompt) :])
        assert completion.startswith(("<think>\n" if qwen3_template == "hybrid" else "") + PLAN)
        assert completion.endswith(("}.<|im_end|>", "}<|im_end|>"))
    assert build_messages("Compute 2 + 3.", "s")[-1] == {"role": "user", "content": "Compute 2 + 3."}


def _dataset_rows(out: Path) -> list[str]:
    import pyarrow.parquet as pq

    return [json.dumps(r) for r in pq.read_table(out / "thinc_sft.parquet").to_pylist()]
