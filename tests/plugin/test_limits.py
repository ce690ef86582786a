"""nodeval_limits across the processes of a run: one fakes.llm server, two xdist workers.

The fake is started here, outside the run, so it sees every worker's requests and counts
how many it answers at once. Own agents fire several requests at once from threads through
`ctx.anthropic()`, so without a limit the fake sees far more than the limit allows.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import xdist  # noqa: F401  (the pytester runs below use -n)
import yaml

from pytest_nodeval.report.models import RunReport
from pytest_nodeval_fakes.llm import LLMFake

from ..conftest import PROJECT_INI

THREADS = 6
AGENT = f"""
import os
import threading

import pytest

def agent(ctx):
    client = ctx.anthropic(base_url=os.environ["NODEVAL_TEST_LLM_URL"], api_key="sk-test")
    start = threading.Barrier({THREADS})
    answers, errors = [], []

    def ask(i):
        start.wait()  # all at once: only the limit keeps them apart
        try:
            reply = client.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=16,
                messages=[{{"role": "user", "content": f"question {{i}}"}}],
            )
        except Exception as exc:
            errors.append(exc)
        else:
            answers.append(reply.content[0].text)

    for text in ctx.inputs():
        threads = [threading.Thread(target=ask, args=(i,)) for i in range({THREADS})]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]  # what the SDK raised reaches nodeval, as in a single-threaded agent
        ctx.output(" ".join(sorted(answers)))

@pytest.mark.nodeval_case("fan-out")
def test_fan_out(nodeval_attempt):
    observed = nodeval_attempt.run(agent)
    assert observed.output.count("ok") == {THREADS}
"""
SLOW_OK = {
    "respond": {"text": "ok", "delay_s": 0.3, "usage": {"input_tokens": 5, "output_tokens": 1}}
}


@pytest.fixture
def project(nodeval_project: pytest.Pytester) -> pytest.Pytester:
    case_dir = nodeval_project.path / "scenarios" / "fan-out"
    (case_dir / "input").mkdir(parents=True)
    (case_dir / "case.yaml").write_text("id: fan-out\n")
    (case_dir / "assertions.yaml").write_text("[]\n")  # the Python test checks it
    (case_dir / "input" / "inputs.yaml").write_text(
        yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["go"]}})
    )
    (nodeval_project.path / "scenarios" / "test_fan_out.py").write_text(AGENT)
    return nodeval_project


@contextmanager
def _serving(monkeypatch: pytest.MonkeyPatch, rules: list[dict[str, Any]]) -> Iterator[LLMFake]:
    with LLMFake({"rules": rules}) as fake:
        monkeypatch.setenv("NODEVAL_TEST_LLM_URL", fake.url)  # the xdist workers inherit it
        yield fake


def _limits(project: pytest.Pytester, *lines: str) -> None:
    body = "".join(f"    {line}\n" for line in lines)
    project.makeini(PROJECT_INI + ("nodeval_limits =\n" + body if lines else ""))


def _run(project: pytest.Pytester, repeat: int) -> tuple[pytest.RunResult, RunReport]:
    result = project.runpytest(
        "scenarios/test_fan_out.py",
        "--nodeval-mode",
        "live",
        "--repeat",
        str(repeat),
        "-n",
        "2",
        "-p",
        "no:randomly",
    )
    report = RunReport.model_validate_json(
        (project.path / "reports" / "latest" / "report.json").read_bytes()
    )
    return result, report


def test_in_flight_requests_stay_within_the_limit_across_workers(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _serving(monkeypatch, [SLOW_OK]) as fake:
        _limits(project, "anthropic: rpm=60 inflight=4")
        result, report = _run(project, repeat=4)
        assert result.ret == 0, result.stdout.str()
        assert {a.worker for a in report.cases[0].attempts} == {"gw0", "gw1"}
        assert len(fake.requests) == 4 * THREADS
        assert 1 < fake.max_in_flight <= 4
        assert (project.path / "reports" / report.run_id / "_shared" / "limits.sqlite").is_file()

        fake.reset()  # the same run without the limit: the fake sees what the limit held back
        _limits(project)
        result, _ = _run(project, repeat=4)
        assert result.ret == 0
        assert fake.max_in_flight > 4


def test_a_429_burst_is_retried_counted_and_passes(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    burst = {"respond": {"fault": {"kind": "rate_limit", "retry_after_s": 0.05}}, "times": 5}
    _limits(project, "anthropic: rpm=60 inflight=4 retries=6")
    with _serving(monkeypatch, [burst, SLOW_OK]) as fake:
        result, report = _run(project, repeat=2)
    assert result.ret == 0, result.stdout.str()
    assert [r.outcome for r in fake.requests].count("rate_limit") == 5
    attempts = report.cases[0].attempts
    assert all(a.outcome == "passed" for a in attempts)
    assert sum(a.retries for a in attempts) == 5  # every refused try was tried again, once
    assert sum(a.llm_calls for a in attempts) == 2 * THREADS  # a retried call is still one call
    result.stdout.fnmatch_lines(["*5 LLM request(s) retried*"])


def test_a_permanent_503_is_an_infrastructure_error_in_no_pass_rate(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    down = {"respond": {"fault": {"kind": "unavailable", "retry_after_s": 0.01}}}
    _limits(project, "anthropic: inflight=4 retries=2")
    with _serving(monkeypatch, [down]) as fake:
        result, report = _run(project, repeat=2)
    assert result.ret == 7, "infrastructure errors only: their own exit status, not the agent's 1"
    case = report.cases[0]
    assert [a.infra_error for a in case.attempts] == [True, True]
    assert all("ServiceUnavailableError" in (a.reason or "") for a in case.attempts)
    assert (
        case.stats.pass_rate is None and case.stats.failed == 0 and report.suite.pass_rate is None
    )
    assert report.totals.infra_errors == 2 and report.totals.failed == 0
    assert len(fake.requests) == 2 * THREADS * 3  # every call: one try and two retries
    assert [a.retries for a in case.attempts] == [
        THREADS * 2
    ] * 2  # every call retried twice before giving up


def test_a_bad_limits_line_is_a_usage_error_naming_it(project: pytest.Pytester) -> None:
    _limits(project, "anthropic: rpm=fast")
    result = project.runpytest("--nodeval-mode", "live")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    said = (
        "*nodeval_limits (*tox.ini*): rpm in line 'anthropic: rpm=fast' "
        "must be a whole number >= 1, got 'fast'*"
    )
    result.stderr.fnmatch_lines([said])
