"""The direct sympy path (`_direct`) against math-verify: same trees, same strings, same verdicts.

The direct path is only allowed because it hands `verify` exactly what math-verify's own parse
would. So every string it accepts is parsed both ways and compared node for node (`srepr`, which
names every node's type and keeps unevaluated trees as they are), and every check of the benchmark
golds, the agreement cases, the grounding cases and hostile near-misses runs through the worker's
`run_task` with the direct path on and off: no verdict may differ.
"""

import json
import logging
import re
from pathlib import Path
from typing import Any

import math_verify
import pytest
import sympy
from conftest import need_shared

from thinc_bench.grading import final_answer, normalize_answer
from thinc_bench.grading._direct import direct_parse, direct_verdict
from thinc_bench.grading._messages import Task
from thinc_bench.grading._printed import grounding_candidates
from thinc_bench.grading._text import align_to_gold
from thinc_bench.grading._worker import run_task

DATA = Path(__file__).resolve().parents[1] / "data"
BENCHMARKS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "benchmarks"

# Written from the forms answers take and the ways they go wrong, not from either parser's output.
_ATOMS = [
    *("0", "1", "2", "7", "025", "007", "12", "1000", "2024", "123456789012345678901234567890"),
    *("9" * 400, "0.5", ".5", "0.0", "1.50", "0.50", "3.14159", "1.5708", "12.3456789012345678"),
    *("00.5", "0.333333", "0.3333333333333333333", "1.", "5.0", "1e5", "1,000", "01", "1 000"),
]
_FRACS = [
    *(("1", "2"), ("4", "2"), ("0", "5"), ("1", "0"), ("0", "0"), ("2", "4"), ("10", "3")),
    *(("025", "5"), ("1", "1"), ("6", "8"), ("1", "576"), ("-1", "2"), ("1", "-2")),
]
_NEAR_MISSES = [
    *("\\sqrt 2", "2\\sqrt 2", "\\sqrt{2}/2", "\\pi/2", "2\\pi/3", "- 5", "-  \\sqrt{2}", "--5", "+5"),
    *("\\frac12", "\\dfrac{\\pi}{2}", "\\tfrac{3}{4}", "2 \\sqrt{2}", "\\sqrt[3]{2}", "3\\frac{1}{2}"),
    *("\\frac{1}{\\sqrt{2}}", "\\pi\\sqrt{2}", "2\\sqrt{2}\\pi", "\\sqrt{-4}", "\\sqrt{2.5}", "5\\%"),
    *("\\frac{ 1 }{ 2 }", "\\frac{\\sqrt{3}}{2}", "\\frac{3\\sqrt{2}}{4}", "-\\frac{5\\pi}{6}", "x", "e"),
    *("\\infty", "-\\infty", "i", "2i", "\\frac{a}{b}", "\\sqrt{x}", "10^{3}", "2^{10}", "\\pi^2"),
    *("\\left(1\\right)", "\\{1\\}", "{1}", "\\sqrt{{2}}", "1/2", "\\frac{1}{2}\\pi", "0\\pi", "1\\pi"),
    *(
        "70 \\sqrt{2}",
        "8 \\pi",
        "\\frac{9 \\sqrt{23}}{23}",
        "\\frac{ 3 \\pi }{ 4 }",
        "- 2 \\sqrt{3}",
        "2  \\pi",
    ),
    *(
        "\\sqrt{ 2 }",
        "1 2",
        "1 2\\pi",
        "\\sqrt{2 3}",
        "\\frac{1 0}{3}",
        "2\t\\pi",
        "2\n\\pi",
        "- - 5",
        "2 . 5",
    ),
]


def _lattice() -> list[str]:
    xs = [s + a for a in _ATOMS for s in ("", "-")]
    for n, d in _FRACS:
        for cmd in ("frac", "dfrac", "tfrac"):
            xs += [f"\\{cmd}{{{n}}}{{{d}}}", f"-\\{cmd}{{{n}}}{{{d}}}"]
    for coef in ("", "0", "1", "2", "02", "12"):
        for core in ("\\sqrt{2}", "\\sqrt{8}", "\\sqrt{0}", "\\sqrt{1}", "\\sqrt{4}", "\\sqrt{12}", "\\pi"):
            t = coef + core
            xs += [t, "-" + t] + [f"{s}\\frac{{{t}}}{{{d}}}" for s in ("", "-") for d in ("1", "2", "3", "0")]
    return xs + _NEAR_MISSES + ["-" + x for x in _NEAR_MISSES]


def _benchmark_golds() -> list[str]:
    need_shared(BENCHMARKS, "benchmark copies")
    return [json.loads(line)["answer"] for p in sorted(BENCHMARKS.glob("*.jsonl")) for line in p.open()]


def _changed(gold: str) -> str:
    """As in test_grading.py / perf/grading.py: integer + 1, else the first digit bumped."""
    if re.fullmatch(r"-?\d+", gold):
        return str(int(gold) + 1)
    m = re.search(r"\d", gold)
    if m is not None:
        d = int(m.group())
        return gold[: m.start()] + str(d + 1 if d < 9 else 8) + gold[m.end() :]
    return gold[:-1] + "X}" if gold.startswith("\\text{") else gold + " + 1"


def _agreement_pairs() -> list[tuple[str, str]]:
    pairs = []
    for name in ("agreement_cases.jsonl", "grading_cases.jsonl"):
        for line in (DATA / name).read_text().splitlines():
            if line.strip():
                case = json.loads(line)
                answer = final_answer(case["pred"])
                if answer is not None:
                    pairs.append((case["gold"], answer))
    return pairs


def _hostile_pairs() -> list[tuple[str, str]]:
    """Pairs whose verdict hinges on a detail: equal values in other forms, and near misses."""
    big = "123456789012345678901234567890"
    return [
        *(("\\frac{1}{2}", "0.5"), ("0.5", "\\frac{1}{2}"), ("\\frac{1}{2}", ".5"), ("\\frac{1}{2}", "0.50")),
        *(("2\\sqrt{2}", "\\sqrt{8}"), ("\\sqrt{8}", "2\\sqrt{2}"), ("\\sqrt{8}", "2.828427")),
        *(("2\\sqrt{2}", "2.8284"), ("\\sqrt{2}", "1.414214"), ("\\sqrt{2}", "1.4142135623730951")),
        *(("1", "01"), ("01", "1"), ("1000", "1,000"), ("1000", "1 000"), ("0", "-0"), ("-0", "0")),
        *(("\\frac{\\pi}{2}", "1.5708"), ("\\frac{\\pi}{2}", "1.570796"), ("\\frac{\\pi}{2}", "\\pi/2")),
        *(("\\pi", "3.14159"), ("\\pi", "3.141593"), ("2\\pi", "6.283185"), ("-\\pi", "\\pi")),
        *((big, big + "0"), (big, "1.23456789012345678901234567890e29"), (big, big[:-1] + "1")),
        *(
            ("\\frac{4}{2}", "2"),
            ("2", "\\frac{4}{2}"),
            ("\\frac{6}{8}", "\\frac{3}{4}"),
            ("0.75", "\\frac{3}{4}"),
        ),
        *(("\\frac{1}{3}", "0.333333"), ("\\frac{1}{3}", "0.333"), ("0.333333", "\\frac{1}{3}")),
        *(("-\\frac{1}{2}", "\\frac{-1}{2}"), ("-\\frac{1}{2}", "-0.5"), ("\\frac{1}{2}", "-\\frac{1}{2}")),
        *(("\\frac{\\sqrt{3}}{2}", "0.866025"), ("\\frac{\\sqrt{3}}{2}", "\\frac{\\sqrt{12}}{4}")),
        *(("\\frac{3\\pi}{4}", "2.356194"), ("-2\\sqrt{3}", "-\\sqrt{12}"), ("-2\\sqrt{3}", "2\\sqrt{3}")),
        *(
            ("0\\pi", "0"),
            ("\\sqrt{0}", "0"),
            ("\\frac{0}{5}", "0"),
            ("1\\pi", "\\pi"),
            ("\\frac{1}{0}", "1"),
        ),
        *(("5", "5.0"), ("5", "5.000001"), ("5", "4.9999999"), ("0.0000672", "0.0000673"), ("1.5", "1.50")),
    ]


def _verdict_tasks() -> list[Task]:
    tasks: list[Task] = []
    for gold in _benchmark_golds():
        g = normalize_answer(gold)
        tasks.append(Task("check_gold", g, ""))
        for pred in (gold, _changed(gold)):
            tasks.append(Task("verify", g, align_to_gold(normalize_answer(pred), g)))
    for gold, answer in _agreement_pairs() + _hostile_pairs():
        g = normalize_answer(gold)
        tasks.append(Task("verify", g, align_to_gold(normalize_answer(answer), g)))
    for line in (DATA / "grounding_cases.jsonl").read_text().splitlines():
        if line.strip():
            case = json.loads(line)
            if case["answer"] is None:
                continue
            a = normalize_answer(case["answer"])
            tasks += [Task("ground", a, c) for c in grounding_candidates(case["outputs"])]
    return list(dict.fromkeys(tasks))


def _math_verify_parse(x: str) -> list[Any]:
    parsed = math_verify.parse("$\\boxed{" + x + "}$", parsing_timeout=None)
    return [p if isinstance(p, str) else sympy.srepr(p) for p in parsed]


@pytest.fixture(autouse=True)
def _quiet_math_verify() -> None:
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)


def test_direct_trees_and_strings_are_math_verifys_on_hostile_forms() -> None:
    xs = list(dict.fromkeys(normalize_answer(x) for x in _lattice()))
    accepted = [(x, d) for x in xs if (d := direct_parse(x)) is not None]
    differ = [(x, _math_verify_parse(x), [sympy.srepr(d[0]), d[1]]) for x, d in accepted]
    assert [row for row in differ if row[1] != row[2]] == []
    # The path must cover the forms it exists for, or it saves nothing.
    taken = {x for x, _ in accepted}
    for form in (
        "-12",
        "0.5",
        "\\frac{6}{8}",
        "\\sqrt{8}",
        "-2\\sqrt{12}",
        "12\\pi",
        "\\frac{\\sqrt{12}}{3}",
        "70 \\sqrt{2}",
    ):
        assert form in taken, form
    for odd in ("\\frac{1}{0}", "--5", "+5", "1 2", "3\\frac{1}{2}", "1e5", "x", "\\pi^2", "\\sqrt{2 3}"):
        assert normalize_answer(odd) not in taken, odd


def test_direct_covers_most_benchmark_golds_with_math_verifys_trees() -> None:
    golds = list(dict.fromkeys(normalize_answer(g) for g in _benchmark_golds()))
    accepted = [(g, d) for g in golds if (d := direct_parse(g)) is not None]
    assert [
        (g, [sympy.srepr(d[0]), d[1]])
        for g, d in accepted
        if _math_verify_parse(g) != [sympy.srepr(d[0]), d[1]]
    ] == []
    assert len(accepted) >= 0.75 * len(golds)  # 364 of 463 distinct golds when written


def test_direct_verdicts_are_math_verifys_on_hostile_pairs() -> None:
    """Both sides direct: the verdict skips verify's simplify, and must still be verify's own."""
    values = [
        "\\frac{1}{2}",
        "0.500001",
        "\\sqrt{8}",
        "2\\sqrt{2}",
        "2.828427",
        "\\frac{\\pi}{2}",
        "1.570796",
    ]
    values += ["-0", "0\\pi", "\\sqrt{1}", "1.0", "\\frac{\\sqrt{12}}{4}", "0.866025", "-3\\pi", "0.0000672"]
    pairs = []
    for gold, answer, roundings in [(g, a, (6, 7)) for g, a in _hostile_pairs()] + [
        (x, y, (6,)) for x in values for y in values
    ]:
        g = normalize_answer(gold)
        a = align_to_gold(normalize_answer(answer), g)
        dg, da = direct_parse(g), direct_parse(a)
        if dg is not None and da is not None:
            pairs.append((g, a, dg, da, roundings))
    assert len(pairs) >= 250
    differ = []
    for g, a, dg, da, roundings in pairs:
        for rounding in roundings:
            ours = direct_verdict(dg, da, rounding)
            theirs = math_verify.verify(list(dg), list(da), float_rounding=rounding, timeout_seconds=None)
            if ours != theirs:
                differ.append((g, a, rounding, ours, theirs))
    assert differ == []


@pytest.mark.slow  # ~20 s of CPU: math-verify parses ~1,800 checks from scratch (no model is loaded)
def test_no_verdict_changes_on_golds_agreement_grounding_and_near_misses() -> None:
    tasks = _verdict_tasks()
    assert len(tasks) >= 1_700
    with_direct = [run_task(t) for t in tasks]
    without = [run_task(t, direct=False) for t in tasks]
    changed = [(t, a, b) for t, a, b in zip(tasks, with_direct, without, strict=True) if a != b]
    assert changed == []
