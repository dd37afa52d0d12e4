"""Published reference numbers (reference.yaml): figures about the ThinC paper, never measured here.

`load_reference()` reads the bundled YAML and checks each entry has the fields the report shows
(metric, model, value, setting, source, and its source class from the one table in
`thinc_bench.provenance`: the abstract, an AI-generated explainer, derived with its formula, an
unverified secondary write-up with `via`, or our inference), so a malformed edit fails loudly instead
of rendering a blank cell. The report labels every one of these numbers as published, not measured,
with its class in words, and draws one on a figure only when the report's benchmarks are the ones it
was published for (`applies`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from importlib import resources
from typing import Any

import yaml

from thinc_bench.errors import ConfigError
from thinc_bench.provenance import CLASS_LABELS, SOURCE_CLASSES, Source

REQUIRED_FIELDS = ("metric", "model", "value", "setting", "source", "class")
"""What a reader needs to judge a published number: what, whose, how much, measured how, cited where,
and how directly we know it (the source class)."""

AVERAGES = frozenset({"avg_accuracy"})
"""Metrics that are a mean over the published benchmarks: comparable only on exactly those."""


def provenance(entry: dict[str, Any], reference: dict[str, Any] | None = None) -> str:
    """The source class of a published number in words (`provenance.CLASS_LABELS`), with the formula
    of a derived number and, for a secondary write-up, which one: e.g. "derived: arithmetic on
    published numbers (42.8 - 10.6)"."""
    text = source_of(entry).label
    return f"{text}: {entry['via']}" if entry.get("via") else text


def source_of(entry: dict[str, Any]) -> Source:
    """A reference.yaml entry as a `provenance.Source` (class, source, formula)."""
    return Source(entry["class"], str(entry["source"]), entry.get("formula"))


def applies(entry: dict[str, Any], benchmarks: Sequence[str], reference: dict[str, Any]) -> bool:
    """Whether a published number may stand beside a report of `benchmarks`: an average only on
    exactly the benchmarks it averages, any other number on a subset of those it was measured on."""
    published = set(entry.get("benchmarks") or reference.get("source", {}).get("benchmarks") or [])
    mine = set(benchmarks)
    if not mine or not published:
        return False
    return mine == published if entry["metric"] in AVERAGES else mine <= published


@functools.cache
def load_reference() -> dict[str, Any]:
    """The parsed reference.yaml (cached; treat it as read-only).

    Raises:
        ConfigError: an entry lacks a required field or names a metric not listed under `metrics`.
    """
    text = resources.files("thinc_bench.report").joinpath("reference.yaml").read_text(encoding="utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    known = set(data.get("metrics", {}))
    classes = set(SOURCE_CLASSES)
    data["classes"] = dict(CLASS_LABELS)  # the one table, as the report prints it
    for i, entry in enumerate(data.get("numbers", [])):
        missing = [f for f in REQUIRED_FIELDS if f not in entry]
        if entry.get("class") == "secondary" and not entry.get("via"):
            missing.append("via (the secondary source)")
        if (entry.get("class") == "derived") != ("formula" in entry):
            missing.append("formula (a derived number's arithmetic, and only a derived one's)")
        if missing or entry["metric"] not in known or entry["class"] not in classes:
            raise ConfigError(
                f"thinc_bench/report/reference.yaml entry {i} ({entry.get('model')!r}): missing {missing}, "
                f"or metric {entry.get('metric')!r} not in {sorted(known)}, or class "
                f"{entry.get('class')!r} not in {sorted(classes)}; fix the YAML entry"
            )
    return data
