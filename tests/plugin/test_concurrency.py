"""--nodeval-concurrency: attempts run ahead in a pool, reported by their own tests as a
serial run would report them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_rerunfailures  # noqa: F401  (the pytester runs below use --reruns)
import xdist  # noqa: F401  (the pytester runs below use -n)
import yaml

from pytest_nodeval.report.models import RunReport
from pytest_nodeval_fakes.llm import LLMFake
from pytest_nodeval_fakes.server import ServedApp

from ..conftest import write_case

VOLATILE = {"wall_ms", "latency_ms", "worker"}


class CountingLLM:
    """One fakes.llm shared by every attempt of a run (and every xdist worker): it answers every
    request with `text` after `delay_s`, and counts the requests it is answering at once."""

    def __init__(self, delay_s: float) -> None:
        self.fake = LLMFake(
            {"rules": [{"when": {}, "respond": {"text": "all fine", "delay_s": delay_s}}]}
        )
        self.now = 0
        self.most = 0
        inner = self.fake.asgi_app()

        async def counting(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return await inner(scope, receive, send)
            self.now += 1  # one event loop serves every request: no lock needed
            self.most = max(self.most, self.now)
            try:
                await inner(scope, receive, send)
            finally:
                self.now -= 1

        self.served = ServedApp(counting, name="counting-llm")


@pytest.fixture
def counting_llm() -> Iterator[CountingLLM]:
    llm = CountingLLM(delay_s=0.3)
    with llm.served:
        yield llm


def write_shared_case(
    root: Path, case_id: str, url: str, *, key_env: str = "NODEVAL_TEST_KEY"
) -> Path:
    """A reference-engine case answered by the shared fake: three user turns, three LLM calls."""
    directory = root / case_id
    (directory / "input").mkdir(parents=True)
    _dump(directory / "case.yaml", {"id": case_id, "name": case_id})
    _dump(
        directory / "input" / "config.yaml",
        {
            "providers": [
                {
                    "name": "anthropic",
                    "model": "claude-test",
                    "base_url": url,
                    "api_key_env": key_env,
                }
            ],
            "system_prompt": "Answer briefly.",
            "tools": [],
        },
    )
    _dump(
        directory / "input" / "inputs.yaml",
        {"user": {"kind": "scripted", "inputs": ["one", "two", "three"]}},
    )
    _dump(directory / "assertions.yaml", [{"kind": "output_contains", "text": "fine"}])
    return directory


def write_fake_case(root: Path, case_id: str, answer: str) -> Path:
    """A case with its own fakes.llm (`base_url: fake`), scripted to answer `answer` three times."""
    directory = write_shared_case(root, case_id, "fake")
    _dump(
        directory / "input" / "llm.yaml", {"schema_version": 1, "responses": [{"text": answer}] * 3}
    )
    return directory


def write_own_case(root: Path, case_id: str, inputs: list[str] | None) -> Path:
    """A case for an own agent: no input/config.yaml; no inputs.yaml when `inputs` is None."""
    directory = root / case_id
    (directory / "input").mkdir(parents=True)
    _dump(directory / "case.yaml", {"id": case_id, "name": case_id})
    _dump(directory / "assertions.yaml", [])  # the Python tests check it
    if inputs is not None:
        _dump(directory / "input" / "inputs.yaml", {"user": {"kind": "scripted", "inputs": inputs}})
    return directory


def _dump(path: Path, data: Any) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _report(project: pytest.Pytester) -> RunReport:
    return RunReport.model_validate_json(
        (project.path / "reports" / "latest" / "report.json").read_bytes()
    )


def _attempts(report: RunReport) -> list[dict[str, Any]]:
    """Every attempt of the report in order, without what differs between any two runs."""
    found = []
    for case in report.cases:
        for attempt in case.attempts:
            data = attempt.model_dump(mode="json")
            for key in VOLATILE:
                data.pop(key)
            found.append(data)
    return found


def _order(result: pytest.RunResult) -> list[str]:
    """The test ids in the order `-v` reported them."""
    return [
        m.group(1)
        for line in result.outlines
        if (m := re.search(r"::\w+\[([\w-]+)\] (PASSED|FAILED|ERROR)", line))
    ]


@pytest.fixture
def project(nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("NODEVAL_TEST_KEY", "test-key")
    return nodeval_project


def test_attempts_are_in_flight_together_at_the_fake(
    project: pytest.Pytester, counting_llm: CountingLLM
) -> None:
    root = project.path / "scenarios"
    for index in range(6):
        write_shared_case(root, f"case-{index}", counting_llm.served.url)
    serial = project.runpytest("--nodeval-mode", "live", "-p", "no:randomly")
    serial.assert_outcomes(passed=6)
    assert counting_llm.most == 1, "without --nodeval-concurrency one attempt at a time"
    counting_llm.most = 0
    pooled = project.runpytest(
        "--nodeval-mode",
        "live",
        "--nodeval-concurrency",
        "3",
        "-p",
        "no:randomly",
        "--nodeval-progress",
        "plain",
        "-o",
        "nodeval_progress_interval=0.1",
    )
    pooled.assert_outcomes(passed=6)
    assert 1 < counting_llm.most <= 3
    in_flight = [
        int(m.group(1))
        for line in pooled.outlines
        if (m := re.search(r"attempts, (\d+) in flight", line))
    ]
    assert max(in_flight) == 3, "the progress line counts the attempts run ahead of their tests"


def test_the_concurrency_comes_from_ini_and_profiles_too(
    project: pytest.Pytester, counting_llm: CountingLLM
) -> None:
    project.makeini(
        "[pytest]\ntestpaths = scenarios\naddopts = -p no:hypothesispytest -p no:randomly\n"
        "nodeval_profiles =\n    release: mode=live concurrency=3\n"
    )
    root = project.path / "scenarios"
    for index in range(6):
        write_shared_case(root, f"case-{index}", counting_llm.served.url)
    project.runpytest("--nodeval-profile", "release").assert_outcomes(passed=6)
    assert 1 < counting_llm.most <= 3


def test_deterministic_replay_runs_inline(project: pytest.Pytester) -> None:
    write_case(
        project.path / "scenarios",
        "answer",
        script=[{"text": "Hello."}],
        inputs=["hi"],
        assertions=[],
    )
    result = project.runpytest("--nodeval-concurrency", "4", "--trace-config")
    result.assert_outcomes(passed=1)
    assert "nodeval-ahead" not in result.stdout.str()
    live = project.runpytest(
        "--nodeval-concurrency", "4", "--nodeval-mode", "live", "--trace-config"
    )
    assert "nodeval-ahead" in live.stdout.str()


def test_a_bad_concurrency_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest("--nodeval-concurrency", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*concurrency from command line must be a positive integer, got 0*"]
    )


def test_reports_come_in_collection_order_with_the_content_of_a_serial_run(
    project: pytest.Pytester,
) -> None:
    root = project.path / "scenarios"
    for index in range(8):
        write_fake_case(root, f"case-{index}", "all fine" if index % 3 else "all broken")
    # An infrastructure error
    write_shared_case(root, "case-nokey", "http://127.0.0.1:9", key_env="NODEVAL_UNSET_KEY")
    serial = project.runpytest("--nodeval-mode", "live", "-v", "-p", "no:randomly")
    serial_report = _report(project)
    pooled = project.runpytest(
        "--nodeval-mode", "live", "--nodeval-concurrency", "4", "-v", "-p", "no:randomly"
    )
    pooled_report = _report(project)
    expected = [
        "case-0",
        "case-1",
        "case-2",
        "case-3",
        "case-4",
        "case-5",
        "case-6",
        "case-7",
        "case-nokey",
    ]
    assert _order(serial) == _order(pooled) == expected
    assert _attempts(pooled_report) == _attempts(serial_report)
    assert [a["outcome"] for a in _attempts(pooled_report)] == [
        "failed",
        "passed",
        "passed",
        "failed",
        "passed",
        "passed",
        "failed",
        "passed",
        "error",
    ]
    nokey = pooled_report.case("case-nokey").attempts[0]
    assert nokey.infra_error and "NODEVAL_UNSET_KEY" in (nokey.reason or "")
    assert pooled.ret == serial.ret == 1


OWN_AGENTS = """
import pytest
from pytest_nodeval import expect

URL = "{url}"


def sync_agent(ctx):
    client = ctx.anthropic(base_url=URL, api_key="k")
    for text in ctx.inputs():
        reply = client.messages.create(
            model="m", max_tokens=50, messages=[{{"role": "user", "content": text}}]
        )
        ctx.output(reply.content[0].text)


async def async_agent(ctx):
    client = ctx.async_anthropic(base_url=URL, api_key="k")
    for text in ctx.inputs():
        reply = await client.messages.create(
            model="m", max_tokens=50, messages=[{{"role": "user", "content": text}}]
        )
        ctx.output(reply.content[0].text)
    await client.close()


def broken_agent(ctx):
    raise ValueError("the agent fell over")


@pytest.mark.nodeval_case("own-sync", agent=sync_agent)
def test_sync(nodeval_attempt):
    expect(nodeval_attempt.run()).output_contains("fine")


@pytest.mark.nodeval_case("own-async", agent=async_agent)
def test_async(nodeval_attempt):
    expect(nodeval_attempt.run(async_agent)).output_contains("fine")


@pytest.mark.nodeval_case("own-noinputs", agent=sync_agent)
def test_no_inputs(nodeval_attempt):
    nodeval_attempt.run()


@pytest.mark.nodeval_case("own-broken", agent=broken_agent)
def test_broken(nodeval_attempt):
    observed = nodeval_attempt.run()
    assert observed.status == "ok", observed.metrics()["reason"]


@pytest.mark.nodeval_case("own-other", agent=sync_agent)
def test_other_agent(nodeval_attempt):
    nodeval_attempt.run(async_agent)
"""


def _own_agent_project(project: pytest.Pytester, url: str) -> None:
    root = project.path / "scenarios"
    for case_id in ("own-sync", "own-async", "own-broken", "own-noinputs", "own-other"):
        write_own_case(root, case_id, None if case_id == "own-noinputs" else ["a", "b", "c"])
    (root / "test_own.py").write_text(OWN_AGENTS.format(url=url))


def test_own_agents_declared_on_the_marker_run_ahead_sync_and_async(
    project: pytest.Pytester, counting_llm: CountingLLM
) -> None:
    _own_agent_project(project, counting_llm.served.url)
    args = (
        "scenarios/test_own.py",
        "--nodeval-mode",
        "live",
        "-p",
        "no:randomly",
        "-k",
        "test_sync or test_async",
    )
    project.runpytest(*args).assert_outcomes(passed=2)
    assert counting_llm.most == 1
    counting_llm.most = 0
    project.runpytest(*args, "--repeat", "3", "--nodeval-concurrency", "6").assert_outcomes(
        passed=6
    )
    assert 1 < counting_llm.most <= 6
    report = _report(project)
    assert {(a.case_id, a.repeat, a.outcome) for c in report.cases for a in c.attempts} == {
        ("own-sync", 1, "passed"),
        ("own-sync", 2, "passed"),
        ("own-sync", 3, "passed"),
        ("own-async", 1, "passed"),
        ("own-async", 2, "passed"),
        ("own-async", 3, "passed"),
    }


def test_a_failure_in_a_pooled_attempt_fails_that_test_only(
    project: pytest.Pytester, counting_llm: CountingLLM
) -> None:
    _own_agent_project(project, counting_llm.served.url)
    serial = project.runpytest(
        "scenarios/test_own.py", "--nodeval-mode", "live", "-p", "no:randomly", "-v"
    )
    serial_report = _report(project)
    pooled = project.runpytest(
        "scenarios/test_own.py",
        "--nodeval-mode",
        "live",
        "-p",
        "no:randomly",
        "-v",
        "--nodeval-concurrency",
        "4",
    )
    pooled_report = _report(project)
    pooled.assert_outcomes(passed=2, failed=3)
    pooled.stdout.fnmatch_lines(
        [
            "*own-noinputs*inputs.yaml: missing; give the agent's inputs there*",
            "*the agent fell over*",
            "*declares agent=sync_agent, but run() was given async_agent*",
        ]
    )
    assert _order(pooled) == _order(serial)
    assert _attempts(pooled_report) == _attempts(serial_report)


def test_exit_first_stops_starting_attempts_and_the_rest_are_not_run(
    project: pytest.Pytester,
) -> None:
    root = project.path / "scenarios"
    for index in range(8):
        write_fake_case(root, f"case-{index}", "all broken" if index == 1 else "all fine")
    result = project.runpytest(
        "--nodeval-mode", "live", "-p", "no:randomly", "--nodeval-concurrency", "3", "-x"
    )
    result.assert_outcomes(passed=1, failed=1)
    report = _report(project)
    assert report.totals.attempts == 8
    assert report.totals.not_run == 6
    started = sorted(p.name for p in (project.path / "reports" / "latest" / "_sessions").iterdir())
    assert len(started) < 8, "attempts beyond the window never started"


def test_with_xdist_each_worker_keeps_several_attempts_in_flight(
    project: pytest.Pytester, counting_llm: CountingLLM
) -> None:
    root = project.path / "scenarios"
    for index in range(12):
        write_shared_case(root, f"case-{index:02d}", counting_llm.served.url)
    result = project.runpytest("--nodeval-mode", "live", "-n", "2", "--nodeval-concurrency", "4")
    result.assert_outcomes(passed=12)
    assert 2 < counting_llm.most <= 8, "two workers running one attempt each would be 2 at most"
    report = _report(project)
    assert {a.worker for c in report.cases for a in c.attempts} == {"gw0", "gw1"}
    assert sorted(c.id for c in report.cases) == [f"case-{i:02d}" for i in range(12)]


RERUN = """
import pytest
from pathlib import Path

TRIES = Path(__file__).with_name("tries.txt")


def counting_agent(ctx):
    for _ in ctx.inputs():
        tries = int(TRIES.read_text()) + 1 if TRIES.exists() else 1
        TRIES.write_text(str(tries))
        ctx.output(f"try {tries}")


@pytest.mark.nodeval_case("own-rerun", agent=counting_agent)
def test_second_try_passes(nodeval_attempt):
    assert nodeval_attempt.run().output == "try 2"
"""


def test_a_rerun_of_a_pooled_attempt_runs_it_again(project: pytest.Pytester) -> None:
    root = project.path / "scenarios"
    write_own_case(root, "own-rerun", ["go"])
    (root / "test_rerun.py").write_text(RERUN)
    result = project.runpytest(
        "scenarios/test_rerun.py",
        "--nodeval-mode",
        "live",
        "--nodeval-concurrency",
        "2",
        "--reruns",
        "1",
    )
    assert result.parseoutcomes() == {"passed": 1, "rerun": 1}
    assert (root / "tries.txt").read_text() == "2"


WITH_FIXTURE = """
import pytest
from pytest_nodeval import expect


def fake_agent(ctx):
    client = ctx.anthropic()  # sent to the test's nodeval_llm_server: no key, no base_url
    for text in ctx.inputs():
        reply = client.messages.create(
            model="m", max_tokens=50, messages=[{"role": "user", "content": text}]
        )
        ctx.output(reply.content[0].text)


@pytest.mark.nodeval_case("own-fake", agent=fake_agent)
def test_with_the_fake(nodeval_llm_server, nodeval_attempt):
    expect(nodeval_attempt.run()).output_contains("fine")
"""


def test_a_declared_agent_that_needs_a_fake_fixture_runs_inside_its_test(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    root = project.path / "scenarios"
    write_own_case(root, "own-fake", ["a"])
    _dump(
        root / "own-fake" / "input" / "llm.yaml",
        {"schema_version": 1, "responses": [{"text": "all fine"}]},
    )
    (root / "test_fixture.py").write_text(WITH_FIXTURE)
    result = project.runpytest(
        "scenarios/test_fixture.py",
        "--nodeval-mode",
        "live",
        "--nodeval-concurrency",
        "2",
        "--repeat",
        "2",
    )
    result.assert_outcomes(passed=2)
