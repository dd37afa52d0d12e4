"""The template teacher through build_sft: every ThinC script runs in the real sandbox, passes every
filter and teaches 3 executed blocks; the NL-only twin has no code and the same boxed answers."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from thinc_bench import nano, trajectory
from thinc_bench.build_sft.__main__ import main as build_sft
from thinc_bench.build_sft.config import BuildSFTConfig
from thinc_bench.errors import ConfigError

N = 24
"""Three problems of each of the 8 families: with 2 variants per block, most combinations run."""


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("nano-build")
    out = {}
    for teacher in ("template", "template-nl"):
        out[teacher] = root / teacher
        assert (
            build_sft(
                ["--source", "nano", "--teacher", teacher, "--limit", str(N), "--out", str(out[teacher])]
            )
            == 0
        )
    return out


def test_every_thinc_trajectory_runs_clean_and_is_kept(builds) -> None:
    stats = json.loads((builds["template"] / "stats.json").read_text())
    assert stats["counts"] == {"problems": N, "trajectories": N, "kept": N, "kept_problems": N}
    rows = datasets.load_from_disk(str(builds["template"] / "dataset"))
    gold = {p.id: str(p.answer) for p in nano.generate("train", N)}
    for row in rows:
        text = row["messages"][-1]["content"]
        parsed = trajectory.parse(text)
        outputs = [s.content.strip() for s in parsed.segments if s.kind == "output"]
        # compute, check another way, print: the interpreter printed the answer, True, the answer
        assert outputs == [gold[row["id"]], "True", gold[row["id"]]], text
        assert text.rstrip().endswith(f"\\boxed{{{gold[row['id']]}}}")
        assert row["n_code_blocks"] == 3 and row["plan_share"] < 0.5
        assert row["messages"][0] == {
            "role": "system",
            "content": (Path(nano.__file__).parents[1] / "prompts" / "nano.txt").read_text().strip(),
        }


def test_the_scripts_vary_their_code(builds) -> None:
    rows = datasets.load_from_disk(str(builds["template"] / "dataset"))
    firsts = {}
    for row in rows:
        code = next(s["text"] for s in row["segments"] if s["kind"] == "code")
        firsts.setdefault(row["id"], code)
    shapes = {c.splitlines()[1] for c in firsts.values()}  # the comment line names the method
    assert len(shapes) >= 10


def test_the_nl_twin_has_no_code_and_the_same_answers(builds) -> None:
    stats = json.loads((builds["template-nl"] / "stats.json").read_text())
    assert stats["counts"]["kept"] == N
    assert "natural-language-only" in stats["teacher"]["model"]
    assert "natural-language-only" in (builds["template-nl"] / "README.md").read_text()
    thinc = {r["id"]: r["answer"] for r in datasets.load_from_disk(str(builds["template"] / "dataset"))}
    for row in datasets.load_from_disk(str(builds["template-nl"] / "dataset")):
        text = row["messages"][-1]["content"]
        assert "```" not in text and row["n_code_blocks"] == 0 and row["n_tool_calls"] == 0
        assert text.endswith(f"\\boxed{{{thinc[row['id']]}}}")


def test_the_nano_card_and_report_name_the_dataset_and_say_decontamination_did_not_run(builds) -> None:
    card = (builds["template"] / "README.md").read_text()
    assert "pretty_name: ThinC-SFT-nano" in card and "# ThinC-SFT-nano" in card
    assert "Decontamination: **not run** (nano's train and test splits are disjoint by construction" in card
    assert "against ." not in card and "| decontamination | 0 | 24 | **not run**" in card
    report = (builds["template"] / "report.html").read_text()
    assert "<h1>ThinC-SFT-nano build</h1>" in report
    assert "<b>Not run</b> (nano&#39;s train and test splits" in report and "against ;" not in report


def test_template_teachers_belong_to_the_nano_source() -> None:
    with pytest.raises(ConfigError, match="--source nano"):
        BuildSFTConfig(teacher="template", source="dapo_math_17k")
    config = BuildSFTConfig(source="nano")
    assert (config.teacher, config.backend, config.limit, config.few_shot) == ("template", "scripted", 256, 0)


SHARE = 0.3


def _first_of_each_family() -> list[nano.NanoProblem]:
    """The first train problem of each family, and of each range family one of each bound."""
    firsts: dict[tuple[str, object], nano.NanoProblem] = {}
    for p in nano.generate("train", 40):
        firsts.setdefault((p.family, p.meta.get("lo_open")), p)
    return list(firsts.values())


def test_every_slip_fails_for_real_and_its_fix_runs_and_passes_the_check() -> None:
    from thinc_bench.nano.teacher import _CHECK, SLIPS, code_numbers
    from thinc_bench.sandbox import Sandbox

    problems = _first_of_each_family()
    assert sorted({p.family for p in problems}) == sorted(nano.FAMILY_NAMES)
    assert len(problems) == len(nano.FAMILY_NAMES) + 2  # the range families both ways
    kinds = set()
    with Sandbox() as sandbox:
        for p in problems:
            values = code_numbers(p)
            for i, slip in enumerate(SLIPS[p.family]):
                with sandbox.session() as session:
                    failed = session.run(slip.code.format(**values))
                    assert failed.status == "error", (p.family, slip.code)
                    assert failed.output.strip().splitlines()[-1].startswith(f"{slip.kind}:"), failed.output
                    fixed = session.run(slip.fix.format(**values))
                    assert (fixed.status, fixed.output.strip()) == ("ok", str(p.answer)), slip.fix
                    assert slip.fix.startswith("# fix: ")
                    check = _CHECK[p.family][i % 2].format(**values)  # the state the checks read is there
                    assert session.run(check).output.strip() == "True", (slip.fix, check)
                kinds.add(slip.kind)
    assert kinds == {
        "NameError",
        "SyntaxError",
        "TypeError",
        "AttributeError",
        "ModuleNotFoundError",
        "RecursionError",
    }


def test_recovery_plans_draw_the_share_per_problem_and_a_third_fail_twice() -> None:
    problems = nano.generate("train")  # the 2,000 train problems
    plans = [nano.recovery_plan(p, 0, SHARE) for p in problems]
    chosen = [plan for plan in plans if plan is not None]
    assert 0.27 < len(chosen) / len(problems) < 0.33
    assert 0.28 < sum(len(plan.slips) == 2 for plan in chosen) / len(chosen) < 0.39
    assert 0.28 < sum(plan.again for plan in chosen) / len(chosen) < 0.39
    assert all(len({s.kind for s in plan.slips}) == len(plan.slips) for plan in chosen)  # two different slips
    # per problem: the problems chosen at 0.2 are among those chosen at 0.3, none at 0, all at 1
    at_02 = {p.id for p in problems if nano.recovery_plan(p, 0, 0.2) is not None}
    at_03 = {p.id for p, plan in zip(problems, plans, strict=True) if plan is not None}
    assert at_02 < at_03 and len(at_02) < len(at_03)
    assert all(nano.recovery_plan(p, 0, 0.0) is None for p in problems[:100])
    assert all(nano.recovery_plan(p, 0, 1.0) is not None for p in problems[:100])
    assert {p.id for p in problems[:200] if nano.recovery_plan(p, 1, SHARE)} != at_03 & {
        p.id for p in problems[:200]
    }
    with pytest.raises(ValueError, match="recovery share"):
        nano.recovery_plan(problems[0], 0, 1.5)


def test_a_recovery_script_is_the_clean_script_with_its_failed_attempts_first() -> None:
    for p in nano.generate("train", 200):
        clean, turns = nano.thinc_turns(p, 0), nano.thinc_turns(p, 0, recovery_share=SHARE)
        plan = nano.recovery_plan(p, 0, SHARE)
        if plan is None:
            assert turns == clean
            continue
        failures = len(plan.slips)
        assert len(turns) == len(clean) + failures
        assert turns[0].startswith(clean[0].split("```python")[0])  # the same plan opens the first attempt
        assert turns[failures + 1 :] == clean[1:]  # then the same check, print and box
        rewrite = turns[failures]
        assert (rewrite == clean[0].split("</think>\n")[1]) == plan.again or rewrite.startswith(
            "```python\n# fix: "
        )
        assert all(t.endswith("```\n```output") for t in turns[:-1])


@pytest.fixture(scope="module")
def recovery(builds: dict[str, Path]) -> Path:
    out = builds["template"].parent / "template-recovery"
    args = ["--source", "nano", "--limit", str(N), "--recovery-share", str(SHARE), "--out", str(out)]
    assert build_sft(args) == 0
    return out


def _records(out: Path) -> dict[str, dict]:
    lines = (out / "rollouts" / "samples.jsonl").read_text().splitlines()
    return {r["problem_id"]: r for r in map(json.loads, lines)}


def test_recovered_trajectories_failed_in_the_sandbox_then_fixed_and_are_kept(recovery: Path) -> None:
    from thinc_bench import grading
    from thinc_bench.sandbox import Sandbox

    problems = nano.generate("train", N)
    plans = {p.id: nano.recovery_plan(p, 0, SHARE) for p in problems}
    stats = json.loads((recovery / "stats.json").read_text())
    assert stats["counts"] == {"problems": N, "trajectories": N, "kept": N, "kept_problems": N}
    n_recovered = sum(plan is not None for plan in plans.values())
    assert 4 <= n_recovered <= 11  # 0.3 of 24, give or take the draw
    assert stats["recovery"] | {"failed_executions_kept": None} == {
        "share": SHARE,
        "capped": False,
        "recovered": n_recovered,
        "over_cap": 0,
        "kept": n_recovered,
        "kept_share": n_recovered / N,
        "failed_executions_kept": None,
    }
    script = (recovery / "teacher_turns.jsonl").read_text()
    records = _records(recovery)
    rows = {r["id"]: r for r in datasets.load_from_disk(str(recovery / "dataset"))}
    gold = {p.id: str(p.answer) for p in problems}
    seen_kinds = set()
    with Sandbox() as sandbox:
        for pid, plan in plans.items():
            text = rows[pid]["messages"][-1]["content"]
            parsed = trajectory.parse(text)
            outputs = [s.content.strip() for s in parsed.segments if s.kind == "output"]
            failures = 0 if plan is None else len(plan.slips)
            assert records[pid]["exec_statuses"] == ["error"] * failures + ["ok"] * 3
            assert outputs[failures:] == [gold[pid], "True", gold[pid]], text
            assert text.rstrip().endswith(f"\\boxed{{{gold[pid]}}}")
            assert trajectory.check_conformance(parsed, min_code_blocks=3).failed == [], text
            assert grading.grounded(records[pid]["answer"], outputs[failures:]) is True
            if plan is None:
                assert "Error" not in text
                continue
            for slip, output in zip(plan.slips, outputs, strict=False):
                # the teacher never wrote the traceback: the sandbox did (and does again, below)
                assert output.splitlines()[-1].startswith(f"{slip.kind}:") and output not in script
                seen_kinds.add(slip.kind)
            with sandbox.session() as session:
                assert [session.run(code).output.strip() for code in parsed.code_blocks] == outputs
    assert len(seen_kinds) >= 3
    card, report = (recovery / "README.md").read_text(), (recovery / "report.html").read_text()
    assert f"Recovered trajectories (`--recovery-share 0.3`): **{n_recovered} of the {N} kept**" in card
    assert (
        "--recovery-share 0.3</code>): <b>" in report
        and "recovered trajectories kept: --recovery-share 0.3" in report
    )


def test_recovered_rows_mask_every_interpreter_token_and_each_failed_block(recovery: Path) -> None:
    from thinc_bench.backends import smollm2_gguf
    from thinc_bench.backends._sources import load_tokenizer
    from thinc_bench.prompts import render_prompt_ids

    tokenizer = load_tokenizer(str(smollm2_gguf()))
    rows = [r for r in datasets.load_from_disk(str(recovery / "dataset")) if r["n_tool_calls"] > 3]
    assert rows
    for row in rows:
        n = len(render_prompt_ids(tokenizer, row["messages"][:2]))
        ids, mask = row["input_ids"][n:-1], row["assistant_masks"][n:-1]
        harness = "".join(tokenizer.decode([t]) for t, m in zip(ids, mask, strict=True) if not m)
        model = "".join(tokenizer.decode([t]) for t, m in zip(ids, mask, strict=True) if m)
        segments = trajectory.parse(row["messages"][-1]["content"]).segments
        stop = nano.teacher.OUTPUT_OPEN
        # A failed block (its code, what lies between, its output) is context: the slip is not trained.
        failed: set[int] = set()
        for i, segment in enumerate(segments):
            if segment.kind == "output" and ("Traceback" in segment.raw or "SyntaxError" in segment.raw):
                code = max(j for j in range(i) if segments[j].kind == "code")
                failed.update(range(code, i + 1))
        assert failed
        want_harness, want_model = [], []
        for i, segment in enumerate(segments):
            if i in failed:
                want_harness.append(segment.raw)
            elif segment.kind == "output":
                want_model.append(segment.raw[: len(stop)])
                want_harness.append(segment.raw[len(stop) :])
            else:
                want_model.append(segment.raw)
        assert harness == "".join(want_harness) and model == "".join(want_model)
        assert "Traceback" in harness or "SyntaxError" in harness
        assert "Traceback" not in model and "SyntaxError" not in model  # the model wrote no traceback


def test_without_the_flag_nothing_changes_and_with_it_only_the_chosen_problems(builds, recovery) -> None:
    clean = {r["id"]: r for r in datasets.load_from_disk(str(builds["template"] / "dataset"))}
    rows = {r["id"]: r for r in datasets.load_from_disk(str(recovery / "dataset"))}
    for p in nano.generate("train", N):
        same = rows[p.id]["messages"] == clean[p.id]["messages"]
        assert same == (nano.recovery_plan(p, 0, SHARE) is None), p.id
    stats = json.loads((builds["template"] / "stats.json").read_text())
    assert (stats["recovery"]["share"], stats["recovery"]["kept"]) == (0.0, 0)
    assert "Recovered" not in (builds["template"] / "README.md").read_text()
    assert (
        "recovery_share"
        not in json.loads((builds["template"] / "rollouts" / "config.json").read_text())["settings"]
    )


def test_another_share_is_refused_on_resume_and_refilter(recovery: Path, capsys) -> None:
    samples = (recovery / "rollouts" / "samples.jsonl").read_bytes()
    capsys.readouterr()
    resume = ["--source", "nano", "--limit", str(N), "--recovery-share", "0.5", "--out", str(recovery)]
    assert build_sft(resume) == 2
    assert "holds a run with other settings (differ: recovery_share)" in capsys.readouterr().err
    assert build_sft(["--refilter", "--out", str(recovery), "--recovery-share", "0.5"]) == 2
    assert "the template teacher wrote its scripts with it" in capsys.readouterr().err
    assert (recovery / "rollouts" / "samples.jsonl").read_bytes() == samples


def test_recovery_share_settings() -> None:
    config = BuildSFTConfig(source="nano", recovery_share=0.3)
    assert config.max_tool_calls == 3 + nano.teacher.MAX_FAILED_ATTEMPTS + 1  # the nano eval's 6
    assert BuildSFTConfig(source="nano").max_tool_calls == 4
    with pytest.raises(ConfigError, match="template-nl runs no code"):
        BuildSFTConfig(source="nano", teacher="template-nl", recovery_share=0.3)
    with pytest.raises(ConfigError, match="--recovery-share 1.2"):
        BuildSFTConfig(source="nano", recovery_share=1.2)
