"""The answer key is out of reach of model code (issue 49), by construction and by attack.

By construction: the jail's mounts (read from the host in a live session's /proc/PID/mountinfo) come
only from the system folders, a few /etc files, the base interpreter, the runtime package and the
allowed distributions' entries, and not one of them is, holds or lies inside a harness path.
By attack: `attack_answer_key.py` runs in a real session of each sandbox the project starts (eval's,
GRPO's training sandbox, and one without cgroups, as an unprivileged harness has) and looks for
known golds everywhere a model could (see its docstring); it must find none. The golds it looks
for: a string of the nano generators (a model that finds them can generate any nano benchmark with
its answers), the registry's name of a generated benchmark, a ../shared benchmark problem, and
canaries planted in the harness's working directory (where run directories go) and Hugging Face
cache. End to end, a scripted eval trajectory whose code asks for the gold of the very problem it
is scored on gets an import error, not the gold.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from thinc_bench.sandbox import Sandbox, SandboxConfig, _jail, _packages
from thinc_bench.train.injection import training_sandbox_config

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SHARED_AIME = REPO.parent / "shared" / "data" / "benchmarks" / "aime2024.jsonl"
ATTACK = (HERE / "attack_answer_key.py").read_text()
# The operating system's folders the jail binds whole (each file system mount's root inside it).
SYSTEM_ROOTS = {os.path.realpath(d) for d in _jail.SYSTEM_DIRS if os.path.isdir(d) and not os.path.islink(d)}
PSEUDO_FS = {"tmpfs", "proc", "devpts", "devtmpfs", "cgroup", "cgroup2", "mqueue", "sysfs"}


def _nano_strings() -> list[str]:
    """Long string constants of the nano generators' source: what a model would search for."""
    found = []
    for path in sorted((REPO / "thinc_bench" / "nano").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and 24 <= len(text) <= 80 and not {"\n", "{"} & set(text):
                found.append(text)
    return found[:3]


@pytest.fixture
def harness_places(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A working directory holding a run directory, and a Hugging Face cache, each with a gold
    canary, outside /tmp (which sessions cover with their scratch anyway): returns the canaries."""
    root = Path(
        tempfile.mkdtemp(
            prefix="thinc-answer-key-", dir="/var/tmp" if os.access("/var/tmp", os.W_OK) else None
        )
    )
    try:
        run_gold, hub_gold = f"gold-run-{uuid.uuid4().hex}", f"gold-hub-{uuid.uuid4().hex}"
        (root / "runs" / "nano").mkdir(parents=True)
        (root / "runs" / "nano" / "samples.jsonl").write_text(json.dumps({"gold": run_gold}) + "\n")
        hub = root / "hf" / "hub" / "datasets--org--bench" / "snapshots" / "abc"
        hub.mkdir(parents=True)
        (hub / "test.jsonl").write_text(json.dumps({"answer": hub_gold}) + "\n")
        for folder in (root, *root.rglob("*")):
            folder.chmod(0o755 if folder.is_dir() else 0o644)  # readable by any session uid
        monkeypatch.chdir(root)
        monkeypatch.setenv("HF_HOME", str(root / "hf"))
        yield [run_gold, hub_gold]
    finally:
        import shutil

        shutil.rmtree(root, ignore_errors=True)


def _canaries(planted: list[str]) -> list[str]:
    canaries = [*planted, "nano_ranges_confirm", *_nano_strings()]
    if SHARED_AIME.is_file():
        canaries.append(json.loads(SHARED_AIME.read_text().splitlines()[0])["problem"][:60])
    return canaries


def _attack(sb: Sandbox, canaries: list[str]) -> dict[str, object]:
    code = ATTACK.replace("CANARIES: list[str] = []", f"CANARIES: list[str] = {canaries!r}", 1)
    with sb.session() as s:
        r = s.run(code, timeout=300)
    assert r.status == "ok", r.transcript[-2000:]
    report: dict[str, object] = json.loads(r.output)
    return report


def _needs_jail() -> None:
    if _jail.bwrap_problem() is not None:
        pytest.skip(f"bubblewrap unavailable here: {_jail.bwrap_problem()}")


CONFIGS = {
    "eval": lambda: SandboxConfig(timeout_s=300.0),  # eval/run.py's SandboxConfig (its defaults)
    "grpo": lambda: training_sandbox_config(2),  # recipes/grpo.py's training sandbox
}


@pytest.mark.slow
@pytest.mark.parametrize("cgroups", ["cgroups", "no-cgroups"])
@pytest.mark.parametrize("which", sorted(CONFIGS))
def test_model_code_finds_no_gold_anywhere(
    which: str, cgroups: str, harness_places: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _needs_jail()
    if cgroups == "no-cgroups":
        monkeypatch.setenv(_jail.NO_CGROUPS_ENV, "1")
    canaries = _canaries(harness_places)
    config = dataclasses.replace(CONFIGS[which](), max_output_bytes=2**24)  # the whole report
    with Sandbox(config) as sb:
        report = _attack(sb, canaries)
    assert report["importable"] == [], "harness or data modules importable"
    environ: dict[str, str] = report["environ"]  # type: ignore[assignment]
    assert set(environ) <= set(_jail.server_env("")) | {"TMPDIR", "PWD"}, environ  # nothing of the harness's
    assert not [v for v in environ.values() for h in (str(REPO), *_packages.harness_dirs()) if h in v]
    assert report["processes"] == {} and report["mountinfo"] == "<FileNotFoundError>"  # /proc hidden
    assert report["names"] == [], "data files or harness names visible"
    assert report["contents"] == [] and report["canaries_anywhere"] == []
    visible = set(report["distributions"])  # type: ignore[arg-type]
    assert visible <= {"numpy", "sympy", "mpmath", "networkx", "scipy", "gmpy2"}, visible
    assert "thinc" not in str(report["pip"]).lower()
    assert not [
        p for p in report["sys_path"] if "thinc_bench" in p or "site-packages" in p and report["sys_path"][p]
    ]  # type: ignore[index]


def _mounts(pid: int) -> list[tuple[str, str, str]]:
    """(root in its file system, mount point, file system type) of each mount `pid` sees."""
    out = []
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        out.append((fields[3], fields[4], fstype))
    return out


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@pytest.mark.parametrize("cgroups", ["cgroups", "no-cgroups"])
def test_the_jail_mounts_only_the_allowlist(cgroups: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _needs_jail()
    if cgroups == "no-cgroups":
        monkeypatch.setenv(_jail.NO_CGROUPS_ENV, "1")
    with Sandbox() as sb, sb.session() as s:
        assert s.run("1").status == "ok"
        live = s._live
        assert live is not None and live.watch is not None
        mounts = _mounts(live.watch.interpreter)
        visible = sb._current_server().launch.visible
    allowed = {
        *SYSTEM_ROOTS,
        *(os.path.realpath(f) for f in _jail.ETC_FILES if os.path.exists(f)),
        *_jail.python_prefixes(),
        _jail.runtime_dir(),
        *(os.path.realpath(e.source) for e in visible.entries),
    }
    forbidden = [
        *_packages.harness_dirs(),
        str(REPO),
        str(REPO.parent / "shared"),
        os.path.expanduser("~/.cache"),
    ]
    packages = {os.path.realpath(e.source) for e in visible.entries}
    real = [(root, point) for root, point, fstype in mounts if fstype not in PSEUDO_FS]
    assert real, mounts
    for root, point in real:
        assert root in allowed, f"{point} shows {root}, which is not on the allowlist"
        if root == _jail.runtime_dir():
            continue  # the runtime folder alone: checked below to hold nothing else of the harness
        if root in packages:
            # an allowed distribution's own files: inside the checkout when its venv is (CI's .venv),
            # but only ever a package's folder or file in a site-packages, never one holding the harness
            assert Path(root).parent.name in ("site-packages", "dist-packages"), (root, point)
            assert not any(_inside(f, root) for f in forbidden), (root, point)
            continue
        assert not any(_inside(root, f) or _inside(f, root) for f in forbidden), (root, point)
    runtime = sorted(p.name for p in Path(_jail.runtime_dir()).iterdir() if p.suffix == ".py")
    assert runtime == sorted(
        [
            "__init__.py",
            "_cgroups.py",
            "_child.py",
            "_isolate.py",
            "_procs.py",
            "_repl.py",
            "_seccomp.py",
            "_wire.py",
            "server.py",
        ]
    )
    names = {e.name for e in visible.entries}
    assert "thinc_bench" not in names and not any(n.startswith("thinc_bench") for n in names)


def test_a_scripted_trajectory_asking_for_its_own_gold_gets_an_import_error(tmp_path: Path) -> None:
    """Issue 49's reproduction, end to end through eval: the cell imports the benchmark registry
    and prints the gold of the problem it is scored on."""
    from thinc_bench import benchmarks
    from thinc_bench.eval.api import evaluate

    problem = benchmarks.load("nano_ranges_confirm")[0]
    code = (
        "from thinc_bench import benchmarks\np = benchmarks.load('nano_ranges_confirm')[0]\nprint(p.answer)"
    )
    turns = [f"<think>Look it up.</think>\n```python\n{code}\n```\n```output", "The answer is \\boxed{0}."]
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"problem_id": problem.id, "turns": turns}) + "\n")
    out = tmp_path / "run"
    evaluate(
        model=str(script),
        backend="scripted",
        benchmarks=["nano_ranges_confirm"],
        limit=1,
        samples=1,
        out=str(out),
    )
    record = json.loads((out / "samples.jsonl").read_text().splitlines()[0])
    assert record["exec_statuses"] == ["error"]
    assert "ModuleNotFoundError: No module named 'thinc_bench'" in record["text"]
    assert problem.answer not in record["text"] and record["correct"] is False


def test_unjailed_sessions_can_neither_import_nor_read_the_harness(harness_places: list[str]) -> None:
    """isolation='none' is no security boundary (docs/sandbox.md), but it keeps what it can: the
    import path holds no harness, and sessions with namespaces see thinc_bench, the working
    directory and the Hub cache covered by empty mounts."""
    cwd, hf_home = os.getcwd(), os.environ["HF_HOME"]
    code = (
        "import importlib.util, os\n"
        "print([n for n in ('thinc_bench', 'datasets', 'huggingface_hub') if importlib.util.find_spec(n)])\n"
        f"print([os.path.isdir(p) and tuple(os.listdir(p)) for p in {[*_packages.harness_dirs(), cwd, hf_home]!r}])"
    )
    with Sandbox(SandboxConfig(isolation="none")) as sb, sb.session() as s:
        r = s.run(code)
        namespaces = sb._current_server().hello.get("namespaces")
        farm = sb._current_server().launch.farm
    assert farm is not None and not os.path.exists(farm)  # the import path's folder goes with it
    assert r.status == "ok", r.transcript
    importable, listings = r.output.splitlines()
    assert importable == "[]"
    if not namespaces:
        pytest.skip("no per-session namespaces here: unjailed sessions read what their uid can")
    # each folder empty, or gone with the empty mount over the folder that holds it
    assert set(ast.literal_eval(listings)) <= {False, ()}, listings
