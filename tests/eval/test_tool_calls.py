"""`--dialect tool_call` end to end: scripted Hermes/Qwen tool calls with the real Qwen3 tokenizer and
template, executed in the real sandbox and graded by the real grader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from thinc_bench.eval import __main__ as thinc_eval
from thinc_bench.sandbox.faults import FAULT_TYPES

PROBLEMS = {
    "two-calls": ("Compute 2^10 + 1.", "1025"),
    "fix": ("Compute 6 times 7.", "42"),
    "malformed": ("Compute 3 + 4.", "7"),
    "one-turn": ("Compute 3 times 4.", "12"),
}


def call(code: str, name: str = "python") -> str:
    """A call exactly as Qwen3 writes one (and as its template renders one)."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": {"code": code}}) + "\n</tool_call>"


def script(name: str = "python") -> dict[str, list[str]]:
    return {
        "two-calls": [
            "<think>\nCompute 2**10 in code, then add one.\n</think>\n\n" + call("x = 2**10\nprint(x)", name),
            call("print(x + 1)", name),
            "The answer is \\boxed{1025}.",
        ],
        "fix": [
            "<think>\nMultiply in code.\n</think>\n\n" + call("print(y)", name),
            call("y = 6 * 7\nprint(y)", name),
            "\\boxed{42}",
        ],
        "malformed": [
            "<think>\nAdd in code.\n</think>\n\n"
            '<tool_call>\n{"name": "'
            + name
            + '", "arguments": {"code": "print(3 + 4)"}\n</tool_call>\n'
            + call("print(3 + 4)", "calculator")
            + "\n"
            + '<tool_call>\n{"name": "'
            + name
            + '", "arguments": {"script": "print(3 + 4)"}}\n</tool_call>',
            call("print(3 + 4)", name),
            "\\boxed{7}",
        ],
        "one-turn": [
            "<think>\nMultiply in code.\n</think>\n\n"
            + call("a = 3\nprint(a)", name)
            + "\n"
            + call("print(a * 4)", name),
            "\\boxed{12}",
        ],
    }


def run(tmp_path: Path, tokenizer: Path, *extra: str, name: str = "python") -> dict[str, dict]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    bench = tmp_path / "tc.jsonl"
    bench.write_text(
        "".join(json.dumps({"id": i, "problem": p, "answer": a}) + "\n" for i, (p, a) in PROBLEMS.items())
    )
    turns = tmp_path / "turns.jsonl"
    turns.write_text(
        "".join(json.dumps({"problem_id": i, "turns": t}) + "\n" for i, t in script(name).items())
    )
    out = tmp_path / "run"
    args = ["--backend", "scripted", "--model", str(turns), "--tokenizer", str(tokenizer)]
    args += [
        "--benchmarks",
        str(bench),
        "--dialect",
        "tool_call",
        "--out",
        str(out),
        "--samples",
        "1",
        *extra,
    ]
    assert thinc_eval.main(args) == 0
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return {"out": out, **{(r["problem_id"], r["k"]): r for r in records}}  # type: ignore[dict-item]


@pytest.fixture(scope="module")
def clean(tmp_path_factory, qwen3_tokenizer_dir):
    return run(tmp_path_factory.mktemp("tool-calls"), qwen3_tokenizer_dir, "--recovery-k", "1")


def test_two_sequential_calls_are_correct_grounded_and_counted(clean):
    record = clean["two-calls", 0]
    assert record["correct"] and record["grounded"] and record["n_tool_calls"] == 2
    assert record["exec_statuses"] == ["ok", "ok"] and record["finish_reason"] == "answer"
    assert record["text"].count("<tool_response>\n1024\n</tool_response>") == 1
    assert "<tool_response>\n1025\n</tool_response>" in record["text"]
    assert record["style"] == "thinc" and all(record["checks"].values())


def test_the_prompt_declares_the_tool_through_the_template(clean):
    prompts = [json.loads(line) for line in (clean["out"] / "prompts.jsonl").read_text().splitlines()]
    text = prompts[0]["text"]
    declared = json.loads(text.split("<tools>\n")[1].split("\n</tools>")[0])
    assert declared["function"]["name"] == "python"
    assert declared["function"]["parameters"]["required"] == ["code"]
    assert "```python" not in text  # the tool_call system prompt teaches no markdown blocks


def test_an_erroring_call_then_a_fixed_one(clean):
    record = clean["fix", 0]
    assert record["exec_statuses"] == ["error", "ok"] and record["n_exec_errors"] == 1
    assert "NameError" in record["text"].split("<tool_response>")[1]
    assert record["correct"] and record["grounded"]


def test_malformed_calls_get_an_error_response_and_count_as_failed(clean):
    record = clean["malformed", 0]
    assert record["n_tool_calls"] == 4 and record["n_exec_errors"] == 3
    responses = [part.split("</tool_response>")[0] for part in record["text"].split("<tool_response>")[1:]]
    assert "not valid JSON" in responses[0]
    assert "unknown tool 'calculator'" in responses[1]
    assert "no string argument 'code'" in responses[2]
    assert responses[3].strip() == "7"
    assert record["correct"] and record["grounded"]


def test_several_calls_in_one_turn_run_in_order_in_one_session(clean):
    record = clean["one-turn", 0]
    assert record["exec_statuses"] == ["ok", "ok"]
    turn = record["text"].split("<|im_start|>user\n")[1]
    assert turn.count("<tool_response>") == 2 and turn.index("\n3\n") < turn.index("\n12\n")
    assert record["correct"] and record["grounded"] and all(record["checks"].values())


def test_summary_counts_tool_calls_and_failed_calls(clean):
    summary = json.loads((clean["out"] / "summary.json").read_text())["per_benchmark"]["tc"]
    assert summary["accuracy"]["value"] == 1.0
    assert summary["tool_calls"]["mean"] == (2 + 2 + 4 + 2) / 4


def test_tool_name_is_declared_and_enforced(tmp_path, qwen3_tokenizer_dir):
    records = run(tmp_path, qwen3_tokenizer_dir, "--tool-name", "jupyter_code", name="jupyter_code")
    prompt = json.loads((records["out"] / "prompts.jsonl").read_text().splitlines()[0])["text"]
    assert '"name": "jupyter_code"' in prompt and '"name": "python"' not in prompt
    assert records["two-calls", 0]["correct"] and records["two-calls", 0]["exec_statuses"] == ["ok", "ok"]
    responses = records["malformed", 0]["text"].split("<tool_response>")
    assert "unknown tool 'calculator': the only tool is 'jupyter_code'" in responses[2]


def test_recovery_injects_the_failure_as_the_tool_response(clean):
    record = clean["two-calls", 1]
    assert record["n_injected"] == 1 and record["exec_statuses"] == ["error", "error"]
    first, second = (t.split("\n</tool_response>")[0] for t in record["text"].split("<tool_response>\n")[1:3])
    # A traceback of cell 1 as a real failure reads (issue 38); the real second call is cell 2.
    assert first.startswith('Traceback (most recent call last):\n  File "<cell-1>", line ')
    assert first.splitlines()[-1].split(":")[0] in FAULT_TYPES
    assert '"<cell-2>"' in second and "NameError: name 'x' is not defined" in second
    assert not record["grounded"]  # x was never set: the boxed 1025 is in no output


def _call_message(code: str, reasoning: str | None = None) -> dict:
    message = {"role": "assistant", "content": "", "tool_calls": [_function(code)]}
    return message if reasoning is None else {**message, "reasoning_content": reasoning}


def _function(code: str) -> dict:
    return {"type": "function", "function": {"name": "python", "arguments": {"code": code}}}


HISTORIES = {
    "two-calls": [
        _call_message("x = 2**10\nprint(x)", "Compute 2**10 in code, then add one."),
        {"role": "tool", "content": "1024"},
        _call_message("print(x + 1)"),
        {"role": "tool", "content": "1025"},
        {"role": "assistant", "content": "The answer is \\boxed{1025}."},
    ],
    "one-turn": [
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "Multiply in code.",
            "tool_calls": [_function("a = 3\nprint(a)"), _function("print(a * 4)")],
        },
        {"role": "tool", "content": "3"},
        {"role": "tool", "content": "12"},
        {"role": "assistant", "content": "\\boxed{12}"},
    ],
}
"""The conversations of two scripted trajectories as chat messages, written by hand."""


def _rollout_ids(
    tmp_path: Path, tokenizer_dir: Path, problem_id: str, turns: list[str], kwargs: dict
) -> list[int]:
    result = _rollout(tmp_path, tokenizer_dir, problem_id, turns, kwargs)
    return result.prompt_ids + result.completion_ids


def _rollout(
    tmp_path: Path,
    tokenizer_dir: Path,
    problem_id: str,
    turns: list[str],
    kwargs: dict,
    limits: tuple[int, int] = (4096, 8),
    expect: str = "answer",
):
    import asyncio

    from thinc_bench.backends import SamplingParams
    from thinc_bench.backends.scripted import ScriptedGenerator
    from thinc_bench.eval.rollout import RolloutLimits, rollout
    from thinc_bench.prompts import build_messages, load_system_prompt, python_tool, render_prompt_ids
    from thinc_bench.sandbox import Sandbox, SandboxConfig

    path = tmp_path / f"{problem_id}.jsonl"
    path.write_text(json.dumps({"problem_id": problem_id, "turns": turns}) + "\n")
    generator = ScriptedGenerator(path, tokenizer=str(tokenizer_dir))
    messages = build_messages(PROBLEMS[problem_id][0], load_system_prompt("tool_call"))
    prompt = render_prompt_ids(generator.tokenizer, messages, kwargs, [python_tool()])

    async def go():
        with Sandbox(SandboxConfig()) as sandbox, sandbox.session() as session:
            result = await rollout(
                generator,
                session,
                prompt,
                SamplingParams(max_tokens=2048),
                limits=RolloutLimits(*limits),
                dialect="tool_call",
                request_id=f"{problem_id}/0",
                template_kwargs=kwargs,
            )
        assert result.stop_reason == expect
        if expect != "answer":
            return result
        assert [e.status for e in result.executions] == ["ok", "ok"]
        masked = generator.tokenizer.decode(
            [i for i, m in zip(result.completion_ids, result.env_mask, strict=True) if not m]
        )
        assert "<tool_response>" in masked and "<tool_call>" not in masked  # the template's turns are mask 0
        return result

    return asyncio.run(go())


def _template_ids(tokenizer, problem_id: str, kwargs: dict) -> list[int]:
    from thinc_bench.prompts import build_messages, load_system_prompt, python_tool

    question = PROBLEMS["two-calls" if problem_id == "plain" else problem_id][0]
    messages = build_messages(question, load_system_prompt("tool_call")) + HISTORIES[problem_id]
    encoded = tokenizer.apply_chat_template(messages, tools=[python_tool()], tokenize=True, **kwargs)
    return list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)


def _without(ids: list[int], part: list[int], at: list[int]) -> list[int]:
    """`ids` less `part` wherever it follows `at`."""
    out, i = [], 0
    while i < len(ids):
        if ids[i : i + len(at)] == at:
            out += at
            i += len(at)
            i += len(part) if ids[i : i + len(part)] == part else 0
        else:
            out.append(ids[i])
            i += 1
    return out


@pytest.mark.parametrize("problem_id", ["two-calls", "one-turn"])
def test_token_ids_are_the_templates_rendering_but_the_documented_differences(
    tmp_path, qwen3_tokenizer_dir, problem_id
):
    """docs/tool_calls.md: (1) the template gives the last assistant turn an empty plan it never had;
    (2) it ends that turn with a line break after the EOS, where generation stops."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(qwen3_tokenizer_dir)
    ours = _rollout_ids(tmp_path, qwen3_tokenizer_dir, problem_id, script()[problem_id], {})
    theirs = _template_ids(tokenizer, problem_id, {})
    assert theirs[-2:] == tokenizer.encode("<|im_end|>\n")  # (2)
    header = tokenizer.encode("<|im_start|>assistant\n")
    last = max(i for i in range(len(theirs)) if theirs[i : i + len(header)] == header) + len(header)
    empty_plan = tokenizer.encode("<think>\n\n</think>\n\n")
    assert theirs[last : last + len(empty_plan)] == empty_plan  # (1)
    expected = theirs[:last] + theirs[last + len(empty_plan) : -1]
    assert ours == expected


def test_without_thinking_each_generation_prompt_writes_an_empty_plan_the_history_drops(
    tmp_path, qwen3_tokenizer_dir
):
    """docs/tool_calls.md (3): with enable_thinking=False every generation prompt opens and closes an
    empty plan (harness-written); the template's history keeps it only in the last turn."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(qwen3_tokenizer_dir)
    kwargs = {"enable_thinking": False}
    turns = [call("x = 2**10\nprint(x)"), call("print(x + 1)"), "The answer is \\boxed{1025}."]
    ours = _rollout_ids(tmp_path, qwen3_tokenizer_dir, "two-calls", turns, kwargs)
    history = [{k: v for k, v in m.items() if k != "reasoning_content"} for m in HISTORIES["two-calls"]]
    HISTORIES["plain"] = history
    theirs = _template_ids(tokenizer, "plain", kwargs)
    header = tokenizer.encode("<|im_start|>assistant\n")
    empty_plan = tokenizer.encode("<think>\n\n</think>\n\n")
    opened = header + empty_plan
    count = lambda ids: sum(ids[i : i + len(opened)] == opened for i in range(len(ids)))  # noqa: E731
    assert count(ours) == 3  # the prompt's and both tool turns' generation prompts
    assert count(theirs) == 1  # the last turn's only
    assert _without(ours, empty_plan, header) == _without(theirs[:-1], empty_plan, header)


def test_failure_mode_measures_and_the_viewer_read_tool_calls(clean):
    from thinc_bench.report.runs import load_run
    from thinc_bench.report.viewer import viewer_samples

    record = clean["two-calls", 0]
    assert record["posthoc"] is False and record["nl_literals"] == []
    assert 0 < record["nl_ratio"] < 0.3  # the answer sentence only: the plan and the calls are apart
    samples = viewer_samples([load_run(clean["out"])], {})
    viewed = next(s for s in samples if s["problem_id"] == "malformed" and s["k"] == 0)
    calls = [g for g in viewed["segments"] if g["kind"] == "code"]
    assert [g["status"] for g in calls] == ["error", "error", "error", "ok"]
    assert calls[1]["tool"] == "calculator" and calls[3]["text"] == "print(3 + 4)"
    assert calls[0]["text"].startswith('{"name"')  # a malformed call shows its JSON
    responses = [g["text"] for g in viewed["segments"] if g["kind"] == "output"]
    assert responses[3] == "7" and all(
        g.get("tool_response") for g in viewed["segments"] if g["kind"] == "output"
    )


# --- the same trajectories through function calling (--backend openai --api chat) ---

STUB_TURNS = {
    "two-calls": [
        ("Compute 2**10 in code, then add one.", "", ["x = 2**10\nprint(x)"]),
        ("", "", ["print(x + 1)"]),
        ("", "The answer is \\boxed{1025}.", []),
    ],
    "fix": [
        ("Multiply in code.", "", ["print(y)"]),
        ("", "", ["y = 6 * 7\nprint(y)"]),
        ("", "\\boxed{42}", []),
    ],
    "one-turn": [("Multiply in code.", "", ["a = 3\nprint(a)", "print(a * 4)"]), ("", "\\boxed{12}", [])],
    "malformed": [("", "\\boxed{7}", [])],
}
"""The scripted trajectories as a function-calling server returns them: reasoning, content, calls."""


class ChatStub:
    """A chat-completions server on 127.0.0.1 that answers each conversation with its next turn."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.requests: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(request)
                question = next(m["content"] for m in request["messages"] if m["role"] == "user")
                problem = next(i for i, (p, _) in PROBLEMS.items() if p == question)
                turn = sum(m["role"] == "assistant" for m in request["messages"])
                reasoning, content, codes = STUB_TURNS[problem][turn]
                calls = [
                    {"id": f"call_{turn}_{i}", "type": "function",
                     "function": {"name": "python", "arguments": json.dumps({"code": code})}}
                    for i, code in enumerate(codes)
                ]  # fmt: skip
                message = {
                    "role": "assistant",
                    "content": content or None,
                    "reasoning_content": reasoning or None,
                }
                body = json.dumps(
                    {
                        "id": "stub", "object": "chat.completion", "created": 0, "model": request["model"],
                        "choices": [{"index": 0, "finish_reason": "tool_calls" if calls else "stop",
                                     "message": {**message, "tool_calls": calls}}],
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


@pytest.mark.parametrize("servers", ["one", "two replicas and one down"])
def test_function_calling_gives_the_scripted_trajectories_and_metrics(
    clean, tmp_path, qwen3_tokenizer_dir, servers
):
    stub = ChatStub()
    replica = ChatStub()
    urls = stub.url
    if servers != "one":  # a server refusing connections first, then the replicas, as a repeated flag
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            closed = sock.getsockname()[1]
        urls = f"http://127.0.0.1:{closed}/v1,{stub.url}"
    try:
        bench = tmp_path / "tc.jsonl"
        bench.write_text(
            "".join(json.dumps({"id": i, "problem": p, "answer": a}) + "\n" for i, (p, a) in PROBLEMS.items())
        )
        out = tmp_path / "run"
        args = ["--backend", "openai", "--api", "chat", "--model", "stub-model", "--base-url", urls]
        if servers != "one":
            args += ["--base-url", replica.url]
        args += [
            "--tokenizer",
            str(qwen3_tokenizer_dir),
            "--benchmarks",
            str(bench),
            "--dialect",
            "tool_call",
        ]
        assert thinc_eval.main([*args, "--out", str(out), "--samples", "1", "--recovery-k", "0"]) == 0
    finally:
        stub.server.shutdown()
        replica.server.shutdown()
    if servers != "one":  # the load spread over both replicas; the down server cost no sample
        assert stub.requests and replica.requests
        stub.requests += replica.requests
    records = {r["problem_id"]: r for r in map(json.loads, (out / "samples.jsonl").read_text().splitlines())}
    same = ("text", "correct", "grounded", "n_tool_calls", "exec_statuses", "posthoc", "nl_ratio", "checks")
    for problem in ("two-calls", "fix", "one-turn"):
        assert {f: records[problem][f] for f in same} == {f: clean[problem, 0][f] for f in same}
        assert records[problem]["response_tokens"] == clean[problem, 0]["response_tokens"]
    question = PROBLEMS["two-calls"][0]
    last = next(
        r for r in stub.requests if len(r["messages"]) == 6 and r["messages"][1]["content"] == question
    )
    assert last["tools"][0]["function"]["name"] == "python"
    assert [m["role"] for m in last["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert last["messages"][3] == {
        "role": "tool",
        "tool_call_id": "call_0_0",
        "name": "python",
        "content": "1024",
    }
    assert last["messages"][2]["tool_calls"][0]["function"]["arguments"] == json.dumps(
        {"code": "x = 2**10\nprint(x)"}
    )


@pytest.mark.parametrize(
    ("preset", "dialect", "tool_name", "system_prompt", "exec_on"),
    [
        ("rstar2-agent", "tool_call", "python_code_with_standard_io", "rstar2-agent", "output_open"),
        ("aster", "tool_call", "code_interpreter", "none", "output_open"),
        ("retool", "xml", "python", "none", "code_close"),
        ("thinc", "markdown", "python", "thinc", "output_open"),
    ],
)
def test_presets_set_the_baselines_format_and_flags_win(preset, dialect, tool_name, system_prompt, exec_on):
    from thinc_bench.eval import EvalConfig
    from thinc_bench.eval.presets import PRESETS

    config = EvalConfig(model="m", backend="openai", preset=preset)
    assert (config.dialect, config.tool_name, config.system_prompt, config.exec_on) == (
        dialect,
        tool_name,
        system_prompt,
        exec_on,
    )
    assert config.settings()["preset"] == preset and PRESETS[preset].source
    assert preset == "thinc" or PRESETS[preset].unknown  # every baseline says what is not known
    assert EvalConfig(model="m", backend="openai", preset=preset, max_tool_calls=7).max_tool_calls == 7
    if dialect == "tool_call":
        assert EvalConfig(model="m", backend="openai", preset=preset, tool_name="py").tool_name == "py"


def test_unknown_preset_is_refused_naming_the_choices():
    from thinc_bench.errors import ConfigError
    from thinc_bench.eval import EvalConfig

    with pytest.raises(ConfigError, match="--preset rstar2: unknown preset; choose one of .*rstar2-agent"):
        EvalConfig(model="m", preset="rstar2")


def test_sft_example_of_a_tool_call_trajectory_is_the_rollouts_ids_and_mask(tmp_path, qwen3_tokenizer_dir):
    """build_sft's masks reproduce the rollout's own: tool turns 0, the model's end of turn 1."""
    from transformers import AutoTokenizer

    from thinc_bench import trajectory
    from thinc_bench.build_sft.masks import tokenize_example
    from thinc_bench.prompts import build_messages, load_system_prompt, python_tool

    tokenizer = AutoTokenizer.from_pretrained(qwen3_tokenizer_dir)
    result = _rollout(tmp_path, qwen3_tokenizer_dir, "one-turn", script()["one-turn"], {})
    messages = build_messages(PROBLEMS["one-turn"][0], load_system_prompt("tool_call"))
    example = tokenize_example(
        tokenizer, messages, trajectory.parse(result.text, "tool_call"), tools=[python_tool()]
    )
    assert example.input_ids == result.prompt_ids + result.completion_ids
    assert example.assistant_masks == [0] * len(result.prompt_ids) + result.env_mask
    end_of_call_turn = result.completion_ids.index(tokenizer.eos_token_id)
    assert result.env_mask[end_of_call_turn] == 1 and result.env_mask[end_of_call_turn + 1] == 0


def test_results_that_overrun_the_budget_are_cut_in_call_order_and_the_turn_stays_closed(
    tmp_path, qwen3_tokenizer_dir
):
    from thinc_bench import trajectory
    from thinc_bench.eval.rollout import OUTPUT_CUT_NOTE

    turns = [call("print('a' * 3000)") + "\n" + call("print('short')"), "\\boxed{1}"]
    budget = 300
    result = _rollout(tmp_path, qwen3_tokenizer_dir, "one-turn", turns, {}, (budget, 8), "max_tokens")
    assert result.output_cut and len(result.completion_ids) <= budget
    outputs = trajectory.parse(result.text, "tool_call").outputs
    assert len(outputs) == 2 and outputs[0].startswith("aaa") and outputs[0].endswith(OUTPUT_CUT_NOTE.strip())
    assert outputs[1] == OUTPUT_CUT_NOTE.strip()  # a later result after the cut is the note alone
    assert result.text.endswith("<|im_start|>assistant\n")


def test_a_turn_whose_calls_pass_the_tool_call_limit_ends_the_trajectory(tmp_path, qwen3_tokenizer_dir):
    turns = [call("print(1)") + "\n" + call("print(2)") + "\n" + call("print(3)"), "\\boxed{1}"]
    result = _rollout(tmp_path, qwen3_tokenizer_dir, "one-turn", turns, {}, (4096, 2), "max_tool_calls")
    assert result.executions == [] and "<tool_response>" not in result.text
