"""The docs a newcomer follows: the two set-up commands as CI runs them, and each measured time in one place.

Docs drift when a figure is copied (`make nano` was 62 minutes in one file and 80-85 in another) or a
command is edited in one place only (README's install line and `.ci/run`). These read the files as
a reader does; the commands themselves run in CI (`.ci/run`).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DURATION = re.compile(r"\b\d[\d,.]*\s*(?:[-–]\s*\d+\s*)?(?:min\b|minutes|hours?\b|s\b)|an? (?:hour|half)")
"""A stated duration: "62 min", "80-85 minutes", "3,696 s", "under an hour and a half"."""
MEASURED = {
    "make nano": "README.md",
    "thinc-nano": "README.md",
    "chain took": "README.md",
    "make test": "README.md",
}
"""Each measured time and the one file that states it; every other file points there."""


def _files() -> list[Path]:
    files = [
        REPO / "Makefile",
        REPO / "README.md",
        REPO / ".ci" / "run",
        *sorted((REPO / "docs").glob("*.md")),
    ]
    files += [REPO / "reports" / "README.md", REPO / "recipes" / "nano.py"]
    return [f for f in files if f.name not in ("LOG.md", "CHANGELOG.md")]  # dated history keeps old figures


def _set_up_blocks() -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)```", section, re.S)


def test_each_measured_time_is_stated_in_one_file() -> None:
    for subject, home in MEASURED.items():
        stated = [
            f"{f.relative_to(REPO)}: {line.strip()}"
            for f in _files()
            for line in f.read_text(encoding="utf-8").splitlines()
            if subject in line.lower() and DURATION.search(line)
        ]
        elsewhere = [s for s in stated if not s.startswith(home)]
        assert elsewhere == [], f"{subject}'s time belongs in {home} only: {elsewhere}"
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert re.search(r"The chain took [\d-]+ minutes", readme)
    assert re.search(r"last CI run took [\d,]+ s", readme)


def test_the_readme_has_two_set_up_commands_that_work_on_a_fresh_debian_or_ubuntu() -> None:
    install, tests = _set_up_blocks()
    assert tests.strip() == "make test"
    steps = [s.strip() for s in re.split(r"&&|;", install)]
    update = next(i for i, s in enumerate(steps) if s.endswith("apt-get update"))
    apt = next(i for i, s in enumerate(steps) if "apt-get install" in s)
    assert update < apt and all(p in steps[apt].split() for p in ("python3-venv", "bubblewrap", "make"))
    assert "$S apt-get" in install and "S=$(command -v sudo)" in install  # root or sudo alike
    assert steps[-1] == "python -m thinc_bench.eval"


def test_ci_installs_torch_exactly_as_the_readme_does() -> None:
    (install, _) = _set_up_blocks()
    readme_torch = next(s.strip() for s in install.split("&&") if s.strip().startswith("pip install torch"))
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    ci_index = re.search(r"torch_index=\((.*?)\)", ci).group(1)  # type: ignore[union-attr]
    assert shlex.split(readme_torch)[2:] == ["torch==2.13.0", *shlex.split(ci_index)]
    assert ci.count('pip install -q torch==2.13.0 "${torch_index[@]}"') == 2  # both venvs
    assert "--retries" in ci_index  # an index out of reach fails in seconds, not minutes
    assert ci.rstrip().endswith("make test") and "apt-get update" in ci
