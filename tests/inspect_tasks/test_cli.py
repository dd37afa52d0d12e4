"""`inspect eval thinc_bench/...` and `python -m thinc_bench.eval` as a user runs them, side by side.

The entry point is this checkout's `pyproject.toml`: its metadata is written into a temporary folder
as `pip install -e .` writes it (`egg_info`, and the `direct_url.json` that marks an editable
install, which Inspect reads to name the package's tasks `thinc_bench/<name>`), so the test runs the
entry point being committed, not whatever an older install of the shared venv declares.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from thinc_bench.inspect_tasks import headline

REPO = Path(__file__).resolve().parents[2]
INSPECT = Path(sys.executable).with_name("inspect")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a shell where this checkout is installed with `pip install -e .`."""
    base = tmp_path_factory.mktemp("egg")
    code = "import sys; from setuptools import setup; sys.argv = ['setup.py', 'egg_info', '--egg-base', sys.argv[1]]; setup()"
    subprocess.run([sys.executable, "-c", code, str(base)], cwd=REPO, check=True, capture_output=True)
    (info,) = base.glob("*.egg-info")
    (info / "direct_url.json").write_text(json.dumps({"url": REPO.as_uri(), "dir_info": {"editable": True}}))
    assert "thinc_bench = thinc_bench.inspect_tasks._registry" in (info / "entry_points.txt").read_text()
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(base), str(REPO)]), "OMP_NUM_THREADS": "1"}


def test_inspect_eval_and_the_cli_give_the_same_metrics(
    installed: dict[str, str], two_problem_benchmark: Path, scripted_turns: Path, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    command = [
        str(INSPECT),
        "eval",
        "thinc_bench/benchmark",
        "-T",
        f"name={two_problem_benchmark}",
        "-T",
        "k=1",
    ]
    command += [
        "--model",
        f"thinc_bench/scripted/{scripted_turns}",
        "--log-dir",
        str(logs),
        "--display",
        "none",
    ]
    subprocess.run(command, env=installed, check=True, capture_output=True, timeout=600)
    out = tmp_path / "run"
    cli = [sys.executable, "-m", "thinc_bench.eval", "--backend", "scripted", "--model", str(scripted_turns)]
    cli += [
        "--benchmarks",
        str(two_problem_benchmark),
        "--samples",
        "1",
        "--recovery-k",
        "1",
        "--out",
        str(out),
    ]
    subprocess.run(cli, env=installed, check=True, capture_output=True, timeout=600)

    dumped = subprocess.run(
        [str(INSPECT), "log", "dump", str(next(logs.glob("*.eval")))],
        env=installed,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    log = json.loads(dumped)
    assert log["status"] == "success" and log["eval"]["task"] == "thinc_bench/benchmark"
    (ours,) = [s for s in log["results"]["scores"] if s["name"] == "judge" and s["metrics"]]
    expected = headline(json.loads((out / "summary.json").read_text()))
    assert {name: m["value"] for name, m in ours["metrics"].items()} == pytest.approx(expected)
    assert expected["recovery@1_saw_k"] == 1.0 and expected["accuracy"] == 1.0
    assert {s["id"] for s in log["samples"]} == {"tiny-1", "tiny-2", "tiny-1@k1", "tiny-2@k1"}


def test_the_entry_point_registers_a_task_for_every_benchmark_the_cli_names() -> None:
    """`thinc_bench/<name>` for each registered benchmark (the paper's five, MATH-500, GPQA-Diamond),
    nano, and `thinc_bench/benchmark` for any other; plus the solvers, scorer, tool and provider.
    The names hold with a `thinc_bench.egg-info` in the checkout's root on `sys.path` too, which
    `pip install -e .` leaves there and Inspect then reads as the package not installed (`names`)."""
    from inspect_ai._util.registry import registry_find, registry_info, registry_unqualified_name

    import thinc_bench.inspect_tasks._registry  # noqa: F401  (what the entry point loads)
    from thinc_bench.benchmarks import REGISTRY

    def names(kind: str) -> set[str]:
        found = registry_find(lambda info: info.type == kind and info.name.startswith("thinc_bench/"))
        return {registry_info(o).name for o in found}

    assert names("task") == {f"thinc_bench/{name}" for name in [*REGISTRY, "nano", "benchmark"]}
    assert names("solver") == {"thinc_bench/rollout", "thinc_bench/tool_loop"}
    assert names("scorer") == {"thinc_bench/judge"} and names("tool") == {"thinc_bench/python"}
    # `--model thinc_bench/...` and `sandbox="thinc_bench"` are found by their unqualified names
    providers = registry_find(lambda info: info.type in ("modelapi", "sandboxenv"))
    assert sum(registry_unqualified_name(o) == "thinc_bench" for o in providers) == 2
