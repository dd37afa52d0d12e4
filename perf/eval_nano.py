"""Eval of nano problems with a nano-trained checkpoint on the hf backend: the tree before the speed
round (issue 29) against this tree, side by side in one run.

Each measurement is one `python -m thinc_bench.eval` process (`--backend hf`, the checkpoint's own
system prompt, `--samples 1 --recovery-k 0`, batch up to `--max-batch-size`), run with
`PYTHONPATH` set to one tree: the baseline revision's `thinc_bench/` exported with `git archive`, or
this checkout. The trees alternate who goes first each round, so load on a shared machine hits both
alike; the best round of each is compared. Besides wall time it prints the generated tokens,
accuracy and tool calls of every run: both trees sample with the same seeds, and a speed-up that
came with other trajectories would not be a like-for-like comparison (the hf sampler changed during
the round, so the draws differ; the counts say how much).

The default baseline, 9349fe3, is main before the hf backend's continuous batching, its retained
KV caches, the sampler and the in-place batch buffer (one-shot batches that prefill every turn).
A nano-trained checkpoint is made by `python recipes/nano.py --stages data,sft` (runs/nano/sft).

    OMP_NUM_THREADS=2 python perf/eval_nano.py [--model runs/nano/sft] [--problems 32] [--rounds 1]

Goal (issue 29): this tree >= 1.8x faster than the baseline on 32 nano problems.
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

REPO = Path(__file__).resolve().parents[1]
BASELINE = "9349fe3"


def run_eval(tree: Path, model: str, out: Path, args: argparse.Namespace) -> dict[str, float]:
    """One eval process on `tree`'s thinc_bench: wall seconds and what its samples.jsonl says."""
    command = [sys.executable, "-m", "thinc_bench.eval", "--backend", "hf", "--model", model]
    command += ["--benchmarks", "nano", "--limit", str(args.problems), "--samples", "1"]
    command += ["--recovery-k", "0", "--max-batch-size", str(args.max_batch_size)]
    command += ["--max-tokens", str(args.max_tokens), "--out", str(out), "--log-level", "WARNING"]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.setdefault("OMP_NUM_THREADS", str(os.cpu_count() or 1))
    where = subprocess.run(
        [sys.executable, "-c", "import thinc_bench; print(thinc_bench.__file__)"],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(where).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"the eval of {tree} would import thinc_bench from {where}")
    started = time.perf_counter()
    # cwd is the tree: `python -m` puts the working directory first on sys.path, before PYTHONPATH
    done = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"eval on {tree} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines() if line]
    if len(records) != args.problems:
        raise SystemExit(f"eval on {tree} wrote {len(records)} samples, expected {args.problems}")
    return {
        "wall_s": wall,
        "gen_tokens": sum(r["gen_tokens"] for r in records),
        "correct": sum(bool(r["correct"]) for r in records),
        "tool_calls": sum(r["n_tool_calls"] for r in records) / len(records),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="runs/nano/sft", help="a nano-trained checkpoint folder")
    parser.add_argument("--baseline", default=BASELINE, help=f"git revision before the round ({BASELINE})")
    parser.add_argument("--problems", type=int, default=32, help="nano test problems (one sample each)")
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds per tree")
    parser.add_argument("--max-batch-size", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=512)
    args = parser.parse_args()
    model = Path(args.model)
    if not (model / "config.json").is_file():
        raise SystemExit(
            f"--model {model}: no checkpoint there; make one with `python recipes/nano.py --stages data,sft` "
            "(writes runs/nano/sft) or pass another nano-trained folder"
        )

    import torch

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        base.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", args.baseline, "thinc_bench"], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        trees = {f"before ({args.baseline})": base, "this tree": REPO}
        best: dict[str, dict[str, float]] = {}
        for r in range(args.rounds):
            for name, tree in list(trees.items())[:: 1 if r % 2 == 0 else -1]:
                got = run_eval(
                    tree, str(model.resolve()), Path(tmp) / f"run-{r}-{len(best)}-{name[:6]}", args
                )
                if name not in best or got["wall_s"] < best[name]["wall_s"]:
                    best[name] = got
                print(
                    f"  round {r + 1} {name:>18}: {got['wall_s']:7.1f} s, {got['gen_tokens']:6.0f} tokens "
                    f"({got['gen_tokens'] / got['wall_s']:5.1f} tok/s), {got['correct']:.0f}/{args.problems} "
                    f"correct, {got['tool_calls']:.2f} calls, load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    cpu = torch.backends.cpu.get_cpu_capability()
    print(
        f"\neval of {args.problems} nano problems, {model} (best of {args.rounds}; {os.cpu_count()} cores, "
        f"torch CPU capability {cpu}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')})"
    )
    for name, got in best.items():
        print(f"  {name:>18}: {got['wall_s']:7.1f} s  {got['gen_tokens'] / got['wall_s']:5.1f} tok/s")
    before, after = (best[name] for name in trees)
    print(
        f"  this tree is {before['wall_s'] / after['wall_s']:.2f}x faster in wall time, "
        f"{(after['gen_tokens'] / after['wall_s']) / (before['gen_tokens'] / before['wall_s']):.2f}x in "
        "tokens per second (goal >= 1.8x)"
    )


if __name__ == "__main__":
    main()
