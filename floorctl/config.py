"""floorctl's project configuration: the ``[tool.floorctl]`` table of a ``pyproject.toml``.

The table gives defaults for the options a project would otherwise repeat on every command
(``refresh --check`` in CI and in a pre-commit hook, ``publish``, ``sign``, ...)::

    [tool.floorctl]
    feeds = ["feeds/upstream.json", "https://example.org/floors.json"]
    module = "src/app/floor_map.py"
    template = "floorguard"
    trusted-keys = "keys/feed-publishers.pem"
    waivers = "feeds/waivers.json"
    signing-key = "/run/secrets/floor-signing.key"

Where it is read from: ``floorctl --config PATH``, else the nearest ``pyproject.toml`` from
the current folder upward. The nearest file is the project's, whether or not it has a
``[tool.floorctl]`` table: without one there is no configuration, and the search does not go
on to a parent folder's ``pyproject.toml`` (a nested project never inherits the paths of the
project around it).

Relative paths are relative to the configuration file's folder, wherever floorctl runs from;
they are handed to the commands relative to the current folder (``../feeds/x.json`` from a
subfolder), so that what a receipt records as a feed's source is the path as written when
floorctl runs beside the file, never an absolute path of the build machine. URLs and the
template names ``floorguard`` and ``bernstein`` are taken as written. No ``~`` or variable
expansion.

Everything here is a pure function of bytes and paths apart from :func:`find` and
:func:`load`, which read the file system.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from floorctl.errors import ConfigError
from floorguard._base.files import read_regular
from floorguard.errors import UnreadableFileError

FILE_NAME = "pyproject.toml"
TABLE = "[tool.floorctl]"
# A pyproject.toml is a few KiB; a cap keeps a huge or endless file from being read whole.
MAX_CONFIG_BYTES = 1024 * 1024

KEYS = ("feeds", "module", "template", "trusted-keys", "waivers", "signing-key")
# The built-in template names (floorctl.render.TEMPLATE_NAMES, which loads jinja2: not
# imported here, so that reading the configuration stays cheap; a test keeps them equal).
TEMPLATE_NAMES = ("floorguard", "bernstein")
_URL_SCHEMES = ("https://", "http://")
_PEM_MARK = "-----BEGIN"


@dataclass(frozen=True)
class Config:
    """The ``[tool.floorctl]`` table of ``source``, its paths ready to use from the current
    folder. A key the table does not set is None."""

    source: Path
    feeds: tuple[str, ...] | None = None
    module: Path | None = None
    template: str | None = None
    trusted_keys: Path | None = None
    waivers: Path | None = None
    signing_key: Path | None = None

    def values(self) -> dict[str, object]:
        """The keys the table sets (spelled as in the file) and their resolved values."""
        every = {
            "feeds": self.feeds,
            "module": self.module,
            "template": self.template,
            "trusted-keys": self.trusted_keys,
            "waivers": self.waivers,
            "signing-key": self.signing_key,
        }
        return {key: value for key, value in every.items() if value is not None}


def find(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` in ``start`` (an absolute folder) or above it."""
    for folder in (start, *start.parents):
        candidate = folder / FILE_NAME
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return None


def load(explicit: Path | None, cwd: Path) -> Config | None:
    """The configuration from ``explicit`` (``--config``), else from the nearest
    ``pyproject.toml`` above ``cwd`` (an absolute folder); None when there is none.

    An explicit file must hold a ``[tool.floorctl]`` table. Raises ConfigError (a usage
    error) for a file that cannot be read, invalid TOML, an unknown key or a wrong value.
    """
    if explicit is not None:
        # Resolved, so that its folder as seen from cwd has no symbolic link to step back out of.
        path, shown = (cwd / explicit).resolve(), explicit
    else:
        found = find(cwd)
        if found is None:
            return None
        path, shown = found, _relative(found, cwd)
    try:
        data = read_regular(path, max_bytes=MAX_CONFIG_BYTES, what="configuration")
    except UnreadableFileError as exc:
        raise ConfigError(f"cannot read the configuration: {exc}") from None
    return parse(data, shown, base=_relative(path.parent, cwd), required=explicit is not None)


def parse(data: bytes, source: Path, *, base: Path, required: bool = False) -> Config | None:
    """The ``[tool.floorctl]`` table of the TOML document ``data`` read from ``source``, its
    relative paths joined to ``base`` (the file's folder as seen from the current folder).

    None when the document has no such table, unless ``required``. Raises ConfigError,
    naming ``source`` and the key; a value is never quoted (it might be a key).
    """
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: invalid TOML: not UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: invalid TOML: {exc}") from None
    # Valid TOML that Python's reader cannot take, in any table of the file (another tool's).
    except RecursionError:
        raise ConfigError(f"{source}: invalid TOML: arrays or tables nested too deeply") from None
    except ValueError:  # an integer past Python's digit limit
        raise ConfigError(f"{source}: invalid TOML: a number too large to read") from None
    tool = document.get("tool")
    if tool is None or (isinstance(tool, dict) and "floorctl" not in tool):
        if required:
            raise ConfigError(f"{source}: no {TABLE} table")
        return None
    if not isinstance(tool, dict):
        raise ConfigError(f"{source}: tool must be a table, not {_type(tool)}")
    table = tool["floorctl"]
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: {TABLE} must be a table, not {_type(table)}")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        # A misspelt key would otherwise be silently ignored, and its flag's default used.
        raise ConfigError(
            f"{source}: {TABLE}: unknown key {unknown[0]!r} (known: {', '.join(sorted(KEYS))})"
        )

    def path_value(key: str) -> Path | None:
        value = _string(table, key, source)
        return None if value is None else base / value

    return Config(
        source=source,
        feeds=_feeds(table, source, base),
        module=path_value("module"),
        template=_template(table, source, base),
        trusted_keys=path_value("trusted-keys"),
        waivers=path_value("waivers"),
        signing_key=path_value("signing-key"),
    )


def _feeds(table: dict[str, Any], source: Path, base: Path) -> tuple[str, ...] | None:
    value = table.get("feeds")
    if value is None:
        return None
    wrong = f"{source}: {TABLE}: feeds must be a non-empty list of paths or URLs"
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{wrong}, not {_type(value)}")
    feeds = []
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item:
            raise ConfigError(f"{wrong}: feeds[{index}] is {_type(item)}")
        _refuse_nul(item, f"feeds[{index}]", source)
        if _PEM_MARK in item:
            raise ConfigError(f"{source}: {TABLE}: feeds[{index}] holds a PEM key, not a feed")
        if item[:8].lower().startswith(_URL_SCHEMES):
            if not item.isascii() or not item.isprintable():
                # Not repeated: a look-alike of "@" (U+FF20) makes what precedes it a password.
                raise ConfigError(
                    f"{source}: {TABLE}: feeds[{index}] is a URL that is not printable ASCII "
                    "(percent-encode the rest)"
                )
            if "@" in re.split(r"[/?#]", item.split("://", 1)[1], maxsplit=1)[0]:
                # A receipt records its feeds as given: a password here would be signed into
                # it and committed. Never repeated in the message (it reaches CI logs).
                raise ConfigError(
                    f"{source}: {TABLE}: feeds[{index}] is a URL with credentials "
                    "(user:password@), which are not supported"
                )
            feeds.append(item)
        elif "://" in item:
            raise ConfigError(
                f"{source}: {TABLE}: feeds[{index}]: only https (or loopback http) URLs "
                "and paths are feeds"
            )
        else:
            feeds.append(str(base / item))
    return tuple(feeds)


def _template(table: dict[str, Any], source: Path, base: Path) -> str | None:
    value = _string(table, "template", source)
    if value is None or value in TEMPLATE_NAMES:
        return value
    # As floorctl.render tells a path from a name: a separator, or a .j2 file.
    if "/" in value or os.sep in value or value.endswith(".j2"):
        return str(base / value)
    raise ConfigError(
        f"{source}: {TABLE}: template must be {' or '.join(TEMPLATE_NAMES)}, or a path to "
        "a template file (with a / or ending in .j2)"
    )


def _string(table: dict[str, Any], key: str, source: Path) -> str | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{source}: {TABLE}: {key} must be a non-empty string (a path)")
    _refuse_nul(value, key, source)
    if _PEM_MARK in value:
        # The key itself pasted where its path belongs: say so, and never repeat it.
        raise ConfigError(
            f"{source}: {TABLE}: {key} holds a PEM key, not a path: keep the key in a file "
            "outside the repository and give that file's path"
        )
    return value


def _refuse_nul(value: str, key: str, source: Path) -> None:
    # TOML can spell one (\u0000); no file name or URL holds it, and the OS refuses it.
    if "\x00" in value:
        raise ConfigError(f"{source}: {TABLE}: {key} holds a NUL character, which no path can")


def _relative(path: Path, cwd: Path) -> Path:
    """``path`` as seen from ``cwd``: relative when it can be (``.``, ``..``), else as is.

    Both are absolute and ``cwd`` is the real current folder, so a ``..`` step here
    is the real parent (no symbolic link in ``cwd`` to step back through).
    """
    try:
        return Path(os.path.relpath(path, cwd))
    except ValueError:  # another drive (Windows)
        return path


def _type(value: object) -> str:
    names = {
        str: "a string",
        list: "a list",
        dict: "a table",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
    }
    return names.get(type(value), f"a {type(value).__name__}")
