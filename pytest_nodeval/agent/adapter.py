"""Record and replay a user's own agent, not only the reference engine.

An agent is any callable taking an `AgentContext` (sync or async). Every Anthropic, OpenAI
and Gemini client anything builds during the attempt sends through its journal
(agent/intercept.py): record and live journal the traffic, replay serves it from the journal.
The agent wraps its local side-effecting functions with `@tool`, so replay returns their
recorded results without running them:

    from pytest_nodeval import AgentContext, tool

    @tool
    def refund(order_id: str) -> dict:
        return payments.refund(order_id)          # never runs during replay

    def my_agent(ctx: AgentContext) -> None:
        client = anthropic.Anthropic()            # journaled: no key needed to replay
                                                  # (ctx.anthropic() is the explicit form)
        for text in ctx.inputs():
            ...                                   # the agent's own loop
            ctx.output(answer)

Tool arguments and results must be JSON types, because the journal stores them; a framework's
context argument (RunContext, ToolContext, RunnableConfig, callbacks) is left out, and
`@tool(exclude=[...])` leaves out others. A tool that raised when recorded raises `ToolFailed`
(with the recorded "Type: message") in replay: the original exception object cannot be rebuilt
from the journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import json
import sys
import time
from collections.abc import Callable, Collection, Iterator
from typing import Any, Protocol, TypeVar

from .. import __version__
from ..errors import NodevalError, ProviderError
from ..journal.replay import ReplayStash, ReplayStopped
from ..journal.writer import JournalWriter
from .simulated_user import SimulatedUser

F = TypeVar("F", bound=Callable[..., Any])


class Agent(Protocol):
    def __call__(self, ctx: AgentContext) -> Any: ...


class ToolFailed(Exception):
    """A replayed tool call that failed when it was recorded."""


FAKE_KEY = "nodeval-fake-key"
"""The key the SDK clients send to a local fake (which needs one, and never checks it)."""


class AgentContext:
    """What your own agent is given (`ctx`): one attempt's way out to the world.

    It owns the attempt's journal and everything that writes to it for the agent: the SDK
    clients it hands out (each sends through the journal: live to the provider or a fake,
    replay from the recording), the `@tool` calls (journaled, and served from the journal in
    replay when they have side effects), and the simulated user's turns. It closes the
    clients it made when the attempt ends.
    """

    def __init__(
        self,
        journal: JournalWriter,
        user: SimulatedUser,
        stash: ReplayStash | None = None,
        fakes: dict[str, Any] | None = None,
        limits: Any = None,
    ) -> None:
        self.journal, self.user, self.stash = journal, user, stash
        self.fakes = fakes or {}
        """Fakes started for this attempt by kind: with an `llm` one, live and record sessions send
        the SDK clients there unless a base_url is given."""
        self.limits = limits
        """The run's shared rate limits (limits.RunLimits), which every client here goes through."""
        from .intercept import Routes

        self.routes = Routes(journal, stash, limits, self._fake_url(), owner=self)
        """Where every provider request made during the attempt goes (agent/intercept.py): the
        clients handed out here and the ones anything else builds."""
        self._clients: list[Any] = []
        self._registered: set[str] = set()
        self._calls = 0
        self._turn = 0

    @property
    def replaying(self) -> bool:
        return self.stash is not None

    # -- SDK clients ------------------------------------------------------------------------

    def http_client(
        self,
        provider: str = "http",
        *,
        api: str = "http",
        asynchronous: bool = False,
        max_retries: int | None = None,
    ) -> Any:
        """An httpx2 client journaled under `provider` (for SDKs not built in).

        Live, its requests are rate-limited by the run's `nodeval_limits` (under the name
        `provider`) and retried on 429/5xx/connection errors `max_retries` times (default 2):
        give the SDK on top of it no retries of its own.
        """
        from .providers import Wiring, sdk_http_client

        wiring = Wiring(self.journal, self.stash, limits=self.limits)
        client = sdk_http_client(
            wiring, provider, api, asynchronous=asynchronous, max_retries=max_retries
        )
        self._clients.append(client)
        return client

    def anthropic(self, *, name: str = "anthropic", **kwargs: Any) -> Any:
        import anthropic

        return self._sdk(
            anthropic.Anthropic, name, "anthropic.messages", "ANTHROPIC_API_KEY", False, kwargs
        )

    def async_anthropic(self, *, name: str = "anthropic", **kwargs: Any) -> Any:
        import anthropic

        return self._sdk(
            anthropic.AsyncAnthropic, name, "anthropic.messages", "ANTHROPIC_API_KEY", True, kwargs
        )

    def openai(self, *, name: str = "openai", **kwargs: Any) -> Any:
        import openai

        return self._sdk(openai.OpenAI, name, "openai", "OPENAI_API_KEY", False, kwargs)

    def async_openai(self, *, name: str = "openai", **kwargs: Any) -> Any:
        import openai

        return self._sdk(openai.AsyncOpenAI, name, "openai", "OPENAI_API_KEY", True, kwargs)

    def gemini(self, *, name: str = "gemini", **kwargs: Any) -> Any:
        """A `google.genai.Client` (Gemini API key); its `.aio` client is journaled too.

        `http_options` (a dict or `types.HttpOptions`, e.g. with `base_url`) is kept; only its
        httpx clients are replaced by journaled ones.
        """
        from google import genai
        from google.genai import types

        from .providers import GEMINI_API

        options = kwargs.get("http_options") or {}
        options = (
            types.HttpOptions.model_validate(options) if isinstance(options, dict) else options
        )
        fake = self._fake_url()
        if fake is not None and options.base_url is None:
            options = options.model_copy(update={"base_url": fake})
            kwargs.setdefault("api_key", FAKE_KEY)
        self._key(kwargs, "genai.Client", "GEMINI_API_KEY", "GOOGLE_API_KEY")
        asked = options.retry_options
        retries = (
            max(0, (asked.attempts or 1) - 1)
            if asked is not None and asked.attempts is not None
            else None
        )
        update: dict[str, Any] = {
            "httpx_client": self.http_client(name, api=GEMINI_API, max_retries=retries),
            "httpx_async_client": self.http_client(
                name, api=GEMINI_API, asynchronous=True, max_retries=retries
            ),
        }
        if not self.replaying:
            update["retry_options"] = (
                None  # nodeval retries below the journal (the SDK's own `attempts`)
            )
        kwargs["http_options"] = options.model_copy(update=update)
        return genai.Client(**kwargs)

    def _sdk(
        self,
        cls: Any,
        name: str,
        api: str,
        key_env: str,
        asynchronous: bool,
        kwargs: dict[str, Any],
    ) -> Any:
        fake = self._fake_url()
        if fake is not None and "base_url" not in kwargs:
            kwargs["base_url"] = fake + ("/v1" if api.startswith("openai") else "")
            kwargs.setdefault("api_key", FAKE_KEY)
        self._key(kwargs, cls.__name__, key_env)
        retries = kwargs.pop("max_retries", None)
        if not self.replaying:
            kwargs["max_retries"] = 0  # nodeval retries below the journal, limited and counted
        elif retries is not None:
            kwargs["max_retries"] = retries  # journals from before retried in the SDK
        kwargs["http_client"] = self.http_client(
            name, api=api, asynchronous=asynchronous, max_retries=retries
        )
        return cls(**kwargs)

    def _fake_url(self) -> str | None:
        """The running fake LLM's URL in a live or record session (replay never calls out)."""
        fake = self.fakes.get("llm")
        return None if fake is None or self.replaying else str(fake.url)

    def _key(self, kwargs: dict[str, Any], what: str, *key_envs: str) -> None:
        import os

        from ..provider_keys import real_key

        if self.replaying:
            kwargs["api_key"] = "nodeval-replay-needs-no-key"
        elif "api_key" not in kwargs and not any(real_key(os.environ.get(e)) for e in key_envs):
            raise ProviderError(
                f"{what}: no API key; set {' or '.join(key_envs)} or pass api_key=, "
                "or replay the journal in deterministic mode, which needs no key"
            )

    # -- the conversation ---------------------------------------------------------------------

    def inputs(self) -> Iterator[str]:
        """The user's turns, each journaled as io.input (replayed from the journal in replay)."""
        last: str | None = None
        while (turn := self.user.next_input(last)) is not None:
            self._turn += 1
            self.journal.set_turn(self._turn)  # what the agent does next belongs to this turn
            self.journal.emit("io.input", {"text": turn.text, "source": turn.source})
            yield turn.text
            last = self._last_output()

    def ask(self, question: str) -> str:
        """Ask the user mid-turn (journaled as io.ask / io.ask.response)."""
        self._calls += 1
        call_id = f"ask-{self._calls}"
        self.journal.emit("io.ask", {"call_id": call_id, "question": question})
        answer = self.user.answer(call_id, question)
        self.journal.emit(
            "io.ask.response", {"call_id": call_id, "text": answer.text, "source": answer.source}
        )
        return answer.text

    def output(self, text: str) -> None:
        self.journal.emit("io.output", {"text": text})

    def _last_output(self) -> str | None:
        outputs = [e for e in self.journal.events if e.type == "io.output"]
        return outputs[-1].payload.text if outputs else None

    # -- local tools ------------------------------------------------------------------------

    def _tool_call(
        self, name: str, fn: Callable[..., Any], args: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        if name not in self._registered:
            self._registered.add(name)
            self.journal.emit(
                "tool.register",
                {
                    "tool": name,
                    "description": (fn.__doc__ or "").strip(),
                    "side_effects": True,
                    "source": "user",
                },
            )
        self._calls += 1
        call_id = f"{name}-{self._calls}"
        jsonable = _journal_args(name, args)
        self.journal.emit("tool.call", {"tool": name, "call_id": call_id, "args": jsonable})
        return call_id, jsonable

    def _replayed(self, name: str, call_id: str, args: dict[str, Any]) -> Any:
        assert self.stash is not None
        recorded = self.journal.emit_recorded(
            self.stash.tool_result_event(name, call_id, args)
        ).payload_dict()
        if not recorded["ok"]:
            raise ToolFailed(recorded.get("error") or f"tool '{name}' failed when recorded")
        return recorded.get("result")

    @contextlib.contextmanager
    def _journaled(self, name: str, call_id: str) -> Iterator[list[Any]]:
        """Run a live tool call and journal its result (what it returned, or what it raised)."""
        start = time.perf_counter()
        outcome: list[Any] = []
        try:
            yield outcome
        except Exception as exc:
            self._result(name, call_id, start, error=exc)
            raise
        self._result(name, call_id, start, outcome[0])

    def _result(
        self,
        name: str,
        call_id: str,
        start: float,
        result: Any = None,
        error: BaseException | None = None,
    ) -> None:
        latency = round((time.perf_counter() - start) * 1000, 3)
        payload: dict[str, Any] = {
            "tool": name,
            "call_id": call_id,
            "ok": error is None,
            "latency_ms": latency,
        }
        if error is None:
            payload["result"] = _jsonable(result, f"the result of tool '{name}'")
        else:
            payload["error"] = f"{type(error).__name__}: {error}"
        self.journal.emit("tool.result", payload)

    def close(self) -> None:
        for client in self._clients:
            close = getattr(client, "close", None)
            if close is not None and not inspect.iscoroutinefunction(close):
                close()


def _jsonable(value: Any, what: str) -> Any:
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        raise NodevalError(
            f"{what} is a {type(value).__name__}, which the journal cannot store; "
            "use JSON types (dict, list, str, int, float, bool, None)"
        ) from None


def _journal_args(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    stored = {}
    for arg, value in arguments.items():
        try:
            stored[arg] = json.loads(json.dumps(value))
        except (TypeError, ValueError):
            raise NodevalError(
                f"the argument {arg!r} of tool {name!r} is a {type(value).__name__}, which the "
                "journal cannot store: pass JSON types (dict, list, str, int, float, bool, "
                f"None), or leave it out of the journal with @tool(exclude=[{arg!r}]) if it "
                "is a context or a dependency the recorded result does not depend on"
            ) from None
    return stored


def tool(fn: Any = None, *, name: str | None = None, exclude: Collection[str] = ()) -> Any:
    """Journal a local side-effecting function; replay serves its recorded results instead.

    It goes inside or outside a framework's own tool decorator (agent/framework_tools.py):
    the function keeps its name, docstring and signature, so the framework derives the same
    schema. Arguments that are a framework's context objects, and those named in `exclude`,
    are passed through and left out of the journal. Outside a nodeval session the function
    runs as if undecorated.
    """

    def decorate(func: Any) -> Any:
        from .framework_tools import journal_tool_object

        if not inspect.isfunction(func) and not inspect.ismethod(func):
            return journal_tool_object(func, decorate_function)
        return decorate_function(func, name or func.__name__)

    def decorate_function(func: F, tool_name: str) -> F:
        from .framework_tools import is_context_value, unjournaled_params

        signature = inspect.signature(func)
        left_out = unjournaled_params(signature) | set(exclude)

        def bound(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            arguments = signature.bind(*args, **kwargs)
            arguments.apply_defaults()
            flat: dict[str, Any] = {}
            for arg, value in arguments.arguments.items():
                if signature.parameters[arg].kind is inspect.Parameter.VAR_KEYWORD:
                    flat.update(value)  # **kwargs are parameters in their own right
                else:
                    flat[arg] = value
            return {
                arg: value
                for arg, value in flat.items()
                if arg not in left_out and not is_context_value(value)
            }

        def begin(
            args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> tuple[AgentContext | None, str, dict[str, Any]]:
            ctx = _current()
            if ctx is None:
                return None, "", {}
            call_id, jsonable = ctx._tool_call(tool_name, func, bound(args, kwargs))
            return ctx, call_id, jsonable

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                ctx, call_id, jsonable = begin(args, kwargs)
                if ctx is None:
                    return await func(*args, **kwargs)
                if ctx.replaying:
                    return ctx._replayed(tool_name, call_id, jsonable)
                with ctx._journaled(tool_name, call_id) as outcome:
                    outcome.append(await func(*args, **kwargs))
                return outcome[0]

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            ctx, call_id, jsonable = begin(args, kwargs)
            if ctx is None:
                return func(*args, **kwargs)
            if ctx.replaying:
                return ctx._replayed(tool_name, call_id, jsonable)
            with ctx._journaled(tool_name, call_id) as outcome:
                outcome.append(func(*args, **kwargs))
            return outcome[0]

        return wrapper  # type: ignore[return-value]

    return decorate(fn) if fn is not None else decorate


def _current() -> AgentContext | None:
    """The attempt the caller runs in (see intercept.current), if any."""
    if "pytest_nodeval.agent.intercept" not in sys.modules:
        return None  # no attempt has run in this process yet
    from .intercept import current

    routes = current()
    return routes.owner if routes is not None else None


def run_agent(
    agent: Agent,
    journal: JournalWriter,
    user: SimulatedUser,
    stash: ReplayStash | None,
    *,
    mode: str,
    fakes: dict[str, Any] | None = None,
    limits: Any = None,
    needs_model: bool = False,
    guard: bool = True,
) -> tuple[str | None, str | None]:
    """Run a user's agent; returns (divergence, error). The journal gets session.start/end.

    needs_model: a session with no model call ends in error (a recording of it would replay
    nothing of the agent's). guard: refuse provider requests sent around the journal (off
    for production sessions, which must not fail for it).
    """
    from .intercept import activated

    ctx = AgentContext(journal, user, stash, fakes, limits)
    ctx.routes.guard = guard
    journal.emit(
        "session.start",
        {
            "engine": getattr(agent, "__qualname__", type(agent).__name__),
            "version": __version__,
            "session_id": journal.header.session_id,
            "mode": mode,
        },
    )
    start = time.perf_counter()
    status, reason, divergence, infra, kind = "ok", None, None, False, None
    try:
        with activated(ctx.routes):
            result = agent(ctx)
            if inspect.isawaitable(result):
                result = _run_coroutine(result)
        if isinstance(result, str) and ctx._last_output() is None:
            ctx.output(result)
        if stash is not None:
            stash.check_complete()
    except ReplayStopped as stop:
        status, divergence = "divergence", str(stop.divergence)
    except Exception as exc:  # the agent failed: that is an observation, not a harness crash
        status, reason = "error", f"{type(exc).__name__}: {exc}"
        infra = infrastructure_failure(exc)
    finally:
        ctx.close()
    if stash is not None and stash.stopped is not None and divergence is None:
        # A framework that gathers its tasks' outcomes can turn the stop into something else
        # (LangChain's async batch reads it as a result): the stash remembers it.
        status, divergence, reason = "divergence", str(stash.stopped), None
    if ctx.routes.refusals:  # whatever the agent made of the refused request
        kind, reason = ctx.routes.refusals[0]
        status, divergence, infra = "error", None, kind == "no_key"
    elif status == "ok" and needs_model and not _made_model_call(journal):
        status, kind = "error", "no_model_call"
        reason = (
            "the agent made no model call, so a recording of it would replay nothing of the "
            "agent's; if the case needs no model, say `needs_model: false` in its case.yaml"
        )
    ending = getattr(ctx.user, "ending", None)  # a persona's done, transfer, turn_limit...
    end_session(journal, stash, status, reason, divergence, start, infra, kind, ending)
    return divergence, reason


def _made_model_call(journal: JournalWriter) -> bool:
    return any(event.type == "llm.request" for event in journal.events)


# What the SDKs raise when the provider, not the agent, failed: no or a bad key, the network,
# a timeout, overload or a 5xx after the SDK's own retries.
_SDK_INFRA_ERRORS = frozenset(
    {
        "APIConnectionError",
        "APITimeoutError",
        "AuthenticationError",
        "InternalServerError",
        "RateLimitError",
        "OverloadedError",
        "ServiceUnavailableError",
    }
)
# google-genai has one APIError class per side (ClientError, ServerError) and an HTTP code.
_GOOGLE_INFRA_CODES = frozenset({401, 403, 408, 429})


def infrastructure_failure(exc: BaseException) -> bool:
    """Whether an exception out of an agent is the infrastructure's fault, not the agent's."""
    if getattr(exc, "infrastructure", False):
        return True
    module = type(exc).__module__.split(".")[0]
    names = {cls.__name__ for cls in type(exc).__mro__}
    if module == "google" and "APIError" in names:
        code = getattr(exc, "code", None)
        return isinstance(code, int) and (code >= 500 or code in _GOOGLE_INFRA_CODES)
    if module == "httpx2":  # google-genai lets a refused connection or a timeout through unwrapped
        return "TransportError" in names
    return module in ("anthropic", "openai", "google") and bool(names & _SDK_INFRA_ERRORS)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _run_coroutine(awaitable: Any) -> Any:
    """Await an async agent, even when this thread already runs an event loop (an async test)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(awaitable))
    from concurrent.futures import ThreadPoolExecutor

    context = contextvars.copy_context()  # the agent's context (the current session) goes along
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(context.run, asyncio.run, _awaited(awaitable)).result()


def end_session(
    journal: JournalWriter,
    stash: ReplayStash | None,
    status: str,
    reason: str | None,
    divergence: str | None,
    start: float,
    infra: bool = False,
    kind: str | None = None,
    user_ending: str | None = None,
) -> None:
    usage = {"input_tokens": 0, "output_tokens": 0}
    for event in journal.events:
        if event.type == "llm.response" and event.payload.usage is not None:
            usage["input_tokens"] += event.payload.usage.input_tokens
            usage["output_tokens"] += event.payload.usage.output_tokens
    recorded = stash.recorded_end if stash is not None else None
    duration = recorded.payload.duration_ms if recorded else (time.perf_counter() - start) * 1000
    journal.emit(
        "session.end",
        {
            "status": status,
            "reason": divergence or reason,
            "error_kind": "divergence"
            if divergence
            else (kind or ("provider" if infra else ("agent" if reason else None))),
            "infra": infra,
            "duration_ms": round(duration, 3),
            "usage": usage,
            "turns": sum(1 for e in journal.events if e.type == "io.input"),
            "user_ending": user_ending,
        },
    )
