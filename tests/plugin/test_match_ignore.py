"""case.yaml's `match_ignore` (issue 27): text a request carries that changes from run to run
(a timestamp in a tool result) does not make replay diverge when the case says so, and still
does when it does not."""

from __future__ import annotations

import pytest
import yaml

AGENT = """
import time
import anthropic
import pytest

def agent(ctx):
    client = anthropic.Anthropic()
    for text in ctx.inputs():
        stamped = f"{text} (asked at {time.strftime('%H:%M:%S')}.{time.time_ns() % 10**9:09d})"
        reply = client.messages.create(model="claude-test", max_tokens=16,
                                       messages=[{"role": "user", "content": stamped}])
        ctx.output(reply.content[0].text)

@pytest.mark.nodeval_case("stamped")
def test_stamped(nodeval_attempt, request):
    if request.config.getoption("--nodeval-mode") == "record":
        request.getfixturevalue("nodeval_llm_server")
    observed = nodeval_attempt.run(agent)
    assert observed.status == "ok", observed.metrics()["reason"]
"""


@pytest.fixture
def project(nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    case = nodeval_project.path / "scenarios" / "stamped"
    (case / "input").mkdir(parents=True)
    (case / "case.yaml").write_text("id: stamped\n")
    (case / "assertions.yaml").write_text("[]\n")
    (case / "input" / "inputs.yaml").write_text(
        yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["what time is it?"]}})
    )
    (case / "input" / "llm.yaml").write_text(yaml.safe_dump({"responses": [{"text": "noon"}]}))
    (nodeval_project.path / "scenarios" / "test_stamped.py").write_text(AGENT)
    nodeval_project.runpytest("--nodeval-mode", "record").assert_outcomes(passed=1)
    return nodeval_project


def test_a_changing_timestamp_diverges_unless_the_case_ignores_it(
    project: pytest.Pytester,
) -> None:
    diverged = project.runpytest()
    diverged.assert_outcomes(failed=1)
    diverged.stdout.fnmatch_lines(["*replay of 'scenarios/stamped' diverged*"])

    case_yaml = project.path / "scenarios" / "stamped" / "case.yaml"
    case_yaml.write_text(yaml.safe_dump({"id": "stamped", "match_ignore": [r"asked at [\d:.]+"]}))
    project.runpytest().assert_outcomes(passed=1)


def test_a_pattern_that_is_no_regular_expression_names_itself(project: pytest.Pytester) -> None:
    case_yaml = project.path / "scenarios" / "stamped" / "case.yaml"
    case_yaml.write_text(yaml.safe_dump({"id": "stamped", "match_ignore": ["(unclosed"]}))
    result = project.runpytest()
    result.stdout.fnmatch_lines(["*match_ignore*'(unclosed' is not a regular expression*"])
