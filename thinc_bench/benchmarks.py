"""Benchmark registry: name -> Hub dataset id, split and column mapping; local-file override.

`load(name, data_dir=None)` turns a registered benchmark (or any local `.jsonl`/`.parquet` file) into
a list of `Problem`s with stable ids. With `data_dir` it reads `<data_dir>/<name>.jsonl` in the
normalised format of `shared/data` (`id, problem, answer`); without it, the Hugging Face Hub. Every
gold answer is parsed by the grader at load time, so a bad gold is our loud error, never a silent 0.
Problem ids are derived the same way from the Hub rows and the local copies, so runs on either source
can be compared and resumed. This module does not prompt, sample or grade model output.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thinc_bench.errors import DatasetError

logger = logging.getLogger(__name__)

Row = Mapping[str, Any]

LOCAL_SUFFIXES = (".jsonl", ".parquet")
"""File types `load` reads directly; everything else is treated as a benchmark name."""


@dataclass(frozen=True)
class Problem:
    """One evaluation (or training) problem; `answer` keeps its source form ("025", LaTeX).

    `meta` holds what a loader decided and a reader may need to check a verdict (the option order
    of a multiple-choice problem and its seed); eval copies it into each sample record.
    """

    id: str
    problem: str
    answer: str
    benchmark: str
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class BenchmarkSpec:
    """Where a benchmark lives on the Hub and how its columns map onto `Problem`.

    `make_id(row, index)` derives the problem id from a Hub row; local copies in the normalised
    format already carry that id in their `id` column.
    """

    name: str
    hub_id: str
    split: str
    problem_column: str
    answer_column: str
    make_id: Callable[[Row, int], str]
    description: str
    config: str | None = None
    """The Hub dataset's configuration (subset) name, when it has several."""
    to_rows: Callable[[Sequence[Row], str], list[dict[str, Any]]] | None = None
    """Turns source rows (Hub, or a local copy in the Hub's schema) into normalised rows; given the
    rows and their origin for error messages."""


_AOPS_URL = re.compile(r"(\d{4})_AIME_(I{1,2})_Problems/Problem_(\d+)")


def _aime2024_id(row: Row, index: int) -> str:
    """HuggingFaceH4/aime_2024 rows carry the AoPS url; its exam and number are the stable id."""
    match = _AOPS_URL.search(str(row.get("url", "")))
    if match is None:
        raise DatasetError(
            f"benchmark `aime2024`, row {index}: url {row.get('url')!r} does not name an AIME problem; "
            "fix the dataset or pass --data-dir with the normalised copy"
        )
    year, exam, number = match.groups()
    return f"{year}-{exam}-{number}"


def _matharena_aime_id(year: int) -> Callable[[Row, int], str]:
    """MathArena numbers AIME I as problem_idx 1-15 and AIME II as 16-30."""

    def make_id(row: Row, index: int) -> str:
        idx = int(row["problem_idx"])
        exam, number = ("I", idx) if idx <= 15 else ("II", idx - 15)
        return f"{year}-{exam}-{number}"

    return make_id


def _hmmt_id(row: Row, index: int) -> str:
    return f"hmmt-feb-2025-{int(row['problem_idx'])}"


def _row_index_id(prefix: str) -> Callable[[Row, int], str]:
    def make_id(row: Row, index: int) -> str:
        return f"{prefix}-{index}"

    return make_id


def _column_id(column: str) -> Callable[[Row, int], str]:
    def make_id(row: Row, index: int) -> str:
        return str(row[column])

    return make_id


GPQA_HUB_ID = "Idavidrein/gpqa"
GPQA_CONFIG = "gpqa_diamond"
GPQA_COLUMNS = (
    "Question",
    "Correct Answer",
    "Incorrect Answer 1",
    "Incorrect Answer 2",
    "Incorrect Answer 3",
)
"""The Hub schema of GPQA (a local copy in this schema loads the same way); ids from `Record ID`."""
GPQA_ID_COLUMN = "Record ID"
GPQA_SHUFFLE_SEED = 0
"""Base of the per-problem option shuffle: fixed, so every run shows a question's options in one order."""
CHOICE_LETTERS = "ABCD"
MULTIPLE_CHOICE_INSTRUCTION = (
    "Answer with the letter of the correct option only, as \\boxed{A}, \\boxed{B}, \\boxed{C} or \\boxed{D}."
)


def option_order(problem_id: str, seed: int = GPQA_SHUFFLE_SEED) -> list[int]:
    """The shuffled order of a question's four options (0 = the correct one), from (seed, id) alone.

    The order depends on neither the row's position nor Python's hash seed, so a run, a resumed run
    and another machine all show the same question the same way.
    """
    digest = hashlib.sha256(f"gpqa/{seed}/{problem_id}".encode()).digest()
    order = list(range(len(CHOICE_LETTERS)))
    random.Random(int.from_bytes(digest[:8], "big")).shuffle(order)
    return order


def multiple_choice_rows(
    rows: Sequence[Row], origin: str, seed: int = GPQA_SHUFFLE_SEED
) -> list[dict[str, Any]]:
    """GPQA rows as normalised multiple-choice problems: the letter of the correct option is the gold.

    The problem text is the question, then the four options as "(A) ..." lines in `option_order`,
    then `MULTIPLE_CHOICE_INSTRUCTION`. `meta` records the seed and, per letter, which source column
    it shows, so a reader can check any verdict.

    Raises:
        DatasetError: a row misses a GPQA column or has an empty option.
    """
    out = []
    for index, row in enumerate(rows):
        missing = [c for c in (*GPQA_COLUMNS, GPQA_ID_COLUMN) if c not in row]
        if missing:
            raise DatasetError(
                f"{origin} row {index} has no column {missing[0]!r}; a GPQA file needs the Hub's columns "
                f"({', '.join((GPQA_ID_COLUMN, *GPQA_COLUMNS))})"
            )
        problem_id = str(row[GPQA_ID_COLUMN])
        options = [str(row[c] or "").strip() for c in GPQA_COLUMNS[1:]]
        if not all(options):
            raise DatasetError(f"{origin}, problem {problem_id}: an option is empty; fix the dataset")
        order = option_order(problem_id, seed)
        lines = [f"({letter}) {options[i]}" for letter, i in zip(CHOICE_LETTERS, order, strict=True)]
        text = (
            f"{str(row[GPQA_COLUMNS[0]]).strip()}\n\n"
            + "\n".join(lines)
            + f"\n\n{MULTIPLE_CHOICE_INSTRUCTION}"
        )
        out.append(
            {
                "id": problem_id,
                "problem": text,
                "answer": CHOICE_LETTERS[order.index(0)],
                "meta": {
                    "shuffle_seed": seed,
                    "options": {
                        letter: GPQA_COLUMNS[1 + i] for letter, i in zip(CHOICE_LETTERS, order, strict=True)
                    },
                },
            }
        )
    return out


def _is_gpqa(rows: Sequence[Row]) -> bool:
    return bool(rows) and all(c in rows[0] for c in GPQA_COLUMNS)


REGISTRY: dict[str, BenchmarkSpec] = {
    spec.name: spec
    for spec in (
        BenchmarkSpec(
            "aime2024",
            "HuggingFaceH4/aime_2024",
            "train",
            "problem",
            "answer",
            _aime2024_id,
            "AIME 2024 I+II (30), AoPS wording",
        ),
        BenchmarkSpec(
            "aime2025",
            "MathArena/aime_2025",
            "train",
            "problem",
            "answer",
            _matharena_aime_id(2025),
            "AIME 2025 I+II (30), MathArena wording",
        ),
        BenchmarkSpec(
            "aime2026",
            "MathArena/aime_2026",
            "train",
            "problem",
            "answer",
            _matharena_aime_id(2026),
            "AIME 2026 I+II (30), exam of Feb 2026",
        ),
        BenchmarkSpec(
            "hmmt_feb2025",
            "MathArena/hmmt_feb_2025",
            "train",
            "problem",
            "answer",
            _hmmt_id,
            "HMMT February 2025 (30), LaTeX answers",
        ),
        BenchmarkSpec(
            "beyondaime",
            "ByteDance-Seed/BeyondAIME",
            "test",
            "problem",
            "answer",
            _row_index_id("beyondaime"),
            "BeyondAIME (100), integer answers up to 33,124,147",
        ),
        BenchmarkSpec(
            "math500",
            "HuggingFaceH4/MATH-500",
            "test",
            "problem",
            "answer",
            _column_id("unique_id"),
            "MATH-500 (500), LaTeX answers",
        ),
        BenchmarkSpec(
            "gpqa_diamond",
            GPQA_HUB_ID,
            "train",
            "problem",
            "answer",
            _column_id("id"),
            "GPQA-Diamond (198), graduate science multiple choice, letter answers; gated on the Hub",
            config=GPQA_CONFIG,
            to_rows=multiple_choice_rows,
        ),
    )
}

PAPER_BENCHMARKS: tuple[str, ...] = ("aime2024", "aime2025", "aime2026", "hmmt_feb2025", "beyondaime")
"""The five benchmarks the sources name (AIME 2024-2026, HMMT 2025, BeyondAIME: the explainers, in their
order; docs/settings.md); hmmt_feb2025 for HMMT 2025 is our reading."""

GENERATED: dict[str, tuple[str, str]] = {
    "nano": ("seen", "ThinC-nano test split (100): integer problems for Python, generated from a seed"),
    "nano_unseen": (
        "unseen",
        "ThinC-nano test part (64): the same 8 families in phrasings training never uses",
    ),
    "nano_families": (
        "families",
        "ThinC-nano test part (48): 3 families never trained on, each a chain of trained steps",
    ),
    "nano_ranges": (
        "ranges",
        "ThinC-nano test part (48): prime counts and sums, half with excluded ends; GRPO's configuration was chosen on it",
    ),
    "nano_ranges_confirm": (
        "ranges_confirm",
        "ThinC-nano test part (96): more of nano_ranges' kind, fixed before the run scored on it; GRPO's estimate",
    ),
    "nano_train": (
        "train",
        "ThinC-nano train split (2000), disjoint from `nano`; what the nano recipes train on",
    ),
    "nano_rl": (
        "rl",
        "ThinC-nano GRPO pool (512): range problems of the train stream past `nano_train`, in no SFT dataset",
    ),
}
"""Benchmarks generated here (`thinc_bench.nano`), by name: their part (`nano.generate_part`) and
description. No data dir. The five test parts share no problem with train, the GRPO pool or each other."""


def nano_problems(part: str, name: str, limit: int | None = None) -> list[Problem]:
    """The nano task's problems of one part as `Problem`s (family, phrasing and part in `meta`)."""
    from thinc_bench import nano

    return [
        Problem(p.id, p.problem, str(p.answer), name, dict(p.meta))
        for p in nano.generate_part(part, limit)  # type: ignore[arg-type]
    ]


def load(
    name: str,
    data_dir: str | Path | None = None,
    *,
    problem_column: str = "problem",
    answer_column: str = "answer",
    id_column: str | None = "id",
    check_golds: bool = True,
    local_flag: str = "--data-dir",
) -> list[Problem]:
    """Load a benchmark's problems, checking every gold answer.

    Args:
        name: a registered benchmark (see `REGISTRY`) or a path to a local `.jsonl`/`.parquet` file.
        data_dir: folder holding `<name>.jsonl` in the normalised format; None reads the Hub.
        problem_column: problem column of a local file given by path.
        answer_column: gold-answer column of a local file given by path.
        id_column: id column of a local file given by path; None numbers rows `<stem>-<row>`.
        check_golds: parse every gold with the grader (turn off only for training sources whose
            golds are checked later, never for evaluation).
        local_flag: the caller's flag for a local copy, named when the Hub is out of reach.

    Returns:
        The problems in source order.

    Raises:
        DatasetError: unknown name, missing file or column, unreachable Hub without a local copy,
            duplicate ids, or a gold answer that does not parse (naming benchmark, problem, value).
    """
    if name.endswith(LOCAL_SUFFIXES):
        path = Path(name)
        benchmark = path.stem
        rows = read_local(path)
        if _is_gpqa(rows):  # a local copy in the GPQA Hub schema is multiple choice, whatever its name
            rows = multiple_choice_rows(rows, str(path))
            id_column, problem_column, answer_column = "id", "problem", "answer"
        problems = _to_problems(
            rows, benchmark, str(path), problem_column, answer_column, _id_maker(id_column, benchmark)
        )
    elif name in GENERATED:
        problems = nano_problems(GENERATED[name][0], name)
    elif name not in REGISTRY:
        raise DatasetError(
            f"unknown benchmark {name!r}; choose one of {', '.join([*REGISTRY, *GENERATED])} or pass a "
            ".jsonl/.parquet path"
        )
    elif data_dir is not None:
        path = Path(data_dir) / f"{name}.jsonl"
        if not path.is_file():
            raise DatasetError(
                f"benchmark {name!r}: no local copy at {path}; pass --data-dir pointing at a folder with "
                f"{name}.jsonl (e.g. ../shared/data/benchmarks) or omit it to read the Hub"
            )
        rows = read_local(path)
        if _is_gpqa(rows):
            rows = multiple_choice_rows(rows, str(path))
        problems = _to_problems(rows, name, str(path), "problem", "answer", _column_id("id"))
    else:
        spec = REGISTRY[name]
        hub_rows: Sequence[Row] = _read_hub(spec, local_flag)
        if spec.to_rows is not None:
            hub_rows = spec.to_rows(hub_rows, f"{spec.hub_id}:{spec.split}")
        problems = _to_problems(
            hub_rows,
            name,
            f"{spec.hub_id}:{spec.split}",
            spec.problem_column,
            spec.answer_column,
            spec.make_id,
        )
    _check_unique_ids(problems, name)
    if check_golds:
        _check_golds(problems)
    logger.info("loaded %d problems of %s", len(problems), name)
    return problems


def _id_maker(id_column: str | None, benchmark: str) -> Callable[[Row, int], str]:
    return _column_id(id_column) if id_column else _row_index_id(benchmark)


def read_local(path: Path) -> list[dict[str, Any]]:
    """Read a local file as a list of row dicts; a bad line is named with its line number."""
    if not path.is_file():
        raise DatasetError(f"dataset file {path} does not exist; check the path (or pass --data-dir)")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        table: list[dict[str, Any]] = pq.read_table(path).to_pylist()
        return table
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DatasetError(
                    f"{path}, line {number}: not valid JSON ({exc.msg}); fix the file"
                ) from None
    return rows


def _read_hub(spec: BenchmarkSpec, local_flag: str) -> list[dict[str, Any]]:
    """Read a registered benchmark from the Hub; any failure to reach it becomes one actionable line."""
    from thinc_bench import hub

    fix = f"pass {local_flag} with a local copy, e.g. {local_flag} ../shared/data/benchmarks"
    if local_flag == "--data-dir":  # eval's flag: its generated benchmark needs no data at all
        fix += ", or --benchmarks nano (generated here, no data needed)"
    reason = hub.probe_failure()
    if reason is not None:
        raise DatasetError(
            f"benchmark {spec.name!r}: the Hugging Face Hub cannot be reached ({reason}); {fix} "
            "(or set HF_HUB_OFFLINE=1 to read a cached copy)"
        )
    import datasets

    try:
        dataset = datasets.load_dataset(spec.hub_id, spec.config, split=spec.split)
    except (
        Exception
    ) as exc:  # the Hub client raises many types (HTTP, offline, missing cache); all mean "not here"
        raise DatasetError(
            f"benchmark {spec.name!r}: cannot load {spec.hub_id} (split {spec.split}) from the Hugging Face Hub "
            f"({type(exc).__name__}); {fix}"
        ) from None
    return [dict(row) for row in dataset]


def _to_problems(
    rows: Sequence[Row],
    benchmark: str,
    origin: str,
    problem_column: str,
    answer_column: str,
    make_id: Callable[[Row, int], str],
) -> list[Problem]:
    if not rows:
        raise DatasetError(f"benchmark {benchmark!r}: {origin} has no rows; fix the file or the split")
    for column, param in ((problem_column, "problem_column"), (answer_column, "answer_column")):
        if column not in rows[0]:
            raise DatasetError(  # eval has no column flags: the file is what a user can change
                f"benchmark {benchmark!r}: {origin} has no column {column!r} (columns: {', '.join(rows[0])}); "
                f"rename the file's column to {column!r} (from Python: benchmarks.load(..., {param}=NAME))"
            )
    problems = []
    for index, row in enumerate(rows):
        try:
            problem_id = make_id(row, index)
        except KeyError as exc:
            raise DatasetError(
                f"benchmark {benchmark!r}: {origin} row {index} has no id column {exc.args[0]!r}; give every "
                "row one (from Python: benchmarks.load(..., id_column=None) numbers the rows)"
            ) from None
        answer = row[answer_column]
        if answer is None or not str(answer).strip():
            raise DatasetError(
                f"benchmark {benchmark!r}, problem {problem_id}: empty gold answer in {origin}; fix the dataset"
            )
        meta: Mapping[str, Any] = row["meta"] if isinstance(row.get("meta"), Mapping) else {}
        problems.append(Problem(problem_id, str(row[problem_column]), str(answer).strip(), benchmark, meta))
    return problems


def _check_unique_ids(problems: Sequence[Problem], name: str) -> None:
    seen: set[str] = set()
    for problem in problems:
        if problem.id in seen:
            raise DatasetError(
                f"benchmark {name!r}: problem id {problem.id!r} appears twice; ids must be unique for resuming"
            )
        seen.add(problem.id)


def _check_golds(problems: Sequence[Problem]) -> None:
    from thinc_bench.grading import check_golds

    for problem, ok in zip(problems, check_golds([p.answer for p in problems]), strict=True):
        if not ok:
            raise DatasetError(
                f"benchmark {problem.benchmark!r}, problem {problem.id}: gold {problem.answer!r} does not parse; "
                "fix the dataset or pass --data-dir with a corrected copy"
            )
