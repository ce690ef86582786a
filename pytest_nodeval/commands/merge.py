r"""`nodeval merge RUN_DIR...`: one run from the runs of the shards of a suite (--nodeval-shard).

    nodeval merge shards/*/ --to reports/merged --baseline reports/baseline.json \
        --summary-md summary.md

Writes report.json (schema "1"), summary.txt, report.html and `_sessions/` into the merged
run directory, appends it to the run history, gates it against the baseline, and exits as
pytest would have on one machine: 0, 1 (agent failures), 6 (the gate FAILED), 7
(infrastructure errors only); 4 when the runs cannot be merged (the error names them).
"""

from __future__ import annotations

import argparse
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import NodevalError
from ..paths import (
    directory_problem,
    existing_directory_problem,
    history_problem,
    output_file_problem,
    refuse,
)

if TYPE_CHECKING:
    from ..report.merge import ShardRun
    from ..report.models import RunReport


class _DiskError(NodevalError):
    """The merged run could not be written: the machine's problem (exit 7), not the input's."""

    infrastructure = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_dirs",
        type=Path,
        nargs="+",
        metavar="RUN_DIR",
        help="The shards' run directories (each holding report.json and _sessions/).",
    )
    parser.add_argument(
        "--to",
        type=Path,
        default=None,
        metavar="DIR",
        help="The merged run directory (default: reports/<new run id>).",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="PATH",
        help="Gate the merged run against this baseline (report.json or run directory).",
    )
    parser.add_argument(
        "--allow-missing",
        action="store_true",
        default=False,
        help="Merge even when a shard's run is missing: its cases count as not run.",
    )
    parser.add_argument(
        "--history",
        type=Path,
        default=None,
        metavar="PATH",
        help="The run history to append to (default: history.sqlite beside the merged run; "
        "'' appends nowhere).",
    )
    parser.add_argument(
        "--summary-md",
        type=Path,
        default=None,
        metavar="PATH",
        help=(
            "Also write the Markdown job summary here (GITHUB_STEP_SUMMARY, when set, gets it too)."
        ),
    )
    parser.add_argument(
        "--rootdir",
        type=Path,
        default=None,
        help="The project the cases' paths are relative to, for report.html (default: guessed "
        "as `nodeval report` does).",
    )


def run(args: argparse.Namespace) -> int:
    from ..report.merge import check_compatible, load_shards, merge_reports, missing_shards

    run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2) + "-merged"
    target = args.to or Path("reports") / run_id
    _check_options(target, args)
    runs = load_shards(args.run_dirs)
    check_compatible(runs)
    missing = missing_shards(runs)
    total = runs[0].report.shard.total if runs[0].report.shard else 0
    if missing and not args.allow_missing:
        named = ", ".join(f"{k}/{total}" for k in missing)
        raise NodevalError(
            f"shard {named} missing: no run among "
            f"{', '.join(map(str, args.run_dirs))} is that shard; "
            "pass its run directory, or --allow-missing to count its cases as not run"
        )
    if (target / "report.json").exists() and target.resolve() not in {
        r.path.resolve() for r in runs
    }:
        raise NodevalError(f"{target}: already holds a run (report.json); choose another --to")
    report = merge_reports(runs, run_id, missing)
    diff = _gate(report, args.baseline)
    _write(report, runs, target, args)
    _print(report, diff, target, missing, total)
    return report.exit_status


def _check_options(target: Path, args: argparse.Namespace) -> None:
    """The paths the command line names, checked before anything is read or written: one that
    cannot be used is the command line's mistake (exit 4), not the machine's."""
    if args.rootdir is not None:
        refuse("--rootdir", existing_directory_problem(args.rootdir))
    refuse("--to" if args.to else "the merged run directory", directory_problem(target))
    history = _history_path(args.history, target)
    if history is not None:
        refuse("--history" if args.history else "the run history", history_problem(history))
    if args.summary_md is not None:
        refuse("--summary-md", output_file_problem(args.summary_md))


def _gate(report: RunReport, baseline: Path | None) -> Any:
    """The baseline gate on the merged run, with the shards' policy; the merged exit status
    becomes 6 when it FAILs and the tests passed (as in pytest)."""
    if baseline is None:
        return None
    from ..report.baseline import EXIT_GATE_FAILED, compare, gate_section, load, policy_from

    try:
        policy = policy_from(report.gate_policy)
    except (TypeError, ValueError) as exc:
        raise NodevalError(f"gate_policy of the shards: {exc}") from None
    diff = compare(load(baseline), report, policy)
    report.gate = gate_section(diff, str(baseline))
    if diff.breached and report.exit_status == 0:
        report.exit_status = EXIT_GATE_FAILED
    return diff


def _write(report: RunReport, runs: list[ShardRun], target: Path, args: argparse.Namespace) -> None:
    from ..journal.writer import write_atomic
    from ..report.html import read_history, write_html
    from ..report.merge import copy_sessions
    from ..report.models import write_report
    from ..report.terminal import summary_lines
    from .report import guess_rootdir

    try:
        copy_sessions(runs, target)
        write_report(report, target)
        summary = summary_lines(report, divergences=True)
        write_atomic(target / "summary.txt", "\n".join(summary) + "\n")
    except OSError as exc:
        raise _DiskError(f"{target}: cannot write the merged run: {exc}") from None
    history = _history_path(args.history, target)
    if history is not None:
        _append_history(history, report)
    case_dirs = [c.directory for c in report.cases]
    rootdir = args.rootdir or guess_rootdir(target, case_dirs)
    trends = read_history(history, [c.id for c in report.cases])
    write_html(report, target, rootdir=rootdir, history=trends)
    _write_summary_md(report, target, args.summary_md)


def _history_path(option: Path | None, target: Path) -> Path | None:
    if option is None:
        return target.parent / "history.sqlite"
    return None if str(option) in ("", ".") else option


def _append_history(path: Path, report: RunReport) -> None:
    import sqlite3

    from ..report.history import append

    try:
        append(path, report)
    except (OSError, sqlite3.Error) as exc:
        raise _DiskError(f"could not append to the run history {path}: {exc}") from None


def _write_summary_md(report: RunReport, target: Path, option: Path | None) -> None:
    from ..report.summary_md import summary_targets, write_summary

    links = {"report.html": str(target / "report.html"), "report.json": str(target / "report.json")}
    for path, append in summary_targets(option):
        try:
            write_summary(report, path, links, append=append)
        except OSError as exc:
            raise _DiskError(f"{path}: cannot write the Markdown summary: {exc}") from None


def _print(report: RunReport, diff: Any, target: Path, missing: list[int], total: int) -> None:
    from ..report.terminal import format_diff_table, summary_lines

    for line in summary_lines(report):
        print(line)
    if diff is not None:
        print("\n".join(format_diff_table(diff)))
    if missing:
        print(
            f"nodeval merge: shard(s) {', '.join(f'{k}/{total}' for k in missing)} missing: "
            "their cases are not run"
        )
    merged = report.merged_from
    print(
        f"nodeval merge: {len(merged)} run(s) merged into {target} "
        f"(exit status {report.exit_status})"
    )
