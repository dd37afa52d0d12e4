"""ThinC-nano end to end on a CPU: `make nano` (or `python recipes/nano.py`).

The paper's claim in miniature, with the project's real commands: build ThinC-SFT-nano, its
natural-language-only twin and a twin that keeps failed-then-fixed trajectories (template teacher,
real sandbox, build_sft's filters); evaluate the bundled SmolLM2-135M two fair ways; fine-tune it on
each dataset (recipes/sft.py); run a short GRPO curriculum from the ThinC checkpoint, plain and with
injected execution failures (recipes/grpo.py); evaluate every checkpoint the same way on the three
test parts (seen phrasings, unseen phrasings, unseen families) with avg@n and Recovery@1/2; and
compare them on one page with paired differences (reports/nano.html). Every stage is a subprocess
running the command a user would type; a stage whose output is complete is skipped, so a rerun
resumes where a stop left off. Each stage's wall time goes to OUT/timings.json.

    python recipes/nano.py                       # the whole chain (docs/LOG.md has its time)
    python recipes/nano.py --sft-examples 96 --test-problems 24 --stages data,base,sft,eval-sft --out runs/nano-short
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "recipes" / "configs"
STAGES = (
    "data",
    "base",
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
TEST_PARTS = "nano,nano_unseen,nano_families"
"""The three test parts, reported apart: seen phrasings, phrasings never trained on, families never trained on."""
COLUMNS = (
    ("base, nano prompt", "base"),
    ("base, code_close + prefill", "base-code-close"),
    ("NL-only SFT", "sft-nl"),
    ("ThinC SFT", "sft"),
    ("ThinC SFT, recovery data", "sft-recovery"),
    ("ThinC SFT + GRPO", "grpo"),
    ("ThinC SFT + GRPO stage 1", "grpo-stage1"),
    ("ThinC SFT + GRPO, injected failures", "grpo-inject"),
)
"""The report's columns: label and evaluation folder under OUT/eval (labels hold no ':', see PAIRS)."""
PAIRS = (
    ("ThinC SFT", "NL-only SFT"),
    ("ThinC SFT", "base, code_close + prefill"),
    ("ThinC SFT, recovery data", "ThinC SFT"),
    ("ThinC SFT + GRPO stage 1", "ThinC SFT"),
    ("ThinC SFT + GRPO", "ThinC SFT"),
    ("ThinC SFT + GRPO, injected failures", "ThinC SFT"),
)
"""Paired differences (B minus A, by problem) the report shows: what each step of the chain changed."""
CPU_EVAL = ("--dtype=auto", "--max-batch-size=64")
"""Faster CPU decoding for every evaluation, the same for every column so the comparison stays fair:
wide batches, and bf16 only where the CPU computes it natively (1.6x on 2 AVX512-BF16 cores: 303 s
against 474 s for the 100 test problems; emulated bf16 elsewhere would be several times slower)."""
CODE_CLOSE = ("--exec-on=code_close", "--response-prefix=```python\n")
"""The demo's settings for an untrained model: run code as soon as a block closes, and open the first
block for it (SmolLM2 never opens an output block by itself, so `output_open` measures the trigger)."""
RECOVERY_SHARE = 0.3
"""Share of the recovery twin's problems whose trajectory fails (for real, in the sandbox) and is fixed."""
TEST_PROBLEMS = 16
"""Problems per test part by default, one sample each: the smallest evaluation that still pairs every
column on all three parts (the chain's measured time is in README.md, ThinC-nano; the details in
docs/LOG.md). For a paired difference more problems tell more than more samples of the same ones;
`--test-problems 48 --samples 4` is the issue's full size (about three times the evaluation time)."""
INJECT_SHARE = 0.5
"""Share of the injected-failure GRPO run's rollout groups whose first 1 or 2 executions (drawn per
group) are injected failures, as eval's Recovery@1 and @2 inject them."""


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
    test_problems: int | None = field(
        default=None,
        metadata={
            "help": f"Problems of each test part evaluated; default {TEST_PROBLEMS} (all: 100, 64, 48)."
        },
    )
    samples: int = field(
        default=1, metadata={"help": "Clean samples per problem of every trained column (avg@n, paired)."}
    )
    parts: str = field(default=TEST_PARTS, metadata={"help": "Test parts evaluated (nano benchmarks)."})
    recovery_k: str = field(
        default="0,1,2",
        metadata={"help": "eval's --recovery-k for the ThinC columns (one sample each k > 0)."},
    )
    recovery_share: float = field(
        default=RECOVERY_SHARE, metadata={"help": "build_sft's --recovery-share for the recovery twin."}
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


def _eval_settings() -> list[str]:
    """The base model's eval flags: the budget and prompt recipes/sft.py records in its checkpoints."""
    import yaml

    config = yaml.safe_load((CONFIGS / "sft_nano.yaml").read_text())
    flags = {"max_tokens": "eval_max_tokens", "max_tool_calls": "eval_max_tool_calls"}
    args = [f"--{flag.replace('_', '-')}={config[key]}" for flag, key in flags.items()]
    # Recovery@k injects failures into executions; the base model hardly executes anything, so its
    # Recovery columns would be minutes of nothing: the clean run only, one sample.
    return [*args, "--samples=1", "--recovery-k=0", "--system-prompt=nano"]


def _commands(args: NanoArgs) -> dict[str, tuple[list[list[str]], Path]]:
    """Each stage's commands and the file whose existence says the stage is complete."""
    out = Path(args.out)
    py = sys.executable
    limit = [f"--limit={args.test_problems or TEST_PROBLEMS}"]
    examples = [f"--limit={args.sft_examples}"] if args.sft_examples else []
    epochs = ["--num_train_epochs", str(args.sft_epochs)] if args.sft_epochs else []
    trained = [f"--samples={args.samples}", f"--recovery-k={args.recovery_k}", "--recovery-samples=1"]

    def build(teacher: str, folder: str, *extra: str) -> list[str]:
        return [
            py,
            "-m",
            "thinc_bench.build_sft",
            "--source=nano",
            f"--teacher={teacher}",
            *examples,
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
            *CPU_EVAL,
            *extra,
            *shlex.split(args.eval_args),
            f"--out={out / 'eval' / name}",
        ]

    def sft(config: str, data: str, folder: str) -> list[str]:
        return [
            py,
            str(REPO / "recipes" / "sft.py"),
            "--config",
            str(CONFIGS / config),
            "--dataset_name",
            str(out / data / "dataset"),
            "--output_dir",
            str(out / folder),
            *epochs,
        ]

    grpo_config = CONFIGS / "grpo_nano.yaml"
    if args.grpo_steps:  # the same curriculum with fewer steps per stage, as a YAML beside the outputs
        import yaml

        config = yaml.safe_load(grpo_config.read_text())
        config["curriculum"] = [stage | {"max_steps": args.grpo_steps} for stage in config["curriculum"]]
        grpo_config = out / "grpo_nano.yaml"
        grpo_config.write_text(yaml.safe_dump(config, sort_keys=False))

    def grpo(folder: str, *extra: str) -> list[str]:
        return [
            py,
            str(REPO / "recipes" / "grpo.py"),
            "--config",
            str(grpo_config),
            "--model_name_or_path",
            str(out / "sft"),
            "--output_dir",
            str(out / folder),
            *extra,
        ]

    from thinc_bench.backends import smollm2_gguf

    base = [*_eval_settings()]
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
    return {
        "data": (
            [
                build("template", "sft-data"),
                build("template-nl", "sft-data-nl"),
                build("template", "sft-data-recovery", f"--recovery-share={args.recovery_share}"),
            ],
            out / "sft-data-recovery" / "stats.json",
        ),
        "base": ([evaluate("base", smollm2_gguf(), *base)], out / "eval" / "base" / done),
        "base-code-close": (
            [evaluate("base-code-close", smollm2_gguf(), *base, *CODE_CLOSE)],
            out / "eval" / "base-code-close" / done,
        ),
        "sft": ([sft("sft_nano.yaml", "sft-data", "sft")], out / "sft" / "thinc_bench.json"),
        "eval-sft": ([evaluate("sft", out / "sft", *trained)], out / "eval" / "sft" / done),
        "sft-nl": ([sft("sft_nano_nl.yaml", "sft-data-nl", "sft-nl")], out / "sft-nl" / "thinc_bench.json"),
        "eval-sft-nl": (
            [evaluate("sft-nl", out / "sft-nl", f"--samples={args.samples}", "--recovery-k=0")],
            out / "eval" / "sft-nl" / done,
        ),
        "sft-recovery": (
            [sft("sft_nano.yaml", "sft-data-recovery", "sft-recovery")],
            out / "sft-recovery" / "thinc_bench.json",
        ),
        "eval-sft-recovery": (
            [evaluate("sft-recovery", out / "sft-recovery", *trained)],
            out / "eval" / "sft-recovery" / done,
        ),
        "grpo": ([grpo("grpo")], out / "grpo" / "thinc_bench.json"),
        "eval-grpo": (
            [
                evaluate(  # held-out accuracy per stage: stage 2 is the final policy below
                    "grpo-stage1",
                    out / "grpo" / "stage1",
                    f"--samples={args.samples}",
                    "--recovery-k=0",
                    parts="nano_unseen",
                ),
                evaluate("grpo", out / "grpo", *trained),
            ],
            out / "eval" / "grpo" / done,
        ),
        "grpo-inject": (
            [
                grpo(
                    "grpo-inject",
                    "--inject_failures_share",
                    str(args.inject_share),
                    "--inject_failures_k",
                    "1,2",
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


def main(argv: list[str] | None = None) -> int:
    from transformers import HfArgumentParser

    (args,) = HfArgumentParser(NanoArgs).parse_args_into_dataclasses(args=argv)  # type: ignore[arg-type]
    wanted = [s.strip() for s in args.stages.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in STAGES]
    if unknown:
        raise SystemExit(f"--stages: unknown {unknown}; choose from {', '.join(STAGES)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    timings_file = out / "timings.json"
    timings = json.loads(timings_file.read_text()) if timings_file.is_file() else {}
    commands = _commands(args)
    started = time.perf_counter()
    for stage in (s for s in STAGES if s in wanted):
        steps, marker = commands[stage]
        if marker.exists():
            print(f"[nano] {stage}: done ({marker}), skipped", flush=True)
            continue
        print(f"[nano] {stage}", flush=True)
        t0 = time.perf_counter()
        for command in steps:
            print(f"[nano] $ {shlex.join(command)}", flush=True)
            if subprocess.run(command).returncode != 0:
                print(f"[nano] {stage} failed; fix it and rerun (finished stages are kept)", file=sys.stderr)
                return 1
        timings[stage] = round(time.perf_counter() - t0, 1)
        timings_file.write_text(json.dumps(timings, indent=2) + "\n")
        print(f"[nano] {stage}: {timings[stage]:.0f} s", flush=True)
    print(f"[nano] total this run {time.perf_counter() - started:.0f} s; stage times in {timings_file}")
    if "report" in wanted:
        print(f"[nano] report: {args.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
