"""The hf backend: a transformers causal LM on CPU or GPU, continuously batched, with KV caches kept
across the turns of a trajectory.

`HFGenerator` loads a local folder, a Hub id or a `.gguf` file (converted once per machine, see
`_sources.py`). Concurrent `generate` calls go to one worker thread (torch releases the GIL), which
runs a continuous batch (`_hf_batch.ContinuousBatch`): between decode steps, waiting requests join
(up to `max_batch_size` rows) and finished ones leave, so no row waits for the longest one. A finished
row leaves its KV cache in a store bounded by `kv_cache_tokens` (LRU); a later request whose ids
start with a retained row's ids (the next turn of a trajectory: prompt, what the model wrote, the
interpreter's output) prefills only the rest. An evicted cache costs a full prefill, never a different
token. Models whose cache is not plain full attention (sliding windows, linear attention) fall back
to one-shot batches that prefill every prompt whole.

Sampling applies every `SamplingParams` field in vLLM's order and returns processed logprobs (see
`_hf_batch.py`). A prompt that fills the model's context raises `ContextExceeded`; a longer request
is capped to end with "length" at the context.

Determinism: a request with `seed` samples from its own `torch.Generator`, so its draws do not depend
on the other rows of its batch; unseeded requests share one generator (seeded by the `seed` option).
Batched logits, and logits over a retained cache, can differ from a fresh unbatched prefill in the
last bits (padding and prefill length change kernel shapes), so a seeded request is reproducible for
the same schedule, and usually, not provably, otherwise.

Weights that change in place (GRPO's live policy after an optimizer step) invalidate the store: each
admission compares the parameters' version counters and drops every retained cache when they moved.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import torch

from thinc_bench import precision
from thinc_bench.backends import _sources
from thinc_bench.backends._hf_batch import ContinuousBatch, Row, decode_batch, plain_cache
from thinc_bench.backends._hf_cache import KVStore
from thinc_bench.backends.base import Generation, Generator, SamplingParams, fit_context, one_line
from thinc_bench.errors import BackendUnavailable, ConfigError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

Dtype = Literal["auto", "float32", "bfloat16", "float16"]
Device = Literal["auto", "cpu", "cuda"]

MAX_BATCH_SIZE = 16
"""Default rows per batch: on 2 CPU cores throughput stops growing past about 8-16 rows."""

BATCH_WAIT_S = 0.01
"""How long an idle worker waits for more requests after the first one: negligible against one decode step."""

KV_CACHE_BYTES = 4 * 2**30
"""Default memory for retained KV caches (4 GiB): about 90K tokens of SmolLM2-135M in float32, 37K of
Qwen3-1.7B in bfloat16; `kv_cache_tokens` sets the budget in tokens instead."""


@dataclass
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    future: asyncio.Future[Generation]
    loop: asyncio.AbstractEventLoop


class HFGenerator(Generator):
    """A transformers model behind the Generator interface.

    Args:
        model: a local HF folder, a Hub id, or a `.gguf` file (tokenizer and chat template from the file).
        revision: Hub revision (branch, tag or commit) for a Hub id.
        dtype: "auto" is bfloat16 where the device computes it natively (CUDA, CPUs with AVX512-BF16,
            AMX or Arm BF16) and float32 elsewhere (`thinc_bench.precision`).
        device: "auto" is CUDA when available, else CPU.
        max_batch_size: most requests decoded together.
        seed: seeds the generator shared by requests without their own seed; None seeds from the OS.
        kv_cache_tokens: most tokens of finished rows' KV caches kept for later turns (LRU); None is
            what fits in `KV_CACHE_BYTES`; 0 keeps none (every request prefills its whole prompt).

    Raises:
        ConfigError: a bad option, a missing `.gguf`, or a model transformers cannot load.
    """

    def __init__(
        self,
        model: str,
        *,
        revision: str | None = None,
        dtype: Dtype = "auto",
        device: Device = "auto",
        max_batch_size: int = MAX_BATCH_SIZE,
        seed: int | None = None,
        kv_cache_tokens: int | None = None,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if max_batch_size < 1:
            raise ConfigError(f"hf backend: max_batch_size={max_batch_size}; use at least 1")
        _check_budget(kv_cache_tokens)
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype_reason = "given"
        if dtype == "auto":
            support = precision.bf16_support(device)
            dtype, dtype_reason = ("bfloat16" if support.native else "float32"), f"auto: {support.reason}"
            logger.info("hf backend: dtype %s (%s)", dtype, dtype_reason)
        self._source = _sources.resolve(model, revision=revision)
        started = time.perf_counter()
        try:
            self._tokenizer: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(
                self._source.load_path, revision=revision
            )
            loaded: Any = AutoModelForCausalLM.from_pretrained(
                self._source.load_path, revision=revision, dtype=getattr(torch, dtype)
            )
            self._model: PreTrainedModel = loaded.to(device)
        except (OSError, ValueError) as exc:  # transformers' missing-files and bad-folder errors
            raise ConfigError(
                f"hf backend cannot load model {model!r}: {one_line(exc)}; pass a folder, Hub id or .gguf"
            ) from exc
        self._model.eval()
        logger.info(
            "hf backend loaded %s on %s (%s) in %.1f s", model, device, dtype, time.perf_counter() - started
        )
        self._start(
            {"model": self._source.origin, "file_sha256": self._source.sha256},
            {
                "revision": revision,
                "dtype": dtype,
                "dtype_reason": dtype_reason,
                "device": device,
                "max_batch_size": max_batch_size,
            },
            max_batch_size,
            seed,
            kv_cache_tokens,
        )

    @classmethod
    def from_model(
        cls,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        max_batch_size: int = MAX_BATCH_SIZE,
        seed: int | None = None,
        kv_cache_tokens: int | None = None,
    ) -> HFGenerator:
        """Serve a model already in memory (GRPO's live policy): every batch reads its current weights.

        Nothing is loaded or copied, and the model's train/eval mode is the caller's to set (sample in
        eval mode: dropout would change the policy). `aclose` stops the worker thread, not the model.

        Raises:
            ConfigError: a bad option, or a model without an EOS token.
        """
        if max_batch_size < 1:
            raise ConfigError(f"hf backend: max_batch_size={max_batch_size}; use at least 1")
        self = cls.__new__(cls)
        self._model, self._tokenizer = model, tokenizer
        self._start(
            {"model": str(getattr(model, "name_or_path", "") or type(model).__name__), "in_memory": True},
            {
                "dtype": str(model.dtype).removeprefix("torch."),
                "device": str(model.device),
                "max_batch_size": max_batch_size,
            },
            max_batch_size,
            seed,
            kv_cache_tokens,
        )
        return self

    def _start(
        self,
        identity: dict[str, Any],
        options: dict[str, Any],
        max_batch_size: int,
        seed: int | None,
        kv_cache_tokens: int | None,
    ) -> None:
        """Everything after the model is in place: limits, sampling generator, KV store, the batching thread."""
        _check_budget(kv_cache_tokens)
        if kv_cache_tokens is None:
            kv_cache_tokens = KV_CACHE_BYTES // _kv_bytes_per_token(self._model)
        self._identity = identity
        self._eos_ids = _eos_ids(self._model, self._tokenizer)
        pad = self._tokenizer.pad_token_id
        self._pad_id = int(pad) if pad is not None else min(self._eos_ids)
        self._context = int(getattr(self._model.config, "max_position_embeddings", 0) or 0)
        self._options = {**options, "kv_cache_tokens": kv_cache_tokens}
        self._max_batch_size = max_batch_size
        self._store = KVStore(kv_cache_tokens)
        self._widest_batch = 0
        self._engine = (
            ContinuousBatch(self._model, self._tokenizer, eos_ids=self._eos_ids, store=self._store)
            if plain_cache(self._model)
            else None
        )
        self._weights_version = _weights_version(self._model)
        self._shared_rng = torch.Generator(device=self._model.device)
        if seed is None:
            self._shared_rng.seed()
        else:
            self._shared_rng.manual_seed(seed)
        self._queue: queue.Queue[_Request | None] = queue.Queue()
        self._closed = False
        self._worker = threading.Thread(target=self._serve, name="thinc-hf-batcher", daemon=True)
        self._worker.start()

    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, *, request_id: str | None = None
    ) -> Generation:
        if self._closed or not self._worker.is_alive():
            raise BackendUnavailable("hf backend is closed or its worker thread died; create a new generator")
        if not prompt_ids:
            raise ConfigError(f"request {request_id}: empty prompt; render the chat prompt first")
        params = fit_context(prompt_ids, params, self.context_length, request_id)
        loop = asyncio.get_running_loop()
        request = _Request(list(prompt_ids), params, loop.create_future(), loop)
        self._queue.put(request)
        return await request.future

    @property
    def context_length(self) -> int | None:
        """The model's `max_position_embeddings`; None when its config has none."""
        return self._context or None

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        await asyncio.to_thread(self._worker.join)

    def describe(self) -> dict[str, Any]:
        import transformers

        return {
            "backend": "hf",
            **self._identity,
            "transformers": transformers.__version__,
            **self._options,
        }

    def cache_stats(self) -> dict[str, int]:
        """Prompt tokens prefilled and taken from retained caches since the start, hits, evictions,
        the tokens the store holds now, and the most rows one forward pass has decoded together (read
        between batches: the worker updates them)."""
        stats = self._store.stats
        return {
            "prefilled_tokens": stats.prefilled_tokens,
            "reused_tokens": stats.reused_tokens,
            "hits": stats.hits,
            "evictions": stats.evictions,
            "held_tokens": self._store.held_tokens,
            "widest_batch": self._widest_batch,
        }

    def _serve(self) -> None:
        """Worker thread: run batches until the `None` sentinel arrives and the live rows have ended."""
        if self._engine is None:
            self._serve_one_shot()
        else:
            self._serve_continuous(self._engine)
        self._fail_pending()

    def _serve_continuous(self, engine: ContinuousBatch) -> None:
        """Admit waiting requests between decode steps (an idle worker waits for the first one and
        gathers for `BATCH_WAIT_S`); stop admitting at the sentinel, finish the live rows, return."""
        stopping = False
        while True:
            incoming: list[_Request] = []
            if not len(engine):
                if stopping:
                    return
                first = self._queue.get()
                if first is None:
                    return
                incoming.append(first)
            deadline = time.monotonic() + (BATCH_WAIT_S if incoming else 0.0)
            while not stopping and len(engine) + len(incoming) < self._max_batch_size:
                try:
                    wait = deadline - time.monotonic()
                    item = self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                else:
                    incoming.append(item)
            incoming = [r for r in incoming if not r.future.cancelled()]
            try:
                if incoming:
                    self._check_weights()
                    for request, generation in engine.admit(
                        [(Row(r.prompt_ids, r.params, self._rng(r.params)), r) for r in incoming]
                    ):
                        _deliver(request, generation)
                    self._count_tokens(len(incoming))  # each prefill samples its row's first token
                gone = [r for r in engine.owners if r.future.cancelled()]
                if gone:
                    engine.drop(gone)
                if len(engine):
                    rows = len(engine)
                    self._widest_batch = max(self._widest_batch, rows)
                    for request, generation in engine.step():
                        _deliver(request, generation)
                    self._count_tokens(rows)  # one token for every live row
                    if len(engine) != rows:
                        logger.debug("hf batch of %d: %d ended", rows, rows - len(engine))
            except Exception as exc:  # worker boundary: every live caller hears of it, loudly, with its type
                error: Exception = exc
                if isinstance(exc, torch.OutOfMemoryError):
                    self._store.clear()
                    error = BackendUnavailable(
                        f"hf backend ran out of memory with {len(engine) + len(incoming)} rows: {one_line(exc)}"
                    )
                for request in {id(r): r for r in [*engine.owners, *incoming]}.values():
                    _deliver(request, error)
                engine.reset()

    def _check_weights(self) -> None:
        """Drop retained caches computed with weights that have since changed in place."""
        version = _weights_version(self._model)
        if version != self._weights_version:
            self._store.clear()
            self._weights_version = version

    def _serve_one_shot(self) -> None:
        """Gather waiting requests into one-shot batches (models `ContinuousBatch` cannot serve)."""
        while True:
            first = self._queue.get()
            if first is None:
                break
            batch, stopping = [first], False
            deadline = time.monotonic() + BATCH_WAIT_S
            while len(batch) < self._max_batch_size:
                try:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                batch.append(item)
            self._run(batch)
            if stopping:
                break

    def _run(self, batch: list[_Request]) -> None:
        batch = [r for r in batch if not r.future.cancelled()]
        if not batch:
            return
        rows = [Row(r.prompt_ids, r.params, self._rng(r.params)) for r in batch]
        self._widest_batch = max(self._widest_batch, len(rows))
        started = time.perf_counter()
        try:
            results = decode_batch(
                self._model, self._tokenizer, rows, eos_ids=self._eos_ids, pad_id=self._pad_id
            )
        except torch.OutOfMemoryError as exc:
            error: Exception = BackendUnavailable(
                f"hf backend ran out of memory on a batch of {len(rows)}: {one_line(exc)}"
            )
            for r in batch:
                _deliver(r, error)
            return
        except Exception as exc:  # worker boundary: hand our bug to every caller, loudly, with its type
            for r in batch:
                _deliver(r, exc)
            return
        elapsed = time.perf_counter() - started
        tokens = sum(len(g.token_ids) for g in results)
        self._count_tokens(tokens)
        logger.debug(
            "hf batch of %d: %d tokens in %.2f s (%.1f tok/s)", len(rows), tokens, elapsed, tokens / elapsed
        )
        for r, generation in zip(batch, results, strict=True):
            _deliver(r, generation)

    def _rng(self, params: SamplingParams) -> torch.Generator:
        if params.seed is None:
            return self._shared_rng
        rng = torch.Generator(device=self._shared_rng.device)
        rng.manual_seed(params.seed)
        return rng

    def _fail_pending(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                error = BackendUnavailable("hf backend closed while this request was waiting")
                _deliver(item, error)


def _check_budget(kv_cache_tokens: int | None) -> None:
    if kv_cache_tokens is not None and kv_cache_tokens < 0:
        raise ConfigError(f"hf backend: kv_cache_tokens={kv_cache_tokens}; use 0 (keep none) or more")


def _kv_bytes_per_token(model: PreTrainedModel) -> int:
    """Bytes of keys and values one token takes in every layer (at least 1: odd configs still get a budget)."""
    config = model.config.get_text_config(decoder=True)
    layers = int(getattr(config, "num_hidden_layers", 0) or 0)
    heads = int(getattr(config, "num_attention_heads", 0) or 0)
    kv_heads = int(getattr(config, "num_key_value_heads", 0) or heads)
    head_dim = int(getattr(config, "head_dim", 0) or (config.hidden_size // heads if heads else 0))
    return max(1, 2 * layers * kv_heads * head_dim * model.dtype.itemsize)


def _weights_version(model: PreTrainedModel) -> tuple[int, ...]:
    """The parameters' in-place version counters: any optimizer step or weight load moves one."""
    return tuple(p._version for p in model.parameters())


def _eos_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> frozenset[int]:
    """Every id that ends a turn: the generation config's EOS (int or list) and the tokenizer's."""
    ids: set[int] = set()
    configured = getattr(model.generation_config, "eos_token_id", None)
    if isinstance(configured, int):
        ids.add(configured)
    elif isinstance(configured, list):
        ids.update(int(i) for i in configured)
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    if not ids:
        raise ConfigError(
            "hf backend: the model defines no EOS token; set eos_token_id in its generation_config.json"
        )
    return frozenset(ids)


def _deliver(request: _Request, outcome: Generation | BaseException) -> None:
    """Hand a result or error to the caller's event loop; a caller whose loop has closed is gone."""
    try:
        request.loop.call_soon_threadsafe(_settle, request.future, outcome)
    except RuntimeError as exc:
        logger.warning("hf backend dropped a result: the caller's event loop is closed (%s)", exc)


def _settle(future: asyncio.Future[Generation], outcome: Generation | BaseException) -> None:
    if future.done():  # the caller cancelled while its batch ran
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
