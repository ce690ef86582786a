"""`nodeval record PATH...`: record cases live and write each one's journal/ if the recording
passes the case's checks (`--force` writes it anyway).

A PATH is a case directory, or a root whose case directories are all recorded. How a case
records depends on what it has, first match wins:

1. `_record/record.py`: run as a script in the case directory; it writes the journal into the
   directory named by NODEVAL_RECORD_JOURNAL (`pytest_nodeval.record_agent` does that).
2. no `input/config.yaml` (your own agent): the Python tests bound to the case run with
   `pytest --nodeval-mode=record --nodeval-case=ID`, and the plugin installs the recording.
3. otherwise the reference engine runs the case from input/config.yaml.

`--record-mode` chooses the cases, as vcrpy's record modes: all (default); missing, only
those without a journal or whose files changed since it was recorded (case/digests.py); none,
no case, only a check that each has a journal.

A new journal replaces the old one only when it passed, and atomically. The first and third
ways record into a staging directory beside the case's journal/ and install it by a rename
(`recording_beside`, `install_staged`): nothing goes to the temp directory, and whatever
happens (a failure, a full disk, Ctrl-C, SIGTERM) the staging directory is removed. A full
disk is one line naming the path and the room needed, exit status 7 (infrastructure).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from ..errors import NO_ROOM_LINE, DiskFullError, NodevalError
from ..modes import RECORD_MODES
from ..report.models import EXIT_INFRA_ERROR as EXIT_INFRA
from ..text import printable

if TYPE_CHECKING:
    from ..case.directory import Case
    from ..runner.session import Observed

SCRIPT = Path("_record") / "record.py"
PROJECT_FILES = ("pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
CHILD_GRACE_S = 30.0
"""How long a child process (a record script, a pytest run) gets to clean up when stopped."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="Case directories (or their case.yaml), or roots whose cases are all recorded.",
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
    parser.add_argument(
        "--record-mode",
        default="all",
        choices=RECORD_MODES,
        help="Which cases record: all (default); missing: those without a journal or whose "
        "files changed since it was recorded; none: none, only check that every case has a "
        "journal (exit 1 naming those without).",
    )


@dataclass(frozen=True)
class Outcome:
    directory: Path
    recorded: bool
    detail: str
    change: str = ""
    infrastructure: bool = False
    """Not recorded for the machine's sake (a full disk, no key), not the agent's."""
    current: bool = False
    """Not run: --record-mode missing or none found its journal current (or present)."""


class Stopped(KeyboardInterrupt):
    """SIGTERM, raised where the main thread is so that every `finally` runs (staging
    directories removed, worlds closed) instead of the process vanishing mid-write."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


def run(args: argparse.Namespace) -> int:
    targets = _targets(_case_dirs(args.paths))
    try:
        with _sigterm_raises():
            outcomes = [_record_and_say(directory, row, args) for directory, row in targets]
    except KeyboardInterrupt as stop:
        signum = stop.signum if isinstance(stop, Stopped) else signal.SIGINT
        print(
            f"nodeval record: {stop or 'interrupted'}; the case being recorded keeps its journal",
            file=sys.stderr,
        )
        _die_by(signum)
        raise
    if len(outcomes) > 1:
        print(_summary(outcomes))
    return _exit_status(outcomes)


def _die_by(signum: int) -> None:
    """End as the signal would have (the status a parent sees), now that the scratch is gone.

    Dying by the signal runs no atexit hook, so a world the interrupt caught while it was
    being opened (before any `finally` owned it) is ended here."""
    from ..world import reaper

    reaper.end_all()
    sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _targets(directories: list[Path]) -> list[tuple[Path, str | None]]:
    """What records, in order: each case directory, a dataset case once per row."""
    from ..case.dataset import read_rows
    from ..case.directory import read_case_head

    targets: list[tuple[Path, str | None]] = []
    for directory in directories:
        head = read_case_head(directory)
        dataset = head.dataset
        if dataset is None:
            targets.append((directory, None))
        else:
            targets += [(directory, row.id) for row in read_rows(dataset)]
            _say_orphans(directory, {row.id for row in read_rows(dataset)})
    return targets


def _say_orphans(directory: Path, rows: set[str]) -> None:
    """Journals of rows the dataset no longer has: said, not removed (`nodeval clean` does)."""
    journals = directory / "journal"
    orphans = (
        sorted(p.name for p in journals.iterdir() if p.is_dir() and p.name not in rows)
        if journals.is_dir()
        else []
    )
    for name in orphans:
        print(
            printable(
                f"orphan journal {journals / name}: its row is no longer in the dataset "
                f"(`nodeval clean --orphan-journals {directory}` removes it)"
            ),
            file=sys.stderr,
        )


def _journal_of(directory: Path, row: str | None) -> Path:
    return directory / "journal" / row if row is not None else directory / "journal"


def _record_and_say(directory: Path, row: str | None, args: argparse.Namespace) -> Outcome:
    journal = _journal_of(directory, row)
    name = f"{directory} (row {row})" if row is not None else str(directory)
    kept = _kept_by_record_mode(directory, row, args.record_mode)
    if kept is not None:
        if kept.current:
            print(printable(f"skipped {journal}: {kept.detail}"))
        else:
            print(printable(f"not recorded {name}: {kept.detail}"), file=sys.stderr)
        return kept
    before = _shape(journal)
    outcome = _record(directory, row, args)
    if outcome.recorded:
        change = outcome.change or _change(before, _shape(journal))
        outcome = Outcome(directory, True, outcome.detail, change)
        print(printable(f"recorded {journal}: {outcome.detail} ({outcome.change})"))
    else:
        print(printable(f"not recorded {name}: {outcome.detail}"), file=sys.stderr)
    return outcome


def _kept_by_record_mode(directory: Path, row: str | None, record_mode: str) -> Outcome | None:
    """The outcome of a case its record mode does not record: under `missing`, one whose
    journal is current; under `none`, every one (a case without a journal fails). None: record."""

    if record_mode == "all":
        return None
    staleness = _staleness(directory, row)
    if record_mode == "missing":
        if staleness is not None:
            return None
        return Outcome(directory, False, "unchanged (journal current)", current=True)
    if staleness != "no journal":
        return Outcome(directory, False, "has a journal (--record-mode none)", current=True)
    return Outcome(
        directory,
        False,
        f"no journal, and --record-mode none records nothing: record it with "
        f"`nodeval record {directory}` (or --record-mode missing)",
    )


def _exit_status(outcomes: list[Outcome]) -> int:
    """0 when every case recorded (or was current); 7 when the machine is all that kept some
    from it (as pytest says it); else 1."""
    failed = [o for o in outcomes if not o.recorded and not o.current]
    if not failed:
        return 0
    return EXIT_INFRA if all(o.infrastructure for o in failed) else 1


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    """While recording, SIGTERM raises Stopped. Another handler set meanwhile (world.reaper
    wraps this one) stays; this one then does what the handler before it would have done."""
    recording = True

    def stop(signum: int, frame: FrameType | None) -> None:
        if recording:
            raise Stopped(signum)
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        recording = False
        if signal.getsignal(signal.SIGTERM) is stop:
            signal.signal(signal.SIGTERM, previous)


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
        elif path.name == CASE_FILE and path.is_file():
            found.append(path.parent)  # the case's own file, as an editor passes it
        else:
            what = "a file" if path.exists() else "no such directory"
            raise NodevalError(f"{path}: not a case directory or a directory of cases ({what})")
    return list(dict.fromkeys(found))


def _staleness(directory: Path, row: str | None) -> str | None:
    from ..case.digests import journal_staleness
    from ..case.directory import load_case

    if row is None:
        return journal_staleness(directory)
    case = load_case(directory, row)
    return journal_staleness(directory, case.row, case.dataset)


def _record(directory: Path, row: str | None, args: argparse.Namespace) -> Outcome:
    from ..case import CONFIG_FILE

    if row is not None and not (directory / CONFIG_FILE).is_file():
        return Outcome(
            directory,
            False,
            "a dataset case records with the reference engine (input/config.yaml); your own "
            "agent's rows record with `pytest --nodeval-mode=record`",
        )
    if (directory / SCRIPT).is_file() and row is None:
        return _record_with_script(directory, args)
    if not (directory / CONFIG_FILE).is_file():
        return _record_bound_tests(directory, args)
    return _record_with_engine(directory, row, args)


# -- the three ways --------------------------------------------------------------------------


def _record_with_engine(directory: Path, row: str | None, args: argparse.Namespace) -> Outcome:
    from ..case.directory import load_case
    from ..journal.writer import install_staged, recording_beside
    from ..runner.session import AttemptSettings, run_case

    case = load_case(directory, row)
    backend = _world_backend(case, args.world)
    settings = AttemptSettings(mode="record", world_backend=backend, install=False)
    with recording_beside(case.journal_dir) as staging:
        try:
            observed = run_case(case, settings, staging, grade=_grader(case))
        except DiskFullError as exc:
            return _no_room(directory, exc)
        return _install_if_passed(case, observed, args.force, install_staged)


def _record_with_script(directory: Path, args: argparse.Namespace) -> Outcome:
    from ..case.directory import load_case
    from ..journal.reader import read_journal
    from ..journal.writer import install_staged, recording_beside
    from ..runner.session import RECORD_JOURNAL_ENV, Observed

    case = load_case(directory)
    with recording_beside(case.journal_dir) as staging:
        env = {**os.environ, RECORD_JOURNAL_ENV: str(staging.resolve())}  # the script's cwd differs
        done = _run_child([sys.executable, str(SCRIPT)], cwd=directory, env=env)
        if done.returncode != 0:
            output = done.stderr or done.stdout
            no_room = _disk_full_lines(output)  # record_agent's DiskFullError, in a traceback
            return Outcome(
                directory,
                False,
                f"{SCRIPT} exited {done.returncode}: {'; '.join(no_room) or _tail(output)}",
                infrastructure=bool(no_room),
            )
        try:
            journal = read_journal(staging)
        except NodevalError as exc:
            return Outcome(
                directory,
                False,
                f"{SCRIPT} wrote no usable journal to ${RECORD_JOURNAL_ENV}: {exc}",
            )
        observed = Observed(case.id, "record", journal.events, staging)
        return _install_if_passed(case, observed, args.force, install_staged)


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
        "--nodeval-record-mode=all",  # this command chose the cases (an ini default must not)
        "--repeat",
        "1",
        f"--nodeval-case={case_id}",
        str(directory.resolve().parent),
    ]
    if args.force:
        command.append("--nodeval-record-force")
    if args.world:
        command.append(f"--nodeval-world={args.world}")
    done = _run_child(command, cwd=project)
    notes = [line.removeprefix("nodeval: ") for line in done.stdout.splitlines()]
    notes = [line for line in notes if line.startswith(("recorded: ", "kept: ", "not written: "))]
    if done.returncode == EXIT_INFRA:  # the machine's fault, which pytest says in a line
        notes = _disk_full_lines(done.stdout + done.stderr) or notes
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
        infrastructure=done.returncode == EXIT_INFRA,
    )


def _run_child(
    command: list[str], *, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a child to the end, capturing its output. Stopped early (Ctrl-C, SIGTERM), it gets a
    SIGTERM and time to clean up its own scratch (subprocess.run would SIGKILL it), and this
    process waits for it, so nothing writes into a staging directory after it is removed."""
    with subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as child:
        try:
            stdout, stderr = child.communicate()
        except BaseException:
            _stop_child(child)
            raise
    return subprocess.CompletedProcess(command, child.returncode, stdout, stderr)


def _stop_child(child: subprocess.Popen[str]) -> None:
    child.terminate()
    try:
        child.communicate(timeout=CHILD_GRACE_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()


def _disk_full_lines(output: str) -> list[str]:
    """The first line in which a child said it found no room to write (a DiskFullError's
    message, without pytest's decoration), or none."""
    for line in output.splitlines():
        found = NO_ROOM_LINE.search(line)
        if found:
            return [line[found.start() :].strip()]
    return []


def _no_room(directory: Path, exc: DiskFullError) -> Outcome:
    return Outcome(
        directory, False, f"{exc} (the existing journal is unchanged)", infrastructure=True
    )


# -- shared parts ------------------------------------------------------------------------------


def _install_if_passed(case: Case, observed: Observed, force: bool, install: Any) -> Outcome:
    metrics = observed.metrics()
    problem = _problem(case, observed)
    if problem is not None and not (force and observed.status == "ok"):
        return Outcome(
            case.directory,
            False,
            f"{problem} (the existing journal is unchanged)",
            infrastructure=observed.end is not None and observed.end.infra,
        )
    from ..journal.sameness import install_if_changed

    try:  # the same recording is not written again: no churn in git
        change = install_if_changed(case.journal_dir, observed.journal_dir, install)
    except DiskFullError as exc:
        return _no_room(case.directory, exc)
    forced = f"; forced: {problem}" if problem else ""
    world = f" in a {observed.world_backend} world" if observed.world_backend else ""
    return Outcome(
        case.directory,
        True,
        f"{metrics['llm_calls']} LLM call(s), {metrics['tool_calls']} tool "
        f"call(s), {len(observed.events)} events{world}{forced}",
        change or "unchanged",
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
    """A recording installed by a bound test's run, told apart by its event types alone."""
    if before is None:
        return "new"
    if before == after:
        return f"same {len(before)} event types"
    return f"changed: {len(before)} -> {len(after or ())} events"


def _summary(outcomes: list[Outcome]) -> str:
    recorded = [o for o in outcomes if o.recorded]
    changed = [o for o in recorded if not o.change.startswith(("same", "unchanged"))]
    current = [o for o in outcomes if o.current]
    failed = [o for o in outcomes if not o.recorded and not o.current]
    skipped = f"{len(current)} skipped, " if current else ""
    lines = [
        f"{len(outcomes)} case(s): {len(recorded)} recorded ({len(changed)} new or changed, "
        f"{len(recorded) - len(changed)} unchanged), {skipped}{len(failed)} not recorded"
    ]
    lines += [
        f"  new      {o.directory}"
        if o.change == "new"
        else f"  changed  {o.directory}: " + o.change.removeprefix("changed: ")
        for o in changed
    ]
    lines += [f"  failed   {o.directory}" for o in failed]
    return "\n".join(lines)
