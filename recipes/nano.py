"""ThinC-nano end to end on a CPU: `make nano` (or `python recipes/nano.py`).

ThinC's claim in miniature, with the project's real commands: build ThinC-SFT-nano, its
natural-language-only twin and a set of failed-then-fixed trajectories (template teacher, real
sandbox, build_sft's filters); evaluate the bundled SmolLM2-135M the fair way for an untrained model;
fine-tune it on each dataset (recipes/sft.py; the recovery data continues from the ThinC checkpoint);
run a GRPO curriculum from the ThinC checkpoint on GRPO's own pool of range problems, and one with
injected execution failures from the recovery checkpoint (recipes/grpo.py); evaluate every checkpoint
the same way on the three test parts (seen phrasings, unseen phrasings, unseen families) with avg@n and
Recovery@1, and GRPO with its SFT start on GRPO's held-out range part, after each stage; and compare
them on one page with paired differences, the GRPO reward and clip fraction per step
(reports/nano.html). Every stage is a subprocess running the command a user would type; a stage whose
output is complete is skipped, so a rerun resumes where a stop left off. Stages that do not need each
other run side by side (`--jobs`, each with its share of `--threads`): on 2 cores, two 1-thread
stages instead of one 2-thread stage, so one stage's sandbox, grader and Python work overlaps the
other's matrix work and no OpenMP thread waits at a barrier for a core the sandbox took. Each stage's wall time, the whole
chain's, the precision, the jobs and the CPU go to OUT/timings.json.

    python recipes/nano.py                       # the whole chain (README.md, ThinC-nano, has its time)
    python recipes/nano.py --dtype float32       # as on a CPU without native bf16 (AVX2)
    python recipes/nano.py --sft-examples 96 --test-problems 24 --stages data,base-code-close,sft,eval-sft --out runs/nano-short
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "recipes" / "configs"
STAGES = (
    "data",
    "base-code-close",
    "sft",
    "eval-sft",
    "sft-nl",
    "eval-sft-nl",
    "sft-recovery",
    "eval-sft-recovery",
    "grpo",
    "eval-grpo",
    "grpo-inject",
    "eval-grpo-inject",
    "report",
)
"""The chain in order; --stages picks some (their inputs must exist)."""
NEEDS: dict[str, tuple[str, ...]] = {
    "data": (),
    "base-code-close": (),
    "sft": ("data",),
    "eval-sft": ("sft",),
    "sft-nl": ("data",),
    "eval-sft-nl": ("sft-nl",),
    "sft-recovery": ("data", "sft"),
    "eval-sft-recovery": ("sft-recovery",),
    "grpo": ("sft",),
    "eval-grpo": ("grpo",),
    "grpo-inject": ("sft-recovery",),
    "eval-grpo-inject": ("grpo-inject",),
    "report": (
        "base-code-close",
        "eval-sft",
        "eval-sft-nl",
        "eval-sft-recovery",
        "eval-grpo",
        "eval-grpo-inject",
    ),
}
"""What each stage reads: with --jobs 2 a stage starts once the stages it needs (among those asked for) are done."""
PRIORITY = (
    "data",
    "sft",
    "sft-recovery",
    "grpo-inject",
    "grpo",
    "eval-grpo-inject",
    "eval-grpo",
    "eval-sft-recovery",
    "eval-sft",
    "sft-nl",
    "eval-sft-nl",
    "base-code-close",
    "report",
)
"""Which ready stage starts first when a job slot frees: the longest chain of dependent stages
(data, SFT, recovery SFT, injected GRPO, its eval) first, the short independent ones in its gaps."""
TEST_PARTS = "nano,nano_unseen,nano_families"
"""The three test parts, reported apart: seen phrasings, phrasings never trained on, families never trained on."""
TARGET_PART = "nano_ranges_confirm"
"""GRPO's held-out part (prime ranges, half with excluded ends: `thinc_bench.nano.ranges`), scored for
ThinC SFT, GRPO's first stage and GRPO beside the three parts; GRPO trains on `nano_rl`, range problems
no SFT dataset holds. The confirmatory part, not `nano_ranges`: GRPO's configuration was chosen on that
one, which biases its gain there upward. The recovery pair (recovery SFT, injected GRPO) is scored on
the three parts."""
RANGES_PROBLEMS = 96
"""Problems of the GRPO part each ThinC column is scored on, sized before the run from what GRPO did on
`nano_ranges`: +16.7 points at a paired standard error of 10.0 over 48 problems, so 96 put the expected
difference at about 2.4 standard errors (the error shrinks with the root of the count)."""
RECOVERY_PARTS = "nano,nano_unseen"
"""The parts of the k > 0 runs: the families part is never solved clean (no recovery to show), and
Recovery@1 on the range part would double that part's cost for the same question."""
COLUMNS = (
    ("base, code_close + prefill", "base-code-close"),
    ("NL-only SFT", "sft-nl"),
    ("ThinC SFT", "sft"),
    ("ThinC SFT + recovery data", "sft-recovery"),
    ("ThinC SFT + GRPO stage 1", "grpo-stage1"),
    ("ThinC SFT + GRPO", "grpo"),
    ("recovery data + GRPO, injected failures", "grpo-inject"),
)
"""The report's columns: label and evaluation folder under OUT/eval (labels hold no ':', see PAIRS)."""
PAIRS = (
    ("ThinC SFT", "NL-only SFT"),
    ("ThinC SFT", "base, code_close + prefill"),
    ("ThinC SFT + recovery data", "ThinC SFT"),
    ("ThinC SFT + GRPO stage 1", "ThinC SFT"),
    ("ThinC SFT + GRPO", "ThinC SFT"),
    ("recovery data + GRPO, injected failures", "ThinC SFT + recovery data"),
)
"""Paired differences (B minus A, by problem) the report shows: what each step of the chain changed,
each GRPO run against the checkpoint it started from."""
CPU_EVAL = ("--max-batch-size=64",)
"""Wide batches for every evaluation, the same for every column so the comparison stays fair."""
CODE_CLOSE = ("--exec-on=code_close", "--response-prefix=```python\n")
"""The demo's settings for an untrained model: run code as soon as a block closes, and open the first
block for it (SmolLM2 never opens an output block by itself, so `output_open` measures the trigger)."""
RECOVERY_EXAMPLES = 96
"""Failed-then-fixed trajectories the recovery SFT continues the ThinC checkpoint on (every one of
them recovered: build_sft --recovery-share 1). A continuation rather than a second SFT from the base
model: a third of the time, and its paired difference against ThinC SFT is the recovery data's alone."""
TEST_PROBLEMS = 16
"""Problems per test part by default, one sample each: the smallest evaluation that still pairs every
column on all three parts (the chain's measured time is in README.md, ThinC-nano; the details in
docs/LOG.md). For a paired difference more problems tell more than more samples of the same ones;
`--test-problems 48 --samples 4` is the issue's full size (about three times the evaluation time)."""
INJECT_SHARE = 0.5
"""Share of the injected-failure GRPO run's rollout groups whose first execution is an injected failure
(k = 1, what Recovery@1 measures; a second failure and its rewrite would not fit stage 1's 256 tokens).
The run starts from the recovery checkpoint, which recovers often but not always, so an injected
group's rewards differ and carry an advantage (from a checkpoint that never recovers they are all 0)."""
INJECT_STEPS = 2
"""Steps per stage of the injected-failure GRPO run (4 generation batches): it is the chain's longest
path (SFT, recovery SFT, this run, its eval), so it runs stages half as long as grpo_nano.yaml's 4 to
keep the chain within the hour on 2 float32 cores now that GRPO's part has 96 problems (at 3 steps its
Recovery@1 was a null twice, +12.5 +- 15.5 in session 10); its question is Recovery@1, not the range part."""
Dtype = Literal["auto", "float32", "bfloat16"]


@dataclass
class NanoArgs:
    """What to run and where; the defaults are the documented `make nano` run."""

    out: str = field(default="runs/nano", metadata={"help": "Folder of every stage's output."})
    report: str = field(default="reports/nano.html", metadata={"help": "The comparison page."})
    stages: str = field(default=",".join(STAGES), metadata={"help": f"Comma list of {', '.join(STAGES)}."})
    sft_examples: int | None = field(
        default=None,
        metadata={"help": "Train problems in each SFT dataset; default the build_sft nano preset (256)."},
    )
    recovery_examples: int = field(
        default=RECOVERY_EXAMPLES,
        metadata={
            "help": "Failed-then-fixed trajectories the recovery SFT continues the ThinC checkpoint on."
        },
    )
    test_problems: int | None = field(
        default=None,
        metadata={
            "help": f"Problems of each test part evaluated; default {TEST_PROBLEMS} (all: 100, 64, 48)."
        },
    )
    ranges_problems: int = field(
        default=RANGES_PROBLEMS,
        metadata={
            "help": f"Problems of GRPO's held-out part ({TARGET_PART}) each ThinC column is scored on (0: none)."
        },
    )
    samples: int = field(
        default=1, metadata={"help": "Clean samples per problem of every trained column (avg@n, paired)."}
    )
    parts: str = field(default=TEST_PARTS, metadata={"help": "Test parts evaluated (nano benchmarks)."})
    recovery_k: str = field(
        default="0,1",
        metadata={
            "help": "eval's --recovery-k for the ThinC columns (one sample each k > 0); Recovery@2 equalled "
            "@1 in every chain so far, so it is off by default (0,1,2 adds it)."
        },
    )
    inject_share: float = field(
        default=INJECT_SHARE,
        metadata={"help": "GRPO's inject_failures_share for the injected-failure column."},
    )
    sft_epochs: float | None = field(
        default=None, metadata={"help": "Epochs of each SFT run; default the configs' (1)."}
    )
    eval_args: str = field(
        default="", metadata={"help": "Extra flags for every evaluation, e.g. --eval-args=--recovery-k=0."}
    )
    grpo_steps: int | None = field(
        default=None, metadata={"help": "Steps per GRPO stage; default the grpo_nano.yaml curriculum."}
    )
    inject_steps: int | None = field(
        default=INJECT_STEPS,
        metadata={
            "help": f"Steps per stage of the injected-failure GRPO run; default {INJECT_STEPS} (0: --grpo-steps)."
        },
    )
    dtype: Dtype = field(
        default="auto",
        metadata={
            "help": "Precision of every stage: auto (bf16 where the CPU computes it natively, else float32), "
            "float32 (as a CPU without native bf16 runs it, e.g. AVX2) or bfloat16."
        },
    )
    jobs: int = field(
        default=2,
        metadata={"help": "Stages run side by side when they do not need each other (1: one by one)."},
    )
    threads: int | None = field(
        default=None,
        metadata={
            "help": "CPU threads of the whole chain, shared out among the jobs (OMP_NUM_THREADS of each stage); "
            "default OMP_NUM_THREADS, else every core."
        },
    )


def _eval_settings() -> list[str]:
    """Every column's budget: the one recipes/sft.py records in its checkpoints (the GRPO checkpoints
    record their last stage's, which would make their column another evaluation)."""
    import yaml

    config = yaml.safe_load((CONFIGS / "sft_nano.yaml").read_text())
    flags = {"max_tokens": "eval_max_tokens", "max_tool_calls": "eval_max_tool_calls"}
    return [f"--{flag.replace('_', '-')}={config[key]}" for flag, key in flags.items()]


def _training_precision(dtype: Dtype) -> list[str]:
    """recipes/sft.py's and grpo.py's flag for `--dtype` (the configs say `bf16: auto`)."""
    return {"auto": [], "float32": ["--bf16", "false"], "bfloat16": ["--bf16", "true"]}[dtype]


def _commands(args: NanoArgs) -> dict[str, tuple[list[list[str]], Path]]:
    """Each stage's commands and the file whose existence says the stage is complete."""
    out = Path(args.out)
    py = sys.executable
    limit = [f"--limit={args.test_problems or TEST_PROBLEMS}"]
    examples = [f"--limit={args.sft_examples}"] if args.sft_examples else []
    epochs = ["--num_train_epochs", str(args.sft_epochs)] if args.sft_epochs else []
    parts = [p for p in args.parts.split(",") if p]
    recovering = ",".join(p for p in RECOVERY_PARTS.split(",") if p in parts) or parts[0]
    trained = [
        f"--samples={args.samples}",
        f"--recovery-k={args.recovery_k}",
        "--recovery-samples=1",
        f"--recovery-benchmarks={recovering}",
    ]
    clean = [f"--samples={args.samples}", "--recovery-k=0"]
    if args.ranges_problems < 0:
        raise SystemExit(f"--ranges-problems {args.ranges_problems}: use 0 (none) or more problems")
    targeted = args.ranges_problems > 0
    # The ThinC columns are scored on GRPO's part too; GRPO's first stage on it alone (else the parts).
    thinc_parts = ",".join(dict.fromkeys([*parts, TARGET_PART])) if targeted else args.parts
    stage_parts = TARGET_PART if targeted else args.parts
    ranges = [f"--benchmark-limits={TARGET_PART}={args.ranges_problems}"] if targeted else []
    precision = _training_precision(args.dtype)

    def build(teacher: str, folder: str, *extra: str) -> list[str]:
        return [
            py,
            "-m",
            "thinc_bench.build_sft",
            "--source=nano",
            f"--teacher={teacher}",
            *extra,
            f"--out={out / folder}",
        ]

    def evaluate(name: str, model: str | Path, *extra: str, parts: str | None = None) -> list[str]:
        return [
            py,
            "-m",
            "thinc_bench.eval",
            f"--model={model}",
            f"--benchmarks={parts or args.parts}",
            *limit,
            *_eval_settings(),
            f"--dtype={args.dtype}",
            *CPU_EVAL,
            *extra,
            *shlex.split(args.eval_args),
            f"--out={out / 'eval' / name}",
        ]

    def sft(config: str, data: str, folder: str, *extra: str) -> list[str]:
        return [
            py,
            str(REPO / "recipes" / "sft.py"),
            "--config",
            str(CONFIGS / config),
            "--dataset_name",
            str(out / data / "dataset"),
            "--output_dir",
            str(out / folder),
            *precision,
            *extra,
        ]

    def grpo_config(steps: int | None, name: str) -> Path:
        """grpo_nano.yaml, or its curriculum with `steps` per stage as a YAML beside the outputs."""
        config_file = CONFIGS / "grpo_nano.yaml"
        if not steps:
            return config_file
        import yaml

        config = yaml.safe_load(config_file.read_text())
        config["curriculum"] = [stage | {"max_steps": steps} for stage in config["curriculum"]]
        out.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(yaml.safe_dump(config, sort_keys=False))
        return out / name

    def grpo(folder: str, start: str, steps: int | None, *extra: str) -> list[str]:
        return [
            py,
            str(REPO / "recipes" / "grpo.py"),
            "--config",
            str(grpo_config(steps, f"{folder}.yaml")),
            "--model_name_or_path",
            str(out / start),
            "--output_dir",
            str(out / folder),
            *precision,
            *extra,
        ]

    from thinc_bench.backends import smollm2_gguf

    report = [
        py,
        "-m",
        "thinc_bench.report",
        *(f"{label}={out / 'eval' / name}" for label, name in COLUMNS),
        "--training_log",
        str(out / "grpo"),
        str(out / "grpo-inject"),
        "--paired",
        *(f"{b}:{a}" for b, a in PAIRS),
        "--title",
        "ThinC-nano: SmolLM2-135M taught to think in code (CPU)",
        "--out",
        args.report,
    ]
    done = "summary.json"
    # Recovery@k injects failures into executions; the base model hardly executes anything, so its
    # Recovery columns would be minutes of nothing: the clean run only, one sample.
    untrained = ["--samples=1", "--recovery-k=0", "--system-prompt=nano", *CODE_CLOSE]
    return {
        "data": (
            [
                build("template", "sft-data", *examples),
                build("template-nl", "sft-data-nl", *examples),
                build(
                    "template",
                    "sft-data-recovery",
                    f"--limit={args.recovery_examples}",
                    "--recovery-share=1",
                ),
            ],
            out / "sft-data-recovery" / "stats.json",
        ),
        "base-code-close": (
            [evaluate("base-code-close", smollm2_gguf(), *untrained)],
            out / "eval" / "base-code-close" / done,
        ),
        "sft": ([sft("sft_nano.yaml", "sft-data", "sft", *epochs)], out / "sft" / "thinc_bench.json"),
        "eval-sft": (
            [evaluate("sft", out / "sft", *trained, *ranges, parts=thinc_parts)],
            out / "eval" / "sft" / done,
        ),
        "sft-nl": (
            [sft("sft_nano_nl.yaml", "sft-data-nl", "sft-nl", *epochs)],
            out / "sft-nl" / "thinc_bench.json",
        ),
        "eval-sft-nl": (
            [evaluate("sft-nl", out / "sft-nl", *clean)],
            out / "eval" / "sft-nl" / done,
        ),
        "sft-recovery": (
            [
                sft(
                    "sft_nano_recovery.yaml",
                    "sft-data-recovery",
                    "sft-recovery",
                    "--model_name_or_path",
                    str(out / "sft"),
                )
            ],
            out / "sft-recovery" / "thinc_bench.json",
        ),
        "eval-sft-recovery": (
            [evaluate("sft-recovery", out / "sft-recovery", *trained)],
            out / "eval" / "sft-recovery" / done,
        ),
        "grpo": ([grpo("grpo", "sft", args.grpo_steps)], out / "grpo" / "thinc_bench.json"),
        "eval-grpo": (
            [
                evaluate(  # held-out accuracy per stage on GRPO's part; stage 2 is the final policy below
                    "grpo-stage1",
                    out / "grpo" / "stage1",
                    *clean,
                    *ranges,
                    parts=stage_parts,
                ),
                # clean only: GRPO without injections never taught recovery (0/16 in every chain)
                evaluate("grpo", out / "grpo", *clean, *ranges, parts=thinc_parts),
            ],
            out / "eval" / "grpo" / done,
        ),
        "grpo-inject": (
            [
                grpo(
                    "grpo-inject",
                    "sft-recovery",
                    args.inject_steps or args.grpo_steps,
                    "--inject_failures_share",
                    str(args.inject_share),
                    "--inject_failures_k",
                    "1",
                )
            ],
            out / "grpo-inject" / "thinc_bench.json",
        ),
        "eval-grpo-inject": (
            [evaluate("grpo-inject", out / "grpo-inject", *trained)],
            out / "eval" / "grpo-inject" / done,
        ),
        "report": ([report], Path(args.report + ".never")),  # cheap: always rendered again
    }


def _threads(args: NanoArgs) -> tuple[int, int]:
    """(jobs, threads per job): the chain's threads shared out, at least one each."""
    if args.jobs < 1:
        raise SystemExit(f"--jobs {args.jobs}: use 1 (one stage at a time) or more")
    total = args.threads or int(os.environ.get("OMP_NUM_THREADS") or 0) or os.cpu_count() or 1
    if total < 1:
        raise SystemExit(f"--threads {total}: use a positive number of CPU threads")
    jobs = min(args.jobs, total)
    return jobs, max(1, total // jobs)


def _run_stage(stage: str, steps: list[list[str]], env: dict[str, str], log: Path | None) -> bool:
    """Run one stage's commands in turn (output to `log` when stages run side by side); whether all passed."""
    for command in steps:
        print(f"[nano] {stage} $ {shlex.join(command)}", flush=True)
        if log is None:
            code = subprocess.run(command, env=env).returncode
        else:
            with log.open("a", encoding="utf-8") as handle:
                code = subprocess.run(command, env=env, stdout=handle, stderr=subprocess.STDOUT).returncode
        if code != 0:
            where = f" (its output: {log})" if log is not None else ""
            print(
                f"[nano] {stage} failed{where}; fix it and rerun (finished stages are kept)", file=sys.stderr
            )
            return False
    return True


def run_chain(
    todo: list[str],
    steps: dict[str, list[list[str]]],
    *,
    jobs: int = 1,
    env: dict[str, str] | None = None,
    logs: Path | None = None,
    needs: dict[str, tuple[str, ...]] = NEEDS,
    priority: tuple[str, ...] = PRIORITY,
    done: Callable[[str, float], None] = lambda stage, seconds: None,
) -> bool:
    """Run the stages in `todo`, up to `jobs` at once, each once every stage it needs that is also in
    `todo` has passed; `done(stage, seconds)` as each passes. After a failure nothing new starts (what
    runs finishes); returns whether every stage passed. With `logs`, each stage's output goes to
    `logs/<stage>.log` (side by side their lines would interleave)."""
    pending = sorted(todo, key=priority.index)
    running: dict[Future[bool], tuple[str, float]] = {}
    passed: set[str] = set()
    failed = False
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        while pending or running:
            busy = {stage for stage, _ in running.values()}
            for stage in [s for s in pending if not any(n in pending or n in busy for n in needs[s])]:
                if failed or len(running) >= jobs:
                    break
                pending.remove(stage)
                print(f"[nano] {stage}: started", flush=True)
                log = None if logs is None else logs / f"{stage}.log"
                running[pool.submit(_run_stage, stage, steps[stage], env or dict(os.environ), log)] = (
                    stage,
                    time.perf_counter(),
                )
            if not running:
                break  # a failure stopped the chain, or what is left needs a stage that failed
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                stage, t0 = running.pop(future)
                if future.result():
                    passed.add(stage)
                    done(stage, time.perf_counter() - t0)
                else:
                    failed = True
    return not failed and not pending


def main(argv: list[str] | None = None) -> int:
    from transformers import HfArgumentParser

    (args,) = HfArgumentParser(NanoArgs).parse_args_into_dataclasses(args=argv)  # type: ignore[arg-type]
    wanted = [s.strip() for s in args.stages.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in STAGES]
    if unknown:
        raise SystemExit(f"--stages: unknown {unknown}; choose from {', '.join(STAGES)}")
    jobs, per_job = _threads(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    timings_file = out / "timings.json"
    timings = json.loads(timings_file.read_text()) if timings_file.is_file() else {}
    if not isinstance(timings.get("stages"), dict):  # a chain before stages ran side by side: stage -> s
        timings = {"stages": {k: v for k, v in timings.items() if k in STAGES}}
    commands = _commands(args)
    todo = []
    for stage in (s for s in STAGES if s in wanted):
        if commands[stage][1].exists():
            print(f"[nano] {stage}: done ({commands[stage][1]}), skipped", flush=True)
        else:
            todo.append(stage)
    # The settings and the wall time are those of the run that computed something: re-rendering the
    # report alone (seconds, no model) keeps the chain's.
    computes = any(stage != "report" for stage in todo)
    if computes:
        timings |= {"dtype": args.dtype, "jobs": jobs, "threads_per_job": per_job, "cpu": _cpu_capability()}
    print(
        f"[nano] {len(todo)} stages, {jobs} at a time, {per_job} thread(s) each, dtype {args.dtype}",
        flush=True,
    )

    def done(stage: str, seconds: float) -> None:
        timings["stages"][stage] = round(seconds, 1)
        timings_file.write_text(json.dumps(timings, indent=2) + "\n")
        print(f"[nano] {stage}: {seconds:.0f} s", flush=True)

    logs = out / "logs" if jobs > 1 else None
    if logs is not None:
        logs.mkdir(exist_ok=True)
    env = os.environ | {"OMP_NUM_THREADS": str(per_job), "MKL_NUM_THREADS": str(per_job)}
    started = time.perf_counter()
    passed = run_chain(todo, {s: commands[s][0] for s in todo}, jobs=jobs, env=env, logs=logs, done=done)
    total = time.perf_counter() - started
    if computes:  # a rerun that found every stage complete, or only re-rendered, keeps the chain's wall time
        timings["wall_this_run_s"] = round(total, 1)
        timings_file.write_text(json.dumps(timings, indent=2) + "\n")
    print(f"[nano] total this run {total:.0f} s; stage times in {timings_file}")
    if not passed:
        return 1
    if "report" in wanted:
        print(f"[nano] report: {args.report}")
    return 0


def _cpu_capability() -> str:
    """torch's CPU dispatch level (AVX2, AVX512, ...): the timings depend on it."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability())


if __name__ == "__main__":
    sys.exit(main())
