"""Where a number or setting comes from: the one table of source classes, and what each is.

The project knows the ThinC paper (arXiv 2605.07237) only through its sources in `../shared/sources/`:
its abstract, and two AI-generated explainers that say they were not written or endorsed by the
authors. Every published number (report/reference.yaml) and every default setting (docs/settings.md)
carries one of these classes, so a reader can tell a number the paper states from one a summary of it
states, from arithmetic on those, from a write-up nobody has checked, from another project's own
source, and from our own choice. Pure data: reports, docs and tests read it; nothing here reads a file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

SourceClass = Literal["abstract", "explainer", "derived", "secondary", "external", "inference"]
SOURCE_CLASSES: tuple[SourceClass, ...] = get_args(SourceClass)

CLASS_LABELS: dict[SourceClass, str] = {
    "abstract": "the paper's abstract",
    "explainer": "an AI-generated summary of the paper, not written by its authors",
    "derived": "derived: arithmetic on published numbers",
    "secondary": "an unverified secondary write-up (a blog analysis or an agent-written review)",
    "external": "another project's own source (a baseline's paper or code, a model card)",
    "inference": "our inference or choice: no source states it",
}
"""Each class in words, as reports, the settings page and the dataset card print it."""
CLASS_SHORT: dict[SourceClass, str] = {
    "abstract": "paper abstract",
    "explainer": "AI summary of the paper, not by its authors",
    "derived": "derived",
    "secondary": "unverified secondary write-up",
    "external": "external source",
    "inference": "our inference",
}
"""Each class in a few words, where space is short (a figure's legend)."""

CLASS_MEANINGS: dict[SourceClass, str] = {
    "abstract": "stated in the paper's arXiv abstract (../shared/sources/abstract.txt)",
    "explainer": "stated in both AI-generated explainers of the paper (../shared/sources/explainer-*.txt), "
    "which say they were not written or endorsed by the authors: a summary, not the paper",
    "derived": "computed from numbers of the classes above; the formula is given with it",
    "secondary": "found only in a secondary write-up quoted to the project (a blog analysis, an "
    "agent-written literature review), in none of ../shared/sources: unverified until checked "
    "against the paper",
    "external": "from a source other than the ThinC paper that speaks for itself: a baseline's paper or "
    "public code, a model's card or chat template, a library's default",
    "inference": "chosen or inferred by thinc_bench where no source speaks; the reason is given with it",
}
"""What belongs in each class (docs/settings.md prints this table)."""


@dataclass(frozen=True)
class Source:
    """Where one number or setting comes from.

    Attributes:
        cls: the source class.
        source: which source and where in it, or, for `inference`, the reason for the choice.
        formula: for `derived`, the arithmetic (e.g. "42.8 - 10.6").
    """

    cls: SourceClass
    source: str
    formula: str | None = None

    def __post_init__(self) -> None:
        if self.cls not in SOURCE_CLASSES:
            raise ValueError(f"source class {self.cls!r}: use one of {', '.join(SOURCE_CLASSES)}")
        if (self.cls == "derived") != (self.formula is not None):
            raise ValueError(f"{self.source!r}: a derived number needs its formula, and only a derived one")

    @property
    def label(self) -> str:
        """The class in words, with the formula of a derived number."""
        text = CLASS_LABELS[self.cls]
        return f"{text} ({self.formula})" if self.formula else text

    @property
    def short(self) -> str:
        """The class in a few words (`CLASS_SHORT`), with the formula of a derived number."""
        text = CLASS_SHORT[self.cls]
        return f"{text}: {self.formula}" if self.formula else text


EXPLAINERS = "explainers (zh, ja), technical summary"
"""How the rows below cite the two AI-generated explainers."""
_UNRECORDED = (
    "attributed to the paper in this project's docs before issue 50 with no source recorded; no source in "
    "../shared/sources states it (the project's secondary write-ups, unverified)"
)
_QWEN3_CARD = (
    "the Qwen3 model cards (the students are Qwen3 models): thinking mode, Temperature=0.6, TopP=0.95"
)


def _e(text: str) -> Source:
    return Source("explainer", f"{EXPLAINERS}: {text}")


def _i(text: str) -> Source:
    return Source("inference", text)


DEFAULT_SOURCES: dict[str, Source] = {
    # evaluation: `python -m thinc_bench.eval --model M` (the shared setting of --setting shared)
    "eval.benchmarks": _e(
        "AIME 2024-2026, HMMT 2025 and BeyondAIME; HMMT's February 2025 competition (hmmt_feb2025) is our reading"
    ),
    "eval.samples": _i("avg@16, a common choice for AIME-size benchmarks; the sources state no sample count"),
    "eval.max_tokens": _i(
        "32K: the explainers' last RL stage context ('from 16K to 32K'); the sources state no evaluation budget"
    ),
    "eval.max_tool_calls": _i(
        "32, about one per 1K tokens of the budget; the explainers say tool-call limits rise in RL, not their values"
    ),
    "eval.temperature": Source("external", _QWEN3_CARD),
    "eval.top_p": Source("external", _QWEN3_CARD),
    "eval.top_k": _i(
        "not set (every token): the Qwen3 cards' TopK=20 is left out so one default serves every model"
    ),
    "eval.min_p": Source("external", "the Qwen3 model cards: MinP=0"),
    "eval.repetition_penalty": _i("off"),
    "eval.presence_penalty": _i("off (the Qwen3 cards suggest it only against endless repetition)"),
    "eval.frequency_penalty": _i("off"),
    "eval.seed": _i("0; each sample's and turn's seed derive from it"),
    "eval.limit": _i("every problem"),
    "eval.recovery_k": _i(
        "k = 0..5: the explainers report recovery after three consecutive failures; k = 5 follows an unverified "
        "write-up's Recovery@5"
    ),
    "eval.dialect": _e(
        "a plan, then code blocks linked only by their outputs; its markdown spelling is ours"
    ),
    "eval.system_prompt": _i(
        "thinc_bench/prompts/thinc.txt, written for this project from the explainers' format"
    ),
    "eval.few_shot": _i("none: a trained model is evaluated without examples"),
    "eval.exec_on": _i("output_open: code runs when the model opens an output block (the format's own turn)"),
    "eval.response_prefix": _i("none"),
    "eval.chat_template_kwargs": _i("none: each model's template as it is"),
    "eval.exec_timeout_s": _i("10 s per code block"),
    "eval.sandbox_state": _i(
        "persistent (a notebook); the explainers say the blocks are linked by their outputs, not whether state persists"
    ),
    # build_sft: `python -m thinc_bench.build_sft --teacher T`
    "build_sft.teacher": _e("the teacher Qwen3.5-27B (no default: --teacher names it)"),
    "build_sft.source": _i(
        "DAPO-Math-17k: the explainers name it for RL and give no source for the distilled problems"
    ),
    "build_sft.samples_per_problem": _i("4 rollouts per problem, for enough survivors of the filters"),
    "build_sft.max_tokens": _i("32K, as eval's budget"),
    "build_sft.max_tool_calls": _i("32, as eval's"),
    "build_sft.temperature": _i(
        "Qwen3's thinking-mode value; Qwen3.5-27B's card gives other values per mode, read here only through a "
        "copy (unverified)"
    ),
    "build_sft.top_p": _i("as the temperature"),
    "build_sft.top_k": _i("not set (every token)"),
    "build_sft.seed": _i("0"),
    "build_sft.system_prompt": _i("thinc_bench/prompts/teacher.txt, written for this project"),
    "build_sft.few_shot": _i(
        "every bundled example (3): the explainers say the teacher is prompted with few-shot examples, not which"
    ),
    "build_sft.dialect": _i("markdown, as eval's"),
    "build_sft.teacher_chat_template_kwargs": Source(
        "external",
        "Qwen3.5's chat template: its generation prompt opens <think> unless enable_thinking is false, as copies "
        "of it and vLLM's Qwen3 reasoning parser docs say (the Hub is out of reach here: unverified against the "
        "file); thinking off so the teacher writes the ThinC plan itself",
    ),
    "build_sft.teacher_thinks": _i("off: the default template variables turn the teacher's thinking off"),
    "build_sft.exec_on": _i("output_open, as eval's"),
    "build_sft.response_prefix": _i("none"),
    "build_sft.student_tokenizer": _e("the smaller student Qwen3-1.7B"),
    "build_sft.student_system_prompt": _i("thinc, eval's prompt"),
    "build_sft.min_code_blocks": _e("at least three code blocks"),
    "build_sft.max_plan_share": _e("planning below 50% of total tokens"),
    "build_sft.plan_share_of": _e("of total tokens: interpreter output included"),
    "build_sft.reject_plan_computation": _e(
        "the plan carries no step-by-step derivation or numerical computation"
    ),
    "build_sft.require_grounded": _e(
        "the final answer comes directly from the interpreter's output (a property of the format, enforced as a filter)"
    ),
    "build_sft.max_prose_chars": _i("120 characters before the first block and after the last, each"),
    "build_sft.max_per_problem": _i("one trajectory per problem, the shortest"),
    "build_sft.recovery_share": _e("executions that succeed: every execution clean (0)"),
    "build_sft.decontam_benchmarks": _e("the five evaluation benchmarks"),
    "build_sft.decontam_ngram": _i("8-word n-grams"),
    "build_sft.decontam_threshold": _i("0.5 overlap"),
    "build_sft.decontam_maths_threshold": _i("0.5 maths-only overlap"),
    "build_sft.exec_timeout_s": _i("10 s, as eval's"),
    # SFT: recipes/configs/sft_qwen3_1.7b.yaml and sft_qwen3_4b_thinking.yaml
    "sft.model_name_or_path": _e("students Qwen3-1.7B and Qwen3-4B-Thinking-2507"),
    "sft.learning_rate": Source("secondary", _UNRECORDED),
    "sft.lr_scheduler_type": Source("secondary", _UNRECORDED),
    "sft.num_train_epochs": Source("secondary", _UNRECORDED),
    "sft.batch": Source("secondary", f"16 sequences per step: {_UNRECORDED}"),
    "sft.warmup_steps": _i("3% of the steps"),
    "sft.max_length": _i("build_sft's 32,768 completion tokens plus the longest prompt (1,671)"),
    # GRPO: recipes/configs/grpo_qwen3_1.7b.yaml and grpo_qwen3_4b_thinking.yaml (and their _h200 copies)
    "grpo.dataset_name": _e("GRPO on DAPO-Math-17k"),
    "grpo.reward": _e("a verifiable reward: exact match with the ground truth"),
    "grpo.loss_type": Source("secondary", f"the DAPO loss: {_UNRECORDED}"),
    "grpo.beta": Source("secondary", f"no KL term: {_UNRECORDED}"),
    "grpo.epsilon": Source("secondary", f"clip 0.20 / 0.28 (DAPO's values): {_UNRECORDED}"),
    "grpo.epsilon_high": Source("secondary", f"clip 0.20 / 0.28 (DAPO's values): {_UNRECORDED}"),
    "grpo.num_generations": Source("secondary", f"8 rollouts per prompt: {_UNRECORDED}"),
    "grpo.temperature": _i("1.0, TRL's default"),
    "grpo.learning_rate": _i("1e-6, TRL's default"),
    "grpo.lr_scheduler_type": _i("constant after the warm-up: one schedule across the stages"),
    "grpo.warmup_steps": Source("external", "DAPO's recipe (verl): 10 warm-up rollout batches"),
    "grpo.weight_decay": Source("external", "DAPO's recipe (verl): weight decay 0.1"),
    "grpo.generation_batch_size": _i("128 prompts per step: ASTER, the closest public recipe, runs 128"),
    "grpo.updates_per_generation": _i("2: ASTER's mini-batch is half its rollout batch"),
    "grpo.epochs": _i("4 epochs of the problems: stages 1-2 take about 3.07, stage 3 the rest"),
    "grpo.stages": _e(
        "a three-stage curriculum that raises the context from 16K to 32K and the tool-call limits"
    ),
    "grpo.stage1.max_steps": Source("secondary", "280 steps: an unverified secondary write-up (issue 26)"),
    "grpo.stage2.max_steps": Source("secondary", "120 steps: an unverified secondary write-up (issue 26)"),
    "grpo.stage1.max_tokens": _e("the first stage at 16K"),
    "grpo.stage2.max_tokens": _i("24K, the middle of 16K and 32K: the explainers give only the ends"),
    "grpo.stage3.max_tokens": _e("the last stage at 32K"),
    "grpo.stage1.max_tool_calls": _i(
        "16, about one per 1K tokens: the explainers say the limits rise, not their values"
    ),
    "grpo.stage2.max_tool_calls": _i("24, as stage 1"),
    "grpo.stage3.max_tool_calls": _i("32, as stage 1"),
    "grpo.dynamic_sampling": _i(
        "drop_solved: ASTER's drop of solved problems before each epoch, no extra generation; DAPO's refill "
        "and the filter alone are the other choices (docs/training.md)"
    ),
    "grpo.save_steps": _i(
        "20 optimizer steps = 10 generation batches: a crash costs at most that (docs/training.md)"
    ),
    "grpo.save_total_limit": _i("2 periodic checkpoints kept beside the stage folders (~56 GB each for 4B)"),
    "grpo.heldout_benchmarks": _i(
        "held-out accuracy during training on AIME 2024: watched, not used to pick checkpoints"
    ),
    "grpo.heldout_limit": _i("all 30 AIME 2024 problems, 1 sample each, at every checkpoint"),
}
"""The source of every default setting docs/settings.md lists (that page is generated from the code's
own values and these rows: `python tests/settings_page.py`, checked by tests/test_settings_page.py).
Preset rows come from each preset's own `sources` (eval/presets.py)."""
