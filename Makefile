# Developer entry points: `make check` (format, lint, types) and `make test` (fast tier, then slow tier).
PY := $(shell [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)
FAST := not slow and not gpu and not network
SLOW := slow and not gpu and not network

.PHONY: test test-fast test-slow check format perf nano reports settings

test: test-fast test-slow

# The fast tier runs a worker per core (pytest-xdist): its tests are independent (their own tmp_path,
# uuid-tagged processes and sandboxes) and mostly wait on subprocesses; each worker keeps torch to one
# thread (tests/conftest.py), since N workers of N threads thrash. The slow tier stays serial: its
# tests time, train and start engines on every core.
test-fast:
	$(PY) -m pytest -m "$(FAST)" -q --durations=15 -n auto

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

# ThinC-nano end to end on CPU (its measured time: README.md, ThinC-nano; a rerun resumes): reports/nano.html
nano:
	$(PY) recipes/nano.py

# The example reports kept in reports/, each rebuilt from its own run by the current renderer (a rerun
# of an unchanged run only re-renders); tests/report/test_committed.py fails while one is older than
# the renderer. reports/nano.html is `make nano`'s.
reports:
	$(if $(findstring /,$(PY)),PATH="$(abspath $(dir $(PY))):$$PATH" )bash reports/tir-baselines/run.sh
	$(PY) -m thinc_bench.eval --recovery-k 0,1,2,3 --out runs/smollm2-recovery
	$(PY) -m thinc_bench.report runs/smollm2-recovery --out reports/smollm2-recovery.html --no-problem-text

# docs/settings.md from the code's defaults and their sources (tests/test_settings_page.py checks it)
settings:
	$(PY) tests/settings_page.py
