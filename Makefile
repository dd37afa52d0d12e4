# Developer entry points: `make check` (format, lint, types) and `make test` (fast tier, then slow tier).
PY := $(shell [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)
FAST := not slow and not gpu and not network
SLOW := slow and not gpu and not network

.PHONY: test test-fast test-slow check format perf nano

test: test-fast test-slow

test-fast:
	$(PY) -m pytest -m "$(FAST)" -q --durations=15

# pytest exits 5 when a tier selects no test; an empty slow tier is not a failure.
test-slow:
	$(PY) -m pytest -m "$(SLOW)" -q --durations=30 || [ $$? -eq 5 ]

check:
	$(PY) -m ruff format --check thinc_bench tests perf recipes
	$(PY) -m ruff check thinc_bench tests perf recipes
	$(PY) -m mypy

format:
	$(PY) -m ruff format thinc_bench tests perf recipes
	$(PY) -m ruff check --fix thinc_bench tests perf recipes

perf:
	$(PY) perf/grading.py
	$(PY) perf/sandbox.py

# ThinC-nano end to end on CPU (62 minutes measured on 2 cores; a rerun resumes): reports/nano.html
nano:
	$(PY) recipes/nano.py
