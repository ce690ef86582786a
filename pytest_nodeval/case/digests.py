"""Digests of a case's own files, kept in its journal's header: is the journal current?

`--nodeval-record-mode=missing` (and `nodeval record --record-mode missing`) records a case
only when its journal is missing or was recorded from other files than the case has now. A
recording's header keeps, by name relative to the case directory, a sha256 of case.yaml,
assertions.yaml and every file under input/ (the config, the inputs, the fakes' scripts, the
world's seed files, skills); a dataset row's, of its own row instead of the dataset file. The
agent's own code is not a file of the case: after changing it, record with `all`.

Line endings are read as LF, so a checkout that turns them into CRLF (git's autocrlf) does
not make every journal stale. A header without digests (a journal made before they existed)
counts as current: upgrading records nothing, and the next recording of the case adds them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import JournalError
from ..journal.events import EVENTS_FILE
from ..journal.reader import read_header
from ..journal.sameness import describe_changes
from ..journal.writer import recover_journal
from . import ASSERTIONS_FILE, CASE_FILE, INPUT_DIR, JOURNAL_DIR

if TYPE_CHECKING:
    from .dataset import Row

IGNORED = frozenset({"__pycache__", ".DS_Store", ".git"})
"""Names an editor, Python or the OS leave in a directory; no part of the case."""


def file_digest(path: Path) -> str:
    """The sha256 of a file's bytes, line endings read as LF (as `config_digest` is written)."""
    data = path.read_bytes().replace(b"\r\n", b"\n")
    return "sha256:" + hashlib.sha256(data).hexdigest()[:16]


def case_digests(
    directory: Path, row: Row | None = None, dataset: Path | None = None
) -> dict[str, str]:
    """The case's files, by POSIX name relative to `directory`, with their digests, in name
    order (so the header is written the same way every time). A dataset row's journal keeps
    its own row's digest instead of the whole dataset's, so editing one row makes that row's
    journal stale alone."""
    digests = _file_digests(directory, dataset)
    if row is not None and dataset is not None:
        name = dataset.relative_to(directory.resolve()).as_posix()
        digests.pop(name, None)
        fields = json.dumps(row.fields, sort_keys=True, ensure_ascii=False).encode()
        digests[f"{name}#{row.id}"] = "sha256:" + hashlib.sha256(fields).hexdigest()[:16]
    return {name: digests[name] for name in sorted(digests)}


def _file_digests(directory: Path, dataset: Path | None) -> dict[str, str]:
    files = [directory / CASE_FILE, directory / ASSERTIONS_FILE]
    if dataset is not None:
        files.append(directory / dataset.relative_to(directory.resolve()))
    inputs = directory / INPUT_DIR
    if inputs.is_dir():
        files += [
            path
            for path in inputs.rglob("*")
            if path.is_file() and not IGNORED & set(path.relative_to(directory).parts)
        ]
    found = {path.relative_to(directory).as_posix(): path for path in files if path.is_file()}
    return {name: _digest_or_why(path) for name, path in found.items()}


def _digest_or_why(path: Path) -> str:
    """A file the case holds but this process cannot read (a world seed file made unreadable
    on purpose) has no digest: it is named as unreadable, never a traceback, and the case
    counts as changed for as long as it stays so."""
    try:
        return file_digest(path)
    except OSError as exc:
        return f"unreadable: {exc.strerror or type(exc).__name__}"


def journal_staleness(
    directory: Path, row: Row | None = None, dataset: Path | None = None
) -> str | None:
    """Why the case in `directory` (or its dataset's `row`) needs a new recording under record
    mode `missing`, in a few words ("no journal", "assertions.yaml edited"); None when its
    journal is current."""
    journal = directory / JOURNAL_DIR / row.id if row is not None else directory / JOURNAL_DIR
    recover_journal(journal)  # an install a killed process left half done: the journal is back
    if not (journal / EVENTS_FILE).is_file():
        return "no journal"
    try:
        recorded = read_header(journal).case_digests
    except JournalError:
        return "its journal's header.json cannot be read"
    if recorded is None:
        return None  # recorded before digests existed: it cannot say, and counts as current
    return describe_changes(recorded, case_digests(directory, row, dataset))
