"""What `bf16: auto` saves on this CPU: a training step of the bundled SmolLM2-135M in float32 and
under bf16 autocast, measured in alternating rounds in one run, with what `auto` chose and why.

Run: `python perf/precision.py [--rounds 3] [--batch 4] [--tokens 256]`. Each round times one
forward+backward+AdamW step of each kind on the same random batch (the shape of a nano SFT step);
the table prints the median seconds per step and bf16's time over float32's. On a CPU with native
bf16 (AVX512-BF16, AMX) the ratio is below 1 and auto picks bf16; elsewhere bf16 is emulated, the
ratio is several times 1 and auto picks float32.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=256)
    args = parser.parse_args()

    from transformers import AutoModelForCausalLM

    from thinc_bench import precision
    from thinc_bench.train.launch import BUNDLED_MODEL, resolve_model

    support = precision.bf16_support("cpu")
    print(f"CPU: torch dispatch {torch.backends.cpu.get_cpu_capability()}, {torch.get_num_threads()} threads")
    print(f"auto: {'bfloat16' if support.native else 'float32'} ({support.reason})")
    model = AutoModelForCausalLM.from_pretrained(resolve_model(BUNDLED_MODEL), dtype=torch.float32)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    ids = torch.randint(0, model.config.vocab_size, (args.batch, args.tokens))

    def step(bf16: bool) -> float:
        started = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return time.perf_counter() - started

    step(False), step(True)  # warm-up: allocator, oneDNN kernels
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.rounds):
        for bf16 in (False, True):
            times[bf16].append(step(bf16))
    fp32, bf16 = statistics.median(times[False]), statistics.median(times[True])
    print(f"\n| step ({args.batch} x {args.tokens} tokens) | s/step (median of {args.rounds}) |")
    print("|---|---|")
    print(f"| float32 | {fp32:.2f} |")
    print(f"| bf16 autocast | {bf16:.2f} |")
    print(
        f"\nbf16 / float32 = {bf16 / fp32:.2f}x; auto chose the {'faster' if (bf16 < fp32) == support.native else 'SLOWER'} one"
    )


if __name__ == "__main__":
    main()
