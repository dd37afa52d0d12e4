"""The SFT recipe against a bare torch loop on the same batches, interleaved in one run (issue 29).

The recipe's trainer is TRL's SFTTrainer as `recipes/sft.py` builds it, with the nano config's
settings (recipes/configs/sft_nano.yaml: batch 4, AdamW, cosine schedule, float32 or what `bf16:
auto` picks on this CPU) on ThinC-SFT-nano; a round trains `--steps` steps and is timed from the
trainer's `on_train_begin` to `on_train_end` (dataset preparation and model load excluded, the data
loader, logging and the optimizer included). The bare loop takes the very batches the trainer's
data loader yields (same seed, same collation and padding, labels -100 where the builder's mask is
0) and runs `loss.backward()`, gradient clipping at the trainer's `max_grad_norm`, AdamW and the
scheduler: what a user would write by hand. Rounds alternate which goes first.

The recipe runs twice: with `--lm_head auto` as `python recipes/sft.py` does (on CPU, one plain
projection of the scored tokens, `thinc_bench.train.lm_head`) and with `--lm_head trl` (TRL 1.16's
chunked head, which recomputes each chunk's logits in the backward pass and scores every position):
the gap between the two is what TRL's head costs here. Every kind prints its first losses: equal
losses say the loops train the same batches the same way.

    python perf/sft_loop.py [--dataset runs/nano/sft-data/dataset] [--steps 8] [--rounds 3]

Goal: the recipe >= 0.9x the bare loop's speed (tokens per second on the same batches).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "recipes" / "configs" / "sft_nano.yaml"


def recipe_module() -> Any:
    spec = importlib.util.spec_from_file_location("recipes_sft", REPO / "recipes" / "sft.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve string annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="runs/nano/sft-data/dataset", help="build_sft's dataset folder")
    parser.add_argument("--steps", type=int, default=8, help="optimizer steps per round and kind")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not Path(args.dataset).is_dir():
        raise SystemExit(
            f"--dataset {args.dataset}: not found; build it with `python -m thinc_bench.build_sft --source nano "
            "--out runs/nano/sft-data` or pass another build_sft dataset folder"
        )

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback, get_scheduler
    from trl import SFTConfig, SFTTrainer

    from thinc_bench import precision
    from thinc_bench.train.launch import resolve_model
    from thinc_bench.train.lm_head import install_lm_head

    settings = yaml.safe_load(CONFIG.read_text())
    support = precision.bf16_support("cpu")
    bf16 = support.native if settings.get("bf16") == "auto" else bool(settings.get("bf16"))
    known = set(SFTConfig.__dataclass_fields__)
    config_args = {k: v for k, v in settings.items() if k in known and k not in ("bf16", "output_dir")}
    sft = recipe_module()
    dataset, _, _ = sft.load_sft_dataset(args.dataset, "train", config_args.get("max_length"))
    path = resolve_model(settings["model_name_or_path"])
    tokenizer = AutoTokenizer.from_pretrained(path)
    base = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)

    class Clock(TrainerCallback):
        def on_train_begin(self, *_: Any, **__: Any) -> None:
            self.started = time.perf_counter()

        def on_train_end(self, *_: Any, **__: Any) -> None:
            self.seconds = time.perf_counter() - self.started

        def on_log(self, *_: Any, logs: dict[str, float] | None = None, **__: Any) -> None:
            if logs and "loss" in logs:
                losses[current].append(float(logs["loss"]))

    def trainer(model: Any, folder: str) -> Any:
        config = SFTConfig(
            output_dir=folder,
            bf16=bf16,
            max_steps=args.steps,
            **{**config_args, "report_to": "none", "save_strategy": "no", "logging_steps": 1},
        )
        return SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer)

    chosen: dict[str, str] = {}  # --lm_head value -> the head it put on, as the recipe logs it

    def recipe_round(folder: str, lm_head: str) -> float:
        clock = Clock()
        run = trainer(copy.deepcopy(base), folder)
        chosen[lm_head] = install_lm_head(run, lm_head)  # as recipes/sft.py does
        run.add_callback(clock)
        run.train()
        return clock.seconds

    losses: dict[str, list[float]] = defaultdict(list)
    current = ""  # the kind being timed, for the trainer's loss log
    with tempfile.TemporaryDirectory() as folder:
        probe = trainer(copy.deepcopy(base), folder)
        loader = probe.get_train_dataloader()
        batches = [b for b, _ in zip(loader, range(args.steps), strict=False)]
        grad_norm = probe.args.max_grad_norm
        lr, scheduler_name = probe.args.learning_rate, probe.args.lr_scheduler_type
        warmup, weight_decay = probe.args.warmup_steps, probe.args.weight_decay
        betas, eps = (probe.args.adam_beta1, probe.args.adam_beta2), probe.args.adam_epsilon
        del probe
    tokens = sum(int(b["attention_mask"].sum()) for b in batches)
    cells = sum(b["input_ids"].numel() for b in batches)

    def bare_round() -> float:
        model = copy.deepcopy(base)
        model.train()
        decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
        rest = [p for n, p in model.named_parameters() if p.ndim < 2]
        optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}],
            lr=lr,
            betas=betas,
            eps=eps,
        )
        scheduler = get_scheduler(scheduler_name, optimizer, warmup, args.steps)
        started = time.perf_counter()
        for batch in batches:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = model(**batch, use_cache=False).loss
            losses["bare loop"].append(float(loss.detach()))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - started

    kinds = {
        "recipe (SFTTrainer), --lm_head auto": lambda: recipe_round(tempfile.mkdtemp(), "auto"),
        "recipe, --lm_head trl": lambda: recipe_round(tempfile.mkdtemp(), "trl"),
        "bare loop": bare_round,
    }
    times: dict[str, list[float]] = {name: [] for name in kinds}
    bare_round()  # warm-up: allocator, oneDNN kernels
    losses.clear()
    for r in range(args.rounds):
        for name in list(kinds)[:: 1 if r % 2 == 0 else -1]:
            current = name
            seconds = kinds[name]()
            times[name].append(seconds)
            print(
                f"  round {r + 1} {name:>28}: {seconds:6.1f} s ({seconds / args.steps:.2f} s/step)",
                flush=True,
            )

    median = {name: statistics.median(t) for name, t in times.items()}
    print(
        f"\nSFT step, {args.steps} steps of {CONFIG.name}'s batches ({tokens} tokens, {cells} cells with padding), "
        f"median of {args.rounds} rounds; torch CPU capability {torch.backends.cpu.get_cpu_capability()}, "
        f"{torch.get_num_threads()} threads, {'bf16 autocast' if bf16 else 'float32'} ({support.reason}); "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print("| loop | s/step | tokens/s | speed vs bare loop | loss, first steps of round 1 |")
    print("|---|---|---|---|---|")
    for name, seconds in median.items():
        first = ", ".join(f"{v:.3f}" for v in losses[name][:3])
        print(
            f"| {name} | {seconds / args.steps:.2f} | {tokens / seconds:.0f} | "
            f"{median['bare loop'] / seconds:.2f}x | {first} |"
        )
    auto, trl = median["recipe (SFTTrainer), --lm_head auto"], median["recipe, --lm_head trl"]
    print(
        f"\nrecipe - bare loop: {(auto - median['bare loop']) / args.steps:+.2f} s/step with --lm_head auto "
        f"({chosen['auto']}), {(trl - median['bare loop']) / args.steps:+.2f} with TRL's head"
    )
    print("goal: recipe >= 0.9x the bare loop")


if __name__ == "__main__":
    main()
