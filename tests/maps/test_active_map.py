"""The runtime reads its floor map with ast and refuses anything but checked literal data."""

from __future__ import annotations

import pytest

from floorguard._maps.active_map import parse_map_module
from floorguard._maps.map_model import entries_hash, map_file_hash
from floorguard.errors import FloorMapError

ENTRIES = {"aider": {"min_safe_version": "0.60.0", "advisory_id": "BSA-0001", "note": "n"}}
HASH = entries_hash(ENTRIES)


def module(version: str = "1", stated: str = repr(HASH), entries: str = repr(ENTRIES)) -> str:
    return (
        f"FLOOR_MAP_VERSION = {version}\nFLOOR_MAP_HASH = {stated}\nFLOOR_MAP_ENTRIES = {entries}\n"
    )


def test_reads_a_consistent_map() -> None:
    active = parse_map_module(module(), "m.py")
    assert active.floor_map_hash == HASH
    assert active.map_version == 1
    assert active.floor_map["aider"].min_safe_version == "0.60.0"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (module(stated=repr("sha256:" + "0" * 64)), "tampered"),
        (module() + "FLOOR_MAP_HASH = 'x'\n", "assigned twice"),
        (module() + "try:\n    raise ValueError\nexcept ValueError as FLOOR_MAP_ENTRIES:\n"
         "    pass\n", "assigned twice"),
        (module() + "globals().update(FLOOR_MAP_ENTRIES={})\n", "can rebind the floor map"),
        (module() + "vars()['FLOOR_MAP_ENTRIES'] = {}\n", "can rebind the floor map"),
        (module() + "exec('FLOOR_MAP_ENTRIES = {}')\n", "can rebind the floor map"),
        (module() + "import sys\nsys.modules[__name__].FLOOR_MAP_ENTRIES = {}\n",
         "can rebind the floor map"),
        (module() + "setattr(__import__(__name__), 'FLOOR_MAP_ENTRIES', {})\n",
         "can rebind the floor map"),
        (module() + "import inspect\ninspect.currentframe().f_globals['FLOOR_MAP_ENTRIES'] = {}\n",
         "can rebind the floor map"),
        (module() + "from sys import _getframe\n_getframe().f_globals.clear()\n",
         "can rebind the floor map"),
        (module() + "def f():\n    pass\nf.__globals__['FLOOR_MAP_ENTRIES'] = {}\n",
         "can rebind the floor map"),
        (module() + "import gc\n[d.clear() for d in gc.get_referrers(gc)]\n",
         "can rebind the floor map"),
        (module() + "import builtins\nbuiltins.globals()['FLOOR_MAP_ENTRIES'] = {}\n",
         "can rebind the floor map"),
        (module() + "import builtins\nbuiltins.vars().update(FLOOR_MAP_ENTRIES={})\n",
         "can rebind the floor map"),
        (module() + "from sys import modules as m\nm[__name__].FLOOR_MAP_ENTRIES = {}\n",
         "can rebind the floor map"),
        (module() + "x = FLOOR_MAP_ENTRIES\nx['aider']['min_safe_version'] = '0.0.1'\n",
         "read at the top level"),
        (module() + "dict.clear(FLOOR_MAP_ENTRIES)\n", "read at the top level"),
        (module() + "(lambda d: d.clear())(FLOOR_MAP_ENTRIES)\n", "read at the top level"),
        (module() + "def f(d=dict.clear(FLOOR_MAP_ENTRIES)):\n    pass\n", "read at the top level"),
        (module(entries="dict(aider=1)"), "not a literal"),
        (module(version="-1"), "non-negative integer"),
        (module(version="True"), "non-negative integer"),
        (module(version="2**53"), "not a literal"),
        (module(version=str(2**53)), "non-negative integer up to 2\\^53 - 1"),
        (module(version="0x" + "f" * 4000), "m.py: FLOOR_MAP_VERSION is not a non-negative"),
        (module(stated="1"), "wrong type"),
        ("FLOOR_MAP_VERSION = 1\n", "no floor map"),
        ("FLOOR_MAP_VERSION = (\n", "does not parse"),
    ],
    ids=["hash-mismatch", "assigned-twice", "except-as", "globals-update", "vars-item",
         "exec", "sys-modules", "setattr-import", "frame-globals", "getframe-by-name",
         "function-globals", "collector-referrers", "builtins-globals", "builtins-vars",
         "modules-imported-as", "alias-then-item", "unbound-method",
         "lambda-call", "default-argument", "call-not-literal", "negative-version",
         "bool-version", "expression-version", "version-past-2^53", "huge-hex-version",
         "hash-not-string", "missing-names", "syntax-error"],
)  # fmt: skip
def test_refuses_a_map_module_that_cannot_be_trusted(text: str, message: str) -> None:
    with pytest.raises(FloorMapError, match=message):
        parse_map_module(text, "m.py")


def test_map_json_hash_reads_archived_and_published_forms() -> None:
    assert map_file_hash(repr(ENTRIES).replace("'", '"').encode(), "a.json") == HASH
    published = (
        b'{"schema_version": 1, "floor_map_hash": "' + HASH.encode() + b'", "map_version": 2, '
        b'"expires": "2030-01-01T00:00:00Z", "adapters": '
        + repr(ENTRIES).replace("'", '"').encode()
        + b"}"
    )
    assert map_file_hash(published, "p.json") == HASH
    # Not the published form (another field set): its members are read as adapters.
    loose = b'{"adapters": ' + repr(ENTRIES).replace("'", '"').encode() + b', "x": 1}'
    with pytest.raises(FloorMapError, match="floor map entry 'adapters'"):
        map_file_hash(loose, "p.json")


@pytest.mark.parametrize("data", [b"not json", b"[]", b'{"aider": {"note": "n"}}'])
def test_map_json_that_is_not_a_floor_map_is_refused(data: bytes) -> None:
    with pytest.raises(FloorMapError, match=r"x\.json"):
        map_file_hash(data, "x.json")


def test_a_module_compiling_a_pattern_at_its_top_level_is_read() -> None:
    # (compile() alone runs nothing: re.compile is no way into the namespace)
    text = "import re\n_PATTERN = re.compile(r'x')\n" + module()
    assert parse_map_module(text, "m.py").floor_map["aider"].min_safe_version == "0.60.0"


def test_a_function_that_reads_the_map_when_called_is_allowed() -> None:
    # Not run on import: the module's data is what the file states.
    text = module() + "def floor_of(name):\n    return FLOOR_MAP_ENTRIES[name]\n"
    assert parse_map_module(text, "m.py").floor_map_hash == HASH


@pytest.mark.parametrize(
    "document",
    [
        # A first copy of an adapter with a lower floor: a reader that keeps the first copy
        # would see that one, while the hash is of the last.
        '{"aider": {"min_safe_version": "0.1.0"}, ' + repr(ENTRIES).replace("'", '"')[1:],
        '{"schema_version": 1, "schema_version": 1, "adapters": {}}',
    ],
    ids=["repeated-adapter", "repeated-field"],
)
def test_map_json_with_a_repeated_key_has_no_hash(document: str) -> None:
    with pytest.raises(FloorMapError, match="repeats the key"):
        map_file_hash(document.encode(), "m.json")


def test_map_json_starting_with_a_byte_order_mark_has_no_hash() -> None:
    with pytest.raises(FloorMapError, match="not a floor-map JSON file"):
        map_file_hash(b"\xef\xbb\xbf" + repr(ENTRIES).replace("'", '"').encode(), "m.json")
