"""The problem stream: the static order's epochs drawn end to end, solved problems dropped per epoch, exact resume."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thinc_bench.errors import ConfigError
from thinc_bench.train.curriculum import shuffled_order
from thinc_bench.train.problem_stream import ProblemStream, informative, parse_mode, solved

IDS = [f"p{i}" for i in range(7)]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=8), st.integers(0, 5))
def test_draws_of_any_sizes_are_the_static_orders_epochs_end_to_end(sizes, seed) -> None:
    stream = ProblemStream(tuple(IDS), seed)
    drawn = [i for n in sizes for i in stream.take(n)]
    epochs = -(-sum(sizes) // len(IDS))
    assert drawn == shuffled_order(IDS, seed, epochs)[: sum(sizes)]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=2, max_size=8), st.integers(0, 5), st.data())
def test_a_stream_restored_from_its_state_draws_what_the_uninterrupted_one_draws(sizes, seed, data) -> None:
    cut = data.draw(st.integers(1, len(sizes) - 1))
    solved_ids = data.draw(st.sets(st.sampled_from(IDS)))
    whole = ProblemStream(tuple(IDS), seed, drop_solved=True)
    first = ProblemStream(tuple(IDS), seed, drop_solved=True)
    for stream in (whole, first):
        stream.mark((i, True) for i in solved_ids)
    expected = [whole.take(n) for n in sizes]
    for n in sizes[:cut]:
        first.take(n)
    resumed = ProblemStream(tuple(IDS), seed, drop_solved=True)
    resumed.restore(first.state())
    assert [resumed.take(n) for n in sizes[cut:]] == expected[cut:]


def test_drop_solved_leaves_solved_problems_out_of_later_epochs_only() -> None:
    stream = ProblemStream(tuple(IDS), seed=3, drop_solved=True)
    first = stream.take(4)
    stream.mark([(first[0], True), (first[1], True), (first[2], False)])
    rest_of_epoch = stream.take(3)  # the epoch under way keeps its problems
    assert first + rest_of_epoch == shuffled_order(IDS, 3, 1)
    second = stream.take(5)
    expected = [i for i in shuffled_order(IDS, 3, 2)[7:] if i not in first[:2]]
    assert second == expected  # 5 problems: the 7 less the two solved
    stream.mark([(first[0], False)])  # solved no longer: back in the next epoch
    assert first[0] in stream.take(6)
    everything = ProblemStream(tuple(IDS), seed=3, drop_solved=True)
    everything.mark((i, True) for i in IDS)
    assert sorted(everything.take(7)) == sorted(IDS)  # all solved: an epoch keeps every problem


def test_groups_are_informative_when_their_scored_rewards_differ_and_solved_when_all_right() -> None:
    rewards = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, None, 1.0, None, None, 1.0, None]
    assert informative(rewards, 2) == [True, False, False, False, False, False]
    assert solved(rewards, 2) == [False, True, False, True, False, True]
    with pytest.raises(ValueError, match="groups of 5"):
        informative(rewards, 5)


def test_the_mode_setting_and_bad_states_are_one_clear_error() -> None:
    assert [parse_mode(v) for v in (True, False, "true", "Refill", "drop_solved", "off")] == [
        "filter",
        "off",
        "filter",
        "refill",
        "drop_solved",
        "off",
    ]
    with pytest.raises(
        ConfigError, match="dynamic_sampling='dapo': use one of off, filter, refill, drop_solved"
    ):
        parse_mode("dapo")
    stream = ProblemStream(tuple(IDS), 0)
    with pytest.raises(ConfigError, match="another seed or dynamic_sampling mode"):
        stream.restore(ProblemStream(tuple(IDS), 1).state())
    with pytest.raises(ConfigError, match="names 1 problems the data lacks"):
        stream.restore({**stream.state(), "solved": ["q9"]})
