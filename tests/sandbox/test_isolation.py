"""Isolation, checked from outside where possible: network, environment, harness files, jail modes."""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

import pytest

from thinc_bench.errors import SandboxUnavailable
from thinc_bench.sandbox import Sandbox, SandboxConfig, Session, _jail
from thinc_bench.sandbox.runtime import _cgroups

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_no_connection_to_a_socket_listening_on_loopback(session: Session) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0.5)
        port = server.getsockname()[1]
        code = f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n    print('connected')\nexcept OSError as e:\n    print('refused')"
        assert session.run(code).output == "refused\n"
        with pytest.raises(TimeoutError):
            server.accept()


def test_harness_secrets_in_environment_are_invisible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THINC_TEST_API_KEY", "sk-do-not-leak")
    with Sandbox() as sb, sb.session() as s:
        out = s.run(
            "import os\nprint(sorted(os.environ))\nprint(os.environ.get('THINC_TEST_API_KEY'))"
        ).output
    assert "sk-do-not-leak" not in out and "THINC_TEST_API_KEY" not in out


def test_harness_files_are_not_visible_in_the_jail(session: Session) -> None:
    code = f"import os\nprint(os.path.exists({str(REPO_ROOT / 'pyproject.toml')!r}), os.path.exists('/etc/shadow'))"
    assert session.run(code).output == "False False\n"


def test_proc_of_other_processes_is_hidden(session: Session) -> None:
    assert session.run("import os\nos.listdir('/proc')").output == "[]\n"


def test_system_paths_are_read_only(session: Session) -> None:
    r = session.run("open('/usr/thinc_probe', 'w')")
    assert r.status == "error" and "Read-only file system" in r.output


def test_demanding_bwrap_without_it_raises_with_apt_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    _jail.bwrap_problem.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match="apt-get install -y bubblewrap"):
            Sandbox(SandboxConfig(isolation="bwrap")).start()
    finally:
        _jail.bwrap_problem.cache_clear()


def test_without_jail_one_warning_names_only_the_missing_protections(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with (
        caplog.at_level(logging.INFO, logger="thinc_bench.sandbox"),
        Sandbox(SandboxConfig(isolation="none")) as sb,
        sb.session() as s,
    ):
        s.run("1")
    lines = [r for r in caplog.records if "protections" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING
    message = lines[0].getMessage()
    assert "bubblewrap jail" in message and "because isolation" in message
    assert "clean environment" not in message  # that one is active: only what is missing is named


def test_jail_is_used_when_bubblewrap_works() -> None:
    if _jail.bwrap_problem() is not None:
        pytest.skip(f"bubblewrap unavailable here: {_jail.bwrap_problem()}")
    with Sandbox() as sb:
        jailed, summary = sb.jailed, sb.protection_summary()
    assert jailed and summary["active"][0].startswith("bubblewrap jail")
    assert all(summary["inactive"].values())  # every missing protection says why
    if os.geteuid() == 0 and (_cgroups.ROOT / "memory").is_dir():
        # As root on a cgroup-v1 host only the host-wide OOM exemption may be missing (it needs
        # CAP_SYS_RESOURCE, which some containers withhold).
        assert [name for name in summary["inactive"] if "oom_score_adj" not in name] == []


def test_a_protection_the_host_withholds_is_logged_at_info_and_still_recorded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    if _jail.bwrap_problem() is not None:
        pytest.skip(f"bubblewrap unavailable here: {_jail.bwrap_problem()}")
    with caplog.at_level(logging.INFO, logger="thinc_bench.sandbox"), Sandbox() as sb, sb.session() as s:
        s.run("1")
        summary = sb.protection_summary()
    inactive = list(summary["inactive"])
    if [name for name in inactive if "oom_score_adj" not in name] or not inactive:
        pytest.skip(f"this host misses other protections, or none: {inactive}")
    # only the OOM-killer exemption is missing (a host without CAP_SYS_RESOURCE): nothing to act on
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING and "protection" in r.getMessage()]
    assert warned == []
    (info,) = [r for r in caplog.records if "oom_score_adj" in r.getMessage()]
    assert info.levelno == logging.INFO and "CAP_SYS_RESOURCE" in info.getMessage()


def test_degraded_mode_removes_host_scratch_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_jail.NO_NAMESPACES_ENV, "1")
    with Sandbox(SandboxConfig(isolation="none")) as sb:
        with sb.session() as s:
            scratch = s.run("import os\nopen('f.txt', 'w').write('x')\nprint(os.getcwd())").output.strip()
            assert os.path.isfile(os.path.join(scratch, "f.txt"))
        assert not os.path.exists(scratch)


def test_python_prefixes_under_tmp_are_moved_out_of_the_scratch_mount() -> None:
    from thinc_bench.sandbox._jail import JAIL_TMP_PREFIXES, jail_path

    assert jail_path("/tmp/ci/main/.venv") == f"{JAIL_TMP_PREFIXES}/ci/main/.venv"
    assert jail_path("/work/main/.venv") == "/work/main/.venv"
    assert jail_path("/tmpfoo/venv") == "/tmpfoo/venv"
