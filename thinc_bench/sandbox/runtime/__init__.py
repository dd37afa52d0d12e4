"""The sandbox's runtime: everything that runs where model code runs (the fork-server, a session's
parent, reaper and interpreter, the notebook loop, the confinement steps, the frame protocol).

Why a package of its own: model code must not reach the harness. The jail (and the unjailed
fallback's import path) holds this folder alone under the name `PACKAGE_NAME`, never the
`thinc_bench` package around it, so nothing in a session can import the benchmark registry, the
nano generators or anything else of the harness (docs/sandbox.md, the trust boundary). Hence the
rules every module here keeps: the standard library and relative imports of this folder only,
nothing else of thinc_bench (`tests/sandbox/test_runtime.py` checks it). The harness imports the
same files as `thinc_bench.sandbox.runtime` for what both sides share (`_wire`, `_cgroups`).
"""

PACKAGE_NAME = "thinc_sandbox_runtime"
"""The runtime's import name inside a session (`python -m thinc_sandbox_runtime.server`)."""

__all__ = ["PACKAGE_NAME"]
