"""Sandbox performance, printed side by side: fork-server sessions vs a fresh `python` per block.

Run: `python perf/sandbox.py [--runs 300]`. Reports per-run latency (p50, p95) for a trivial block
and a sympy block, session start latency, the same blocks run the way most harnesses do (a fresh
interpreter per block that imports sympy), the ratio, and throughput with 2 and 8 concurrent
sessions. Goals on the 2-core dev machine: trivial p50 < 5 ms, session start < 30 ms, >= 30x faster.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from thinc_bench.sandbox import Sandbox, SandboxConfig

TRIVIAL = "x = 1 + 1\nx"
SYMPY = "import sympy\nn = sympy.Symbol('n')\nsympy.factor(n**4 - 1)"


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def time_runs(sb: Sandbox, code: str, n: int) -> list[float]:
    with sb.session() as s:
        s.run(code)  # warm: the session exists and sympy's caches are primed like in a trajectory
        out = []
        for _ in range(n):
            t = time.perf_counter()
            r = s.run(code)
            out.append(time.perf_counter() - t)
            assert r.status == "ok", r
    return out


def time_session_starts(sb: Sandbox, n: int) -> list[float]:
    out = []
    for _ in range(n):
        s = sb.session()
        t = time.perf_counter()
        s.run("pass")
        out.append(time.perf_counter() - t)
        s.close()
    return out


def time_fresh(code: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import sympy\n" + code], check=True, capture_output=True)
        out.append(time.perf_counter() - t)
    return out


def throughput(sb: Sandbox, code: str, workers: int, per_worker: int) -> float:
    def work(_: int) -> None:
        with sb.session() as s:
            for _ in range(per_worker):
                s.run(code)

    t = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(work, range(workers)))
    return workers * per_worker / (time.perf_counter() - t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--fresh-runs", type=int, default=8)
    args = parser.parse_args()
    t = time.perf_counter()
    with Sandbox(SandboxConfig()) as sb:
        print(
            f"sandbox start (server + preload): {(time.perf_counter() - t) * 1000:.0f} ms, jailed={sb.jailed}"
        )
        triv, sym = time_runs(sb, TRIVIAL, args.runs), time_runs(sb, SYMPY, args.runs // 3)
        starts = time_session_starts(sb, 50)
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
