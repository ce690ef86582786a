"""`fake` where a URL would go: what it points at in a live attempt and in replay.

A case's config names a local fake by writing `base_url: fake` (a provider),
`composio: {base_url: fake}`, an MCP server's `url: fake` or `web: {fake: true}`. These
functions say whether a config uses a fake and rewrite the URLs once the fake runs
(runner/services.py starts it).
"""

from __future__ import annotations

from .config import COMPOSIO_PREFIX, MCP_PREFIX, EngineConfig, ProviderSpec

FAKE = "fake"
FAKE_KEY = "nodeval-fake-key"
# What `base_url: fake` becomes in replay, where nothing is contacted (.invalid never resolves).
REPLAY_URL = "http://fake.nodeval.invalid"


def is_fake(spec: ProviderSpec) -> bool:
    return spec.base_url == FAKE and spec.name != "mock"


def resolve(spec: ProviderSpec, llm_url: str | None) -> ProviderSpec:
    """A provider spec with `base_url: fake` pointed at the running LLM fake."""
    if not is_fake(spec) or llm_url is None:
        return spec
    suffix = "/v1" if spec.name == "openai" else ""  # where each SDK expects its API
    return spec.model_copy(update={"base_url": llm_url + suffix})


def with_fake_urls(config: EngineConfig, llm_url: str) -> tuple[EngineConfig, dict[str, str]]:
    """The config with `base_url: fake` pointed at llm_url, and the API keys to use there."""
    providers = [resolve(spec, llm_url) for spec in config.providers]
    keys = {spec.key: FAKE_KEY for spec in config.providers if is_fake(spec)}
    return config.model_copy(update={"providers": providers}), keys


def uses_fake_composio(config: EngineConfig | None) -> bool:
    return (
        config is not None
        and config.composio is not None
        and config.composio.base_url == FAKE
        and any(t.name.startswith(COMPOSIO_PREFIX) for t in config.tools)
    )


def uses_fake_mcp(config: EngineConfig | None) -> bool:
    if config is None or config.mcp is None:
        return False
    enabled = {
        t.name.removeprefix(MCP_PREFIX) for t in config.tools if t.name.startswith(MCP_PREFIX)
    }
    return any(s.url == FAKE and s.name in enabled for s in config.mcp.servers)


def uses_fake_web(config: EngineConfig | None) -> bool:
    return (
        config is not None
        and config.web is not None
        and config.web.fake
        and any(t.name == "web" for t in config.tools)
    )
