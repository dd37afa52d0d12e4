"""Evaluation: a config, the ThinC rollout loop, the run directory and its summary.

Data flow: `EvalConfig` -> `run_eval` (one rollout per (problem, sample, k) not yet stored, graded as
it finishes) -> `RunDir` (config.json + append-only samples.jsonl) -> `summarize` -> summary.json and
the report, and `samples.parquet`; `results.load_run` reads a run back as tables and `api.evaluate` is
the whole run as one Python call. `python -m thinc_bench.eval` is the CLI over this package (`__main__.py`); build_sft and
the GRPO rollout drive the same engine (`rollout.rollout` is the ThinC loop itself). Heavy libraries (torch, transformers) load only when a run
starts, so importing this package stays cheap.
"""

from thinc_bench.eval import rollout
from thinc_bench.eval.api import evaluate, execute, plan_line, prepare
from thinc_bench.eval.config import EvalConfig
from thinc_bench.eval.publish import push_run
from thinc_bench.eval.results import Run, load_run, samples_frame
from thinc_bench.eval.rollout import RolloutLimits, RolloutResult, render_prompt
from thinc_bench.eval.run import finish, load_problems, plan, run_eval, sample_seed
from thinc_bench.eval.store import RunDir, SampleRecord, config_hash
from thinc_bench.eval.summary import summarize

__all__ = [
    "EvalConfig",
    "RolloutLimits",
    "RolloutResult",
    "Run",
    "RunDir",
    "SampleRecord",
    "config_hash",
    "evaluate",
    "execute",
    "finish",
    "load_problems",
    "load_run",
    "plan",
    "plan_line",
    "prepare",
    "push_run",
    "render_prompt",
    "rollout",
    "run_eval",
    "sample_seed",
    "samples_frame",
    "summarize",
]
