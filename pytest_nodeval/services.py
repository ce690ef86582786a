"""The outside services of a live attempt: local fakes, started per attempt on demand.

A case points its config at a fake by writing `base_url: fake`; a live or record attempt
then starts that fake on an ephemeral loopback port, scripted by the case's input file,
and the engine talks to it through the real SDK. Replay never starts any: the journal
answers instead.

    provider `base_url: fake`  ->  fakes.llm, scripted by input/llm.yaml
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from typing import Any, Iterator

from .case import Case
from .config import EngineConfig, ProviderSpec
from .errors import CaseFormatError

FAKE = "fake"
FAKE_KEY = "nodeval-fake-key"
# What `base_url: fake` becomes in replay, where nothing is contacted (.invalid never resolves).
REPLAY_URL = "http://fake.nodeval.invalid"


def uses_fake_llm(config: EngineConfig) -> bool:
    return any(p.base_url == FAKE and p.name != "mock" for p in config.providers)


def with_fake_urls(config: EngineConfig, llm_url: str) -> tuple[EngineConfig, dict[str, str]]:
    """The config with `base_url: fake` pointed at llm_url, and the API keys to use there."""
    providers: list[ProviderSpec] = []
    keys: dict[str, str] = {}
    for spec in config.providers:
        if spec.base_url == FAKE and spec.name != "mock":
            suffix = "/v1" if spec.name == "openai" else ""  # where each SDK expects its API
            spec = spec.model_copy(update={"base_url": llm_url + suffix})
            keys[spec.key] = FAKE_KEY
        providers.append(spec)
    return config.model_copy(update={"providers": providers}), keys


@contextmanager
def live_services(case: Case, config: EngineConfig, seed: int | None) -> Iterator[tuple[EngineConfig, dict[str, str]]]:
    """Start the fakes the config points at; yield the config wired to them and their keys."""
    with ExitStack() as stack:
        if not uses_fake_llm(config):
            yield config, {}
            return
        llm = stack.enter_context(_llm_fake(case, seed))
        yield with_fake_urls(config, llm.url)


def _llm_fake(case: Case, seed: int | None) -> Any:
    from fakes._script import ScriptError
    from fakes.llm import LLMFake

    script = case.directory / "input" / "llm.yaml"
    if not script.is_file():
        raise CaseFormatError(f"{script}: missing; a provider with `base_url: fake` is answered by "
                              "fakes.llm, scripted by this file")
    try:
        return LLMFake(script, seed=seed)
    except ScriptError as exc:
        raise CaseFormatError(str(exc)) from None
