"""examples/ci: the pipelines pass their schemas, the release pipeline's own commands run
end to end here (4 shards as separate "machines", then the merge), and 4 shards of the
seed suite at --repeat 5 merged equal the unsharded run."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_nodeval.report.models import RunReport

from ..conftest import PROJECT_INI, write_case
from ..plugin.test_shards import comparable

REPO = Path(__file__).parents[2]
EXAMPLES = REPO / "examples" / "ci"


@pytest.mark.parametrize(
    ("name", "schema"),
    [("github-actions.yml", "vendor.github-workflows"), ("gitlab-ci.yml", "vendor.gitlab-ci")],
)
def test_the_pipelines_pass_the_schemastore_schemas(name: str, schema: str) -> None:
    # Run as `python -m check_jsonschema` below; imported here (not at the top, to keep
    # collection light) so that a broken install fails this test instead of skipping it.
    import check_jsonschema  # noqa: F401

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "check_jsonschema",
            "--builtin-schema",
            schema,
            str(EXAMPLES / name),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GITHUB_", "CI_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return {**env, **extra}


def _command(line: str, matrix: dict[str, str]) -> list[str]:
    """A `run:` line of the workflow as this machine runs it: the same arguments, this Python."""
    for key, value in matrix.items():
        line = line.replace(f"${{{{ matrix.{key} }}}}", value)
    line = line.removesuffix("|| true").strip()
    words = shlex.split(line)
    program = {
        "pytest": [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"],
        "nodeval": [sys.executable, "-m", "pytest_nodeval.cli"],
    }[words[0]]
    return program + words[1:]


def _runs(job: dict[str, Any], program: str) -> str:
    return next(step["run"] for step in job["steps"] if step.get("run", "").startswith(program))


def _sh(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=_env(**env), capture_output=True, text=True, timeout=600
    )


# The release profile runs live: the mock provider needs no key, the world is local.
RELEASE_INI = PROJECT_INI + (
    "nodeval_world = local\nnodeval_profiles =\n    pr: mode=deterministic repeat=1\n"
    "    release: mode=live repeat=3\n"
)


def test_the_release_pipeline_runs_here_end_to_end(tmp_path: Path) -> None:
    workflow = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    shard_line = _runs(workflow["jobs"]["release"], "pytest")
    merge_line = _runs(workflow["jobs"]["merge"], "nodeval merge")
    assert workflow["jobs"]["release"]["strategy"]["matrix"]["shard"] == [1, 2, 3, 4]

    project = tmp_path / "project"
    for case_id in ("billing", "cancel", "login", "refund", "search", "upgrade"):
        write_case(
            project / "scenarios",
            case_id,
            script=[{"text": f"Done: {case_id}."}],
            inputs=["go"],
            assertions=[],
            case={"tags": ["release", "pr"]},
        )
    (project / "tox.ini").write_text(RELEASE_INI)
    bless = _sh(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-m",
            "release",
            "--nodeval-update-baseline",
            "--nodeval-report-dir",
            "whole",
        ],
        project,
    )
    assert bless.returncode == 0, bless.stdout + bless.stderr
    whole = _sh(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-m",
            "release",
            "--nodeval-baseline",
            "reports/baseline.json",
            "--nodeval-report-dir",
            "whole2",
        ],
        project,
    )
    assert whole.returncode == 0, whole.stdout + whole.stderr

    def machine(k: int) -> subprocess.CompletedProcess[str]:
        # Each shard on its own "machine": a fresh checkout (no history, the committed baseline).
        checkout = tmp_path / f"runner-{k}"
        shutil.copytree(
            project, checkout, ignore=shutil.ignore_patterns("whole*", "history.sqlite")
        )
        done = _sh(_command(shard_line, {"shard": str(k)}), checkout, GITHUB_SHA="abc123")
        shutil.copytree(
            checkout / "shard", tmp_path / "merge" / "shards" / f"nodeval-shard-{k}", symlinks=False
        )
        return done

    with ThreadPoolExecutor(4) as pool:
        shards = list(pool.map(machine, range(1, 5)))
    # As in the workflow (`|| true`), a shard's own status is not the verdict: the merge's is. What
    # the merge needs is each shard's run; the verdicts are checked on the merged report below.
    written = [
        list((tmp_path / "merge" / "shards" / f"nodeval-shard-{k}").glob("*/report.json"))
        for k in range(1, 5)
    ]
    assert all(written), [(s.returncode, s.stdout[-3000:] + s.stderr[-1000:]) for s in shards]
    merge_dir = tmp_path / "merge"
    shutil.copytree(
        project / "reports",
        merge_dir / "reports",
        ignore=shutil.ignore_patterns("history.sqlite", "2*"),
    )
    summary = merge_dir / "github-step-summary.md"
    # The shell's glob, as the runner's shell expands it (shard/latest, copied, comes along too).
    argv = [
        path
        for word in _command(merge_line, {})
        for path in (sorted(str(p) + "/" for p in merge_dir.glob(word)) if "*" in word else [word])
    ]
    merged = _sh(argv, merge_dir, GITHUB_STEP_SUMMARY=str(summary))
    assert merged.returncode == 0, merged.stdout + merged.stderr

    report = RunReport.model_validate_json((merge_dir / "reports/release/report.json").read_bytes())
    unsharded = RunReport.model_validate_json(
        next((project / "whole2").glob("*/report.json")).read_bytes()
    )
    assert comparable(report) | {"cases": None} == comparable(unsharded) | {"cases": None}
    assert [(c.id, c.verdict, len(c.attempts)) for c in report.cases] == [
        (c.id, c.verdict, len(c.attempts)) for c in unsharded.cases
    ]
    assert report.mode == "live" and report.totals.attempts == 18 and len(report.merged_from) == 4
    assert report.gate is not None and unsharded.gate is not None
    assert report.gate["verdict"] == unsharded.gate["verdict"] and report.gate["breached"] == []
    assert (merge_dir / "reports/release/report.html").is_file()
    text = (merge_dir / "reports/release/summary.md").read_text()
    assert text.startswith("## nodeval: PASSED") and summary.read_text() == text


def test_four_shards_of_the_seed_suite_at_repeat_5_merged_equal_the_unsharded_run(
    tmp_path: Path,
) -> None:
    common = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-m",
        "pr",
        "--repeat",
        "5",
        "-q",
        "-o",
        "nodeval_history=",
        f"--nodeval-baseline={tmp_path / 'baseline.json'}",
    ]
    # Paths only as --option=value: pytest takes a separate argument that exists as a path
    # into account when it looks for the rootdir.
    bless = _sh(
        common[:-1]
        + [
            "--nodeval-update-baseline",
            "-o",
            f"nodeval_baseline={tmp_path / 'baseline.json'}",
            f"--nodeval-report-dir={tmp_path / 'bless'}",
        ],
        REPO,
    )
    assert bless.returncode == 0, bless.stdout[-3000:]

    def run(args: list[str]) -> subprocess.CompletedProcess[str]:
        return _sh(common + args, REPO)

    with ThreadPoolExecutor(2) as pool:
        jobs = [pool.submit(run, [f"--nodeval-report-dir={tmp_path / 'whole'}"])] + [
            pool.submit(
                run, [f"--nodeval-shard={k}/4", f"--nodeval-report-dir={tmp_path / f's{k}'}"]
            )
            for k in range(1, 5)
        ]
        results = [job.result() for job in jobs]
    assert all(r.returncode == 0 for r in results), [
        r.stdout[:3000] for r in results if r.returncode
    ]
    dirs = [next((tmp_path / f"s{k}").glob("2*/report.json")).parent for k in range(1, 5)]
    merged = _sh(
        [
            sys.executable,
            "-m",
            "pytest_nodeval.cli",
            "merge",
            *map(str, dirs),
            "--to",
            str(tmp_path / "m"),
            "--baseline",
            str(tmp_path / "baseline.json"),
            "--history",
            "",
        ],
        REPO,
    )
    assert merged.returncode == 0, merged.stdout + merged.stderr
    report = RunReport.model_validate_json((tmp_path / "m/report.json").read_bytes())
    unsharded = RunReport.model_validate_json(
        next((tmp_path / "whole").glob("2*/report.json")).read_bytes()
    )
    assert report.totals.attempts == 5 * len(report.cases) and len(report.cases) >= 5
    assert comparable(report) == comparable(unsharded)
    assert report.gate is not None and unsharded.gate is not None
    assert (report.gate["verdict"], report.gate["breached"]) == (
        unsharded.gate["verdict"],
        unsharded.gate["breached"],
    )
