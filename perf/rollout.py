"""Rollout-engine performance, measured side by side in one run (not a timed test).

1. Harness overhead per turn: an instant scripted model, real sandbox, trivial code (warm pool off
   and on; a trajectory of 4 turns pays one session start and close).
2. Overlap: a generator of fixed latency that serves one request at a time (a saturated engine) and
   code of fixed run time, at concurrency 1, 8 and 64; wall time vs. the ideal, which is the larger of
   the generator's total busy time and one trajectory's critical path. Goal: >= 95 % at 64. Columns:
   the sandbox with its warm pool off (`warm_sessions=0`) and at its default, and no sandbox at all
   (code as an asyncio sleep): the floor, what the event loop and the machine's load leave. This
   generator advances only when the loop wakes it, so every late wake-up of a loaded machine adds
   to the wall time. The table is printed twice: with that generator, and with the same one on its
   own clock (`ClockedGenerator`: a request starts when it arrives or when the one before it ends,
   as in an engine running in its own process), where only a late submission by the harness leaves
   the engine idle. 1 also runs both sandboxes.
3. The hf backend through the harness vs. plain `model.generate` on the same prompts and token counts
   (bundled SmolLM2 on CPU). Goal: harness >= 0.9x plain.
4. A GRPO rollout batch on the live policy (`ThincRollout`, real sandbox, 4 problems x 2): the hf
   backend's batching over the in-memory model (`HFGenerator.from_model`) vs. one request at a time
   (what the recipe did before, `max_batch_size=1`), in model tokens per second.

Run: `python perf/rollout.py [--skip-hf]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from dataclasses import replace
from typing import Any

from thinc_bench.backends import Generation, Generator, SamplingParams, load_generator, smollm2_gguf
from thinc_bench.backends._sources import load_tokenizer
from thinc_bench.eval.rollout import RolloutLimits, rollout
from thinc_bench.sandbox import ExecResult, Sandbox, SandboxConfig

TURNS = 4  # code blocks per trajectory, then the answer
GEN_LATENCY_S = 0.010  # per generation call of the saturated engine
CODE_S = 0.100  # run time of each code block


class FixedLatencyGenerator(Generator):
    """Replays fixed turns; one request at a time, each taking `latency_s` (a saturated engine)."""

    def __init__(self, code: str, latency_s: float) -> None:
        self._tokenizer = load_tokenizer(str(smollm2_gguf()))
        self._code_turn = f"```python\n{code}\n```\n```output"
        self._code_ids = self._tokenizer.encode(self._code_turn, add_special_tokens=False)
        self._answer_ids = self._tokenizer.encode("\\boxed{1}", add_special_tokens=False)
        self._latency_s = latency_s
        self._lock = asyncio.Lock()
        self._calls: dict[str, int] = {}

    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, *, request_id: str | None = None
    ) -> Generation:
        async with self._lock:
            if self._latency_s:
                await asyncio.sleep(self._latency_s)
        turn = self._calls.get(str(request_id), 0)
        self._calls[str(request_id)] = turn + 1
        if turn < TURNS:
            return Generation(list(self._code_ids), self._code_turn, "stop", "```output")
        return Generation(list(self._answer_ids), "\\boxed{1}", "stop", None)

    async def aclose(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"backend": "perf-fixed-latency"}


class ClockedGenerator(FixedLatencyGenerator):
    """The same engine on its own clock, as a real one runs in its own process: a request starts
    when it arrives or when the one before it ends, whichever is later, and the engine never waits
    for the event loop to wake the request before; only a late *submission* leaves it idle."""

    def __init__(self, code: str, latency_s: float) -> None:
        super().__init__(code, latency_s)
        self._free_at = 0.0

    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, *, request_id: str | None = None
    ) -> Generation:
        end = max(time.perf_counter(), self._free_at) + self._latency_s
        self._free_at = end
        await asyncio.sleep(end - time.perf_counter())
        turn = self._calls.get(str(request_id), 0)
        self._calls[str(request_id)] = turn + 1
        if turn < TURNS:
            return Generation(list(self._code_ids), self._code_turn, "stop", "```output")
        return Generation(list(self._answer_ids), "\\boxed{1}", "stop", None)


class SleepingSession:
    """The floor: code "runs" as an asyncio sleep of the same length, with no sandbox and no thread,
    so what is left between it and the ideal is the event loop's own (and the machine's load)."""

    timeout_s = 10.0

    async def arun(self, code: str, timeout: float | None = None, *, stdin: str | None = None) -> ExecResult:
        await asyncio.sleep(CODE_S)
        return ExecResult("ok", "", CODE_S)

    def close(self) -> None:
        return None


async def _trajectories(generator: Generator, sandbox: Sandbox | None, n: int, tag: str) -> float:
    limits = RolloutLimits(max_tokens=100_000, max_tool_calls=TURNS + 1)
    params = SamplingParams(max_tokens=1000)

    async def one(i: int) -> None:
        session: Any = SleepingSession() if sandbox is None else await asyncio.to_thread(sandbox.session)
        try:
            await rollout(generator, session, [1, 2, 3], params, limits=limits, request_id=f"{tag}/{i}")
        finally:
            await asyncio.to_thread(session.close)

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return time.perf_counter() - started


def overhead(sandbox: Sandbox, name: str) -> None:
    generator = FixedLatencyGenerator("x = 1", 0.0)
    asyncio.run(_trajectories(generator, sandbox, 2, "warm"))
    walls = [asyncio.run(_trajectories(generator, sandbox, 1, f"o{i}")) for i in range(20)]
    per_turn_ms = statistics.median(walls) / TURNS * 1000
    print(
        f"1. harness overhead per turn (instant model, trivial code, {name}): {per_turn_ms:.2f} ms (median of 20)"
    )


def overlap(sandboxes: dict[str, Sandbox | None], rounds: int, engine: type[FixedLatencyGenerator]) -> None:
    """Efficiency per concurrency for each sandbox (warm pool off and on, and None: no sandbox at
    all, the floor), in alternating rounds so that all see the same machine load; the median
    round is printed."""
    clock = "on its own clock" if engine is ClockedGenerator else "woken by the event loop"
    print(
        f"2. overlap: generator {GEN_LATENCY_S * 1000:.0f} ms/call serial ({clock}), code "
        f"{CODE_S * 1000:.0f} ms/block, {TURNS} blocks; median of {rounds} alternating rounds"
    )
    names = list(sandboxes)
    print(
        f"   {'concurrency':>11} {'ideal s':>8} {'lock-step s':>12}"
        + "".join(f" {'wall s ' + n:>18} {'eff.':>6}" for n in names)
    )
    for concurrency in (1, 8, 64):
        calls = concurrency * (TURNS + 1)
        critical = (TURNS + 1) * GEN_LATENCY_S + TURNS * CODE_S
        ideal = max(calls * GEN_LATENCY_S, critical)
        lock_step = calls * GEN_LATENCY_S + TURNS * CODE_S
        walls: dict[str, list[float]] = {n: [] for n in names}
        for i in range(rounds):
            for name in names if i % 2 == 0 else names[::-1]:
                generator = engine(f"import time\ntime.sleep({CODE_S})", GEN_LATENCY_S)
                sandbox = sandboxes[name]
                if sandbox is not None:  # each round starts as a steady state would
                    sandbox._warm.wait_full(60)  # noqa: SLF001
                walls[name].append(
                    asyncio.run(_trajectories(generator, sandbox, concurrency, f"c{concurrency}-{i}"))
                )
        cells = ""
        for name in names:
            wall = statistics.median(walls[name])
            cells += f" {wall:>18.2f} {ideal / wall:>6.0%}"
        print(f"   {concurrency:>11} {ideal:>8.2f} {lock_step:>12.2f}{cells}")


def hf_vs_plain(n_prompts: int = 8, new_tokens: int = 64) -> None:
    import torch

    generator = load_generator("hf", str(smollm2_gguf()), max_batch_size=n_prompts)
    tokenizer = generator.tokenizer
    model = generator._model  # noqa: SLF001 - the same weights, called directly for the baseline
    prompts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": f"Write Python that prints {i} squared."}],
            add_generation_prompt=True,
            tokenize=False,
        )
        for i in range(n_prompts)
    ]
    ids = [tokenizer.encode(p, add_special_tokens=False) for p in prompts]
    params = SamplingParams(temperature=0.0, max_tokens=new_tokens)

    async def through_harness() -> tuple[float, int]:
        started = time.perf_counter()
        gens = await asyncio.gather(
            *(generator.generate(p, params, request_id=str(i)) for i, p in enumerate(ids))
        )
        return time.perf_counter() - started, sum(len(g.token_ids) for g in gens)

    asyncio.run(through_harness())  # warm-up
    harness_s, harness_tokens = asyncio.run(through_harness())
    tokenizer.padding_side = "left"
    batch = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        model.generate(**batch, max_new_tokens=4, do_sample=False)  # warm-up
        started = time.perf_counter()
        out = model.generate(
            **batch, max_new_tokens=new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id
        )
        plain_s = time.perf_counter() - started
    plain_tokens = int((out[:, batch["input_ids"].shape[1] :] != tokenizer.pad_token_id).sum())
    harness_rate, plain_rate = harness_tokens / harness_s, plain_tokens / plain_s
    print(f"3. hf backend, {n_prompts} prompts x up to {new_tokens} tokens, greedy:")
    print(f"   through the harness: {harness_tokens} tokens in {harness_s:.2f} s = {harness_rate:.1f} tok/s")
    print(f"   plain model.generate: {plain_tokens} tokens in {plain_s:.2f} s = {plain_rate:.1f} tok/s")
    print(f"   ratio harness / plain: {harness_rate / plain_rate:.2f}x (goal >= 0.9x)")
    asyncio.run(generator.aclose())


def policy_batching(n_problems: int = 4, generations: int = 2, budget: int = 128) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from thinc_bench.backends._sources import resolve
    from thinc_bench.backends.hf import HFGenerator
    from thinc_bench.prompts import load_system_prompt
    from thinc_bench.train.rollout_func import ThincRollout

    folder = resolve(str(smollm2_gguf())).load_path
    model, tokenizer = (
        AutoModelForCausalLM.from_pretrained(folder).eval(),
        AutoTokenizer.from_pretrained(folder),
    )
    prompts = [f"Compute {i} * {i + 3} with Python." for i in range(n_problems) for _ in range(generations)]
    print(
        f"4. GRPO rollout batch on the live policy: {len(prompts)} trajectories, {budget}-token completion budget"
    )
    rates = {}
    with Sandbox() as sandbox:
        for label, batch in (("one at a time", 1), ("batched", len(prompts))):
            generator = HFGenerator.from_model(model, tokenizer, max_batch_size=batch, seed=0)
            rollout = ThincRollout(
                sandbox,
                RolloutLimits(budget, 4),
                load_system_prompt("thinc"),
                response_prefix="```python\n",
                exec_on="code_close",
                generator=generator,
            )
            started = time.perf_counter()
            out = rollout(prompts, trainer=None)
            wall = time.perf_counter() - started
            asyncio.run(generator.aclose())
            tokens = sum(sum(mask) for mask in out["env_mask"])
            rates[label] = tokens / wall
            print(
                f"   {label:>13}: {tokens} model tokens, {sum(out['n_tool_calls'])} code runs in {wall:.1f} s"
                f" = {rates[label]:.1f} tok/s"
            )
    print(f"   ratio batched / one at a time: {rates['batched'] / rates['one at a time']:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-hf", action="store_true", help="skip parts 3 and 4 (load the bundled model)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of the overlap table")
    args = parser.parse_args()
    config = SandboxConfig(max_sessions=128, max_concurrent_runs=64)
    with (
        Sandbox(replace(config, warm_sessions=0)) as cold,
        Sandbox(config) as warm,
    ):
        for name, sandbox in (("warm_sessions=0", cold), (f"={config.warm_sessions}", warm)):
            overhead(sandbox, name)
        columns = {"pool 0": cold, f"pool {config.warm_sessions}": warm, "no sandbox": None}
        for engine in (FixedLatencyGenerator, ClockedGenerator):
            overlap(columns, args.rounds, engine)
    if not args.skip_hf:
        hf_vs_plain()
        policy_batching()


if __name__ == "__main__":
    main()
