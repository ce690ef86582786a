"""Python scenarios: bind to a case, then assert with the same checks as assertions.yaml."""

import pytest

from pytest_nodeval import expect


@pytest.mark.nodeval_case("disk-usage")
def test_measures_before_it_answers(nodeval_run):
    expect(nodeval_run).sequence("tool.call", "tool.result", "io.output")
    expect(nodeval_run).tool_called("shell", args={"command": {"regex": "^du "}}, times=1)
    expect(nodeval_run).world_file_contains("summary.txt", "KiB")


@pytest.mark.nodeval_case("multi-turn-refund")
def test_confirms_before_refunding(nodeval_events):
    outputs = [e.payload.text for e in nodeval_events if e.type == "io.output"]
    assert "Shall I go ahead?" in outputs[1]
    assert outputs[2].startswith("Done")
