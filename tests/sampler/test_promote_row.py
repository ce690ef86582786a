"""`nodeval promote SAMPLE --to-dataset CASE --id ROW`: a sampled session as a dataset's new row."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_nodeval.agent.config import EngineConfig
from pytest_nodeval.cli import main
from pytest_nodeval.sampler import Sampler, run_with_sampler
from pytest_nodeval.sampling.store import list_samples

from ..plugin.test_datasets import ROWS, _dataset_case


def _sample(make_sampler: Callable[..., Sampler], out: Path, question: str, answer: str) -> Path:
    """A session captured in production from the engine the `qa` case runs, on a new question."""
    sampler = make_sampler(rate=1.0, out_dir=out)
    config = EngineConfig.model_validate(
        {
            "providers": [
                {
                    "name": "mock",
                    "model": "mock-1",
                    "script": [{"text": f"The answer is {answer}."}],
                }
            ],
            "system_prompt": "Answer in one sentence.",
            "tools": [],
        }
    )
    run_with_sampler(config, [question], sampler, session_id="italy-1")
    assert sampler.flush(timeout=10)
    return list_samples(out)[0].path


@pytest.fixture
def qa_case(nodeval_project: pytest.Pytester) -> Path:
    case = _dataset_case(nodeval_project.path / "scenarios", ROWS[:2])
    assert main(["record", str(case)]) == 0
    return case


def _promote(sample: Path, case: Path, *extra: str) -> int:
    return main(
        ["promote", str(sample), "--to-dataset", "qa", "--cases-dir", str(case.parent)]
        + list(extra)
    )


def test_a_sample_becomes_a_row_that_replays_green(
    qa_case: Path,
    make_sampler: Callable[..., Sampler],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    nodeval_project: pytest.Pytester,
) -> None:
    sample = _sample(make_sampler, tmp_path / "samples", "What is the capital of Italy?", "Rome")
    assert _promote(sample, qa_case, "--id", "italy", "--set", "answer=Rome") == 0
    out = capsys.readouterr().out
    assert "-> row italy of qa" in out and "replay check: green" in out
    rows = [json.loads(line) for line in (qa_case / "rows.jsonl").read_text().splitlines()]
    assert rows[-1] == {
        "id": "italy",
        "question": "What is the capital of Italy?",
        "answer": "Rome",
    }
    assert rows[:-1] == ROWS[:2]
    copied = qa_case / "journal" / "italy" / "events.jsonl"
    assert copied.read_bytes() == (sample / "journal" / "events.jsonl").read_bytes()
    result = nodeval_project.runpytest("-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*[[]qa/italy[]] PASSED*"])


def test_a_csv_dataset_gets_its_row_in_header_order(
    tmp_path: Path, make_sampler: Callable[..., Sampler]
) -> None:
    case = _dataset_case(tmp_path / "scenarios", ROWS[:1], dataset="rows.csv")
    (case / "rows.csv").write_text("question,id,answer\nWhat is 2+2?,sum,4\n")
    sample = _sample(make_sampler, tmp_path / "samples", "Name a colour, please", "red")
    assert _promote(sample, case, "--id", "colour", "--set", "answer=red", "--no-verify") == 0
    assert (case / "rows.csv").read_text().splitlines()[-1] == '"Name a colour, please",colour,red'


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--id", "italy"],
            "the session's turns hold no value for answer; give --set answer=VALUE",
        ),
        (
            ["--id", "italy", "--set", "answer=Rome", "--set", "city=Rome"],
            "--set city: the dataset's rows have no such field; their fields: question, answer",
        ),
        (
            ["--id", "italy", "--set", "answer=Rome", "--set", "question=Why?"],
            "--set question='Why?': the session's turns give question = "
            "'What is the capital of Italy?'",
        ),
        (["--id", "sum", "--set", "answer=Rome"], "rows.jsonl has a row of that id already"),
        (["--id", "it aly", "--set", "answer=Rome"], "--id 'it aly' is not a valid row id"),
        (["--id", "italy", "--set", "answer"], "--set 'answer': not FIELD=VALUE"),
        (
            ["--id", "italy", "--set", "answer=Rome", "--tag", "pr"],
            "--tag: set what case.yaml says of a new case; a row of qa takes its case's",
        ),
    ],
    ids=[
        "field-missing",
        "field-unknown",
        "field-clash",
        "id-taken",
        "id-invalid",
        "set-form",
        "case-flag",
    ],
)
def test_what_cannot_be_a_row_is_one_line_and_changes_nothing(
    qa_case: Path,
    make_sampler: Callable[..., Sampler],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    sample = _sample(make_sampler, tmp_path / "samples", "What is the capital of Italy?", "Rome")
    before = (qa_case / "rows.jsonl").read_bytes()
    assert _promote(sample, qa_case, *extra) == 4
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert (qa_case / "rows.jsonl").read_bytes() == before
    assert sorted(p.name for p in (qa_case / "journal").iterdir()) == ["capital", "sum"]


def test_a_session_whose_turns_the_template_cannot_give_does_not_fit(
    qa_case: Path,
    make_sampler: Callable[..., Sampler],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    inputs = qa_case / "input" / "inputs.yaml"
    inputs.write_text(inputs.read_text().replace("'{{ row.question }}'", "'Q: {{ row.question }}'"))
    sample = _sample(make_sampler, tmp_path / "samples", "What is the capital of Italy?", "Rome")
    assert _promote(sample, qa_case, "--id", "italy", "--set", "answer=Rome") == 4
    err = capsys.readouterr().err
    assert "user turn 1: the session's 'What is the capital of Italy?' is not what " in err
    assert "'Q: {{ row.question }}' gives: the session does not fit the case" in err


def test_a_case_without_a_dataset_is_refused(
    tmp_path: Path, make_sampler: Callable[..., Sampler], capsys: pytest.CaptureFixture[str]
) -> None:
    from ..conftest import write_case

    case = write_case(tmp_path / "scenarios", "plain", script=[{"text": "Hi."}], inputs=["hi"])
    sample = _sample(make_sampler, tmp_path / "samples", "hi", "x")
    code = main(["promote", str(sample), "--to-dataset", str(case), "--id", "r"])
    assert code == 4
    assert (
        "names no dataset: file; promote to a new case with --id alone" in capsys.readouterr().err
    )


def test_an_orphan_journal_of_that_id_is_never_overwritten(
    qa_case: Path,
    make_sampler: Callable[..., Sampler],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    orphan = qa_case / "journal" / "italy"
    orphan.mkdir()
    (orphan / "events.jsonl").write_text("kept\n")
    sample = _sample(make_sampler, tmp_path / "samples", "What is the capital of Italy?", "Rome")
    assert _promote(sample, qa_case, "--id", "italy", "--set", "answer=Rome") == 4
    assert "remove it with `nodeval clean --orphan-journals`" in capsys.readouterr().err
    assert (orphan / "events.jsonl").read_text() == "kept\n"
