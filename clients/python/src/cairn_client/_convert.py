"""JSON to the generated dataclasses: camelCase fields to snake_case attributes, nested
objects and lists converted by the attributes' declared types, the answer kept in `raw`."""

from __future__ import annotations

import dataclasses
import re
import sys
import typing
from typing import Any, Dict, Mapping, Type, TypeVar

T = TypeVar("T", bound="Model")

_hints: Dict[type, Dict[str, Any]] = {}


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


@dataclasses.dataclass(frozen=True)
class Model:
    """A daemon answer: its fields as attributes in snake_case, the JSON in `raw`."""

    @classmethod
    def from_json(cls: Type[T], data: Mapping[str, Any]) -> T:
        hints = _hints.get(cls)
        if hints is None:
            module = sys.modules[cls.__module__]
            hints = typing.get_type_hints(cls, vars(module))
            _hints[cls] = hints
        names = {f.name for f in dataclasses.fields(cls)}
        values: Dict[str, Any] = {}
        for key, value in data.items():
            attribute = snake(key)
            if (attribute not in names or attribute == "raw") and attribute + "_" in names:
                attribute += "_"
            if attribute in names and attribute != "raw":
                values[attribute] = _convert(hints[attribute], value)
        for f in dataclasses.fields(cls):
            if f.name not in values and f.name != "raw" and f.default is dataclasses.MISSING:
                values[f.name] = None
        return cls(**values, raw=dict(data))  # type: ignore[call-arg]


def _convert(annotation: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Union:
        inner = [arg for arg in args if arg is not type(None)]
        return _convert(inner[0], value) if len(inner) == 1 else value
    if origin in (list, typing.List) and isinstance(value, list):
        return [_convert(args[0], item) for item in value] if args else value
    if origin in (dict, typing.Dict) and isinstance(value, dict):
        return {key: _convert(args[1], item) for key, item in value.items()} if args else value
    if isinstance(annotation, type) and issubclass(annotation, Model) and isinstance(value, dict):
        return annotation.from_json(value)
    return value
