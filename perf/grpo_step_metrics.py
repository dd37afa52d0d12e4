"""What GRPO's per-step ThinC metrics cost a process, against the reward alone (issue 53).

The reward function grades a process's rollouts of a generation batch; with `log_metric` it also
measures each scored row as eval measures a sample (conformance, grounding, post-hoc verification,
NL literals, NL ratio: `thinc_bench.train.rewards.rollout_stats`). That runs on every process's
critical path once per generation batch, so it is timed here on ThinC-shaped trajectories: a plan,
`--blocks` code blocks of 20 lines each with their outputs, a boxed answer the last output prints,
`--rows` rows (one 8-GPU process's share of the full-size configs' 1,024 rollouts is 128). It prints both times
and their ratio.

    python perf/grpo_step_metrics.py [--rows 128] [--blocks 40]

Goal: well under 1 % of a GPU step (11-100 min estimated, docs/training.md). Measured (issue 53, 2
AVX512 cores shared with other jobs, load 5-7): 128 rows of 35-36K characters (40 blocks, ~10K
tokens) 0.41 s reward only, 8.5-10.6 s with the statistics; 9,334 characters (10 blocks) 0.07 s /
1.7 s. Failure mode B (tokenizing every block for its numeric literals, ~50 per block here, far more
than model code writes) takes ~95 % of it.
"""

from __future__ import annotations

import argparse
import time


def trajectory(i: int, blocks: int) -> str:
    """A ThinC trajectory: a plan, `blocks` 20-line code blocks with outputs, the last one's value boxed."""
    parts = [
        "<think>\n"
        + "Plan: count with a loop, then check the residue with a second loop. " * 8
        + "\n</think>\n"
    ]
    for b in range(blocks):
        code = "\n".join(
            f"x{j} = sum(k * k for k in range({j * 100 + b}, {j * 100 + b + 50}))" for j in range(20)
        )
        parts.append(f"```python\n{code}\nprint(x{b} % 1000)\n```\n```output\n{(i * 7 + b) % 1000}\n```\n")
    parts.append(f"The answer is \\boxed{{{(i * 7 + blocks - 1) % 1000}}}.")
    return "".join(parts)


def main() -> None:
    from thinc_bench.train.rewards import exact_match_reward

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=128)
    parser.add_argument("--blocks", type=int, default=40)
    args = parser.parse_args()
    texts = [trajectory(i, args.blocks) for i in range(args.rows)]
    columns = {
        "answer": [str((i * 7 + args.blocks - 1) % 1000) for i in range(args.rows)],
        "thinc_text": texts,
        "stop_reason": ["answer"] * args.rows,
        "n_tool_calls": [args.blocks] * args.rows,
        "n_exec_errors": [0] * args.rows,
        "problem_text": ["Count the lattice points."] * args.rows,
    }
    exact_match_reward([""] * args.rows, **columns)  # warm the judge's workers and caches
    start = time.perf_counter()
    exact_match_reward([""] * args.rows, **columns)
    plain = time.perf_counter() - start
    logged: dict[str, float] = {}
    start = time.perf_counter()
    exact_match_reward([""] * args.rows, log_metric=logged.__setitem__, **columns)
    measured = time.perf_counter() - start
    print(f"{args.rows} rows of {len(texts[0]):,} characters ({args.blocks} blocks)")  # noqa: T201
    print(f"reward only {plain:.2f} s, with statistics {measured:.2f} s ({measured / plain:.1f}x)")  # noqa: T201
    print(f"logged: {sorted(logged)}")  # noqa: T201


if __name__ == "__main__":
    main()
