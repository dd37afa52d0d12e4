"""Ctrl-C in a recipe is one line, exit 130 and the command that goes on, and what it leaves is never
taken for a finished checkpoint (issue 54: an interrupted recipes/sft.py printed a traceback and left
a half-written runs/nano/sft, on which bare recipes/grpo.py ended in a 34-line tokenizer error).

The signal goes to the whole process group, as a terminal's Ctrl-C does (the sandbox, grader and
data workers get it too)."""

from __future__ import annotations

import importlib.util
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def ctrl_c_after(cmd: list[str], marker: str, settle: float, timeout: float = 300) -> tuple[int, list[str]]:
    """Run `cmd` in its own process group, SIGINT the group `settle` s after a line containing
    `marker`; its exit status and its output lines (stdout and stderr together)."""
    env = os.environ | {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.extend(part for part in line.replace("\r", "\n").splitlines() if part.strip())
            if marker in line:
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert seen.wait(timeout), f"never printed {marker!r}: {lines[-20:]}"
    time.sleep(settle)
    os.killpg(proc.pid, signal.SIGINT)
    code = proc.wait(timeout=timeout)
    reader.join(timeout=30)
    return code, lines


def _recipe(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"recipes_interrupt_{name}", REPO / "recipes" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_ctrl_c_in_sft_leaves_a_marked_folder_that_grpo_refuses_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from thinc_bench.build_sft.__main__ import main as build_sft

    assert build_sft(["--source", "nano", "--limit", "8", "--out", str(tmp_path / "data")]) == 0
    out = tmp_path / "sft"
    args = [
        "--dataset_name",
        str(tmp_path / "data" / "dataset"),
        "--output_dir",
        str(out),
        "--max_steps",
        "1000",
    ]
    code, lines = ctrl_c_after([sys.executable, "recipes/sft.py", *args], "plan: SFT of", settle=4)
    command = shlex.join(["python", "recipes/sft.py", *args])
    assert code == 130, lines[-10:]
    assert f"interrupted: {out} is unfinished (marked INCOMPLETE); train it again: {command}" in lines
    assert not [line for line in lines if "Traceback" in line or "KeyboardInterrupt" in line]
    assert (out / "INCOMPLETE").is_file() and not (out / "thinc_bench.json").exists()
    capsys.readouterr()
    grpo = _recipe("grpo").main(["--model_name_or_path", str(out), "--output_dir", str(tmp_path / "grpo")])
    assert grpo == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {out} is an unfinished training run (it was stopped); train it first: {command}"
    ]


def test_ctrl_c_in_the_nano_chain_keeps_finished_stages_and_names_the_command_that_resumes(
    tmp_path: Path,
) -> None:
    args = [
        "--stages",
        "data,base-code-close",
        "--out",
        str(tmp_path / "nano"),
        "--report",
        str(tmp_path / "n.html"),
    ]
    code, lines = ctrl_c_after([sys.executable, "recipes/nano.py", *args], "[nano] data $", settle=3)
    assert code == 130, lines[-10:]
    assert lines[-1] == (
        "interrupted: finished stages are kept (each is skipped when its output is complete); resume with: "
        + shlex.join(["python", "recipes/nano.py", *args])
    )
    assert not [line for line in lines if "Traceback" in line or "failed" in line]
