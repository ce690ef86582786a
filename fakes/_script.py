"""Loading scenario scripts (YAML files or dicts) into pydantic models, with clear errors."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, Union

from pydantic import BaseModel, ValidationError

__all__ = ["ScriptError", "ScriptSource", "load_script"]

ModelT = TypeVar("ModelT", bound=BaseModel)

ScriptSource = Union[str, "os.PathLike[str]", Mapping[str, Any], BaseModel]
"""What a fake accepts as its script: a YAML path, a mapping, or the model itself."""


class ScriptError(ValueError):
    """A fake's script or catalogue is malformed; the message names the file and field."""


def load_script(model: type[ModelT], source: ScriptSource, *, what: str) -> ModelT:
    """Validate `source` (a model, a mapping, or a path to a YAML file) as `model`.

    `what` names the format in messages, e.g. ``"LLM script"``.
    """
    if isinstance(source, model):
        return source
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        return _validate(model, _read_yaml(path, what), origin=str(path), what=what)
    if isinstance(source, Mapping):
        return _validate(model, source, origin=f"<{what} dict>", what=what)
    raise ScriptError(
        f"{what}: expected a path to a YAML file, a mapping or a {model.__name__}, "
        f"got {type(source).__name__}"
    )


def _read_yaml(path: Path, what: str) -> Any:
    import yaml  # lazy: only scripts read from files need it

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ScriptError(f"{path}: cannot read {what}: {err.strerror or err}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ScriptError(f"{path}: {what} is not valid YAML: {err}") from None
    if not isinstance(data, Mapping):
        raise ScriptError(
            f"{path}: {what} must be a mapping at the top level, got {type(data).__name__}"
        )
    return data


def _validate(model: type[ModelT], data: Any, *, origin: str, what: str) -> ModelT:
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ScriptError(_describe(err, origin=origin, what=what)) from None


def _describe(err: ValidationError, *, origin: str, what: str) -> str:
    lines = [f"{origin}: invalid {what} ({err.error_count()} problem(s)):"]
    for problem in err.errors(include_url=False):
        where = ".".join(str(part) for part in problem["loc"]) or "<top level>"
        lines.append(f"  {where}: {problem['msg']}")
    return "\n".join(lines)
