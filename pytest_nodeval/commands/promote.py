"""`nodeval promote <sample> --id <case-id>`: make a reviewable case directory from a sample."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import NodevalError
from ..paths import directory_problem, refuse

if TYPE_CHECKING:  # the command table imports this module for --help: keep it light
    from ..sampling.promote import Promoted, PromoteOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "sample",
        metavar="SAMPLE",
        nargs="?",
        help="A sample directory, or the id of one in --samples-dir (see `nodeval samples`).",
    )
    parser.add_argument(
        "--id",
        "--case-id",
        dest="case_id",
        required=True,
        metavar="CASE_ID",
        help="Id of the new case: lower case letters, digits, '.', '_' and '-' "
        "(with --to-dataset: of the new row: letters, digits, '.', '_' and '-').",
    )
    parser.add_argument(
        "--to-dataset",
        default=None,
        metavar="CASE",
        help="Append the sample to a dataset case (its directory, or its id under --cases-dir) "
        "as row --id, its fields read back from the user turns the case's inputs.yaml "
        "templates give.",
    )
    parser.add_argument(
        "--set",
        dest="values",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="With --to-dataset: a field of the new row that no user turn holds (an expected "
        "answer); repeat for more.",
    )
    parser.add_argument(
        "--from-otel",
        type=Path,
        default=None,
        metavar="FILE",
        help="Promote a traced session instead of a sample: an OTLP JSON lines file "
        "(a Collector's file exporter, Phoenix, `nodeval export-otel --content`).",
    )
    parser.add_argument(
        "--trace",
        default=None,
        metavar="TRACE_ID",
        help="With --from-otel: the trace (hex id) of the session to promote.",
    )
    parser.add_argument(
        "--cases-dir",
        type=Path,
        default=Path("scenarios"),
        metavar="DIR",
        help="Where case directories live (default: scenarios).",
    )
    parser.add_argument(
        "--owner", default=None, help="case.yaml owner (default: git config user.name, else $USER)."
    )
    parser.add_argument(
        "--tag",
        dest="tags",
        action="append",
        default=[],
        metavar="TAG",
        help="Add a tag (a pytest marker) besides 'promoted'; repeat for more.",
    )
    parser.add_argument(
        "--freshness",
        default="90d",
        help="Warn when the journal is older than this (default: 90d).",
    )
    parser.add_argument(
        "--force", action="store_true", help="Replace an existing case directory of that id."
    )
    parser.add_argument(
        "--no-verify",
        dest="verify",
        action="store_false",
        help="Do not replay the new case once to check that it is green.",
    )
    parser.add_argument(
        "--samples-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="Where to look up a sample given by id (default: ~/.nodeval/samples).",
    )


def run(args: argparse.Namespace) -> int:
    from ..sampling.promote import PromoteOptions, promote, resolve_sample
    from ..sampling.store import DEFAULT_SAMPLES_DIR

    refuse("--cases-dir", directory_problem(args.cases_dir))
    options = PromoteOptions(
        case_id=args.case_id,
        cases_dir=args.cases_dir,
        owner=args.owner,
        tags=tuple(args.tags),
        freshness=args.freshness,
        force=args.force,
        verify=args.verify,
    )
    if args.to_dataset is not None:
        return _to_dataset(args)
    if args.values:
        raise NodevalError("--set FIELD=VALUE is for --to-dataset CASE")
    if args.from_otel is not None:
        source, promoted = _from_otel(args, options)
    else:
        if args.sample is None or args.trace is not None:
            raise NodevalError(
                "name a SAMPLE to promote, or a trace with --from-otel FILE --trace TRACE_ID"
            )
        sample = resolve_sample(args.sample, args.samples_dir or DEFAULT_SAMPLES_DIR)
        source, promoted = str(sample), promote(sample, options)
    print(f"promoted {source} -> {promoted.case_dir}/")
    print(
        f"  journal/ copied ({promoted.events} events); "
        f"assertions.yaml proposes: {', '.join(promoted.assertions)}"
    )
    for note in promoted.notes:
        print(f"  note: {note}")
    _report_replay(promoted, args.case_id)
    return 0


def _from_otel(args: argparse.Namespace, options: PromoteOptions) -> tuple[str, Promoted]:
    from ..sampling.otel_import import promote_trace

    if args.sample is not None or args.trace is None:
        raise NodevalError(
            "--from-otel FILE takes --trace TRACE_ID (the session's trace) and no SAMPLE"
        )
    promoted = promote_trace(args.from_otel, args.trace, options)
    return f"trace {args.trace} of {args.from_otel}", promoted


_CASE_FLAGS = {"--owner": "owner", "--tag": "tags", "--force": "force"}
"""Flags about the case.yaml of a new case, which a dataset's new row does not have."""


def _to_dataset(args: argparse.Namespace) -> int:
    from ..sampling.promote import resolve_sample
    from ..sampling.promote_row import RowOptions, promote_row
    from ..sampling.store import DEFAULT_SAMPLES_DIR

    if args.from_otel is not None or args.sample is None:
        raise NodevalError(
            "--to-dataset CASE takes a SAMPLE (promote a trace to a case of its own first)"
        )
    for_a_case = [flag for flag, given in _CASE_FLAGS.items() if getattr(args, given)]
    if for_a_case:
        raise NodevalError(
            f"{', '.join(for_a_case)}: set what case.yaml says of a new case; a row of "
            f"{args.to_dataset} takes its case's"
        )
    values = {}
    for item in args.values:
        name, equals, value = item.partition("=")
        if not equals or not name:
            raise NodevalError(f"--set {item!r}: not FIELD=VALUE")
        values[name] = value
    sample = resolve_sample(args.sample, args.samples_dir or DEFAULT_SAMPLES_DIR)
    options = RowOptions(args.case_id, args.to_dataset, args.cases_dir, values, args.verify)
    promoted = promote_row(sample, options)
    print(f"promoted {sample} -> row {args.case_id} of {args.to_dataset}")
    print(f"  {promoted.case_dir}/ copied ({promoted.events} events)")
    _report_replay(promoted, args.case_id)
    return 0


def _report_replay(promoted: Promoted, case_id: str) -> None:
    problems, failure = promoted.replay_problems, promoted.failure
    if problems is None:
        print(f"  review assertions.yaml, then: pytest -k {case_id}")
        return
    if not problems:
        print(
            "  replay check: green in deterministic mode. "
            f"Review assertions.yaml, then: pytest -k {case_id}"
        )
        return
    if failure:
        print(
            f"  the captured session failed ({failure}); "
            "the case fails until a person decides what correct "
            "behaviour is (see the comment at the top of assertions.yaml):",
            file=sys.stderr,
        )
    else:
        print("  replay check: NOT green; what fails:", file=sys.stderr)
    for problem in problems:
        print("    - " + problem.replace("\n", "\n      "), file=sys.stderr)
