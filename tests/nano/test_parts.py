"""The nano task's parts by name: each test part its own benchmark (distinct ids, part in `meta`), no
problem shared between any two parts, and eval taking the three apart with `--limit`."""

from __future__ import annotations

import pytest

from thinc_bench import benchmarks, nano
from thinc_bench.eval.__main__ import parse_config
from thinc_bench.eval.run import load_problems

TEST_PARTS = {"nano": "seen", "nano_unseen": "unseen", "nano_families": "families"}


def test_each_test_part_is_a_benchmark_with_its_own_ids() -> None:
    loaded = {name: benchmarks.load(name) for name in TEST_PARTS}
    assert {name: len(ps) for name, ps in loaded.items()} == {
        "nano": 100,
        "nano_unseen": 64,
        "nano_families": 48,
    }
    assert [ps[0].id for ps in loaded.values()] == ["nano-test-0000", "nano-unseen-0000", "nano-family-0000"]
    ids = [p.id for ps in loaded.values() for p in ps]
    assert len(set(ids)) == len(ids)
    for name, part in TEST_PARTS.items():
        generated = nano.generate_part(part)  # type: ignore[arg-type]
        assert [(p.id, p.problem, p.answer) for p in loaded[name]] == [
            (g.id, g.problem, str(g.answer)) for g in generated
        ]
        assert all(p.benchmark == name and p.meta["family"] for p in loaded[name])
    assert {name: {p.meta["part"] for p in ps} for name, ps in loaded.items()} == {
        name: {part} for name, part in TEST_PARTS.items()
    }
    assert loaded["nano"] == benchmarks.load("nano", data_dir="/nonexistent")  # the seen part, as before


def test_no_two_parts_share_a_problem() -> None:
    parts = {part: nano.generate_part(part) for part in nano.PART_SIZES}  # type: ignore[arg-type]
    assert {part: len(ps) for part, ps in parts.items()} == dict(nano.PART_SIZES)
    keys = {part: {(p.family, tuple(sorted(p.params.items()))) for p in ps} for part, ps in parts.items()}
    texts = {part: {p.problem for p in ps} for part, ps in parts.items()}
    names = list(parts)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not keys[a] & keys[b], (a, b)
            assert not texts[a] & texts[b], (a, b)
    same = [(p.id, p.problem, p.answer, p.meta) for p in nano.generate("train", 5)]
    assert [(p.id, p.problem, p.answer, p.meta) for p in nano.generate_part("train", 5)] == [
        (i, t, a, {**m, "part": "train"}) for i, t, a, m in same
    ]
    with pytest.raises(ValueError, match="nano part 'valid'.*unseen"):
        nano.generate_part("valid")  # type: ignore[arg-type]


def test_eval_takes_the_three_parts_with_a_limit() -> None:
    # The command line a user types, parsed as eval parses it; the run's problems, benchmarks apart.
    # (A scripted end-to-end run of this command is slow here (16 s); eval's per-benchmark summary is
    # tested on its own in tests/eval.)
    argv = ["--backend", "scripted", "--model", "turns.jsonl", "--benchmarks", ",".join(TEST_PARTS)]
    config = parse_config([*argv, "--limit", "2"])
    problems = load_problems(config)
    assert [(p.benchmark, p.id) for p in problems] == [
        ("nano", "nano-test-0000"),
        ("nano", "nano-test-0001"),
        ("nano_unseen", "nano-unseen-0000"),
        ("nano_unseen", "nano-unseen-0001"),
        ("nano_families", "nano-family-0000"),
        ("nano_families", "nano-family-0001"),
    ]
