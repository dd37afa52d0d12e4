"""Build ThinC-SFT data by distilling a teacher: `python -m thinc_bench.build_sft`.

Quick start (offline, the bundled SmolLM2-135M as teacher on 3 local DAPO problems, a few minutes;
almost nothing passes the filters, and stats.json / report.html say why):

    python -m thinc_bench.build_sft

The sources' teacher, source and student (Qwen3.5-27B on DAPO-Math-17k, Qwen3-1.7B's tokenizer; 4 samples
per problem and the teacher's thinking off are our defaults, docs/settings.md):

    python -m thinc_bench.build_sft --teacher Qwen/Qwen3.5-27B --backend vllm --source dapo_math_17k \
        --samples-per-problem 4 --teacher-chat-template-kwargs '{"enable_thinking": false}' \
        --student-tokenizer Qwen/Qwen3-1.7B --out runs/thinc-sft

Generation reuses eval's engine (same backends, rollout, sandbox and grader); every trajectory is
appended to `OUT/rollouts/samples.jsonl` as it finishes, so a rerun resumes, and grades that timed
out or failed are graded again. `--refilter --out OUT [filter flags]` re-applies the filters to the
stored rollouts without generating: every setting comes from the stored build except the flags given
(any spelling argparse accepts; a flag that would change generation is refused). Outputs: `OUT/dataset/`
(`datasets.load_from_disk`), `OUT/thinc_sft.parquet`, `OUT/stats.json`, `OUT/report.html`,
`OUT/README.md` (the dataset card); `--push-to-hub REPO` uploads the dataset and its card.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from thinc_bench.build_sft.config import REFILTER_FIELDS, TEMPLATE_TEACHERS, BuildSFTConfig, default_out
from thinc_bench.errors import ConfigError, ThincError

logger = logging.getLogger("thinc_bench.build_sft")


def _parser(argv: Sequence[str] = ()) -> Any:
    """The CLI's parser; with `--source nano` in argv, its defaults are the nano teacher's (`NANO_CLI`)."""
    from transformers import HfArgumentParser

    from thinc_bench.build_sft.config import NANO_CLI
    from thinc_bench.build_sft.sources import NANO_SOURCE

    parser = HfArgumentParser(
        BuildSFTConfig,  # type: ignore[arg-type]
        prog="python -m thinc_bench.build_sft",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    peek = argparse.ArgumentParser(add_help=False)
    peek.add_argument("--source")
    peek.add_argument("--teacher")
    known, _ = peek.parse_known_args(list(argv))
    if known.source == NANO_SOURCE:
        parser.set_defaults(**NANO_CLI.get(known.teacher or "template", {}))
    return parser


def _given(argv: Sequence[str]) -> dict[str, Any]:
    """The settings given on the command line, by field name, as argparse itself resolved them.

    argparse accepts `--max-plan-share`, `--max_plan_share`, `--max-plan-share=0.4` and unambiguous
    prefixes (`--max-plan`); asking it, rather than reading the strings, honours every one of them.
    """
    if {"-h", "--help"} & set(argv):  # the real parser's help shows the defaults; the probe's would not
        from thinc_bench.cli import one_line_errors

        one_line_errors(_parser(argv)).parse_args(list(argv))
    probe = _parser()
    for action in probe._actions:  # set_defaults(SUPPRESS) would be type-converted; the actions are not
        action.default = argparse.SUPPRESS
    from thinc_bench.cli import one_line_errors, reject_unknown

    one_line_errors(probe)
    namespace, rest = probe.parse_known_args(list(argv))
    reject_unknown(probe, rest)
    given: dict[str, Any] = vars(namespace)
    return given


def _stored_config(given: dict[str, Any]) -> BuildSFTConfig:
    """For --refilter: the stored build's settings, overridden by the refilter flags given now.

    Raises:
        ConfigError: no stored build in --out, or a flag given that changes generation.
    """
    out = Path(given["out"]) if given.get("out") else default_out(given.get("teacher"))
    path = out / "rollouts" / "config.json"
    if not path.is_file():
        raise ConfigError(f"--refilter: {path} does not exist; build into --out first, then refilter it")
    stored = json.loads(path.read_text(encoding="utf-8")).get("build_sft")
    if not isinstance(stored, dict):
        raise ConfigError(f"--refilter: {path} has no build_sft settings; it was not written by build_sft")
    names = {f.name for f in fields(BuildSFTConfig)}
    merged = {k: v for k, v in stored.items() if k in names}
    for name, value in given.items():
        if name not in REFILTER_FIELDS and merged.get(name) != value:
            raise ConfigError(
                f"--refilter: --{name.replace('_', '-')} {value} differs from the stored build's "
                f"{merged.get(name)!r} and changes generation, which --refilter does not redo; drop it, "
                "or build into a new --out"
            )
    stored_share = merged.get("recovery_share", 0.0)
    if (
        merged.get("teacher") in TEMPLATE_TEACHERS
        and given.get("recovery_share", stored_share) != stored_share
    ):
        raise ConfigError(
            f"--refilter: --recovery-share {given['recovery_share']} differs from the stored build's "
            f"{stored_share}, and the template teacher wrote its scripts with it; build into a new --out"
        )
    merged |= {k: v for k, v in given.items() if k in REFILTER_FIELDS}
    merged |= {"out": str(out), "refilter": True, "push_to_hub": given.get("push_to_hub")}
    return BuildSFTConfig(**merged)


def generate(config: BuildSFTConfig, out: Path) -> None:
    """Run every teacher rollout not yet stored in `out/rollouts`, appending each as it finishes."""
    from thinc_bench.eval.run import run_eval
    from thinc_bench.eval.store import RunDir

    problems = config.load_problems(limit=config.limit)
    if config.teacher in TEMPLATE_TEACHERS:  # the script of these problems, written fresh each run
        from thinc_bench import nano

        by_id = {p.id: p for p in nano.generate("train")}
        style = "nl" if config.teacher == "template-nl" else "thinc"
        nano.write_script(
            [by_id[p.id] for p in problems],
            Path(config.teacher_model()),
            style=style,
            seed=config.seed,
            recovery_share=config.recovery_share,
        )
    run = RunDir.open(out / "rollouts", config.generation_settings())
    run.annotate("build_sft", asdict(config))
    logger.info("%d problems x %s samples into %s", len(problems), config.samples_per_problem, run.path)
    asyncio.run(run_eval(config.eval_config(), run, problems, label="build_sft"))


def preflight(config: BuildSFTConfig) -> None:
    """Check what the dataset step reads from outside before hours of generation: the student
    tokenizer, the Hub when decontamination has no local benchmark copies, and that the teacher's
    prompt does not open its own thinking (`teacher_thinking_opens`).

    Raises:
        ConfigError: the student tokenizer cannot be loaded (an unreachable Hub fails in seconds), or
            the teacher's template opens a thinking block its reasoning would fill as the plan.
        DatasetError: the Hub is out of reach and --decontam-data-dir is not given.
    """
    from thinc_bench import hub
    from thinc_bench.backends._sources import load_tokenizer
    from thinc_bench.benchmarks import GENERATED
    from thinc_bench.errors import DatasetError

    names = [b.strip() for b in config.decontam_benchmarks.split(",") if b.strip()]
    from_hub = not config.decontam_data_dir and any(name not in GENERATED for name in names)
    reason = hub.probe_failure() if from_hub else None
    if reason is not None:
        raise DatasetError(
            f"decontamination reads the evaluation benchmarks from the Hugging Face Hub, which cannot be "
            f"reached ({reason}); pass --decontam-data-dir with local copies, e.g. ../shared/data/benchmarks"
        )
    load_tokenizer(config.student_tokenizer_path())
    if teacher_thinking_opens(config) and not config.teacher_thinks:
        raise ConfigError(
            f"--teacher {config.teacher}: its chat template opens its own thinking (the prompt ends in <think>) "
            f"with --teacher-chat-template-kwargs {config.teacher_chat_template_kwargs or '{}'}, so its reasoning "
            """would become the ThinC plan; pass '{"enable_thinking": false}' (Qwen3 and Qwen3.5 templates), """
            "or --teacher-thinks to train on what follows its </think>"
        )


def teacher_thinking_opens(config: BuildSFTConfig) -> bool:
    """Whether the teacher's rendered prompt (its own tokenizer and chat template, the build's system
    prompt and template variables) ends in an open `<think>`: a template that thinks by default
    (Qwen3.5 without `enable_thinking=false`, Qwen3-Thinking-2507 always). False for the bundled demo
    and the template teachers, which have no thinking mode."""
    if config.teacher is None or config.teacher in TEMPLATE_TEACHERS:
        return False
    from thinc_bench.backends._sources import load_tokenizer, smollm2_gguf
    from thinc_bench.prompts import build_messages, load_system_prompt, python_tool
    from thinc_bench.prompts.chat import opened_plan, parse_template_kwargs, render_prompt_ids

    eval_config = config.eval_config()
    default = (
        str(smollm2_gguf()) if config.backend == "scripted" else str(eval_config.model)
    )  # as the backend
    tokenizer = load_tokenizer(config.tokenizer or default, config.revision)
    messages = build_messages("What is 1 + 1?", load_system_prompt(str(eval_config.system_prompt)))
    tools = [python_tool(config.tool_name)] if config.dialect == "tool_call" else None
    kwargs = parse_template_kwargs(config.teacher_chat_template_kwargs)
    return opened_plan(tokenizer, render_prompt_ids(tokenizer, messages, kwargs, tools))


def regrade(out: Path) -> int:
    """Grade again the stored trajectories whose grading failed (a worker crash); return how many were.

    A new verdict is appended to samples.jsonl (the last record of a sample wins); one that is
    still an error is not, so the next run tries again. A grader timeout is a verdict, not retried.
    """
    from thinc_bench.build_sft.filters import UNGRADED_STATUSES
    from thinc_bench.eval.store import RunDir
    from thinc_bench.grading import Grader, GradeRequest

    run_config = json.loads((out / "rollouts" / "config.json").read_text(encoding="utf-8"))
    run = RunDir(out / "rollouts", run_config)
    todo = [r for r in run.records() if r.status in UNGRADED_STATUSES]
    if not todo:
        return 0
    with Grader() as grader:
        verdicts = grader.grade_many([GradeRequest(gold=r.gold, pred=r.text) for r in todo])
    for record, verdict in zip(todo, verdicts, strict=True):
        if verdict.status not in UNGRADED_STATUSES:
            run.append(
                dataclasses.replace(
                    record, status=verdict.status, answer=verdict.answer, correct=verdict.correct
                )
            )
    logger.info("graded %d ungraded trajectories again", len(todo))
    return len(todo)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        given = _given(args)
        if given.get("refilter"):
            config = _stored_config(given)
        else:
            from thinc_bench.cli import parse_dataclasses

            (config,) = parse_dataclasses(_parser(args), args)
        logging.basicConfig(
            level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        from thinc_bench.cli import quiet_libraries

        quiet_libraries(verbose=config.log_level.lower() in ("debug", "info"))
        return _main(config)
    except ThincError as exc:
        print(f"error: {exc}", file=sys.stderr)  # noqa: T201 - the CLI owns the terminal
        return 2


def _main(config: BuildSFTConfig) -> int:
    from thinc_bench.build_sft.dataset import finish, format_funnel, push

    started = time.perf_counter()
    out = config.out_dir()
    if not config.refilter:
        preflight(config)
        generate(config, out)
    regrade(out)
    stats = finish(config, out)
    if config.push_to_hub:
        push(out, config.push_to_hub)
    print(format_funnel(stats))  # noqa: T201 - the CLI owns the terminal
    print(f"build: {out}  report: {out / 'report.html'}  ({time.perf_counter() - started:.0f} s)")  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
