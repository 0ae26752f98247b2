"""The limits, patterns and schema files that every feed check shares."""

from __future__ import annotations

import re

MAX_FEED_BYTES = 16 * 1024 * 1024
MAX_ADAPTERS = 100_000
MAX_VERSION_CHARS = 128
MAX_ADVISORY_ID_CHARS = 64
MAX_NOTE_CHARS = 1000

MAX_URL_CHARS = 2048

# Schema versions this floorctl reads, each with its own schema file.
SCHEMA_FILES = {1: "feed.v1.schema.json", 2: "feed.v2.schema.json", 3: "feed.v3.schema.json"}
# Schema 3 caps (kept in step with feed.v3.schema.json by a test): within 16 MiB anyway, but
# a cap per list keeps one adapter or one advisory from holding the whole budget.
MAX_ADVISORIES = 2048
MAX_ALIASES = 64
MAX_RANGES = 128
MAX_LISTED_VERSIONS = 4096
MAX_SEVERITY = 8
MAX_REFERENCES = 64
MAX_SCORE_CHARS = 256
SEVERITY_TYPES = ("CVSS_V2", "CVSS_V3", "CVSS_V4", "Ubuntu")
# The optional identity and freshness of a schema 3 feed: all four or none.
IDENTITY_FIELDS = ("feed_id", "version", "published", "expires")

Problem = tuple[str, str, str]
_Path = tuple[str | int, ...]

# `\Z`, not `$`: in Python `$` also matches before a trailing newline ("aider\n").
# The classes are ASCII ranges, so look-alike letters (Cyrillic, fullwidth) cannot match.
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}\Z")
FEED_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}\Z")
# A feed's version: at least 1, at most what every JSON reader holds exactly.
MAX_FEED_VERSION = 2**53 - 1
_ADVISORY_ID = re.compile(r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*\Z")
# Characters PEP 440 can use; checked before packaging parses (its regex is case-insensitive,
# so non-ASCII letters could in principle fold onto ASCII ones).
_VERSION_CHARS = re.compile(r"[A-Za-z0-9.!+_-]+\Z")
# Notes are rendered into a generated Python module: no string delimiter (`"`, hence `"""`),
# no escape character (`\`), and no jinja2 syntax, so a note can never close its literal or
# be read as template code. Apostrophes stay allowed because English needs them.
_NOTE_FORBIDDEN = re.compile(r'"|\\|\{\{|\}\}|\{%|%\}|\{#|#\}')
_NOTE_FORBIDDEN_WHY = {
    '"': "a double quote (notes become string literals in generated code)",
    "\\": "a backslash (notes become string literals in generated code)",
}
# Keys shown as `.key` in a JSON path; anything else is shown quoted, as `["key"]`.
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*\Z")
_MAX_SHOWN_KEY = 100

# Names for characters that unicodedata.name() does not know (controls, surrogates, ...).
_CATEGORY_WORDS = {
    "Cc": "a control character",
    "Cs": "a lone surrogate",
    "Co": "a private-use character",
    "Cn": "an unassigned code point",
}

_JSON_TYPES = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}
