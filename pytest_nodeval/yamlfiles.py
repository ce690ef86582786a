"""Reading YAML files into pydantic models with errors that name the file and the field."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, TypeVar, get_args

import yaml
from pydantic import BaseModel, ValidationError

from .errors import CaseFormatError

M = TypeVar("M", bound=BaseModel)

try:  # libyaml is many times faster; fall back to the pure-Python loader where it is missing.
    _Base: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _Base = yaml.SafeLoader


class _Loader(_Base):  # type: ignore[misc]
    """The safe loader, refusing a key given twice in one mapping (YAML would keep the last)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
                seen.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first given on line {first}; YAML would silently keep "
                    "the last one)",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep)


# The YAML a small case.yaml is: `key: word` lines and lists of words, each line matching one
# of these. A word starts with a letter and has no space or quote, so YAML reads it as a string
# unless it is one of the words below; numbers are plain decimal integers.
_FLAT_LINE = re.compile(
    r"(?P<key>[a-z_]+):(?: (?P<word>[A-Za-z][A-Za-z0-9._/-]*)|(?P<int> [1-9][0-9]{0,8})"
    r"|(?P<empty> \[\]))?|(?P<indent>  )?- (?P<item>[A-Za-z][A-Za-z0-9._/-]*)"
)
_NOT_STRINGS = frozenset({"yes", "no", "true", "false", "on", "off", "null"})
"""Words YAML 1.1 reads as booleans or null (in some of their spellings)."""


def flat_mapping(text: str) -> dict[str, Any] | None:
    """`text` as the YAML loader would read it, when it is a flat mapping of words, integers
    and lists of words (most case.yaml files); else None, and the loader reads it.

    Collection reads every case's case.yaml: this is several times faster than the loader
    on such a file. Anything it does not know (quotes, comments, other scalars, a key given
    twice, a word YAML would not read as a string) goes to the loader.
    """
    if not text.endswith("\n"):
        return None
    data: dict[str, Any] = {}
    items: list[str] | None = None  # the list the `- word` lines fill
    indent: str | None = None
    for line in text[:-1].split("\n"):
        found = _FLAT_LINE.fullmatch(line)
        if found is None:
            return None
        key, word, item = found["key"], found["word"], found["item"]
        if item is not None:
            if items is None or (indent is not None and indent != (found["indent"] or "")):
                return None
            indent = found["indent"] or ""
            if item.lower() in _NOT_STRINGS:
                return None
            items.append(item)
            continue
        if items is not None and not items or key in data or key in _NOT_STRINGS:
            return None  # a key with no value (null), a key given twice, or not a string
        if word is not None and word.lower() in _NOT_STRINGS:
            return None
        items, indent = None, None
        if word is not None:
            data[key] = word
        elif found["int"] is not None:
            data[key] = int(found["int"])
        elif found["empty"] is not None:
            data[key] = []
        else:
            data[key] = items = []
    return data if data and not (items is not None and not items) else None


_READ_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)


def _read_text(path: Path) -> str:
    """The file's text as `path.read_text(encoding="utf-8")` gives it (newlines translated,
    the same errors) at half its cost: collection reads every case.yaml (issue 33). The
    file is read with os.read, four system calls where a Python file object makes nine."""
    text = _read_bytes(path).decode("utf-8")
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _read_bytes(path: Path) -> bytes:
    fd = os.open(path, _READ_FLAGS)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    except OSError as exc:  # a directory on Linux: name it, as open() would
        raise type(exc)(exc.errno, exc.strerror, str(path)) from None
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def load_yaml(path: Path) -> Any:
    try:
        text = _read_text(path)
    except FileNotFoundError:
        raise CaseFormatError(f"{path}: missing") from None
    except UnicodeDecodeError as exc:
        raise CaseFormatError(
            f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    except OSError as exc:  # a directory where the file should be, no permission to read it
        raise CaseFormatError(
            f"{path}: cannot be read ({exc.strerror}); it must be a file"
        ) from None
    flat = flat_mapping(text)
    if flat is not None:
        return flat
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise CaseFormatError(f"{path}{where}: invalid YAML: {problem}") from None


def valid_regex(pattern: str) -> str:
    """A validator's check that a regex compiles: re.error is not a ValueError, so pydantic
    would let it escape as a traceback instead of an error naming the file and the key."""
    import re

    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{pattern!r} is not a valid regular expression ({exc})") from None
    return pattern


def load_model(model: type[M], path: Path, data: Any = None, *, optional: bool = False) -> M:
    """Validate a YAML file (or data read from it) against a model."""
    if data is None:
        data = load_yaml(path)
    if data is None and optional:
        data = {}
    return validate(model, data, path)


def validate(model: type[M], data: Any, path: Path | str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise CaseFormatError(describe_errors(path, exc, model)) from None


def describe_errors(path: Path | str, exc: ValidationError, model: type[BaseModel]) -> str:
    """One line per problem: `file: field.path: what is wrong (what is valid)`."""
    lines = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            valid = _fields_at(model, err["loc"][:-1])
            message = f"unknown key{f' (valid keys: {valid})' if valid else ''}"
        elif err["type"] == "missing":
            message = "required key is missing"
        elif "input" in err and err["type"] not in ("model_type", "dict_type"):
            message += f" (got {_short(err['input'])})"
        lines.append(f"{path}: {loc}: {message}")
    return "\n".join(dict.fromkeys(lines))


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """The keys valid at a location, found by walking the models' field annotations.

    A step may also be the tag of a discriminated union (e.g. "tool_called"), which
    picks that member.
    """
    candidates: list[type[BaseModel]] = [model]
    for part in loc:
        if isinstance(part, int):
            continue
        tagged = [c for c in candidates if part in _tags_of(c)]
        if tagged:
            candidates = tagged
            continue
        candidates = [
            m
            for c in candidates
            if part in c.model_fields
            for m in _models_in(c.model_fields[part].annotation)
        ]
        if not candidates:
            return ""
    return ", ".join(candidates[0].model_fields) if len(candidates) == 1 else ""


def _tags_of(model: type[BaseModel]) -> tuple[Any, ...]:
    kind = model.model_fields.get("kind")
    return get_args(kind.annotation) if kind is not None else ()


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
