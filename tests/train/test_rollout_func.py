"""TRL's rollout function over the real rollout engine and sandbox: token ids, env_mask, reward columns."""

from __future__ import annotations

import http.server
import json
import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from thinc_bench.backends import load_generator
from thinc_bench.backends.base import Generator
from thinc_bench.errors import BackendUnavailable
from thinc_bench.eval.rollout import RolloutLimits
from thinc_bench.prompts import load_system_prompt
from thinc_bench.sandbox import Sandbox
from thinc_bench.train.faults import TRAINING_FALLBACK, TRAINING_FAULT_KINDS, fault_kind
from thinc_bench.train.rewards import exact_match_reward
from thinc_bench.train.rollout_func import ThincRollout, sampling_seed, served_model, server_url

# An interpreter block as the harness appends it after the model's "```output" (trajectory.Dialect).
INTERPRETER = re.compile(r"```output(\n.*?\n```\n)", re.DOTALL)


def interpreter_token_flags(tokenizer, ids: list[int]) -> list[bool]:
    """Independent oracle: a token is the interpreter's when its first character lies in an output body."""
    text = tokenizer.decode(ids)
    spans = [m.span(1) for m in INTERPRETER.finditer(text)]
    starts = [len(tokenizer.decode(ids[:i])) for i in range(len(ids))]
    return [any(a <= s < b for a, b in spans) for s in starts]


@pytest.fixture
def rows(two_problem_benchmark) -> list[dict[str, str]]:
    return [json.loads(line) for line in two_problem_benchmark.read_text().splitlines()]


def test_rollout_func_returns_one_masked_trajectory_per_prompt(rows, scripted_turns) -> None:
    generator = load_generator("scripted", str(scripted_turns))
    prompts = [r["problem"] for r in rows for _ in range(2)]  # TRL repeats each prompt num_generations times
    with Sandbox() as sandbox:
        rollout = _rows_rollout(sandbox, rows, generator, answers=False)
        out = rollout(prompts, None)
    assert len(out["completion_ids"]) == 4 and out["logprobs"] is None
    assert out["n_tool_calls"] == [1, 1, 2, 2]
    for ids, mask in zip(out["completion_ids"], out["env_mask"], strict=True):
        oracle = interpreter_token_flags(generator.tokenizer, ids)
        assert sum(oracle) > 0
        assert mask == [0 if flag else 1 for flag in oracle]
    answers = [r["answer"] for r in rows for _ in range(2)]
    assert (
        exact_match_reward(out["completion_ids"], answers, out["thinc_text"], out["stop_reason"]) == [1.0] * 4
    )


def test_tool_call_limit_of_the_stage_ends_the_trajectory(rows, scripted_turns) -> None:
    generator = load_generator("scripted", str(scripted_turns))
    with Sandbox() as sandbox:
        rollout = ThincRollout(
            sandbox,
            RolloutLimits(max_tokens=2048, max_tool_calls=1),
            load_system_prompt("thinc"),
            generator=generator,
            problem_ids={rows[1]["problem"]: rows[1]["id"]},
        )
        out = rollout([rows[1]["problem"]], None)
    assert out["stop_reason"] == ["max_tool_calls"] and out["n_tool_calls"] == [1]


@pytest.fixture
def models_server() -> Iterator[str]:
    """A real HTTP server answering `/v1/models` the way `vllm serve runs/sft` does."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            body = json.dumps({"object": "list", "data": [{"id": "runs/sft", "object": "model"}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_server_mode_finds_the_served_model_name(models_server) -> None:
    from trl import GRPOConfig

    args = GRPOConfig(output_dir="unused", use_cpu=True, bf16=False, vllm_server_base_url=models_server + "/")
    assert server_url(args) == models_server
    assert served_model(server_url(args)) == "runs/sft"
    default = GRPOConfig(output_dir="unused", use_cpu=True, bf16=False)
    assert server_url(default) == "http://0.0.0.0:8000"


def test_unreachable_server_is_one_clear_error() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(BackendUnavailable, match=rf"127.0.0.1:{port}/v1/models.*trl vllm-serve"):
        served_model(f"http://127.0.0.1:{port}")


def test_a_backend_down_from_the_first_turn_gives_an_unscored_placeholder_not_an_empty_completion(
    rows, scripted_turns
) -> None:
    import asyncio

    generator = load_generator("scripted", str(scripted_turns))
    asyncio.run(generator.aclose())  # a closed backend raises BackendUnavailable on every request
    with Sandbox() as sandbox:
        rollout = _rows_rollout(sandbox, rows, generator, answers=False)
        out = rollout([rows[0]["problem"]] * 2, None)
    eos = generator.tokenizer.eos_token_id
    assert out["completion_ids"] == [[eos], [eos]]  # TRL reads every completion's last token
    assert out["env_mask"] == [[0], [0]]  # never trained on
    assert out["stop_reason"] == ["infra_error", "infra_error"]
    assert exact_match_reward(out["completion_ids"], ["5", "5"], out["thinc_text"], out["stop_reason"]) == [
        None,
        None,
    ]


def _rows_rollout(
    sandbox: Sandbox, rows, generator: Generator, *, answers: bool = True, **options: Any
) -> ThincRollout:
    """The rollout most tests here drive: the rows' problems (and answers) under the ThinC prompt, at
    2,048 tokens and 4 tool calls."""
    if answers:
        options["answers"] = {r["problem"]: r["answer"] for r in rows}
    return ThincRollout(
        sandbox,
        RolloutLimits(max_tokens=2048, max_tool_calls=4),
        load_system_prompt("thinc"),
        generator=generator,
        problem_ids={r["problem"]: r["id"] for r in rows},
        **options,
    )


class _DownOnTurn(Generator):
    """Fault injection around a real generator: one trajectory's backend fails on its second turn."""

    def __init__(
        self, inner: Generator, request_id: str, error: type[Exception] = BackendUnavailable
    ) -> None:
        self._inner, self._down, self._calls, self._error = inner, request_id, 0, error

    @property
    def tokenizer(self):  # noqa: ANN201
        return self._inner.tokenizer

    async def generate(self, prompt_ids, params, *, request_id=None):  # noqa: ANN001, ANN201
        if request_id == self._down:
            self._calls += 1
            if self._calls == 2:
                raise self._error(f"connection reset for {request_id}")
        return await self._inner.generate(prompt_ids, params, request_id=request_id)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def describe(self) -> dict:
        return self._inner.describe()


def test_a_row_that_failed_mid_way_leaves_the_loss_and_its_denominator(rows, scripted_turns) -> None:
    scripted = load_generator("scripted", str(scripted_turns))
    # tiny-2's script has two code blocks: the second copy's backend fails after the first has run.
    generator = _DownOnTurn(scripted, f"{rows[1]['id']}/1-3")
    prompts = [r["problem"] for r in rows for _ in range(2)]
    with Sandbox() as sandbox:
        rollout = _rows_rollout(sandbox, rows, generator)
        out = rollout(prompts, None)
    assert out["stop_reason"] == ["answer", "answer", "answer", "infra_error"]
    assert out["grade_status"] == ["correct", "correct", "correct", "infra_error"]
    failed_ids, failed_mask = out["completion_ids"][3], out["env_mask"][3]
    assert len(failed_ids) > 10 and out["n_tool_calls"][3] == 1  # a real partial trajectory, code run
    assert failed_mask == [0] * len(failed_ids)  # not one of its tokens in the loss
    for ids, mask in zip(out["completion_ids"][:3], out["env_mask"][:3], strict=True):
        assert mask == [0 if flag else 1 for flag in interpreter_token_flags(scripted.tokenizer, ids)]
    # TRL's DAPO denominator is the sum of env_mask (x completion mask): the scored rows' model tokens.
    model_tokens = [
        sum(not f for f in interpreter_token_flags(scripted.tokenizer, ids)) for ids in out["completion_ids"]
    ]
    assert sum(map(sum, out["env_mask"])) == sum(model_tokens[:3])
    answers = [r["answer"] for r in rows for _ in range(2)]
    logged: dict[str, float] = {}
    rewards = exact_match_reward(
        out["completion_ids"],
        answers,
        out["thinc_text"],
        out["stop_reason"],
        grade_status=out["grade_status"],
        log_metric=logged.__setitem__,
        n_tool_calls=out["n_tool_calls"],
        n_exec_errors=out["n_exec_errors"],
    )
    assert rewards == [1.0, 1.0, 1.0, None]
    assert logged["unscored_frac"] == 0.25 and logged["rollout/tool_calls"] == pytest.approx(4 / 3)


def test_more_trajectories_than_sessions_and_worker_threads_all_finish_right(
    rows, scripted_turns, monkeypatch
) -> None:
    """A rank's rollouts outnumber the pool's sessions and the loop's default worker threads: every
    trajectory still runs in its own session (tiny-2's second block reads the first block's `x`) and
    ends right. Before the gate, opens waiting for a slot filled the default executor and the closes
    that would free a slot queued behind them until the pool's wait ran out."""
    import os

    import thinc_bench.sandbox.pool as pool
    from thinc_bench.sandbox import SandboxConfig

    monkeypatch.setattr(pool, "POOL_WAIT_S", 10.0)  # a hang fails in seconds, not the pool's 600 s
    threads = min(32, (os.cpu_count() or 1) + 4)  # asyncio's default executor
    n = threads + 5
    prompts = [rows[i % 2]["problem"] for i in range(n)]
    with Sandbox(SandboxConfig(max_sessions=2, warm_sessions=1)) as sandbox:
        rollout = _rows_rollout(
            sandbox,
            rows,
            load_generator("scripted", str(scripted_turns)),
            concurrency=64,  # asks for more than the pool holds: capped at its 2 sessions
        )
        assert rollout.in_flight() == 2
        out = rollout(prompts, None)
        assert sandbox.stats.runs == sum(1 if i % 2 == 0 else 2 for i in range(n))
    assert out["grade_status"] == ["correct"] * n and out["stop_reason"] == ["answer"] * n
    assert out["n_exec_errors"] == [0] * n
    for i, text in enumerate(out["thinc_text"]):
        outputs = re.findall(r"```output\n(.*?)\n```", text, re.DOTALL)
        assert outputs == (["5"] if i % 2 == 0 else ["5/6", "0.8333333333333334"]), (i, text)


def test_without_gold_answers_the_rollout_grades_nothing(rows, scripted_turns) -> None:
    generator = load_generator("scripted", str(scripted_turns))
    with Sandbox() as sandbox:
        rollout = ThincRollout(
            sandbox,
            RolloutLimits(max_tokens=2048, max_tool_calls=4),
            load_system_prompt("thinc"),
            generator=generator,
            problem_ids={rows[0]["problem"]: rows[0]["id"]},
        )
        out = rollout([rows[0]["problem"]], None)
    assert "grade_status" not in out and sum(out["env_mask"][0]) > 0


def test_sampling_seeds_differ_per_step_and_rank_and_survive_a_restart() -> None:
    from types import SimpleNamespace

    def trainer(step: int, rank: int) -> SimpleNamespace:
        args = SimpleNamespace(seed=42, world_size=4, process_index=rank)
        return SimpleNamespace(args=args, state=SimpleNamespace(global_step=step))

    seeds = {
        sampling_seed(trainer(step, rank), call)
        for step in range(50)
        for rank in range(4)
        for call in range(3)
    }
    assert len(seeds) == 50 * 4 * 3
    # A resumed run's rollout has made no calls yet, but numbers its calls in a step as the first run did.
    used, fresh = (ThincRollout(None, RolloutLimits(), "") for _ in range(2))  # type: ignore[arg-type]
    for step in range(7):
        used._call_in_step(trainer(step, 0))
    assert [used._call_in_step(trainer(7, 0)) for _ in range(2)] == [0, 1]
    assert [fresh._call_in_step(trainer(7, 0)) for _ in range(2)] == [0, 1]


def test_longest_prompt_is_the_longest_rendered_prompt(smollm2_tokenizer) -> None:
    from thinc_bench.prompts import build_messages
    from thinc_bench.train.rollout_func import max_prompt_tokens

    system = load_system_prompt("thinc")
    problems = [f"What is {i} + {i}?" for i in range(40)] + ["Compute " + "x * " * 60 + "x.", "Hi"]
    rendered = [
        len(
            smollm2_tokenizer.apply_chat_template(build_messages(p, system), add_generation_prompt=True)[
                "input_ids"
            ]
        )
        for p in problems
    ]
    assert max_prompt_tokens(smollm2_tokenizer, problems, system) == max(rendered) > rendered[0] + 100
    assert max_prompt_tokens(smollm2_tokenizer, [], system) == 0


def test_longest_prompt_counts_the_declared_tool(qwen3_tokenizer_dir) -> None:
    """vLLM's context is sized from this: in the tool_call dialect the template's <tools> block is
    part of every prompt."""
    from transformers import AutoTokenizer

    from thinc_bench.prompts import build_messages, python_tool
    from thinc_bench.train.rollout_func import max_prompt_tokens

    tokenizer = AutoTokenizer.from_pretrained(qwen3_tokenizer_dir)
    system = load_system_prompt("tool_call")
    problems = ["What is 2 + 2?", "Find the sum of all primes below " + "ten thousand and " * 20 + "one."]
    tools = [python_tool("jupyter_code")]
    with_tool = max_prompt_tokens(tokenizer, problems, system, tools)
    rendered = tokenizer.apply_chat_template(
        build_messages(problems[1], system), tools=tools, add_generation_prompt=True, tokenize=False
    )
    assert "jupyter_code" in rendered
    assert with_tool == len(tokenizer(rendered, add_special_tokens=False)["input_ids"])
    assert with_tool > max_prompt_tokens(tokenizer, problems, system) + 20


def test_tool_call_trajectories_mask_every_tool_turn(tmp_path, qwen3_tokenizer_dir) -> None:
    """GRPO rollouts in the tool_call dialect: the tool is declared in the prompt, the template's tool
    turns are env_mask 0 and the model's calls and end-of-turn tokens 1."""
    call = '<tool_call>\n{"name": "python", "arguments": {"code": "print(2 + 3)"}}\n</tool_call>'
    script = tmp_path / "turns.jsonl"
    script.write_text(json.dumps({"problem_id": "p", "turns": [call, "\\boxed{5}"]}) + "\n")
    generator = load_generator("scripted", str(script), tokenizer=str(qwen3_tokenizer_dir))
    with Sandbox() as sandbox:
        rollout = ThincRollout(
            sandbox,
            RolloutLimits(max_tokens=512, max_tool_calls=4),
            load_system_prompt("tool_call"),
            dialect="tool_call",
            generator=generator,
            problem_ids={"Compute 2 + 3.": "p"},
        )
        out = rollout(["Compute 2 + 3."], None)
    ids, mask = out["completion_ids"][0], out["env_mask"][0]
    tokenizer = generator.tokenizer
    assert out["n_tool_calls"] == [1]
    harness = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if not m])
    model = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
    assert (
        harness
        == "\n<|im_start|>user\n<tool_response>\n5\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    assert model == call + "<|im_end|>\\boxed{5}<|im_end|>"
    assert exact_match_reward(out["completion_ids"], ["5"], out["thinc_text"], out["stop_reason"]) == [1.0]


def _file_script(tmp_path, marker: str):
    """Two problems, one script each: block 1 writes a file (and prints 6), block 2 says whether the
    file exists, then the answer 6. The file name is fresh per test run, so only block 1 can create it."""
    first = f"```python\nopen('{marker}.txt', 'w').write('ran')\nprint(6)\n```\n```output"
    second = f"```python\nimport os\nprint(os.path.exists('{marker}.txt'))\n```\n```output"
    script = tmp_path / "turns.jsonl"
    lines = [
        {
            "problem_id": pid,
            "turns": ["<think>\nWrite a file, then check it.\n</think>\n" + first, second, "\\boxed{6}"],
        }
        for pid in ("right", "wrong")
    ]
    script.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return script


def test_injected_groups_fail_their_first_executions_unrun_masked_and_are_rewarded_on_the_answer(
    tmp_path,
) -> None:
    import uuid

    from thinc_bench.train.injection import FailureInjection

    generator = load_generator("scripted", str(_file_script(tmp_path, f"ran-{uuid.uuid4().hex}")))
    right, wrong = "Write a file and answer 6.", "Write a file and answer 7."
    # A seed at which, at step 0, the problem answered right is faulted and the other one is not.
    seed = next(
        s
        for s in range(100)
        if (f := FailureInjection(0.5, seed=s)).failures(0, right) and not f.failures(0, wrong)
    )
    log = tmp_path / "drawn.jsonl"
    with Sandbox() as sandbox:
        rollout = ThincRollout(
            sandbox,
            RolloutLimits(max_tokens=2048, max_tool_calls=4),
            load_system_prompt("thinc"),
            generator=generator,
            problem_ids={right: "right", wrong: "wrong"},
            answers={right: "6", wrong: "7"},
            drawn_log=log,
            injection=FailureInjection(0.5, (1,), seed=seed),
        )
        out = rollout([right, right, wrong, wrong], None)  # two groups of num_generations=2
    # Whole groups: both copies of the faulted prompt, neither copy of the other.
    assert out["inject_k"] == [1, 1, 0, 0] and out["n_injected"] == [1, 1, 0, 0]
    assert json.loads(log.read_text())["injected"] == [1, 1, 0, 0]
    outputs = [INTERPRETER.findall(text) for text in out["thinc_text"]]
    # The faulted copies' first block did not run (no file), its output is the injected failure (a
    # traceback of cell 1, the same for the same block); their second block ran for real. The
    # clean copies ran both.
    assert outputs[0] == outputs[1] and outputs[0][1] == "\nFalse\n```\n"
    assert outputs[0][0].startswith('\nTraceback (most recent call last):\n  File "<cell-1>", line ')
    fault = outputs[0][0].strip("\n`")
    assert outputs[2] == outputs[3] == ["\n6\n```\n", "\nTrue\n```\n"]
    assert out["n_tool_calls"] == [2, 2, 2, 2] and out["n_exec_errors"] == [1, 1, 0, 0]
    for ids, mask in zip(out["completion_ids"], out["env_mask"], strict=True):
        assert mask == [0 if flag else 1 for flag in interpreter_token_flags(generator.tokenizer, ids)]
    harness = generator.tokenizer.decode(
        [t for t, m in zip(out["completion_ids"][0], out["env_mask"][0], strict=True) if not m]
    )
    assert fault in harness  # the injected failure is interpreter text: never trained on
    # The injected failure is one of training's kinds, never one Recovery@k injects.
    assert fault_kind(fault) in TRAINING_FAULT_KINDS + (TRAINING_FALLBACK,)
    # The faulted group answered 6 right, but its 6 was printed only by the block that failed (the
    # second printed False): the answer is not grounded after the failure, so no reward. The clean
    # group answered wrong (its gold is 7).
    logged: dict[str, float] = {}
    columns = {
        k: v for k, v in out.items() if k not in ("completion_ids", "prompt_ids", "logprobs", "env_mask")
    }
    rewards = exact_match_reward(
        out["completion_ids"], ["6", "6", "7", "7"], log_metric=logged.__setitem__, **columns
    )
    assert out["inject_recovered"] == [False, False, True, True]
    assert rewards == [0.0, 0.0, 0.0, 0.0]
    assert logged["rollout/injected_frac"] == 0.5 and logged["rollout/recovered"] == 0.0
    assert (logged["rollout/reward_injected"], logged["rollout/reward_clean"]) == (0.0, 0.0)
    assert logged["rollout/injected_failures"] == 1.0


def test_an_injected_rollout_that_recomputes_its_answer_after_the_failure_is_paid(tmp_path) -> None:
    from thinc_bench.train.injection import FailureInjection

    problem = "Compute 2 * 3."
    script = tmp_path / "turns.jsonl"
    block = "```python\nx = 2 * 3\nprint(x)\n```\n```output"
    script.write_text(json.dumps({"problem_id": "six", "turns": [block, block, "\\boxed{6}"]}) + "\n")
    generator = load_generator("scripted", str(script))
    with Sandbox() as sandbox:
        rollout = ThincRollout(
            sandbox,
            RolloutLimits(max_tokens=2048, max_tool_calls=4),
            "Answer in \\boxed{}.",
            generator=generator,
            problem_ids={problem: "six"},
            answers={problem: "6"},
            injection=FailureInjection(1.0, (1,)),
        )
        out = rollout([problem], None)
    first, second = INTERPRETER.findall(out["thinc_text"][0])
    assert (
        fault_kind(first.strip("\n`")) in TRAINING_FAULT_KINDS + (TRAINING_FALLBACK,)
        and second == "\n6\n```\n"
    )
    columns = {
        k: v for k, v in out.items() if k not in ("completion_ids", "prompt_ids", "logprobs", "env_mask")
    }
    assert out["inject_recovered"] == [True]
    assert exact_match_reward(out["completion_ids"], ["6"], **columns) == [1.0]


def test_k_failures_fail_the_first_k_executions_and_injection_off_adds_no_column(
    tmp_path, scripted_turns
) -> None:
    import uuid

    from thinc_bench.train.injection import FailureInjection

    generator = load_generator("scripted", str(_file_script(tmp_path, f"ran-{uuid.uuid4().hex}")))
    with Sandbox() as sandbox:
        rollout = ThincRollout(
            sandbox,
            RolloutLimits(max_tokens=2048, max_tool_calls=4),
            load_system_prompt("thinc"),
            generator=generator,
            problem_ids={"Answer 6.": "right"},
            injection=FailureInjection(1.0, (3,)),
        )
        out = rollout(["Answer 6."], None)
        rollout.injection = FailureInjection()  # what the curriculum callback sets for a stage without
        clean = rollout(["Answer 6."], None)
    # k = 3 on a trajectory of two executions: both fail unrun, the third is never asked for.
    faults = INTERPRETER.findall(out["thinc_text"][0])
    assert [
        f.startswith(f'\nTraceback (most recent call last):\n  File "<cell-{i}>"')
        for i, f in enumerate(faults, 1)
    ] == [True] * 2
    assert out["inject_k"] == [3] and out["n_injected"] == [2]
    assert INTERPRETER.findall(clean["thinc_text"][0]) == ["\n6\n```\n", "\nTrue\n```\n"]
    assert "inject_k" not in clean and "n_injected" not in clean


def test_a_row_whose_rollout_raises_earns_zero_and_the_step_goes_on(rows, scripted_turns) -> None:
    # Not an outage: a bug met by one trajectory (issue 37). Reward 0, not None: no escape hatch.
    scripted = load_generator("scripted", str(scripted_turns))
    generator = _DownOnTurn(scripted, f"{rows[1]['id']}/1-3", error=RuntimeError)
    prompts = [r["problem"] for r in rows for _ in range(2)]
    with Sandbox() as sandbox:
        rollout = _rows_rollout(sandbox, rows, generator)
        out = rollout(prompts, None)
    assert out["stop_reason"] == ["answer", "answer", "answer", "harness_error"]
    assert out["grade_status"] == ["correct", "correct", "correct", "harness_error"]
    assert out["completion_ids"][3] == [scripted.tokenizer.eos_token_id] and out["env_mask"][3] == [0]
    answers = [r["answer"] for r in rows for _ in range(2)]
    rewards = exact_match_reward(
        out["completion_ids"],
        answers,
        out["thinc_text"],
        out["stop_reason"],
        grade_status=out["grade_status"],
    )
    assert rewards == [1.0, 1.0, 1.0, 0.0]
