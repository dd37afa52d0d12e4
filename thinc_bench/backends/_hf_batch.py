"""Batched decoding for the hf backend: a continuous batch with retained KV caches, and a one-shot batch.

`ContinuousBatch` decodes one token per step for every live row; rows join between steps (each after
its own prefill of only what its retained cache lacks, see `_hf_cache.py`) and leave as soon as they
end, handing their cache to the store, so a batch never waits for its longest row and a trajectory's
next turn prefills only the interpreter output. The live rows' caches are kept left-padded to one
width (a row's positions are its own, padding is masked); joining pads, leaving trims. It needs a
cache of plain full-attention layers (`plain_cache`); other models (sliding windows, linear
attention) use `decode_batch`, the one-shot left-padded batch that prefills every prompt whole.

Each row keeps its own sampling parameters (penalties, temperature, min-p, top-k, top-p, in vLLM's
order, drawing from its own `torch.Generator`), its own stop strings and its own `max_tokens`. Stop
strings are checked on the decoded tail of the row after every token, so generation stops at the
first token that completes one (kept whole). This module owns no threads or queues (see `hf.py`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from thinc_bench.backends._hf_cache import KV, KVStore
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
    cache_kwarg = _cache_kwarg(model)
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
            cache = _cache_of(out)
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


def plain_cache(model: PreTrainedModel) -> bool:
    """Whether every layer of the model's cache is plain full attention, which `ContinuousBatch` can
    pad, splice and cut (a sliding-window or linear-attention layer keeps other state)."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    try:
        cache = DynamicCache(config=model.config)
    except (AttributeError, KeyError, TypeError, ValueError):  # a config transformers cannot map to layers
        return False
    return bool(cache.layers) and all(type(layer) is DynamicLayer for layer in cache.layers)


@dataclass
class _Live:
    row: Row
    owner: Any
    length: int
    """Ids of this row in the batch cache: its prompt and every output token but the last (not yet fed)."""


class ContinuousBatch:
    """The live rows of the hf backend, their KV caches and the store finished rows hand theirs to.

    `admit` prefills new rows and samples their first token; `step` decodes one token for every live
    row; both return the rows that ended, with the caller's `owner` handle. Not thread-safe: one
    worker thread drives it.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        eos_ids: frozenset[int],
        store: KVStore,
    ) -> None:
        self._model, self._tokenizer, self._eos_ids, self.store = model, tokenizer, eos_ids, store
        self._cache_kwarg = _cache_kwarg(model)
        self._live: list[_Live] = []
        self._cache: Any = None
        self._width = 0

    def __len__(self) -> int:
        return len(self._live)

    @property
    def owners(self) -> list[Any]:
        return [live.owner for live in self._live]

    def admit(self, rows: list[tuple[Row, Any]]) -> list[tuple[Any, Generation | Exception]]:
        """Prefill each row after the longest prefix the store holds, sample its first token, and add
        the rows that did not end with it to the batch. A row whose prefill fails (an id outside the
        vocabulary) ends with its error; the others go on.

        Raises:
            torch.OutOfMemoryError: the caller maps it to BackendUnavailable and calls `reset`.
        """
        ended: list[tuple[Any, Generation | Exception]] = []
        joining: list[tuple[_Live, KV]] = []
        with torch.inference_mode():
            for row, owner in rows:
                try:
                    row_kv = self._prefill(row)
                except torch.OutOfMemoryError:
                    raise
                except Exception as exc:  # this request's own fault, or our bug: its caller hears of it
                    ended.append((owner, exc))
                    continue
                if row.finish is not None:
                    self.store.put(list(row.prompt_ids), row_kv)
                    ended.append((owner, _result(row, self._tokenizer)))
                else:
                    joining.append((_Live(row, owner, len(row.prompt_ids)), row_kv))
            if joining:
                self._join(joining)
        return ended

    def _prefill(self, row: Row) -> KV:
        """Run the prompt past its retained prefix and sample the first token; the row's whole cache."""
        kv, reuse = self.store.take(row.prompt_ids)
        cache = self._new_cache(kv)
        n = len(row.prompt_ids)
        device = self._model.device
        out = self._forward(
            torch.tensor([row.prompt_ids[reuse:]], dtype=torch.long, device=device),
            torch.ones((1, n), dtype=torch.long, device=device),
            torch.arange(reuse, n, device=device)[None],
            cache,
        )
        cache = _cache_of(out)
        token, logprob = _sample(out.logits[0, -1, :].float(), row)
        row.out.append(token)
        row.logprobs.append(logprob)
        _update(row, token, self._tokenizer, self._eos_ids)
        return [(layer.keys, layer.values) for layer in cache.layers]

    def step(self) -> list[tuple[Any, Generation]]:
        """Decode one token for every live row; rows that end leave the batch and retain their cache."""
        device = self._model.device
        width = self._width
        lengths = torch.tensor([live.length for live in self._live], device=device)
        columns = torch.arange(width + 1, device=device)
        mask = (columns[None, :] >= (width - lengths)[:, None]).long()
        ids = torch.tensor([[live.row.out[-1]] for live in self._live], dtype=torch.long, device=device)
        with torch.inference_mode():
            out = self._forward(ids, mask, lengths[:, None], self._cache)
            self._cache = _cache_of(out)
            self._width = width + 1
            logits = out.logits[:, -1, :].float()
            ended: list[tuple[Any, Generation]] = []
            keep: list[int] = []
            for j, live in enumerate(self._live):
                live.length += 1
                token, logprob = _sample(logits[j], live.row)
                live.row.out.append(token)
                live.row.logprobs.append(logprob)
                _update(live.row, token, self._tokenizer, self._eos_ids)
                if live.row.finish is None:
                    keep.append(j)
                    continue
                start = self._width - live.length
                kv = [
                    (layer.keys[j : j + 1, :, start:].clone(), layer.values[j : j + 1, :, start:].clone())
                    for layer in self._cache.layers
                ]
                self.store.put(live.row.prompt_ids + live.row.out[:-1], kv)
                ended.append((live.owner, _result(live.row, self._tokenizer)))
            if len(keep) < len(self._live):
                self._keep(keep)
        return ended

    def drop(self, owners: list[Any]) -> None:
        """Remove rows whose callers are gone (cancelled), without retaining their caches."""
        gone = {id(owner) for owner in owners}
        self._keep([j for j, live in enumerate(self._live) if id(live.owner) not in gone])

    def reset(self) -> None:
        """Forget every live row (after an error: their callers are told by the worker)."""
        self._live, self._cache, self._width = [], None, 0

    def _forward(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache: Any) -> Any:
        return self._model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
            **{self._cache_kwarg: cache},
        )

    def _new_cache(self, kv: KV | None) -> Any:
        from transformers import DynamicCache

        cache = DynamicCache(config=self._model.config)
        layers: list[Any] = list(cache.layers)  # plain DynamicLayers (`plain_cache`)
        for layer, (keys, values) in zip(layers, kv or [], strict=False):
            layer.lazy_initialization(keys, values)
            layer.keys, layer.values = keys, values
        return cache

    def _join(self, joining: list[tuple[_Live, KV]]) -> None:
        """Left-pad the batch and the joining rows to one width and stack them."""
        width = max([self._width] + [live.length for live, _ in joining])
        layers = len(joining[0][1])
        merged: KV = []
        for i in range(layers):
            keys, values = [], []
            if self._live:
                layer = self._cache.layers[i]
                keys.append(_left_pad(layer.keys, width - self._width))
                values.append(_left_pad(layer.values, width - self._width))
            for live, kv in joining:
                keys.append(_left_pad(kv[i][0], width - live.length))
                values.append(_left_pad(kv[i][1], width - live.length))
            merged.append((torch.cat(keys), torch.cat(values)))
        self._cache = self._new_cache(merged)
        self._width = width
        self._live += [live for live, _ in joining]

    def _keep(self, keep: list[int]) -> None:
        """Keep rows `keep` and cut the columns that are now padding in every row."""
        if not keep:
            self.reset()
            return
        if len(keep) == len(self._live):
            return
        self._live = [self._live[j] for j in keep]
        trim = self._width - max(live.length for live in self._live)
        index = torch.tensor(keep, device=self._model.device)
        for layer in self._cache.layers:
            layer.keys = layer.keys.index_select(0, index)[:, :, trim:]
            layer.values = layer.values.index_select(0, index)[:, :, trim:]
        self._width -= trim


def _left_pad(tensor: torch.Tensor, n: int) -> torch.Tensor:
    return torch.nn.functional.pad(tensor, (0, 0, n, 0)) if n else tensor


def _cache_kwarg(model: PreTrainedModel) -> str:
    """transformers renamed `past_key_values` to `cache` during 5.x; older 5.x only know the old name."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _cache_of(out: Any) -> Any:
    return out.cache if getattr(out, "cache", None) is not None else out.past_key_values


CANDIDATES = 1024
"""Tokens `_sample` filters and draws among when they provably hold every token the filters keep.
Sorting the whole vocabulary (49K for SmolLM2, 152K for Qwen3) per row and step cost more than the
model's forward at batch 32 on a 2-core CPU; the top 1024 by probability hold top-p 0.95's nucleus at
the temperatures people sample at, and when they do not, the whole vocabulary is used."""


def _sample(logits: torch.Tensor, row: Row) -> tuple[int, float]:
    """Pick the next token for one row and its logprob under the distribution it was drawn from.

    vLLM's order and definitions, so both backends sample the same distribution and report the same
    (processed) logprobs: penalties, then greedy (argmax; logprob of the penalised logits) or
    temperature, min-p, top-k, top-p, and a draw from the row's own generator.

    The filters run on the `CANDIDATES` most likely tokens when those provably contain every token
    the filters keep (top-k within them, top-p's mass reached inside them, or min-p's threshold above
    the last of them), which is the same distribution as filtering the whole vocabulary, without its
    sort. The draw is Gumbel-max (argmax of the logits plus Gumbel noise from the row's generator): an
    exact sample of the softmax, without `torch.multinomial`'s scan of the vocabulary.
    """
    params = row.params
    logits = _penalize(logits, row)
    if params.temperature == 0:
        token = int(torch.argmax(logits).item())
        return token, float(torch.log_softmax(logits, dim=-1)[token].item())
    logits = logits / params.temperature
    ids: torch.Tensor | None = None
    filtered = params.min_p > 0 or params.top_k is not None or params.top_p < 1
    if filtered and logits.numel() > CANDIDATES:
        probs = torch.softmax(logits, dim=-1)
        top, best = torch.topk(probs, CANDIDATES)
        covers = (
            (params.top_k is not None and params.top_k <= CANDIDATES)
            or (params.top_p < 1 and float(top.sum()) >= params.top_p)
            or (params.min_p > 0 and float(top[-1]) < params.min_p * float(top[0]))
        )
        if covers:
            logits, ids = logits[best], best
    if params.min_p > 0:
        probs = torch.softmax(logits, dim=-1)
        logits = logits.masked_fill(probs < params.min_p * probs.max(), float("-inf"))
    if params.top_k is not None and params.top_k < logits.numel():
        kth = torch.topk(logits, params.top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if params.top_p < 1:
        # The candidates are already in descending order; the whole vocabulary is sorted here.
        if ids is None:
            sorted_logits, order = torch.sort(logits, descending=True)
        probs = torch.softmax(logits if ids is not None else sorted_logits, dim=-1)
        # Drop a token when the mass before it already reaches top_p; the most likely one always stays.
        drop = (probs.cumsum(-1) - probs) >= params.top_p
        if ids is None:
            drop = torch.zeros_like(drop).scatter(0, order, drop)
        logits = logits.masked_fill(drop, float("-inf"))
    log_probs = torch.log_softmax(logits, dim=-1)
    uniform = torch.rand(log_probs.shape, generator=row.rng, device=row.rng.device).to(log_probs.device)
    gumbel = -torch.log(-torch.log(uniform.clamp_min(torch.finfo(uniform.dtype).tiny)))
    pick = int(torch.argmax(log_probs + gumbel).item())
    token = pick if ids is None else int(ids[pick].item())
    return token, float(log_probs[pick].item())


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
