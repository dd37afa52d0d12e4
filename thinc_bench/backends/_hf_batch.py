"""One batched decode for the hf backend: left-padded prefill, then one token per step for every row.

Each row keeps its own sampling parameters (penalties, temperature, min-p, top-k, top-p, in vLLM's
order, drawing from its own `torch.Generator`), its own stop strings and its own `max_tokens`; a finished row is dropped from the
batch and from the KV cache at once, so short turns do not pay for long ones. Stop strings are
checked on the decoded tail of the row after every token, so generation stops at the first token
that completes one (kept whole). This module owns no threads or queues (see `hf.py`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from thinc_bench.backends.base import FinishReason, Generation, SamplingParams, decode, first_stop

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

BYTES_PER_CHAR = 4
"""A byte-level tokenizer may spend up to 4 tokens on one character (UTF-8), which sizes the stop window."""

STOP_WINDOW_SLACK_TOKENS = 8
"""Extra tokens decoded before a stop string's span, so a leading partial character cannot hide it."""


@dataclass
class Row:
    """One request in a batch; `out` grows until `finish` is set."""

    prompt_ids: list[int]
    params: SamplingParams
    rng: torch.Generator
    out: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish: FinishReason | None = None
    stop: str | None = None

    def window(self) -> int:
        longest = max((len(s) for s in self.params.stop), default=0)
        return BYTES_PER_CHAR * longest + STOP_WINDOW_SLACK_TOKENS


def decode_batch(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    rows: list[Row],
    *,
    eos_ids: frozenset[int],
    pad_id: int,
) -> list[Generation]:
    """Generate every row to its end (EOS, stop string or max_tokens) in one batch.

    Raises:
        torch.OutOfMemoryError: the batch does not fit; the caller maps it to BackendUnavailable.
    """
    device = model.device
    width = max(len(r.prompt_ids) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, width - len(row.prompt_ids) :] = torch.tensor(row.prompt_ids)
        mask[i, width - len(row.prompt_ids) :] = 1
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    live = list(range(len(rows)))
    cache: Any = None
    # transformers renamed `past_key_values` to `cache` during 5.x; older 5.x only know the old name.
    cache_kwarg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    with torch.inference_mode():
        while live:
            kv = {cache_kwarg: cache} if cache is not None else {}
            out = model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=positions,
                use_cache=True,
                logits_to_keep=1,
                **kv,
            )
            cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
            logits = out.logits[:, -1, :].float()
            sampled = [_sample(logits[j], rows[i]) for j, i in enumerate(live)]
            tokens = [token for token, _ in sampled]
            keep = []
            for j, (i, (token, logprob)) in enumerate(zip(live, sampled, strict=True)):
                rows[i].out.append(token)
                rows[i].logprobs.append(logprob)
                _update(rows[i], token, tokenizer, eos_ids)
                if rows[i].finish is None:
                    keep.append(j)
            if not keep:
                break
            index = torch.tensor(keep, device=device)
            if len(keep) < len(live) and cache is not None:
                cache.batch_select_indices(index)
            live = [live[j] for j in keep]
            ids = torch.tensor([[tokens[j]] for j in keep], dtype=torch.long, device=device)
            mask = torch.cat(
                [mask[index], torch.ones((len(keep), 1), dtype=torch.long, device=device)], dim=1
            )
            positions = positions[index, -1:] + 1
    return [_result(row, tokenizer) for row in rows]


def _sample(logits: torch.Tensor, row: Row) -> tuple[int, float]:
    """Pick the next token for one row and its logprob under the distribution it was drawn from.

    vLLM's order and definitions, so both backends sample the same distribution and report the same
    (processed) logprobs: penalties, then greedy (argmax; logprob of the penalised logits) or
    temperature, min-p, top-k, top-p, and a draw from the row's own generator.
    """
    params = row.params
    logits = _penalize(logits, row)
    if params.temperature == 0:
        token = int(torch.argmax(logits).item())
        return token, float(torch.log_softmax(logits, dim=-1)[token].item())
    logits = logits / params.temperature
    if params.min_p > 0:
        probs = torch.softmax(logits, dim=-1)
        logits = logits.masked_fill(probs < params.min_p * probs.max(), float("-inf"))
    if params.top_k is not None and params.top_k < logits.numel():
        kth = torch.topk(logits, params.top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if params.top_p < 1:
        sorted_logits, order = torch.sort(logits, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        # Drop a token when the mass before it already reaches top_p; the most likely one always stays.
        drop = (probs.cumsum(-1) - probs) >= params.top_p
        logits = logits.masked_fill(torch.zeros_like(drop).scatter(0, order, drop), float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    token = int(torch.multinomial(probs.to(row.rng.device), 1, generator=row.rng).item())
    return token, float(torch.log(probs[token]).item())


def _penalize(logits: torch.Tensor, row: Row) -> torch.Tensor:
    """Repetition penalty over prompt and output tokens; presence and frequency over this call's output
    (OpenAI's definitions, as vLLM applies them)."""
    params = row.params
    if params.repetition_penalty != 1:
        seen = torch.tensor(sorted(set(row.prompt_ids) | set(row.out)), device=logits.device)
        picked = logits[seen]
        penalty = params.repetition_penalty
        logits = logits.index_put((seen,), torch.where(picked > 0, picked / penalty, picked * penalty))
    if row.out and (params.presence_penalty or params.frequency_penalty):
        ids, counts = torch.unique(torch.tensor(row.out, device=logits.device), return_counts=True)
        shift = params.frequency_penalty * counts.to(logits.dtype) + params.presence_penalty
        logits = logits.index_put((ids,), logits[ids] - shift)
    return logits


def _update(row: Row, token: int, tokenizer: PreTrainedTokenizerBase, eos_ids: frozenset[int]) -> None:
    """Set `row.finish` (and `row.stop`) when `token` ends the row: EOS, a stop string, or max_tokens."""
    if token in eos_ids:
        row.finish = "stop"
        return
    if row.params.stop:
        row.stop = first_stop(decode(tokenizer, row.out[-row.window() :]), row.params.stop)
        if row.stop is not None:
            row.finish = "stop"
            return
    if len(row.out) >= row.params.max_tokens:
        row.finish = "length"


def _result(row: Row, tokenizer: PreTrainedTokenizerBase) -> Generation:
    return Generation(
        token_ids=row.out,
        text=decode(tokenizer, row.out),
        finish_reason=row.finish or "length",
        stop=row.stop,
        logprobs=row.logprobs if row.params.logprobs else None,
    )
