"""`nodeval promote` and `nodeval samples`: from a captured sample to a case that replays green."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_nodeval.case.directory import load_case
from pytest_nodeval.checks.assertions import AssertionsFile
from pytest_nodeval.cli import main
from pytest_nodeval.sampler import Sampler, run_with_sampler
from pytest_nodeval.sampling.promote import PromoteOptions, distinctive_piece, promote
from pytest_nodeval.sampling.store import list_samples

from .conftest import (
    ANSWERS,
    CARD,
    DISK_USAGE,
    EMAIL,
    SECRET_INPUT,
    assert_no_secret_in,
    mock_config,
)


def _capture(
    make_sampler: Callable[..., Sampler],
    script: list[dict[str, Any]],
    inputs: list[str],
    session_id: str,
    out_dir: Path,
    **limits: Any,
) -> Path:
    sampler = make_sampler(rate=1.0, out_dir=out_dir)
    run_with_sampler(
        mock_config(script, tools=["shell"], **limits), inputs, sampler, session_id=session_id
    )
    assert sampler.flush(timeout=10)
    return next(s.path for s in list_samples(out_dir) if s.info and s.info.session_id == session_id)


@pytest.fixture
def disk_sample(tmp_path: Path, make_sampler: Callable[..., Sampler]) -> Path:
    return _capture(
        make_sampler,
        DISK_USAGE,
        [f"How big is the workspace? Reply to {EMAIL}"],
        "disk-1",
        tmp_path / "samples",
    )


def test_promote_writes_a_case_for_review(tmp_path: Path, disk_sample: Path) -> None:
    cases = tmp_path / "scenarios"
    promoted = promote(
        disk_sample, PromoteOptions("disk-usage", cases, owner="ops-team", tags=("pr",))
    )
    case_dir = cases / "disk-usage"
    assert promoted.case_dir == case_dir and promoted.replay_problems == []

    spec = load_case(case_dir).spec
    assert (spec.id, spec.owner, spec.freshness, spec.model_baseline) == (
        "disk-usage",
        "ops-team",
        "90d",
        "mock-1",
    )
    assert spec.tags == ["promoted", "pr"]
    for name in ("header.json", "events.jsonl"):
        assert (case_dir / "journal" / name).read_bytes() == (
            disk_sample / "journal" / name
        ).read_bytes()
    assert (case_dir / "input/config.yaml").read_bytes() == (
        disk_sample / "input/config.yaml"
    ).read_bytes()
    inputs = yaml.safe_load((case_dir / "input/inputs.yaml").read_text())
    assert inputs == {
        "user": {"kind": "scripted", "inputs": ["How big is the workspace? Reply to [REDACTED]"]}
    }

    text = (case_dir / "assertions.yaml").read_text()
    schema_line, _, text = text.partition("\n")
    assert (
        schema_line
        == "# yaml-language-server: $schema=../../.nodeval/schemas/assertions.schema.json"
    )
    assert text.startswith("# Proposed by `nodeval promote` from the trace of sample")
    kinds = [a.kind for a in AssertionsFile.model_validate(yaml.safe_load(text)).assertions]
    assert kinds == [
        "same_tool_sequence",
        "tool_called",
        "no_errors",
        "output_contains",
        "max_turns",
    ]
    assert "text: 12M in total" in text and "value: 4" in text
    assert_no_secret_in(case_dir)


def test_a_promoted_case_replays_green_with_no_network(
    nodeval_project: pytest.Pytester,
    disk_sample: Path,
    no_network: list[Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    cases = nodeval_project.path / "scenarios"
    assert (
        main(["promote", str(disk_sample), "--id", "disk-from-prod", "--cases-dir", str(cases)])
        == 0
    )
    assert "replay check: green in deterministic mode" in capsys.readouterr().out
    assert (
        main(["promote", str(disk_sample), "--id", "another-case", "--cases-dir", str(cases)]) == 0
    )

    result = nodeval_project.runpytest("-k", "disk-from-prod")
    result.assert_outcomes(passed=1, deselected=1)
    assert no_network == []


def test_secrets_in_tool_results_are_redacted_and_the_case_still_replays(
    tmp_path: Path, make_sampler: Callable[..., Sampler]
) -> None:
    # The secret reaches the journal as a tool's output, JSON-encoded inside the next request.
    leaky = [
        {
            "tool_calls": [
                {"name": "shell", "args": {"command": f"printf 'card:\\n{CARD}\\nmail:\\n{EMAIL}'"}}
            ]
        },
        {"text": "I found the billing details."},
    ]
    sample = _capture(
        make_sampler, leaky, ["Show the billing details"], "leaky-1", tmp_path / "samples"
    )
    assert_no_secret_in(tmp_path / "samples")
    promoted = promote(sample, PromoteOptions("billing-details", tmp_path / "scenarios"))
    assert promoted.replay_problems == []


def test_promoting_onto_an_existing_id_fails_clearly(
    tmp_path: Path, disk_sample: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = tmp_path / "scenarios"
    assert main(["promote", str(disk_sample), "--id", "disk-usage", "--cases-dir", str(cases)]) == 0
    (cases / "disk-usage" / "assertions.yaml").write_text("- kind: no_errors\n")  # a person's edits
    capsys.readouterr()

    assert main(["promote", str(disk_sample), "--id", "disk-usage", "--cases-dir", str(cases)]) == 4
    assert capsys.readouterr().err == (
        f"nodeval promote: {cases / 'disk-usage'} already exists; promote never overwrites a case. "
        "Choose another --id, or pass --force to replace it\n"
    )
    assert (cases / "disk-usage" / "assertions.yaml").read_text() == "- kind: no_errors\n"

    assert (
        main(
            [
                "promote",
                str(disk_sample),
                "--id",
                "disk-usage",
                "--cases-dir",
                str(cases),
                "--force",
            ]
        )
        == 0
    )
    assert "\n# Proposed" in (cases / "disk-usage" / "assertions.yaml").read_text()
    assert [p.name for p in cases.iterdir()] == ["disk-usage"], "no staging leftovers"


def test_an_id_used_by_another_case_directory_is_refused(tmp_path: Path, disk_sample: Path) -> None:
    cases = tmp_path / "scenarios"
    promote(disk_sample, PromoteOptions("disk-usage", cases))
    (cases / "disk-usage").rename(cases / "renamed-dir")
    with pytest.raises(
        Exception, match=r"case id 'disk-usage' is already used by .*renamed-dir/case.yaml"
    ):
        promote(disk_sample, PromoteOptions("disk-usage", cases))


@pytest.mark.parametrize(
    ("case_id", "rule"),
    [
        ("Disk Usage", "must be lower case letters"),
        ("disk-r2", "must not end in -r<digits>"),
    ],
)
def test_an_invalid_id_is_refused_with_the_case_yaml_rule(
    tmp_path: Path, disk_sample: Path, capsys: pytest.CaptureFixture[str], case_id: str, rule: str
) -> None:
    assert (
        main(
            [
                "promote",
                str(disk_sample),
                "--id",
                case_id,
                "--cases-dir",
                str(tmp_path / "scenarios"),
            ]
        )
        == 4
    )
    err = capsys.readouterr().err
    assert f"--id {case_id!r} is not a valid case id: it {rule}" in err
    assert not (tmp_path / "scenarios").exists()


def test_a_failed_sample_is_promoted_honestly(
    tmp_path: Path, make_sampler: Callable[..., Sampler], capsys: pytest.CaptureFixture[str]
) -> None:
    looping = [{"tool_calls": [{"name": "shell", "args": {"command": "echo again"}}]}] * 3
    sample = _capture(
        make_sampler, looping, [SECRET_INPUT], "loop-1", tmp_path / "samples", max_turns=2
    )
    cases = tmp_path / "scenarios"
    assert main(["promote", str(sample), "--id", "loops-forever", "--cases-dir", str(cases)]) == 0
    err = capsys.readouterr().err
    assert "the captured session failed (limit: max_turns (2) reached)" in err

    text = (cases / "loops-forever" / "assertions.yaml").read_text()
    assert "# This session FAILED when it was captured: limit: max_turns (2) reached" in text
    assert "A person must decide what the" in text and "# - kind: no_errors" in text
    kinds = [a.kind for a in AssertionsFile.model_validate(yaml.safe_load(text)).assertions]
    assert "no_errors" not in kinds and kinds[0] == "same_tool_sequence"
    assert "max_turns (2) reached" in load_case(cases / "loops-forever").spec.description
    assert_no_secret_in(cases)


def test_a_sample_can_be_named_by_its_id(
    tmp_path: Path, disk_sample: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "promote",
            disk_sample.name,
            "--id",
            "by-id",
            "--samples-dir",
            str(disk_sample.parent),
            "--cases-dir",
            str(tmp_path / "scenarios"),
        ]
    )
    assert code == 0 and (tmp_path / "scenarios" / "by-id" / "case.yaml").is_file()
    assert (
        main(["promote", "no-such-sample", "--id", "x", "--samples-dir", str(disk_sample.parent)])
        == 4
    )
    assert "no-such-sample: no such sample directory" in capsys.readouterr().err


def test_nodeval_samples_lists_candidates_newest_first(
    tmp_path: Path, make_sampler: Callable[..., Sampler], capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "samples"
    _capture(make_sampler, ANSWERS, ["hello"], "first", out_dir)
    _capture(make_sampler, [{"error": "upstream model overloaded"}], ["hello"], "second", out_dir)
    assert main(["samples", "--dir", str(out_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["ID", "CAPTURED", "(UTC)", "REASON", "SIZE", "ERROR"]
    assert lines[1].split()[0].endswith("-second") and " failed " in lines[1]
    assert "error: every provider failed" in lines[1] and " KB" in lines[1]
    assert lines[2].split()[0].endswith("-first") and " sampled " in lines[2]
    assert "2 sample(s)" in lines[4]

    assert main(["samples", "--dir", str(out_dir), "--reason", "sampled"]) == 0
    assert "-second" not in capsys.readouterr().out
    (tmp_path / "empty").mkdir()
    assert main(["samples", "--dir", str(tmp_path / "empty")]) == 0
    assert capsys.readouterr().out.startswith("no samples in ")
    # A --dir that does not exist is a typo, not an empty sampler.
    assert main(["samples", "--dir", str(tmp_path / "none")]) == 4
    assert "--dir: " in capsys.readouterr().err


def test_nodeval_samples_before_the_sampler_ever_captured(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # the default directory, ~/.nodeval/samples
    assert main(["samples"]) == 0
    assert capsys.readouterr().out.startswith("no samples in ")


@pytest.mark.parametrize(
    ("text", "piece"),
    [
        ("The workspace uses 12M in total.", "12M in total"),
        ("Sent to [REDACTED] at 10:30 today", "10:30 today"),
        ("Ok.", None),
        ("Your refund was processed successfully", "successfully"),
    ],
)
def test_the_output_piece_is_short_specific_and_never_redacted(
    text: str, piece: str | None
) -> None:
    assert distinctive_piece(text) == piece
    if piece:
        assert piece.lower() in text.lower()
