"""The rollout loop's cost per code block at 30 and at 300 blocks, this tree against a baseline revision.

Each measurement is one `python -m thinc_bench.eval` run (in-process, `main()`) with the scripted
backend: one problem whose script writes N code blocks, one per turn (a small block, as in
rStar2-style trajectories), then the answer; the real sandbox runs every block. The time inside
`rollout()` is divided by N: the loop's cost per block, execution and the scripted generator's
tokenizer work included. A loop whose per-turn work grows with the text (the trigger rescanning the
whole trajectory every turn) costs more per block at 300 than at 30; a linear one about the same.
Goal (issue 29, item 2): cost per block at 300 within 2x of that at 30.

The baseline's `thinc_bench/` is exported with `git archive` into a temporary folder; both trees run in
separate processes in alternating rounds, so both see the same machine load; the best round of each
is printed (ratios only mean something on a loaded machine).

Run: `python perf/rollout_loop.py [--baseline main] [--rounds 2] [--blocks 30 300]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def measure(blocks: int, folder: Path) -> dict[str, float]:
    """One eval run of a `blocks`-block scripted trajectory; the time spent in `rollout()`."""
    from thinc_bench.eval import __main__ as thinc_eval
    from thinc_bench.eval import rollout as rollout_module

    bench, turns = folder / "bench.jsonl", folder / "turns.jsonl"
    bench.write_text(json.dumps({"id": "p", "problem": "Sum the steps.", "answer": str(blocks)}) + "\n")
    script = [f"```python\n# step {i}\ns = {i} + 1\nprint(s)\n```\n```output" for i in range(blocks)]
    turns.write_text(json.dumps({"problem_id": "p", "turns": [*script, f"\\boxed{{{blocks}}}"]}) + "\n")
    timed: dict[str, Any] = {}
    original = rollout_module.rollout

    async def timed_rollout(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        result = await original(*args, **kwargs)
        timed.update(rollout_s=time.perf_counter() - started, result=result)
        return result

    rollout_module.rollout = timed_rollout  # the CLI calls it by this name
    args = ["--backend", "scripted", "--model", str(turns), "--benchmarks", str(bench)]
    args += ["--out", str(folder / "run"), "--samples", "1", "--max-tool-calls", str(blocks + 1)]
    args += ["--max-tokens", str(40 * blocks + 1000), "--log-level", "WARNING"]
    started = time.perf_counter()
    assert thinc_eval.main(args) == 0
    eval_s = time.perf_counter() - started
    result = timed["result"]
    assert result.n_tool_calls == blocks and result.stop_reason == "answer", (result.n_tool_calls, blocks)
    return {
        "blocks": blocks,
        "rollout_s": timed["rollout_s"],
        "execute_s": result.execute_s,
        "generate_s": result.generate_s,
        "eval_s": eval_s,
    }


def _run(tree: Path, blocks: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, __file__, "--json", str(blocks)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{tree} at {blocks} blocks failed:\n{out.stderr[-3000:]}")
    got: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return got


def compare(baseline: str, rounds: int, sizes: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", baseline, "thinc_bench"], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        trees = {f"baseline ({baseline})": base, "this tree": REPO}
        best: dict[tuple[str, int], dict[str, float]] = {}
        for r in range(rounds):
            for name, tree in list(trees.items())[:: 1 if r % 2 == 0 else -1]:  # who goes first alternates
                for n in sizes:
                    got = _run(tree, n)
                    got["harness_s"] = got["rollout_s"] - got["execute_s"]
                    key = (name, n)
                    best[key] = {k: min(v, best.get(key, got)[k]) for k, v in got.items()}  # best of each
                    print(
                        f"  round {r + 1} {name:>18} {n:>4} blocks: rollout {got['rollout_s']:.2f} s "
                        f"({got['rollout_s'] / n * 1000:.2f} ms/block, sandbox {got['execute_s'] / n * 1000:.2f})",
                        flush=True,
                    )
    load = os.getloadavg()[0]
    low, high = min(sizes), max(sizes)
    print(f"\nrollout loop cost per block (best of {rounds}, load {load:.1f} on {os.cpu_count()} cores)")
    for label, part in (("in rollout()", "rollout_s"), ("in rollout() less sandbox runs", "harness_s")):
        print(f"  {label}:")
        for name in trees:
            per = {n: best[(name, n)][part] / n * 1000 for n in sizes}
            cells = "  ".join(f"{n} blocks {per[n]:6.2f} ms" for n in sizes)
            print(f"    {name:>18}  {cells}  ratio {high}/{low} {per[high] / per[low]:5.2f}x")
        before, after = (best[(name, high)][part] for name in trees)
        print(f"    at {high} blocks this tree is {before / after:.2f}x faster per block than the baseline")
    print(f"  goal: this tree's ratio {high}/{low} <= 2x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="main", help="git revision to compare with (default main)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds per tree and size")
    parser.add_argument("--blocks", type=int, nargs="+", default=[30, 300], help="trajectory sizes")
    parser.add_argument("--json", type=int, default=None, help=argparse.SUPPRESS)  # one measurement
    args = parser.parse_args()
    if args.json is not None:
        with tempfile.TemporaryDirectory() as folder:
            print(json.dumps(measure(args.json, Path(folder))))
        return
    compare(args.baseline, args.rounds, sorted(args.blocks))


if __name__ == "__main__":
    main()
