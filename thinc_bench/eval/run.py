"""The evaluation engine: every (problem, sample, k) of a config through rollout, grading and the store.

`run_eval` schedules one asyncio task per sample not yet in the run directory (bounded concurrency),
so a killed run resumes where it stopped; `finish` writes summary.json and report.html from the run
directory alone. Seeds depend only on (base, benchmark, problem, sample, k), never on scheduling
order. The CLI (`__main__.py`) and build_sft's teacher rollouts both drive this module; it does not
parse arguments, configure logging or print.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thinc_bench.benchmarks import Problem
from thinc_bench.errors import ConfigError, DatasetError
from thinc_bench.eval._failures import (
    ERROR_CHARS,
    INFRA_EXCEPTIONS,
    Quorum,
    Stage,
    failed_record,
    regrade,
)
from thinc_bench.eval.config import EvalConfig
from thinc_bench.eval.store import HARNESS_STATUS, INFRA_STATUS

if TYPE_CHECKING:
    from thinc_bench.backends import Generator
    from thinc_bench.eval.rollout import RolloutResult
    from thinc_bench.eval.store import RunDir, SampleRecord
    from thinc_bench.grading import Grader
    from thinc_bench.sandbox import Sandbox
    from thinc_bench.trajectory import Trajectory

logger = logging.getLogger("thinc_bench.eval")


def sample_seed(base: int, benchmark: str, problem_id: str, sample_idx: int, k: int) -> int:
    """A per-sample seed that does not depend on scheduling order, so reruns and resumes agree."""
    digest = hashlib.sha256(f"{base}/{benchmark}/{problem_id}/{sample_idx}/{k}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def load_problems(config: EvalConfig) -> list[Problem]:
    """Every problem of this run and shard, benchmarks in the order given."""
    from thinc_bench import benchmarks

    problems: list[Problem] = []
    limits = config.limits_by_benchmark
    for name in config.benchmark_names:
        loaded = benchmarks.load(name, data_dir=config.data_dir)[: limits[name]]
        problems += loaded[config.shard_index :: config.shard_count]
    return problems


async def _evaluate_one(
    problem: Problem,
    sample_idx: int,
    k: int,
    *,
    config: EvalConfig,
    generator: Generator,
    sandbox: Sandbox,
    grader: Grader,
    prompt_ids: list[int],
) -> SampleRecord:
    """One trajectory's record, whatever happens to it: an exception while it is produced or
    processed ends it alone, as a `harness_error` record (or `infra_error` for the machinery's
    `INFRA_EXCEPTIONS`) naming the stage and the exception, and the run goes on. Only run-level
    errors (a configuration or data set the run cannot work with) and cancellation propagate."""
    stage = Stage()
    partial: dict[str, Any] = {}
    try:
        return await _produce(
            problem,
            sample_idx,
            k,
            config=config,
            generator=generator,
            sandbox=sandbox,
            grader=grader,
            prompt_ids=prompt_ids,
            stage=stage,
            partial=partial,
        )
    except (ConfigError, DatasetError):
        raise
    except Exception as exc:
        return failure_record(problem, sample_idx, k, exc, stage.of(exc), partial.get("result"))


def failure_record(
    problem: Problem, sample_idx: int, k: int, exc: Exception, where: str, result: RolloutResult | None
) -> SampleRecord:
    """The record of a trajectory whose production or processing raised `exc` at stage `where`:
    `infra_error` for the machinery's `INFRA_EXCEPTIONS`, else `harness_error`, with the stage and the
    exception as its `error`, logged with the traceback (Inspect's scorer uses it too)."""
    status = INFRA_STATUS if isinstance(exc, INFRA_EXCEPTIONS) else HARNESS_STATUS
    message = f"{where}: {type(exc).__name__}: {str(exc)[:ERROR_CHARS]}"
    log = logger.warning if status == INFRA_STATUS else logger.error
    log("%s/%s/%d/k%d: %s", problem.benchmark, problem.id, sample_idx, k, message, exc_info=exc)
    return failed_record(problem, sample_idx, k, status, message, result)


async def _produce(
    problem: Problem,
    sample_idx: int,
    k: int,
    *,
    config: EvalConfig,
    generator: Generator,
    sandbox: Sandbox,
    grader: Grader,
    prompt_ids: list[int],
    stage: Stage,
    partial: dict[str, Any],
) -> SampleRecord:
    from thinc_bench.eval import rollout

    params = config.sampling_params(
        seed=sample_seed(config.seed, problem.benchmark, problem.id, sample_idx, k)
    )
    calls = 1 if config.max_tool_calls is None else int(config.max_tool_calls)  # 0: no tool (the nl preset)
    limits = rollout.RolloutLimits(int(config.max_tokens or 1), calls)
    from thinc_bench.prompts import parse_template_kwargs

    template_kwargs = parse_template_kwargs(config.chat_template_kwargs)
    session = await asyncio.to_thread(sandbox.session, inject_failures=k)
    stage.name = "rollout"
    try:
        if config.api == "chat":
            from thinc_bench.eval import function_calling
            from thinc_bench.prompts import build_messages, load_system_prompt, load_user_template

            system, user = (
                load_system_prompt(str(config.system_prompt)),
                load_user_template(config.user_template),
            )
            result = await function_calling.rollout(
                generator,  # type: ignore[arg-type]  # EvalConfig allows chat with the openai backend only
                session,
                build_messages(problem.problem, system, None, user),
                prompt_ids,
                params,
                limits=limits,
                tool_name=config.tool_name,
                template_kwargs=template_kwargs,
                request_id=f"{problem.id}/{sample_idx}/{k}",
            )
        else:
            result = await rollout.rollout(
                generator,
                session,
                prompt_ids,
                params,
                limits=limits,
                dialect=config.dialect,
                request_id=f"{problem.id}/{sample_idx}/{k}",
                exec_on=config.exec_on,  # type: ignore[arg-type]
                response_prefix=config.response_prefix or "",
                tool_name=config.tool_name,
                template_kwargs=template_kwargs,
            )
    finally:
        await asyncio.to_thread(session.close)
    partial["result"] = result
    return await grade_rollout(
        problem,
        sample_idx,
        k,
        result,
        dialect=config.dialect,
        grader=grader,
        count_tokens=_token_counter(generator),
        stage=stage,
    )


async def grade_rollout(
    problem: Problem,
    sample_idx: int,
    k: int,
    result: RolloutResult,
    *,
    dialect: str,
    grader: Grader,
    count_tokens: Callable[[str], int] | None,
    stage: Stage | None = None,
) -> SampleRecord:
    """The record of a finished trajectory: parsed, graded, grounded and measured.

    The one place a trajectory becomes a verdict and its measures, so every front end scores alike:
    this CLI's engine and Inspect's scorer (`thinc_bench.inspect_tasks`). `count_tokens` measures prose
    for the failure modes (None: characters); `stage` is told what is running, for a failure's record.
    """
    from thinc_bench import trajectory
    from thinc_bench.eval.store import SampleRecord
    from thinc_bench.grading import judge_version

    stage = stage or Stage()
    started = time.perf_counter()
    stage.name = "parse"
    # Off the event loop: parsing is linear but a 32K-token trajectory of blank runs is megabytes,
    # and other trajectories' generation and runs must not wait on it (issue 37).
    parsed = await asyncio.to_thread(trajectory.parse, result.text, dialect)
    style = trajectory.classify(parsed)
    measures: dict[str, Any] = {}
    grade_status: str
    if result.stop_reason in (INFRA_STATUS, HARNESS_STATUS):  # a refused request (`rollout.refused`)
        grade_status, answer, correct, grounded = str(result.stop_reason), None, False, None
    else:
        stage.name = "grade"
        verdict = await grader.agrade(gold=problem.answer, pred=parsed)
        grade_status, answer, correct = verdict.status, verdict.answer, verdict.correct
        grounded = await asyncio.to_thread(grader.is_grounded, parsed)
        stage.name = "measures"
        measures = await asyncio.to_thread(_measures, parsed, answer, problem.problem, grader, count_tokens)
    return SampleRecord(
        benchmark=problem.benchmark,
        problem_id=problem.id,
        sample_idx=sample_idx,
        k=k,
        text=result.text,
        answer=answer,
        gold=problem.answer,
        correct=correct,
        status=grade_status,
        n_tool_calls=result.n_tool_calls,
        n_exec_errors=result.n_exec_errors,
        gen_tokens=result.gen_tokens,
        total_tokens=result.total_tokens,
        prompt_tokens=result.prompt_tokens,
        response_tokens=result.completion_tokens,
        context_exceeded=result.context_exceeded,
        output_cut=result.output_cut,
        grounded=grounded,
        finish_reason=result.stop_reason,
        timings={
            "generate_s": result.generate_s,
            "execute_s": result.execute_s,
            "grade_s": time.perf_counter() - started,
        },
        exec_statuses=[e.status for e in result.executions],
        style=style,
        error=result.error,
        n_injected=sum(e.injected for e in result.executions),
        meta=dict(problem.meta),
        judge=None if grade_status in (INFRA_STATUS, HARNESS_STATUS) else judge_version(),
        **measures,
    )


def _token_counter(generator: Generator) -> Callable[[str], int] | None:
    """The generator's tokenizer as a length function (None without one: measures fall back to characters)."""
    return token_counter(getattr(generator, "tokenizer", None))


def token_counter(tokenizer: Any) -> Callable[[str], int] | None:
    """A tokenizer as the length function `grade_rollout` measures prose with (None without one)."""
    encode = getattr(tokenizer, "encode", None)
    if encode is None:
        return None
    return lambda text: len(encode(text, add_special_tokens=False))


def _measures(
    parsed: Trajectory,
    answer: str | None,
    problem: str,
    grader: Grader,
    count_tokens: Callable[[str], int] | None,
) -> dict[str, Any]:
    """The record's per-trajectory measures: conformance checks, plan share and the TIR failure modes.

    Post-hoc verification asks the one judge (its grounding check, on one text at a time) whether a
    text shows the answer, so prose and output are compared the way grounding compares them.
    """
    from thinc_bench import metrics, trajectory

    conformance = trajectory.check_conformance(parsed, count_tokens=count_tokens)
    return {
        "checks": {c.name: c.passed for c in conformance.checks},
        "plan_share": conformance.plan_share,
        "posthoc": metrics.posthoc(parsed, answer, lambda a, text: bool(grader.grounded(a, [text]))),
        "nl_literals": metrics.nl_literals(parsed, problem),
        "nl_ratio": metrics.nl_ratio(parsed, count_tokens),
    }


def _render_prompts(
    config: EvalConfig, generator: Generator, run: RunDir, problems: Sequence[Problem]
) -> dict[tuple[str, str], list[int]]:
    """Each problem's prompt ids (`context.prompt_ids`: the renderer SFT examples use too), recorded
    once in the run directory's prompts.jsonl so a reader sees exactly what the model saw."""
    from thinc_bench.eval.context import prompt_ids
    from thinc_bench.prompts import opened_plan

    tokenizer = generator.tokenizer
    prompts = prompt_ids(config, tokenizer, problems)
    for key, ids in prompts.items():
        text = str(tokenizer.decode(ids, skip_special_tokens=False))
        run.record_prompt(*key, ids, text, opened_plan(tokenizer, ids))
    return prompts


def plan(config: EvalConfig, problems: Sequence[Problem]) -> list[tuple[Problem, int, int]]:
    """Every (problem, sample index, k) the config asks for, k-major: the run's trajectories
    (k > 0 only for the problems of `--recovery-benchmarks`)."""
    clean = int(config.samples or 1)
    faulted = clean if config.recovery_samples is None else config.recovery_samples
    recovering = config.recovery_benchmark_names
    return [
        (problem, sample_idx, k)
        for k in config.recovery_ks
        for problem in problems
        if not k or problem.benchmark in recovering
        for sample_idx in range(faulted if k else clean)
    ]


async def run_eval(
    config: EvalConfig,
    run: RunDir,
    problems: Sequence[Problem],
    *,
    stop: asyncio.Event | None = None,
    label: str = "eval",
    sandbox: Sandbox | None = None,
    grader: Grader | None = None,
    generator: Generator | None = None,
) -> bool:
    """Run every (problem, sample, k) not yet in the run directory, appending each as it finishes.

    Setting `stop` (the CLI does on Ctrl-C or SIGTERM) starts no further trajectory and cancels those
    in flight; every one already recorded stays, so a rerun resumes. Returns whether the run is
    complete (False when `stop` ended it first). `label` names the progress bar (build_sft's rollouts).
    `sandbox`, `grader` and `generator`, when given, are used (and left open) instead of the run's own
    (GRPO's held-out evaluation passes the policy it is training).

    One trajectory never ends the run: its failure is its own record (`_evaluate_one`).

    Raises:
        HarnessError: the first `_failures.HARNESS_QUORUM` trajectories all failed in the harness the same way.
        ConfigError: the backend refuses the run's requests (its own quorum), or a setting cannot work.
    """
    from thinc_bench.backends import load_generator, smollm2_gguf
    from thinc_bench.grading import Grader
    from thinc_bench.outcomes import EXCLUDED_STATUSES
    from thinc_bench.progress import Progress, ProgressBar
    from thinc_bench.sandbox import Sandbox, SandboxConfig

    done = run.done_keys()
    todo = [item for item in plan(config, problems) if (item[0].benchmark, item[0].id, *item[1:]) not in done]
    if not todo:
        logger.info("nothing to do: all %d samples are in %s", len(done), run.path)
        await regrade(config, run, grader)
        return True
    model = config.model or str(smollm2_gguf())
    concurrency = int(config.concurrency or 1)
    sandbox_config = SandboxConfig(
        timeout_s=config.exec_timeout_s,
        state=config.sandbox_state,  # type: ignore[arg-type]
        max_sessions=max(concurrency, SandboxConfig.max_sessions),
    )
    own_generator = generator is None
    if generator is None:
        generator = load_generator(config.backend, model, **config.backend_options())  # type: ignore[arg-type]
    generator.check(int(config.max_tokens or 1))
    resolved = {
        "generator": generator.describe(),
        "sampling": config.sampling_params().sampling(),  # what every request sends, defaults included
        "sandbox": asdict(sandbox_config),
    }
    run.annotate("resolved", resolved)
    quorum = Quorum()
    progress = Progress(len(todo), max_tokens=config.max_tokens)
    counted = generator.generated_tokens  # the bar moves with the tokens generated from here on
    bar = ProgressBar(progress, label, lambda: generator.generated_tokens - counted)
    try:
        async with bar.ticking():
            with ExitStack() as owned:
                sandbox = sandbox or owned.enter_context(Sandbox(sandbox_config))
                grader = grader or owned.enter_context(Grader())
                resolved["sandbox"]["protections"] = sandbox.protection_summary()  # active, missing, why
                run.annotate("resolved", resolved)
                await regrade(config, run, grader)
                gate = asyncio.Semaphore(concurrency)
                prompts = _render_prompts(config, generator, run, [problem for problem, _, _ in todo])

                async def one(problem: Problem, sample_idx: int, k: int) -> None:
                    async with gate:
                        record = await _evaluate_one(
                            problem,
                            sample_idx,
                            k,
                            config=config,
                            generator=generator,
                            sandbox=sandbox,
                            grader=grader,
                            prompt_ids=prompts[problem.benchmark, problem.id],
                        )
                    run.append(record)
                    quorum.count(record)
                    scored = record.k == 0 and record.status not in EXCLUDED_STATUSES
                    bar.finished(record.gen_tokens, record.correct if scored else None)

                # The rollout window, apart from engine, sandbox and grader start and the report after
                # it (perf/vllm_overhead.py reads these two lines to rate the harness against the engine).
                logger.info("rollouts: %d trajectories start", len(todo))
                started = time.perf_counter()
                tasks: list[asyncio.Future[None]] = [asyncio.ensure_future(one(*item)) for item in todo]
                completed = await _until_stopped(tasks, stop)
                logger.info(
                    "rollouts: %d trajectories done in %.3f s", progress.done, time.perf_counter() - started
                )
                # Processes that trajectories' code left running (each killed when its session ended).
                resolved["sandbox"]["survivors"] = sandbox.stats.survivors
                # what requests sent in the end (api_extensions auto)
                resolved["generator"] = generator.describe()
                run.annotate("resolved", resolved)
                return completed
    finally:
        if own_generator:
            await generator.aclose()


async def _until_stopped(tasks: list[asyncio.Future[None]], stop: asyncio.Event | None) -> bool:
    """Await every task; when `stop` is set first, cancel the rest and return False. A task's own
    error (a run-level one: a trajectory's failures are records) cancels the others and propagates."""
    pending: set[asyncio.Future[Any]] = set(tasks)
    stopper = asyncio.ensure_future((stop or asyncio.Event()).wait())
    try:
        while pending:
            done, _ = await asyncio.wait(pending | {stopper}, return_when=asyncio.FIRST_COMPLETED)
            for task in done - {stopper}:
                pending.discard(task)
                task.result()
            if stopper in done:
                return False
        return True
    finally:
        stopper.cancel()
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)  # each closes its sandbox session


def finish(
    config: EvalConfig,
    run: RunDir,
    *,
    planned: int | None = None,
    problems: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Write summary.json, samples.parquet and report.html from the run directory alone; return the
    summary. With `planned` (the trajectories the run asks for) and fewer saved, the summary says
    `partial: {saved, planned, problems}` (`problems`: the problems planned per benchmark) and the
    report marks the run's numbers as those of an interrupted run."""
    records = run.records()
    partial: dict[str, Any] | None = None
    if planned is not None and len(records) < planned:  # stopped early (an outage's records count)
        partial = {"saved": len(records), "planned": planned}
        if problems:
            partial["problems"] = dict(problems)
    return write_results(
        run, benchmark_order(config.benchmark_names), samples=int(config.samples or 1), partial=partial
    )


def benchmark_order(names: Sequence[str]) -> list[str]:
    """The benchmarks in the order the run names them, a local file by its name without suffix."""
    return list(dict.fromkeys(Path(b).stem if b.endswith((".jsonl", ".parquet")) else b for b in names))


def write_results(
    run: RunDir, order: Sequence[str], *, samples: int, partial: dict[str, Any] | None = None
) -> dict[str, Any]:
    """summary.json, samples.parquet and report.html from the run's records (eval's end, a regrade)."""
    from thinc_bench import grading
    from thinc_bench.eval.results import write_parquet
    from thinc_bench.eval.summary import summarize
    from thinc_bench.report import write_report

    records = run.records()
    summary = summarize(records, same=grading.equivalent, benchmarks=list(order), samples=samples)
    if partial:
        summary["partial"] = partial
    run.write_summary(summary)
    write_parquet(run.path, records)
    write_report(run.path)
    return summary
