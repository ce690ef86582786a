"""report.html from a real pytest run, and `nodeval report` rendering it again."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_nodeval.cli import main

from ..conftest import write_case
from .pagetools import parse

ANSWER = [{"text": "Hello <b>there</b>."}]


@pytest.fixture
def run_dir(nodeval_project: pytest.Pytester) -> Path:
    root = nodeval_project.path / "scenarios"
    write_case(
        root,
        "hello",
        script=ANSWER,
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "hello"}],
        case={"tags": ["pr"]},
    )
    write_case(
        root,
        "rude",
        script=ANSWER,
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "bye"}],
    )
    result = nodeval_project.runpytest("--repeat", "2")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*nodeval report: reports/*/report.json, report.html*"])
    return (nodeval_project.path / "reports" / "latest").resolve()


def test_a_run_writes_report_html_beside_report_json(run_dir: Path) -> None:
    page = parse((run_dir / "report.html").read_text())
    data = page.data()
    assert [c["id"] for c in data["cases"]] == ["hello", "rude"]
    assert data["banner"]["level"] == "fail"
    timeline = next(t for t in page.timelines().values() if "rude" in t["nodeid"])
    failed = [a for a in timeline["assertions"] if a["status"] == "failed"]
    output = next(e for e in timeline["events"] if e["type"] == "io.output")
    assert failed[0]["seqs"] == [output["seq"]]
    assert dict(output["fields"])["text"] == "Hello <b>there</b>."
    # The replay matches its golden journal
    assert timeline["diff"]["same"] == timeline["diff"]["total"]


def test_the_run_history_feeds_the_trend(run_dir: Path) -> None:
    trend = parse((run_dir / "report.html").read_text()).data()["cases"][0]["trend"]
    assert [point[2:] for point in trend] == [[run_dir.name, True]]


def test_nodeval_report_renders_it_again(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (run_dir / "report.html").unlink()
    monkeypatch.chdir(run_dir.parent.parent)
    assert main(["report", str(run_dir)]) == 0
    assert capsys.readouterr().out == f"wrote {run_dir / 'report.html'}\n"
    timeline = next(iter(parse((run_dir / "report.html").read_text()).timelines().values()))
    assert timeline["diff"] is not None  # the golden journals were found from the current directory


def test_nodeval_report_finds_the_project_from_the_run_directory(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["report", str(run_dir)]) == 0
    timeline = next(iter(parse((run_dir / "report.html").read_text()).timelines().values()))
    assert timeline["diff"] is not None and timeline["golden_note"] is None


def test_nodeval_report_says_when_there_is_no_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(tmp_path)]) == 4
    assert (
        capsys.readouterr().err
        == f"nodeval report: {tmp_path}: not a run directory (no report.json)\n"
    )


def test_a_broken_page_does_not_cost_the_run(
    nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pytest_nodeval.report.html

    def broken(*args: object, **kwargs: object) -> Path:
        raise ValueError("template exploded")

    monkeypatch.setattr(pytest_nodeval.report.html, "write_html", broken)
    write_case(
        nodeval_project.path / "scenarios",
        "hello",
        script=ANSWER,
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "hello"}],
    )
    result = nodeval_project.runpytest()
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["*nodeval: could not write *report.html: ValueError: template exploded"]
    )
    assert (nodeval_project.path / "reports" / "latest" / "report.json").is_file()
