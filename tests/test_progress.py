"""A long job shows life before its first trajectory finishes (issue 54: the README's main job sat at
`eval: 0%| | 0/4` for 24 minutes, so a hang and a slow CPU looked the same).

`Progress` is checked against numbers worked out by hand on a clock the test moves; the bar against
what it writes; the backends' token counter against the tokens their generations hold.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from thinc_bench.progress import Progress, ProgressBar, format_duration


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_before_any_trajectory_finishes_the_bar_moves_with_tokens_and_bounds_the_eta() -> None:
    clock = Clock()
    p = Progress(4, max_tokens=1000, clock=clock)
    assert p.summary() == "0/4 traj, 0 tok" and p.fraction() == 0.0 and p.eta() is None
    clock.now += 5  # loading the model: no token yet
    p.saw_tokens(200)  # the first tokens
    clock.now += 10
    p.saw_tokens(600)
    # 600 tokens in the 10 s since the first were seen: 60 tok/s; 4 x 1000 - 600 left at most
    assert p.rate() == pytest.approx(60.0)
    assert p.remaining_tokens() == (3400.0, True)
    assert p.eta() == (pytest.approx(3400 / 60), True)
    assert p.fraction() == pytest.approx(600 / 4000)
    assert p.summary() == "0/4 traj, 600 tok, 60.0 tok/s, ETA <=57s"  # 56.7 s


def test_finished_trajectories_give_the_mean_length_for_the_rest() -> None:
    clock = Clock()
    p = Progress(4, max_tokens=1000, clock=clock)
    p.saw_tokens(1)
    clock.now += 10
    p.finished(200, correct=True)
    p.finished(300, correct=False)
    p.saw_tokens(600)  # 100 more, of the two in flight
    # 2 left x mean 250 = 500, less the 100 they have written: 400 to go, at 60 tok/s
    assert p.remaining_tokens() == (400.0, False)
    assert p.eta() == (pytest.approx(400 / 60), False)
    assert p.summary() == "2/4 traj, 600 tok, 60.0 tok/s, ETA ~7s, acc 0.500"
    clock.now += 10
    p.saw_tokens(1100)  # those in flight passed the mean: the budget bounds what is left instead
    assert p.remaining_tokens() == (2 * 1000 - 600, True)


def test_a_finished_job_shows_no_eta_and_a_full_bar() -> None:
    p = Progress(2, max_tokens=50)
    p.finished(10)
    p.finished(20, correct=None)  # an unscored trajectory: no accuracy
    assert p.fraction() == 1.0 and p.eta() is None and p.summary() == "2/2 traj, 30 tok"


@given(
    total=st.integers(1, 50),
    budget=st.integers(1, 5000),
    events=st.lists(st.tuples(st.booleans(), st.integers(0, 4000)), max_size=60),
)
def test_the_fraction_stays_in_0_1_and_the_remaining_tokens_are_never_negative(
    total: int, budget: int, events: list[tuple[bool, int]]
) -> None:
    clock = Clock()
    p = Progress(total, max_tokens=budget, clock=clock)
    seen = 0
    for finish, tokens in events:
        clock.now += 1
        if finish and p.done < total:
            p.finished(tokens)
        else:
            seen += tokens
            p.saw_tokens(seen)
        assert 0.0 <= p.fraction() <= 1.0
        remaining = p.remaining_tokens()
        assert remaining is not None and remaining[0] >= 0
        assert p.done <= total and p.tokens >= p.finished_tokens


def test_nothing_moving_for_a_while_is_said_once_per_period(capsys: pytest.CaptureFixture[str]) -> None:
    clock = Clock()
    p = Progress(3, max_tokens=100, clock=clock)
    counter = {"tokens": 0}
    bar = ProgressBar(p, "eval", lambda: counter["tokens"], stall_s=60)
    clock.now += 30
    bar.tick()
    clock.now += 31  # 61 s without a token
    bar.tick()
    bar.tick()  # said once, not at every tick
    clock.now += 60  # 121 s
    bar.tick()
    counter["tokens"] = 5  # life again: the count restarts
    bar.tick()
    clock.now += 59
    bar.tick()
    bar.close()
    said = [line for line in capsys.readouterr().err.replace("\r", "\n").splitlines() if "no token" in line]
    assert said == [
        "eval: no token generated and no trajectory finished for 1m01s (3 left: generating, running code or "
        "grading); still waiting",
        "eval: no token generated and no trajectory finished for 2m01s (3 left: generating, running code or "
        "grading); still waiting",
    ]


def test_the_bar_moves_before_the_first_trajectory_finishes(capsys: pytest.CaptureFixture[str]) -> None:
    clock = Clock()
    counter = {"tokens": 0}
    bar = ProgressBar(Progress(4, max_tokens=100, clock=clock), "eval", lambda: counter["tokens"])
    for _ in range(5):
        clock.now += 2
        counter["tokens"] += 20
        bar.tick()
    bar.close()
    text = capsys.readouterr().err.replace("\r", "\n")
    assert "0/4 traj, 100 tok, 12.5 tok/s, ETA <=24s" in text  # 100 tokens in the 8 s after the first 20
    assert " 25%|" in text  # 100 of at most 400 tokens, no trajectory finished


def test_a_disabled_bar_says_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    clock = Clock()
    bar = ProgressBar(Progress(1, clock=clock), "rollouts", lambda: 0, disable=True, stall_s=1)
    clock.now += 5
    bar.tick()
    bar.close()
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (59.4, "59s"), (61, "1m01s"), (3725, "1h02m")])
def test_durations_are_short(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_the_scripted_backend_counts_the_tokens_of_each_turn(tmp_path: Path) -> None:
    """Backends that get a turn whole count it when it arrives (the bar reads differences)."""
    import json

    from thinc_bench.backends import SamplingParams
    from thinc_bench.backends.scripted import ScriptedGenerator

    script = tmp_path / "turns.jsonl"
    script.write_text(json.dumps({"problem_id": "p", "turns": ["One two three.", "Four."]}) + "\n")

    async def go() -> list[tuple[int, int]]:
        gen = ScriptedGenerator(script)
        seen = [(gen.generated_tokens, 0)]
        made = 0
        for _ in range(2):
            out = await gen.generate([1, 2, 3], SamplingParams(max_tokens=50), request_id="p/0/0")
            made += len(out.token_ids)
            seen.append((gen.generated_tokens, made))
        await gen.aclose()
        return seen

    seen = asyncio.run(go())
    assert all(counted == made for counted, made in seen) and seen[-1][1] > seen[1][1] > 0


@pytest.mark.slow
def test_the_hf_backend_counts_tokens_while_a_turn_is_decoding() -> None:
    """The hf backend decodes in its own thread: its count moves before the turn comes back."""
    from thinc_bench.backends import SamplingParams, load_generator

    async def go() -> tuple[list[int], int]:
        gen = load_generator("hf", "bundled-smollm2", max_batch_size=2)
        ids = gen.tokenizer.encode("Count from one to a hundred:")
        params = SamplingParams(temperature=0, max_tokens=64)
        task = asyncio.ensure_future(gen.generate(ids, params))
        seen = []
        while not task.done():
            seen.append(gen.generated_tokens)
            await asyncio.sleep(0.05)
        out = await task
        await gen.aclose()
        return seen, len(out.token_ids)

    seen, made = asyncio.run(go())
    assert made == 64  # greedy, no stop: the whole budget
    assert any(0 < n < made for n in seen)  # the count moved while the turn was in flight
    assert seen == sorted(seen)
