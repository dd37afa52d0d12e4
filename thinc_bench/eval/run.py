"""Evaluate a model on the ThinC benchmarks: `python -m thinc_bench.eval`.

Quick start (offline, the bundled SmolLM2-135M on CPU, 2 problems x 2 samples, a few minutes):

    python -m thinc_bench.eval

The paper's setting (avg@16 at 32K tokens on the five benchmarks) on a GPU machine:

    python -m thinc_bench.eval --model Qwen/Qwen3-4B-Thinking-2507 --backend vllm \
        --samples 16 --max-tokens 32768 --recovery-k 0,1,2,3 --out runs/qwen3-4b

Against a running server (`vllm serve M`, SGLang, llama.cpp): `--backend openai --base-url
http://127.0.0.1:8000/v1`. Split a large run with `--shard i/n` (the report merges shards). A rerun
with the same settings resumes into the same `--out`; other settings are refused there.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thinc_bench.benchmarks import Problem
from thinc_bench.errors import ThincError
from thinc_bench.eval_config import EvalConfig

if TYPE_CHECKING:
    from thinc_bench.backends import Generator
    from thinc_bench.grading import Grader
    from thinc_bench.prompts import Example
    from thinc_bench.sandbox import Sandbox
    from thinc_bench.store import RunDir, SampleRecord

logger = logging.getLogger("thinc_bench.eval")


def sample_seed(base: int, benchmark: str, problem_id: str, sample_idx: int, k: int) -> int:
    """A per-sample seed that does not depend on scheduling order, so reruns and resumes agree."""
    digest = hashlib.sha256(f"{base}/{benchmark}/{problem_id}/{sample_idx}/{k}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def load_problems(config: EvalConfig) -> list[Problem]:
    """Every problem of this run and shard, benchmarks in the order given."""
    from thinc_bench import benchmarks

    problems: list[Problem] = []
    for name in config.benchmark_names:
        loaded = benchmarks.load(name, data_dir=config.data_dir)[: config.limit]
        problems += loaded[config.shard_index :: config.shard_count]
    return problems


@dataclass
class _Progress:
    done: int = 0
    correct: int = 0
    scored: int = 0
    gen_tokens: int = 0
    sandbox_errors: int = 0
    started: float = field(default_factory=time.perf_counter)

    def postfix(self) -> dict[str, str]:
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        accuracy = f"{self.correct / self.scored:.3f}" if self.scored else "-"
        return {
            "acc": accuracy,
            "tok/s": f"{self.gen_tokens / elapsed:.1f}",
            "sandbox_err": str(self.sandbox_errors),
        }


async def _evaluate_one(
    problem: Problem,
    sample_idx: int,
    k: int,
    *,
    config: EvalConfig,
    generator: Generator,
    sandbox: Sandbox,
    grader: Grader,
    system_prompt: str,
    examples: list[Example],
) -> SampleRecord:
    from thinc_bench import rollout, trajectory
    from thinc_bench.backends import SamplingParams
    from thinc_bench.prompts import build_messages
    from thinc_bench.store import SampleRecord

    prompt_ids = rollout.render_prompt(generator, build_messages(problem.problem, system_prompt, examples))
    params = SamplingParams(
        temperature=config.temperature,
        top_p=config.top_p,
        top_k=config.top_k,
        max_tokens=int(config.max_tokens or 1),
        seed=sample_seed(config.seed, problem.benchmark, problem.id, sample_idx, k),
    )
    limits = rollout.RolloutLimits(int(config.max_tokens or 1), int(config.max_tool_calls or 1))
    session = await asyncio.to_thread(sandbox.session, inject_failures=k)
    try:
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
        )
    finally:
        await asyncio.to_thread(session.close)
    started = time.perf_counter()
    parsed = trajectory.parse(result.text, config.dialect)
    style = trajectory.classify(parsed)
    if result.stop_reason == "infra_error":
        grade_status, answer, correct, grounded = "infra_error", None, False, None
    else:
        verdict = await grader.agrade(gold=problem.answer, pred=result.text)
        grade_status, answer, correct = verdict.status, verdict.answer, verdict.correct
        grounded = await asyncio.to_thread(grader.is_grounded, parsed)
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
    )


async def run_eval(config: EvalConfig, run: RunDir, problems: Sequence[Problem]) -> None:
    """Run every (problem, sample, k) not yet in the run directory, appending each as it finishes."""
    from tqdm import tqdm

    from thinc_bench.backends import load_generator, smollm2_gguf
    from thinc_bench.grading import Grader
    from thinc_bench.prompts import load_examples, load_system_prompt
    from thinc_bench.sandbox import Sandbox, SandboxConfig

    done = run.done_keys()
    todo = [
        (problem, sample_idx, k)
        for k in config.recovery_ks
        for problem in problems
        for sample_idx in range(int(config.samples or 1))
        if (problem.benchmark, problem.id, sample_idx, k) not in done
    ]
    if not todo:
        logger.info("nothing to do: all %d samples are in %s", len(done), run.path)
        return
    system_prompt = load_system_prompt(config.system_prompt)
    examples = load_examples(config.few_shot)
    model = config.model or str(smollm2_gguf())
    concurrency = int(config.concurrency or 1)
    sandbox_config = SandboxConfig(
        timeout_s=config.exec_timeout_s,
        state=config.sandbox_state,  # type: ignore[arg-type]
        max_sessions=max(concurrency, SandboxConfig.max_sessions),
    )
    progress = _Progress()
    generator = load_generator(config.backend, model, **config.backend_options())  # type: ignore[arg-type]
    run.annotate("resolved", {"generator": generator.describe(), "sandbox": asdict(sandbox_config)})
    try:
        with (
            Sandbox(sandbox_config) as sandbox,
            Grader() as grader,
            tqdm(total=len(todo), desc="eval") as bar,
        ):
            bar.update(0)
            gate = asyncio.Semaphore(concurrency)

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
                        system_prompt=system_prompt,
                        examples=examples,
                    )
                run.append(record)
                progress.done += 1
                progress.gen_tokens += record.gen_tokens
                progress.sandbox_errors += sum(s == "infra_error" for s in record.exec_statuses)
                if record.k == 0 and record.status != "infra_error":
                    progress.scored += 1
                    progress.correct += record.correct
                bar.set_postfix(progress.postfix(), refresh=False)
                bar.update(1)

            await asyncio.gather(*(one(*item) for item in todo))
    finally:
        await generator.aclose()


def finish(config: EvalConfig, run: RunDir) -> dict[str, Any]:
    """Write summary.json and report.html from the run directory alone; return the summary."""
    from thinc_bench import grading
    from thinc_bench.report import write_report
    from thinc_bench.summary import summarize

    order = list(
        dict.fromkeys(
            Path(b).stem if b.endswith((".jsonl", ".parquet")) else b for b in config.benchmark_names
        )
    )
    summary = summarize(run.records(), same=grading.equivalent, benchmarks=order)
    run.write_summary(summary)
    write_report(run.path)
    return summary


def format_table(summary: dict[str, Any]) -> str:
    """The end-of-run table: one line per benchmark, then the average."""
    lines = [
        f"{'benchmark':<16}{'acc':>8}{'±se':>8}{'n':>6}{'calls':>8}{'tokens':>9}{'grounded':>10}{'infra':>7}"
    ]
    for name, block in summary["per_benchmark"].items():
        if "accuracy" not in block:
            lines.append(f"{name:<16}{'-':>8}{'':>8}{0:>6}{'':>8}{'':>9}{'':>10}{block['n_infra_errors']:>7}")
            continue
        acc = block["accuracy"]
        stderr = f"{acc['stderr']:.3f}" if acc["stderr"] is not None else "-"
        grounded = block["grounding"]["answered"]["value"]
        lines.append(
            f"{name:<16}{acc['value']:>8.3f}{stderr:>8}{acc['n_samples']:>6}{block['tool_calls']['mean']:>8.2f}"
            f"{block['lengths']['model_tokens']['mean']:>9.0f}{'-' if grounded is None else f'{grounded:.3f}':>10}"
            f"{block['n_infra_errors']:>7}"
        )
    mean = summary["overall"]["mean_accuracy"]
    lines.append(f"{'average':<16}{'-' if mean is None else f'{mean:.3f}':>8}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from transformers import HfArgumentParser

    parser = HfArgumentParser(
        EvalConfig,  # type: ignore[arg-type]
        prog="python -m thinc_bench.eval",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    try:
        (config,) = parser.parse_args_into_dataclasses(args=argv, return_remaining_strings=False)
        logging.basicConfig(
            level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        return _main(config)
    except ThincError as exc:
        print(f"error: {exc}", file=sys.stderr)  # noqa: T201 - the CLI owns the terminal
        return 2


def _main(config: EvalConfig) -> int:
    from thinc_bench.store import RunDir, config_hash

    problems = load_problems(config)
    model_name = Path(config.model).stem if config.model else "smollm2-135m-demo"
    out = Path(config.out or f"runs/{model_name}-{config_hash(config.settings())[:8]}")
    run = RunDir.open(out, config.settings())
    logger.info("run directory %s, %d problems, k in %s", out, len(problems), config.recovery_ks)
    started = time.perf_counter()
    asyncio.run(run_eval(config, run, problems))
    summary = finish(config, run)
    print(format_table(summary))  # noqa: T201 - the CLI owns the terminal
    print(f"run: {out}  report: {out / 'report.html'}  ({time.perf_counter() - started:.0f} s)")  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
