"""What every SARIF log the CLIs write must satisfy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA_FILE = Path(__file__).parents[1] / "assets" / "sarif-schema-2.1.0.json"


def sarif_validator() -> jsonschema.Draft4Validator:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def assert_valid_sarif(document: Any) -> None:
    errors = sorted(sarif_validator().iter_errors(document), key=str)
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]
