"""One strict model base and one YAML loader for every file a user writes.

``lakehouse.yaml``, ``engines.yaml``, ``policies.yaml`` and replay plans are all read with
:func:`read_yaml_mapping` and validated with :func:`validate_file`, so every problem is one
line that names the file and the key (``conf/engines.yaml: engines[2].version: ...``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from lakehouse.errors import ConfigError

__all__ = ["StrictModel", "describe_validation_error", "is_secret_key", "read_yaml_mapping", "validate_file"]


class StrictModel(BaseModel):
    """Frozen, and unknown keys are errors: a misspelt key never passes silently."""

    model_config = ConfigDict(extra="forbid", frozen=True)


ModelT = TypeVar("ModelT", bound=BaseModel)


def read_yaml_mapping(path: Path, *, what: str = "file", hint: str = "") -> dict[str, Any]:
    """The top-level mapping of a YAML file; an empty file is an empty mapping.

    ``what`` names the kind of file in the not-found message and ``hint`` says how to get
    one (``"pass --conf PATH"``).
    """
    if not path.is_file():
        raise ConfigError(f"{path}: {what} not found" + (f"; {hint}" if hint else ""))
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}:{where} is not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys to values")
    return data


SECRET_KEY_WORDS = ("password", "api_key", "secret", "token")
"""Keys whose values are never shown in a message: a bad value is named, not printed."""


def is_secret_key(key: str) -> bool:
    """True for a dotted key that holds a secret (``iceberg.password``, ``lineage.api_key``)."""
    last = key.rsplit(".", 1)[-1].lower()
    return any(word in last for word in SECRET_KEY_WORDS)


def describe_validation_error(path: Path, exc: ValidationError, *, where: str | None = None) -> str:
    """The first validation problem as one line naming the file and the dotted key.

    ``where`` replaces the dotted key when the caller can name the place better (an engine
    as ``engines[2] (correlation@3)``).
    """
    first = exc.errors()[0]
    key = where or ".".join(str(part) for part in first["loc"]) or "(top level)"
    if first["type"] == "extra_forbidden":
        return f"{path}: unknown key '{key}'; remove it or check its spelling"
    if first["type"] == "missing":
        return f"{path}: missing key '{key}'"
    value = first.get("input")
    shown = f" has invalid value {value!r}" if not isinstance(value, dict | list) else ""
    if is_secret_key(key):
        shown = " has an invalid value (not shown: a secret)"
    return f"{path}: key '{key}'{shown}: {first['msg']}"


def validate_file(model: type[ModelT], path: Path, raw: dict[str, Any]) -> ModelT:
    """``model.model_validate(raw)``, with any error turned into a one-line ConfigError."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(path, exc)) from None
