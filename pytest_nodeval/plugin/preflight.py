"""What a run's options name, checked in pytest_configure, before any test runs.

A run writes its report directory, the run history and a Markdown summary only at its end:
a path there that cannot be written would cost a whole run (or fail every attempt) before
anyone heard of it. A bad --nodeval-shard, or a --nodeval-case no case directory has, would
be found only at collection, and an xdist worker cannot stop the run cleanly there. Each
problem is a usage error (exit status 4) naming the option or ini key, and nothing is written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ..paths import directory_problem, history_problem, output_file_problem
from .keys import case_roots, resolved_key, settings_of

SHOWN_IDS = 10
"""How many case ids an unknown --nodeval-case error lists."""


def check_options(config: pytest.Config) -> None:
    where = str(config.inipath) if config.inipath else "ini"
    _check_selection(config, where)
    _check_outputs(config, where)
    _check_from_turn(config)


def _check_from_turn(config: pytest.Config) -> None:
    """--nodeval-from-turn goes live at turn N: a run that replays everything cannot."""
    if config.stash[resolved_key]["from_turn"] is None:
        return
    settings = settings_of(config)
    if settings.from_turn is None or settings.attempt_mode in ("live", "record"):
        return
    mode = settings.mode if settings.mode == settings.attempt_mode else "record (replaying)"
    _refuse(
        settings.from_turn_source,
        f"runs turn {settings.from_turn} onward live, so it needs --nodeval-mode live or "
        f"record (with --nodeval-record-mode all or missing); this run's mode is {mode}",
    )


def _check_selection(config: pytest.Config, where: str) -> None:
    """The options that choose what runs: --nodeval-shard, nodeval_cases, --nodeval-case."""
    shard = config.getoption("nodeval_shard")
    if shard:
        from .shard import parse_shard

        parse_shard(shard)  # raises the usage error that names the value
    roots = case_roots(config)
    for root in roots:  # a missing root is fine: a project without cases yet
        if root.exists() and not root.is_dir():
            _refuse(f"nodeval_cases ({where})", f"{root} is a file, not a directory of cases")
    if config.getoption("nodeval_case"):
        _check_case_ids(config.getoption("nodeval_case"), roots)


def _check_outputs(config: pytest.Config, where: str) -> None:
    """What the controller writes at the end: the report directory, history and summary."""
    values = config.stash[resolved_key]
    from_cli = config.getoption("nodeval_report_dir")
    _refuse(
        "--nodeval-report-dir" if from_cli else f"nodeval_report_dir ({where})",
        directory_problem(values["report_dir"]),
    )
    if values["history"] is not None:
        _refuse(f"nodeval_history ({where})", history_problem(values["history"]))
    summary = config.getoption("nodeval_summary_md")
    if summary:
        path = config.invocation_params.dir / summary
        _refuse("--nodeval-summary-md", output_file_problem(path))


def check_from_turn_cases(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every case selected for a --nodeval-from-turn run can continue live from that turn
    (runner/session.py `from_turn_problem`); else a usage error naming the first that cannot,
    under xdist too (keys.refuse_selection). A case that does not load is left to its test,
    which reports the bad file."""
    settings = settings_of(config)
    if settings.from_turn is None:
        return
    from ..case.directory import load_case
    from ..errors import NodevalError
    from ..runner.session import from_turn_problem
    from .keys import case_ref, refuse_selection

    problems: list[str] = []
    for directory in dict.fromkeys(ref.directory for ref in map(case_ref, items) if ref):
        try:
            problem = from_turn_problem(load_case(Path(directory)), settings.from_turn)
        except NodevalError:
            continue
        if problem is not None:
            problems.append(problem)
    if problems:
        more = f" (and {len(problems) - 1} other case(s))" if len(problems) > 1 else ""
        refuse_selection(config, items, f"{settings.from_turn_source}: {problems[0]}{more}")


def limit_journals(config: pytest.Config) -> None:
    """Apply nodeval_max_journal_bytes: a bigger golden journal is refused before it is read."""
    where = str(config.inipath) if config.inipath else "ini"
    raw = str(config.getini("nodeval_max_journal_bytes")).strip()
    limit = int(raw) if raw.isdigit() else 0
    if limit < 1:
        _refuse(
            f"nodeval_max_journal_bytes ({where})",
            f"{raw!r} is not a whole number of bytes above 0",
        )
    from ..case.directory import JOURNALS

    JOURNALS.limit_bytes = limit


def _refuse(source: str, problem: str | None) -> None:
    if problem is not None:
        raise pytest.UsageError(f"{source}: {problem}")


def _check_case_ids(wanted: list[str], roots: tuple[Path, ...]) -> None:
    """Every --nodeval-case names a case directory, or a row of a dataset case (`<case>/<row>`)
    or a variant (`<case>@<label>`): its case is checked here, the rest at collection; one not
    collected is refused later."""
    known = _case_ids(roots)
    unknown = sorted({w for w in wanted if w.partition("@")[0].partition("/")[0] not in known})
    if unknown:
        shown = ", ".join(sorted(known)[:SHOWN_IDS]) + (", ..." if len(known) > SHOWN_IDS else "")
        raise pytest.UsageError(
            f"--nodeval-case: no case {', '.join(map(repr, unknown))} under nodeval_cases "
            f"({', '.join(map(str, roots))}); the cases there: {shown or 'none'}"
        )


def _case_ids(roots: tuple[Path, ...]) -> set[str]:
    from ..case.directory import find_case_dirs, read_case_id
    from ..errors import NodevalError

    ids = set()
    for directory in find_case_dirs(list(roots)):
        try:
            ids.add(read_case_id(directory))
        except NodevalError:  # a broken case.yaml is collection's to report, with its line
            ids.add(directory.name)
    return ids


def check_baseline(path: Path | None, from_cli: bool) -> None:
    """A baseline that cannot be read is a usage error at the start, not after the whole run."""
    if path is None or (not path.exists() and not from_cli):
        return  # nodeval_baseline naming a file not blessed yet: the run says how to make one
    # Imported only when there is a baseline: report.models loads pydantic, which a run
    # without one (every run of a project with no nodeval case) should not pay for.
    from ..errors import NodevalError
    from ..report.baseline import load

    try:
        load(path)
    except NodevalError as exc:
        source = "--nodeval-baseline" if from_cli else "nodeval_baseline"
        raise pytest.UsageError(f"{source}: {exc}") from None
