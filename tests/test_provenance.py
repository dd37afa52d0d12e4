"""Every published number says what its source is, and the class matches the source texts.

`EXPECTED` is written from reading ../shared/sources (not from reference.yaml): the abstract states
only 12.2k trajectories and 99.2% grounding; both explainers state the accuracies, tool calls, the
baselines' grounding and the 64-69% recovery rate; 32.2 is nowhere, only 42.8 and "10.6 points" above
the base; ASTER-4B 74.0 and Recovery@5 33% come from secondary write-ups only. The text checks then
hold reference.yaml to the files themselves, so a number moved to a stronger class than its source
fails.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from thinc_bench.provenance import CLASS_LABELS, SOURCE_CLASSES, Source
from thinc_bench.report.reference import load_reference, provenance

SOURCES = Path("../shared/sources")
EXPECTED = {
    ("avg_accuracy", "ThinC-4B"): "explainer",
    ("avg_accuracy", "ThinC-1.7B"): "explainer",
    ("avg_accuracy", "Qwen3-1.7B"): "derived",
    ("avg_accuracy", "Qwen3-235B-A22B-Thinking"): "explainer",
    ("avg_accuracy", "ASTER-4B"): "secondary",
    ("tool_calls", "ThinC-4B"): "explainer",
    ("tool_calls", "ASTER-4B"): "explainer",
    ("grounding", "ThinC-4B"): "abstract",
    ("grounding", "ReTool-32B"): "explainer",
    ("grounding", "rStar2-Agent-14B"): "explainer",
    ("recovery_rate_k3", "ThinC-4B"): "explainer",  # the same explainer text as the accuracies
    ("recovery_accuracy_k5", "ThinC-4B"): "secondary",
    ("posthoc", "ThinC paper"): "inference",
    ("nl_literals", "ThinC paper"): "inference",
    ("nl_ratio", "ThinC paper"): "inference",
}

needs_sources = pytest.mark.skipif(
    not SOURCES.is_dir(), reason="../shared/sources is not beside this checkout"
)


def _text(name: str) -> str:
    return (SOURCES / name).read_text(encoding="utf-8")


def _states(text: str, value: float) -> bool:
    """Whether `text` writes `value` as a number of its own (78.1 not inside 178.1; 64 in "64–69")."""
    number = f"{value:g}"
    return re.search(rf"(?<![\d.]){re.escape(number)}(?!\d|\.\d)", text) is not None


def test_every_published_number_has_the_class_its_source_warrants() -> None:
    got = {(n["metric"], n["model"]): n["class"] for n in load_reference()["numbers"]}
    assert got == EXPECTED


@needs_sources
def test_each_class_holds_against_the_source_texts() -> None:
    abstract = _text("abstract.txt")
    explainers = [_text("explainer-zh.txt"), _text("explainer-ja.txt")]
    everything = [abstract, *explainers]
    for n in load_reference()["numbers"]:
        values = [v for v in (n["value"], n.get("value_high")) if v is not None]
        where = f"{n['model']} {n['metric']} {values}"
        if n["class"] == "abstract":
            assert all(_states(abstract, v) for v in values), where
        elif n["class"] == "explainer":
            assert all(_states(e, v) for e in explainers for v in values), where
            assert not any(_states(abstract, v) for v in values), f"{where} is in the abstract: class it so"
        elif n["class"] == "derived":
            operands = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", n["formula"])]
            assert all(_states(e, x) for e in explainers for x in operands), where
            assert eval(n["formula"]) == pytest.approx(n["value"]), where  # the formula gives the number
            assert not any(_states(t, v) for t in everything for v in values), f"{where} is stated somewhere"
        elif n["class"] == "secondary":
            assert n.get("via"), where
            assert not any(_states(t, v) for t in everything for v in values), f"{where} is in a source"
        else:
            assert n["class"] == "inference" and not values, where


@needs_sources
def test_the_abstract_states_only_its_two_numbers_and_the_sources_say_what_they_are() -> None:
    english = _text("abstract.txt").split("English", 1)[1]
    assert set(re.findall(r"\d+(?:\.\d+)?", english)) == {"12.2", "99.2", "1.7", "4", "235", "22", "3"}
    for name in ("explainer-zh.txt", "explainer-ja.txt"):
        assert "AI" in _text(name)  # each says it is AI-generated, not by the authors


def test_reports_name_each_class_for_what_it_is() -> None:
    explainer = CLASS_LABELS["explainer"]
    assert "summary" in explainer and "not written by its authors" in explainer
    n = next(n for n in load_reference()["numbers"] if n["model"] == "Qwen3-1.7B")
    assert provenance(n) == "derived: arithmetic on published numbers (42.8 - 10.6)"
    aster = next(n for n in load_reference()["numbers"] if n["model"] == "ASTER-4B" and n["value"] == 74.0)
    assert provenance(aster).startswith("an unverified secondary write-up")
    assert set(load_reference()["classes"]) == set(SOURCE_CLASSES)


def test_a_derived_number_needs_its_formula_and_a_class_must_exist() -> None:
    with pytest.raises(ValueError, match="formula"):
        Source("derived", "x")
    with pytest.raises(ValueError, match="formula"):
        Source("explainer", "x", formula="1 + 1")
    with pytest.raises(ValueError, match="source class"):
        Source("paper", "x")  # type: ignore[arg-type]
    assert Source("derived", "x", "42.8 - 10.6").short == "derived: 42.8 - 10.6"
