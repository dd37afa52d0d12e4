"""Published reference numbers (reference.yaml): the ThinC paper's figures, never measured here.

`load_reference()` reads the bundled YAML and checks each entry has the fields the report shows
(metric, model, value, setting, source), so a malformed edit fails loudly instead of rendering a
blank cell. The report labels every one of these numbers as published, not measured.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import yaml

from thinc_bench.errors import ConfigError

REQUIRED_FIELDS = ("metric", "model", "value", "setting", "source")
"""What a reader needs to judge a published number: what, whose, how much, measured how, cited where."""


@functools.cache
def load_reference() -> dict[str, Any]:
    """The parsed reference.yaml (cached; treat it as read-only).

    Raises:
        ConfigError: an entry lacks a required field or names a metric not listed under `metrics`.
    """
    text = resources.files("thinc_bench.report").joinpath("reference.yaml").read_text(encoding="utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    known = set(data.get("metrics", {}))
    for i, entry in enumerate(data.get("numbers", [])):
        missing = [f for f in REQUIRED_FIELDS if f not in entry]
        if missing or entry["metric"] not in known:
            raise ConfigError(
                f"thinc_bench/report/reference.yaml entry {i} ({entry.get('model')!r}): missing {missing} "
                f"or metric {entry.get('metric')!r} not in {sorted(known)}; fix the YAML entry"
            )
    return data
