"""What Inspect loads through the `inspect_ai` entry point: every registered thinc_bench object.

Importing them registers the tasks (`thinc_bench/aime2025`, ...), the solvers (`thinc_bench/rollout`,
`thinc_bench/tool_loop`), the scorer (`thinc_bench/judge`), the tool (`thinc_bench/python`), the model
provider (`--model thinc_bench/...`) and the sandbox (`sandbox="thinc_bench"`).
"""

from thinc_bench.inspect_tasks import (  # noqa: F401
    aime2024,
    aime2025,
    aime2026,
    benchmark,
    beyondaime,
    gpqa_diamond,
    hmmt_feb2025,
    judge,
    math500,
    nano,
    python,
    rollout,
    thinc_bench_metrics,
    tool_loop,
)
from thinc_bench.inspect_tasks.model import thinc_bench_model  # noqa: F401
from thinc_bench.inspect_tasks.sandbox import ThincSandboxEnvironment  # noqa: F401
