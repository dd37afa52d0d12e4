"""Training-problem sources: registered Hub datasets (DAPO-Math-17k), any Hub id, or a local file.

`load_source(name_or_path, ...)` returns deduplicated `Problem`s whose `benchmark` field names the
source (`load_deduplicated` also says what deduplication removed). Registered sources know their Hub
id, split, how a row becomes (problem, answer) and their local copy (`<data_dir>/<file>`, in the
normalised `id, problem, answer` format of `shared/data`). DAPO-Math-17k on the Hub repeats each of
its 17,917 problems about 100 times and wraps each in an instruction template: the template is
stripped, and rows are deduplicated by `_normalize.problem_key` (case, whitespace, `$` and
`\\dfrac`/`\\tfrac` ignored); copies that disagree on the gold answer are all dropped, since which
gold is right is unknown. Ids of registered sources are content hashes of the whitespace-collapsed
text, so the Hub and the local copy give the same ids and a build can resume across them. Used by
build_sft and the GRPO recipe; this module does not grade.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thinc_bench.benchmarks import LOCAL_SUFFIXES, Problem
from thinc_bench.build_sft._normalize import answer_key, problem_key
from thinc_bench.errors import DatasetError

logger = logging.getLogger(__name__)

Row = Mapping[str, Any]

DAPO_PREFIX = (
    "Solve the following math problem step by step. The last line of your response should be of the form "
    "Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n"
)
"""DAPO-Math-17k's instruction template before the problem (PROVENANCE.md, train/dapo_math_17k)."""
DAPO_SUFFIX = '\n\nRemember to put your answer on its own line after "Answer:".'
"""DAPO-Math-17k's instruction template after the problem."""
ID_HASH_CHARS = 12
"""Hex digits of the content-hash ids: 48 bits, collision-free for millions of problems."""
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class SourceSpec:
    """A registered training source: where it lives and how a Hub row maps onto a problem."""

    name: str
    hub_id: str
    split: str
    local_file: str
    row_to_problem: Callable[[Row], tuple[str, str]]
    description: str


def strip_dapo_template(prompt: str) -> str:
    """The bare problem inside a DAPO-Math-17k prompt (unchanged when the template is absent)."""
    text = prompt
    if text.startswith(DAPO_PREFIX):
        text = text[len(DAPO_PREFIX) :]
    if text.endswith(DAPO_SUFFIX):
        text = text[: -len(DAPO_SUFFIX)]
    return text


def _dapo_row(row: Row) -> tuple[str, str]:
    """(problem, answer) of a DAPO-Math-17k Hub row: prompt[0].content, reward_model.ground_truth."""
    prompt = row["prompt"]
    content = prompt[0]["content"] if isinstance(prompt, Sequence) and not isinstance(prompt, str) else prompt
    return strip_dapo_template(str(content)), str(row["reward_model"]["ground_truth"])


REGISTRY: dict[str, SourceSpec] = {
    "dapo_math_17k": SourceSpec(
        name="dapo_math_17k",
        hub_id="BytedTsinghua-SIA/DAPO-Math-17k",
        split="train",
        local_file="dapo_math_17k.jsonl",
        row_to_problem=_dapo_row,
        description="DAPO-Math-17k: 17,917 integer-answer competition problems (Apache-2.0)",
    ),
}
"""Registered training sources by name."""
NANO_SOURCE = "nano"
"""The generated ThinC-nano task as a training source: its train split (`thinc_bench.nano`)."""
NANO_RL_SOURCE = "nano_rl"
"""nano's GRPO pool as a training source: range problems past the train split (`nano.generate_rl`)."""


def normalize_problem(text: str) -> str:
    """The form the content-hash ids hash: whitespace collapsed and stripped (case and LaTeX kept)."""
    return _SPACE.sub(" ", text).strip()


def content_id(source: str, problem: str) -> str:
    """A stable id from the normalised problem text: the same on the Hub and in a local copy."""
    digest = hashlib.sha256(normalize_problem(problem).encode("utf-8")).hexdigest()
    return f"{source}-{digest[:ID_HASH_CHARS]}"


@dataclass(frozen=True)
class Deduplicated:
    """A source's problems after deduplication, and what it removed.

    Attributes:
        problems: the first row of each distinct problem, in source order.
        rows: rows read.
        repeats: rows dropped as copies of a kept problem with the same gold answer.
        conflicting: groups of copies that disagree on the gold answer, all dropped.
    """

    problems: list[Problem]
    rows: int
    repeats: int
    conflicting: list[list[Problem]] = field(default_factory=list)

    def stats(self) -> dict[str, Any]:
        """For stats.json: counts, and each conflicting group's ids and golds."""
        return {
            "rows": self.rows,
            "distinct": len(self.problems),
            "repeats_dropped": self.repeats,
            "conflicting_gold_groups": len(self.conflicting),
            "conflicting_gold_rows": sum(len(g) for g in self.conflicting),
            "conflicting": [[{"id": p.id, "answer": p.answer} for p in g] for g in self.conflicting],
        }


def dedupe(problems: Sequence[Problem]) -> Deduplicated:
    """Keep the first problem of each `problem_key`, in source order; drop keys whose golds disagree."""
    groups: dict[str, list[Problem]] = defaultdict(list)
    for problem in problems:
        groups[problem_key(problem.problem)].append(problem)
    kept, conflicting = [], []
    for group in groups.values():  # dicts keep insertion order: groups in order of first occurrence
        if len({answer_key(p.answer) for p in group}) > 1:
            conflicting.append(group)
        else:
            kept.append(group[0])
    repeats = len(problems) - len(kept) - sum(len(g) for g in conflicting)
    return Deduplicated(kept, len(problems), repeats, conflicting)


def load_source(
    name: str,
    data_dir: str | Path | None = None,
    *,
    problem_column: str = "problem",
    answer_column: str = "answer",
    id_column: str | None = "id",
    split: str = "train",
    limit: int | None = None,
) -> list[Problem]:
    """Load a training source as deduplicated problems (see `load_deduplicated` for the arguments).

    Returns:
        The problems in source order, first occurrence of each kept; `benchmark` is the source name.

    Raises:
        DatasetError: missing file, column or local copy, empty problem or answer, or an unreachable Hub.
    """
    return load_deduplicated(
        name,
        data_dir,
        problem_column=problem_column,
        answer_column=answer_column,
        id_column=id_column,
        split=split,
    ).problems[:limit]


def load_deduplicated(
    name: str,
    data_dir: str | Path | None = None,
    *,
    problem_column: str = "problem",
    answer_column: str = "answer",
    id_column: str | None = "id",
    split: str = "train",
) -> Deduplicated:
    """Load a training source and deduplicate it.

    Args:
        name: a registered source (`REGISTRY`), a local `.jsonl`/`.parquet` path, or a Hub dataset id.
        data_dir: folder holding the registered source's local copy; None reads the Hub.
        problem_column: problem column of a local file or Hub id (registered sources know theirs).
        answer_column: answer column of a local file or Hub id.
        id_column: id column of a local file or Hub id; None derives content-hash ids.
        split: split of a Hub id that is not registered.

    Returns:
        The distinct problems and what deduplication removed.

    Raises:
        DatasetError: missing file, column or local copy, empty problem or answer, or an unreachable Hub.
    """
    if name in (NANO_SOURCE, NANO_RL_SOURCE):  # generated; `nano` as a benchmark is the test split
        from thinc_bench.benchmarks import nano_problems

        return dedupe(nano_problems("train" if name == NANO_SOURCE else "rl", name))
    if name in REGISTRY:
        spec = REGISTRY[name]
        if data_dir is not None:
            path = Path(data_dir) / spec.local_file
            if not path.is_file():
                raise DatasetError(
                    f"source {name!r}: no local copy at {path}; pass --data-dir pointing at a folder with "
                    f"{spec.local_file} (e.g. ../shared/data/train) or omit it to read {spec.hub_id}"
                )
            pairs = [_columns(row, "problem", "answer", str(path), i) for i, row in enumerate(_read(path))]
        else:
            pairs = [spec.row_to_problem(row) for row in _read_hub(spec.hub_id, spec.split)]
        problems = [Problem(content_id(name, p), p, a, name) for p, a in pairs]
    else:
        local = name.endswith(LOCAL_SUFFIXES)
        rows = _read(Path(name)) if local else _read_hub(name, split)
        source = Path(name).stem if local else name.replace("/", "__")
        problems = []
        for i, row in enumerate(rows):
            problem, answer = _columns(row, problem_column, answer_column, name, i)
            ident = str(row[id_column]) if id_column and id_column in row else content_id(source, problem)
            problems.append(Problem(ident, problem, answer, source))
    result = dedupe(problems)
    logger.info(
        "source %s: %d rows, %d distinct problems, %d groups of copies with conflicting golds dropped",
        name,
        len(problems),
        len(result.problems),
        len(result.conflicting),
    )
    return result


def _columns(row: Row, problem_column: str, answer_column: str, origin: str, index: int) -> tuple[str, str]:
    for column in (problem_column, answer_column):
        if column not in row:
            raise DatasetError(
                f"{origin}, row {index}: no column {column!r} (columns: {', '.join(map(str, row))}); "
                "pass --problem-column / --answer-column"
            )
    problem, answer = str(row[problem_column] or "").strip(), str(row[answer_column] or "").strip()
    if not problem or not answer:
        raise DatasetError(f"{origin}, row {index}: empty problem or answer; fix or filter the source")
    return problem, answer


def _read(path: Path) -> list[dict[str, Any]]:
    from thinc_bench.benchmarks import read_local

    return read_local(path)


def _read_hub(hub_id: str, split: str) -> list[dict[str, Any]]:
    from thinc_bench import hub

    reason = hub.probe_failure()
    if reason is not None:
        raise DatasetError(
            f"source {hub_id!r}: the Hugging Face Hub cannot be reached ({reason}); pass --data-dir with a "
            "local copy (e.g. --data-dir ../shared/data/train) or a local .jsonl/.parquet path "
            "(or set HF_HUB_OFFLINE=1 to read a cached copy)"
        )
    import datasets

    try:
        dataset = datasets.load_dataset(hub_id, split=split)
    except Exception as exc:  # the Hub client raises many types (HTTP, offline, missing cache)
        raise DatasetError(
            f"source {hub_id!r} (split {split}): cannot load it from the Hugging Face Hub "
            f"({type(exc).__name__}: {str(exc)[:120]}); pass --data-dir or a local .jsonl/.parquet path"
        ) from None
    return [dict(row) for row in dataset]
