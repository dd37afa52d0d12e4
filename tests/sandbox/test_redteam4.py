"""The red-team findings of issue 38, one test each (the attack first, then what must hold): a run's
status and output come only from that run (no process it left, no relay on its channels), no user
namespace nested in a session, injected failures that read like real ones, and a drain that ends.

Every attack is bounded (short timeouts, small caps) so that it cannot hurt a shared machine even
against a sandbox without the protection.
"""

from __future__ import annotations

import ast
import os
import platform
import random
import re
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thinc_bench.sandbox import Sandbox, SandboxConfig, Session, _jail, render_fault
from thinc_bench.sandbox._outcome import DRAIN_MAX_CHUNKS, READ_CHUNK_BYTES, _Output, drain
from thinc_bench.sandbox.faults import FAULT_TYPES
from thinc_bench.sandbox.runtime import _seccomp

CLEAR_PDEATHSIG = "import ctypes\nctypes.CDLL(None).prctl(1, 0, 0, 0, 0)\n"


@pytest.fixture(
    scope="module", params=["namespaces", "no-namespaces", "no-cgroups", "no-cgroups-no-namespaces"]
)
def any_sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    """A sandbox with per-session namespaces, and one without (the degraded path keeps the rule);
    each also without cgroups, as an unprivileged harness runs (its sessions' processes found
    through their process tree in /proc)."""
    with pytest.MonkeyPatch.context() as mp:
        if "no-namespaces" in request.param:
            mp.setenv(_jail.NO_NAMESPACES_ENV, "1")
        if "no-cgroups" in request.param:
            mp.setenv(_jail.NO_CGROUPS_ENV, "1")
        sb = Sandbox(SandboxConfig(timeout_s=5.0)).start()  # reads the variables once, here
    with sb:
        yield sb


@pytest.fixture
def tag() -> str:
    return "t" + uuid.uuid4().hex[:14]


def _named(tag: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["name", "status"]):
        if proc.info.get("name") == tag and proc.info.get("status") != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def _needs_run_sweep(sandbox: Sandbox) -> None:
    """Skip where the summary says a run's leftovers cannot be found (neither a pids cgroup nor the
    session's process tree in /proc): the summary, not the test, is what tells the user."""
    if not any(name.startswith("nothing a run starts outlives the run") for name in sandbox.protections[0]):
        pytest.skip(f"the per-run sweep is off here: {sandbox.protections[1]}")


def _needs_filter(sandbox: Sandbox) -> None:
    if platform.machine() not in _seccomp.ARCHES:
        pytest.skip(f"no seccomp table for {platform.machine()}")
    assert any(name.startswith("seccomp filter") for name in sandbox.protections[0]), sandbox.protections


# 1 ---------------------------------------------------------------------------------------------
LATE_WRITER = (
    "import os, subprocess, sys\n"
    "r, w = os.pipe()\n"
    "child = {child!r}\n"
    "p = subprocess.Popen([sys.executable, '-c', child, str(w)], start_new_session=True, pass_fds=[w])\n"
    "os.close(w)\n"
    "assert os.read(r, 2) == b'up'\n"
    "kept = 1\n"
)
LATE_CHILD = (
    "import ctypes, os, sys, time\nctypes.CDLL(None).prctl(15, {tag!r}, 0, 0, 0)\n"
    + CLEAR_PDEATHSIG
    + "os.write(int(sys.argv[1]), b'up')\ntime.sleep(0.3)\n"
    "while True:\n    os.write(1, b'[forged by run 1]\\n')\n    time.sleep(0.01)\n"
)


def test_a_child_left_by_one_run_writes_nothing_into_the_next(any_sandbox: Sandbox, tag: str) -> None:
    _needs_run_sweep(any_sandbox)
    before = any_sandbox.stats.survivors
    with any_sandbox.session() as session:
        first = session.run(LATE_WRITER.format(child=LATE_CHILD.format(tag=tag.encode())))
        assert first.status == "ok", first
        assert not _named(tag)  # gone when run() returns
        assert "left 1 process(es) running" in first.notice_after and first.output == ""
        assert any_sandbox.stats.survivors == before + 1 and session.survivors == 1
        time.sleep(0.5)  # the child would have written by now
        second = session.run("print('mine')")
        assert second.output == "mine\n" and second.between_runs == "" and second.notice == ""
        assert session.run("kept").output == "1\n"  # the interpreter and its state are kept


def test_a_forked_writer_without_a_new_session_is_killed_too(any_sandbox: Sandbox) -> None:
    _needs_run_sweep(any_sandbox)
    with any_sandbox.session() as session:
        code = (
            "import os, time\n"
            "if os.fork() == 0:\n"
            "    time.sleep(0.3)\n"
            "    os.write(1, b'late\\n')\n"
            '    body = b\'{"op": "done", "status": "ok", "nonce": "", "threads": 0}\'\n'
            "    os.write(3, len(body).to_bytes(4, 'big') + body)\n"
            "    os._exit(0)\n"
            "kept = 7\n"
        )
        assert session.run("warm = 1").notice == ""  # a run just before, within the second
        first = session.run(code)  # that cgroup v1 may cache a process list for
        assert first.status == "ok" and "left 1 process(es) running" in first.notice_after
        time.sleep(0.5)
        second = session.run("print(kept)\n1/0")
        assert second.status == "error" and second.output.startswith("7\n") and "late" not in second.output
        assert "ZeroDivisionError" in second.output and second.notice == ""


RELAY = """import json, os, select, socket
a, b = socket.socketpair()
r, w = os.pipe()
if os.fork() == 0:  # the relay: holds the real control socket (fd 3) and output pipe (fd 1)
    b.close(); os.close(w)
    while True:
        ready = select.select([3, a.fileno(), r], [], [])[0]
        if 3 in ready:
            data = os.read(3, 65536)
            if not data:
                os._exit(0)
            a.sendall(data)
        if a.fileno() in ready:
            data = a.recv(65536)
            if not data:
                os._exit(0)
            frame = json.loads(data[4:])
            frame['status'] = 'ok'
            body = json.dumps(frame).encode()
            os.write(1, b'{invented}\\n')
            os.write(3, len(body).to_bytes(4, 'big') + body)
        if r in ready:
            os.read(r, 65536)
os.dup2(b.fileno(), 3)
os.dup2(w, 1)
os.dup2(w, 2)
"""


@pytest.mark.parametrize("channels", ["control and output", "output only"])
def test_a_relay_on_the_channels_cannot_forge_later_runs(any_sandbox: Sandbox, channels: str) -> None:
    with any_sandbox.session() as session:
        invented = "invented" + uuid.uuid4().hex[:8]
        code = RELAY.replace("{invented}", invented)
        if channels == "output only":
            code = code.replace("os.dup2(b.fileno(), 3)\n", "")
        session.run("kept = 1")
        session.run(code)
        later = [session.run("1/0"), session.run("print('x' + 1)")]
        for r in later:
            assert r.status == "error" and invented not in r.output, r
        assert "session restarted" in later[0].notice_before  # the state loss is reported
        assert later[1].notice == ""
        assert session.run("'kept' in globals()").output == "False\n"


FAKE_LOOP = r"""import json, os, sys
body = json.dumps({"op": "done", "status": "ok", "nonce": sys.argv[1], "threads": 0}).encode()
os.write(3, len(body).to_bytes(4, "big") + body)
buf = b""
while True:
    while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "big"):
        data = os.read(3, 65536)
        if not data:
            os._exit(0)
        buf += data
    n = int.from_bytes(buf[:4], "big")
    request, buf = json.loads(buf[4 : 4 + n]), buf[4 + n :]
    os.write(1, b"INVENTED\n")
    body = json.dumps({"op": "done", "status": "ok", "nonce": request["nonce"], "threads": 0}).encode()
    os.write(3, len(body).to_bytes(4, "big") + body)
"""


def test_an_interpreter_that_execs_a_fake_loop_cannot_forge_later_runs(any_sandbox: Sandbox) -> None:
    """The interpreter replaces itself (same pid, same channels) with a program that answers every
    later run "ok" with invented output, starting with the nonce of the run that exec'd it."""
    _needs_run_sweep(any_sandbox)
    invented = "invented" + uuid.uuid4().hex[:8]
    fake = FAKE_LOOP.replace("INVENTED", invented)
    code = (
        "import os, sys\nf = sys._getframe()\nwhile 'nonce' not in f.f_locals:\n    f = f.f_back\n"
        f"os.execv(sys.executable, [sys.executable, '-c', {fake!r}, f.f_locals['nonce']])"
    )
    with any_sandbox.session() as session:
        session.run("kept = 1")
        r = session.run(code)
        assert r.status == "killed" and "replaced itself with another program (exec)" in r.notice_after
        later = session.run("1/0")
        assert (
            later.status == "error" and invented not in later.output and "ZeroDivisionError" in later.output
        )
        assert "session restarted" in later.notice_before


def test_closing_the_output_pipe_ends_the_interpreter_with_a_reason(session: Session) -> None:
    r = session.run("import os\nos.close(1)\nos.close(2)\nx = 1")
    assert r.status == "killed" and "replaced fd 1, 2 or 3" in r.notice_after
    assert session.run("print('back')").output == "back\n"


# 2 ---------------------------------------------------------------------------------------------
NESTED_USERNS = """import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
def err(r):
    return errno.errorcode.get(ctypes.get_errno()) if r < 0 else 'allowed'
NEWUSER, NEWNET, SIGCHLD = 0x10000000, 0x40000000, 17
print('unshare', err(libc.unshare(NEWUSER | NEWNET)))
print('unshare-user', err(libc.unshare(NEWUSER)))
print('clone', err(libc.syscall({clone}, NEWUSER | SIGCHLD, 0, 0, 0, 0)))
print('clone3', err(libc.syscall({clone3}, 0, 0)))
"""


def test_a_session_cannot_nest_a_user_namespace(sandbox: Sandbox, session: Session) -> None:
    """The TCP-buffer attack's first step: a user and network namespace of the session's own, where
    it held the capability to force socket buffers past its memory cgroup. Refused."""
    _needs_filter(sandbox)
    numbers = _seccomp.ARCHES[platform.machine()].numbers
    r = session.run(NESTED_USERNS.format(clone=numbers["clone"], clone3=numbers["clone3"]))
    assert r.output.split("\n")[:4] == ["unshare EPERM", "unshare-user EPERM", "clone EPERM", "clone3 ENOSYS"]
    forced = session.run(
        "import socket, errno\ns = socket.socket()\ntry:\n    s.setsockopt(socket.SOL_SOCKET, 32, 1 << 28)\n"
        "    print('forced')\nexcept OSError as e:\n    print(errno.errorcode[e.errno])"
    )
    assert forced.output == "EPERM\n"  # SO_SNDBUFFORCE needs CAP_NET_ADMIN, which no namespace gives


def test_threads_and_subprocesses_still_work_without_clone3(sandbox: Sandbox, session: Session) -> None:
    _needs_filter(sandbox)
    code = (
        "import subprocess, sys, threading, multiprocessing\nout = []\n"
        "ts = [threading.Thread(target=out.append, args=(i,)) for i in range(4)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "p = subprocess.run([sys.executable, '-c', 'print(6 * 7)'], capture_output=True, text=True)\n"
        "with multiprocessing.get_context('fork').Pool(2) as pool:\n    sq = pool.map(abs, [-1, -2])\n"
        "print(sorted(out), p.stdout.strip(), sq)"
    )
    r = session.run(code)
    assert r.status == "ok" and r.output == "[0, 1, 2, 3] 42 [1, 2]\n", r


# 3 ---------------------------------------------------------------------------------------------
def test_injected_failures_take_their_own_cell_numbers(sandbox: Sandbox) -> None:
    with sandbox.session(inject_failures=2) as s:
        faults = [s.run("x = [1, 2, 3]\ny = x[1] / x[0]"), s.run("z = int('7') + y")]
        real = s.run("1/0")
    assert [f.injected for f in faults] == [True, True] and not real.injected
    cells = [re.findall(r'File "<cell-(\d+)>"', r.output) for r in (*faults, real)]
    assert cells == [["1"], ["2"], ["3"]]
    for f, code in zip(faults, ["x = [1, 2, 3]\ny = x[1] / x[0]", "z = int('7') + y"], strict=True):
        shown = f.output.splitlines()[2].strip()
        assert shown in [line.strip() for line in code.splitlines()]
        assert f.output.splitlines()[-1].split(":")[0] in FAULT_TYPES
        assert "inject" not in f.output.lower() and f.notice == ""


@pytest.mark.parametrize(
    "code",
    [
        "x = [1, 2]\ny = x[5] + 1",
        "d = {'a': 1}\nprint(d['k'])",
        "n = 0\nt = 10 / n",
        "v = int('abc')",
        "import math\nr = math.sqrt(-1)",
        "total = 1 + 'a'",
        "print(undefined_name)",
    ],
)
def test_a_rendered_fault_reads_exactly_as_the_real_failure(session: Session, code: str) -> None:
    """When the renderer draws the exception that the code really raises, its text is the real
    run's, byte for byte (same file name, line, carets and message)."""
    real = session.run(code).output
    assert real.startswith("Traceback") and '"<cell-1>"' in real, real
    rendered = {render_fault(code, 1, random.Random(seed)) for seed in range(60)}
    assert real in rendered, (real, rendered)


def _features(text: str, code: str, cell: int) -> tuple[object, ...]:
    """What a text classifier could look at: exception type, whether the line shown is one of the
    code's, whether carets point into it, whether the cell number is the expected one, whether
    anything was printed before the traceback."""
    lines = text.splitlines()
    shown = lines[2].strip() if len(lines) > 2 else ""
    numbers = re.findall(r'File "<cell-(\d+)>"', text)
    return (
        lines[-1].split(":")[0] if lines else "",
        shown in [line.strip() for line in code.splitlines()],
        any(set(line.strip()) <= set("^~") and line.strip() for line in lines),
        numbers == [str(cell)],
        len(numbers),
        text.startswith("Traceback"),
    )


# Blocks a model writes, each with broken variants (one line changed) that fail for real.
BLOCKS = [
    ("xs = [3, 1, 2]\nm = xs[0] / xs[1]\nprint(m)", ["xs = [3, 1, 2]\nm = xs[0] / (xs[1] - 1)\nprint(m)", "xs = [3, 1, 2]\nm = xs[4] / xs[1]\nprint(m)", "xs = [3, 1, 2]\nm = ys[0] / xs[1]\nprint(m)"]),
    ("d = {'a': 2}\nv = d['a'] * 3\nprint(v)", ["d = {'a': 2}\nv = d['b'] * 3\nprint(v)", "d = {'a': 2}\nv = d['a'] * 3\nprint(w)", "d = {'a': '2'}\nv = d['a'] - 3\nprint(v)"]),
    ("n = int('12')\nk = n % 5\nprint(k)", ["n = int('1x2')\nk = n % 5\nprint(k)", "n = int('12')\nk = n % 0\nprint(k)", "n = int('12')\nk = n % five\nprint(k)"]),
    ("import math\nr = math.log(8, 2)\nprint(r)", ["import math\nr = math.log(-8, 2)\nprint(r)", "import math\nr = math.log(8, 2) + 'a'\nprint(r)", "import math\nr = math.log(8, 2)\nprint(rr)"]),
    ("s = 'abc'\nc = s[1]\nprint(c)", ["s = 'abc'\nc = s[7]\nprint(c)", "s = 'abc'\nc = s[1] + 1\nprint(c)", "s = 'abc'\nc = t[1]\nprint(c)"]),
    ("a = [1, 2, 3]\nb = sum(a) // len(a)\nprint(b)", ["a = [1, 2, 3]\nb = sum(a) // (len(a) - 3)\nprint(b)", "a = [1, 2, 3]\nb = sum(a) // len(a)\nprint(a[3])", "a = [1, 2, 3]\nb = sum(a) // len(5)\nprint(b)"]),
]  # fmt: skip


def test_a_classifier_on_text_cannot_tell_injected_from_real_failures(sandbox: Sandbox) -> None:
    """A seeded sample: for each block, its real failures (broken variants run in the real sandbox)
    and injected failures of the block itself; then the next failing cell of the session. A
    lookup-table classifier on the features above, trained and scored leave-one-out, does no
    better than chance (majority-class accuracy 0.5 plus binomial noise)."""
    samples: list[tuple[tuple[object, ...], bool]] = []
    for block, variants in BLOCKS:
        for variant in variants:
            with sandbox.session() as s:
                real, after = s.run(variant), s.run("1/0")
            samples.append((_features(real.output, variant, 1) + _features(after.output, "1/0", 2), False))
            with sandbox.session(inject_failures=1) as s:
                fake, after = s.run(block), s.run("1/0")
            assert fake.injected and not real.injected
            samples.append((_features(fake.output, block, 1) + _features(after.output, "1/0", 2), True))
    right = 0
    for i, (x, label) in enumerate(samples):
        ranked = Counter(lab for j, (y, lab) in enumerate(samples) if j != i and y == x).most_common()
        if ranked and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]):
            guess = ranked[0][0]  # the majority of the samples that look the same
        else:  # unseen or tied: a coin
            guess = random.Random(i).random() < 0.5
        right += guess == label
    n = len(samples)
    assert right / n <= 0.5 + 2.5 * (0.25 / n) ** 0.5, (right, n, samples)


CODE_LINES = st.sampled_from(
    [
        "x = 1",
        "y = x / 2",
        "z = [1, 2][i]",
        "w = d['k']",
        "v = int(s)",
        "u = f(1, 2)",
        "t = a + b",
        "for i in range(3):\n    q = i % 2",
        "def g(n):\n    return n / 0",
        "pass",
        "print(len(x))",
        "import math\nm = math.sqrt(y)",
    ]  # fmt: skip
)


@settings(max_examples=60, deadline=None)
@given(st.lists(CODE_LINES, min_size=1, max_size=5), st.integers(1, 50), st.integers(0, 2**32))
def test_every_rendered_fault_is_a_traceback_of_that_cell(lines: list[str], cell: int, seed: int) -> None:
    code = "\n".join(lines)
    text = render_fault(code, cell, random.Random(seed))
    out = text.splitlines()
    assert out[0] == "Traceback (most recent call last):"
    assert re.fullmatch(rf'  File "<cell-{cell}>", line (\d+), in <module>', out[1])
    lineno = int(out[1].split("line ")[1].split(",")[0])
    assert out[2].strip() == code.splitlines()[lineno - 1].strip()
    # Only lines that run in the cell's own frame: never a function body.
    assert not any(
        isinstance(n, ast.FunctionDef) and n.lineno < lineno <= (n.end_lineno or 0)
        for n in ast.walk(ast.parse(code))
    )
    assert out[-1].split(":")[0] in (*FAULT_TYPES, "MemoryError") and text.endswith("\n")
    assert render_fault(code, cell, random.Random(seed)) == text  # the seed decides


# 4 ---------------------------------------------------------------------------------------------
def test_the_drain_ends_whatever_the_writer_does() -> None:
    """/dev/zero is a writer that never stops and never blocks: one drain still ends, bounded."""
    output = _Output(1000)
    fd = os.open("/dev/zero", os.O_RDONLY | os.O_NONBLOCK)
    try:
        drain(fd, output, 0)
        drain(fd, output, 0.05)
    finally:
        os.close(fd)
    assert 0 < output.total <= 2 * DRAIN_MAX_CHUNKS * READ_CHUNK_BYTES
    assert output.render()[1]  # truncated, with the cut counted


def test_a_splice_flood_still_times_out(sandbox: Sandbox, session: Session) -> None:
    code = (
        "import os\n"
        "for _ in range(3):\n"
        "    if os.fork() == 0:\n"
        "        z = os.open('/dev/zero', os.O_RDONLY)\n"
        "        while True:\n"
        "            try:\n                os.splice(z, 1, 1 << 20)\n"
        "            except (AttributeError, OSError):\n                os.write(1, bytes(1 << 16))\n"
        "import time\ntime.sleep(30)"
    )
    r = session.run(code, timeout=1.0)
    assert r.status == "timeout" and r.truncated
    assert session.run("print('after')").output == "after\n"
