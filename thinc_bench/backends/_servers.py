"""Several OpenAI-compatible servers (vLLM or SGLang replicas) behind one openai backend.

`ServerPool` keeps what the backend knows of each server (requests in flight, consecutive failures,
when a set-aside server may be tried again) and picks the server of each attempt: among the ready
servers not yet tried by this request in this round, the one with the fewest requests in flight (least
outstanding requests; ties go to the one sent fewer). A server that fails `SET_ASIDE_AFTER` attempts in
a row is set aside for `set_aside_s`, then gets one request again. `agree` holds what each server said
of itself (served model, context, token ids, kept stop strings) against the first server that said it,
so replicas that would give different results are refused instead of mixed into one run.
Bookkeeping only: no IO, and the caller passes the clock.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from thinc_bench.errors import ConfigError

SET_ASIDE_AFTER = 2
"""Consecutive failed attempts before a server is set aside: one can be a blip, two in a row is an outage."""

SET_ASIDE_S = 30.0
"""How long a set-aside server gets no requests; then one request probes it (a restarting vLLM takes
minutes, so probing every 30 s costs one failed attempt each time)."""


@dataclass
class Server:
    """One server: its client (made in the caller's event loop), its load and its recent health."""

    url: str
    client: Any = None
    outstanding: int = 0
    sent: int = 0
    failed: int = 0
    failures_in_a_row: int = 0
    ready_at: float = 0.0
    times_set_aside: int = 0
    checked: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class ServerPool:
    """The servers of one backend, in the order given.

    Args:
        urls: the servers' `/v1` URLs, already normalised and distinct.
        set_aside_s: how long a server that keeps failing gets no requests.
    """

    def __init__(self, urls: list[str], set_aside_s: float = SET_ASIDE_S) -> None:
        self.servers = [Server(url) for url in urls]
        self.set_aside_s = set_aside_s
        self._facts: dict[str, tuple[str, object]] = {}

    def __len__(self) -> int:
        return len(self.servers)

    def pick(self, tried: set[str], now: float) -> Server | None:
        """The server of the next attempt of a request, or None when this round of attempts is over.

        A round tries each ready server at most once; when none is ready at the start of a round (all
        set aside), it tries the one that comes back soonest.
        """
        ready = [s for s in self.servers if s.ready_at <= now and s.url not in tried]
        if ready:
            return min(ready, key=lambda s: (s.outstanding, s.sent))
        if tried:
            return None
        return min(self.servers, key=lambda s: s.ready_at)

    def succeeded(self, server: Server) -> None:
        """The server answered (any answer but an outage): it is healthy again."""
        server.failures_in_a_row = 0
        server.ready_at = 0.0

    def failed(self, server: Server, now: float) -> bool:
        """Count an outage (connection refused, timeout, 5xx); True when the server is now set aside.
        A lone server is never set aside: there is nowhere else to send its requests."""
        server.failed += 1
        server.failures_in_a_row += 1
        if len(self.servers) == 1 or server.failures_in_a_row < SET_ASIDE_AFTER:
            return False
        self.set_aside(server, now)
        return True

    def set_aside(self, server: Server, now: float) -> None:
        """Send `server` nothing for `set_aside_s` (a server found down at start)."""
        server.ready_at = now + self.set_aside_s
        server.times_set_aside += 1

    def agree(self, url: str, fact: str, value: object) -> None:
        """Hold `url`'s `value` of `fact` against the first server that reported that fact.

        Raises:
            ConfigError: the two differ, naming both servers and both values.
        """
        first_url, first = self._facts.setdefault(fact, (url, value))
        if first != value:
            raise ConfigError(
                f"openai backend: the servers disagree on {fact}: {first_url} says {first}, {url} says {value}; "
                "serve the same model with the same server and options behind every --base-url"
            )

    def summary(self) -> str:
        """One line of requests per server, for the log at close."""
        return ", ".join(
            f"{s.url}: {s.sent} sent, {s.failed} failed, set aside {s.times_set_aside}x" for s in self.servers
        )


def parse_urls(base_url: str | list[str] | tuple[str, ...]) -> list[str]:
    """The servers of `--base-url`: a comma list (or a list of them), each without its trailing slash.

    Raises:
        ConfigError: an empty entry, a URL without http:// or https://, or a server given twice.
    """
    given = [base_url] if isinstance(base_url, str) else list(base_url)
    urls = [part.strip().rstrip("/") for entry in given for part in entry.split(",")]
    shown = ",".join(given)
    if not urls or any(not url for url in urls):
        raise ConfigError(
            f"--base-url {shown!r}: an empty server URL; separate servers with commas, "
            "e.g. http://10.0.0.1:8000/v1,http://10.0.0.2:8000/v1"
        )
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(
                f"--base-url {url!r}: use an http:// or https:// URL, e.g. http://127.0.0.1:8000/v1"
            )
    twice = sorted({url for url in urls if urls.count(url) > 1})
    if twice:
        raise ConfigError(f"--base-url names {', '.join(twice)} more than once; list each server once")
    return urls
