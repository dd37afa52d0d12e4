#!/usr/bin/env bash
# Scripted ThinC vs rStar2-Agent-style trajectories on four made-up problems, side by side
# (reports/tir_baselines.html). About 2 minutes on 2 CPU cores. Run from the repository root.
set -euo pipefail
here=reports/tir-baselines
tok=${QWEN3_TOKENIZER:-../shared/models/qwen3-tokenizer}
common=(--backend scripted --tokenizer "$tok" --benchmarks "$here/problems.jsonl" --samples 1 --recovery-k 0,1)
python -m thinc_bench.eval --preset thinc --model "$here/thinc_turns.jsonl" "${common[@]}" --out runs/tir-thinc
python -m thinc_bench.eval --preset rstar2-agent --model "$here/rstar2_turns.jsonl" "${common[@]}" --out runs/tir-rstar2
python -m thinc_bench.report runs/tir-thinc runs/tir-rstar2 --out reports/tir_baselines.html
