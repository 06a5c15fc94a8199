"""The generated models match the daemon's OpenAPI document (docs/openapi.json)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_the_models_are_generated_from_the_current_document() -> None:
    spec = importlib.util.spec_from_file_location("generate_models", HERE.parent / "scripts" / "generate_models.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    import json

    document = json.loads(generator.DEFAULT_SPEC.read_text())
    expected = generator.generate(document)
    committed = generator.OUTPUT.read_text()
    assert committed == expected, "src/cairn_client/models.py is out of date: run python scripts/generate_models.py"
