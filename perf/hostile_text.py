"""Processing time per KB of hostile model text, 1 KB to 1 MB side by side: is it linear?

What eval does with one finished trajectory, stage by stage: `trajectory.parse` and `classify`,
`Grader.grade` (answer extraction, normalisation, the exact integer path), `Grader.is_grounded`,
`check_conformance`, the failure-mode metrics (`posthoc` through the grounding check, `nl_literals`,
`nl_ratio`), and the GRPO reward's text path (`train.rewards.exact_match_reward` on the raw text,
which parses it in both dialects and grounds it again). The texts are the shapes that were quadratic
or raised (issue 37): runs of backticks, braces, dollars, spaces after an unclosed `\\text{`, unclosed
boxes, numbers of thousands of digits printed and in prose, deep nesting, quoted fences inside code,
thousands of code openers or blocks.

Time is this thread's CPU time (`time.thread_time`), the work that holds the GIL; math-verify checks
run in the grader's worker processes and are not in it (golds are integers, so most answers never
reach them). Each row prints ms per KB at each size and `1M/1K`, the per-KB ratio between 1 MB and
1 KB (flat is ~1; a quadratic stage shows ~1000), then at the 32K-token budget (sized with the Qwen3
tokenizer in ../shared when it is there, else 128 KB): the text's size, `parse` + `classify` (what
eval runs on its event loop; goal under 100 ms), the whole pipeline and its slowest stage.

    python perf/hostile_text.py                 # every case (a few minutes on 2 busy cores)
    python perf/hostile_text.py --cases backticks text_spaces --max-kb 100
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from thinc_bench import metrics, trajectory
from thinc_bench.grading import Grader
from thinc_bench.train import rewards

GOLD = "12"
PROBLEM = "Compute 3 times 4."
SIZES_KB = (1, 10, 100, 1000)
BUDGET_TOKENS = 32_768
"""The completion budget a real evaluation gives (model and interpreter tokens)."""
BUDGET_KB = 128
"""~32K tokens at ~4 characters a token, when no tokenizer is at hand to size the budget."""
QWEN3 = Path(__file__).resolve().parents[1].parent / "shared" / "models" / "qwen3-tokenizer"


def _budget_chars(make: Callable[[int], str]) -> int:
    """Characters of this case's text that make BUDGET_TOKENS Qwen3 tokens (else BUDGET_KB)."""
    tokenizer = _tokenizer()
    if tokenizer is None:
        return BUDGET_KB * 1000
    sample = make(BUDGET_KB * 1000)
    return int(len(sample) * BUDGET_TOKENS / len(tokenizer.encode(sample, add_special_tokens=False)))


@functools.lru_cache(maxsize=1)
def _tokenizer() -> Any:
    if not QWEN3.is_dir():
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(QWEN3))


def _fill(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


def _printed(body: str, answer: str = "\\boxed{12}") -> str:
    return f"<think>\nplan\n</think>\n```python\nprint(x)\n```\n```output\n{body}\n```\n{answer}"


BIG = "7" * 5_000
CASES: dict[str, tuple[str, Callable[[int], str]]] = {
    "backticks": ("markdown", lambda n: "`" * n),
    "backticks_in_code": ("markdown", lambda n: "```python\n" + "`" * n),
    "braces": ("markdown", lambda n: "\\boxed{" + "{" * n),
    "dollars": ("markdown", lambda n: "\\boxed{1}" + "$" * n + "\\boxed{2}"),
    "dollar_box": ("markdown", lambda n: "\\boxed{" + "$" * n + "}"),
    "text_spaces": ("markdown", lambda n: "\\boxed{1} \\text{" + " " * n + "\\boxed{2}"),
    "unclosed_boxes": ("markdown", lambda n: _fill("\\boxed{", n)),
    "deep_frac": ("markdown", lambda n: "\\boxed{" + _fill("\\frac{", n)),
    "huge_number_prose": ("markdown", lambda n: f"<think>\n{_fill('7', n)}\n</think>\n\\boxed{{{BIG}}}"),
    "huge_number_printed": ("markdown", lambda n: _printed(_fill("7", n), f"\\boxed{{{BIG}}}")),
    "huge_exponent": ("markdown", lambda n: _printed("1e" + _fill("7", n))),
    "grouped_digits": ("markdown", lambda n: _printed("1" + _fill(",234", n))),
    "nested_parens": ("markdown", lambda n: _printed("(" * n, "\\boxed{\\frac{1}{2}}")),
    "quoted_fences": ("markdown", lambda n: "```python\ns = '''\n" + _fill("```\n", n)),
    "commented_openers": ("markdown", lambda n: "```python\n" + _fill("#```output\n", n)),
    "code_openers": ("markdown", lambda n: _fill("```python\n", n)),
    "many_blocks": (
        "markdown",
        lambda n: _fill("```python\nprint(12)\n```\n```output\n12\n```\n", n) + "\\boxed{12}",
    ),
    "xml_blank_code": ("xml", lambda n: "<code>" + " " * n + "\nx\n</code>"),
    "xml_openers": ("xml", lambda n: _fill("<code>\n", n)),
    "special_tokens": ("tool_call", lambda n: "<tool_call>{}" + _fill(" \n", n) + "<|im_end|>"),
}


def _stages(text: str, dialect: str, grader: Grader) -> dict[str, float]:
    """Thread CPU seconds of each stage eval runs on one trajectory, plus the reward's text path."""
    spent: dict[str, float] = {}
    clock = time.thread_time

    def timed(name: str, fn: Callable[[], object]) -> object:
        start = clock()
        value = fn()
        spent[name] = spent.get(name, 0.0) + clock() - start
        return value

    parsed = timed("parse", lambda: trajectory.parse(text, dialect))
    assert isinstance(parsed, trajectory.Trajectory)
    timed("parse", lambda: trajectory.classify(parsed))
    verdict = timed("grade", lambda: grader.grade(gold=GOLD, pred=parsed))
    answer = getattr(verdict, "answer", None)
    timed("ground", lambda: grader.is_grounded(parsed))
    timed("conformance", lambda: trajectory.check_conformance(parsed))
    timed("posthoc", lambda: metrics.posthoc(parsed, answer, lambda a, t: bool(grader.grounded(a, [t]))))
    timed("nl_metrics", lambda: (metrics.nl_literals(parsed, PROBLEM), metrics.nl_ratio(parsed)))
    timed(
        "reward",
        lambda: rewards.exact_match_reward(
            [text], [GOLD], thinc_text=[text], stop_reason=["answer"], log_metric=lambda *_: None
        ),
    )
    return spent


def _measure(text: str, dialect: str, grader: Grader, repeat: int) -> dict[str, float]:
    """The best of `repeat` runs, stage by stage (the machine is shared: the minimum is the signal)."""
    best: dict[str, float] | None = None
    for _ in range(repeat):
        spent = _stages(text, dialect, grader)
        if best is None or sum(spent.values()) < sum(best.values()):
            best = spent
    assert best is not None
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="*", choices=sorted(CASES), help="cases to run (default: all)")
    parser.add_argument("--max-kb", type=int, default=1000, help="largest size in KB (default 1000)")
    args = parser.parse_args()
    try:
        import torch

        capability = str(torch.backends.cpu.get_cpu_capability())
    except ImportError:
        capability = "unknown (no torch)"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"CPU capability: {capability}; {os.cpu_count()} CPUs; load average {load}")
    sizes = [kb for kb in SIZES_KB if kb <= args.max_kb]
    head = "".join(f"{f'{kb} KB':>10}" for kb in sizes)
    unit = "32K tokens" if _tokenizer() is not None else f"{BUDGET_KB} KB"
    print(f"{'case (ms per KB)':<22}{head}{'1M/1K':>8}   at {unit}: KB, parse ms, all ms, slowest stage")
    worst_ratio, worst_parse = 0.0, 0.0
    with Grader(workers=1) as grader:
        for name in args.cases or CASES:
            dialect, make = CASES[name]
            per_kb = []
            for kb in sizes:
                spent = _measure(make(kb * 1000), dialect, grader, repeat=3 if kb < 100 else 1)
                per_kb.append(sum(spent.values()) * 1000 / kb)
            chars = _budget_chars(make)
            budget = _measure(make(chars), dialect, grader, repeat=5)
            slowest = max(budget, key=lambda k: budget[k])
            ratio = per_kb[-1] / per_kb[0] if per_kb[0] else float("nan")
            worst_ratio, worst_parse = max(worst_ratio, ratio), max(worst_parse, budget["parse"] * 1000)
            cells = "".join(f"{v:10.3f}" for v in per_kb)
            print(
                f"{name:<22}{cells}{ratio:8.2f}   {chars / 1000:6.0f} {budget['parse'] * 1000:8.1f} "
                f"{sum(budget.values()) * 1000:8.1f}  {slowest} {budget[slowest] * 1000:.1f} ms",
                flush=True,
            )
    print(
        f"worst per-KB ratio {sizes[-1]} KB / {sizes[0]} KB: {worst_ratio:.2f} (flat ~1); "
        f"worst parse + classify at {unit}: {worst_parse:.0f} ms (goal < 100 ms)"
    )


if __name__ == "__main__":
    main()
