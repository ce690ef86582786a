"""`nodeval promote SAMPLE --to-dataset CASE --id ROW`: a sampled session as a new dataset row.

A dataset case's user turns are templates (`What is {{ row.question }}?`). The session fits
the case when each of its user turns (and each answer it gave to `ask_user`) is what the
case's template for that turn gives with some values of the row's fields: those values are
read back from the turns. Fields no turn holds (an expected answer) come from `--set
FIELD=VALUE`. The row is appended to the dataset file, the sample's journal copied to
`journal/<row>/` byte for byte, and the row replayed once, as `nodeval promote` does for a
new case. A session that does not fit, a field left without a value or an id already taken is
refused in one line, with the dataset and the journals left as they were.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..case import INPUTS_FILE
from ..case.dataset import ROW_ID, dataset_path, read_rows
from ..case.directory import CaseHead, find_case_dirs, read_case_head
from ..errors import NodevalError
from ..journal.writer import write_atomic
from ..yamlfiles import load_yaml
from .promote import Promoted, SampleFacts, case_id_of, read_sample_journal, verify_replay

_ROW_FIELD = re.compile(r"\{\{\s*row\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@dataclass(frozen=True, slots=True)
class RowOptions:
    row_id: str
    case: str
    """The dataset case: its directory, or its id under `cases_dir`."""
    cases_dir: Path = Path("scenarios")
    values: dict[str, str] = field(default_factory=dict)
    """`--set FIELD=VALUE`: the fields the session's turns do not hold."""
    verify: bool = True


def promote_row(sample: Path, options: RowOptions) -> Promoted:
    """Append the sample to the dataset case as row `options.row_id`; see the module doc."""
    head = _dataset_case(options)
    rows_path = dataset_path(head.directory, str(head.spec.dataset))
    rows = read_rows(rows_path)
    journal_dir = head.directory / "journal" / options.row_id
    _refuse_taken(options.row_id, rows_path, [r.id for r in rows], journal_dir)
    journal = read_sample_journal(sample)
    facts = SampleFacts.of(journal, sample)
    order = list(dict.fromkeys(name for row in rows for name in row.fields))  # CSV: the header
    values = _row_values(head, facts, [n for n in order if n != "id"], options.values)
    row = {name: options.row_id if name == "id" else values[name] for name in order}
    _install_row(head, rows_path, row, sample / "journal", journal_dir)
    problems = verify_replay(head.directory, options.row_id) if options.verify else None
    return Promoted(journal_dir, len(journal.events), [], facts.failure, problems)


def _dataset_case(options: RowOptions) -> CaseHead:
    given = Path(options.case)
    if given.is_dir():
        head = read_case_head(given)
    else:
        found = [d for d in find_case_dirs([options.cases_dir]) if case_id_of(d) == options.case]
        if not found:
            raise NodevalError(
                f"--to-dataset {options.case!r}: no case directory, nor a case of that id "
                f"under {options.cases_dir}"
            )
        head = read_case_head(found[0])
    if head.spec.dataset is None:
        raise NodevalError(
            f"--to-dataset {options.case!r}: {head.directory / 'case.yaml'} names no dataset: "
            "file; promote to a new case with --id alone"
        )
    return head


def _refuse_taken(row_id: str, rows_path: Path, ids: list[str], journal_dir: Path) -> None:
    if not ROW_ID.fullmatch(row_id):
        raise NodevalError(
            f"--id {row_id!r} is not a valid row id: letters, digits, '.', '_' and '-' only"
        )
    if row_id in ids:
        raise NodevalError(f"--id {row_id!r}: {rows_path} has a row of that id already")
    if journal_dir.exists():
        raise NodevalError(
            f"--id {row_id!r}: {journal_dir} exists, the journal of a row the dataset no "
            "longer has; remove it with `nodeval clean --orphan-journals`, or choose another id"
        )


def _row_values(
    head: CaseHead, facts: SampleFacts, names: list[str], given: dict[str, str]
) -> dict[str, str]:
    """The new row's fields, in the dataset's order: read from the turns, else from --set."""
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise NodevalError(
            f"--set {unknown[0]}: the dataset's rows have no such field; "
            f"their fields: {', '.join(names)}"
        )
    read = _values_in_turns(head, facts)
    clash = next((n for n in given if n in read and read[n] != given[n]), None)
    if clash is not None:
        raise NodevalError(
            f"--set {clash}={given[clash]!r}: the session's turns give {clash} = {read[clash]!r}"
        )
    values = {**read, **given}
    missing = [name for name in names if name not in values]
    if missing:
        raise NodevalError(
            f"the session's turns hold no value for {', '.join(missing)}; give "
            + " ".join(f"--set {name}=VALUE" for name in missing)
        )
    return {name: values[name] for name in names}


def _values_in_turns(head: CaseHead, facts: SampleFacts) -> dict[str, str]:
    path = head.directory / INPUTS_FILE
    inputs, answers = _turn_templates(path)
    values: dict[str, str] = {}
    for kind, templates, turns in (
        ("user turn", inputs, facts.inputs),
        ("answer", answers, facts.answers),
    ):
        if len(templates) != len(turns):
            raise NodevalError(
                f"the session has {len(turns)} {kind}(s) and {path} {len(templates)}: "
                "it does not fit the case"
            )
        for number, (template, turn) in enumerate(zip(templates, turns, strict=True), 1):
            for name, value in _match(template, turn, f"{path}: {kind} {number}").items():
                if values.setdefault(name, value) != value:
                    raise NodevalError(
                        f"{path}: {kind} {number} gives {name} = {value!r}, an earlier turn "
                        f"{values[name]!r}: the session does not fit the case"
                    )
    return values


def _turn_templates(path: Path) -> tuple[list[str], list[str]]:
    user = load_yaml(path)
    user = user.get("user") if isinstance(user, dict) else None
    if not isinstance(user, dict) or user.get("kind") != "scripted":
        raise NodevalError(
            f"{path}: only a scripted user's turns can be read back into a row "
            "(this case's user is not scripted)"
        )
    inputs = [str(text) for text in user.get("inputs") or []]
    answers = [str(a.get("text", "")) for a in user.get("answers") or [] if isinstance(a, dict)]
    return inputs, answers


def _match(template: str, turn: str, where: str) -> dict[str, str]:
    """The row fields that make `template` render as `turn`; a turn it cannot give is an
    error naming the template."""
    pattern, seen, end = [], set(), 0
    for found in _ROW_FIELD.finditer(template):
        pattern.append(re.escape(template[end : found.start()]))
        name = found.group(1)
        pattern.append(f"(?P={name})" if name in seen else f"(?P<{name}>.*?)")
        seen.add(name)
        end = found.end()
    rest = template[end:]
    literal = _ROW_FIELD.sub("", template)
    if "{{" in literal or "{%" in literal:
        raise NodevalError(
            f"{where}: {template!r} uses more than {{{{ row.FIELD }}}}; promote can read back "
            "plain row fields only"
        )
    matched = re.fullmatch("".join(pattern) + re.escape(rest), turn, re.DOTALL)
    if matched is None:
        raise NodevalError(
            f"{where}: the session's {turn[:80]!r} is not what {template!r} gives: "
            "the session does not fit the case"
        )
    return matched.groupdict()


def _install_row(
    head: CaseHead, rows_path: Path, row: dict[str, str], journal: Path, target: Path
) -> None:
    """Copy the journal in, then add the row; undo both if the case cannot load the row."""
    original = rows_path.read_text(encoding="utf-8")
    staging = target.with_name(f".promote-{target.name}-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        shutil.copytree(journal, staging)
        write_atomic(rows_path, _with_row(rows_path, original, row))
        head.load(row["id"])  # what promote wrote must be a row the plugin can collect
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        write_atomic(rows_path, original)
        raise


def _with_row(path: Path, text: str, row: dict[str, str]) -> str:
    text = text if not text or text.endswith("\n") else text + "\n"
    if path.suffix == ".jsonl":
        return text + json.dumps(row, ensure_ascii=False) + "\n"
    line = io.StringIO()
    csv.writer(line, lineterminator="\n").writerow(row.values())
    return text + line.getvalue()
