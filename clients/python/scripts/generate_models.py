"""Writes src/cairn_client/models.py from the daemon's OpenAPI document (docs/openapi.json).

Every object schema becomes a frozen dataclass whose attributes are the JSON fields in
snake_case (`memoriesUsed` -> `memories_used`); `raw` keeps the answer as sent. Run it after
`cargo xtask openapi`; `tests/test_models.py` fails when the file is out of date.

    python scripts/generate_models.py [path/to/openapi.json]
"""

from __future__ import annotations

import json
import keyword
import re
import sys
from pathlib import Path
from typing import Any, Dict, List

HERE = Path(__file__).resolve().parent
DEFAULT_SPEC = HERE.parent.parent.parent / "docs" / "openapi.json"
OUTPUT = HERE.parent / "src" / "cairn_client" / "models.py"


def snake(name: str) -> str:
    text = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
    return text + "_" if keyword.iskeyword(text) else text


def python_type(schema: Dict[str, Any], objects: Dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return name if name in objects else "Any"
    for key in ("oneOf", "anyOf", "allOf"):
        if key in schema:
            options = [option for option in schema[key] if option.get("type") != "null"]
            nullable = len(options) < len(schema[key])
            inner = python_type(options[0], objects) if len(options) == 1 else "Any"
            return f"Optional[{inner}]" if nullable and inner != "Any" else inner
    kind = schema.get("type")
    nullable = isinstance(kind, list) and "null" in kind
    if isinstance(kind, list):
        rest = [k for k in kind if k != "null"]
        kind = rest[0] if len(rest) == 1 else None
    inner = {
        "string": "str",
        "integer": "int",
        "number": "float",
        "boolean": "bool",
    }.get(kind or "", "Any")
    if kind == "array":
        inner = f"List[{python_type(schema.get('items', {}), objects)}]"
    elif kind == "object":
        extra = schema.get("additionalProperties")
        value = python_type(extra, objects) if isinstance(extra, dict) else "Any"
        inner = f"Dict[str, {value}]"
    return f"Optional[{inner}]" if nullable and inner != "Any" else inner


def generate(spec: Dict[str, Any]) -> str:
    schemas: Dict[str, Any] = spec["components"]["schemas"]
    for name, schema in list(schemas.items()):
        if "allOf" in schema:
            # One object of every part's fields (a context pack plus its files, say).
            merged: Dict[str, Any] = {"type": "object", "properties": {}, "required": []}
            for part in schema["allOf"]:
                part = schemas[part["$ref"].rsplit("/", 1)[-1]] if "$ref" in part else part
                merged["properties"].update(part.get("properties", {}))
                merged["required"] += part.get("required", [])
            merged["description"] = schema.get("description", name)
            schemas[name] = merged
    objects = {name: s for name, s in schemas.items() if "properties" in s}
    lines: List[str] = [
        '"""The daemon\'s answers as typed objects, generated from docs/openapi.json by',
        "scripts/generate_models.py: do not edit by hand.",
        "",
        "Attributes are the JSON fields in snake_case; `raw` holds the answer as the daemon sent it.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from dataclasses import dataclass, field",
        "from typing import Any, Dict, List, Optional",
        "",
        "from ._convert import Model",
        "",
        "__all__ = [",
    ]
    lines += [f'    "{name}",' for name in sorted(objects)]
    lines += ["]", ""]
    for name in sorted(objects):
        schema = objects[name]
        required = set(schema.get("required", []))
        description = (schema.get("description") or name).strip().splitlines()[0].replace('"""', "'")
        lines += ["", "@dataclass(frozen=True)", f"class {name}(Model):", f'    """{description}"""', ""]
        fields = []
        for json_name, prop in schema["properties"].items():
            annotation = python_type(prop, objects)
            # `raw` is the answer as sent: a field of that name is `raw_`.
            attribute = "raw_" if json_name == "raw" else snake(json_name)
            if json_name in required:
                fields.append((0, f"    {attribute}: {annotation}"))
            else:
                optional = annotation if annotation.startswith("Optional[") or annotation == "Any" else f"Optional[{annotation}]"
                fields.append((1, f"    {attribute}: {optional} = None"))
        lines += [line for _, line in sorted(fields, key=lambda item: item[0])]
        lines.append('    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)')
    return "\n".join(lines) + "\n"


def main() -> None:
    spec_path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_SPEC
    OUTPUT.write_text(generate(json.loads(spec_path.read_text())))
    print(f"wrote {OUTPUT}")


if __name__ == "__main__":
    main()
