"""Running a feed's JSON Schema where the hand checks doubt an entry, with readable messages."""

from __future__ import annotations

import functools
import importlib.resources
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from floorctl.feed_checks import _entry_problems
from floorctl.feed_messages import _a, _json_type, _show, format_path, show_value
from floorctl.feed_rules import (
    FEED_ID,
    IDENTITY_FIELDS,
    MAX_ADAPTERS,
    MAX_FEED_VERSION,
    SCHEMA_FILES,
    _Path,
)
from floorctl.feed_v3_checks import _v3_entry_problems

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator, ValidationError


# --- checking ---------------------------------------------------------------------------------


@functools.cache
def _validator(version: int) -> Draft202012Validator:
    """The compiled schema of one version, loaded once from the installed package."""
    # Imported here: a feed whose every part the hand checks prove clean never needs it.
    from jsonschema import Draft202012Validator  # noqa: PLC0415

    resource = importlib.resources.files("floorctl._schemas") / SCHEMA_FILES[version]
    schema = json.loads(resource.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _check(document: dict[str, Any], version: int, *, whole: bool = False) -> list[tuple[str, str]]:
    """Schema and semantic problems of a decoded document.

    The schema is run on the top level and on every adapter entry that is not provably
    clean; ``whole=True`` runs it on every entry (tests compare both ways). An entry is clean
    when it has exactly the three string fields and passes the semantic checks, which are
    each at least as strict as the schema's keywords for that field (a test holds the two
    in step). Running jsonschema on 100,000 clean entries would cost seconds and find nothing.
    """
    semantic: dict[str, str] = {}
    target = document
    adapters = document.get("adapters")
    entry_problems = _v3_entry_problems if version >= 3 else _entry_problems
    if isinstance(adapters, dict):
        doubtful = {}
        for name, entry in adapters.items():
            if not entry_problems(name, entry, semantic) and not whole:
                continue
            doubtful[name] = entry
        target = {**document, "adapters": doubtful}
        if not doubtful and not whole and top_level_clean(document, version):
            # Nothing for the schema to find: jsonschema is not even loaded.
            return []
    problems: list[tuple[str, str]] = []
    for error in _validator(version).iter_errors(target):
        for path, message, superseded in describe_schema_error(error):
            # A semantic message says the same thing as a pattern or length error, better.
            if superseded and path in semantic:
                continue
            problems.append((path, message))
    problems.extend(semantic.items())
    return problems


_TOP_FIELDS = {
    1: frozenset({"schema_version", "adapters"}),
    2: frozenset({"schema_version", "adapters", *IDENTITY_FIELDS}),
    3: frozenset({"schema_version", "adapters", *IDENTITY_FIELDS}),
}
_MAX_TIME_CHARS = 64


def top_level_clean(document: dict[str, Any], version: int) -> bool:
    """True only when the feed schema of ``version`` finds nothing wrong with the top level
    of ``document`` once its adapters are taken as clean (a mutation test holds this and
    the schemas in step); False means "ask the schema", not "invalid".

    Each test here is at least as strict as the schema's keywords: exact types (no bool for
    an integer, no 1.0), whole-string matches, the same length limits.
    """
    keys = document.keys()
    if "schema_version" not in keys or "adapters" not in keys:
        return False
    if version == 3:
        identity = keys & set(IDENTITY_FIELDS)
        if not keys <= _TOP_FIELDS[3] or identity not in (set(), set(IDENTITY_FIELDS)):
            return False
    elif keys != _TOP_FIELDS.get(version):
        return False
    value, adapters = document["schema_version"], document["adapters"]
    if type(value) is not int or value != version or type(adapters) is not dict:
        return False
    if len(adapters) > MAX_ADAPTERS:
        return False
    if "feed_id" not in keys:
        return True
    feed_id, number = document["feed_id"], document["version"]
    if type(feed_id) is not str or not FEED_ID.match(feed_id):
        return False
    if type(number) is not int or not 1 <= number <= MAX_FEED_VERSION:
        return False
    return all(
        type(document[name]) is str and 1 <= len(document[name]) <= _MAX_TIME_CHARS
        for name in ("published", "expires")
    )


def describe_schema_error(error: ValidationError) -> Iterator[tuple[str, str, bool]]:
    """Schema errors as (path, message, superseded-by-a-semantic-check) in our own words.

    jsonschema's messages embed the whole offending value; ours stay one short line.
    """
    parts: _Path = tuple(error.absolute_path)
    instance = error.instance
    keyword = error.validator
    if "propertyNames" in error.absolute_schema_path:
        # jsonschema reports a bad key at its object; point at the key itself.
        yield format_path((*parts, str(instance))), "not a valid adapter name", True
    elif keyword == "additionalProperties" and isinstance(instance, dict):
        allowed = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        names = ", ".join(allowed)
        for key in instance:
            if key not in allowed:
                yield format_path((*parts, key)), f"unknown field (allowed: {names})", False
    elif keyword == "required" and isinstance(instance, dict):
        required = error.validator_value
        for key in required if isinstance(required, list) else []:
            if key not in instance:
                yield format_path((*parts, key)), "required field missing", False
    elif keyword == "type":
        expected = error.validator_value
        yield format_path(parts), f"must be {_a(expected)}, not {_json_type(instance)}", False
    elif keyword == "minLength":
        yield format_path(parts), "must not be empty", True
    elif keyword == "maxLength" and isinstance(instance, str):
        limit = error.validator_value
        yield (
            format_path(parts),
            f"too long: {len(instance):,} characters (at most {limit:,})",
            True,
        )
    elif keyword == "pattern":
        yield format_path(parts), f"{show_value(instance)} does not have the required form", True
    elif keyword == "maxProperties":
        yield format_path(parts), f"too many entries (at most {error.validator_value:,})", False
    elif keyword == "maxItems" and isinstance(instance, list):
        limit = error.validator_value
        yield format_path(parts), f"too many items: {len(instance):,} (at most {limit:,})", False
    elif keyword == "enum" and isinstance(error.validator_value, list):
        allowed = ", ".join(str(v) for v in error.validator_value)
        yield format_path(parts), f"{show_value(instance)} is not one of {allowed}", False
    elif (
        keyword == "dependentRequired"
        and isinstance(instance, dict)
        and isinstance(error.validator_value, dict)
    ):
        # Each field of a group names the others; one message per missing field, naming
        # the group it belongs to (an entry has several: the floor, the package).
        for present, needed in error.validator_value.items():
            members = {present, *needed}
            group = ", ".join(k for k in error.validator_value if k in members)
            for key in needed if present in instance else []:
                if key not in instance:
                    yield format_path((*parts, key)), f"give all of {group}, or none", False
    elif keyword == "not" and isinstance(instance, dict):
        yield format_path(parts), "a range ends with fixed or last_affected, not both", False
    else:
        yield format_path(parts), _show(error.message, limit=200), False
