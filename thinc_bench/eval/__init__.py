"""Evaluation: a config, the ThinC rollout loop, the run directory and its summary.

Data flow: `EvalConfig` -> `run_eval` (one rollout per (problem, sample, k) not yet stored, graded as
it finishes) -> `RunDir` (config.json + append-only samples.jsonl) -> `summarize` -> summary.json and
the report. `python -m thinc_bench.eval` is the CLI over this package (`__main__.py`); build_sft and
the GRPO rollout drive the same engine (`rollout.rollout` is the ThinC loop itself). Heavy libraries (torch, transformers) load only when a run
starts, so importing this package stays cheap.
"""

from thinc_bench.eval import rollout
from thinc_bench.eval.config import EvalConfig
from thinc_bench.eval.rollout import RolloutLimits, RolloutResult, render_prompt
from thinc_bench.eval.run import finish, load_problems, run_eval, sample_seed
from thinc_bench.eval.store import RunDir, SampleRecord, config_hash
from thinc_bench.eval.summary import summarize

__all__ = [
    "EvalConfig",
    "RolloutLimits",
    "RolloutResult",
    "RunDir",
    "SampleRecord",
    "config_hash",
    "finish",
    "load_problems",
    "render_prompt",
    "rollout",
    "run_eval",
    "sample_seed",
    "summarize",
]
