"""What the user sees when a session dies of a limit: `memory` for every memory death, `timeout`
for the CPU-time limit, `killed` for a segfault; the session the kernel chose is the one charged."""

from __future__ import annotations

import ctypes
import glob
import os

import pytest

from thinc_bench.sandbox import Sandbox, SandboxConfig, Session

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="memory cgroups need root")


def _memory_groups_or_skip(sandbox: Sandbox) -> None:
    groups = sandbox._current_server().launch.groups
    if "memory" not in groups.paths:
        pytest.skip(f"no memory cgroup here: {groups.problems.get('memory')}")


def _openblas() -> tuple[str, str]:
    """numpy's bundled OpenBLAS, by its name, and its set-threads function (what threadpoolctl calls)."""
    import numpy as np

    libs = glob.glob(os.path.join(os.path.dirname(np.__file__) + ".libs", "libscipy_openblas*"))
    for lib in libs:
        for name in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads"):
            if hasattr(ctypes.CDLL(lib), name):
                return os.path.basename(lib), name
    pytest.skip(f"numpy here bundles no scipy-openblas library ({libs})")


def test_death_by_the_address_space_limit_is_killed_and_says_the_limit(session: Session) -> None:
    """With a second BLAS thread, OpenBLAS maps a buffer on the next product; once the address
    space is reserved (not touched) to the limit, it gives up and exits: no MemoryError at all.
    Only its output says why, and output never decides a status (a cell can print anything), so
    it is `killed`, with the limit named."""
    lib, set_threads = _openblas()
    code = (
        "import ctypes, mmap, os, numpy as np\n"
        f"lib = os.path.join(os.path.dirname(np.__file__) + '.libs', {lib!r})\n"
        f"ctypes.CDLL(lib).{set_threads}(2)\nheld = []\n"
        "try:\n    while True:\n        held.append(mmap.mmap(-1, 16 * 2**20))\nexcept OSError:\n    pass\n"
        "held.pop().close()\na = np.ones((300, 300))\nprint((a @ a).sum())"
    )
    r = session.run(code, timeout=20.0)
    assert r.status == "killed" and "memory_mb=2048" in r.transcript
    assert session.run("print('fresh')").output.endswith("fresh\n")


def test_memory_error_stays_an_error_the_cell_survives(session: Session) -> None:
    assert session.run("x = bytearray(60 * 2**30)").status == "memory"
    assert session.run("print('same process')").output == "same process\n"


@needs_root
def test_oom_kill_in_the_session_memory_group_is_memory() -> None:
    with Sandbox(SandboxConfig(session_memory_mb=96)) as sb, sb.session() as s:
        _memory_groups_or_skip(sb)
        r = s.run("x = b'1' * (300 * 2**20)\nprint('never')", timeout=20.0)
        after = s.run("print('fresh')")
    assert r.status == "memory" and "out-of-memory killer" in r.transcript and "never" not in r.transcript
    assert "session_memory_mb=96" in r.transcript and "SIGKILL" in r.transcript
    assert after.status == "ok" and after.output.endswith("fresh\n") and "out-of-memory" in after.notice


@needs_root
def test_the_run_that_passes_the_total_cap_is_memory_when_it_is_chosen() -> None:
    with Sandbox(SandboxConfig(total_memory_mb=200)) as sb, sb.session() as small, sb.session() as big:
        _memory_groups_or_skip(sb)
        small.run("kept = b'1' * (40 * 2**20)")
        r = big.run("x = b'1' * (400 * 2**20)\nprint('never')", timeout=20.0)
        assert small.run("len(kept)").output == f"{40 * 2**20}\n"
    assert r.status == "memory" and "total_memory_mb=200" in r.transcript and "never" not in r.transcript


@needs_root
def test_an_idle_session_the_kernel_chose_is_charged_on_its_next_run() -> None:
    """The largest process dies when the sessions pass the total cap, even if it is idle: the run
    that pushed gets its memory, and the idle session's next run says what killed its state. Sent
    while the kernel is still ending the process (a loaded machine), that run is charged `memory`
    itself (docs/sandbox.md, statuses); either way the transcript names the killer and the cap."""
    with Sandbox(SandboxConfig(total_memory_mb=300)) as sb, sb.session() as hog, sb.session() as pusher:
        _memory_groups_or_skip(sb)
        hog.run("kept = b'1' * (200 * 2**20)")
        pushed = pusher.run("x = b'1' * (180 * 2**20)\nprint('pushed')", timeout=20.0)
        after = hog.run("print('after')")
    assert pushed.status == "ok" and pushed.output == "pushed\n"
    assert (after.status == "ok" and after.output.endswith("after\n")) or after.status == "memory"
    assert "out-of-memory killer" in after.transcript and "total_memory_mb=300" in after.transcript


def test_cpu_time_limit_is_a_timeout() -> None:
    with Sandbox(SandboxConfig(cpu_time_s=1)) as sb, sb.session() as s:
        r = s.run("while True:\n    pass", timeout=30.0)
    assert r.status == "timeout" and "CPU-time limit (cpu_time_s=1)" in r.transcript
    assert r.elapsed_s < 20.0  # one CPU second, however loaded the machine


def test_segfault_stays_killed_even_after_an_allocation_failure(session: Session) -> None:
    code = "try:\n    bytearray(60 * 2**30)\nexcept MemoryError:\n    print('MemoryError caught')\nimport ctypes\nctypes.string_at(0)"
    r = session.run(code)
    assert r.status == "killed" and "SIGSEGV" in r.transcript
