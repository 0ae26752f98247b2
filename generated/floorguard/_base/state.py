"""Where floorguard keeps its state: the audit chain database and its HMAC key, and what
this host has seen of each chain (``floorguard._chain.chain_view``).

``FLOORGUARD_HOME`` names the folder; without it, ``$XDG_STATE_HOME/floorguard``, else
``~/.local/state/floorguard``. ``FLOORGUARD_CHAIN_KEY_FILE`` names another key file.
``FLOORGUARD_HOST_KEY_FILE`` names this host's Ed25519 key, which then signs its records
instead of the HMAC key (``floorguard._chain.record_signature``), and ``FLOORGUARD_HOST_KEYS`` the
fleet's host-keys document, to check other hosts' signatures with. Resolving paths is pure:
nothing is created here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

HOME_ENV = "FLOORGUARD_HOME"
KEY_FILE_ENV = "FLOORGUARD_CHAIN_KEY_FILE"
# A libpq URL: the chain lives in that PostgreSQL database instead (floorguard.chainstore).
CHAIN_URL_ENV = "FLOORGUARD_CHAIN_URL"
CHAIN_TIMEOUT_ENV = "FLOORGUARD_CHAIN_TIMEOUT"
HOST_KEY_FILE_ENV = "FLOORGUARD_HOST_KEY_FILE"
HOST_KEYS_ENV = "FLOORGUARD_HOST_KEYS"
CHAIN_DB_NAME = "chain.sqlite3"
CHAIN_KEY_NAME = "chain.key"
CHAIN_VIEW_NAME = "chain-view"
VIEW_LOCK_NAME = "chain-view.lock"
REFUSALS_NAME = "chain-refusals.jsonl"
ACCEPTED_MAP_NAME = "published-map.json"  # the highest map enforced on this host
# What SQLite keeps beside a database (its journal, write-ahead log and shared memory).
SQLITE_COMPANIONS = ("-journal", "-wal", "-shm")


@dataclass(frozen=True)
class StatePaths:
    """The state folder and the files floorguard keeps in (or beside) it."""

    home: Path
    chain_db: Path
    chain_key: Path
    chain_view: Path  # the largest tree of each chain this host has seen
    host_key: Path | None = None
    host_keys: Path | None = None


def state_home(environ: Mapping[str, str] | None = None) -> Path:
    """The state folder named by the environment (an empty variable counts as unset)."""
    env = os.environ if environ is None else environ
    explicit = env.get(HOME_ENV, "")
    if explicit:
        return Path(explicit).expanduser().absolute()
    xdg = env.get("XDG_STATE_HOME", "")
    # The XDG spec says a relative XDG_STATE_HOME is invalid and must be ignored.
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "floorguard"
    home = env.get("HOME", "")
    base = Path(home) if home else Path.home()
    return base / ".local" / "state" / "floorguard"


# Every variable that selects the chain: equal values (and, for relative ones, the same
# working directory) select the same files and database.
STATE_VARIABLES = (
    HOME_ENV, "XDG_STATE_HOME", "HOME", KEY_FILE_ENV, CHAIN_URL_ENV, CHAIN_TIMEOUT_ENV,
    HOST_KEY_FILE_ENV, HOST_KEYS_ENV,
)  # fmt: skip


def state_key(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """A cheap key that is equal whenever state_paths would return the same paths."""
    env = os.environ if environ is None else environ
    raw = tuple(env.get(name, "") for name in STATE_VARIABLES)
    if all(not value or value.startswith("/") for value in raw):
        return raw
    return (*raw, os.getcwd())


def state_paths(environ: Mapping[str, str] | None = None) -> StatePaths:
    """The chain database and key file paths the environment selects."""
    env = os.environ if environ is None else environ
    home = state_home(env)
    key_override = env.get(KEY_FILE_ENV, "")
    key = Path(key_override).expanduser().absolute() if key_override else home / CHAIN_KEY_NAME
    return StatePaths(
        home=home,
        chain_db=home / CHAIN_DB_NAME,
        chain_key=key,
        chain_view=home / CHAIN_VIEW_NAME,
        host_key=_named_path(env, HOST_KEY_FILE_ENV),
        host_keys=_named_path(env, HOST_KEYS_ENV),
    )


def kept_files(environ: Mapping[str, str] | None = None) -> list[Path]:
    """Every file floorguard keeps for the environment's chain and map on this host: the
    chain's database and SQLite's files beside it, its key, this host's signing key and
    host-keys document, its view of the chain (with its lock and refusals) and the record
    of the highest map enforced (with its lock). No output may be written over one."""
    env = os.environ if environ is None else environ
    home = state_home(env)
    files = [home / CHAIN_DB_NAME]
    files += [home / (CHAIN_DB_NAME + suffix) for suffix in SQLITE_COMPANIONS]
    key = env.get(KEY_FILE_ENV, "")
    files.append(Path(key).expanduser().absolute() if key else home / CHAIN_KEY_NAME)
    files += [home / name for name in (CHAIN_VIEW_NAME, VIEW_LOCK_NAME, REFUSALS_NAME)]
    files += [home / ACCEPTED_MAP_NAME, home / (ACCEPTED_MAP_NAME + ".lock")]
    for name in (HOST_KEY_FILE_ENV, HOST_KEYS_ENV):
        if env.get(name, "").strip():
            files.append(Path(env[name]).expanduser().absolute())
    return files


def _named_path(env: Mapping[str, str], name: str) -> Path | None:
    """The file the variable ``name`` names, None when it is unset. Set but empty is
    refused (KeyFileError), never read as unset: an empty FLOORGUARD_HOST_KEY_FILE would
    otherwise fall back to the fleet's key without a word."""
    if name not in env:
        return None
    value = env[name]
    if not value.strip():
        from floorguard.errors import KeyFileError

        raise KeyFileError(f"{name} is set but empty: name the file, or unset the variable")
    return Path(value).expanduser().absolute()
