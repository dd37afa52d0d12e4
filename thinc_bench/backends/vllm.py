"""The vllm backend: vLLM's async engine in this process, with prefix caching on by default.

`VLLMGenerator` wraps `AsyncLLMEngine` (vLLM's V1 `AsyncLLM`): every `generate` is one engine
request, and vLLM batches concurrent requests continuously and reuses the shared prompt prefix of a
trajectory's turns from its KV cache. Stop strings are kept (`include_stop_str_in_output`), and the
text is re-derived from the returned ids so it is exactly their decode. Seeds are per request (vLLM's
own per-request generators). Logprobs are the sampler's processed ones (after penalties, temperature
and filtering, `logprobs_mode="processed_logprobs"`), as the hf backend returns and RL's importance
ratios need. `max_tokens` is capped so prompt plus generation fits `max_model_len`; a prompt that fills
it raises `ContextExceeded`. A dead engine raises `BackendUnavailable`; another request vLLM rejects
raises `ConfigError`. `data_parallel_size` runs that many replicas of the model (each over
`tensor_parallel_size` GPUs) behind the one engine, which balances requests between them; more GPUs
than are visible is refused before vLLM starts. Scripts that build it need an `if __name__ ==
"__main__":` guard (vLLM spawns workers). This module does not start HTTP servers (see `openai.py`).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from typing import TYPE_CHECKING, Any

from thinc_bench.backends import _sources
from thinc_bench.backends.base import (
    Generation,
    Generator,
    SamplingParams,
    Usage,
    decode,
    first_stop,
    fit_context,
    one_line,
)
from thinc_bench.errors import BackendUnavailable, ConfigError, ContextExceeded

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

GPU_MEMORY_UTILIZATION = 0.9
"""vLLM's own default share of GPU memory for weights plus KV cache; lower it to share the GPU."""

LOGPROBS_MODE = "processed_logprobs"
"""Logprobs of the distribution actually sampled (vLLM's default is the raw model's)."""

_CONTEXT_ERROR = re.compile(r"max(imum)?[ _]model[ _]len|maximum context length|longer than the max", re.I)
"""How vLLM words a request that does not fit the context, across versions."""


def _error_classes() -> tuple[tuple[type[Exception], ...], tuple[type[Exception], ...]]:
    """vLLM's request errors (-> ConfigError) and engine errors (-> BackendUnavailable), by version."""
    from vllm.v1.engine.exceptions import EngineDeadError, EngineGenerateError

    try:  # vLLM 0.32 splits its errors into client (4xx) and server (5xx) classes
        from vllm.exceptions import VLLMClientError, VLLMServerError
    except ImportError:
        return (ValueError,), (EngineDeadError, EngineGenerateError)
    return (VLLMClientError, ValueError), (VLLMServerError, EngineDeadError, EngineGenerateError)


class VLLMGenerator(Generator):
    """vLLM's async engine behind the Generator interface.

    Args:
        model: a local HF folder, a Hub id, or a `.gguf` file (converted to a folder once per machine).
        revision: Hub revision of a Hub id.
        dtype: vLLM dtype ("auto", "bfloat16", "float16", "float32").
        tensor_parallel_size: GPUs the model is sharded over.
        data_parallel_size: replicas of the model in the engine, each on `tensor_parallel_size` GPUs
            (vLLM's `data_parallel_size`; its CPU build runs them as processes).
        max_model_len: context length; None takes the model's.
        gpu_memory_utilization: share of GPU memory vLLM may take (ignored by the CPU build, which
            sizes its KV cache from `VLLM_CPU_KVCACHE_SPACE` in GiB).
        enable_prefix_caching: reuse KV cache across requests that share a prompt prefix.
        seed: engine seed, for requests without their own.
        enforce_eager: skip CUDA graph capture (faster start, slower decoding).

    Raises:
        ConfigError: vLLM is not installed, or the engine cannot be built from these options.
    """

    def __init__(
        self,
        model: str,
        *,
        revision: str | None = None,
        dtype: str = "auto",
        tensor_parallel_size: int = 1,
        data_parallel_size: int = 1,
        max_model_len: int | None = None,
        gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
        enable_prefix_caching: bool = True,
        seed: int = 0,
        enforce_eager: bool = False,
    ) -> None:
        from thinc_bench.backends import require

        check_parallel(tensor_parallel_size, data_parallel_size, None)
        require("vllm")
        import vllm

        check_parallel(tensor_parallel_size, data_parallel_size, _visible_gpus())
        self._client_errors, self._server_errors = _error_classes()
        from transformers import AutoTokenizer

        self._source = _sources.resolve(model, revision=revision)
        args = vllm.AsyncEngineArgs(
            model=self._source.load_path,
            revision=revision,
            dtype=dtype,
            tensor_parallel_size=tensor_parallel_size,
            data_parallel_size=data_parallel_size,
            max_model_len=max_model_len,  # None: the model's own
            gpu_memory_utilization=gpu_memory_utilization,
            enable_prefix_caching=enable_prefix_caching,
            seed=seed,
            enforce_eager=enforce_eager,
            disable_log_stats=True,
            logprobs_mode=LOGPROBS_MODE,
            enable_chunked_prefill=_chunked_prefill(),
        )
        started = time.perf_counter()
        try:
            self._engine = vllm.AsyncLLMEngine.from_engine_args(args)
        except (ValueError, OSError) as exc:
            raise ConfigError(f"vllm backend cannot start on {model!r}: {one_line(exc)}") from exc
        logger.info("vllm engine for %s ready in %.1f s", model, time.perf_counter() - started)
        self._tokenizer: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(
            self._source.load_path, revision=revision
        )
        config = self._engine.vllm_config
        self._options: dict[str, Any] = {
            "revision": revision,
            "dtype": str(config.model_config.dtype).removeprefix("torch."),
            "device": str(config.device_config.device_type),
            "tensor_parallel_size": tensor_parallel_size,
            "data_parallel_size": int(config.parallel_config.data_parallel_size),
            "max_model_len": config.model_config.max_model_len,
            "gpu_memory_utilization": gpu_memory_utilization,
            "enable_prefix_caching": enable_prefix_caching,
            "seed": seed,
            "enforce_eager": enforce_eager,
            "logprobs_mode": LOGPROBS_MODE,
            "vllm": vllm.__version__,
        }
        self._context = int(config.model_config.max_model_len)
        self._usage = Usage()
        self._closed = False

    @property
    def context_length(self) -> int | None:
        """The engine's `max_model_len`."""
        return self._context

    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, *, request_id: str | None = None
    ) -> Generation:
        import vllm

        if self._closed:
            raise BackendUnavailable("vllm backend is closed; create a new generator")
        sampling = _sampling_params(fit_context(prompt_ids, params, self._context, request_id))
        engine_id = _engine_id(request_id)
        final = None
        counted = 0
        try:
            async for output in self._engine.generate(
                vllm.TokensPrompt(prompt_token_ids=list(prompt_ids)), sampling, engine_id
            ):
                final = output
                if output.outputs:  # cumulative outputs, one per engine step: count what is new
                    self._count_tokens(max(0, len(output.outputs[0].token_ids) - counted))
                    counted = len(output.outputs[0].token_ids)
        except self._server_errors as exc:
            raise BackendUnavailable(f"vllm engine failed request {request_id}: {one_line(exc)}") from exc
        except self._client_errors as exc:
            raise _rejected(exc, request_id) from exc
        if final is None or not final.outputs:
            raise BackendUnavailable(f"vllm engine returned nothing for request {request_id}")
        self._usage.add(len(prompt_ids), final.num_cached_tokens, len(final.outputs[0].token_ids))
        return _generation(self._tokenizer, final.outputs[0], params, request_id)

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._engine.shutdown()

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "vllm",
            "model": self._source.origin,
            "file_sha256": self._source.sha256,
            **self._options,
            "usage": self._usage.as_dict(),
        }


class ColocatedVLLMGenerator(Generator):
    """An in-process `vllm.LLM` (TRL's colocated engine) behind the Generator interface.

    `LLM.generate` takes a whole batch and returns when all of it is done, which would make every
    trajectory wait for the slowest one's turn. Here each `generate` adds one request to the engine and
    a driver task steps the engine (`LLMEngine.step`, the loop `LLM.generate` runs itself) until no
    request is left, handing each finished request to its caller at once; a trajectory whose code has
    run joins the batch at the next step. Steps run on the event loop's thread, where the trainer
    built the engine, and block it for one scheduler step; sandbox runs proceed in their threads
    meanwhile. Weights are whatever the engine holds: the trainer syncs them before each rollout.

    Args:
        llm: a built `vllm.LLM` (single process: TRL builds it with the external launcher).
        tokenizer: the policy's tokenizer (chat template, decoding).
    """

    def __init__(self, llm: Any, tokenizer: PreTrainedTokenizerBase) -> None:
        from thinc_bench.backends import require

        require("vllm")
        self._llm = llm
        self._engine = llm.llm_engine
        self._tokenizer = tokenizer
        self._client_errors, self._server_errors = _error_classes()
        self._waiting: dict[str, tuple[asyncio.Future[Generation], SamplingParams, str | None]] = {}
        self._aliases: dict[str, str] = {}
        self._driver: asyncio.Task[None] | None = None
        self._closed = False

    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, *, request_id: str | None = None
    ) -> Generation:
        import vllm

        if self._closed:
            raise BackendUnavailable("colocated vllm generator is closed; create a new one")
        engine_id = _engine_id(request_id)
        future: asyncio.Future[Generation] = asyncio.get_running_loop().create_future()
        context = int(self._engine.vllm_config.model_config.max_model_len)
        try:
            named = self._engine.add_request(
                engine_id,
                vllm.TokensPrompt(prompt_token_ids=list(prompt_ids)),
                _sampling_params(fit_context(prompt_ids, params, context, request_id)),
            )
        except self._client_errors as exc:
            raise _rejected(exc, request_id) from exc
        self._waiting[engine_id] = (future, params, request_id)
        if isinstance(named, str) and named != engine_id:  # versions that report the internal id
            self._aliases[named] = engine_id
        if self._driver is None or self._driver.done():
            self._driver = asyncio.get_running_loop().create_task(self._drive())
        return await future

    @property
    def context_length(self) -> int | None:
        """The engine's `max_model_len`."""
        return int(self._engine.vllm_config.model_config.max_model_len)

    async def _drive(self) -> None:
        """Step the engine while any request is unfinished; yield to the loop between steps."""
        try:
            while self._waiting:
                for output in self._engine.step():
                    if not output.finished:
                        continue
                    key = self._aliases.pop(output.request_id, output.request_id)
                    future, params, request_id = self._waiting.pop(key)
                    self._count_tokens(len(output.outputs[0].token_ids) if output.outputs else 0)
                    if future.done():  # the caller was cancelled
                        continue
                    try:
                        future.set_result(_generation(self._tokenizer, output.outputs[0], params, request_id))
                    except BackendUnavailable as exc:
                        future.set_exception(exc)
                await asyncio.sleep(0)
        except Exception as exc:  # an engine failure ends every waiting request, loudly
            error = BackendUnavailable(f"colocated vllm engine failed: {one_line(exc)}")
            error.__cause__ = exc
            for future, _, _ in self._waiting.values():
                if not future.done():
                    future.set_exception(error)
            self._waiting.clear()

    async def aclose(self) -> None:
        """Abort what is still running; the engine itself belongs to the trainer."""
        self._closed = True
        if self._waiting:
            self._engine.abort_request(list(self._waiting))
            for future, _, _ in self._waiting.values():
                if not future.done():
                    future.set_exception(BackendUnavailable("colocated vllm generator closed mid-request"))
            self._waiting.clear()
        if self._driver is not None:
            await asyncio.gather(self._driver, return_exceptions=True)

    def describe(self) -> dict[str, Any]:
        import vllm

        config = self._engine.vllm_config
        return {
            "backend": "vllm-colocated",
            "model": str(config.model_config.model),
            "dtype": str(config.model_config.dtype).removeprefix("torch."),
            "max_model_len": config.model_config.max_model_len,
            "vllm": vllm.__version__,
        }


def check_parallel(tensor_parallel_size: int, data_parallel_size: int, visible_gpus: int | None) -> None:
    """Refuse a parallel layout that cannot start, before vLLM spends minutes finding out.

    Args:
        tensor_parallel_size: GPUs per replica.
        data_parallel_size: replicas.
        visible_gpus: GPUs this process sees (`CUDA_VISIBLE_DEVICES` applied); None when unknown
            (vLLM's CPU build, where replicas are processes).

    Raises:
        ConfigError: a size below 1, or more GPUs than are visible.
    """
    if tensor_parallel_size < 1 or data_parallel_size < 1:
        raise ConfigError(
            f"vllm backend: --tensor-parallel-size {tensor_parallel_size} --data-parallel-size "
            f"{data_parallel_size}; use 1 or more of each"
        )
    needed = tensor_parallel_size * data_parallel_size
    if visible_gpus is not None and needed > visible_gpus:
        raise ConfigError(
            f"vllm backend: --tensor-parallel-size {tensor_parallel_size} x --data-parallel-size "
            f"{data_parallel_size} needs {needed} GPUs and {visible_gpus} are visible; lower one of them "
            "(or run replicas on other machines: --backend openai --base-url URL1,URL2)"
        )


def _visible_gpus() -> int | None:
    """GPUs this process may use, or None without CUDA/ROCm (vLLM's CPU build)."""
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else None


def _rejected(exc: Exception, request_id: str | None) -> Exception:
    """The error for a request vLLM refuses: ContextExceeded when it does not fit, else ConfigError."""
    if _CONTEXT_ERROR.search(str(exc)):
        return ContextExceeded(f"vllm: request {request_id} does not fit the context: {one_line(exc)}")
    return ConfigError(f"vllm rejected request {request_id}: {one_line(exc)}")


def _chunked_prefill() -> bool | None:
    """False on vLLM's CPU build, else vLLM's default (None).

    vLLM 0.32 on CPU kills its engine ("CPU Generator does not use offset") when a seeded request's
    prefill is split across steps: it rewinds the request's generator, which only CUDA generators
    allow. Every eval request is seeded, and 32 concurrent seeded nano trajectories (more prompt
    tokens than one step's 2,048) crashed it in perf/vllm_overhead.py; unsplit prefills never rewind.
    """
    from vllm.platforms import current_platform

    return False if current_platform.is_cpu() else None


def _engine_id(request_id: str | None) -> str:
    """Engine request ids must be unique among live requests; a trajectory's turns share request_id."""
    return f"{request_id or 'thinc'}-{uuid.uuid4().hex[:12]}"


def _sampling_params(params: SamplingParams) -> Any:
    """vLLM's sampling parameters for ours, every field explicit: stop strings kept in the output,
    per-request seed."""
    import vllm

    return vllm.SamplingParams(
        temperature=params.temperature,
        top_p=params.top_p,
        top_k=params.top_k or 0,  # 0 = all tokens
        min_p=params.min_p,
        repetition_penalty=params.repetition_penalty,
        presence_penalty=params.presence_penalty,
        frequency_penalty=params.frequency_penalty,
        max_tokens=params.max_tokens,
        stop=list(params.stop),
        include_stop_str_in_output=True,
        seed=params.seed,
        logprobs=0 if params.logprobs else None,  # 0: the sampled token's own logprob only
        output_kind=vllm.sampling_params.RequestOutputKind.FINAL_ONLY,
    )


def _generation(
    tokenizer: PreTrainedTokenizerBase, completion: Any, params: SamplingParams, request_id: str | None
) -> Generation:
    """Our Generation from vLLM's CompletionOutput; the text is the decode of the ids, exactly."""
    finish = completion.finish_reason
    if finish not in ("stop", "length"):
        raise BackendUnavailable(f"vllm engine ended request {request_id} with finish_reason {finish!r}")
    token_ids = [int(i) for i in completion.token_ids]
    text = decode(tokenizer, token_ids)
    stop = None
    if finish == "stop":
        reason = completion.stop_reason
        stop = reason if isinstance(reason, str) and reason in params.stop else first_stop(text, params.stop)
    logprobs = None
    if params.logprobs and completion.logprobs is not None:
        logprobs = [
            float(entry[token].logprob) for entry, token in zip(completion.logprobs, token_ids, strict=True)
        ]
    return Generation(token_ids=token_ids, text=text, finish_reason=finish, stop=stop, logprobs=logprobs)
