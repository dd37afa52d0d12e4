"""Batched decoding for the hf backend: a continuous batch with retained KV caches, and a one-shot batch.

`ContinuousBatch` decodes one token per step for every live row; rows join between steps (each after
its own prefill of only what its retained cache lacks, see `_hf_cache.py`) and leave as soon as they
end, handing their cache to the store, so a batch never waits for its longest row and a trajectory's
next turn prefills only the interpreter output. The live rows' caches share one preallocated buffer,
every row ending at the same column (a row's positions are its own, the columns before its start are
masked), so a step writes one column in place and joining or leaving moves one row. It needs a
cache of plain full-attention layers (`plain_cache`); other models (sliding windows, linear
attention) use `decode_batch`, the one-shot left-padded batch that prefills every prompt whole.

Each row keeps its own sampling parameters (penalties, temperature, min-p, top-k, top-p, in vLLM's
order, drawing from its own `torch.Generator`), its own stop strings and its own `max_tokens`. Stop
strings are checked on the decoded tail of the row after every token, so generation stops at the
first token that completes one (kept whole). This module owns no threads or queues (see `hf.py`).
"""

from __future__ import annotations

import functools
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
    start: int
    """The buffer column of the row's first id; its ids fill the columns from there to the batch's `end`,
    except columns skipped when a longer row joined (masked)."""


class ContinuousBatch:
    """The live rows of the hf backend, their KV caches and the store finished rows hand theirs to.

    `admit` prefills new rows and samples their first token; `step` decodes one token for every live
    row; both return the rows that ended, with the caller's `owner` handle. Not thread-safe: one
    worker thread drives it.

    The live rows' caches sit in one preallocated buffer (`_SlotBuffer`): row i of the batch is slot i,
    and every row's ids end at the batch's `end` column, where the next step writes. A step writes one
    column in place; a leaving row's slot takes the last row; a joining row is written into the next
    slot, ending at `end` (if it is longer than the others, `end` jumps ahead and the others' skipped
    columns are masked). A concatenated cache copied the whole batch at every step, join and leave.
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
        self._buffer: _SlotBuffer | None = None

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
                    self._join(_Live(row, owner, len(row.prompt_ids), 0), row_kv)
        return ended

    def _prefill(self, row: Row) -> KV:
        """Run the prompt past its retained prefix and sample the first token; the row's whole cache."""
        kv, reuse = self.store.take(row.prompt_ids)
        cache = _row_cache(self._model, kv)
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
        buffer = self._buffer
        assert buffer is not None and self._live
        device = self._model.device
        with torch.inference_mode():
            if not buffer.fits(len(self._live), buffer.end + 1):
                self._relocate(len(self._live), buffer.end - buffer.begin + 1)
            mask = buffer.open_column(len(self._live))
            lengths = torch.tensor([live.length for live in self._live], device=device)
            ids = torch.tensor([[live.row.out[-1]] for live in self._live], dtype=torch.long, device=device)
            out = self._forward(ids, mask, lengths[:, None], buffer.cache(len(self._live)))
            buffer.end += 1
            logits = out.logits[:, -1, :].float()
            ended: list[int] = []
            for j, live in enumerate(self._live):
                live.length += 1
                token, logprob = _sample(logits[j], live.row)
                live.row.out.append(token)
                live.row.logprobs.append(logprob)
                _update(live.row, token, self._tokenizer, self._eos_ids)
                if live.row.finish is not None:
                    ended.append(j)
            results = []
            for j in ended:
                live = self._live[j]
                kv = buffer.row_kv(j, live.start, live.length)
                self.store.put(live.row.prompt_ids + live.row.out[:-1], kv)
                results.append((live.owner, _result(live.row, self._tokenizer)))
            self._remove(ended)
        return results

    def drop(self, owners: list[Any]) -> None:
        """Remove rows whose callers are gone (cancelled), without retaining their caches."""
        gone = {id(owner) for owner in owners}
        with torch.inference_mode():  # the buffer is made and written in inference mode
            self._remove([j for j, live in enumerate(self._live) if id(live.owner) in gone])

    def reset(self) -> None:
        """Forget every live row (after an error: their callers are told by the worker)."""
        self._live = []
        self._buffer = None  # after running out of memory, the next batch allocates anew

    def _forward(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache: Any) -> Any:
        return self._model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
            **{self._cache_kwarg: cache},
        )

    def _join(self, live: _Live, kv: KV) -> None:
        """Write a prefilled row into the next slot, its ids ending at the batch's `end` column."""
        if self._buffer is None:
            self._buffer = _SlotBuffer(self._model, kv)
        buffer = self._buffer  # empty (begin = end = 0, mask clear) when no row is live: `_remove` clears it
        slots = len(self._live) + 1
        if not buffer.fits(slots, max(buffer.end, live.length) + 1):
            self._relocate(slots, max(buffer.end - buffer.begin, live.length) + 1)
        buffer.end = max(buffer.end, live.length)
        live.start = buffer.end - live.length
        buffer.begin = min(buffer.begin, live.start) if self._live else live.start
        buffer.write_row(len(self._live), live.start, kv)
        self._live.append(live)

    def _relocate(self, slots: int, span: int) -> None:
        assert self._buffer is not None
        shift = self._buffer.relocate(slots, span)
        for live in self._live:
            live.start -= shift

    def _remove(self, rows: list[int]) -> None:
        """Remove rows by index: each slot freed takes the batch's last row (highest index first)."""
        if not rows:
            return
        assert self._buffer is not None
        for j in sorted(set(rows), reverse=True):
            last = len(self._live) - 1
            self._buffer.move_row(last, j)
            self._live[j] = self._live[last]
            self._live.pop()
        if not self._live:
            self._buffer.clear()
        else:
            self._buffer.begin = min(live.start for live in self._live)


class _SlotBuffer:
    """The KV of a continuous batch: one tensor [layers, 2, slots, kv heads, columns, head dim] and the
    attention mask of its columns. Columns `begin` to `end` are the live window; `relocate` grows the
    slots or columns (or moves the window to column 0) before anything is written past them."""

    COLUMN_STEP = 256
    """Columns are allocated in multiples of this, and a full buffer grows by half its columns."""

    def __init__(self, model: PreTrainedModel, like: KV) -> None:
        """An empty buffer for caches shaped like `like` (a row's: [1, kv heads, length, head dim] per layer)."""
        self._model = model
        self._layers = len(like)
        keys = like[0][0]
        self._heads, self._dim = keys.shape[1], keys.shape[3]
        self._dtype, self._device = keys.dtype, keys.device
        self._kv = torch.zeros(
            (self._layers, 2, 0, self._heads, 0, self._dim), dtype=self._dtype, device=self._device
        )
        self._mask = torch.zeros((0, 0), dtype=torch.long, device=self._device)
        self.begin = self.end = 0

    def clear(self) -> None:
        """No live rows: the window starts again at column 0 (stale values stay, masked, and finite)."""
        self._mask.zero_()
        self.begin = self.end = 0

    def fits(self, slots: int, columns: int) -> bool:
        """Whether `slots` rows and writes below column `columns` fit the buffer as it is."""
        return slots <= self._kv.shape[2] and columns <= self._kv.shape[4]

    def relocate(self, slots: int, span: int) -> int:
        """Make room for `slots` rows and a window of `span` columns: move the window to column 0 in
        place when that leaves a quarter of the columns free, else allocate a larger buffer. Returns how
        far the window moved left (callers shift the column numbers they hold by it)."""
        have_slots, have_columns = self._kv.shape[2], self._kv.shape[4]
        shift, used = self.begin, self.end - self.begin
        more_slots, more_columns = slots > have_slots, span > have_columns * 3 // 4
        if not more_slots and not more_columns:
            self._kv[:, :, :, :, :used] = self._kv[:, :, :, :, self.begin : self.end].clone()
            self._mask[:, :used] = self._mask[:, self.begin : self.end].clone()
            self._mask[:, used:] = 0
        else:
            new_slots = max(slots, 2 * have_slots) if more_slots else have_slots
            new_columns = have_columns
            if more_columns:
                new_columns = max(span, have_columns + have_columns // 2)
                new_columns = -(-new_columns // self.COLUMN_STEP) * self.COLUMN_STEP
            kv = torch.zeros(
                (self._layers, 2, new_slots, self._heads, new_columns, self._dim),
                dtype=self._dtype,
                device=self._device,
            )
            mask = torch.zeros((new_slots, new_columns), dtype=torch.long, device=self._device)
            kv[:, :, :have_slots, :, :used] = self._kv[:, :, :, :, self.begin : self.end]
            mask[:have_slots, :used] = self._mask[:, self.begin : self.end]
            self._kv, self._mask = kv, mask
        self.begin, self.end = 0, used
        return shift

    def write_row(self, slot: int, start: int, kv: KV) -> None:
        """A joining row's cache [1, heads, length, dim] per layer, into `slot` from column `start`."""
        length = kv[0][0].shape[2]
        self._mask[slot] = 0
        self._mask[slot, start : start + length] = 1
        for i, (keys, values) in enumerate(kv):
            self._kv[i, 0, slot, :, start : start + length] = keys[0]
            self._kv[i, 1, slot, :, start : start + length] = values[0]

    def move_row(self, source: int, target: int) -> None:
        """Slot `target` takes slot `source`'s window (the source is freed)."""
        if source != target:
            window = slice(self.begin, self.end)
            self._kv[:, :, target, :, window] = self._kv[:, :, source, :, window]
            self._mask[target] = self._mask[source]
        self._mask[source] = 0

    def open_column(self, rows: int) -> torch.Tensor:
        """Mark column `end` valid for the live rows; the attention mask of the next step."""
        self._mask[:rows, self.end] = 1
        return self._mask[:rows, self.begin : self.end + 1].contiguous()

    def cache(self, rows: int) -> Any:
        """A transformers cache whose layers write the next step's column in place."""
        from transformers import DynamicCache

        cache = DynamicCache(config=self._model.config)
        layer = _slot_layer()
        cache.layers = [layer(self, i, rows) for i in range(self._layers)]
        return cache

    def view(self, layer: int, which: int, rows: int, end: int) -> torch.Tensor:
        return self._kv[layer, which, :rows, :, self.begin : end]

    def put(self, layer: int, rows: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        q = keys.shape[2]
        self._kv[layer, 0, :rows, :, self.end : self.end + q] = keys
        self._kv[layer, 1, :rows, :, self.end : self.end + q] = values

    def row_kv(self, slot: int, start: int, length: int) -> KV:
        """A copy of one row's cache (its valid columns, skipped ones left out), for the store."""
        window = self._mask[slot, start : self.end]
        if int(window.sum()) == self.end - start:
            index: slice | torch.Tensor = slice(start, self.end)
        else:
            index = start + window.nonzero().flatten()
        kv = []
        for i in range(self._layers):
            keys = self._kv[i, 0, slot : slot + 1, :, index].clone()
            values = self._kv[i, 1, slot : slot + 1, :, index].clone()
            kv.append((keys, values))
        assert kv[0][0].shape[2] == length, (kv[0][0].shape, length)
        return kv


@functools.cache
def _slot_layer() -> type:
    """The cache layer class of `_SlotBuffer` (made on first use: transformers loads only with a model)."""
    from transformers.cache_utils import DynamicLayer

    class SlotLayer(DynamicLayer):  # type: ignore[no-untyped-call]
        """A layer whose keys and values are views of the batch's buffer; `update` writes the new
        column(s) at the buffer's `end` in place and returns the window through them."""

        def __init__(self, buffer: _SlotBuffer, index: int, rows: int) -> None:
            super().__init__()  # type: ignore[no-untyped-call]
            self._buffer, self._index, self._rows = buffer, index, rows
            self.keys = buffer.view(index, 0, rows, buffer.end)
            self.values = buffer.view(index, 1, rows, buffer.end)
            self.device = self.keys.device
            self.is_initialized = True

        def update(
            self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
        ) -> tuple[torch.Tensor, torch.Tensor]:
            self._buffer.put(self._index, self._rows, key_states, value_states)
            end = self._buffer.end + key_states.shape[-2]
            self.keys = self._buffer.view(self._index, 0, self._rows, end)
            self.values = self._buffer.view(self._index, 1, self._rows, end)
            return self.keys, self.values

    return SlotLayer


def _row_cache(model: PreTrainedModel, kv: KV | None) -> Any:
    """A one-row transformers cache holding `kv` (a retained prefix), for a joining row's prefill."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    layers: list[Any] = list(cache.layers)  # plain DynamicLayers (`plain_cache`)
    for layer, (keys, values) in zip(layers, kv or [], strict=False):
        layer.lazy_initialization(keys, values)
        layer.keys, layer.values = keys, values
    return cache


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
