"""The names thinc_bench's objects have in Inspect's registry: `thinc_bench/<name>`, however installed.

Inspect prefixes an extension's objects with its package name only when it finds the package
installed (in site-packages, or editable by its `direct_url.json`). A checkout whose root holds the
`thinc_bench.egg-info` that `pip install -e .` leaves there, run with that root on `sys.path` (`python -m
pytest`, a PYTHONPATH), reads as not installed, and `inspect eval thinc_bench/nano` would then find no
task named so. `registered(name)` gives the name to register under so the result is
`thinc_bench/<name>` either way.
"""

from __future__ import annotations

PACKAGE = "thinc_bench"


def registered(name: str) -> str:
    """The name to give Inspect's decorator so the object is `thinc_bench/<name>` in its registry."""
    from inspect_ai._util.registry import registry_name

    return name if registry_name(registered, name) != name else f"{PACKAGE}/{name}"
