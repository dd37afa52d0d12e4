#!/usr/bin/env bash
# reports/tir_baselines.html, rebuilt in one command: scripted ThinC, rStar2-Agent, ASTER, ReTool and
# NL-only trajectories on four made-up problems, each baseline in its own published format (`--preset`:
# its tool or none, prompt, user turn, execution model and result format; docs/tool_calls.md), all at
# one shared budget and sampling (`--setting shared`: the comparison a table of models needs). The
# scripts stand in for the models (they do not react to what the tool returns); the code runs for real
# in the sandbox. Qwen3's tokenizer and template stand in for each model's own. About 3 minutes on 2
# CPU cores. Run from the repository root: bash reports/tir-baselines/run.sh
set -euo pipefail
here=reports/tir-baselines
tok=${QWEN3_TOKENIZER:-../shared/models/qwen3-tokenizer}
python=${PYTHON:-python}
common=(--backend scripted --tokenizer "$tok" --benchmarks "$here/problems.jsonl" --samples 1 --recovery-k 0,1 --setting shared)
runs=()
for baseline in thinc rstar2-agent aster retool nl; do
    out=runs/tir-$baseline
    rm -rf "$out"  # this script's own scratch run: rebuilt from the turns, never resumed
    "$python" -m thinc_bench.eval --preset "$baseline" --model "$here/${baseline%-agent}_turns.jsonl" "${common[@]}" --out "$out"
    runs+=("$out")
done
"$python" -m thinc_bench.report "${runs[@]}" --out reports/tir_baselines.html
