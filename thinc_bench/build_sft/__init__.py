"""ThinC-SFT: teacher rollouts -> named, counted filters -> a student-tokenized dataset for the recipes.

Data flow: `sources` (DAPO-Math-17k or a local file, template stripped, deduplicated) -> teacher
rollouts through eval's engine -> `filters` (correct, executes, >= 3 code blocks, plan share, ...)
and `decontam` against the evaluation benchmarks -> `masks` (student input_ids and assistant masks)
-> `dataset` (disk + Parquet, stats.json, report, card). `python -m thinc_bench.build_sft` is the CLI.
"""

from thinc_bench.build_sft.config import BuildSFTConfig
from thinc_bench.build_sft.decontam import Decontaminator
from thinc_bench.build_sft.filters import Candidate, Decision, FilterConfig, apply_filters, funnel
from thinc_bench.build_sft.masks import Tokenized, for_student, tokenize_example, without_failed_blocks
from thinc_bench.build_sft.sources import load_source

__all__ = [
    "BuildSFTConfig",
    "Candidate",
    "Decision",
    "Decontaminator",
    "FilterConfig",
    "Tokenized",
    "apply_filters",
    "for_student",
    "funnel",
    "load_source",
    "tokenize_example",
    "without_failed_blocks",
]
