"""Model code hunting for the answer key: run inside a real session, it reports everything it finds.

Not a test module (pytest does not collect it): `test_answer_key.py` sends this file's source as a
cell, with CANARIES set to the strings a found gold would contain, and checks the JSON report it
prints. Every path a model could try, each bounded so that the cell ends on a shared machine:
importing the harness or anything that could generate or download a benchmark; the environment;
/proc (every visible process's environ, cmdline and cwd, and the session's own mountinfo); the
import path and what each entry lists; pip's and importlib.metadata's view of installed packages;
file names anywhere (`find / -name '*.jsonl'` and kin); and file contents: every file outside the
operating system's folders, and every text-like file inside them, searched for each canary.
"""

import contextlib
import importlib.util
import json
import os
import subprocess
import sys

CANARIES: list[str] = []  # set by the test: strings of known golds and of the harness's sources
REACH = (
    "thinc_bench",
    "thinc_bench.benchmarks",
    "thinc_bench.nano",
    "benchmarks",
    "nano",
    "datasets",
    "huggingface_hub",
    "transformers",
    "trl",
    "torch",
    "pandas",
    "pyarrow",
    "math_verify",
)
DATA_SUFFIXES = (".jsonl", ".parquet", ".arrow", ".jsonl.gz", ".csv.gz")
HARNESS_WORDS = ("thinc_bench", "thinc-bench", "aime20", "hmmt", "beyondaime", "gpqa", "huggingface")
OS_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64")
TEXT_SUFFIXES = (".py", ".json", ".jsonl", ".txt", ".csv", ".md", ".yaml", ".yml", ".html", ".toml", ".cfg")
MAX_BYTES = 4 * 2**20
NEEDLES = [c.encode() for c in CANARIES]


def importable() -> list[str]:
    found = []
    for name in REACH:
        try:
            if importlib.util.find_spec(name) is not None:
                found.append(name)
        except (ImportError, ValueError):
            continue
    return found


def read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(1 << 20).decode("utf-8", "replace")
    except OSError as exc:
        return f"<{type(exc).__name__}>"


def processes() -> dict[str, dict[str, str]]:
    seen = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return {}
    for pid in entries:
        if pid.isdigit() or pid in ("self", "thread-self"):
            cwd = "<unreadable>"
            with contextlib.suppress(OSError):
                cwd = os.readlink(f"/proc/{pid}/cwd")
            seen[pid] = {
                "environ": read(f"/proc/{pid}/environ"),
                "cmdline": read(f"/proc/{pid}/cmdline"),
                "cwd": cwd,
            }
    return seen


def hits(text: str) -> list[str]:
    return [c for c in CANARIES if c in text]


def walk() -> dict[str, list[str]]:
    names, contents, unreadable = [], [], 0
    for top, dirs, files in os.walk("/", onerror=None):
        if top.startswith(("/proc", "/sys", "/dev")):
            dirs[:] = []
            continue
        in_os = top.startswith(OS_TREES)
        for name in dirs + files:
            lower = name.lower()
            if lower.endswith(DATA_SUFFIXES) or any(w in lower for w in HARNESS_WORDS):
                names.append(os.path.join(top, name))
        for name in files:
            path = os.path.join(top, name)
            if in_os and not name.endswith(TEXT_SUFFIXES):
                continue
            try:
                if os.path.islink(path) or os.path.getsize(path) > MAX_BYTES:
                    continue
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError:
                unreadable += 1
                continue
            contents += [f"{path}: {n.decode()}" for n in NEEDLES if n in data]
    return {"names": names, "contents": contents, "unreadable": [str(unreadable)]}


def pip_view() -> dict[str, object]:
    pip = subprocess.run([sys.executable, "-m", "pip", "list"], capture_output=True, text=True, timeout=60)
    import importlib.metadata as metadata

    return {
        "pip": pip.stdout + pip.stderr[-300:],
        "distributions": sorted({d.metadata["Name"] for d in metadata.distributions() if d.metadata["Name"]}),
    }


report: dict[str, object] = {
    "importable": importable(),
    "environ": dict(os.environ),
    "processes": processes(),
    "mountinfo": read("/proc/self/mountinfo"),
    "sys_path": {p: sorted(os.listdir(p or ".")) if os.path.isdir(p or ".") else [] for p in sys.path},
    **pip_view(),
    **walk(),
}
text = json.dumps(report)
report["canaries_anywhere"] = hits(text)
print(json.dumps(report))
