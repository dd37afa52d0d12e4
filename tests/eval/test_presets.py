"""`--preset rstar2-agent | aster | retool` end to end: each baseline's published setup, with a scripted
stub answering in that model's own format (its tool name and arguments, its answer tags), executed in
the real sandbox with the real Qwen3 tokenizer and graded by the real grader."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from thinc_bench.eval import __main__ as thinc_eval

PROBLEMS = {
    "stdin": ("Multiply the two numbers given on standard input.", "42"),
    "fresh": ("Double five.", "10"),
    "unknown": ("Compute six times seven.", "42"),
}


def hermes(name: str, **arguments: str) -> str:
    """A Hermes/Qwen tool call as these models write one."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


RSTAR2_SCRIPT = {
    # the rStar2-Agent paper's tool name, with stdin
    "stdin": [
        "<reason>Read the two numbers from standard input and multiply them.</reason>\n"
        + hermes(
            "execute_python_code_with_standard_io",
            code="a, b = map(int, input().split())\nprint(a * b)",
            input="6 7",
        ),
        "<reason>The program printed 42.</reason>\n<answer>The product is \\boxed{42}</answer>",
    ],
    # the repository's tool name; each call is a fresh process, so the second loses x
    "fresh": [
        "<reason>Set x, then double it.</reason>\n" + hermes("python_code_with_standard_io", code="x = 5\nprint(x)", input=""),
        hermes("python_code_with_standard_io", code="print(x * 2)", input=""),
        "<reason>Each call runs alone: define x again.</reason>\n"
        + hermes("python_code_with_standard_io", code="x = 5\nx * 2", input=""),
        "<answer>\\boxed{10}</answer>",
    ],
    # a name the tool does not have, then a bare last expression (its value is printed)
    "unknown": [
        "<reason>Multiply.</reason>\n" + hermes("python", code="6 * 7"),
        hermes("python_code_with_standard_io", code="6 * 7", input=""),
        "<answer>\\boxed{42}</answer>",
    ],
}  # fmt: skip


def write_bench(tmp_path: Path, problems: dict[str, tuple[str, str]]) -> Path:
    bench = tmp_path / "presets.jsonl"
    bench.write_text(
        "".join(json.dumps({"id": i, "problem": p, "answer": a}) + "\n" for i, (p, a) in problems.items())
    )
    return bench


def run_scripted(
    tmp_path: Path,
    tokenizer: str | Path,
    preset: str,
    turns: dict[str, list[str]],
    problems: dict,
    *extra: str,
) -> dict:
    tmp_path.mkdir(parents=True, exist_ok=True)
    script = tmp_path / "turns.jsonl"
    script.write_text("".join(json.dumps({"problem_id": i, "turns": t}) + "\n" for i, t in turns.items()))
    out = tmp_path / "run"
    args = [
        "--preset",
        preset,
        "--backend",
        "scripted",
        "--model",
        str(script),
        "--tokenizer",
        str(tokenizer),
    ]
    args += [
        "--benchmarks",
        str(write_bench(tmp_path, problems)),
        "--out",
        str(out),
        "--samples",
        "1",
        *extra,
    ]
    assert thinc_eval.main(args) == 0
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return {"out": out, **{r["problem_id"]: r for r in records}}


def responses(record: dict) -> list[str]:
    return [part.split("\n</tool_response>")[0] for part in record["text"].split("<tool_response>\n")[1:]]


@pytest.fixture(scope="module")
def rstar2(tmp_path_factory, qwen3_tokenizer_dir):
    return run_scripted(
        tmp_path_factory.mktemp("rstar2"), qwen3_tokenizer_dir, "rstar2-agent", RSTAR2_SCRIPT, PROBLEMS
    )


def test_rstar2_declares_its_published_tool_prompt_and_user_prefix(rstar2):
    prompt = json.loads((rstar2["out"] / "prompts.jsonl").read_text().splitlines()[0])["text"]
    tool = json.loads(prompt.split("<tools>\n")[1].split("\n</tools>")[0])["function"]
    assert tool["name"] == "python_code_with_standard_io"
    assert tool["parameters"]["required"] == ["code", "input"]
    assert tool["description"].startswith(
        "Execute Python code with standard input and capture standard output."
    )
    assert "enclosed within <reason> </reason> and answer is enclosed within <answer> </answer>" in prompt
    user = prompt.split("<|im_start|>user\n")[1]
    assert user.startswith("You must put your answer inside <answer> </answer> tags")
    assert "This is the problem:\n" + PROBLEMS["stdin"][0] + "<|im_end|>" in user
    config = json.loads((rstar2["out"] / "config.json").read_text())
    settings = config.get("settings", config)
    assert settings["sandbox_state"] == "fresh" and settings["max_tokens"] == 30720


def test_rstar2_call_by_the_papers_name_runs_with_input_as_stdin(rstar2):
    record = rstar2["stdin"]
    assert record["n_tool_calls"] == 1 and record["exec_statuses"] == ["ok"]
    (response,) = responses(record)
    assert re.fullmatch(r"Tool call success\nstdout: 42\n\nexecution time: \d+\.\d\ds", response)
    assert record["correct"] and record["grounded"] and record["answer"] == "42"
    assert record["finish_reason"] == "answer"


def test_rstar2_runs_each_call_in_a_fresh_process(rstar2):
    record = rstar2["fresh"]
    assert record["exec_statuses"] == ["ok", "error", "ok"] and record["n_exec_errors"] == 1
    first, second, third = responses(record)
    assert first.startswith("Tool call success\nstdout: 5\n")
    assert second.startswith("Tool call failure\nreason: \nstderr: Traceback (most recent call last):")
    assert "NameError: name 'x' is not defined" in second and "stdout:" not in second
    assert third.startswith("Tool call success\nstdout: 10\n")  # the bare last expression, printed
    assert record["correct"] and record["grounded"] and record["answer"] == "10"


def test_rstar2_call_of_another_tool_is_a_failed_call_and_the_trajectory_goes_on(rstar2):
    record = rstar2["unknown"]
    assert record["n_tool_calls"] == 2 and record["exec_statuses"] == ["error", "ok"]
    first, second = responses(record)
    assert "unknown tool 'python'" in first and "python_code_with_standard_io" in first
    assert second.startswith("Tool call success\nstdout: 42\n")
    assert record["correct"] and record["grounded"]


def test_rstar2_summary_counts_calls_and_failed_calls(rstar2):
    summary = json.loads((rstar2["out"] / "summary.json").read_text())["per_benchmark"]["presets"]
    assert summary["accuracy"]["value"] == 1.0
    assert summary["tool_calls"]["mean"] == pytest.approx((1 + 3 + 2) / 3)


ASTER_PROBLEMS = {"state": ("Compute 2^10 + 1.", "1025"), "error": ("Compute 6 times 7.", "42")}
ASTER_SCRIPT = {
    "state": [
        "Compute the power first.\n</think>\n\n" + hermes("code_interpreter", code="n = 2**10\nn"),
        "The session keeps n.\n" + hermes("code_interpreter", code="print(n + 1)"),
        "So the answer is \\boxed{1025}.",
    ],
    "error": [
        "Try it.\n</think>\n\n" + hermes("code_interpreter", code="print('partial')\nprint(1 / 0)"),
        hermes("code_interpreter", code="print(6 * 7)"),
        "\\boxed{42}",
    ],
}
"""What ASTER (Qwen3-4B-Thinking-2507: the generation prompt opens the plan) writes."""


@pytest.fixture(scope="module")
def aster(tmp_path_factory, qwen3_tokenizer_folders):
    return run_scripted(
        tmp_path_factory.mktemp("aster"),
        qwen3_tokenizer_folders["thinking"],
        "aster",
        ASTER_SCRIPT,
        ASTER_PROBLEMS,
    )


def test_aster_declares_code_interpreter_and_its_user_turn_without_a_system_prompt(aster):
    prompt = json.loads((aster["out"] / "prompts.jsonl").read_text().splitlines()[0])["text"]
    tool = json.loads(prompt.split("<tools>\n")[1].split("\n</tools>")[0])["function"]
    assert tool == {
        "name": "code_interpreter",
        "description": "A tool for executing code.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The code to execute."}},
            "required": ["code"],
        },
    }
    user = prompt.split("<|im_start|>user\n")[1].split("<|im_end|>")[0]
    assert user == "\n" + ASTER_PROBLEMS["state"][0] + (
        "\nPlease reason step by step, and put your final answer within \\boxed{}.\n"
    )
    assert "You are a math expert" not in prompt  # its evaluation data sends no system turn
    config = json.loads((aster["out"] / "config.json").read_text())
    settings = config.get("settings", config)
    assert (settings["temperature"], settings["top_p"], settings["max_tokens"]) == (1.0, 1.0, 92160)


def test_aster_keeps_state_across_calls_and_prints_a_bare_last_expression(aster):
    record = aster["state"]
    assert record["exec_statuses"] == ["ok", "ok"] and record["n_tool_calls"] == 2
    assert responses(record) == ["1024\n", "1025\n"] or responses(record) == ["1024", "1025"]
    assert record["correct"] and record["grounded"] and record["answer"] == "1025"


def test_aster_runtime_error_reads_as_its_sandbox_wrote_it(aster):
    record = aster["error"]
    assert record["exec_statuses"] == ["error", "ok"] and record["n_exec_errors"] == 1
    error = responses(record)[0]
    assert error.startswith("Runtime error occurred during execution.\n\nError details:\nTraceback")
    assert "ZeroDivisionError" in error and error.endswith("\n\nOutput before error:\npartial")
    assert record["correct"] and record["grounded"]


RETOOL_PROBLEMS = {"fresh": ("Compute 3^4 + 1.", "82")}


def code(body: str) -> str:
    return "<code>\n```python\n" + body + "\n```\n</code>"


RETOOL_SCRIPT = {
    "fresh": [
        "Compute the power.\n" + code("x = 3 ** 4\nprint(x)"),
        "Now add one.\n" + code("print(x + 1)"),
        "Each script runs alone, so compute x again.\n" + code("x = 3 ** 4\nprint(x + 1)"),
        "<answer>\n\\boxed{82}\n</answer>",
    ]
}


@pytest.fixture(scope="module")
def retool(tmp_path_factory, qwen3_tokenizer_dir):
    return run_scripted(
        tmp_path_factory.mktemp("retool"), qwen3_tokenizer_dir, "retool", RETOOL_SCRIPT, RETOOL_PROBLEMS
    )


def test_retool_user_turn_is_its_template(retool):
    prompt = json.loads((retool["out"] / "prompts.jsonl").read_text().splitlines()[0])["text"]
    user = prompt.split("<|im_start|>user\n")[1]
    assert user.startswith(
        "Solve the following problem step by step. You now have the ability to selectively"
    )
    assert (
        "*user question:*\n" + RETOOL_PROBLEMS["fresh"][0] + "\n\nRemember to place the final answer" in user
    )
    assert "<|im_start|>system" not in prompt


def test_retool_runs_each_block_as_a_fresh_script_answered_in_interpreter(retool):
    record = retool["fresh"]
    assert record["exec_statuses"] == ["ok", "error", "ok"] and record["n_exec_errors"] == 1
    outputs = re.findall(r"<interpreter>\n(.*?)\n</interpreter>", record["text"], re.DOTALL)
    assert outputs[0] == "81" and "NameError: name 'x' is not defined" in outputs[1] and outputs[2] == "82"
    assert record["text"].count("</code>") == 3 and record["finish_reason"] == "answer"
    assert record["correct"] and record["grounded"] and record["answer"] == "82"


# --- rStar2-Agent and ASTER through function calling (--backend openai --api chat) ---


class ChatStub:
    """A chat-completions server on 127.0.0.1 answering each conversation with its next scripted turn
    (reasoning, content, calls as (name, arguments)), as vLLM's hermes parser returns them."""

    def __init__(self, problems: dict[str, tuple[str, str]], turns: dict[str, list[tuple]]) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.requests: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(request)
                user = next(m["content"] for m in request["messages"] if m["role"] == "user")
                problem = next(i for i, (p, _) in problems.items() if p in user)
                turn = sum(m["role"] == "assistant" for m in request["messages"])
                reasoning, content, calls = turns[problem][turn]
                tool_calls = [
                    {"id": f"call_{turn}_{i}", "type": "function",
                     "function": {"name": name, "arguments": json.dumps(arguments)}}
                    for i, (name, arguments) in enumerate(calls)
                ]  # fmt: skip
                message = {"role": "assistant", "content": content or None, "reasoning_content": reasoning}
                body = json.dumps(
                    {
                        "id": "stub", "object": "chat.completion", "created": 0, "model": request["model"],
                        "choices": [{"index": 0, "finish_reason": "tool_calls" if calls else "stop",
                                     "message": {**message, "tool_calls": tool_calls}}],
                    }
                ).encode()  # fmt: skip
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


def run_chat(
    tmp_path: Path, tokenizer: str | Path, preset: str, problems: dict, turns: dict
) -> tuple[dict, ChatStub]:
    stub = ChatStub(problems, turns)
    out = tmp_path / "chat"
    args = [
        "--preset",
        preset,
        "--backend",
        "openai",
        "--api",
        "chat",
        "--model",
        "stub",
        "--base-url",
        stub.url,
    ]
    args += ["--tokenizer", str(tokenizer), "--benchmarks", str(write_bench(tmp_path, problems))]
    try:
        assert thinc_eval.main([*args, "--out", str(out), "--samples", "1", "--recovery-k", "0"]) == 0
    finally:
        stub.server.shutdown()
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return {r["problem_id"]: r for r in records}, stub


RSTAR2_CHAT = {
    "stdin": [
        (None, "<reason>Read the two numbers from standard input and multiply them.</reason>",
         [("execute_python_code_with_standard_io", {"code": "a, b = map(int, input().split())\nprint(a * b)", "input": "6 7"})]),
        (None, "<reason>The program printed 42.</reason>\n<answer>The product is \\boxed{42}</answer>", []),
    ],
    "fresh": [
        (None, "<reason>Set x, then double it.</reason>", [("python_code_with_standard_io", {"code": "x = 5\nprint(x)", "input": ""})]),
        (None, "", [("python_code_with_standard_io", {"code": "print(x * 2)", "input": ""})]),
        (None, "<reason>Each call runs alone: define x again.</reason>",
         [("python_code_with_standard_io", {"code": "x = 5\nx * 2", "input": ""})]),
        (None, "<answer>\\boxed{10}</answer>", []),
    ],
    "unknown": [
        (None, "<reason>Multiply.</reason>", [("python", {"code": "6 * 7"})]),
        (None, "", [("python_code_with_standard_io", {"code": "6 * 7", "input": ""})]),
        (None, "<answer>\\boxed{42}</answer>", []),
    ],
}  # fmt: skip
"""RSTAR2_SCRIPT as a function-calling server returns it."""
TIME = re.compile(r"execution time: \d+\.\d\ds")


def test_rstar2_through_function_calling_is_the_token_paths_trajectory(rstar2, tmp_path, qwen3_tokenizer_dir):
    records, stub = run_chat(tmp_path, qwen3_tokenizer_dir, "rstar2-agent", PROBLEMS, RSTAR2_CHAT)
    first = stub.requests[0]
    assert first["tools"][0]["function"]["name"] == "python_code_with_standard_io"
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["messages"][1]["content"].startswith(
        "You must put your answer inside <answer> </answer> tags"
    )
    assert first["temperature"] == 0.6 and first["max_tokens"] == 30720
    same = (
        "correct",
        "grounded",
        "answer",
        "n_tool_calls",
        "n_exec_errors",
        "exec_statuses",
        "finish_reason",
    )
    for problem in PROBLEMS:
        assert {f: records[problem][f] for f in same} == {f: rstar2[problem][f] for f in same}
        assert TIME.sub("", records[problem]["text"]) == TIME.sub("", rstar2[problem]["text"])
    answered = next(
        r
        for r in stub.requests
        if len(r["messages"]) == 4 and "standard input" in r["messages"][1]["content"]
    )
    tool = answered["messages"][3]
    assert tool["role"] == "tool" and re.fullmatch(
        r"Tool call success\nstdout: 42\n\nexecution time: \S+s", tool["content"]
    )


ASTER_CHAT = {
    "state": [
        ("Compute the power first.", "", [("code_interpreter", {"code": "n = 2**10\nn"})]),
        ("The session keeps n.", "", [("code_interpreter", {"code": "print(n + 1)"})]),
        (None, "So the answer is \\boxed{1025}.", []),
    ],
    "error": [
        ("Try it.", "", [("code_interpreter", {"code": "print('partial')\nprint(1 / 0)"})]),
        (None, "", [("code_interpreter", {"code": "print(6 * 7)"})]),
        (None, "\\boxed{42}", []),
    ],
}


def test_aster_through_function_calling_counts_calls_failures_and_answers(tmp_path, qwen3_tokenizer_dir):
    records, stub = run_chat(tmp_path, qwen3_tokenizer_dir, "aster", ASTER_PROBLEMS, ASTER_CHAT)
    first = stub.requests[0]
    assert first["tools"][0]["function"] == {
        "name": "code_interpreter",
        "description": "A tool for executing code.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The code to execute."}},
            "required": ["code"],
        },
    }
    assert [m["role"] for m in first["messages"]] == ["user"]
    assert (first["temperature"], first["top_p"]) == (1.0, 1.0)
    state, error = records["state"], records["error"]
    assert state["exec_statuses"] == ["ok", "ok"] and state["correct"] and state["grounded"]
    assert error["exec_statuses"] == ["error", "ok"] and error["n_exec_errors"] == 1
    assert error["correct"] and error["grounded"] and error["answer"] == "42"
    sent = next(
        r for r in stub.requests if len(r["messages"]) == 3 and "6 times 7" in r["messages"][0]["content"]
    )
    assert sent["messages"][2]["content"].startswith(
        "Runtime error occurred during execution.\n\nError details:\n"
    )


@pytest.mark.parametrize("name", ["rstar2-agent", "aster", "retool"])
def test_every_setting_of_a_baseline_preset_names_its_source_and_flags_still_win(name):
    from thinc_bench.eval import EvalConfig
    from thinc_bench.eval.presets import PRESETS
    from thinc_bench.prompts import tool_spec

    preset = PRESETS[name]
    described = {"dialect", "tool_name", "system_prompt"}  # the one-line `source` states these
    assert set(preset.flags()) - described <= set(preset.sources), "a setting without its source"
    assert preset.unknown and "answer_format" in preset.sources and "result_format" in preset.sources
    config = EvalConfig(model="m", backend="openai", preset=name)
    assert {k: getattr(config, k) for k in preset.flags()} == preset.flags()
    if config.dialect == "tool_call":
        assert tool_spec(config.tool_name).result_format != "plain"  # its own result format
    flags = EvalConfig(
        model="m", backend="openai", preset=name, top_p=0.5, exec_timeout_s=2.0, max_tokens=999
    )
    assert (flags.top_p, flags.exec_timeout_s, flags.max_tokens) == (0.5, 2.0, 999)  # a flag given wins
