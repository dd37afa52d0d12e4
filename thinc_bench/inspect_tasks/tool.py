"""The Python tool over the sample's thinc_bench session, declared exactly as each preset declares it.

`python(name)` is the tool a run declares under `name` (`prompts.tool_spec`): the plain `name(code)`
tool, or a baseline's own (`code_interpreter` for ASTER, `python_code_with_standard_io` for
rStar2-Agent: description and parameters word for word, its stdin argument, its result format).
Unlike Inspect's stock `python()` (a fresh `python3` per call, which tells the model so), it runs in
the sample's one session of the `thinc_bench` sandbox: state persists across calls, and the first k
calls of a Recovery@k sample are injected failures. A call the tool cannot run (no string `code`, a
stdin argument that is not a string) gets the reason as its result and counts as a failed call, as on
the token path; Inspect answers malformed calls and unknown tools itself. Results are written by
`eval.tool_results` and not cut again by Inspect (the session already caps output).
"""

from __future__ import annotations

from typing import Any

from inspect_ai.tool import Tool, ToolDef, ToolParams, tool

from thinc_bench.eval.rollout import Execution
from thinc_bench.inspect_tasks.names import registered
from thinc_bench.inspect_tasks.sandbox import record, session
from thinc_bench.prompts.tools import DEFAULT_TOOL_NAME, tool_spec


@tool(name=registered("python"))
def python(name: str = DEFAULT_TOOL_NAME) -> Tool:
    """The Python tool named `name`, run in the sample's thinc_bench session.

    Args:
        name: the declared tool: `python` (default), a baseline's (`code_interpreter`,
            `python_code_with_standard_io`, `jupyter_code`) or any function name (`name(code)`).
    """
    spec = tool_spec(name)

    async def execute(**arguments: Any) -> str:
        code = arguments.get("code")
        stdin = arguments.get(spec.stdin_argument) if spec.stdin_argument else None
        problem = None
        if not isinstance(code, str):
            problem = "the tool call has no string argument 'code'"
        elif stdin is not None and not isinstance(stdin, str):
            problem = f"the tool call's argument {spec.stdin_argument!r} is not a string"
        if problem is not None:
            record(Execution("error", 0.0, False, False, code if isinstance(code, str) else ""))
            return f"Error: {problem}."
        return await session().run(str(code), stdin=stdin, result_format=spec.result_format)

    parameters = ToolParams.model_validate({**spec.parameters, "additionalProperties": None})
    return ToolDef(
        execute, name=spec.name, description=spec.description, parameters=parameters, max_output=0
    ).as_tool()
