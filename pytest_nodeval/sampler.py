"""Production sampling: the API a deployed agent imports (docs/sampling.md).

    from pytest_nodeval.sampler import Sampler, SamplerSettings, load_config, run_with_sampler

A stable import path for production code; the code lives in `sampling/sampler.py`, the
agent config in `agent/config.py` and the redactors in `journal/redact.py`.
"""

from __future__ import annotations

from .agent.config import load_config
from .journal.redact import chain, pii_redactor, scrub, secrets_redactor
from .sampling.sampler import (
    ENV_SWITCH,
    AgentSession,
    Decision,
    Sampler,
    SamplerSettings,
    SamplerStats,
    decide,
    is_sampled,
    run_agent_with_sampler,
    run_with_sampler,
    sample_point,
    session_failure,
)

__all__ = [
    "ENV_SWITCH",
    "AgentSession",
    "Decision",
    "Sampler",
    "SamplerSettings",
    "SamplerStats",
    "chain",
    "decide",
    "is_sampled",
    "load_config",
    "pii_redactor",
    "run_agent_with_sampler",
    "run_with_sampler",
    "sample_point",
    "scrub",
    "secrets_redactor",
    "session_failure",
]
