"""Matched pairs and exact tests in the report: a convention scores no pair, a reader does, the runs are
paired by pair too, and every paired difference shows its exact p beside z (counted here by hand)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from report.synthetic import synthetic_run
from thinc_bench.report import build_data, write_comparison

PAIRS = 10


def _pair_id(benchmark: str, p: int) -> str:
    return (
        f"nano-pair-{p // 2:04d}-{'in' if p % 2 == 0 else 'ex'}"
        if benchmark == "nano_pairs"
        else f"{benchmark}-{p}"
    )


def _pair(pid: str) -> int:
    return int(pid.split("-")[2])


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("pairs")
    sizes = {"nano_pairs": 2 * PAIRS, "aime2025": 6}
    common = {"sizes": sizes, "samples": 1, "ids": _pair_id}
    # "always inclusive": right on every inclusive member, never on an exclusive one
    convention = synthetic_run(
        root / "convention",
        model="org/convention",
        verdict=lambda pid, s: pid.endswith("-in") or pid.startswith("aime"),
        **common,
    )
    # a reader: both members of pairs 1-7 right, the inclusive member only of pairs 8 and 9
    reader = synthetic_run(
        root / "reader",
        model="org/reader",
        verdict=lambda pid, s: pid.startswith("nano-pair") and (_pair(pid) < 8 or pid.endswith("-in")),
        **common,
    )
    return [convention, reader]


def test_a_convention_solves_no_pair_and_a_reader_does(runs) -> None:
    rows = {r["label"]: r for r in build_data(runs)["matched_pairs"]}
    assert set(rows) == {"convention", "reader"}  # aime2025 is not asked in pairs: no row
    # problem 0 (pair 0's inclusive member) lost its sample to the infrastructure: pair 0 is left out
    conv, reader = rows["convention"], rows["reader"]
    assert (conv["n_pairs"], conv["incomplete"], conv["both"], conv["inclusive_only"]) == (9, 1, 0, 9)
    assert conv["value"] == 0.0 and conv["blind_p"] == 1.0
    assert conv["convention_p"] == pytest.approx(2 / 2**9)  # 9 of 9 one way
    assert (reader["both"], reader["inclusive_only"], reader["exclusive_only"]) == (7, 2, 0)
    assert reader["value"] == pytest.approx(7 / 9) and reader["inclusive"] == 1.0
    assert reader["blind_p"] == pytest.approx(sum(_binom(9, i) for i in range(7, 10)))


def _binom(n: int, i: int) -> float:
    from math import comb

    return comb(n, i) * 0.25**i * 0.75 ** (n - i)


def test_the_runs_are_paired_by_pair_and_every_row_has_its_exact_p(runs, tmp_path) -> None:
    data = build_data(runs, paired=["reader:convention"])
    rows = {(r["benchmark"], r["unit"]): r for r in data["paired"] if r["k"] == 0}
    assert set(rows) == {("nano_pairs", "problem"), ("nano_pairs", "pair"), ("aime2025", "problem")}
    by_pair = rows["nano_pairs", "pair"]
    assert (by_pair["n_problems"], by_pair["better"], by_pair["worse"]) == (9, 7, 0)
    assert by_pair["value"] == pytest.approx(7 / 9) and by_pair["p_exact"] == pytest.approx(2 / 2**7)
    by_problem = rows["nano_pairs", "problem"]  # the exclusive members of pairs 0-7 gained (pair 0's
    assert (by_problem["better"], by_problem["worse"]) == (8, 0)  # counts: it is a problem here)
    aime = rows["aime2025", "problem"]
    assert (aime["better"], aime["worse"]) == (0, 5)  # aime: the convention run is right, the reader never
    assert aime["p_exact"] == pytest.approx(2 / 2**5) and aime["z"] is not None

    html = write_comparison(runs, tmp_path / "c.html", paired=["reader:convention"]).read_text()
    assert "<th>p (exact)</th>" in html and "nano_pairs · by pair" in html
    exact = re.findall(
        r'data-benchmark="(\w+)">.*?<td data-metric="p_exact" data-value="([^"]+)">', html, re.S
    )
    assert sorted((b, float(v)) for b, v in exact) == [
        ("aime2025", 2 / 2**5),
        ("nano_pairs", 2 / 2**8),  # by problem: 8 of 8 changed members gained
        ("nano_pairs", 2 / 2**7),  # by pair: 7 of 7
    ]
    matched = re.findall(r'<tr data-run="(\d)" data-benchmark="nano_pairs">.*?<td>(\d+/\d+)</td>', html, re.S)
    assert matched == [("0", "0/9"), ("1", "7/9")]
