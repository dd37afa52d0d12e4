"""The grader works from any process (issue 12, item 1): a child forked after the parent graded
(multiprocessing fork, datasets.map(num_proc=2), a bare os.fork), a spawned child, `python -c`, a
script without a `__main__` guard, and threads; each checked against the parent's own results."""

import multiprocessing
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from thinc_bench import grading
from thinc_bench.grading import Grader

ROOT = Path(__file__).resolve().parents[2]
# Non-integer pairs, so every verdict needs a math-verify worker (no fast path).
PAIRS = [
    ("\\frac{1}{2}", "so \\boxed{0.5}"),
    ("\\sqrt{2}", "\\boxed{2^{1/2}}"),
    ("\\frac{1}{3}", "\\boxed{0.5}"),
    ("\\pi", "\\boxed{3.14}"),
]
EXPECTED = ["correct", "correct", "incorrect", "incorrect"]
TIMEOUT_S = 240


def _grade(pair: tuple[str, str]) -> str:
    return grading.grade(gold=pair[0], pred=pair[1]).status


def _grade_all() -> list[str]:
    return [_grade(p) for p in PAIRS]


@pytest.fixture(scope="module")
def parent_results() -> list[str]:
    """The parent grades first, so its default grader's workers exist before any child is made."""
    results = _grade_all()
    assert results == EXPECTED
    return results


def test_multiprocessing_fork_child_grades_like_the_parent(parent_results: list[str]) -> None:
    with multiprocessing.get_context("fork").Pool(2) as pool:
        assert pool.map(_grade, PAIRS, chunksize=1) == parent_results
    assert _grade_all() == parent_results  # the parent's workers are untouched


def test_multiprocessing_spawn_child_grades_like_the_parent(parent_results: list[str]) -> None:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.map(_grade, PAIRS) == parent_results


def test_datasets_map_num_proc_2_grades_like_the_parent(parent_results: list[str]) -> None:
    import datasets

    ds = datasets.Dataset.from_dict({"gold": [g for g, _ in PAIRS], "pred": [p for _, p in PAIRS]})
    out = ds.map(
        lambda row: {"status": grading.grade(gold=row["gold"], pred=row["pred"]).status},
        num_proc=2,
        load_from_cache_file=False,
    )
    assert out["status"] == parent_results


def test_bare_fork_reuses_a_parent_grader_instance(parent_results: list[str]) -> None:
    with Grader(workers=1) as g:
        assert g.grade(gold=PAIRS[0][0], pred=PAIRS[0][1]).status == parent_results[0]
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: grade with the parent's Grader object, report, leave at once
            code = 1
            try:
                os.close(read)
                statuses = [g.grade(gold=a, pred=b).status for a, b in PAIRS[1:]]
                os.write(write, ",".join(statuses).encode())
                g.close()
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        with os.fdopen(read) as f:
            reported = f.read()
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0 and reported.split(",") == parent_results[1:]
        assert g.grade(gold=PAIRS[2][0], pred="\\boxed{\\frac{2}{6}}").correct  # parent untouched


def _run_python(args: list[str], cwd: Path, stdin: str | None = None) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.split()


SCRIPT = f"""
from thinc_bench import grading
pairs = {PAIRS!r}
print(" ".join(grading.grade(gold=g, pred=p).status for g, p in pairs))
"""


def test_python_dash_c_grades_like_the_parent(parent_results: list[str], tmp_path: Path) -> None:
    assert _run_python(["-c", SCRIPT], tmp_path) == parent_results


def test_code_from_stdin_like_a_notebook_grades_like_the_parent(
    parent_results: list[str], tmp_path: Path
) -> None:
    assert _run_python(["-"], tmp_path, stdin=SCRIPT) == parent_results


def test_script_without_a_main_guard_grades_like_the_parent(
    parent_results: list[str], tmp_path: Path
) -> None:
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent(SCRIPT))
    assert _run_python([str(script)], tmp_path) == parent_results


def test_threads_on_the_default_grader_agree_with_the_parent(parent_results: list[str]) -> None:
    results: dict[int, str] = {}

    def work(i: int) -> None:
        results[i] = _grade(PAIRS[i % len(PAIRS)])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [results[i] for i in range(8)] == parent_results * 2
