"""A scripted eval whose trajectories cover the extraction and grounding cases of issue 16: the
records in samples.jsonl and the summary show the answer of the final text and grounding from what
the code printed (real sandbox, real grader, the eval CLI)."""

import json
from pathlib import Path

from thinc_bench.eval import __main__ as thinc_eval

PLAN = "<think>\nCompute it with Python.\n</think>\n"
CASES = {
    # id: (gold, turns, expected status, expected answer, expected grounded)
    "printed-box": ("5", [PLAN + "```python\nprint('\\\\boxed{5}')\n```\n```output", "So the value is 5."], "no_answer", None, None),
    "plan-guess": ("3", ["<think>\nProbably \\boxed{3}.\n</think>\n```python\nprint(2 + 2)\n```\n```output", "\\boxed{4}"], "incorrect", "4", True),
    "traceback-line": ("5", [PLAN + "```python\nx = 1\n\n\n\nraise ValueError(x)\n```\n```output", "\\boxed{5}"], "correct", "5", False),
    "fraction-repr": ("\\frac{1}{2}", [PLAN + "```python\nfrom fractions import Fraction\nFraction(1, 2)\n```\n```output", "\\boxed{0.5}"], "correct", "0.5", True),
    "exponent": ("20", [PLAN + "```python\nprint(10.0 ** 20)\n```\n```output", "\\boxed{20}"], "correct", "20", False),
    "joined-boxes": ("\\{1,2\\}", [PLAN + "```python\nprint([1, 2])\n```\n```output", "\\boxed{1} and \\boxed{2}"], "correct", "1, 2", True),
}  # fmt: skip


def test_scripted_eval_records_final_text_answers_and_printed_grounding(tmp_path: Path) -> None:
    bench, turns, out = tmp_path / "cases.jsonl", tmp_path / "turns.jsonl", tmp_path / "run"
    bench.write_text(
        "".join(json.dumps({"id": k, "problem": k, "answer": v[0]}) + "\n" for k, v in CASES.items())
    )
    turns.write_text("".join(json.dumps({"problem_id": k, "turns": v[1]}) + "\n" for k, v in CASES.items()))
    args = ["--backend", "scripted", "--model", str(turns), "--benchmarks", str(bench), "--out", str(out)]
    assert thinc_eval.main([*args, "--samples", "1"]) == 0
    records = {r["problem_id"]: r for r in map(json.loads, (out / "samples.jsonl").read_text().splitlines())}
    seen = {k: (r["status"], r["answer"], r["grounded"]) for k, r in records.items()}
    assert seen == {k: v[2:] for k, v in CASES.items()}
    assert "line 5" in records["traceback-line"]["text"] and "1e+20" in records["exponent"]["text"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["per_benchmark"]["cases"]["accuracy"]["value"] == 4 / 6
