"""--nodeval-matrix: every case once per variant, each variant compared with the first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_nodeval.cli import main as nodeval
from pytest_nodeval.report.models import RunReport

from ..conftest import PROJECT_INI, write_case
from .test_shards import _report as report_in


def _report(project: pytest.Pytester) -> RunReport:
    return RunReport.model_validate_json(
        (project.path / "reports" / "latest" / "report.json").read_bytes()
    )


def _models_sent(project: pytest.Pytester, report: RunReport) -> dict[str, set[str]]:
    sent: dict[str, set[str]] = {}
    for case in report.cases:
        for attempt in case.attempts:
            events = project.path / "reports" / "latest" / str(attempt.journal) / "events.jsonl"
            for line in events.read_text().splitlines():
                event = json.loads(line)
                if event["type"] == "llm.request":
                    sent.setdefault(case.id, set()).add(event["payload"]["body"]["model"])
    return sent


def test_two_models_run_as_two_tests_and_report_json_compares_them(
    nodeval_project: pytest.Pytester,
) -> None:
    write_case(
        nodeval_project.path / "scenarios",
        "hello",
        script=[{"text": "Hello."}],
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "hello"}],
    )
    result = nodeval_project.runpytest(
        "--nodeval-mode=live", "--repeat", "2", "--nodeval-matrix=model=mock-1,mock-2", "-v"
    )
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*test_scenario[[]hello@model=mock-1[]] PASSED*",
            "*test_scenario[[]hello@model=mock-2-r2[]] PASSED*",
            "variants (each compared with model=mock-1):",
            "  model=mock-2 *OK",
        ]
    )
    report = _report(nodeval_project)
    assert _models_sent(nodeval_project, report) == {
        "hello@model=mock-1": {"mock-1"},
        "hello@model=mock-2": {"mock-2"},
    }
    variants = report.variants
    assert variants is not None and variants.compared_with == "model=mock-1"
    assert [v.label for v in variants.variants] == ["model=mock-1", "model=mock-2"]
    assert [v.attempts for v in variants.variants] == [2, 2]
    assert variants.variants[0].vs_first is None
    assert variants.variants[1].vs_first is not None
    assert variants.variants[1].vs_first.verdict == "OK"
    assert variants.cases == {"hello": {"model=mock-1": 1.0, "model=mock-2": 1.0}}


def _vars_case(root: Path, case_id: str = "tone") -> Path:
    """A case whose mock answers in the tone a {{ vars.tone }} names; 'rude' fails its check."""
    case = write_case(
        root,
        case_id,
        script=[{"text": "Reply, {{ vars.tone }}."}],
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "polite"}],
        record=False,
    )
    return case


def test_a_variant_that_fails_is_worse_than_the_first_by_the_gate_s_verdict(
    nodeval_project: pytest.Pytester,
) -> None:
    _vars_case(nodeval_project.path / "scenarios")
    result = nodeval_project.runpytest(
        "--nodeval-mode=live", "--repeat", "5", "--nodeval-matrix=tone=polite,rude"
    )
    result.assert_outcomes(passed=5, failed=5)
    report = _report(nodeval_project)
    assert report.variants is not None
    rude = report.variants.variants[1]
    assert rude.label == "tone=rude" and rude.pass_rate == 0.0
    assert rude.vs_first is not None and rude.vs_first.verdict == "FAIL"
    assert rude.vs_first.worse == ["tone"]
    result.stdout.fnmatch_lines(["  tone=rude *FAIL: worse on 1 case(s): tone"])


def test_record_then_replay_per_variant_and_a_variant_without_a_journal_says_so(
    nodeval_project: pytest.Pytester,
) -> None:
    case = _vars_case(nodeval_project.path / "scenarios")
    matrix = "--nodeval-matrix=tone=polite,very-polite"
    nodeval_project.runpytest("--nodeval-mode=record", matrix).assert_outcomes(passed=2)
    assert sorted(p.name for p in (case / "journal").iterdir()) == [
        "@tone=polite",
        "@tone=very-polite",
    ]
    nodeval_project.runpytest(matrix).assert_outcomes(passed=2)
    result = nodeval_project.runpytest("--nodeval-matrix=tone=polite,kind")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [f"*{case / 'journal' / '@tone=kind'}: no journal here; record one with*"]
    )


def test_system_prompt_variants_read_a_file_of_the_case(nodeval_project: pytest.Pytester) -> None:
    case = write_case(
        nodeval_project.path / "scenarios",
        "prompted",
        script=[{"text": "Hi."}],
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "hi"}],
        record=False,
    )
    (case / "input" / "terse.txt").write_text("Be terse.\n")
    (case / "input" / "warm.txt").write_text("Be warm.\n")
    nodeval_project.runpytest(
        "--nodeval-mode=live", "--nodeval-matrix=system_prompt=terse.txt,warm.txt"
    ).assert_outcomes(passed=2)
    report = _report(nodeval_project)
    systems = {}
    for c in report.cases:
        journal = nodeval_project.path / "reports" / "latest" / str(c.attempts[0].journal)
        request = next(
            json.loads(line)
            for line in (journal / "events.jsonl").read_text().splitlines()
            if '"llm.request"' in line
        )
        systems[c.id] = request["payload"]["body"]["system"]
    assert systems == {
        "prompted@system_prompt=terse.txt": "Be terse.",
        "prompted@system_prompt=warm.txt": "Be warm.",
    }


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--nodeval-matrix=model=a", "--nodeval-matrix=model=b"],
            "--nodeval-matrix: model is given twice; give its values in one flag",
        ),
        (["--nodeval-matrix=model"], "--nodeval-matrix='model': not KEY=VALUE[,VALUE...]"),
        (["--nodeval-matrix=model=a/b"], "--nodeval-matrix='model=a/b': value 'a/b'"),
    ],
    ids=["twice", "no-values", "slash"],
)
def test_bad_matrix_flags_are_one_usage_line(
    nodeval_project: pytest.Pytester, flags: list[str], message: str
) -> None:
    _vars_case(nodeval_project.path / "scenarios")
    result = nodeval_project.runpytest(*flags)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()
    assert not (nodeval_project.path / "reports").exists()


def test_a_matrix_key_nothing_uses_fails_the_case_naming_the_key(
    nodeval_project: pytest.Pytester,
) -> None:
    write_case(
        nodeval_project.path / "scenarios",
        "plain",
        script=[{"text": "Hi."}],
        inputs=["hi"],
        record=False,
    )
    result = nodeval_project.runpytest("--nodeval-mode=live", "--nodeval-matrix=tone=a,b")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        ["*--nodeval-matrix variant tone=a: no file of case 'plain' uses {{ vars.tone }}*"]
    )


def _providers_case(root: Path) -> Path:
    """A case whose config.yaml names two mock providers under `variants:`; `rude` fails."""
    case = write_case(
        root,
        "asked",
        script=[{"text": "unused"}],
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "polite"}],
        record=False,
    )
    config = case / "input" / "config.yaml"
    data = yaml.safe_load(config.read_text())
    data["variants"] = {
        name: {"name": "mock", "model": f"mock-{name}", "script": [{"text": f"A {name} reply."}]}
        for name in ("polite", "rude")
    }
    config.write_text(yaml.safe_dump(data))
    return case


def test_provider_variants_take_the_first_provider_s_place(
    nodeval_project: pytest.Pytester,
) -> None:
    _providers_case(nodeval_project.path / "scenarios")
    result = nodeval_project.runpytest(
        "--nodeval-mode=live", "--nodeval-matrix=provider=polite,rude", "-v"
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_scenario[[]asked@provider=polite[]] PASSED*",
            "*test_scenario[[]asked@provider=rude[]] FAILED*",
        ]
    )
    report = _report(nodeval_project)
    assert _models_sent(nodeval_project, report) == {
        "asked@provider=polite": {"mock-polite"},
        "asked@provider=rude": {"mock-rude"},
    }


def test_a_provider_variant_the_block_lacks_names_the_file_and_its_entries(
    nodeval_project: pytest.Pytester,
) -> None:
    case = _providers_case(nodeval_project.path / "scenarios")
    result = nodeval_project.runpytest("--nodeval-mode=live", "--nodeval-matrix=provider=terse")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            f"*--nodeval-matrix variant provider=terse: {case / 'input' / 'config.yaml'} has no "
            "provider entry 'terse' under `variants:`; its entries: polite, rude*"
        ]
    )


def test_a_profile_s_matrix_runs_its_variants_and_the_command_line_overrides_it(
    nodeval_project: pytest.Pytester,
) -> None:
    nodeval_project.makeini(
        PROJECT_INI + "nodeval_profiles =\n    sweep: mode=live matrix=tone=polite,rude\n"
    )
    _vars_case(nodeval_project.path / "scenarios")
    swept = nodeval_project.runpytest("--nodeval-profile", "sweep", "-v")
    swept.assert_outcomes(passed=1, failed=1)
    swept.stdout.fnmatch_lines(["*[[]tone@tone=rude[]] FAILED*"])
    one = nodeval_project.runpytest(
        "--nodeval-profile", "sweep", "--nodeval-matrix=tone=polite", "-v"
    )
    one.assert_outcomes(passed=1)
    one.stdout.fnmatch_lines(["*[[]tone@tone=polite[]] PASSED*"])


def _comparable(report: RunReport) -> dict[str, Any]:
    """A run's variants without the figures that change from run to run (latency, which the
    gates' reasons quote too)."""
    assert report.variants is not None
    data = report.variants.model_dump(mode="json")
    for variant in data["variants"]:
        variant.pop("latency_p95_ms")
        if variant["vs_first"]:
            variant["vs_first"].pop("reasons")
    return data


def test_shards_with_concurrency_and_xdist_merge_into_the_whole_run_s_variants(
    nodeval_project: pytest.Pytester,
) -> None:
    root = nodeval_project.path / "scenarios"
    for case_id in ("tone", "tone-b", "tone-c"):
        _vars_case(root, case_id)
    matrix = ("--nodeval-mode=live", "--repeat", "3", "--nodeval-matrix=tone=polite,rude")
    whole = nodeval_project.runpytest(*matrix, "--nodeval-report-dir=whole")
    whole.assert_outcomes(passed=9, failed=9)
    dirs = []
    for k in (1, 2):
        sharded = nodeval_project.runpytest(
            *matrix,
            f"--nodeval-shard={k}/2",
            "--nodeval-concurrency=2",
            "-n",
            "2",
            f"--nodeval-report-dir=shards/{k}",
        )
        assert sharded.ret in (0, 1), sharded.stdout.str()  # a shard may hold no rude variant
        dirs.append(next((nodeval_project.path / "shards" / str(k)).glob("*/report.json")).parent)
        # The matrix's first variant, whichever finished first on the workers.
        assert report_in(dirs[-1]).variants.compared_with == "tone=polite"  # type: ignore[union-attr]
    assert nodeval(["merge", *map(str, dirs), "--to", str(nodeval_project.path / "merged")]) == 1
    merged = report_in(nodeval_project.path / "merged")
    unsharded = report_in(next((nodeval_project.path / "whole").glob("*/report.json")).parent)
    assert _comparable(merged) == _comparable(unsharded)
    rude = merged.variants.variants[1]  # type: ignore[union-attr]
    assert rude.vs_first is not None and sorted(rude.vs_first.worse) == ["tone", "tone-b", "tone-c"]
