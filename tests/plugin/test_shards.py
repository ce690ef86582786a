"""Shards and `nodeval merge`: each case whole on one shard, the merged run equal to the
unsharded one, the refusals, the Markdown summary and the JUnit properties."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import xdist  # noqa: F401  (the pytester runs below use -n)

from pytest_nodeval.cli import main as nodeval
from pytest_nodeval.report.models import RunReport

from ..conftest import write_case

CASES = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
# A Python check bound to one case, a failing attempt (repeat 2 of foxtrot), and plain tests.
TESTS = """
import pytest

@pytest.mark.nodeval_case("bravo")
def test_bravo_answers(nodeval_run):
    assert "Done" in nodeval_run.output

@pytest.mark.nodeval_case("foxtrot")
def test_foxtrot(nodeval_run, request):
    repeat = request.node.callspec.params["nodeval_case"].repeat
    assert repeat != 2, "foxtrot r2 gave a wrong answer"

@pytest.mark.parametrize("n", range(5))
def test_plain(n):
    assert n >= 0
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cases")
    for case_id in CASES:
        write_case(
            root,
            case_id,
            script=[{"text": f"Done: {case_id}."}],
            inputs=["go"],
            assertions=[],
            case={"min_pass_rate": 0.5} if case_id == "foxtrot" else None,
        )
    return root


@pytest.fixture
def project(nodeval_project: pytest.Pytester, recorded: Path) -> pytest.Pytester:
    import shutil

    shutil.copytree(recorded, nodeval_project.path / "scenarios", dirs_exist_ok=True)
    (nodeval_project.path / "scenarios" / "test_more.py").write_text(TESTS)
    return nodeval_project


def _report(path: Path) -> RunReport:
    return RunReport.model_validate_json((path / "report.json").read_bytes())


def _shards(project: pytest.Pytester, total: int, *args: str) -> list[Path]:
    dirs = []
    for k in range(1, total + 1):
        result = project.runpytest(
            "--repeat",
            "3",
            f"--nodeval-shard={k}/{total}",
            f"--nodeval-report-dir=shards/{k}",
            *args,
        )
        assert result.ret in (0, 1), result.stdout.str()
        dirs.append(next((project.path / "shards" / str(k)).glob("*/report.json")).parent)
    return dirs


def comparable(report: RunReport) -> dict[str, Any]:
    """What a merged run must share with the unsharded one (times and workers aside)."""
    data = report.model_dump(
        mode="json",
        include={"cases", "totals", "suite", "summary", "exit_status", "mode", "repeat"},
    )
    data["summary"].pop("duration_s")
    for case in data["cases"]:
        for attempt in case["attempts"]:
            for key in ("wall_ms", "worker"):
                attempt.pop(key)
    return data


def test_four_shards_merged_equal_the_unsharded_run(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = project.runpytest("--repeat", "3", "--nodeval-report-dir=whole")
    dirs = _shards(project, 4)
    reports = [_report(d) for d in dirs]
    # Every case whole on one shard, all of its repeats and checks; plain tests split too.
    owners = {c.id: r.shard.index for r in reports for c in r.cases}  # type: ignore[union-attr]
    assert sorted(owners) == CASES and len(set(owners.values())) > 1
    assert all(r.shard is not None and r.shard.cases == owners for r in reports)
    assert {len(c.attempts) for r in reports for c in r.cases} == {3}
    bravo = next(c for r in reports for c in r.cases if c.id == "bravo")
    assert all(len(a.checks) == 2 for a in bravo.attempts)
    assert sum(r.shard.tests for r in reports) == 6 * 3 + 2 * 3 + 5  # type: ignore[union-attr]

    status = nodeval(["merge", *map(str, dirs), "--to", str(project.path / "merged")])
    merged = _report(project.path / "merged")
    unsharded = _report(next((project.path / "whole").glob("*/report.json")).parent)
    assert comparable(merged) == comparable(unsharded)
    # foxtrot tolerates its failed r2 (min_pass_rate 0.5): the run passes, as the whole one did.
    assert status == whole.ret == merged.exit_status == 0
    assert merged.merged_from == [r.run_id for r in reports] and merged.shard is None
    # The journals the report points to came along.
    journals = [a.journal for c in merged.cases for a in c.attempts if a.journal]
    assert journals and all((project.path / "merged" / j).exists() for j in journals)
    assert (project.path / "merged" / "report.html").is_file()
    assert "foxtrot" in (project.path / "merged" / "summary.txt").read_text()
    assert "merged into" in capsys.readouterr().out


def _merge_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert nodeval(["merge", *args]) == 4
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_a_missing_shard_is_named_or_with_allow_missing_its_cases_are_not_run(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    dirs = _shards(project, 3)
    err = _merge_error(capsys, str(dirs[0]), str(dirs[2]), "--to", str(project.path / "m"))
    assert (
        "shard 2/3 missing" in err
        and "--allow-missing" in err
        and not (project.path / "m").exists()
    )

    assert (
        nodeval(
            [
                "merge",
                str(dirs[0]),
                str(dirs[2]),
                "--allow-missing",
                "--to",
                str(project.path / "m"),
            ]
        )
        == 0
    )
    merged = _report(project.path / "m")
    lost = sorted(c for c, k in _report(dirs[1]).shard.cases.items() if k == 2)  # type: ignore[union-attr]
    assert lost and sorted(c.id for c in merged.cases) == CASES
    assert all(
        merged.case(c).verdict == "not_run" and len(merged.case(c).attempts) == 3 for c in lost
    )
    assert merged.totals.not_run == 3 * len(lost)
    assert "shard 2/3 is missing" in merged.case(lost[0]).attempts[0].reason  # type: ignore[operator]


def test_shards_of_another_mode_a_shard_twice_or_overlapping_cases_are_refused_naming_them(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    dirs = _shards(project, 2)
    other = project.runpytest(
        "--repeat", "3", "--nodeval-shard=2/2", "--nodeval-mode=full", "--nodeval-report-dir=full"
    )
    assert other.ret in (0, 1)
    full = next((project.path / "full").glob("*/report.json")).parent
    err = _merge_error(capsys, str(dirs[0]), str(full))
    assert "different mode" in err and str(dirs[0]) in err and str(full) in err and "'full'" in err

    again = project.runpytest("--repeat", "3", "--nodeval-shard=2/2", "--nodeval-report-dir=again")
    assert again.ret in (0, 1)
    again_dir = next((project.path / "again").glob("*/report.json")).parent
    err = _merge_error(capsys, str(dirs[0]), str(dirs[1]), str(again_dir))
    assert "shard 2/2 given twice" in err and str(dirs[1]) in err and str(again_dir) in err
    # The same run reached twice (reports/latest beside its directory) is one run.
    assert (
        nodeval(
            [
                "merge",
                str(dirs[0]),
                str(dirs[1]),
                str(dirs[1].parent / "latest"),
                "--to",
                str(project.path / "m"),
            ]
        )
        == 0
    )
    assert len(_report(project.path / "m").merged_from) == 2
    capsys.readouterr()

    whole = project.runpytest("--repeat", "3", "--nodeval-report-dir=whole")
    assert whole.ret == 0
    whole_dir = next((project.path / "whole").glob("*/report.json")).parent
    err = _merge_error(capsys, str(dirs[0]), str(whole_dir))
    assert "cannot merge a whole run with shard runs" in err and str(whole_dir) in err

    # Two runs that are not shards but share a case: the overlap is named.
    one = project.runpytest("--repeat", "3", "--nodeval-case=alpha", "--nodeval-report-dir=a1")
    two = project.runpytest("--repeat", "3", "--nodeval-case=alpha", "--nodeval-report-dir=a2")
    assert one.ret == two.ret == 0
    a1, a2 = (next((project.path / d).glob("*/report.json")).parent for d in ("a1", "a2"))
    err = _merge_error(capsys, str(a1), str(a2))
    assert "case 'alpha' was run by two of the runs" in err and str(a1) in err and str(a2) in err


def test_shards_of_different_commits_are_refused(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_SHA", "1111111")
    first = project.runpytest("--nodeval-shard=1/2", "--nodeval-report-dir=s1")
    monkeypatch.setenv("GITHUB_SHA", "2222222")
    second = project.runpytest("--nodeval-shard=2/2", "--nodeval-report-dir=s2")
    assert first.ret in (0, 1) and second.ret in (0, 1)
    s1, s2 = (next((project.path / d).glob("*/report.json")).parent for d in ("s1", "s2"))
    assert _report(s1).environment["git_commit"] == "1111111"
    err = _merge_error(capsys, str(s1), str(s2))
    assert "different commits" in err and "1111111" in err and "2222222" in err


def test_the_gate_on_the_merged_run_gives_the_unsharded_runs_verdict_and_writes_the_job_summary(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bless = project.runpytest(
        "--repeat", "3", "--nodeval-update-baseline", "--nodeval-report-dir=bless"
    )
    assert bless.ret == 0
    # Now bravo's check fails on every attempt: a regression the scenario gate must catch.
    (project.path / "scenarios" / "test_more.py").write_text(
        TESTS.replace('"Done" in', '"Nope" in')
    )
    whole = project.runpytest(
        "--repeat", "3", "--nodeval-baseline=reports/baseline.json", "--nodeval-report-dir=whole"
    )
    dirs = _shards(project, 4, "--nodeval-baseline=reports/baseline.json")
    step_summary = project.path / "step-summary.md"
    step_summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    status = nodeval(
        [
            "merge",
            *map(str, dirs),
            "--to",
            str(project.path / "merged"),
            "--baseline",
            str(project.path / "reports/baseline.json"),
            "--summary-md",
            str(project.path / "summary.md"),
        ]
    )
    unsharded = _report(next((project.path / "whole").glob("*/report.json")).parent)
    merged = _report(project.path / "merged")
    # Bravo failed outright
    assert status == whole.ret == unsharded.exit_status == merged.exit_status == 1
    assert merged.gate is not None and unsharded.gate is not None
    assert (merged.gate["verdict"], merged.gate["breached"]) == (
        unsharded.gate["verdict"],
        unsharded.gate["breached"],
    )
    assert "scenario_regression" in merged.gate["breached"]
    text = (project.path / "summary.md").read_text()
    assert text.startswith("## nodeval: FAILED")
    assert "### Gate: FAIL" in text and "| scenario_regression | FAIL |" in text
    attention = text[text.index("### Cases") :]
    assert attention.index("bravo") < attention.index("foxtrot")  # the regression first
    assert "regressed -1.00" in attention and "merged/report.html" in text
    assert step_summary.read_text() == "earlier step\n" + text  # appended, as GitHub expects
    # The history gets the merged run, not the shards.
    import sqlite3

    with sqlite3.connect(project.path / "history.sqlite") as db:
        runs = [row[0] for row in db.execute("SELECT run_id FROM runs")]
    assert runs == [merged.run_id]
    capsys.readouterr()


def test_infra_errors_and_their_causes_reach_the_job_summary(project: pytest.Pytester) -> None:
    (project.path / "scenarios" / "conftest.py").write_text(
        "import pytest\n\n@pytest.fixture(autouse=True)\ndef no_image(request):\n"
        "    from pytest_nodeval.plugin.keys import infra_key\n"
        "    if 'echo' in request.node.nodeid:\n"
        "        request.node.stash[infra_key] = 'world image nodeval/echo:1 not found'\n"
        "        raise RuntimeError('no image')\n"
    )
    result = project.runpytest("--nodeval-case=echo", "--nodeval-summary-md=out/summary.md")
    assert result.ret == 7
    text = (project.path / "out" / "summary.md").read_text()
    assert text.startswith("## nodeval: INFRASTRUCTURE ERROR")
    assert "| echo | 1 | world image nodeval/echo:1 not found |" in text


def _properties(xml: Path) -> dict[str, dict[str, str]]:
    tree = ET.parse(xml)
    return {
        f"{case.get('classname')}::{case.get('name')}": {
            p.get("name"): p.get("value") for p in case.iter("property")
        }
        for case in tree.iter("testcase")
    }


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["in-process", "xdist"])
def test_junit_testcases_carry_case_repeat_outcome_latency_and_tokens(
    project: pytest.Pytester, workers: list[str]
) -> None:
    result = project.runpytest("--repeat", "2", "--junitxml=junit.xml", *workers)
    assert result.ret == 0
    props = _properties(project.path / "junit.xml")
    fox2 = next(p for k, p in props.items() if "test_foxtrot" in k and "r2" in k)
    assert (fox2["nodeval_case"], fox2["nodeval_repeat"], fox2["nodeval_outcome"]) == (
        "foxtrot",
        "2",
        "failed",
    )
    alpha = next(
        p for k, p in props.items() if k.startswith("scenarios.alpha") and k.endswith("[alpha]")
    )
    assert (alpha["nodeval_case"], alpha["nodeval_repeat"], alpha["nodeval_outcome"]) == (
        "alpha",
        "1",
        "passed",
    )
    assert float(alpha["nodeval_latency_ms"]) >= 0 and int(alpha["nodeval_tokens"]) > 0
    plain = [p for k, p in props.items() if "test_plain" in k]
    assert len(plain) == 5 and all("nodeval_case" not in p for p in plain)


def test_a_shard_under_xdist_runs_the_same_tests_and_records_its_split(
    project: pytest.Pytester,
) -> None:
    alone = project.runpytest("--repeat", "2", "--nodeval-shard=2/3", "--nodeval-report-dir=alone")
    spread = project.runpytest(
        "--repeat", "2", "--nodeval-shard=2/3", "--nodeval-report-dir=spread", "-n", "2"
    )
    assert alone.ret == spread.ret == 0
    one, two = (
        _report(next((project.path / d).glob("*/report.json")).parent) for d in ("alone", "spread")
    )
    assert one.shard is not None and two.shard is not None
    assert one.shard.model_dump() == two.shard.model_dump()
    assert (
        [c.id for c in one.cases]
        == [c.id for c in two.cases]
        == sorted(c for c, k in one.shard.cases.items() if k == 2)
    )


def test_a_shard_the_suite_does_not_fill_writes_an_empty_run_the_merge_takes(
    nodeval_project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    for case_id in ("one", "two"):
        write_case(
            nodeval_project.path / "scenarios", case_id, script=[{"text": "Done."}], inputs=["go"]
        )
    whole = nodeval_project.runpytest("--nodeval-report-dir=whole")
    dirs, statuses = [], []
    for k in (1, 2, 3):  # two cases over three shards: one shard is empty
        result = nodeval_project.runpytest(
            f"--nodeval-shard={k}/3", f"--nodeval-report-dir=shards/{k}"
        )
        statuses.append(result.ret)
        dirs.append(next((nodeval_project.path / "shards" / str(k)).glob("*/report.json")).parent)
    reports = [_report(d) for d in dirs]
    assert statuses == [0, 0, 0] and sorted(len(r.cases) for r in reports) == [0, 1, 1]
    empty = next(r for r in reports if not r.cases)
    assert empty.shard is not None and sorted(empty.shard.cases) == ["one", "two"]
    assert nodeval(["merge", *map(str, dirs), "--to", str(nodeval_project.path / "merged")]) == 0
    merged = _report(nodeval_project.path / "merged")
    assert comparable(merged) == comparable(
        _report(next((nodeval_project.path / "whole").glob("*/report.json")).parent)
    )
    assert whole.ret == 0 and "merged into" in capsys.readouterr().out
