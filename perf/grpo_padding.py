"""GRPO loss passes with TRL's padding against micro-batches cut to their own width (issue 40).

TRL pads a generation batch to its longest completion and keeps that width in every micro-batch;
`thinc_bench.train.micro_batch` cuts each micro-batch after its last real token. This times the
part that changes, one row per device as the full-size configs run: the forward and backward pass of a
policy over prompt + completion with `logits_to_keep` = the completion width, once at the row's own
length and once padded to the batch's longest, interleaved in rounds, for completion lengths drawn
as a GRPO batch has them (uniform between `--shortest` and `--longest`, the longest near the budget).
It prints the time of each, their ratio, and the token ratio it should approach (the fixed cost of a
row and attention's quadratic term move it away).

    python perf/grpo_padding.py [--model bundled-smollm2] [--rows 6] [--longest 1024] [--rounds 2]

Goal: the cut passes' time over the padded ones at or below the ratio of real to padded tokens.
Measured (issue 40, 2 AVX512 cores shared with other jobs, load 6-12, one thread, SmolLM2-135M, 6
rows of 169-1,024 completion tokens + 128 prompt): cut 167 / 123 s against padded 256 / 254 s in
two rounds, 0.65x and 0.48x, for 0.71x the tokens (attention's quadratic part and the logits grow
faster than the tokens); about 7 minutes a round on that machine.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time


def _pass(model, prompt: int, completion: int, width: int) -> float:  # noqa: ANN001
    """Seconds of one forward and backward over a prompt and a completion padded to `width` tokens."""
    import torch

    ids = torch.randint(100, 1000, (1, prompt + width))
    mask = torch.ones_like(ids)
    mask[0, prompt + completion :] = 0  # right padding, as TRL's completion mask
    start = time.perf_counter()
    logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=width + 1).logits[:, :-1]
    logps = torch.log_softmax(logits.float(), dim=-1).gather(-1, ids[:, prompt:, None]).squeeze(-1)
    (-(logps * mask[:, prompt:]).sum()).backward()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def main() -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from thinc_bench.train.launch import resolve_model

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="bundled-smollm2")
    parser.add_argument("--rows", type=int, default=6)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--shortest", type=int, default=128)
    parser.add_argument("--longest", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(resolve_model(args.model), dtype=torch.float32)
    model.train()
    rng = random.Random(0)
    lengths = [rng.randint(args.shortest, args.longest) for _ in range(args.rows - 1)] + [args.longest]
    width = max(lengths)
    _pass(model, args.prompt, lengths[0], lengths[0])  # warm-up
    cut, padded = [], []
    for r in range(args.rounds):
        order = [("cut", "padded"), ("padded", "cut")][r % 2]
        times = {"cut": 0.0, "padded": 0.0}
        for kind in order:
            for n in lengths:
                times[kind] += _pass(model, args.prompt, n, n if kind == "cut" else width)
        cut.append(times["cut"])
        padded.append(times["padded"])
        print(f"round {r + 1}: cut {times['cut']:.2f} s, padded {times['padded']:.2f} s", flush=True)
    real = sum(args.prompt + n for n in lengths)
    full = len(lengths) * (args.prompt + width)
    print(
        f"{args.rows} rows of {args.shortest}-{args.longest} completion tokens (+{args.prompt} prompt), "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"CPU {torch.backends.cpu.get_cpu_capability()}"
    )
    print(
        f"median per batch: cut {statistics.median(cut):.2f} s, padded {statistics.median(padded):.2f} s; "
        f"cut / padded = {statistics.median(cut) / statistics.median(padded):.2f} "
        f"(tokens {real / full:.2f})"
    )


if __name__ == "__main__":
    main()
