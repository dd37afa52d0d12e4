"""docs/settings.md is the code's own defaults with their sources, and every default has a row.

The page is generated (tests/settings_page.py) from the values the code holds and the sources in
`thinc_bench.provenance.DEFAULT_SOURCES`; a default changed in code, a source changed, or a new
setting without a source fails here, naming what to do.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from settings_page import PAGE, render_page

from thinc_bench.build_sft.config import BuildSFTConfig
from thinc_bench.eval import EvalConfig
from thinc_bench.provenance import DEFAULT_SOURCES, SOURCE_CLASSES

REPO = Path(__file__).resolve().parents[1]
EVAL_NOT_SOURCED = {
    "model": "the model under test",
    "backend": "how it runs, not what it computes",
    "data_dir": "where the benchmark copies are",
    "shard": "a split of one run",
    "preset": "names a preset (its own rows)",
    "setting": "the preset's setting (its own rows)",
    **dict.fromkeys(
        (
            "revision",
            "dtype",
            "max_batch_size",
            "tensor_parallel_size",
            "max_model_len",
            "gpu_memory_utilization",
            "base_url",
            "tokenizer",
            "api_key_env",
            "max_retries",
            "context_length",
            "api",
            "api_extensions",
            "tool_name",
            "user_template",
            "benchmark_limits",
            "recovery_benchmarks",
            "recovery_samples",
        ),
        "a backend, connection or per-run option with no default that changes a result",
    ),
}
"""EvalConfig fields without a settings row, and why."""
BUILD_NOT_SOURCED = {
    "backend",
    "data_dir",
    "problem_column",
    "answer_column",
    "id_column",
    "split",
    "limit",
    "tool_name",
    "decontam_data_dir",
    "refilter",
    "push_to_hub",
    "out",
    "concurrency",
    "revision",
    "dtype",
    "max_batch_size",
    "tensor_parallel_size",
    "max_model_len",
    "gpu_memory_utilization",
    "base_url",
    "tokenizer",
    "api_key_env",
    "max_retries",
    "log_level",
}
"""BuildSFTConfig fields that say where data and outputs are or how the teacher is served."""


def test_the_settings_page_is_the_codes_own_defaults_and_sources() -> None:
    assert PAGE.read_text(encoding="utf-8") == render_page(), (
        "docs/settings.md differs from the code's defaults or sources: run `python tests/settings_page.py`"
    )


def test_every_setting_that_changes_a_result_has_a_source_row() -> None:
    hashed = set(EvalConfig(model="m", backend="openai").settings())
    fields = {f.name for f in dataclasses.fields(EvalConfig)} & hashed
    missing = sorted(n for n in fields - set(EVAL_NOT_SOURCED) if f"eval.{n}" not in DEFAULT_SOURCES)
    assert missing == [], f"eval settings without a row in provenance.DEFAULT_SOURCES: {missing}"
    build = {f.name for f in dataclasses.fields(BuildSFTConfig)} - BUILD_NOT_SOURCED
    missing = sorted(n for n in build if f"build_sft.{n}" not in DEFAULT_SOURCES)
    assert missing == [], f"build_sft settings without a row in provenance.DEFAULT_SOURCES: {missing}"
    assert {s.cls for s in DEFAULT_SOURCES.values()} <= set(SOURCE_CLASSES)


def test_a_setting_the_sources_state_is_classed_so_and_one_they_do_not_is_not() -> None:
    # the explainers state these (../shared/sources); nothing states the evaluation budget or samples
    for key in ("build_sft.min_code_blocks", "build_sft.max_plan_share", "grpo.stage1.max_tokens"):
        assert DEFAULT_SOURCES[key].cls == "explainer", key
    for key in ("eval.samples", "eval.max_tokens", "build_sft.samples_per_problem", "grpo.stage2.max_tokens"):
        assert DEFAULT_SOURCES[key].cls == "inference", key
    for key in ("grpo.stage1.max_steps", "grpo.stage2.max_steps"):  # issue 26: secondary summaries only
        assert DEFAULT_SOURCES[key].cls == "secondary", key


def test_every_row_on_the_page_names_a_class_of_the_one_table() -> None:
    rows = [line for line in PAGE.read_text(encoding="utf-8").splitlines() if line.startswith("| `--")]
    classes = {re.split(r"\s*\|\s*", line)[3] for line in rows}
    assert rows and classes <= set(SOURCE_CLASSES), classes


CLAIM = re.compile(
    r"(?:the |ThinC |\()paper(?:'s| settings| configs| benchmarks| preset|:)|as in the paper|from the paper"
    r"|the paper (?:gives|states|says|reports|uses|relies|runs|publishes|names|argues)",
    re.IGNORECASE,
)
"""A sentence that attributes something to "the paper"."""
NAMED = re.compile(
    r"abstract|explainer|summary|sources|rStar2|ASTER|ReTool|DAPO|baseline|arXiv|settings\.md|Hub|secondary",
    re.IGNORECASE,
)
"""What such a sentence must name: which source says it (or another project's paper)."""


def _claim_files() -> list[Path]:
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    files += sorted((REPO / "recipes").rglob("*.py")) + sorted((REPO / "recipes" / "configs").glob("*.yaml"))
    files += sorted((REPO / "thinc_bench").rglob("*.py")) + sorted((REPO / "thinc_bench").rglob("*.yaml"))
    files += sorted((REPO / "thinc_bench").rglob("*.jinja")) + sorted((REPO / "perf").glob("*.py"))
    return [f for f in files if f.name not in ("LOG.md", "settings.md")]  # dated history; the page itself


def test_every_paper_claim_names_the_source_that_makes_it() -> None:
    unsourced = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()[:100]}"
        for path in _claim_files()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if CLAIM.search(line) and not NAMED.search(line)
    ]
    assert unsourced == [], (
        "a 'paper' claim without its source: name the abstract, an explainer or a row of docs/settings.md, "
        f"or drop it: {unsourced}"
    )
