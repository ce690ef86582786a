"""`nodeval record PATH...`: record cases live and write each one's journal/ if the recording
passes the case's checks (`--force` writes it anyway).

A PATH is a case directory, or a root whose case directories are all recorded. How a case
records depends on what it has, first match wins:

1. `_record/record.py`: run as a script in the case directory; it writes the journal into the
   directory named by NODEVAL_RECORD_JOURNAL (`pytest_nodeval.record_agent` does that).
2. no `input/config.yaml` (your own agent): the Python tests bound to the case run with
   `pytest --nodeval-mode=record --nodeval-case=ID`, and the plugin installs the recording.
3. otherwise the reference engine runs the case from input/config.yaml.

A new journal replaces the old one only when it passed, and atomically (install_journal).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import NodevalError
from ..text import printable

if TYPE_CHECKING:
    from ..case.directory import Case
    from ..runner.session import Observed

SCRIPT = Path("_record") / "record.py"
PROJECT_FILES = ("pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="Case directories, or roots whose case directories are all recorded.",
    )
    parser.add_argument(
        "--world",
        default=None,
        choices=("docker", "bwrap", "local"),
        help="World backend (default: the case's world.backend, else the best the machine has).",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="Write the journal even when the recording fails the case's checks.",
    )


@dataclass(frozen=True)
class Outcome:
    directory: Path
    recorded: bool
    detail: str
    change: str = ""


def run(args: argparse.Namespace) -> int:
    directories = _case_dirs(args.paths)
    outcomes = []
    for directory in directories:
        before = _shape(directory / "journal")
        outcome = _record(directory, args)
        if outcome.recorded:
            outcome = Outcome(
                directory, True, outcome.detail, _change(before, _shape(directory / "journal"))
            )
            print(
                printable(f"recorded {directory / 'journal'}: {outcome.detail} ({outcome.change})")
            )
        else:
            print(printable(f"not recorded {directory}: {outcome.detail}"), file=sys.stderr)
        outcomes.append(outcome)
    if len(outcomes) > 1:
        print(_summary(outcomes))
    return 0 if all(o.recorded for o in outcomes) else 1


def _case_dirs(paths: list[Path]) -> list[Path]:
    from ..case import CASE_FILE
    from ..case.directory import find_case_dirs

    found: list[Path] = []
    for path in paths:
        if (path / CASE_FILE).is_file():
            found.append(path)
        elif path.is_dir():
            cases = find_case_dirs([path])
            if not cases:
                raise NodevalError(f"{path}: no case directories under it (none has a {CASE_FILE})")
            found += cases
        else:
            raise NodevalError(
                f"{path}: not a case directory or a directory of cases (no such directory)"
            )
    return list(dict.fromkeys(found))


def _record(directory: Path, args: argparse.Namespace) -> Outcome:
    from ..case import CONFIG_FILE

    if (directory / SCRIPT).is_file():
        return _record_with_script(directory, args)
    if not (directory / CONFIG_FILE).is_file():
        return _record_bound_tests(directory, args)
    return _record_with_engine(directory, args)


# -- the three ways --------------------------------------------------------------------------


def _record_with_engine(directory: Path, args: argparse.Namespace) -> Outcome:
    from ..case.directory import load_case
    from ..journal.writer import install_journal
    from ..runner.session import AttemptSettings, run_case

    case = load_case(directory)
    scratch = Path(tempfile.mkdtemp(prefix="nodeval-record-")) / "journal"
    backend = _world_backend(case, args.world)
    settings = AttemptSettings(mode="record", world_backend=backend, install=False)
    observed = run_case(case, settings, scratch, grade=_grader(case))
    return _install_if_passed(case, observed, args.force, install_journal)


def _record_with_script(directory: Path, args: argparse.Namespace) -> Outcome:
    from ..case.directory import load_case
    from ..journal.reader import read_journal
    from ..journal.writer import install_journal
    from ..runner.session import RECORD_JOURNAL_ENV, Observed

    case = load_case(directory)
    scratch = Path(tempfile.mkdtemp(prefix="nodeval-record-")) / "journal"
    env = {**os.environ, RECORD_JOURNAL_ENV: str(scratch)}
    done = subprocess.run(
        [sys.executable, str(SCRIPT)],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return Outcome(
            directory,
            False,
            f"{SCRIPT} exited {done.returncode}: {_tail(done.stderr or done.stdout)}",
        )
    try:
        journal = read_journal(scratch)
    except NodevalError as exc:
        return Outcome(
            directory, False, f"{SCRIPT} wrote no usable journal to ${RECORD_JOURNAL_ENV}: {exc}"
        )
    observed = Observed(case.id, "record", journal.events, scratch)
    return _install_if_passed(case, observed, args.force, install_journal)


def _record_bound_tests(directory: Path, args: argparse.Namespace) -> Outcome:
    from ..case.directory import read_case_id

    case_id = read_case_id(directory)
    project = _project_root(directory)
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "--nodeval-mode=record",
        "--repeat",
        "1",
        f"--nodeval-case={case_id}",
        str(directory.resolve().parent),
    ]
    if args.force:
        command.append("--nodeval-record-force")
    if args.world:
        command.append(f"--nodeval-world={args.world}")
    done = subprocess.run(command, cwd=project, capture_output=True, text=True, check=False)
    notes = [line.removeprefix("nodeval: ") for line in done.stdout.splitlines()]
    notes = [line for line in notes if line.startswith(("recorded: ", "kept: ", "not written: "))]
    if done.returncode == 0 and any(n.startswith("recorded: ") for n in notes):
        return Outcome(
            directory, True, f"the Python tests bound to case {case_id!r} passed in record mode"
        )
    if done.returncode == 5 or "no test is bound" in done.stdout + done.stderr:
        return Outcome(
            directory,
            False,
            f"case {case_id!r} has no input/config.yaml and no {SCRIPT}, and no test "
            f"under {project} is bound to it: add @pytest.mark.nodeval_case({case_id!r}) "
            f"to the test that runs your agent, or a {SCRIPT}",
        )
    why = "; ".join(notes) or _tail(done.stdout + done.stderr)
    return Outcome(
        directory,
        False,
        f"`pytest --nodeval-mode=record --nodeval-case={case_id}` exited {done.returncode}: {why}",
    )


# -- shared parts ------------------------------------------------------------------------------


def _install_if_passed(case: Case, observed: Observed, force: bool, install: Any) -> Outcome:
    metrics = observed.metrics()
    problem = _problem(case, observed)
    if problem is not None and not (force and observed.status == "ok"):
        return Outcome(
            case.directory,
            False,
            f"{problem} (the existing journal is unchanged; the attempt's "
            f"journal is in {observed.journal_dir})",
        )
    install(observed.journal_dir, case.journal_dir)
    forced = f"; forced: {problem}" if problem else ""
    world = f" in a {observed.world_backend} world" if observed.world_backend else ""
    return Outcome(
        case.directory,
        True,
        f"{metrics['llm_calls']} LLM call(s), {metrics['tool_calls']} tool "
        f"call(s), {len(observed.events)} events{world}{forced}",
    )


def _problem(case: Case, observed: Observed) -> str | None:
    """Why this recording must not become the golden journal, or None when it passed."""
    from ..checks.assertions import evaluate_all

    if observed.status != "ok":
        return f"the session ended '{observed.status}': {observed.metrics()['reason']}"
    failed = [r for r in evaluate_all(case.assertions, observed.evidence) if r.status == "failed"]
    if failed:
        return (
            f"the recording failed {len(failed)} assertion(s), first: {failed[0].description}: "
            f"{failed[0].message.splitlines()[0] if failed[0].message else ''} "
            "(--force writes it anyway)"
        )
    return None


def _grader(case: Case) -> Any:
    """Record grades judge rubrics live, so full mode can reuse the verdicts later."""
    from ..people.judge import make_grader

    rubrics = [a for a in case.assertions if a.kind == "judge"]
    return make_grader(rubrics, None, None, reuse=False) if rubrics else None


def _world_backend(case: Case, requested: str | None) -> str | None:
    """--world, else the case's world.backend, else the best the machine has; a Docker engine
    that cannot give the world image falls back to bubblewrap, saying so (never for --world)."""
    from ..errors import WorldError
    from ..world.select import backend_problem, choose_backend

    if requested is not None:
        return requested
    backend = case.spec.world.backend
    if choose_backend(backend) != "docker" or not _needs_world(case):
        return backend
    try:
        from ..world.image import ensure_image

        ensure_image()
    except WorldError as exc:
        if backend_problem("bwrap") is not None:
            raise
        print(
            f"{case.directory}: the Docker engine has no world image ({_tail(str(exc))}); "
            "recording in bubblewrap instead",
            file=sys.stderr,
        )
        return "bwrap"
    return backend


def _needs_world(case: Case) -> bool:
    from ..runner.session import WORLD_TOOLS

    return case.config is not None and bool(WORLD_TOOLS & {t.name for t in case.config.tools})


def _project_root(directory: Path) -> Path:
    """The nearest directory above the case with a pytest configuration file (pytest's rootdir)."""
    for candidate in directory.resolve().parents:
        if any((candidate / name).is_file() for name in PROJECT_FILES):
            return candidate
    return directory.resolve().parent


def _tail(text: str, lines: int = 3) -> str:
    from ..text import printable

    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return printable(" | ".join(kept)) or "(no output)"


def _shape(journal: Path) -> tuple[str, ...] | None:
    """The event types of a journal, in order: enough to say whether a recording changed."""
    from ..journal.reader import read_journal

    if not journal.is_dir():
        return None
    try:
        return tuple(e.type for e in read_journal(journal, warn=lambda _: None).events)
    except NodevalError:
        return ("<unreadable>",)


def _change(before: tuple[str, ...] | None, after: tuple[str, ...] | None) -> str:
    if before is None:
        return "new"
    if before == after:
        return f"same {len(before)} event types"
    return f"changed: {len(before)} -> {len(after or ())} events"


def _summary(outcomes: list[Outcome]) -> str:
    recorded = [o for o in outcomes if o.recorded]
    changed = [o for o in recorded if not o.change.startswith("same")]
    failed = [o for o in outcomes if not o.recorded]
    lines = [
        f"{len(outcomes)} case(s): {len(recorded)} recorded ({len(changed)} new or changed), "
        f"{len(failed)} not recorded"
    ]
    lines += [f"  changed  {o.directory}: {o.change}" for o in changed]
    lines += [f"  failed   {o.directory}" for o in failed]
    return "\n".join(lines)
