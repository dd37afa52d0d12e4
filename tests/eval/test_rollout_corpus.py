"""The rollout, driven by scripted turns from tests/data/parse, runs exactly the expected code (issue 22).

Each case's turns are what a real model writes (fence variants, open blocks, drafts in the plan,
mentions of the output opener ...); the real sandbox runs what the rollout chooses, so the final text,
the executed code and the stop reason are checked end to end.

Run as a script to score any checkout on the corpus (only APIs that predate issue 22 are used):
    PYTHONPATH=/path/to/checkout python tests/eval/test_rollout_corpus.py
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from thinc_bench import trajectory
from thinc_bench.backends import SamplingParams
from thinc_bench.backends.scripted import ScriptedGenerator
from thinc_bench.eval.rollout import RolloutLimits, RolloutResult, render_prompt, rollout
from thinc_bench.prompts import build_messages
from thinc_bench.sandbox import Sandbox, SandboxConfig

CORPUS = Path(__file__).resolve().parents[1] / "data" / "parse"
FAMILIES = sorted(p.stem for p in CORPUS.glob("*.jsonl"))
PARAMS = SamplingParams(temperature=0.0, max_tokens=4096)


def _cases(family: str) -> list[dict]:
    lines = (CORPUS / f"{family}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _script(family: str, folder: Path) -> Path:
    path = folder / f"{family}.jsonl"
    lines = [json.dumps({"problem_id": c["id"], "turns": c["turns"]}) for c in _cases(family)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


async def _run_case(generator: ScriptedGenerator, sandbox: Sandbox, case: dict) -> RolloutResult:
    prompt = render_prompt(generator, build_messages("Compute 17 * 23.", ""))
    with sandbox.session() as session:
        return await rollout(
            generator,
            session,
            prompt,
            PARAMS,
            limits=RolloutLimits(),
            dialect=case["dialect"],
            exec_on=case["exec_on"],
            request_id=f"{case['id']}/0",
        )


def score(case: dict, result: RolloutResult) -> list[str]:
    """What differs from the case's expectation (empty: the case passes)."""
    problems = []
    if result.text != case["text"]:
        problems.append(f"text {result.text!r}")
    if result.stop_reason != case["stop_reason"]:
        problems.append(f"stop_reason {result.stop_reason}")
    failed = trajectory.check_conformance(trajectory.parse(result.text, case["dialect"])).failed
    if failed != case["failed"]:
        problems.append(f"conformance {failed}")
    return problems


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig()) as sb:
        yield sb


@pytest.mark.parametrize("family", FAMILIES)
def test_rollout_runs_exactly_the_expected_code(family: str, sandbox: Sandbox, tmp_path: Path) -> None:
    generator = ScriptedGenerator(_script(family, tmp_path))
    for case in _cases(family):
        result = asyncio.run(_run_case(generator, sandbox, case))
        assert [e.code for e in result.executions] == case["codes"], case["id"]
        assert score(case, result) == [], case["id"]


def main() -> None:
    """Print per family how many cases a checkout passes (text, stop reason and conformance)."""
    import tempfile

    passed = total = 0
    with tempfile.TemporaryDirectory() as folder, Sandbox(SandboxConfig()) as sb:
        for family in FAMILIES:
            generator = ScriptedGenerator(_script(family, Path(folder)))
            ok = 0
            for case in _cases(family):
                try:
                    problems = score(case, asyncio.run(_run_case(generator, sb, case)))
                except Exception as exc:  # a checkout that cannot run a case fails it
                    problems = [f"{type(exc).__name__}: {exc}"]
                ok += not problems
                if problems and "-v" in sys.argv:
                    print(f"  {family}/{case['id']}: {problems[0][:160]}")
            print(f"{family:16s} {ok}/{len(_cases(family))}")
            passed, total = passed + ok, total + len(_cases(family))
    print(f"{'total':16s} {passed}/{total}")


if __name__ == "__main__":
    main()


def _scripted(tmp_path: Path, turns: list[str]) -> ScriptedGenerator:
    script = tmp_path / "turns.jsonl"
    script.write_text(json.dumps({"problem_id": "p", "turns": turns}) + "\n", encoding="utf-8")
    return ScriptedGenerator(script)


def test_blocks_before_one_output_run_in_order_up_to_the_first_failure(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    generator = _scripted(
        tmp_path,
        ["```python\nx = 1 / 0\n```\n```python\nprint('never')\n```\n```output", "\\boxed{0}"],
    )
    case = {"id": "p", "dialect": "markdown", "exec_on": "output_open"}
    result = asyncio.run(_run_case(generator, sandbox, case))
    assert [(e.status, e.code) for e in result.executions] == [("error", "x = 1 / 0")]
    (output,) = trajectory.parse(result.text).outputs
    assert "ZeroDivisionError" in output and "never" not in output


def test_a_prompt_that_opens_think_keeps_closed_drafts_from_running(sandbox: Sandbox, tmp_path: Path) -> None:
    draft = "Draft:\n```python\nprint(17 * 20)\n```\n"
    real = "</think>\n```python\nprint(17 * 23)\n```\n"
    generator = _scripted(tmp_path, [draft, real, "\\boxed{391}"])
    prompt = render_prompt(generator, build_messages("Compute 17 * 23.", ""))
    prompt += generator.tokenizer.encode(
        "<think>\n", add_special_tokens=False
    )  # as R1 distills' templates do

    async def go() -> RolloutResult:
        with sandbox.session() as session:
            return await rollout(
                generator,
                session,
                prompt,
                PARAMS,
                limits=RolloutLimits(),
                exec_on="code_close",
                request_id="p/0",
            )

    result = asyncio.run(go())
    assert [e.code for e in result.executions] == ["print(17 * 23)"]
    assert result.text == draft + real + "```output\n391\n```\n\\boxed{391}"


def test_a_turn_ended_after_the_fence_goes_on_without_its_end_of_turn_token(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    generator = _scripted(tmp_path, ["```python\nprint(17 * 23)\n```", "\\boxed{391}"])
    case = {"id": "p", "dialect": "markdown", "exec_on": "output_open"}
    result = asyncio.run(_run_case(generator, sandbox, case))
    eos = generator.tokenizer.eos_token_id
    assert result.completion_ids.count(eos) == 1 and result.completion_ids[-1] == eos
    assert len(result.env_mask) == len(result.completion_ids) and result.stop_reason == "answer"
    assert result.text == "```python\nprint(17 * 23)\n```\n```output\n391\n```\n\\boxed{391}"
