"""A benchmark's problems as Inspect samples: one per (problem, k), the problem itself as the input.

The problems come from `benchmarks.load`, so every benchmark the CLI reads works here the same way:
the registered ones (the Hub, or `data_dir`'s `<name>.jsonl` copies), the generated nano parts, and
any local `.jsonl` / `.parquet` file, with the same ids and gold checks. A sample's id is the
problem's id, with `@k<k>` for a Recovery@k run (`2025-I-1@k2`); its metadata carries what the
sandbox (`k`), the scripted backend (`problem_id`) and the scorer need to rebuild the `Problem`.
Epochs are the samples per problem (`sample_idx` is the epoch minus one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inspect_ai.dataset import MemoryDataset, Sample

from thinc_bench.benchmarks import Problem

META_KEYS = ("benchmark", "problem_id", "k")
"""Sample metadata thinc_bench reads back; the loader's own `meta` travels under `problem_meta`."""


def sample_id(problem_id: str, k: int) -> str:
    """`problem_id` for the clean run, `problem_id@k<k>` for a run with k injected failures."""
    return problem_id if k == 0 else f"{problem_id}@k{k}"


def to_samples(problems: list[Problem], ks: list[int]) -> list[Sample]:
    """One sample per problem and k, k-major (eval's plan order)."""
    return [
        Sample(
            id=sample_id(problem.id, k),
            input=problem.problem,
            target=problem.answer,
            metadata={
                "benchmark": problem.benchmark,
                "problem_id": problem.id,
                "k": k,
                "problem_meta": dict(problem.meta),
            },
        )
        for k in ks
        for problem in problems
    ]


def dataset(name: str, data_dir: str | None, ks: list[int]) -> MemoryDataset:
    """The benchmark `name` (registered, generated or a file) as a dataset named after it.

    Raises:
        DatasetError: as `benchmarks.load` (unknown name, missing copy, unreachable Hub, a bad gold).
    """
    from pathlib import Path

    from thinc_bench import benchmarks
    from thinc_bench.errors import DatasetError
    from thinc_bench.inspect_tasks.settings import as_task_args

    try:
        problems = benchmarks.load(name, data_dir=data_dir, local_flag="--data-dir")
    except DatasetError as exc:  # the loader's message, in the task's argument names
        raise DatasetError(as_task_args(str(exc))) from None
    label = Path(name).stem if name.endswith(benchmarks.LOCAL_SUFFIXES) else name
    return MemoryDataset(to_samples(problems, ks), name=label, location=name)


def problem_of(input_text: str, target: str, metadata: Mapping[str, Any]) -> Problem:
    """The `Problem` a sample was made from (its text, gold, benchmark, id and the loader's meta)."""
    return Problem(
        id=str(metadata["problem_id"]),
        problem=input_text,
        answer=target,
        benchmark=str(metadata["benchmark"]),
        meta=dict(metadata.get("problem_meta") or {}),
    )
