"""Dataset cases: one case directory, one test per row of its dataset, each row a scenario."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pytest_nodeval.cli import main
from pytest_nodeval.report.models import RunReport

ROWS = [
    {"id": "capital", "question": "What is the capital of France?", "answer": "Paris"},
    {"id": "sum", "question": "What is 2+2?", "answer": "4"},
    {"id": "sky", "question": "What colour is the sky?", "answer": "blue"},
    {"id": "moon", "question": "Is the moon a planet?", "answer": "no"},
    {"id": "water", "question": "What is H2O?", "answer": "water"},
]


def _dataset_case(root: Path, rows: list[dict[str, str]] | None = None, **case: object) -> Path:
    case_dir = root / "qa"
    (case_dir / "input").mkdir(parents=True, exist_ok=True)
    spec = {"id": "qa", "tags": ["pr"], "dataset": "rows.jsonl", **case}
    (case_dir / "case.yaml").write_text(yaml.safe_dump(spec))
    (case_dir / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows or ROWS))
    (case_dir / "input" / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "providers": [
                    {
                        "name": "mock",
                        "model": "mock-1",
                        "script": [{"text": "The answer is {{ row.answer }}."}],
                    }
                ],
                "system_prompt": "Answer in one sentence.",
                "tools": [],
            }
        )
    )
    (case_dir / "input" / "inputs.yaml").write_text(
        yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["{{ row.question }}"]}})
    )
    (case_dir / "assertions.yaml").write_text(
        yaml.safe_dump([{"kind": "output_contains", "text": "{{ row.answer }}"}])
    )
    return case_dir


def _report(project: pytest.Pytester) -> RunReport:
    return RunReport.model_validate_json(
        (project.path / "reports" / "latest" / "report.json").read_bytes()
    )


def test_a_five_row_dataset_records_and_replays_five_tests_and_one_changed_row_fails_alone(
    nodeval_project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    case_dir = _dataset_case(nodeval_project.path / "scenarios")
    assert main(["record", str(case_dir)]) == 0
    assert "5 case(s): 5 recorded" in capsys.readouterr().out
    assert sorted(p.name for p in (case_dir / "journal").iterdir()) == sorted(r["id"] for r in ROWS)
    result = nodeval_project.runpytest("-v")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        ["*case.yaml::test_scenario[[]qa/capital[]] PASSED*", "qa (dataset, 5 rows: 5 passed)"]
    )
    report = _report(nodeval_project)
    assert sorted(c.id for c in report.cases) == sorted(f"qa/{r['id']}" for r in ROWS)
    # One row's expected value changes: that row alone fails (its journal says "4").
    rows = [dict(r, answer="5") if r["id"] == "sum" else r for r in ROWS]
    (case_dir / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = nodeval_project.runpytest()
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["FAILED *test_scenario[[]qa/sum[]]*"])
    # --record-mode missing re-records that row alone, and it passes again.
    assert main(["record", "--record-mode", "missing", str(case_dir)]) == 0
    assert "1 recorded (1 new or changed, 0 unchanged), 4 skipped" in capsys.readouterr().out
    nodeval_project.runpytest().assert_outcomes(passed=5)


def test_one_row_runs_by_k_or_nodeval_case_and_repeats_keep_the_row(
    nodeval_project: pytest.Pytester,
) -> None:
    case_dir = _dataset_case(nodeval_project.path / "scenarios")
    assert main(["record", str(case_dir)]) == 0
    nodeval_project.runpytest("-k", "sky").assert_outcomes(passed=1)
    nodeval_project.runpytest("--nodeval-case=qa/moon").assert_outcomes(passed=1)
    nodeval_project.runpytest("--nodeval-case=qa").assert_outcomes(passed=5)
    result = nodeval_project.runpytest("--repeat", "2", "-k", "water", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["*[[]qa/water[]]", "*[[]qa/water-r2[]]"])


def test_a_bound_python_test_sees_its_row_and_record_mode_installs_per_row(
    nodeval_project: pytest.Pytester,
) -> None:
    case_dir = _dataset_case(nodeval_project.path / "scenarios", ROWS[:2])
    (nodeval_project.path / "scenarios" / "test_rows.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.nodeval_case('qa')\n"
        "def test_row(nodeval_attempt):\n"
        "    observed = nodeval_attempt.run()\n"
        "    assert nodeval_attempt.row['answer'] in observed.output\n"
    )
    result = nodeval_project.runpytest("--nodeval-mode=record")
    result.assert_outcomes(passed=4)
    assert sorted(p.name for p in (case_dir / "journal").iterdir()) == ["capital", "sum"]
    nodeval_project.runpytest().assert_outcomes(passed=4)


def test_a_new_row_has_no_journal_and_a_removed_one_leaves_an_orphan_clean_removes(
    nodeval_project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    case_dir = _dataset_case(nodeval_project.path / "scenarios", ROWS[:2])
    assert main(["record", str(case_dir)]) == 0
    _dataset_case(nodeval_project.path / "scenarios", [ROWS[0], ROWS[2]])
    result = nodeval_project.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*{case_dir / 'journal' / 'sky'}: no journal here; record one with "
            f"`nodeval record {case_dir}`*"
        ]
    )
    capsys.readouterr()
    assert main(["record", "--record-mode", "missing", str(case_dir)]) == 0
    captured = capsys.readouterr()
    assert f"orphan journal {case_dir / 'journal' / 'sum'}" in captured.err
    assert "1 recorded (1 new or changed, 0 unchanged), 1 skipped" in captured.out
    assert main(["clean", "--orphan-journals", str(case_dir.parent)]) == 0
    assert sorted(p.name for p in (case_dir / "journal").iterdir()) == ["capital", "sky"]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("rows.jsonl", '{"question": "q"}\n', "{rows}:1: no id; each row needs an id"),
        ("rows.jsonl", '{"id": "a"}\n{"id": "a"}\n', "{rows}:2: duplicate row id 'a'"),
        ("rows.jsonl", '{"id": "a b"}\n', "{rows}:1: id 'a b'; each row needs an id of letters"),
        ("rows.jsonl", "not json\n", "{rows}:1: not a JSON object"),
        (
            "rows.csv",
            "id,question,answer\na,q,1\nb,q\n",
            "{rows}:3: 2 value(s) where the header has 3 (id, question, answer)",
        ),
        (
            "rows.jsonl",
            '{"id": "a", "question": "q"}\n',
            "{case}/input/config.yaml: cannot fill 'The answer is {{{{ row.answer }}}}.': "
            "'dict object' has no attribute 'answer'; it is filled from row 'a' of rows.jsonl "
            "(its fields: id, question)",
        ),
        ("../rows.jsonl", "", "dataset: '../rows.jsonl' is outside the case directory"),
    ],
    ids=["no-id", "duplicate", "bad-id", "not-json", "ragged-csv", "missing-field", "outside"],
)
def test_bad_datasets_are_one_line_naming_the_file_and_row(
    nodeval_project: pytest.Pytester, name: str, content: str, message: str
) -> None:
    case_dir = _dataset_case(nodeval_project.path / "scenarios", dataset=name)
    (case_dir / "rows.jsonl").unlink()
    if content:
        (case_dir / name).write_text(content)
    (nodeval_project.path / "scenarios" / "plain").mkdir()
    result = nodeval_project.runpytest()
    expected = message.format(rows=case_dir / name, case=case_dir)
    assert expected in result.stdout.str()
    assert "Traceback" not in result.stdout.str()
