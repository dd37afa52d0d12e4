"""Which GRPO groups get injected execution failures: the share, the k drawn, determinism, loud bad settings."""

from __future__ import annotations

from collections import Counter

import pytest

from thinc_bench.errors import ConfigError
from thinc_bench.train.injection import FailureInjection, parse_failure_counts, parse_share

PROBLEMS = [f"Find the remainder of {n}^{n} modulo 7." for n in range(4000)]


def test_the_share_of_faulted_groups_is_the_setting() -> None:
    for share in (0.1, 0.5, 0.9):
        faulted = sum(FailureInjection(share).failures(0, p) > 0 for p in PROBLEMS)
        # Binomial(4000, share): 4 standard deviations are at most 0.032.
        assert faulted / len(PROBLEMS) == pytest.approx(share, abs=0.032)
    assert all(FailureInjection(0.0).failures(3, p) == 0 for p in PROBLEMS)
    assert all(FailureInjection(1.0).failures(3, p) == 1 for p in PROBLEMS)
    assert not FailureInjection().active and FailureInjection(0.01).active


def test_k_is_drawn_evenly_from_the_given_counts() -> None:
    drawn = Counter(FailureInjection(1.0, (1, 2, 5)).failures(7, p) for p in PROBLEMS)
    assert set(drawn) == {1, 2, 5}
    assert all(count / len(PROBLEMS) == pytest.approx(1 / 3, abs=0.03) for count in drawn.values())


def test_the_choice_depends_only_on_seed_step_and_problem() -> None:
    """A resumed run, another rank holding copies of the same prompt, or a rebuilt setting inject the same."""
    first = [FailureInjection(0.5, (1, 2), seed=3).failures(12, p) for p in PROBLEMS[:500]]
    again = [FailureInjection(0.5, (1, 2), seed=3).failures(12, p) for p in PROBLEMS[:500]]
    assert first == again
    other_seed = [FailureInjection(0.5, (1, 2), seed=4).failures(12, p) for p in PROBLEMS[:500]]
    other_step = [FailureInjection(0.5, (1, 2), seed=3).failures(13, p) for p in PROBLEMS[:500]]
    # A problem seen again (another epoch) or another run draws anew: about half the choices differ.
    for other in (other_seed, other_step):
        changed = sum(a != b for a, b in zip(first, other, strict=True))
        assert 0.4 < changed / 500 < 0.85


def test_settings_parse_from_yaml_and_command_line_shapes() -> None:
    assert parse_failure_counts("1") == (1,)
    assert parse_failure_counts(2) == (2,)  # YAML `inject_failures_k: 2`
    assert parse_failure_counts("1, 2,3") == (1, 2, 3)  # as eval's --recovery-k
    assert parse_failure_counts([1, 3]) == (1, 3)  # YAML list
    assert parse_share("0.25") == 0.25 and parse_share(1) == 1.0


@pytest.mark.parametrize("bad", ["0", "1,0", "1,,2", "two", "", [], [1, True], None, -1])
def test_a_bad_failure_count_is_one_clear_error(bad) -> None:
    with pytest.raises(ConfigError, match=r"inject_failures_k=.*integers >= 1"):
        parse_failure_counts(bad)


@pytest.mark.parametrize("bad", [1.5, -0.1, "half", float("nan"), True, None])
def test_a_bad_share_is_one_clear_error(bad) -> None:
    with pytest.raises(ConfigError, match=r"inject_failures_share=.*between 0 and 1"):
        parse_share(bad)
    with pytest.raises(ConfigError, match="inject_failures_share"):
        FailureInjection(bad)  # type: ignore[arg-type]


def test_training_rollouts_meet_a_realistic_fault_of_kinds_eval_never_injects() -> None:
    from thinc_bench.sandbox import Sandbox, SandboxConfig
    from thinc_bench.train.faults import (
        EVAL_FAULT_KINDS,
        TRAINING_FALLBACK,
        TRAINING_FAULT_KINDS,
        fault_kind,
        with_training_faults,
    )
    from thinc_bench.train.injection import training_sandbox_config

    codes = [
        f"x = {n}\ny = x / {n % 3 + 1}\nd = {{'a': x}}\nr = [x]\nr.append(y)\nprint(d['a'] + y)"
        for n in range(1, 13)
    ]
    texts: dict[str, list[str]] = {"eval": [], "train": []}
    for name, config in (("eval", SandboxConfig(max_sessions=2)), ("train", training_sandbox_config(3))):
        with Sandbox(config) as sandbox:
            for code in codes:
                with sandbox.session(inject_failures=2) as opened:
                    session = with_training_faults(opened) if name == "train" else opened
                    first, second = session.run(code), session.run(code)
                    real = session.run("print(6 * 7)\n1 / 0")
                assert (first.status, first.injected, second.injected) == ("error", True, True)
                assert real.output.startswith("42\n") and '"<cell-3>"' in real.output  # cells numbered on
                assert '"<cell-1>"' in first.output and '"<cell-2>"' in second.output
                texts[name] += [first.output, second.output]
    assert training_sandbox_config(3).max_sessions == 3
    for text in texts["train"]:  # a real traceback, one of the code's lines, a training kind
        assert text.startswith("Traceback (most recent call last):\n")
        assert fault_kind(text) in {*TRAINING_FAULT_KINDS, TRAINING_FALLBACK}
    assert {fault_kind(t) for t in texts["eval"]} <= EVAL_FAULT_KINDS
    assert not set(texts["train"]) & set(texts["eval"])
