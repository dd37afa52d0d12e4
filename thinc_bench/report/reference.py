"""Published reference numbers (reference.yaml): the ThinC paper's figures, never measured here.

`load_reference()` reads the bundled YAML and checks each entry has the fields the report shows
(metric, model, value, setting, source, and its source class: paper abstract, paper body via a named
secondary source, or our inference), so a malformed edit fails loudly instead of rendering a blank
cell. The report labels every one of these numbers as published, not measured, with its class, and
draws one on a figure only when the report's benchmarks are the ones it was published for (`applies`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from importlib import resources
from typing import Any

import yaml

from thinc_bench.errors import ConfigError

REQUIRED_FIELDS = ("metric", "model", "value", "setting", "source", "class")
"""What a reader needs to judge a published number: what, whose, how much, measured how, cited where,
and how directly we know it (the source class)."""

AVERAGES = frozenset({"avg_accuracy"})
"""Metrics that are a mean over the published benchmarks: comparable only on exactly those."""


def provenance(entry: dict[str, Any], reference: dict[str, Any]) -> str:
    """The source class of a published number in words: "paper abstract", "paper body, via a
    secondary source: <which>", or "our inference"."""
    text = str(reference.get("classes", {}).get(entry["class"], entry["class"]))
    return f"{text}: {entry['via']}" if entry.get("via") else text


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
    classes = set(data.get("classes", {}))
    for i, entry in enumerate(data.get("numbers", [])):
        missing = [f for f in REQUIRED_FIELDS if f not in entry]
        if entry.get("class") == "secondary" and not entry.get("via"):
            missing.append("via (the secondary source)")
        if missing or entry["metric"] not in known or entry["class"] not in classes:
            raise ConfigError(
                f"thinc_bench/report/reference.yaml entry {i} ({entry.get('model')!r}): missing {missing}, "
                f"or metric {entry.get('metric')!r} not in {sorted(known)}, or class "
                f"{entry.get('class')!r} not in {sorted(classes)}; fix the YAML entry"
            )
    return data
