"""thinc_bench inside Inspect AI, end to end and offline: Inspect's own eval loop, the real sandbox and
judge, scripted models. Each path is checked against `python -m thinc_bench.eval` on the same
trajectories, record by record and figure by figure (the issue's "both paths agree")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from eval.test_tool_calls import PROBLEMS, call, script  # tests/ is on sys.path
from inspect_ai import eval as inspect_eval
from inspect_ai.log import EvalLog
from inspect_ai.model import ChatMessageAssistant, ContentReasoning, ContentText, ModelOutput, ModelUsage
from inspect_ai.tool import ToolCall

from thinc_bench import grading
from thinc_bench.eval import __main__ as thinc_eval
from thinc_bench.eval.store import SampleRecord
from thinc_bench.eval.summary import summarize
from thinc_bench.inspect_tasks import benchmark, headline
from thinc_bench.inspect_tasks.scorer import RECORD_KEY

UNTIMED = ("text", "timings")
"""Record fields left out of the comparison: wall times, and the text (the log keeps it in the
messages; `test_the_token_path_writes_the_turns_into_the_messages_exactly` compares it)."""


def run_inspect(task: Any, model: Any, log_dir: Path, **options: Any) -> EvalLog:
    (log,) = inspect_eval(task, model=model, log_dir=str(log_dir), display="none", **options)
    return log


def run_cli(tmp_path: Path, *args: str) -> tuple[dict[str, Any], dict[tuple[str, int, int], dict[str, Any]]]:
    out = tmp_path / "cli"
    assert thinc_eval.main([*args, "--out", str(out)]) == 0
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    return summary, {(r["problem_id"], r["sample_idx"], r["k"]): r for r in records}


def log_records(log: EvalLog) -> dict[tuple[str, int, int], dict[str, Any]]:
    records = {}
    for sample in log.samples or []:
        assert sample.error is None, sample.error
        assert sample.scores is not None
        record = sample.scores["judge"].metadata[RECORD_KEY]  # type: ignore[index]
        records[record["problem_id"], record["sample_idx"], record["k"]] = record
    return records


def untimed(records: dict[Any, dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {key: {k: v for k, v in r.items() if k not in UNTIMED} for key, r in records.items()}


def figures(log: EvalLog) -> dict[str, float]:
    """The thinc_bench metric's figures in the log (the unreduced `judge` score)."""
    assert log.results is not None
    (ours,) = [s for s in log.results.scores if s.name == "judge" and s.metrics]
    return {name: metric.value for name, metric in ours.metrics.items()}


def inspect_accuracy(log: EvalLog, reducer: str = "mean") -> tuple[float, float]:
    """Inspect's own `accuracy()` and `stderr()` of the clean samples, under one epoch reducer."""
    assert log.results is not None
    (clean,) = [s for s in log.results.scores if s.name == "correct" and s.reducer == reducer]
    return clean.metrics["accuracy"].value, clean.metrics["stderr"].value


def assert_same_run(log: EvalLog, summary: dict[str, Any], records: dict[Any, dict[str, Any]]) -> None:
    """Every record equal but for wall times, the same summary, and the log's figures `headline`'s."""
    ours = log_records(log)
    assert ours.keys() == records.keys()
    for key, record in ours.items():
        theirs = {k: v for k, v in records[key].items() if k not in UNTIMED}
        assert {k: v for k, v in record.items() if k not in UNTIMED} == theirs, key
    rebuilt = summarize([SampleRecord.from_dict(r) for r in ours.values()], same=grading.equivalent)
    assert json.loads(json.dumps(rebuilt)) == summary
    assert figures(log) == pytest.approx(headline(summary))
    block = next(iter(summary["per_benchmark"].values()))
    accuracy, stderr = inspect_accuracy(log)
    assert accuracy == pytest.approx(block["accuracy"]["value"])
    assert stderr == pytest.approx(block["accuracy"]["stderr"] or 0.0)  # Inspect's is 0 for one problem


def scripted_cli_args(turns: Path, bench: Path, *extra: str) -> list[str]:
    """The CLI's flags for a scripted run; one sample per problem unless `extra` says otherwise."""
    samples = [] if "--samples" in extra else ["--samples", "1"]
    return ["--backend", "scripted", "--model", str(turns), "--benchmarks", str(bench), *samples, *extra]


def test_the_token_path_scores_scripted_trajectories_as_the_cli_does(
    two_problem_benchmark: Path, scripted_turns: Path, tmp_path: Path
) -> None:
    """ThinC's markdown format through thinc_bench's rollout: 2 samples, Recovery@1 and @2."""
    task = benchmark(name=str(two_problem_benchmark), samples=2, k="1,2")
    log = run_inspect(task, f"thinc_bench/scripted/{scripted_turns}", tmp_path / "logs")
    assert log.status == "success"
    cli = scripted_cli_args(scripted_turns, two_problem_benchmark, "--samples", "2", "--recovery-k", "1,2")
    summary, records = run_cli(tmp_path, *cli)
    assert len(records) == 12 and {k for _, _, k in records} == {0, 1, 2}
    assert_same_run(log, summary, records)
    found = figures(log)
    assert found["recovery@1_saw_k"] == 1.0 and found["recovery@1_clean_accuracy"] == 1.0
    assert found["recovery@2_saw_k"] == 0.5  # tiny-1 runs one block: it cannot meet 2 failures
    pass_2 = summary["per_benchmark"]["tiny"]["pass_at_k"]["2"]["value"]
    assert inspect_accuracy(log, "pass_at_2")[0] == pytest.approx(pass_2)  # Inspect's reducer, ours


def test_the_token_path_writes_the_turns_into_the_messages_exactly(
    two_problem_benchmark: Path, scripted_turns: Path, tmp_path: Path
) -> None:
    task = benchmark(name=str(two_problem_benchmark), k=1)
    log = run_inspect(task, f"thinc_bench/scripted/{scripted_turns}", tmp_path / "logs")
    cli = scripted_cli_args(scripted_turns, two_problem_benchmark, "--recovery-k", "1")
    _, records = run_cli(tmp_path, *cli)
    for sample in log.samples or []:
        system, user, *completion = sample.messages
        assert (system.role, user.role, user.text) == ("system", "user", sample.input)
        expected = records[sample.metadata["problem_id"], 0, sample.metadata["k"]]["text"]
        assert "".join(m.text for m in completion) == expected
        roles = [m.role for m in completion]
        assert roles[0] == roles[-1] == "assistant" and roles.count("tool") == expected.count("```output")
    faulted = next(s for s in log.samples or [] if s.metadata["k"] == 1)
    assert faulted.id == f"{faulted.metadata['problem_id']}@k1"
    first_output = next(m.text for m in faulted.messages if m.role == "tool")
    assert "Traceback" in first_output  # the injected failure, as the model read it


def tool_call_inputs(tmp_path: Path) -> tuple[Path, Path]:
    """eval's tool-call test problems and Qwen3-style turns (malformed calls included)."""
    bench, turns = tmp_path / "tc.jsonl", tmp_path / "turns.jsonl"
    bench.write_text(
        "".join(json.dumps({"id": i, "problem": p, "answer": a}) + "\n" for i, (p, a) in PROBLEMS.items())
    )
    turns.write_text("".join(json.dumps({"problem_id": i, "turns": t}) + "\n" for i, t in script().items()))
    return bench, turns


def test_the_native_path_scores_tool_calls_as_the_cli_function_calling_path_does(
    qwen3_tokenizer_dir: Path, tmp_path: Path
) -> None:
    """Native tool calls through Inspect's tool loop and thinc_bench's python tool, against the CLI's
    tool_call dialect on the same turns: sequential calls, an error then a fix, malformed calls (bad
    JSON, an unknown tool, no code), two calls in one turn; clean and with one injected failure."""
    bench, turns = tool_call_inputs(tmp_path)
    task = benchmark(name=str(bench), dialect="tool_call", k=1)
    model_args = {"tokenizer": str(qwen3_tokenizer_dir)}
    log = run_inspect(task, f"thinc_bench/scripted/{turns}", tmp_path / "logs", model_args=model_args)
    assert log.eval.metadata and log.eval.metadata["thinc_bench_path"].startswith("native path")
    cli = scripted_cli_args(turns, bench, "--tokenizer", str(qwen3_tokenizer_dir), "--dialect", "tool_call")
    summary, records = run_cli(tmp_path, *cli, "--recovery-k", "1")
    assert_same_run(log, summary, records)
    malformed = next(s for s in log.samples or [] if s.id == "malformed")
    errors = [m.error.message for m in malformed.messages if m.role == "tool" and m.error]  # type: ignore[union-attr]
    assert [e.split(" (")[0].split(":")[0] for e in errors] == [
        "the tool call is not valid JSON",
        "unknown tool 'calculator'",
        "the tool call has no string argument 'code'.",
    ]


def output(content: str, *, reasoning: str = "", calls: list[tuple[str, str]] = ()) -> ModelOutput:  # type: ignore[assignment]
    """A mock model turn with an explicit token usage (Inspect's mock model otherwise fetches a
    tokenizer file to count tokens, which fails offline)."""
    parts: list[Any] = [ContentReasoning(reasoning=reasoning)] if reasoning else []
    tool_calls = [
        ToolCall(id=f"c{i}", function="python", arguments={"code": code}) for i, (_, code) in enumerate(calls)
    ]
    message = ChatMessageAssistant(content=[*parts, ContentText(text=content)], tool_calls=tool_calls or None)
    result = ModelOutput.from_message(message, stop_reason="tool_calls" if calls else "stop")
    result.usage = ModelUsage(input_tokens=10, output_tokens=10, total_tokens=20)
    return result


def test_inspects_mock_model_calls_the_stateful_tool_and_is_scored_as_the_cli_scores_the_same_turns(
    qwen3_tokenizer_dir: Path, tmp_path: Path
) -> None:
    """Inspect's own mock model (any provider's turns: reasoning, content, parsed calls) through the
    native path. The second call reads the first's variable: the session is a notebook, not Inspect's
    stock python(). Its record equals the CLI's for the same turns written in the tool_call dialect."""
    from inspect_ai.model import get_model

    bench = tmp_path / "one.jsonl"
    bench.write_text(
        json.dumps({"id": "two-calls", "problem": PROBLEMS["two-calls"][0], "answer": "1025"}) + "\n"
    )
    mock = get_model(
        "mockllm/model",
        custom_outputs=[
            output(
                "",
                reasoning="Compute 2**10 in code, then add one.",
                calls=[("python", "x = 2**10\nprint(x)")],
            ),
            output("", calls=[("python", "print(x + 1)")]),
            output("The answer is \\boxed{1025}."),
        ],
    )
    task = benchmark(name=str(bench), dialect="tool_call", tokenizer=str(qwen3_tokenizer_dir))
    log = run_inspect(task, mock, tmp_path / "logs")
    (sample,) = log.samples or []
    outputs = [m.text for m in sample.messages if m.role == "tool"]
    assert outputs == ["1024", "1025"]  # x survived between calls
    turns = tmp_path / "turns.jsonl"
    turns.write_text(json.dumps({"problem_id": "two-calls", "turns": script()["two-calls"]}) + "\n")
    cli = scripted_cli_args(turns, bench, "--tokenizer", str(qwen3_tokenizer_dir), "--dialect", "tool_call")
    summary, records = run_cli(tmp_path, *cli)
    assert_same_run(log, summary, records)
    assert call("print(x + 1)") in script()["two-calls"][1]  # the CLI's turns are the mock's, as written


def test_a_sandbox_outage_is_a_sample_error_that_eval_retry_runs_again(
    two_problem_benchmark: Path, scripted_turns: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An infrastructure failure is never scored: the sample errors (Inspect counts it apart), the
    others are scored without it, and `inspect eval-retry` produces it once the sandbox is back."""
    from inspect_ai import eval_retry

    from thinc_bench.sandbox import ExecResult, Session

    real = Session.arun
    down = {"yes": True}

    async def flaky(self: Session, code: str, *args: Any, **kwargs: Any) -> ExecResult:
        if down["yes"] and "2 + 3" in code:
            return ExecResult("infra_error", "", 0.0, notice_after="[sandbox] infrastructure error: test\n")
        return await real(self, code, *args, **kwargs)

    monkeypatch.setattr(Session, "arun", flaky)
    task = benchmark(name=str(two_problem_benchmark))
    log = run_inspect(task, f"thinc_bench/scripted/{scripted_turns}", tmp_path / "logs", fail_on_error=False)
    errors = {s.id: s.error for s in log.samples or [] if s.error}
    assert list(errors) == ["tiny-1"] and "SandboxUnavailable" in errors["tiny-1"].message
    assert figures(log)["accuracy"] == 1.0 and log_records_ok(log) == ["tiny-2"]  # scored without it
    down["yes"] = False
    (retried,) = eval_retry(log, log_dir=str(tmp_path / "logs"), display="none")
    assert retried.status == "success" and sorted(log_records(retried)) == [
        ("tiny-1", 0, 0),
        ("tiny-2", 0, 0),
    ]


def log_records_ok(log: EvalLog) -> list[str]:
    return sorted(str(s.id) for s in log.samples or [] if s.scores)


@pytest.mark.parametrize("status", ["grader_error", "grader_timeout"])
def test_what_counts_as_wrong_is_eval_summarys_rule(
    status: str,
    two_problem_benchmark: Path,
    scripted_turns: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A status every rate leaves out (`outcomes.EXCLUDED_STATUSES`) is a sample error (retried, never
    scored); any other is scored as `summarize` scores it (a grader timeout is the answer's: wrong)."""
    from thinc_bench.grading import Grade, Grader
    from thinc_bench.outcomes import EXCLUDED_STATUSES

    real = Grader.agrade

    async def judge(self: Grader, *, gold: str, pred: Any) -> Grade:
        verdict = await real(self, gold=gold, pred=pred)
        return Grade(status, verdict.answer, False) if gold == "5" else verdict  # type: ignore[arg-type]

    monkeypatch.setattr(Grader, "agrade", judge)
    task = benchmark(name=str(two_problem_benchmark))
    log = run_inspect(task, f"thinc_bench/scripted/{scripted_turns}", tmp_path / "logs", fail_on_error=False)
    tiny_1 = next(s for s in log.samples or [] if s.id == "tiny-1")
    if status in EXCLUDED_STATUSES:
        assert tiny_1.error is not None and status in tiny_1.error.message and not tiny_1.scores
        assert figures(log)["accuracy"] == 1.0  # tiny-2 alone
    else:
        assert tiny_1.error is None and tiny_1.scores["judge"].metadata[RECORD_KEY]["status"] == status  # type: ignore[index]
        assert figures(log)["accuracy"] == 0.5 and figures(log)["grader_timeouts"] == 1.0
        assert inspect_accuracy(log)[0] == 0.5


def test_a_trajectory_the_harness_fails_on_is_its_failed_record_under_evals_rule(
    two_problem_benchmark: Path, scripted_turns: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception while one trajectory is judged becomes eval's `harness_error` record (stage and
    exception named), which is then excluded or counted as eval's summary says, never a crash."""
    from thinc_bench.outcomes import EXCLUDED_STATUSES

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr("thinc_bench.eval.run._measures", boom)
    task = benchmark(name=str(two_problem_benchmark))
    log = run_inspect(task, f"thinc_bench/scripted/{scripted_turns}", tmp_path / "logs", fail_on_error=False)
    for sample in log.samples or []:
        if "harness_error" in EXCLUDED_STATUSES:
            assert sample.error is not None and "measures: ZeroDivisionError: a bug" in sample.error.message
        else:
            record = sample.scores["judge"].metadata[RECORD_KEY]  # type: ignore[index]
            assert record["status"] == "harness_error" and not record["correct"]


def test_a_log_is_scored_again_from_itself_alone(
    qwen3_tokenizer_dir: Path, two_problem_benchmark: Path, scripted_turns: Path, tmp_path: Path
) -> None:
    """`inspect score` re-judges a log without its model's generations or a sandbox: both paths keep
    in the log everything the judge reads, so the figures come back the same."""
    from inspect_ai import score

    from thinc_bench.inspect_tasks import judge

    token = run_inspect(
        benchmark(name=str(two_problem_benchmark), k=1),
        f"thinc_bench/scripted/{scripted_turns}",
        tmp_path / "a",
    )
    bench, turns = tool_call_inputs(tmp_path)
    native = run_inspect(
        benchmark(name=str(bench), dialect="tool_call"),
        f"thinc_bench/scripted/{turns}",
        tmp_path / "b",
        model_args={"tokenizer": str(qwen3_tokenizer_dir)},
    )
    for log in (token, native):  # no arguments: the log says how each trajectory ran
        again = score(log, judge(), action="overwrite", display="none")
        assert figures(again) == figures(log) and untimed(log_records(again)) == untimed(log_records(log))
