"""Dynamic sampling as published, on scripted groups whose rewards are known: exact counts of what is
drawn, rolled out, kept and logged."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from thinc_bench.backends import load_generator
from thinc_bench.backends.base import Generator
from thinc_bench.eval.rollout import RolloutLimits
from thinc_bench.sandbox import Sandbox
from thinc_bench.train.curriculum import shuffled_order
from thinc_bench.train.problem_stream import ProblemStream
from thinc_bench.train.rewards import exact_match_reward
from thinc_bench.train.stream_rollout import GENERATED_METRIC, ROUNDS_METRIC, SHORTFALL_METRIC, StreamRollout

# Each problem's two copies: both right (solved), both wrong, or one of each (informative).
KINDS = {"easy": ("7", "7"), "hard": ("8", "8"), "mixed": ("7", "8")}
SEED = 5


class _Copies(Generator):
    """The scripted turns of `<problem>-c<copy>`, the copy being the row's place in its group of 2."""

    def __init__(self, inner: Generator) -> None:
        self._inner = inner

    @property
    def tokenizer(self) -> Any:
        return self._inner.tokenizer

    async def generate(self, prompt_ids, params, *, request_id=None):  # noqa: ANN001, ANN201
        problem, call_index = request_id.rsplit("/", 1)
        call, index = call_index.split("-")
        return await self._inner.generate(
            prompt_ids, params, request_id=f"{problem}-c{int(index) % 2}/{call}"
        )

    async def aclose(self) -> None:
        await self._inner.aclose()

    def describe(self) -> dict:
        return self._inner.describe()


def _problems(kinds: dict[str, str]) -> tuple[dict[str, str], Path]:
    """id -> text for problems of the given kinds ({id: kind}), and their script (gold answer 7)."""
    lines = []
    for pid, kind in kinds.items():
        for copy, answer in enumerate(KINDS[kind]):
            lines.append({"problem_id": f"{pid}-c{copy}", "turns": [f"It is \\boxed{{{answer}}}."]})
    return {pid: f"Problem {pid}: what is 3 + 4?" for pid in kinds}, lines


class _Trainer:
    """What the rollout reads of a one-process trainer: the step, the seed, the metrics."""

    def __init__(self, step: int = 0) -> None:
        from types import SimpleNamespace

        self.state = SimpleNamespace(global_step=step)
        self.args = SimpleNamespace(seed=0, world_size=1, process_index=0)
        self.num_generations = 2
        self._metrics: dict[str, dict[str, list[float]]] = {"train": defaultdict(list)}


def _rollout(tmp_path: Path, kinds: dict[str, str], **options: Any) -> tuple[StreamRollout, Sandbox, dict]:
    texts, lines = _problems(kinds)
    script = tmp_path / "turns.jsonl"
    script.write_text("".join(json.dumps(line) + "\n" for line in lines))
    sandbox = Sandbox()
    rollout = StreamRollout(
        sandbox,
        RolloutLimits(max_tokens=64, max_tool_calls=1),
        "Answer in \\boxed{}.",
        generator=_Copies(load_generator("scripted", str(script))),
        problem_ids={t: pid for pid, t in texts.items()},
        answers={t: "7" for t in texts.values()},
        drawn_log=tmp_path / "drawn.jsonl",
        stream=ProblemStream(tuple(kinds), SEED, drop_solved=not options.get("refill", True)),
        texts=texts,
        **options,
    )
    return rollout, sandbox, texts


def _ids(rollout_out: dict, texts: dict[str, str]) -> list[str]:
    by_text = {t: pid for pid, t in texts.items()}
    return [by_text[t] for t in rollout_out["problem_text"]]


def test_refill_rolls_out_more_problems_until_the_batch_holds_only_informative_groups(tmp_path) -> None:
    kinds = (
        {f"e{i}": "easy" for i in range(4)}
        | {f"h{i}": "hard" for i in range(3)}
        | {f"m{i}": "mixed" for i in range(5)}
    )
    order = shuffled_order(list(kinds), SEED, 1)
    rollout, sandbox, texts = _rollout(tmp_path, kinds, refill=True, max_rounds=10)
    trainer = _Trainer()
    with sandbox:
        out = rollout(["placeholder"] * 4, trainer)  # TRL's rows: 2 groups of 2 on this process
        rollout(["placeholder"] * 4, _Trainer(step=1))
    # Oracle: rounds of 2 problems down the order until 2 mixed ones are held; the first 2 mixed kept.
    rounds, held = 0, []
    while len([p for p in held if kinds[p] == "mixed"]) < 2:
        held += order[2 * rounds : 2 * rounds + 2]
        rounds += 1
    kept = [p for p in held if kinds[p] == "mixed"][:2]
    assert _ids(out, texts) == [p for p in kept for _ in range(2)]
    assert out["answer"] == ["7"] * 4  # the gold of the problem rolled out, not of TRL's row
    table: dict[str, list] = {}  # TRL's completions table, which shows its own "placeholder" prompts
    rewards = exact_match_reward(
        out["completion_ids"],
        log_extra=lambda column, values: table.setdefault(column, []).extend(values),
        **{k: v for k, v in out.items() if k != "completion_ids"},
    )
    assert rewards == [1.0, 0.0, 1.0, 0.0]
    assert table == {"problem": [texts[p] for p in kept for _ in range(2)]}  # the rows' own problems
    metrics = trainer._metrics["train"]
    assert metrics[GENERATED_METRIC] == [2 * rounds] and metrics[ROUNDS_METRIC] == [rounds]
    assert metrics[SHORTFALL_METRIC] == [0]
    line = json.loads((tmp_path / "drawn.jsonl").read_text().splitlines()[0])
    assert line["generated"] == held and line["problems"] == _ids(out, texts)
    # The next batch starts where the refill stopped: nothing drawn twice, nothing skipped.
    second = json.loads((tmp_path / "drawn.jsonl").read_text().splitlines()[1])
    assert second["generated"][:2] == order[2 * rounds : 2 * rounds + 2]


def test_refill_stops_after_max_rounds_and_fills_with_the_first_groups(tmp_path) -> None:
    kinds = {f"e{i}": "easy" for i in range(3)} | {f"h{i}": "hard" for i in range(3)}
    order = shuffled_order(list(kinds), SEED, 1)
    rollout, sandbox, texts = _rollout(tmp_path, kinds, refill=True, max_rounds=3)
    trainer = _Trainer()
    with sandbox:
        out = rollout(["placeholder"] * 4, trainer)
    assert _ids(out, texts) == [p for p in order[:2] for _ in range(2)]
    metrics = trainer._metrics["train"]
    assert (metrics[GENERATED_METRIC], metrics[ROUNDS_METRIC], metrics[SHORTFALL_METRIC]) == ([6], [3], [2])


def test_drop_solved_marks_the_groups_every_rollout_solved_and_skips_them_next_epoch(tmp_path) -> None:
    kinds = {"e0": "easy", "e1": "easy", "h0": "hard", "m0": "mixed"}
    order = shuffled_order(list(kinds), SEED, 2)
    rollout, sandbox, texts = _rollout(tmp_path, kinds, refill=False)
    drawn = []
    with sandbox:
        for step in range(3):
            drawn.append(_ids(rollout(["placeholder"] * 4, _Trainer(step)), texts)[::2])
    assert drawn[0] + drawn[1] == order[:4]  # epoch 1 whole
    assert drawn[2] == [p for p in order[4:] if kinds[p] != "easy"]  # epoch 2 without the solved
    assert rollout.stream is not None and rollout.stream.solved == {"e0", "e1"}


def test_rows_that_are_not_whole_groups_are_refused(tmp_path) -> None:
    from thinc_bench.errors import ConfigError

    rollout, sandbox, _ = _rollout(tmp_path, {"m0": "mixed"}, refill=True)
    with sandbox, pytest.raises(ConfigError, match="3 rows per process do not hold whole groups of 2"):
        rollout(["placeholder"] * 3, _Trainer())
