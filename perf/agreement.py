"""Agreement with the expected verdict: `grading.grade` against plain math-verify with default settings.

A judge stricter or looser than the library everyone else uses reports numbers nobody can compare,
so this prints both agreement rates on the same reference cases, per kind of answer:

- tests/data/agreement_cases.jsonl: hand-written (gold, response, expected) cases in the forms the
  AIME/HMMT/BeyondAIME/MATH-500 golds take (integers, fractions, radicals, sets, intervals, degrees,
  text, units, decimals, matrices, base-n), plus where the answer is in a code trajectory. Written
  from the answers' mathematics, not from either judge's output.
- tests/data/grading_cases.jsonl: the project's grading regression corpus (its correct/incorrect
  and no_answer expectations; grader statuses such as grader_timeout are skipped).

math-verify runs as its README shows: `verify(parse("\\boxed{" + gold + "}"), parse(response))`, all
defaults (its own SIGALRM timeouts, main thread); the gold is boxed because bare LaTeX golds parse to
nothing (NOTES.md). `grade` runs through a fresh Grader.

    python perf/agreement.py [--show-disagreements]
"""

import argparse
import json
import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

from thinc_bench.grading import Grader, GradeRequest

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"


def _cases() -> list[dict[str, Any]]:
    cases = [json.loads(line) for line in (DATA / "agreement_cases.jsonl").open() if line.strip()]
    for line in (DATA / "grading_cases.jsonl").open():
        if not line.strip():
            continue
        c = json.loads(line)
        exp = c["expected"]
        if isinstance(exp, bool) or exp in ("correct", "incorrect", "no_answer", "unparseable_answer"):
            verdict = exp if isinstance(exp, bool) else exp == "correct"
            cases.append({"kind": "project", "gold": c["gold"], "pred": c["pred"], "expected": verdict})
    return cases


def _math_verify(gold: str, pred: str) -> bool:
    import math_verify

    try:
        return bool(math_verify.verify(math_verify.parse("\\boxed{" + gold + "}"), math_verify.parse(pred)))
    except Exception:  # noqa: BLE001 - the library's own failure is its verdict "not equal" here
        return False


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--show-disagreements", action="store_true", help="list every case a judge gets wrong"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    cases = _cases()
    with Grader() as grader:
        ours = [g.correct for g in grader.grade_many([GradeRequest(c["gold"], c["pred"]) for c in cases])]
    theirs = [_math_verify(c["gold"], c["pred"]) for c in cases]

    by_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for c, o, t in zip(cases, ours, theirs, strict=True):
        row = by_kind[c["kind"]]
        row[0] += 1
        row[1] += o == c["expected"]
        row[2] += t == c["expected"]
    print(f"{'kind':<12} {'cases':>5} {'grade':>7} {'math-verify':>11}")
    for kind, (count, right, right_mv) in by_kind.items():
        print(f"{kind:<12} {count:>5} {right / count:>7.1%} {right_mv / count:>11.1%}")
    n = len(cases)
    o_all, t_all = sum(r[1] for r in by_kind.values()), sum(r[2] for r in by_kind.values())
    print(f"{'all':<12} {n:>5} {o_all / n:>7.1%} {t_all / n:>11.1%}")
    print(
        f"agreement with the expected verdict: grade {o_all}/{n} = {o_all / n:.1%}, "
        f"math-verify {t_all}/{n} = {t_all / n:.1%}"
    )
    if args.show_disagreements:
        for c, o, t in zip(cases, ours, theirs, strict=True):
            if o != c["expected"] or t != c["expected"]:
                who = ("grade " if o != c["expected"] else "") + ("math-verify" if t != c["expected"] else "")
                print(f"[{who.strip()}] expected={c['expected']} gold={c['gold']!r} pred={c['pred'][-80:]!r}")


if __name__ == "__main__":
    main()
