"""The GRPO curriculum: the YAML's stages and loud errors on bad ones; stages laid over one shuffled order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from thinc_bench.errors import ConfigError
from thinc_bench.train import Curriculum, Stage, load_curriculum, split_recipe_config
from thinc_bench.train.curriculum import plan_stages, read_order, shuffled_order, stage_at, write_order

CONFIGS = Path(__file__).resolve().parents[2] / "recipes" / "configs"


@pytest.mark.parametrize("name", ["grpo_qwen3_4b_thinking.yaml", "grpo_qwen3_1.7b.yaml"])
def test_paper_configs_yield_three_stages_with_rising_context_and_tool_limits(name) -> None:
    curriculum = load_curriculum(CONFIGS / name)
    assert curriculum.stages == (
        Stage("stage1", 280, 16384, 16),
        Stage("stage2", 120, 24576, 24),
        Stage("stage3", None, 32768, 32),
    )
    assert curriculum.index("stage2") == 1


def test_split_leaves_trl_only_its_own_keys(tmp_path) -> None:
    trl_config, curriculum = split_recipe_config(CONFIGS / "grpo_qwen3_4b_thinking.yaml")
    assert "curriculum" not in trl_config
    assert trl_config["loss_type"] == "dapo" and trl_config["epsilon_high"] == 0.28
    assert curriculum is not None and len(curriculum.stages) == 3


def _write(tmp_path: Path, stages: object) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"seed": 0, "curriculum": stages}))
    return path


def test_only_the_last_stage_may_run_on_the_rest_of_the_data(tmp_path) -> None:
    stages = [
        {"name": "a", "max_steps": None, "max_tokens": 10, "max_tool_calls": 1},
        {"name": "b", "max_steps": 1, "max_tokens": 20, "max_tool_calls": 1},
    ]
    with pytest.raises(ConfigError, match="only the last stage"):
        load_curriculum(_write(tmp_path, stages))


def test_a_stage_that_lowers_the_context_is_refused(tmp_path) -> None:
    stages = [
        {"name": "a", "max_steps": 1, "max_tokens": 20, "max_tool_calls": 1},
        {"name": "b", "max_steps": None, "max_tokens": 10, "max_tool_calls": 1},
    ]
    with pytest.raises(ConfigError, match="lowers max_tokens"):
        load_curriculum(_write(tmp_path, stages))


def test_unknown_stage_key_is_an_error(tmp_path) -> None:
    stages = [{"name": "a", "max_steps": 1, "max_tokens": 20, "max_tool_calls": 1, "lr": 1}]
    with pytest.raises(ConfigError, match="unknown keys"):
        load_curriculum(_write(tmp_path, stages))


def test_a_stage_may_set_its_own_failure_injection_and_inherits_the_recipes_otherwise(tmp_path) -> None:
    from thinc_bench.train.injection import FailureInjection

    stages = [
        {"name": "a", "max_steps": 1, "max_tokens": 20, "max_tool_calls": 1},
        {"name": "b", "max_steps": 1, "max_tokens": 20, "max_tool_calls": 2, "inject_failures_share": 0.5},
        {
            "name": "c",
            "max_tokens": 30,
            "max_tool_calls": 3,
            "inject_failures_k": "1,2",
            "inject_failures_share": 0,
        },
    ]
    a, b, c = load_curriculum(_write(tmp_path, stages)).stages
    recipe = FailureInjection(0.25, (3,), seed=9)
    assert a.injection(recipe) == recipe
    assert b.injection(recipe) == FailureInjection(0.5, (3,), seed=9)
    assert c.injection(recipe) == FailureInjection(0.0, (1, 2), seed=9) and not c.injection(recipe).active
    bad = [{"name": "a", "max_tokens": 20, "max_tool_calls": 1, "inject_failures_k": 0}]
    with pytest.raises(ConfigError, match="curriculum stage 1: inject_failures_k=0"):
        load_curriculum(_write(tmp_path, bad))
    bad = [{"name": "a", "max_tokens": 20, "max_tool_calls": 1, "inject_failures_share": 2}]
    with pytest.raises(ConfigError, match="curriculum stage 1: inject_failures_share=2"):
        load_curriculum(_write(tmp_path, bad))


def test_resuming_at_a_missing_stage_names_the_stages(tmp_path) -> None:
    with pytest.raises(ConfigError, match="stage1, stage2, stage3"):
        load_curriculum(CONFIGS / "grpo_qwen3_1.7b.yaml").index("stage4")


# --- stages laid out over one run: steps, disjoint problem slices, the recorded order ---------------


def _three(first: int, second: int) -> Curriculum:
    return Curriculum(
        (
            Stage("stage1", first, 10, 1),
            Stage("stage2", second, 20, 2),
            Stage("stage3", None, 30, 3),
        )
    )


def test_paper_stages_run_their_steps_and_the_last_takes_every_whole_step_left() -> None:
    # 4 epochs of the 16,690 local DAPO problems, 128 prompts and 2 optimizer steps per generation batch.
    plans = plan_stages(load_curriculum(CONFIGS / "grpo_qwen3_4b_thinking.yaml"), 4 * 16_690, 128, 2)
    assert [p.batches for p in plans] == [280, 120, 121]  # 15,560 rows left for stage 3: 121 whole batches
    assert [(p.first_step, p.steps) for p in plans] == [(0, 560), (560, 240), (800, 242)]
    assert [(p.first_row, p.rows) for p in plans] == [(0, 35_840), (35_840, 15_360), (51_200, 15_488)]
    assert plans[-1].end_step == 1042


def test_stage_slices_are_disjoint_and_cover_all_but_a_partial_step() -> None:
    plans = plan_stages(_three(2, 1), 23, 3)  # 6 + 3 problems, then 4 whole steps of 3; 2 problems unused
    slices = [set(range(p.first_row, p.first_row + p.rows)) for p in plans]
    assert all(not (a & b) for i, a in enumerate(slices) for b in slices[i + 1 :])
    assert set().union(*slices) == set(range(21))
    assert [p.steps for p in plans] == [2, 1, 4]


def test_a_stage_that_needs_more_problems_than_are_left_is_refused() -> None:
    with pytest.raises(ConfigError, match="stage 'stage2' needs 5 steps x 4 prompts but only 12 of 20"):
        plan_stages(_three(2, 5), 20, 4)
    with pytest.raises(ConfigError, match="stage 'stage3' needs 1 steps x 4 prompts but only 3 of 15"):
        plan_stages(_three(2, 1), 15, 4)  # 12 used, 3 left: not one whole step for the last stage
    with pytest.raises(ConfigError, match="0 prompts and 1 updates per generation batch"):
        plan_stages(_three(1, 1), 20, 0)
    with pytest.raises(ConfigError, match="raise epochs"):
        plan_stages(_three(2, 5), 20, 4, 2)


def test_updates_per_batch_multiply_the_optimizer_steps_not_the_rows() -> None:
    plans = plan_stages(_three(2, 1), 20, 3, 2)  # 6 + 3 rows, then 3 whole batches of the 11 left
    assert [(p.batches, p.first_step, p.steps) for p in plans] == [(2, 0, 4), (1, 4, 2), (3, 6, 6)]
    assert [(p.first_row, p.rows) for p in plans] == [(0, 6), (6, 3), (9, 9)]
    assert [stage_at(plans, s).stage.name for s in range(12)] == ["stage1"] * 4 + ["stage2"] * 2 + [
        "stage3"
    ] * 6


def test_the_stage_of_a_step_switches_exactly_at_the_boundary() -> None:
    plans = plan_stages(_three(2, 1), 20, 2)
    assert [stage_at(plans, s).stage.name for s in range(12)] == ["stage1"] * 2 + ["stage2"] + ["stage3"] * 9


def test_order_is_a_seeded_permutation() -> None:
    ids = [f"p{i}" for i in range(50)]
    order = shuffled_order(ids, 7)
    assert sorted(order) == sorted(ids) and order != ids
    assert shuffled_order(ids, 7) == order and shuffled_order(ids, 8) != order
    with pytest.raises(ConfigError, match="ids repeat"):
        shuffled_order(["a", "b", "a"], 0)


def test_epochs_repeat_every_problem_each_shuffled_anew_and_keep_the_first_epoch() -> None:
    ids = [f"p{i}" for i in range(30)]
    order = shuffled_order(ids, 3, epochs=3)
    assert len(order) == 90 and order[:30] == shuffled_order(ids, 3)
    assert all(sorted(order[e * 30 : (e + 1) * 30]) == sorted(ids) for e in range(3))
    assert order[30:60] != order[:30] and order[60:] != order[30:60]
    with pytest.raises(ConfigError, match="epochs=0"):
        shuffled_order(ids, 3, epochs=0)


def test_recorded_order_reads_back_and_a_missing_one_says_how_to_resume(tmp_path) -> None:
    order = shuffled_order([f"p{i}" for i in range(9)], 1)
    plans = plan_stages(_three(1, 1), 9, 3)
    path = tmp_path / "order.json"
    write_order(path, order, plans, seed=1)
    assert read_order(path) == order
    recorded = json.loads(path.read_text())["stages"]
    assert [s["rows"] for s in recorded] == [[0, 3], [3, 6], [6, 9]]
    with pytest.raises(ConfigError, match="--start_stage resumes only in the output_dir"):
        read_order(tmp_path / "absent.json")
    path.write_text(json.dumps({"order": [1, 2]}))
    with pytest.raises(ConfigError, match="not a list of problem ids"):
        read_order(path)


def test_ids_kept_together_stay_side_by_side_in_their_order_and_the_rest_is_the_plain_shuffle() -> None:
    ids = [f"p{i}" for i in range(20)]
    together = {f"p{i}": f"pair{i // 2}" for i in range(12)}  # p0-p11 in pairs, p12-p19 alone
    order = shuffled_order(ids, 5, epochs=2, together=together)
    assert len(order) == 40 and sorted(order[:20]) == sorted(ids) and order[:20] != order[20:]
    for epoch in (order[:20], order[20:]):
        for i in range(0, 12, 2):
            at = epoch.index(f"p{i}")
            assert epoch[at + 1] == f"p{i + 1}"  # the pair's first member, then its second
    assert shuffled_order(ids, 5, together={}) == shuffled_order(ids, 5)  # nothing together: as before
    assert shuffled_order(ids, 5, together=together) == order[:20]  # seeded
