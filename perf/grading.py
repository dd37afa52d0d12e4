"""Grading throughput: the worker pool (cache cold) against a naive serial in-process math-verify loop.

Checks: every gold of all six benchmark files in ../shared/data/benchmarks (AIME 24/25/26, HMMT Feb
2025, BeyondAIME, MATH-500: 720 golds) against `\\boxed{gold}` and against a changed value (integer
+ 1, else the first digit bumped, as in tests/grading/test_grading.py): 1,440 checks. The naive loop does
math-verify parse(gold) + parse(pred) + verify per item with no cache and no fast path. The pool is a
fresh Grader (empty verdict cache); its worker start-up is timed separately and excluded.

`--baseline DIR` also times the pool of another checkout (e.g. `git archive main | tar -x -C DIR`)
on the same checks, alternating runs (best of `--repeat`) so that load on a shared machine hits
both alike, and prints the throughput ratio this/baseline, in checks/s and in checks per CPU-second
(this process plus the workers): on a shared machine the load moves wall time far more than CPU
time, and on idle cores the pool's rate approaches workers x checks per CPU-second.

    python perf/grading.py [--workers N] [--baseline DIR [--repeat 3]]
"""

import argparse
import contextlib
import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from thinc_bench.grading import Grader, GradeRequest

BENCHMARKS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "benchmarks"


def _changed(gold: str) -> str:
    if re.fullmatch(r"-?\d+", gold):
        return str(int(gold) + 1)
    m = re.search(r"\d", gold)
    if m is not None:
        d = int(m.group())
        return gold[: m.start()] + str(d + 1 if d < 9 else 8) + gold[m.end() :]
    return gold[:-1] + "X}" if gold.startswith("\\text{") else gold + " + 1"


def _requests() -> list[GradeRequest]:
    golds = [json.loads(line)["answer"] for p in sorted(BENCHMARKS.glob("*.jsonl")) for line in p.open()]
    return [GradeRequest(g, f"\\boxed{{{g}}}") for g in golds] + [
        GradeRequest(g, f"\\boxed{{{_changed(g)}}}") for g in golds
    ]


def _naive(reqs: list[GradeRequest]) -> tuple[float, int]:
    import math_verify

    start = time.perf_counter()
    correct = 0
    for r in reqs:
        gold = math_verify.parse(f"$\\boxed{{{r.gold}}}$", parsing_timeout=None)
        pred = math_verify.parse(r.pred, parsing_timeout=None)
        correct += bool(math_verify.verify(gold, pred, timeout_seconds=None))
    return time.perf_counter() - start, correct


def _cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of live processes (/proc/PID/stat fields 14 and 15)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += sum(
                int(f) for f in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[11:13]
            )
    return total / os.sysconf("SC_CLK_TCK")


def _pool(reqs: list[GradeRequest], workers: int | None) -> tuple[float, float, int, float]:
    """Wall seconds, start-up seconds, correct count and CPU seconds (this process + workers).

    CPU per check is what a shared machine's load hardly moves; wall time it moves a lot."""
    with Grader(workers=workers) as grader:
        start = time.perf_counter()
        # Warm every worker on an item outside the measured set, so start-up is not counted.
        grader.grade_many([GradeRequest(f"\\frac{{1}}{{{k}}}", f"\\boxed{{{k}}}") for k in range(2, 40)])
        startup = time.perf_counter() - start
        pids = grader._pool.pids() if grader._pool is not None else []  # noqa: SLF001 - measuring the pool
        cpu0 = time.process_time() + _cpu_s(pids)
        start = time.perf_counter()
        grades = grader.grade_many(reqs)
        wall = time.perf_counter() - start
        cpu = time.process_time() + _cpu_s(pids) - cpu0  # a worker replaced after a timeout is not counted
        return wall, startup, sum(g.correct for g in grades), cpu


def _pool_rate_in(checkout: Path, workers: int | None) -> tuple[float, int, float, float]:
    """Checks/s, correct count, start-up s and checks per CPU-second of `checkout`'s pool, in a fresh
    interpreter."""
    args = [sys.executable, __file__, "--pool-only"] + ([f"--workers={workers}"] if workers else [])
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    # cwd too: a `python -c` child (multiprocessing's forkserver) imports from its working directory first
    out = subprocess.run(args, env=env, cwd=checkout, check=True, capture_output=True, text=True).stdout
    rate, correct, startup, per_cpu = out.split()[-4:]
    return float(rate), int(correct), float(startup), float(per_cpu)


def _compare(baseline: Path, workers: int | None, repeat: int) -> None:
    this = Path(__file__).resolve().parents[1]
    runs: dict[str, list[tuple[float, int, float, float]]] = {"baseline": [], "this": []}
    for _ in range(repeat):
        for name, tree in (("baseline", baseline), ("this", this)):
            rate, correct, startup, per_cpu = _pool_rate_in(tree, workers)
            runs[name].append((rate, correct, startup, per_cpu))
            print(
                f"  {name}: {rate:.0f} checks/s ({correct} correct), {per_cpu:.0f} checks per CPU-second, "
                f"start-up {startup:.2f} s (load {os.getloadavg()[0]:.1f})",
                flush=True,
            )
    (b, bc, bs, _), (t, tc, ts, _) = (max(runs[n]) for n in ("baseline", "this"))
    bp, tp = (max(r[3] for r in runs[n]) for n in ("baseline", "this"))
    print(
        f"pool checks/s, best of {repeat}: baseline {b:.0f} ({bc} correct, start-up {bs:.2f} s), "
        f"this {t:.0f} ({tc} correct, start-up {ts:.2f} s)"
    )
    print(f"checks per CPU-second, best of {repeat}: baseline {bp:.0f}, this {tp:.0f}")
    print(f"ratio this/baseline: {t / b:.2f} in checks/s, {tp / bp:.2f} in checks per CPU-second")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, default=None, help="pool size (default: available CPUs)")
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout to compare with")
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs per tree with --baseline")
    parser.add_argument("--pool-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    if args.baseline is not None:
        _compare(args.baseline.resolve(), args.workers, args.repeat)
        return
    reqs = _requests()
    if args.pool_only:
        t_pool, t_start, c_pool, cpu = _pool(reqs, args.workers)
        print(f"{len(reqs) / t_pool:.1f} {c_pool} {t_start:.3f} {len(reqs) / cpu:.1f}")
        return
    latex = [r for r in reqs if not re.fullmatch(r"-?\d+", r.gold)]

    rows = []
    for name, subset in (("all 720 golds", reqs), ("LaTeX golds only", latex)):
        t_naive, c_naive = _naive(subset)
        t_pool, t_start, c_pool, _ = _pool(subset, args.workers)
        rows.append(
            (name, len(subset), len(subset) / t_naive, len(subset) / t_pool, t_start, c_naive, c_pool)
        )

    print(
        f"{'set':<18} {'checks':>6} {'naive/s':>9} {'pool/s':>9} {'ratio':>6} {'start s':>8} {'ok naive/pool':>14}"
    )
    for name, n, naive, pool, start, cn, cp in rows:
        print(f"{name:<18} {n:>6} {naive:>9.0f} {pool:>9.0f} {pool / naive:>6.1f} {start:>8.2f} {cn:>7}/{cp}")


if __name__ == "__main__":
    main()
