"""A dataset case: one case directory, one test per row of its `dataset:` file.

`case.yaml` names a file inside the case (`dataset: rows.jsonl`, JSON lines or CSV). Each row
has an `id` (letters, digits, '.', '_', '-', unique in the file) and any other fields; the
case's YAML files use them as `{{ row.<field> }}` (jinja2, strict; a matrix variant's values
as `{{ vars.<key> }}`, case/variants.py), expanded in each string value after the YAML is
parsed, so a row's text never changes the file's structure. Each row
is a scenario of its own, `<case>/<row id>`, with its own journal under `journal/<row id>/`.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import CaseFormatError

if TYPE_CHECKING:
    from jinja2 import Environment, Template

ROW_ID = re.compile(r"^[A-Za-z0-9._-]+$")
ROW_SEPARATOR = "/"
"""Between the case id and the row id in a row's scenario id and test id."""


@dataclass(frozen=True, slots=True)
class Row:
    id: str
    fields: dict[str, Any]
    """Every field of the row, `id` included."""


def dataset_path(directory: Path, name: str) -> Path:
    """The dataset file a case.yaml names, which must be inside the case directory."""
    path = (directory / name).resolve()
    if not path.is_relative_to(directory.resolve()):
        raise CaseFormatError(
            f"{directory / 'case.yaml'}: dataset: {name!r} is outside the case directory; "
            "name a file inside it, e.g. dataset: rows.jsonl"
        )
    if path.suffix not in (".jsonl", ".csv"):
        raise CaseFormatError(
            f"{directory / 'case.yaml'}: dataset: {name!r} must be a .jsonl or .csv file"
        )
    return path


def read_rows(path: Path) -> tuple[Row, ...]:
    """The rows of a dataset file, read once per version of the file."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise CaseFormatError(f"{path}: missing (the case's dataset: file)") from None
    return _read_rows(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _read_rows(path: Path, mtime_ns: int, size: int) -> tuple[Row, ...]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CaseFormatError(f"{path}: not UTF-8 text ({exc.reason})") from None
    found = _csv_rows(path, text) if path.suffix == ".csv" else _jsonl_rows(path, text)
    rows: dict[str, Row] = {}
    for where, fields in found:
        row_id = fields.get("id")
        if not isinstance(row_id, str) or not ROW_ID.fullmatch(row_id):
            shown = "no id" if row_id is None else f"id {row_id!r}"
            raise CaseFormatError(
                f"{where}: {shown}; each row needs an id of letters, digits, '.', '_' or '-'"
            )
        if row_id in rows:
            raise CaseFormatError(f"{where}: duplicate row id {row_id!r}; row ids must be unique")
        rows[row_id] = Row(row_id, fields)
    if not rows:
        raise CaseFormatError(f"{path}: no rows; a dataset case needs at least one")
    return tuple(rows.values())


def _jsonl_rows(path: Path, text: str) -> list[tuple[str, dict[str, Any]]]:
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            fields = json.loads(line)
        except ValueError as exc:
            raise CaseFormatError(f"{path}:{number}: not a JSON object: {exc}") from None
        if not isinstance(fields, dict):
            raise CaseFormatError(f"{path}:{number}: a row must be a JSON object")
        rows.append((f"{path}:{number}", fields))
    return rows


def _csv_rows(path: Path, text: str) -> list[tuple[str, dict[str, Any]]]:
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if not header:
        raise CaseFormatError(f"{path}: no header line (the first line names the fields)")
    rows = []
    for values in reader:
        if not values:
            continue
        if len(values) != len(header):
            raise CaseFormatError(
                f"{path}:{reader.line_num}: {len(values)} value(s) where the header has "
                f"{len(header)} ({', '.join(header)})"
            )
        rows.append((f"{path}:{reader.line_num}", dict(zip(header, values, strict=True))))
    return rows


def find_row(path: Path, row_id: str) -> Row:
    for row in read_rows(path):
        if row.id == row_id:
            return row
    raise CaseFormatError(f"{path}: no row with id {row_id!r}")


# -- templates ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Filling:
    """What `{{ ... }}` in a case's files is filled from: a dataset row (`row`), a matrix
    variant's values (`vars`), and how to say where they came from in an error."""

    context: dict[str, Any]
    source: str
    """"row 'sum' of rows.jsonl (its fields: id, question)", "--nodeval-matrix tone=formal"."""

    @classmethod
    def of(cls, row: Row | None, dataset: Path | None, variables: dict[str, str]) -> Filling:
        context: dict[str, Any] = {"vars": variables}
        sources = []
        if row is not None and dataset is not None:
            context["row"] = row.fields
            sources.append(
                f"row {row.id!r} of {dataset.name} (its fields: {', '.join(row.fields)})"
            )
        if variables:
            shown = ", ".join(f"{k}={v}" for k, v in variables.items())
            sources.append(f"--nodeval-matrix variant {shown}")
        return cls(context, " and ".join(sources))


def render(data: Any, filling: Filling, path: Path) -> Any:
    """`data` (parsed YAML) with `{{ row.<field> }}` and `{{ vars.<key> }}` expanded in every
    string in it."""
    if isinstance(data, str):
        return _render_text(data, filling, path) if "{{" in data or "{%" in data else data
    if isinstance(data, list):
        return [render(item, filling, path) for item in data]
    if isinstance(data, dict):
        return {key: render(value, filling, path) for key, value in data.items()}
    return data


def _render_text(text: str, filling: Filling, path: Path) -> str:
    from jinja2 import TemplateError, UndefinedError

    try:
        return _template(text).render(**filling.context)
    except UndefinedError as exc:
        raise CaseFormatError(
            f"{path}: cannot fill {text.strip()!r}: {exc.message}; it is filled from "
            f"{filling.source or 'nothing (no dataset row, no --nodeval-matrix variant)'}"
        ) from None
    except TemplateError as exc:
        raise CaseFormatError(f"{path}: template {text.strip()!r}: {exc}") from None


@lru_cache(maxsize=1024)
def _template(text: str) -> Template:
    return _environment().from_string(text)


@lru_cache(maxsize=1)
def _environment() -> Environment:
    from jinja2 import Environment, StrictUndefined

    # Text, not HTML: nothing is escaped; a field no row has is an error, never "".
    return Environment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
