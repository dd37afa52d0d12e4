"""ThinC-nano's numbers as text, and the registered plan's verdict: `python recipes/nano_summary.py runs/nano`.

The chain's last stage runs it after the report (OUT/summary.md), so the table a README or a log
quotes is generated from the run, not typed from the page, and what the chain claims is decided by
the plan written before the run (`nano.REGISTERED_PLAN`, OUT/plan.txt), not by a reading of the
numbers: "GRPO teaches reading the bound" is supported only when both seeds gain matched pairs over
ThinC SFT at an exact p below 0.05 each. Every paired difference carries its exact p beside z.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

PARTS = (("nano", "seen"), ("nano_unseen", "unseen phrasings"), ("nano_families", "unseen families"))
PAIRS_PART = "nano_pairs"
ALPHA = 0.05
"""The registered plan's threshold for each seed's exact p."""
REWARD_KEY = "rewards/exact_match_reward/mean"


def _count(scores: dict[str, list[bool]]) -> str:
    if not scores:
        return "–"
    if all(len(v) == 1 for v in scores.values()):
        return f"{sum(v[0] for v in scores.values())}/{len(scores)}"
    return f"{100 * sum(sum(v) / len(v) for v in scores.values()) / len(scores):.1f} %"


def _difference(a: dict[str, list[bool]], b: dict[str, list[bool]]) -> Any:
    from thinc_bench import metrics

    if not any(b.get(pid) for pid, v in a.items() if v):
        return None
    return metrics.paired_difference(a, b)


def _say(d: Any) -> str:
    z = "–" if d.z is None else f"{d.z:+.1f}"
    return (
        f"{100 * d.value:+.1f} ± {100 * (d.stderr or 0):.1f} (z {z}, exact p {d.p_exact:.3f}; "
        f"{d.better} gained, {d.worse} lost of {d.n_problems})"
    )


Pair = tuple[str, str]


def summarize(
    out: Path,
    columns: tuple[Pair, ...],
    pairs: tuple[Pair, ...],
    primary: tuple[Pair, ...] = (),
    spread: Pair | None = None,
) -> str:
    """The markdown summary of a chain's folder: a row per column (label, eval folder), the paired
    differences `pairs` (B, A), and the plan's verdict on its `primary` comparisons (each GRPO seed
    against ThinC SFT, by matched pair) with the seeds' `spread`."""
    from thinc_bench import metrics
    from thinc_bench.report.matched import by_problem, pair_members
    from thinc_bench.report.runs import load_run

    runs = {label: load_run(out / "eval" / name) for label, name in columns if (out / "eval" / name).is_dir()}
    scores = {
        label: {b: by_problem(run, b, 0) for b, _ in (*PARTS, (PAIRS_PART, ""))}
        for label, run in runs.items()
    }
    lines = [
        "| model | "
        + " | ".join(title for _, title in PARTS)
        + " | matched pairs (both right) | inclusive / "
        "exclusive members | blind p | convention p |",
        "|---" * (len(PARTS) + 5) + "|",
    ]
    matched: dict[str, Any] = {}
    for label, by_part in scores.items():
        cells = [_count(by_part[b]) for b, _ in PARTS]
        pair_cells = ["–"] * 4
        members = pair_members(list(by_part[PAIRS_PART]))
        if members and metrics.pair_scores(by_part[PAIRS_PART], members):
            m = matched[label] = metrics.matched_pairs(by_part[PAIRS_PART], members)
            pair_cells = [
                f"{m.both}/{m.n_pairs}",
                f"{100 * m.inclusive:.0f} % / {100 * m.exclusive:.0f} %",
                f"{m.blind_p:.2g}",
                f"{m.convention_p:.2g}",
            ]
        lines.append(f"| {label} | " + " | ".join(cells + pair_cells) + " |")
    lines += ["", "Paired differences (B - A, points, ± standard error; one sample per problem):", ""]
    verdicts: dict[Pair, Any] = {}
    for b, a in pairs:
        if a not in scores or b not in scores:
            continue
        found = []
        for part, title in (*PARTS, (PAIRS_PART, "matched-pair members")):
            d = _difference(scores[a][part], scores[b][part])
            if d is not None:
                found.append(f"{title} {_say(d)}")
        members = pair_members(list(scores[a][PAIRS_PART]) + list(scores[b][PAIRS_PART]))
        if members:
            d = _difference(
                metrics.pair_scores(scores[a][PAIRS_PART], members),
                metrics.pair_scores(scores[b][PAIRS_PART], members),
            )
            if d is not None:
                found.insert(0, f"**matched pairs {_say(d)}**")
                verdicts[b, a] = d
        lines.append(f"- {b} - {a}: " + "; ".join(found))
    lines += ["", *_verdict(verdicts, primary, spread), *_blind(matched, primary)]
    lines += ["", *_training(out), *_timings(out)]
    return "\n".join(lines) + "\n"


def _verdict(verdicts: dict[Pair, Any], primary: tuple[Pair, ...], spread: Pair | None) -> list[str]:
    """The registered plan's primary outcome, decided by its rule: every primary comparison gains
    matched pairs at an exact p below `ALPHA`."""
    found = {pair: verdicts[pair] for pair in primary if pair in verdicts}
    if not primary or len(found) < len(primary):
        return [
            "Registered plan: not decided (the chain did not score every GRPO seed on the matched pairs)."
        ]
    passed = [d.better > d.worse and d.p_exact < ALPHA for d in found.values()]
    said = "; ".join(f"{b} - {a}: exact p {d.p_exact:.3f}" for (b, a), d in found.items())
    if all(passed):
        head = f"supported: every seed gains matched pairs over its SFT start at p < {ALPHA}"
    elif any(passed):
        head = f"not supported: {sum(passed)} of {len(passed)} seeds gain matched pairs at p < {ALPHA} (one run's result)"
    else:
        head = f"not supported: no seed gains matched pairs over its SFT start at p < {ALPHA}"
    lines = [f'Registered plan (plan.txt), "GRPO teaches reading the bound": **{head}** ({said}).']
    if spread is not None and spread in verdicts:
        lines.append(f"Run-to-run spread, {spread[0]} - {spread[1]}, by pair: {_say(verdicts[spread])}.")
    return lines


def _blind(matched: dict[str, Any], primary: tuple[Pair, ...]) -> list[str]:
    """Beside the verdict, the test the plan describes but does not decide by: a gain over an SFT start
    that reads every range one way (0 pairs) is also what a reader choosing its reading at random
    makes, so pairs count as reading the bound only above that reader's ceiling (a quarter)."""
    seeds = [b for b, _ in primary if b in matched]
    if not seeds:
        return []
    said = "; ".join(
        f"{b}: {matched[b].both}/{matched[b].n_pairs}, blind p {matched[b].blind_p:.2g}" for b in seeds
    )
    above = [b for b in seeds if matched[b].blind_p < ALPHA]
    if not above:
        tail = (
            "no seed solves more pairs than a reader whose answer ignores the bound can (at most a quarter), "
            "so the pairs gained are no evidence that the student reads the bound"
        )
    else:
        tail = (
            f"{len(above)} of {len(seeds)} seeds solve more pairs than a bound-blind reader can (p < {ALPHA})"
        )
    return [f"Described beside it, not the plan's rule: against a wording-blind reader ({said}): {tail}."]


def _training(out: Path) -> list[str]:
    lines = []
    for folder in sorted(p for p in out.glob("grpo*") if (p / "trainer_state.json").is_file()):
        history = json.loads((folder / "trainer_state.json").read_text()).get("log_history", [])
        rewards = [f"{e[REWARD_KEY]:.2f}" for e in history if REWARD_KEY in e]
        lines.append(f"GRPO reward per logged step, {folder.name}: {', '.join(rewards) or '–'}.")
    return lines


def _timings(out: Path) -> list[str]:
    file = out / "timings.json"
    if not file.is_file():
        return []
    t = json.loads(file.read_text())
    stages = ", ".join(f"{k} {v:.0f}" for k, v in t.get("stages", {}).items())
    wall = t.get("wall_this_run_s")
    return [
        f"Wall time of the last invocation {wall:.0f} s (a resumed chain's earlier stages are not in it; "
        f"{t.get('jobs')} jobs x {t.get('threads_per_job')} thread, {t.get('dtype')}, "
        f"{t.get('cpu')}); stage seconds (side by side): {stages}."
        if wall
        else f"Stage seconds (side by side): {stages}."
    ]


def main(argv: list[str] | None = None) -> int:
    import importlib.util

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        print(
            "usage: python recipes/nano_summary.py OUT  (the chain's folder, e.g. runs/nano)", file=sys.stderr
        )
        return 2
    spec = importlib.util.spec_from_file_location("recipes_nano_plan", Path(__file__).with_name("nano.py"))
    assert spec is not None and spec.loader is not None
    chain = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = chain
    spec.loader.exec_module(chain)
    out = Path(args[0])
    text = summarize(out, chain.COLUMNS, chain.PAIRS, chain.PRIMARY, chain.SPREAD)
    (out / "summary.md").write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
