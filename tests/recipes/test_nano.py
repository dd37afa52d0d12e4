"""ThinC-nano, shortened: the real chain (template teacher, build_sft, recipes/sft.py, eval) on a
fixed seed teaches the bundled SmolLM2-135M to solve held-out nano problems in code, and, continued
on failed-then-fixed trajectories, to recover from an injected execution failure. Two stages at a
time, as `make nano` runs them."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _nano():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location("recipes_nano", REPO / "recipes" / "nano.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _block(out: Path, name: str) -> dict:
    return json.loads((out / "eval" / name / "summary.json").read_text())["per_benchmark"]["nano"]


@pytest.mark.slow
def test_a_short_nano_chain_teaches_the_bundled_model_to_think_in_code_and_to_recover(tmp_path) -> None:
    out = tmp_path / "nano"
    stages = "data,base-code-close,sft,eval-sft-k1,data-recovery,sft-recovery,eval-sft-recovery"
    argv = ["--out", str(out), "--stages", stages, "--sft-examples", "96", "--test-problems", "16"]
    argv += ["--recovery-examples", "96", "--jobs", "2", "--threads", "2"]
    argv += ["--samples", "1", "--parts", "nano", "--recovery-k", "0,1"]  # seen phrasings, Recovery@1 only
    argv += ["--pairs-problems", "0"]  # the matched-pair part is for the GRPO comparison, not run here
    assert _nano().main(argv) == 0

    base, sft = _block(out, "base-code-close"), _block(out, "sft-k1")
    assert base["accuracy"]["n_problems"] == sft["accuracy"]["n_problems"] == 16  # held-out test problems
    assert base["accuracy"]["value"] <= 0.1  # the bundled model cannot do these in its head
    # Measured with seed 0 on the training grammar (session 9, AVX512, bf16 auto, this test): base 0/16,
    # ThinC SFT 4/16 (2.94 calls), Recovery@1 0/16; continued on 96 failed-then-fixed trajectories 8/16
    # clean and Recovery@1 10/16 (all 16 met their failure). The bounds leave slack for another CPU.
    assert sft["accuracy"]["value"] >= base["accuracy"]["value"] + 0.1875  # taught: 3 problems or more
    assert sft["tool_calls"]["mean"] >= 2 and sft["grounding"]["answered"]["value"] >= 0.5
    # Recovery taught: after one injected failure, the checkpoint continued on failed-then-fixed
    # trajectories answers more problems than the clean-only checkpoint it continued.
    plain, taught = (_block(out, name)["recovery"]["1"] for name in ("sft-k1", "sft-recovery"))
    assert plain["saw_k"]["denominator"] == taught["saw_k"]["denominator"] == 16  # one faulted run each
    assert taught["saw_k"]["value"] >= 0.75 and taught["n_problems"] >= 12  # most met their failure in code
    assert taught["accuracy"] > plain["accuracy"]
    # the continuation kept what the clean data taught (a drift of the clean skill would show here)
    assert _block(out, "sft-recovery")["accuracy"]["value"] >= sft["accuracy"]["value"] - 0.25
    stats = json.loads((out / "sft-data-recovery" / "stats.json").read_text())
    assert stats["recovery"]["recovered"] > 0
    # eval took the prompt the checkpoint was trained with, though no flag named it
    trained = (out / "sft" / "system_prompt.txt").read_text().strip()
    config = json.loads((out / "eval" / "sft-k1" / "config.json").read_text())
    assert config["settings"]["system_prompt_text"] == trained
    timings = json.loads((out / "timings.json").read_text())
    assert "<think>" in trained and timings["stages"].keys() == set(stages.split(","))
    assert (timings["jobs"], timings["threads_per_job"]) == (2, 1) and timings["wall_this_run_s"] > 0
    recovery = json.loads((out / "sft-recovery" / "thinc_bench.json").read_text())
    assert (
        recovery["trained_by"] == "recipes/sft.py"
        and stats["counts"]["kept"] == stats["recovery"]["recovered"] == 96
    )
    # a rerun resumes: every stage is complete, nothing runs again
    written = {
        p: p.stat().st_mtime_ns
        for p in (out / "sft" / "model.safetensors", out / "eval" / "sft-recovery" / "summary.json")
    }
    assert _nano().main(argv) == 0
    assert {p: p.stat().st_mtime_ns for p in written} == written
