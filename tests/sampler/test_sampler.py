"""The production sampler: decisions, redaction, capture off the hot path, failures swallowed."""

from __future__ import annotations

import errno
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_nodeval.agent.config import EngineConfig
from pytest_nodeval.errors import ConfigError
from pytest_nodeval.journal.reader import read_journal
from pytest_nodeval.sampler import (
    Sampler,
    SamplerSettings,
    is_sampled,
    run_agent_with_sampler,
    run_with_sampler,
    sample_point,
)
from pytest_nodeval.sampling.store import SampleInfo, list_samples

from .conftest import (
    ANSWERS,
    DISK_USAGE,
    EMAIL,
    SECRET_INPUT,
    assert_no_secret_in,
    files_under,
    mock_config,
)

FAILS_ON_REFUND = [
    {"when": {"input_contains": "refund"}, "error": "upstream model overloaded"},
    *ANSWERS,
]


def _candidate(sample_dir: Path) -> Any:
    return read_journal(sample_dir / "journal").events[-1]


def _samples_by_session(out_dir: Path) -> dict[str, Path]:
    return {s.info.session_id: s.path for s in list_samples(out_dir) if s.info is not None}


# -- the "done when" ------------------------------------------------------------------


def test_rate_failures_and_redaction_over_many_sessions(
    tmp_path: Path, make_sampler: Callable[..., Sampler]
) -> None:
    # Sessions here take a millisecond, far faster than real ones: let the queue hold them all.
    sampler = make_sampler(rate=0.1, failure_capture=True, queue_size=1000)
    config = mock_config(FAILS_ON_REFUND)
    failed, succeeded = set(), set()
    for index in range(400):
        session_id = f"prod-{index:04d}"
        wants_refund = index % 8 == 0
        text = SECRET_INPUT + (" Please refund my order." if wants_refund else " What is my plan?")
        result = run_with_sampler(config, [text], sampler, session_id=session_id)
        (failed if result.status != "ok" else succeeded).add(session_id)
    assert sampler.flush(timeout=60)

    captured = _samples_by_session(tmp_path / "samples")
    assert len(failed) == 50
    assert failed <= set(captured), "every failed session is captured"
    sampled = set(captured) - failed
    assert sampled == {s for s in succeeded if is_sampled(s, 0.1)}, (
        "the decision is the session id's"
    )
    assert abs(len(sampled) / len(succeeded) - 0.1) < 0.04
    for session_id, directory in captured.items():
        candidate = _candidate(directory).payload
        if session_id in failed:
            assert candidate.reason == "failed" and "upstream model overloaded" in candidate.error
        else:
            assert candidate.reason == "sampled" and candidate.error is None
    assert_no_secret_in(tmp_path)
    assert sampler.stats.observed == 400 and sampler.stats.written == len(captured)


@pytest.mark.parametrize("breakage", ["a file where out_dir should be", "disk full", "size cap"])
def test_a_broken_out_dir_leaves_the_session_alone_and_logs_once(
    tmp_path: Path,
    make_sampler: Callable[..., Sampler],
    sampler_warnings: Callable[[], list[Any]],
    monkeypatch: pytest.MonkeyPatch,
    breakage: str,
) -> None:
    config = mock_config(ANSWERS)
    expected = run_with_sampler(config, [SECRET_INPUT], None, session_id="s-1")
    blocker = tmp_path / "blocker"
    blocker.write_text("a regular file")
    if breakage == "a file where out_dir should be":
        sampler, hint = make_sampler(rate=1.0, out_dir=blocker / "samples"), "writable directory"
    elif breakage == "disk full":

        def no_space(path: Path, text: str) -> None:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))

        monkeypatch.setattr("pytest_nodeval.sampling.store.write_atomic", no_space)
        sampler, hint = make_sampler(rate=1.0), "No space left on device"
    else:
        sampler, hint = make_sampler(rate=1.0, max_bytes=200), "max_bytes=200"

    result = run_with_sampler(config, [SECRET_INPUT], sampler, session_id="s-1")
    assert sampler.flush(timeout=10)

    assert _outcome(result) == _outcome(expected) and result.status == "ok"
    [record] = sampler_warnings()
    assert "session s-1 was not captured" in record.getMessage() and hint in record.getMessage()
    samples_dir = tmp_path / "samples"
    assert (list(samples_dir.iterdir()) if samples_dir.is_dir() else []) == [], (
        "no sample, no staging leftovers"
    )


# -- the decision -------------------------------------------------------------------------------


def test_the_decision_is_reproducible_and_uniform() -> None:
    assert sample_point("abc") == sample_point("abc")
    assert 0 <= sample_point("abc") < 1
    points = [sample_point(f"session-{i}") for i in range(20000)]
    assert abs(sum(p < 0.1 for p in points) / len(points) - 0.1) < 0.01
    assert not is_sampled("anything", 0.0) and is_sampled("anything", 1.0)


def test_off_unless_active_in_code_and_enabled_in_the_environment(tmp_path: Path) -> None:
    events = _finished_session_events()

    def sampler(environ: dict[str, str], active: bool = True) -> Sampler:
        return Sampler(SamplerSettings(active=active, rate=1.0, out_dir=tmp_path), environ=environ)

    assert sampler({"NODEVAL_SAMPLER": "1"}, active=False).observe(events) is None
    assert sampler({}).observe(events) is None
    assert sampler({"NODEVAL_SAMPLER": "0"}).observe(events) is None
    on = sampler({"NODEVAL_SAMPLER": "on"})
    decision = on.observe(events)
    assert decision is not None and decision.reason == "sampled"
    on.close()
    assert len(list_samples(tmp_path)) == 1


def test_an_unknown_switch_value_keeps_it_off_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sampler_warnings: Callable[[], list[Any]]
) -> None:
    monkeypatch.setenv("NODEVAL_SAMPLER", "maybe")
    sampler = Sampler(SamplerSettings(active=True, out_dir=tmp_path))
    assert not sampler.enabled
    [record] = sampler_warnings()
    assert "NODEVAL_SAMPLER='maybe' is not one of" in record.getMessage()


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("rate", 1.5, "rate must be a number from 0 to 1, got 1.5"),
        ("max_bytes", 0, "max_bytes must be a positive number of bytes, got 0"),
        ("queue_size", 0, "queue_size must be a positive integer, got 0"),
        ("redactors", ("not a function",), "redactors must be callables"),
    ],
)
def test_bad_settings_name_the_setting_and_the_value(
    setting: str, value: Any, message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SamplerSettings(**{setting: value})


# -- what a sample holds -------------------------------------------------------------------------


def test_a_sample_is_a_case_shaped_journal_that_says_why_it_was_kept(
    tmp_path: Path, make_sampler: Callable[..., Sampler]
) -> None:
    sampler = make_sampler(rate=1.0)
    config = mock_config(DISK_USAGE, tools=["shell"])
    run_with_sampler(config, ["How big is the workspace?"], sampler, session_id="layout-1")
    assert sampler.flush(timeout=10)
    [stored] = list_samples(tmp_path / "samples")

    assert {p.relative_to(stored.path).as_posix() for p in files_under(stored.path)} == {
        "sample.json",
        "journal/header.json",
        "journal/events.jsonl",
        "input/config.yaml",
    }
    journal = read_journal(stored.path / "journal")
    assert journal.header.source == "sample" and journal.header.session_id == "layout-1"
    assert journal.header.redaction == ["secrets", "pii"]
    assert journal.problems == []
    types = [e.type for e in journal.events]
    assert types[-2:] == ["session.end", "eval.candidate"]
    assert [e.seq for e in journal.events] == list(range(1, len(types) + 1))
    assert (
        EngineConfig.model_validate(yaml.safe_load((stored.path / "input/config.yaml").read_text()))
        == config
    )
    info = SampleInfo.model_validate_json((stored.path / "sample.json").read_text())
    assert (info.reason, info.status, info.events, info.error) == (
        "sampled",
        "ok",
        len(types),
        None,
    )
    assert stored.path.name.endswith("-layout-1")


def test_user_redactors_run_after_the_default_one(
    tmp_path: Path, make_sampler: Callable[..., Sampler]
) -> None:
    def customer_names(event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
        return json.loads(json.dumps(payload).replace("Zebulon", "[CUSTOMER]"))

    sampler = make_sampler(rate=1.0, redactors=(customer_names,))
    run_with_sampler(mock_config(ANSWERS), [f"I am Zebulon, {EMAIL}"], sampler, session_id="r-1")
    assert sampler.flush(timeout=10)
    [stored] = list_samples(tmp_path / "samples")
    events = (stored.path / "journal/events.jsonl").read_text()
    assert "I am [CUSTOMER], [REDACTED]" in events and "Zebulon" not in events
    assert read_journal(stored.path / "journal").header.redaction == [
        "secrets",
        "pii",
        "customer_names",
    ]


def test_a_failing_redactor_drops_the_sample_without_quoting_it(
    tmp_path: Path, make_sampler: Callable[..., Sampler], sampler_warnings: Callable[[], list[Any]]
) -> None:
    def broken(event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
        raise ValueError(f"cannot handle {payload}")

    sampler = make_sampler(rate=1.0, redactors=(broken,))
    result = run_with_sampler(mock_config(ANSWERS), [SECRET_INPUT], sampler, session_id="r-2")
    assert sampler.flush(timeout=10)
    assert result.status == "ok"
    [record] = sampler_warnings()
    assert "preparing the sample failed with ValueError" in record.getMessage()
    assert EMAIL not in record.getMessage()
    assert not (tmp_path / "samples").exists() or files_under(tmp_path / "samples") == []


# -- failures of the session itself ---------------------------------------------------------------


def test_a_session_that_hits_a_limit_is_a_failure(
    tmp_path: Path, make_sampler: Callable[..., Sampler]
) -> None:
    looping = [{"tool_calls": [{"name": "shell", "args": {"command": "true"}}]}] * 3
    sampler = make_sampler(rate=0.0)
    result = run_with_sampler(
        mock_config(looping, tools=["shell"], max_turns=2), ["Loop"], sampler, session_id="lim"
    )
    assert sampler.flush(timeout=10)
    assert result.status == "limit"
    candidate = _candidate(_samples_by_session(tmp_path / "samples")["lim"]).payload
    assert candidate.reason == "failed" and "max_turns (2) reached" in candidate.error


def test_an_exception_reaches_the_caller_unchanged_and_is_captured(
    tmp_path: Path, make_sampler: Callable[..., Sampler]
) -> None:
    class CrashingUser:
        def next_input(self, last_output: str | None) -> Any:
            raise RuntimeError(f"session store unavailable for {EMAIL}")

        def answer(self, call_id: str, question: str) -> Any:
            raise AssertionError("not asked")

    sampler = make_sampler(rate=0.0)
    with pytest.raises(RuntimeError, match="session store unavailable"):
        run_with_sampler(mock_config(ANSWERS), CrashingUser(), sampler, session_id="crash")  # type: ignore[arg-type]
    assert sampler.flush(timeout=10)
    candidate = _candidate(_samples_by_session(tmp_path / "samples")["crash"]).payload
    assert candidate.reason == "failed"
    assert candidate.error == "RuntimeError: session store unavailable for [REDACTED]"


def test_a_users_own_agent_is_sampled_too(
    tmp_path: Path, make_sampler: Callable[..., Sampler]
) -> None:
    def agent(ctx: Any) -> None:
        for text in ctx.inputs():
            raise ValueError(f"cannot parse {text!r}")

    sampler = make_sampler(rate=0.0)
    session = run_agent_with_sampler(agent, [SECRET_INPUT], sampler, session_id="agent-1")
    assert sampler.flush(timeout=10)
    assert session.status == "error" and "cannot parse" in (session.error or "")
    stored = _samples_by_session(tmp_path / "samples")["agent-1"]
    assert _candidate(stored).payload.reason == "failed"
    assert not (stored / "input" / "config.yaml").exists()
    assert_no_secret_in(tmp_path)


# -- off the hot path ------------------------------------------------------------------------------


def test_a_full_queue_drops_the_session_and_never_blocks_production(
    tmp_path: Path, make_sampler: Callable[..., Sampler], sampler_warnings: Callable[[], list[Any]]
) -> None:
    writing, release = threading.Event(), threading.Event()

    def slow(event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
        writing.set()
        release.wait(10)
        return payload

    sampler = make_sampler(rate=1.0, queue_size=2, redactors=(slow,))
    config = mock_config(ANSWERS)
    run_with_sampler(config, ["one"], sampler, session_id="q-1")
    assert writing.wait(10)  # the writer is now stuck on q-1
    run_with_sampler(config, ["two"], sampler, session_id="q-2")
    result = run_with_sampler(config, ["three"], sampler, session_id="q-3")
    assert result.status == "ok"  # returned while the writer is still blocked
    [record] = sampler_warnings()
    assert "capture queue full" in record.getMessage() and "q-3" in record.getMessage()
    release.set()
    assert sampler.flush(timeout=10)
    assert set(_samples_by_session(tmp_path / "samples")) == {"q-1", "q-2"}
    assert sampler.stats.dropped == 1


def test_the_oldest_samples_are_evicted_first(
    tmp_path: Path, make_sampler: Callable[..., Sampler]
) -> None:
    config = mock_config(ANSWERS)
    probe = make_sampler(rate=1.0, out_dir=tmp_path / "probe")
    run_with_sampler(config, ["hello"], probe, session_id="evict-0")
    assert probe.flush(timeout=10)
    [one] = list_samples(tmp_path / "probe")
    cap = int(one.size * 2.5)

    sampler = make_sampler(rate=1.0, max_bytes=cap)
    for index in range(1, 6):
        run_with_sampler(config, ["hello"], sampler, session_id=f"evict-{index}")
        assert sampler.flush(timeout=10)
    kept = list_samples(tmp_path / "samples")
    assert [s.info.session_id for s in kept if s.info] == ["evict-4", "evict-5"]
    assert sum(s.size for s in kept) <= cap


def _outcome(result: Any) -> tuple[Any, ...]:
    # Not `usage`: the mock estimates input tokens from the request, which includes the
    # remaining time budget, so two identical sessions may differ by a token.
    return (
        result.status,
        result.reason,
        result.error_kind,
        result.infra,
        result.output,
        result.turns,
    )


def _finished_session_events() -> list[Any]:
    from pytest_nodeval.journal.writer import JournalWriter
    from pytest_nodeval.runner.session import journal_header

    writer = JournalWriter(None, journal_header("live", None))
    writer.emit(
        "session.start", {"engine": "e", "version": "1", "session_id": writer.header.session_id}
    )
    writer.emit("io.input", {"text": "hi"})
    writer.emit("session.end", {"status": "ok"})
    return writer.events
