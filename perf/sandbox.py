"""Sandbox performance, printed side by side: this tree against a baseline revision, and fork-server
sessions against a fresh `python` per block.

Run: `python perf/sandbox.py [--runs 300] [--baseline main]`. First the warm-pool table: session
start (`session()` + a first run) and close with `warm_sessions=0` and at its default, two sandboxes
of this tree measured in alternating rounds (goal: start p50 < 10 ms with the pool). Then the
before/after table: this
tree's sandbox and the baseline revision's (its `thinc_bench/` exported with `git archive` into a
temporary folder), measured in alternating rounds in separate processes so that both see the same
machine load, with the median of the rounds and the ratio. Then this tree alone: per-run latency
(p50, p95) for a trivial and a sympy block, session start latency, the same blocks run the way most
harnesses do (a fresh interpreter per block that imports sympy), and throughput with 1, 2 and 8
concurrent sessions. Goals on the 2-core dev machine: trivial p50 < 5 ms, session start < 30 ms,
>= 30x faster than a fresh interpreter, and within 1.2x of the baseline's run and start latency
(issue 27: the sweep, the seccomp filter and the shared /dev/shm must not cost more; issue 38: the
run-end check of the session's pids group, the loop's fd check, the larger filter; issues 49/52/53:
the allowlisted jail's mounts, each session's reaper process, the load-aware clock's read at each
run). Session close (the sweep of its groups) and a cold session start are timed too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TRIVIAL = "x = 1 + 1\nx"
SYMPY = "import sympy\nn = sympy.Symbol('n')\nsympy.factor(n**4 - 1)"
# Both sides run this file with `--json`; it uses only the public Sandbox API, old and new alike.
COMPARED = (
    "server start",
    "session start (+1st run)",
    "cold session start (+1st run)",
    "session close",
    "trivial run",
    "sympy run",
)


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def time_runs(sb: Any, code: str, n: int) -> list[float]:
    with sb.session() as s:
        s.run(code)  # warm: the session exists and sympy's caches are primed like in a trajectory
        out = []
        for _ in range(n):
            t = time.perf_counter()
            r = s.run(code)
            out.append(time.perf_counter() - t)
            assert r.status == "ok", r
    return out


def time_session_starts(sb: Any, n: int, life_s: float = 0.0) -> tuple[list[float], list[float]]:
    """Start (`session()` + a first run) and close of `n` sessions, each timed apart; each session
    lives `life_s` between its first run and its close (a trajectory's generation)."""
    starts, closes = [], []
    for _ in range(n):
        t = time.perf_counter()
        s = sb.session()
        s.run("pass")
        starts.append(time.perf_counter() - t)
        time.sleep(life_s)
        t = time.perf_counter()
        s.close()
        closes.append(time.perf_counter() - t)
    return starts, closes


def warm_pool_table(n: int, rounds: int, life_s: float) -> None:
    """Session start and close with the warm pool off (`warm_sessions=0`) and at its default, both
    sandboxes open in this process and measured in alternating rounds (same load on both)."""
    from thinc_bench.sandbox import Sandbox, SandboxConfig

    default = SandboxConfig().warm_sessions
    sides = {0: ([], []), default: ([], [])}  # type: dict[int, tuple[list[float], list[float]]]
    with Sandbox(SandboxConfig(warm_sessions=0)) as off, Sandbox(SandboxConfig()) as on:
        boxes = {0: off, default: on}
        for sb in boxes.values():
            time_session_starts(sb, 3)  # warm caches
        for i in range(rounds):
            for size in (0, default) if i % 2 == 0 else (default, 0):
                starts, closes = time_session_starts(boxes[size], n, life_s)
                sides[size][0].extend(starts)
                sides[size][1].extend(closes)
        taken = on.stats.warm_taken
    print(
        f"warm pool: warm_sessions=0 vs {default}, {rounds} alternating rounds of {n} sessions, "
        f"each living {life_s * 1000:.0f} ms between its first run and its close"
    )
    print(f"{'':28}{'off p50':>10}{'p95':>9}{'on p50':>10}{'p95':>9}{'ratio p50':>11}")
    for label, k in (("session start (+1st run)", 0), ("session close", 1)):
        a, b = sides[0][k], sides[default][k]
        print(
            f"{label:28}{pct(a, 0.5):8.2f}ms{pct(a, 0.95):7.2f}ms{pct(b, 0.5):8.2f}ms{pct(b, 0.95):7.2f}ms"
            f"{pct(b, 0.5) / pct(a, 0.5):10.2f}x"
        )
    print(f"  sessions given a ready process: {taken} of {rounds * n + 3}")
    print()


def time_fresh(code: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import sympy\n" + code], check=True, capture_output=True)
        out.append(time.perf_counter() - t)
    return out


def throughput(sb: Any, code: str, workers: int, per_worker: int) -> float:
    def work(_: int) -> None:
        with sb.session() as s:
            for _ in range(per_worker):
                s.run(code)

    t = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(work, range(workers)))
    return workers * per_worker / (time.perf_counter() - t)


def measure(runs: int) -> dict[str, float]:
    """p50 latencies in ms of one sandbox built from whatever `thinc_bench` this process imports;
    the cold start is a session's with no process started ahead of need (`warm_sessions=0`), what a
    trajectory pays once the pool is drained (every fork of a session's processes included)."""
    from thinc_bench.sandbox import Sandbox, SandboxConfig

    with Sandbox(SandboxConfig(warm_sessions=0)) as cold:
        cold_starts, _ = time_session_starts(cold, max(10, runs // 6))
    t = time.perf_counter()
    with Sandbox() as sb:
        start = (time.perf_counter() - t) * 1000
        starts, closes = time_session_starts(sb, max(10, runs // 6))
        return {
            "server start": start,
            "session start (+1st run)": pct(starts, 0.5),
            "cold session start (+1st run)": pct(cold_starts, 0.5),
            "session close": pct(closes, 0.5),
            "trivial run": pct(time_runs(sb, TRIVIAL, runs), 0.5),
            "sympy run": pct(time_runs(sb, SYMPY, max(10, runs // 3)), 0.5),
        }


def export_revision(rev: str, into: Path) -> Path:
    """Write `rev`'s thinc_bench/ into `into` (no worktree, nothing in .git changes)."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", rev, "thinc_bench"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def measure_in(tree: Path, runs: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, __file__, "--json", "--runs", str(runs)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, float] = json.loads(out.splitlines()[-1])
    return result


def compare(rev: str, runs: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="thinc-perf-baseline-") as tmp:
        base_tree = export_revision(rev, Path(tmp))
        sides: dict[str, list[dict[str, float]]] = {rev: [], "this tree": []}
        for i in range(rounds):  # alternate, so that a change in machine load hits both sides
            order = [(rev, base_tree), ("this tree", REPO)]
            for name, tree in order if i % 2 == 0 else order[::-1]:
                sides[name].append(measure_in(tree, runs))
    print(f"before/after, median of {rounds} alternating rounds, p50 ms ({runs} runs per round)")
    print(f"{'':28}{rev:>14}{'this tree':>14}{'ratio':>9}")
    for key in COMPARED:
        before = statistics.median(m[key] for m in sides[rev])
        after = statistics.median(m[key] for m in sides["this tree"])
        print(f"{key:28}{before:12.2f}ms{after:12.2f}ms{after / before:8.2f}x")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--fresh-runs", type=int, default=8)
    parser.add_argument("--baseline", default="main", help="git revision to compare with; 'none' skips it")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of the before/after table")
    parser.add_argument(
        "--warm-sessions", type=int, default=40, help="sessions per round of the warm-pool table"
    )
    parser.add_argument(
        "--life-ms", type=float, default=50.0, help="life of each session in the warm-pool table"
    )
    parser.add_argument(
        "--json", action="store_true", help="print this tree's p50s as JSON (used by --baseline)"
    )
    args = parser.parse_args()
    if args.json:
        print(json.dumps(measure(args.runs)))
        return
    warm_pool_table(args.warm_sessions, args.rounds * 2, args.life_ms / 1000)
    if args.baseline != "none":
        compare(args.baseline, args.runs, args.rounds)
    from thinc_bench.sandbox import Sandbox, SandboxConfig

    t = time.perf_counter()
    with Sandbox(SandboxConfig()) as sb:
        print(
            f"sandbox start (server + preload): {(time.perf_counter() - t) * 1000:.0f} ms, jailed={sb.jailed}"
        )
        triv, sym = time_runs(sb, TRIVIAL, args.runs), time_runs(sb, SYMPY, args.runs // 3)
        starts, _closes = time_session_starts(sb, 50)
        fresh_triv, fresh_sym = time_fresh(TRIVIAL, args.fresh_runs), time_fresh(SYMPY, args.fresh_runs)
        print(f"{'':28}{'sandbox p50':>12}{'p95':>9}{'fresh python p50':>18}{'p95':>9}{'ratio p50':>11}")
        for name, a, b in (("trivial block", triv, fresh_triv), ("sympy block", sym, fresh_sym)):
            print(
                f"{name:28}{pct(a, 0.5):10.2f}ms{pct(a, 0.95):7.2f}ms{pct(b, 0.5):16.1f}ms{pct(b, 0.95):7.1f}ms"
                f"{pct(b, 0.5) / pct(a, 0.5):10.0f}x"
            )
        print(f"{'session start (+1st run)':28}{pct(starts, 0.5):10.2f}ms{pct(starts, 0.95):7.2f}ms")
        for workers in (1, 2, 8):
            rt = throughput(sb, TRIVIAL, workers, args.runs // workers)
            rs = throughput(sb, SYMPY, workers, max(1, args.runs // 3 // workers))
            print(
                f"throughput, {workers} concurrent sessions: {rt:8.0f} trivial runs/s {rs:8.0f} sympy runs/s"
            )
        print(f"stats: {sb.stats}")
    print(f"mean fresh sympy block {statistics.mean(fresh_sym) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
