"""Which request fields an OpenAI-compatible server takes beyond OpenAI's own (`--api-extensions`).

vLLM, SGLang and llama.cpp read sampling fields OpenAI lacks (`top_k`, `min_p`, `repetition_penalty`)
and vLLM returns token ids and keeps stop strings when asked; APIs that validate fields (OpenAI's)
refuse a request holding any of them with HTTP 400, which would make every sample `infra_error`.
Kept apart from `openai` (the request, its routing and retries) as the one place that says which
fields are extensions and how a refusal of one reads. Pure: no IO.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from thinc_bench.backends.base import SamplingParams

API_EXTENSIONS = ("auto", "vllm", "none")
"""What a request may add to OpenAI's fields (`--api-extensions`): `vllm` sends the sampling fields
OpenAI lacks and vLLM's token ids / kept stop strings (vLLM, SGLang and llama.cpp read them); `none`
sends only OpenAI's own fields (for APIs that refuse unknown ones with HTTP 400); `auto` sends them
until a server refuses one by name, then drops them for the rest of the run (one warning)."""
EXTENSION_FIELDS = (
    "top_k",
    "min_p",
    "repetition_penalty",
    "return_token_ids",
    "include_stop_str_in_output",
    "skip_special_tokens",
)
"""The fields `--api-extensions none` leaves out; `chat_template_kwargs` is sent only when asked for."""
_UNKNOWN_FIELD = re.compile(
    r"unrecogni[sz]ed|unknown (?:field|param|argument|key)|unexpected|extra inputs|extra_forbidden|"
    r"additional propert|unsupported|not supported|not allowed|not permitted",
    re.I,
)
"""How APIs say a request holds a field they do not know (OpenAI: "Unrecognized request argument
supplied: top_k"; pydantic: "Extra inputs are not permitted"), as opposed to a bad value of it."""


def extension_fields(params: SamplingParams, mode: str, *, vllm: bool) -> dict[str, Any]:
    """The extension fields of one request (`extra_body`): all of them while `vllm` (the `vllm` mode,
    or `auto` until a refusal), the sampling ones for the older `sampling` mode, none otherwise."""
    extra: dict[str, Any] = {}
    if vllm or mode == "sampling":
        extra = {
            "top_k": -1 if params.top_k is None else params.top_k,  # -1: every token (vLLM, SGLang)
            "min_p": params.min_p,
            "repetition_penalty": params.repetition_penalty,
        }
    if vllm:
        extra |= {"return_token_ids": True, "include_stop_str_in_output": True, "skip_special_tokens": True}
    return extra


def refuses_unknown_field(status: int, message: str, sent: Sequence[str]) -> bool:
    """Whether an HTTP error refuses one of the extension fields `sent` as unknown (not a bad value of
    it: "top_k must be at least 1" is the request's own error)."""
    return (
        status in (400, 422)
        and any(f in message for f in sent)
        and _UNKNOWN_FIELD.search(message) is not None
    )
