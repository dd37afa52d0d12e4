"""The documented teacher's thinking mode: off by default, and a template that opens it is refused.

Qwen3.5-27B, the teacher the explainers name, thinks by default: its template's generation prompt
ends in `<think>\\n` unless `enable_thinking` is false, when it holds an empty thinking block instead
(tests/conftest.py `QWEN35_GENERATION_PROMPT`; docs/settings.md says where that was read). Its own
reasoning would otherwise become the ThinC plan, which must be brief and compute nothing.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from thinc_bench.build_sft import __main__ as build_sft
from thinc_bench.build_sft.config import TEACHER_TEMPLATE_KWARGS, BuildSFTConfig
from thinc_bench.prompts import build_messages, load_system_prompt
from thinc_bench.prompts.chat import opened_plan, parse_template_kwargs, render_prompt_ids

PROBLEM = {"id": "squares", "problem": "Find the sum of the squares of 1, 2 and 3.", "answer": "14"}
TURNS = [
    "<think>\nSum the squares in code, check with the closed form, then compare.\n</think>\n"
    "```python\n# direct sum\ns = sum(k * k for k in (1, 2, 3))\nprint(s)\n```\n```output",
    "```python\n# closed form\nn = 3\nprint(n * (n + 1) * (2 * n + 1) // 6)\n```\n```output",
    "```python\n# agree\ns == n * (n + 1) * (2 * n + 1) // 6\n```\n```output",
    "\\boxed{14}",
]


def _prompt_text(folder: str, kwargs: str | None) -> str:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    messages = build_messages(PROBLEM["problem"], load_system_prompt("thinc"))
    ids = render_prompt_ids(tokenizer, messages, parse_template_kwargs(kwargs))
    return str(tokenizer.decode(ids)), opened_plan(tokenizer, ids)  # type: ignore[return-value]


def test_a_model_teacher_defaults_to_thinking_off_and_the_demo_and_nano_teachers_do_not() -> None:
    teacher = BuildSFTConfig(teacher="Qwen/Qwen3.5-27B", backend="vllm")
    assert teacher.teacher_chat_template_kwargs == TEACHER_TEMPLATE_KWARGS == '{"enable_thinking": false}'
    assert teacher.eval_config().chat_template_kwargs == TEACHER_TEMPLATE_KWARGS
    assert BuildSFTConfig(teacher="T", teacher_chat_template_kwargs="{}").teacher_chat_template_kwargs == "{}"
    assert BuildSFTConfig(source="nano").teacher_chat_template_kwargs is None  # the template teacher


def test_on_qwen35s_template_thinking_off_closes_an_empty_block_and_the_default_opens_one(
    qwen35_tokenizer_folder,
) -> None:
    off, off_opened = _prompt_text(qwen35_tokenizer_folder, TEACHER_TEMPLATE_KWARGS)
    on, on_opened = _prompt_text(qwen35_tokenizer_folder, None)
    assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n") and not off_opened
    assert on.endswith("<|im_start|>assistant\n<think>\n") and on_opened


def _args(tmp_path: Path, tokenizer: str, student: str, *extra: str) -> list[str]:
    source = tmp_path / "problems.jsonl"
    source.write_text(json.dumps(PROBLEM) + "\n")
    teacher = tmp_path / "teacher.jsonl"
    teacher.write_text(json.dumps({"problem_id": PROBLEM["id"], "turns": TURNS}) + "\n")
    return [
        "--teacher",
        str(teacher),
        "--backend",
        "scripted",
        "--tokenizer",
        tokenizer,
        "--source",
        str(source),
        "--student-tokenizer",
        student,
        "--decontam-benchmarks",
        "",
        "--out",
        str(tmp_path / "build"),
        *extra,
    ]


def test_a_teacher_whose_template_opens_its_thinking_is_refused_before_generating(
    qwen35_tokenizer_folder, qwen3_tokenizer_folders, tmp_path, capsys
) -> None:
    args = _args(tmp_path, qwen35_tokenizer_folder, qwen3_tokenizer_folders["hybrid"])
    assert build_sft.main([*args, "--teacher-chat-template-kwargs", "{}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "opens its own thinking" in err
    assert '{"enable_thinking": false}' in err and "--teacher-thinks" in err
    assert not (tmp_path / "build" / "rollouts").exists()  # nothing generated
    base = BuildSFTConfig(
        teacher="t",
        backend="scripted",
        tokenizer=qwen35_tokenizer_folder,
        student_tokenizer="bundled-smollm2",
        decontam_benchmarks="",
    )
    assert not build_sft.teacher_thinking_opens(base)  # the default turns it off
    thinking = dataclasses.replace(base, teacher_chat_template_kwargs="{}")
    assert build_sft.teacher_thinking_opens(thinking)
    build_sft.preflight(dataclasses.replace(thinking, teacher_thinks=True))  # dropping it is the other way


def test_the_default_build_gives_the_qwen35_teacher_an_empty_thinking_block_and_keeps_its_plan(
    qwen35_tokenizer_folder, qwen3_tokenizer_folders, tmp_path
) -> None:
    args = _args(tmp_path, qwen35_tokenizer_folder, qwen3_tokenizer_folders["hybrid"])
    assert build_sft.main(args) == 0
    out = tmp_path / "build"
    (prompt,) = [json.loads(line) for line in (out / "rollouts" / "prompts.jsonl").read_text().splitlines()]
    assert prompt["text"].endswith("<think>\n\n</think>\n\n") and not prompt.get("opened_plan")
    stats = json.loads((out / "stats.json").read_text())
    assert (
        stats["counts"]["kept"] == 1
        and stats["settings"]["teacher_chat_template_kwargs"] == TEACHER_TEMPLATE_KWARGS
    )
    import datasets

    (row,) = list(datasets.load_from_disk(str(out / "dataset")))
    assert row["messages"][-1]["content"].startswith("<think>\nSum the squares in code")


@pytest.mark.parametrize("kwargs", ["[1]", "not json"])
def test_bad_teacher_template_kwargs_are_one_line_config_errors(kwargs, tmp_path, capsys) -> None:
    assert build_sft.main(_args(tmp_path, "x", "y", "--teacher-chat-template-kwargs", kwargs)) == 2
    assert "--teacher-chat-template-kwargs" in capsys.readouterr().err
