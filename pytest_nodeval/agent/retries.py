"""Retries and the run's shared rate limits, on the wire under the journaling transport.

Live SDK clients send through `LimitedTransport` (sync) or `AsyncLimitedTransport`: every
try first takes a place in the run's budgets (`limits.SharedLimiter`), and a 408, 409, 429 or
5xx answer (unless it says `x-should-retry: false`) or a connection error is tried again
after `retry-after-ms` / `retry-after`, or else an exponential backoff with jitter, at most
`max_retries` times and for at most `max_wait_s` seconds of waiting in all. The SDKs' own
retries are switched off where nodeval builds the clients, so nothing retries twice.

Because the retries happen below the journaling transport, a journal holds only the final
exchange of a request, with `retries` saying how many tries failed before it. When the last
try fails too, the SDK raises its error (RateLimitError, OverloadedError, ...), and the
attempt ends as an infrastructure error, never as the agent's failure.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import httpx2

from ..journal.transport import RETRIES_EXTENSION, extract_usage, shared_tls_context
from .limits import Lease, LimitRule, RunLimits, shared_limiter

DEFAULT_MAX_RETRIES = 2
"""The SDKs' own default, kept for clients that do not say."""
DEFAULT_MAX_WAIT_S = 60.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = DEFAULT_MAX_RETRIES
    max_wait_s: float = DEFAULT_MAX_WAIT_S
    """Waiting between the tries of one request stops before it would pass this."""
    base_s: float = 0.5
    """The first backoff when the provider does not say how long to wait; doubles per retry."""
    cap_s: float = 8.0
    """The longest backoff step of our own (a provider's retry-after may ask for more)."""


def should_retry(status: int, headers: Any) -> bool:
    """The SDKs' rule: the server's `x-should-retry` first, then 408, 409, 429 and 5xx."""
    said = headers.get("x-should-retry")
    if said in ("true", "false"):
        return bool(said == "true")
    return status in (408, 409, 429) or status >= 500


def retry_after_s(headers: Any, now: float | None = None) -> float | None:
    """What the provider asked for: `retry-after-ms`, else `retry-after` in seconds or as a date."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            return max(0.0, float(raw) * scale)
        except ValueError:
            pass
        when = email.utils.parsedate_tz(raw)
        if when is not None:
            return max(0.0, email.utils.mktime_tz(when) - (time.time() if now is None else now))
    return None


def backoff_s(policy: RetryPolicy, retry: int, headers: Any, rng: random.Random) -> float:
    """How long to wait before retry number `retry` (0 for the first)."""
    asked = retry_after_s(headers) if headers is not None else None
    if asked is not None:
        # A little later than asked, so the workers that were all refused do not come back at once.
        return asked * (1 + 0.1 * rng.random())
    return min(policy.cap_s, policy.base_s * 2.0**retry) * (1 - 0.25 * rng.random())


def policy_for(rules: tuple[LimitRule, ...], default: RetryPolicy) -> RetryPolicy:
    """A model line's retries/max_wait over its provider line's, over the client's own."""
    for rule in sorted(rules, key=lambda r: r.model is None):
        if rule.retries is not None:
            default = replace(default, max_retries=rule.retries)
            break
    for rule in sorted(rules, key=lambda r: r.model is None):
        if rule.max_wait_s is not None:
            return replace(default, max_wait_s=rule.max_wait_s)
    return default


def request_model(path: str, body: bytes) -> str | None:
    """The model a request names: in its body (Anthropic, OpenAI) or its path (Gemini's
    `.../models/<model>:generateContent`)."""
    if "/models/" in path:
        return path.rpartition("/models/")[2].partition(":")[0] or None
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        return None
    model = parsed.get("model") if isinstance(parsed, dict) else None
    return model if isinstance(model, str) else None


def response_tokens(response: httpx2.Response) -> int:
    is_sse = response.headers.get("content-type", "").startswith("text/event-stream")
    text = response.content.decode("utf-8", "replace")
    body = None
    if not is_sse:
        try:
            body = json.loads(text) if text else None
        except ValueError:
            return 0
    usage = extract_usage(body, text if is_sse else None)
    return usage["input_tokens"] + usage["output_tokens"] if usage else 0


class _Tries:
    """The bookkeeping of one request's tries, shared by the sync and async transports."""

    def __init__(
        self,
        provider: str,
        default: RetryPolicy,
        limits: RunLimits | None,
        request: httpx2.Request,
        body: bytes,
        rng: random.Random,
    ) -> None:
        rules = (
            limits.rules_for(provider, request_model(request.url.path, body))
            if limits is not None
            else ()
        )
        self.rules = rules
        self.limiter = shared_limiter(limits.db_path) if limits is not None and rules else None
        self.policy = policy_for(rules, default)
        self.retries, self.waited = 0, 0.0
        self._rng = rng
        self._count_tokens = any(r.tpm is not None for r in rules)

    def release(self, lease: Lease | None, response: httpx2.Response | None) -> None:
        if lease is not None and self.limiter is not None:
            tokens = response_tokens(response) if response is not None and self._count_tokens else 0
            self.limiter.release(lease, tokens)

    def next_wait(self, response: httpx2.Response | None) -> float | None:
        """Seconds to wait before trying again, or None: give up (or the answer is final)."""
        if response is not None and not should_retry(response.status_code, response.headers):
            return None
        delay = backoff_s(
            self.policy, self.retries, response.headers if response is not None else None, self._rng
        )
        if self.retries >= self.policy.max_retries or self.waited + delay > self.policy.max_wait_s:
            return None
        if response is not None and response.status_code == 429 and self.limiter is not None:
            self.limiter.pause(self.rules, delay)  # the whole run backs off, not only this request
        self.retries += 1
        self.waited += delay
        return delay

    def final(self, response: httpx2.Response) -> httpx2.Response:
        response.extensions[RETRIES_EXTENSION] = self.retries
        return response

    def final_error(self, exc: httpx2.TransportError) -> httpx2.TransportError:
        setattr(exc, RETRIES_EXTENSION, self.retries)
        return exc


class LimitedTransport(httpx2.BaseTransport):
    """Takes a place in the run's budgets for every try, and retries what a provider refused."""

    def __init__(
        self,
        provider: str,
        policy: RetryPolicy,
        limits: RunLimits | None = None,
        inner: httpx2.BaseTransport | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self._provider, self._policy, self._limits = provider, policy, limits
        self._inner = inner or httpx2.HTTPTransport(verify=shared_tls_context())
        self._sleep, self._rng = sleep, rng or random.Random()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        tries = _Tries(
            self._provider, self._policy, self._limits, request, request.read(), self._rng
        )
        while True:
            lease = tries.limiter.acquire(tries.rules) if tries.limiter is not None else None
            try:
                response = self._inner.handle_request(request)
                response.read()
            except httpx2.TransportError as exc:
                tries.release(lease, None)
                delay = tries.next_wait(None)
                if delay is None:
                    raise tries.final_error(exc)  # noqa: B904  (it is `exc` itself, re-raised)
            except BaseException:
                tries.release(lease, None)  # an interrupt: the place goes back at once
                raise
            else:
                tries.release(lease, response)
                delay = tries.next_wait(response)
                if delay is None:
                    return tries.final(response)
                response.close()
            self._sleep(delay)

    def close(self) -> None:
        self._inner.close()


class AsyncLimitedTransport(httpx2.AsyncBaseTransport):
    def __init__(
        self,
        provider: str,
        policy: RetryPolicy,
        limits: RunLimits | None = None,
        inner: httpx2.AsyncBaseTransport | None = None,
        *,
        rng: random.Random | None = None,
    ) -> None:
        self._provider, self._policy, self._limits = provider, policy, limits
        self._inner = inner or httpx2.AsyncHTTPTransport(verify=shared_tls_context())
        self._rng = rng or random.Random()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        tries = _Tries(
            self._provider, self._policy, self._limits, request, await request.aread(), self._rng
        )
        while True:
            lease = (
                await tries.limiter.acquire_async(tries.rules)
                if tries.limiter is not None
                else None
            )
            try:
                response = await self._inner.handle_async_request(request)
                await response.aread()
            except httpx2.TransportError as exc:
                tries.release(lease, None)
                delay = tries.next_wait(None)
                if delay is None:
                    raise tries.final_error(exc)  # noqa: B904  (it is `exc` itself, re-raised)
            except BaseException:
                tries.release(lease, None)  # an interrupt: the place goes back at once
                raise
            else:
                tries.release(lease, response)
                delay = tries.next_wait(response)
                if delay is None:
                    return tries.final(response)
                await response.aclose()
            await asyncio.sleep(delay)

    async def aclose(self) -> None:
        await self._inner.aclose()
