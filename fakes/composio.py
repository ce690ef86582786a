"""A fake of the Composio API for the `composio` SDK (0.30, composio-client 2.0.0rc19).

Routes, each served under both ``/api/v3`` (clients up to 1.35 and the public docs) and
``/api/v3.1`` (every current SDK):

* ``GET /tools`` (``tool_slugs``, ``toolkit_slug``, ``query``, ``limit``),
  ``GET /tools/{slug}``, ``POST /tools/execute/{slug}``
* ``GET /auth_configs``
* ``GET /connected_accounts`` (``user_ids``, ``statuses``, ``toolkit_slugs``,
  ``auth_config_ids``), ``POST /connected_accounts`` (legacy initiate),
  ``POST /connected_accounts/link``, ``GET`` and ``DELETE /connected_accounts/{id}``
* ``GET /link/{token}``: the hosted "Connect Link" page. Visiting a link's
  ``redirect_url`` stands in for the user finishing the OAuth consent: the account becomes
  ``link_completes_as`` and the browser is sent on to the ``callback_url``.

Every API route checks ``x-api-key`` (401 with codes 906 / 801 in Composio's error
envelope, which the SDK raises as ``composio_client.AuthenticationError``). A tool failure
is HTTP 200 with ``successful: false``, as on the real service. Errors use the envelope
``{"error": {"message", "code", "slug", "status", "request_id"}}``; a 429 uses the bare
``{"message": ...}`` body and ``Retry-After``. Where the real error code is unknown the
code in the envelope is made up (documented at each use).

The scenario's catalogue (a case's ``input/composio.yaml``)::

    schema_version: 1
    api_key: test-composio-key        # the key the fake accepts
    require_connected_account: false  # true: executing a tool that needs auth requires an
                                      # ACTIVE account of its toolkit for the user (else 400)
    link_completes_as: ACTIVE         # status a linked account reaches when its link is visited
    tools:
      - slug: GITHUB_STAR_A_REPOSITORY
        toolkit: github
        name: Star a repository
        description: Star a repository for the authenticated user.
        version: "20250101_00"
        input_parameters:
          type: object
          properties: {owner: {type: string}, repo: {type: string}}
          required: [owner, repo]
        results:                      # first match with uses left; default {data: {}}
          - when_args: {repo: missing}
            successful: false
            error: Repository not found
          - http_error: {status: 429, message: Rate limit exceeded}
            times: 1
          - data: {starred: true}
    auth_configs:
      - {id: ac_github, toolkit: github, auth_scheme: OAUTH2}
    connected_accounts:
      - {id: ca_1, user_id: u1, auth_config_id: ac_github, status: ACTIVE}

Runtime switches on `ComposioFake`: `fail_next` (the next N calls, optionally of one
route, fail with a status), `complete_link`, and the recorded `calls`.

Not covered: triggers and webhooks (the SDK subscribes over Pusher websockets), tool router
sessions (``composio.create``), toolkits, auth config creation, file upload/download,
proxy execution, the ``text`` (natural language) execution mode, and pagination cursors.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ._script import ScriptSource, load_script

if TYPE_CHECKING:
    from .server import ServedApp

__all__ = [
    "ApiErrorSpec",
    "AuthConfigSpec",
    "ComposioCatalogue",
    "ComposioFake",
    "ConnectedAccountSpec",
    "ExecutionResult",
    "RecordedComposioCall",
    "ToolSpec",
]

AccountStatus = Literal[
    "INITIALIZING", "INITIATED", "ACTIVE", "FAILED", "EXPIRED", "INACTIVE", "REVOKED"
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ApiErrorSpec(_Model):
    status: int = Field(ge=400, le=599)
    """HTTP status; the SDK maps it to its exception class (401 AuthenticationError, …)."""
    message: str = "Request failed (fakes.composio)"
    code: int = 0
    """Composio's numeric error code in the envelope (e.g. 1803: no connected account)."""
    slug: str | None = None
    retry_after_s: int | None = Field(default=None, ge=0)
    """Sent as `Retry-After` (a 429 is retried by the SDK for reads only)."""


class ExecutionResult(_Model):
    when_args: dict[str, Any] | None = None
    """Used only when the call's arguments contain these keys with these values."""
    times: int | None = Field(default=None, ge=1)
    """Maximum uses (omit for unlimited)."""
    data: dict[str, Any] = {}
    error: str | None = None
    successful: bool | None = None
    """Defaults to `error is None`."""
    http_error: ApiErrorSpec | None = None
    """Fail the HTTP call itself instead of returning a tool result."""

    @model_validator(mode="after")
    def _one_kind(self) -> ExecutionResult:
        if self.http_error is not None and (self.data or self.error or self.successful is not None):
            raise ValueError("`http_error` cannot be combined with `data`, `error` or `successful`")
        return self


class ToolSpec(_Model):
    slug: str
    toolkit: str
    """Toolkit slug, e.g. ``github`` (the SDK needs it for version lookup)."""
    name: str | None = None
    description: str = ""
    version: str = "20250101_00"
    input_parameters: dict[str, Any] = {"type": "object", "properties": {}}
    output_parameters: dict[str, Any] = {"type": "object", "properties": {}}
    no_auth: bool = False
    """True: executes without a connected account even when `require_connected_account`."""
    scopes: list[str] = []
    tags: list[str] = []
    results: list[ExecutionResult] = []
    """Scripted outcomes of `execute`; the first matching one with uses left is used."""


class AuthConfigSpec(_Model):
    id: str
    toolkit: str
    auth_scheme: str = "OAUTH2"
    name: str | None = None


class ConnectedAccountSpec(_Model):
    id: str
    user_id: str
    auth_config_id: str
    status: AccountStatus = "ACTIVE"


class ComposioCatalogue(_Model):
    schema_version: Literal[1] = 1
    api_key: str = "test-composio-key"
    """The only key the fake accepts in `x-api-key`."""
    require_connected_account: bool = False
    link_completes_as: AccountStatus = "ACTIVE"
    tools: list[ToolSpec] = []
    auth_configs: list[AuthConfigSpec] = []
    connected_accounts: list[ConnectedAccountSpec] = []

    @model_validator(mode="after")
    def _references_resolve(self) -> ComposioCatalogue:
        known = {c.id for c in self.auth_configs}
        for i, account in enumerate(self.connected_accounts):
            if account.auth_config_id not in known:
                raise ValueError(
                    f"connected_accounts.{i}.auth_config_id: {account.auth_config_id!r} is not "
                    f"one of the auth_configs ids {sorted(known)}"
                )
        return self

    @classmethod
    def load(cls, source: ScriptSource) -> ComposioCatalogue:
        """From a YAML path, a mapping or a model; raises `ScriptError` naming the field."""
        return load_script(cls, source, what="Composio catalogue")


@dataclass(frozen=True, slots=True)
class RecordedComposioCall:
    """One HTTP call the fake received."""

    method: str
    path: str
    """Path after the API prefix, e.g. ``/tools/execute/GITHUB_STAR_A_REPOSITORY``."""
    prefix: str
    """``/api/v3``, ``/api/v3.1`` or ``""`` (the link page)."""
    query: dict[str, str]
    body: Any
    status: int


@dataclass(frozen=True, slots=True)
class _InjectedFailure:
    error: ApiErrorSpec
    path_contains: str | None


class ComposioFake:
    """The Composio fake: state (accounts, rule uses), recorded calls, and the served app."""

    def __init__(
        self, catalogue: ScriptSource | None = None, *, api_key: str | None = None
    ) -> None:
        self.catalogue = ComposioCatalogue.load(catalogue if catalogue is not None else {})
        self.api_key = api_key or self.catalogue.api_key
        self.calls: list[RecordedComposioCall] = []
        self.accounts: dict[str, dict[str, Any]] = {}
        """Connected accounts by id, as the API returns them (mutated by link/delete)."""
        self._lock = threading.Lock()
        self._result_uses: dict[tuple[str, int], int] = {}
        self._failures: list[_InjectedFailure] = []
        self._links: dict[str, tuple[str, str | None]] = {}
        """Link token -> (connected account id, callback URL)."""
        self._counter = 0
        self._served: ServedApp | None = None
        for spec in self.catalogue.connected_accounts:
            self._add_account(spec.id, spec.user_id, spec.auth_config_id, spec.status)

    # ---- lifecycle ----

    @property
    def url(self) -> str:
        """Pass as ``Composio(base_url=fake.url, ...)``."""
        if self._served is None:
            raise RuntimeError("ComposioFake is not started; use start() or a with block")
        return self._served.url

    def start(self) -> ComposioFake:
        from ._composio_app import build_app
        from .server import ServedApp

        self._served = ServedApp(build_app(self), name="fake-composio").start()
        return self

    def stop(self) -> None:
        if self._served is not None:
            self._served.stop()
            self._served = None

    def __enter__(self) -> ComposioFake:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ---- runtime switches and views ----

    def fail_next(
        self,
        status: int,
        message: str | None = None,
        *,
        times: int = 1,
        path_contains: str | None = None,
        code: int = 0,
        retry_after_s: int | None = None,
    ) -> None:
        """Make the next `times` authenticated calls (whose path contains `path_contains`,
        e.g. ``"/tools/execute/"``) fail with `status` in Composio's error shape."""
        spec = ApiErrorSpec(
            status=status,
            message=message or f"Injected failure {status} (fakes.composio)",
            code=code,
            retry_after_s=retry_after_s,
        )
        with self._lock:
            self._failures.extend([_InjectedFailure(spec, path_contains)] * times)

    def complete_link(self, account_id: str, status: AccountStatus | None = None) -> None:
        """What visiting the link's `redirect_url` does: move the account to `status`."""
        self.set_account_status(account_id, status or self.catalogue.link_completes_as)

    def set_account_status(self, account_id: str, status: AccountStatus) -> None:
        with self._lock:
            account = self.accounts[account_id]
            account["status"] = status
            account["state"]["val"]["status"] = status

    @property
    def executions(self) -> list[RecordedComposioCall]:
        """The recorded `POST /tools/execute/{slug}` calls."""
        return [c for c in self.calls if c.path.startswith("/tools/execute/")]

    # ---- used by the app ----

    def _take_failure(self, path: str) -> ApiErrorSpec | None:
        with self._lock:
            for i, failure in enumerate(self._failures):
                if failure.path_contains is None or failure.path_contains in path:
                    return self._failures.pop(i).error
        return None

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._counter += 1
            return f"{prefix}{self._counter:04d}"

    def _register_link(self, account_id: str, callback_url: str | None) -> str:
        token = self._next_id("lt_fake_")
        with self._lock:
            self._links[token] = (account_id, callback_url)
        return token

    def _tool(self, slug: str) -> ToolSpec | None:
        wanted = slug.upper()
        return next((t for t in self.catalogue.tools if t.slug.upper() == wanted), None)

    def _auth_config(self, config_id: str) -> AuthConfigSpec | None:
        return next((c for c in self.catalogue.auth_configs if c.id == config_id), None)

    def _add_account(
        self, account_id: str, user_id: str, auth_config_id: str, status: str
    ) -> dict[str, Any]:
        config = self._auth_config(auth_config_id)
        if config is None:  # callers check first, so the API answers 404 rather than this
            raise KeyError(f"unknown auth config {auth_config_id!r}")
        account = connected_account_json(account_id, user_id, config, status)
        with self._lock:
            self.accounts[account_id] = account
        return account

    def _pick_result(self, tool: ToolSpec, arguments: Mapping[str, Any]) -> ExecutionResult:
        with self._lock:
            for i, result in enumerate(tool.results):
                used = self._result_uses.get((tool.slug, i), 0)
                if result.times is not None and used >= result.times:
                    continue
                if _args_match(result.when_args, arguments):
                    self._result_uses[(tool.slug, i)] = used + 1
                    return result
        return ExecutionResult()


def _args_match(expected: Mapping[str, Any] | None, arguments: Mapping[str, Any]) -> bool:
    return expected is None or all(
        k in arguments and arguments[k] == v for k, v in expected.items()
    )


def tool_json(tool: ToolSpec) -> dict[str, Any]:
    """A tool as `GET /tools` lists it (fields the SDK reads, plus the common ones)."""
    name = tool.name or tool.slug.replace("_", " ").title()
    toolkit = {"slug": tool.toolkit, "name": tool.toolkit.title(), "logo": ""}
    return {
        "slug": tool.slug,
        "name": name,
        "description": tool.description,
        "human_description": tool.description,
        "input_parameters": tool.input_parameters,
        "output_parameters": tool.output_parameters,
        "toolkit": toolkit,
        "version": tool.version,
        "available_versions": [tool.version],
        "deprecated": {
            "available_versions": [tool.version],
            "displayName": name,
            "is_deprecated": False,
            "toolkit": {"logo": ""},
            "version": tool.version,
        },
        "is_deprecated": False,
        "no_auth": tool.no_auth,
        "scopes": tool.scopes,
        "scope_requirements": None,
        "tags": tool.tags,
    }


def connected_account_json(
    account_id: str, user_id: str, config: AuthConfigSpec, status: str
) -> dict[str, Any]:
    stamp = "2026-01-01T00:00:00.000Z"
    return {
        "id": account_id,
        "status": status,
        "status_reason": None,
        "user_id": user_id,
        "alias": None,
        "word_id": None,
        "toolkit": {"slug": config.toolkit},
        "auth_config": {
            "id": config.id,
            "auth_scheme": config.auth_scheme,
            "is_composio_managed": True,
            "is_disabled": False,
        },
        "created_at": stamp,
        "updated_at": stamp,
        "data": {},
        "params": {},
        "is_disabled": False,
        "state": {"authScheme": config.auth_scheme, "val": {"status": status}},
        "test_request_endpoint": None,
    }
