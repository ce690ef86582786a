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


@contextmanager
def live_services(case: Case, specs: list[ProviderSpec], seed: int | None) -> Iterator[str | None]:
    """Start the LLM fake when any of the specs points at it; yield its URL (or None)."""
    with ExitStack() as stack:
        if not any(is_fake(spec) for spec in specs):
            yield None
            return
        yield stack.enter_context(_llm_fake(case, seed)).url


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
