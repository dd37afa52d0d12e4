"""The hf backend before and after continuous batching with KV caches kept across turns, side by side.

A replay of nano-shaped trajectories (not a timed test): for each nano test problem, the chat prompt
with the nano system prompt, then as many turns as the template teacher writes (plan and three code
blocks, then the answer), each turn generating up to as many tokens as the teacher's turn has, and
an interpreter output block appended after every code turn; every turn's prompt extends the last, as
the rollout sends them. All trajectories run concurrently through one generator over one in-memory
model (the bundled SmolLM2-135M unless `--model`), greedy, first with the one-shot batcher the
backend had before (every turn prefills its whole context; a batch waits for its longest row), then
with the continuous batch and its retained caches. Prints prefill tokens, wall time, throughput, the
ratio (wall and process CPU time: on a shared machine the second is the fairer), and whether both
produced the same tokens.

There is no nano-trained checkpoint here: SmolLM2 writes other text than the teacher, so the turns
have the teacher's lengths (or end sooner at EOS), not its words. The issue's target (eval of 32 nano
problems with a nano checkpoint >= 1.8x faster) is measured where that checkpoint exists:
`python -m thinc_bench.eval --backend hf --model <checkpoint> --benchmark nano --limit 32`.

Run: `OMP_NUM_THREADS=2 python perf/hf_backend.py [--problems 32] [--max-batch-size 16]`.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import torch

from thinc_bench.backends import Generation, SamplingParams, smollm2_gguf
from thinc_bench.backends._sources import resolve
from thinc_bench.backends.hf import HFGenerator
from thinc_bench.nano import generate, thinc_turns
from thinc_bench.prompts import build_messages, load_system_prompt, render_prompt_ids


class OneShotGenerator(HFGenerator):
    """The backend as it was: one-shot left-padded batches, every prompt prefilled whole."""

    def _serve(self) -> None:
        self._serve_one_shot()
        self._fail_pending()


def workload(tokenizer: Any, n: int) -> list[tuple[list[int], list[int], list[int]]]:
    """Per problem: the prompt ids, each turn's token budget, and the output block ids after a code turn."""
    system = load_system_prompt("nano")
    out = []
    for problem in generate("test", n):
        prompt = render_prompt_ids(tokenizer, build_messages(problem.problem, system))
        budgets = [len(tokenizer.encode(t, add_special_tokens=False)) for t in thinc_turns(problem)]
        output = tokenizer.encode(f"\n{problem.answer}\n```\n", add_special_tokens=False)
        out.append((prompt, budgets, output))
    return out


async def replay(
    gen: HFGenerator, work: list[tuple[list[int], list[int], list[int]]]
) -> list[list[Generation]]:
    async def one(i: int, prompt: list[int], budgets: list[int], output: list[int]) -> list[Generation]:
        ids, turns = list(prompt), []
        for k, budget in enumerate(budgets):
            turn = await gen.generate(
                ids, SamplingParams(temperature=0, max_tokens=budget), request_id=f"{i}/{k}"
            )
            turns.append(turn)
            ids += turn.token_ids + (output if k < len(budgets) - 1 else [])
        return turns

    return list(await asyncio.gather(*(one(i, *w) for i, w in enumerate(work))))


def measure(
    gen: HFGenerator, work: list[tuple[list[int], list[int], list[int]]], label: str
) -> tuple[float, float, Any]:
    before = gen.cache_stats()
    started, cpu = time.perf_counter(), time.process_time()
    turns = asyncio.run(replay(gen, work))
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    asyncio.run(gen.aclose())
    generated = sum(len(t.token_ids) for traj in turns for t in traj)
    calls = sum(len(traj) for traj in turns)
    prompts = _prompt_tokens(work, turns)
    prefilled = (
        prompts
        if isinstance(gen, OneShotGenerator)
        else gen.cache_stats()["prefilled_tokens"] - before["prefilled_tokens"]
    )
    print(
        f"   {label:>26}: {calls} calls, prefilled {prefilled:>6} of {prompts} prompt tokens, "
        f"generated {generated} in {wall:6.1f} s ({cpu:6.1f} CPU s) = {generated / wall:5.1f} tok/s"
    )
    return wall, cpu, turns


def _prompt_tokens(work: list[tuple[list[int], list[int], list[int]]], turns: list[list[Generation]]) -> int:
    total = 0
    for (prompt, budgets, output), traj in zip(work, turns, strict=True):
        length = len(prompt)
        for k, turn in enumerate(traj):
            total += length
            length += len(turn.token_ids) + (len(output) if k < len(budgets) - 1 else 0)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="an HF folder (default: the bundled SmolLM2-135M)")
    parser.add_argument("--problems", type=int, default=32)
    parser.add_argument("--max-batch-size", type=int, default=16)
    args = parser.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = args.model or resolve(str(smollm2_gguf())).load_path
    model: Any = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    work = workload(tokenizer, args.problems)
    print(
        f"hf backend, {len(work)} nano-shaped trajectories ({sum(len(b) for _, b, _ in work)} turns), "
        f"batch <= {args.max_batch_size}, greedy; CPU {torch.backends.cpu.get_cpu_capability()}, "
        f"{torch.get_num_threads()} threads, float32"
    )
    old = OneShotGenerator.from_model(model, tokenizer, max_batch_size=args.max_batch_size, seed=0)
    old_s, old_cpu, old_turns = measure(old, work, "before (one-shot batches)")
    new = HFGenerator.from_model(model, tokenizer, max_batch_size=args.max_batch_size, seed=0)
    new_s, new_cpu, new_turns = measure(new, work, "after (continuous + KV)")
    same = sum(
        a.token_ids == b.token_ids
        for x, y in zip(old_turns, new_turns, strict=True)
        for a, b in zip(x, y, strict=True)
    )
    calls = sum(len(t) for t in old_turns)
    print(
        f"   speed-up after / before: {old_s / new_s:.2f}x wall, {old_cpu / new_cpu:.2f}x CPU time; "
        f"same tokens in {same} of {calls} calls"
    )


if __name__ == "__main__":
    main()
