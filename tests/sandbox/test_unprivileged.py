"""Every round's attack suites, run again by an unprivileged harness (issue 52).

Most people run evaluations as an ordinary user; CI runs as root, where cgroups and per-session uids
hide what such a user lacks. So, as root, this test runs the attack suites (tests/sandbox/
test_redteam*.py, the answer key's, isolation's and the allowlist's) in a child pytest as a user
of no privilege, and requires them to pass: each attack either holds, or skips because the
protection summary says that protection is off for this user (the suites' own rule). As any other
user the suites already run unprivileged in the tiers, and this test skips.

The user: `thinc-sandbox-test`, created with `useradd --system` when missing (else `nobody`). The
child runs in a private mount namespace in which a folder on the way to the interpreter, the venv
or this checkout that only root may walk (a Python under /root, say) is replaced by an empty tmpfs
holding just those paths, bound back in; nothing else changes, and the child is started by
`setpriv` with no capability left.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
USER = "thinc-sandbox-test"
SUITES = [
    "tests/sandbox/test_redteam.py",
    "tests/sandbox/test_redteam3.py",
    "tests/sandbox/test_redteam4.py",
    "tests/sandbox/test_redteam5.py",
    "tests/sandbox/test_answer_key.py",
    "tests/sandbox/test_isolation.py",
    "tests/sandbox/test_packages.py",
]
# Not an attack, and it reads the bundled model's tokenizer from the invoking user's cache.
DESELECT = "not scripted_trajectory"
CHILD_TIMEOUT_S = 1500


def _user() -> tuple[int, int]:
    """(uid, gid) of the unprivileged test user, created if missing."""
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        if shutil.which("useradd"):
            subprocess.run(
                ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
                capture_output=True,
                check=False,
            )
        try:
            entry = pwd.getpwnam(USER)
        except KeyError:
            entry = pwd.getpwnam("nobody")
    return entry.pw_uid, entry.pw_gid


def _walkable_by_others(path: Path) -> bool:
    return bool(path.stat().st_mode & 0o001)


def _reopenings(needed: list[Path], stage: Path) -> list[str]:
    """Shell commands that make each needed path reachable for any user: every folder on the way
    that others may not walk is covered by a tmpfs holding only the next folder of each needed path
    under it, bound back from a staging mount."""
    commands: list[str] = []
    closed: dict[Path, set[str]] = {}
    for path in needed:
        for ancestor in list(reversed(path.parents))[1:] + [path]:
            if ancestor != path and not _walkable_by_others(ancestor):
                child = path.relative_to(ancestor).parts[0]
                closed.setdefault(ancestor, set()).add(child)
    for i, (folder, children) in enumerate(sorted(closed.items(), key=lambda kv: len(kv[0].parts))):
        q = shlex.quote
        staged = []
        for j, child in enumerate(sorted(children)):
            spot = stage / f"{i}-{j}"
            spot.mkdir()
            commands.append(f"mount --bind {q(str(folder / child))} {q(str(spot))}")
            staged.append((child, spot))
        commands.append(f"mount -t tmpfs -o mode=0755,size=1m tmpfs {q(str(folder))}")
        for child, spot in staged:
            target = folder / child
            kind = "mkdir" if spot.is_dir() else "touch"
            commands += [f"{kind} {q(str(target))}", f"mount --move {q(str(spot))} {q(str(target))}"]
    return commands


@pytest.mark.slow
def test_the_attack_suites_hold_for_an_unprivileged_user() -> None:
    if os.geteuid() != 0:
        pytest.skip("this harness is unprivileged already: the suites run as this user in the tiers")
    for tool in ("unshare", "setpriv", "mount"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} (util-linux) is not installed")
    uid, gid = _user()
    home = Path(tempfile.mkdtemp(prefix="thinc-unprivileged-", dir="/var/tmp"))
    stage = Path(tempfile.mkdtemp(prefix="thinc-unprivileged-stage-"))
    try:
        os.chown(home, uid, gid)
        python = Path(sys.executable)
        needed = sorted(
            {
                Path(os.path.realpath(p))
                for p in (sys.base_prefix, sys.prefix, python.parent, REPO, REPO.parent / "shared")
            }
            | {Path(os.path.realpath(python)).parent.parent}
        )
        needed = [p for p in needed if p.exists()]
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(home),
            "TMPDIR": str(home),
            "PYTHONPATH": str(REPO),
            "PYTHONDONTWRITEBYTECODE": "1",
            "OMP_NUM_THREADS": "1",
            "LANG": "C.UTF-8",
        }
        pytest_args = [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q", "-rs"]
        pytest_args += [
            "-m",
            "not gpu and not network",
            "-k",
            DESELECT,
            "--basetemp",
            str(home / "pytest"),
            *SUITES,
        ]
        script = [
            "set -e",
            "mount --make-rprivate /",
            *_reopenings(needed, stage),
            f"cd {shlex.quote(str(REPO))}",
            "exec setpriv --reuid={uid} --regid={gid} --clear-groups --inh-caps=-all --bounding-set=-all "
            "env -i {env} {args}".format(
                uid=uid,
                gid=gid,
                env=" ".join(shlex.quote(f"{k}={v}") for k, v in env.items()),
                args=" ".join(shlex.quote(a) for a in pytest_args),
            ),
        ]
        child = subprocess.run(
            ["unshare", "--mount", "sh", "-c", "\n".join(script)],
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            check=False,
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(stage, ignore_errors=True)
    tail = (child.stdout + child.stderr)[-6000:]
    print(tail)  # which attacks skipped, and why, are in the child's -rs summary
    assert child.returncode == 0, tail
    assert " passed" in tail and " failed" not in tail and " error" not in tail
