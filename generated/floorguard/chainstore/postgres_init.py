"""``floorctl chain init``: create or upgrade the chain's schema (``postgres_schema``) in a
database, as the tables' owner, and the appenders' role, granted to the roles named.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from floorguard.chainstore.conninfo import URL_ENV
from floorguard.chainstore.interface import (
    CHAIN_FORMAT,
)
from floorguard.chainstore.postgres import PostgresStore
from floorguard.chainstore.postgres_schema import (
    _DDL,
    _FOREIGN_OWNERS,
    _META,
    _META_VALUE,
    _RECORDS,
    API_FUNCTIONS,
    API_SCHEMA,
    CLAIM_WAKE_KEY,
    LOCK_HOLD_LIMIT_MS,
    LOCK_KEY,
    LOCK_STATEMENT,
    SCHEMA,
    _check_record_trigger,
    appender_role,
)
from floorguard.chainstore.postgres_wire import Fired, _close_quietly, _deadline, _import_psycopg
from floorguard.errors import ChainWriteError

if TYPE_CHECKING:
    pass


def init_schema(
    url: str,
    *,
    timeout: float,
    grant_to: Iterable[str] = (),
    key_check: str | None = None,
    source: str = URL_ENV,
) -> dict[str, Any]:
    """Create (idempotently) the chain's schemas, tables, append-only triggers, the
    functions through which alone a host appends and reads, and the role
    ``floorguard_appender_DATABASE`` (NOLOGIN; USAGE on the API schema and EXECUTE on its
    functions only: what earlier inits granted beyond that is revoked), and grant it to
    the login roles ``grant_to``. Connects as the URL's role, which owns what it creates
    (and as whom the functions run).
    ``key_check`` (``chain_key.key_check`` of the fleet's key) is stored on first init and
    must match on every later one; appends refuse a key that does not match it.

    Returns what was found or made (``created``, ``chain_id``, ``owner``, and
    ``ends_lock_holders``: whether the owner may end a session that holds the chain's lock
    too long, i.e. is a superuser or has pg_signal_backend; ``prepared_transactions``: the
    server's max_prepared_transactions, which should be 0). ``source``: where ``url`` came
    from, named when it does not parse. Raises ChainWriteError (unreachable, refused, or a
    role in ``grant_to`` does not exist).
    """
    pg = _import_psycopg()
    from psycopg import sql

    store = PostgresStore(url, timeout=timeout, source=source)
    conn = store._connect(ChainWriteError, "initialise")
    fired = Fired()
    ended: list[str] = []
    holders: dict[int, str] = {}  # what init found holding it up, last seen, and why it stayed
    try:
        try:
            # Bounded like an append: a server that goes silent mid-init is cut.
            with (
                _ending_what_blocks(store, conn.info.backend_pid, ended, holders),
                _deadline(conn, store.silence) as fired,
                conn.transaction(),
            ):
                existed = conn.execute("SELECT to_regclass(%s)", (_RECORDS,)).fetchone()
                created = existed is None or existed[0] is None
                # Whoever owns the schema or anything in it may rewrite records and drop
                # the triggers: refuse one that another role made (even to a superuser).
                # (Catalogs only: no lock on the chain's tables is taken before its own.)
                schemas = [SCHEMA, API_SCHEMA]
                others = conn.execute(_FOREIGN_OWNERS, (schemas, schemas, schemas)).fetchall()
                if others:
                    listing = ", ".join(f"{what} owned by {who}" for what, who in others)
                    raise ChainWriteError(
                        f"cannot initialise the audit chain {store.location}: another role "
                        f"owns part of schema {SCHEMA} or {API_SCHEMA} ({listing}); run "
                        "`floorctl chain init` as that role, or drop the schema"
                    )
                # The appenders' own lock first: an init waits for the append in flight and
                # holds the next ones off, so its DDL never locks a table in the opposite
                # order to theirs (a deadlock that refused appends). Before the first init
                # there is no such row: an advisory lock makes two first inits take turns
                # (any connecting role could hold that one, delaying a first init only).
                # Taken as an append takes it (take_lock) where the chain has that function:
                # a host sitting on the lock past the hold limit is then ended, not waited
                # for until init fails.
                found = conn.execute(
                    "SELECT to_regclass(%s), to_regprocedure(%s)",
                    (f"{SCHEMA}.append_lock", f"{SCHEMA}.take_lock()"),
                ).fetchone()
                has_lock_row, has_take_lock = (None, None) if found is None else found
                if has_take_lock is not None:
                    conn.execute(f"SELECT {SCHEMA}.take_lock()")
                elif has_lock_row is not None:
                    conn.execute(LOCK_STATEMENT)
                else:
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
                for statement in _DDL:
                    _retrying(conn, statement)
                owner_name = conn.execute("SELECT current_user").fetchone()
                _retrying(conn, _check_record_trigger("" if owner_name is None else owner_name[0]))
                conn.execute(f"ALTER TABLE {_RECORDS} ENABLE ALWAYS TRIGGER records_next_in_line")
                conn.execute(
                    f"INSERT INTO {_META} (key, value) VALUES ('format', %s), ('chain_id', %s)"  # noqa: S608
                    " ON CONFLICT (key) DO NOTHING",
                    (CHAIN_FORMAT, secrets.token_hex(16)),
                )
                if key_check is not None:
                    conn.execute(
                        f"INSERT INTO {_META} (key, value) VALUES ('key_check', %s)"  # noqa: S608
                        " ON CONFLICT (key) DO NOTHING",
                        (key_check,),
                    )
                    stored = conn.execute(_META_VALUE, ("key_check",)).fetchone()
                    if stored is None or stored[0] != key_check:
                        raise ChainWriteError(
                            f"cannot initialise the audit chain {store.location}: the chain "
                            "key here is not the key the chain was initialised with (use the "
                            "fleet's chain key file: FLOORGUARD_CHAIN_KEY_FILE)"
                        )
                fmt = conn.execute(_META_VALUE, ("format",)).fetchone()
                if fmt is None or fmt[0] != CHAIN_FORMAT:
                    raise ChainWriteError(
                        f"cannot initialise the audit chain {store.location}: it holds format "
                        f"{fmt[0] if fmt else None!r} (this floorguard writes {CHAIN_FORMAT})"
                    )
                database = conn.execute("SELECT current_database()").fetchone()
                role_name = appender_role("" if database is None else str(database[0]))
                role = conn.execute(
                    "SELECT rolcanlogin OR rolsuper OR rolcreaterole OR rolcreatedb"
                    " OR rolreplication OR rolbypassrls FROM pg_catalog.pg_roles"
                    " WHERE rolname = %s",
                    (role_name,),
                ).fetchone()
                if role is not None and role[0]:
                    # Made by someone else before: whoever can log in as it appends.
                    raise ChainWriteError(
                        f"cannot initialise the audit chain {store.location}: the role "
                        f"{role_name} exists and can log in or holds a role attribute "
                        "(LOGIN, SUPERUSER, CREATEROLE, CREATEDB, REPLICATION, BYPASSRLS); "
                        "chain init makes it NOLOGIN with none: drop it, or ALTER ROLE it "
                        "NOLOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB NOREPLICATION "
                        "NOBYPASSRLS, then run chain init again"
                    )
                if role is None:
                    conn.execute(
                        sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role_name))
                    )
                appender = sql.Identifier(role_name)
                for login in grant_to:
                    found = conn.execute(
                        "SELECT 1 FROM pg_roles WHERE rolname = %s", (login,)
                    ).fetchone()
                    if found is None:
                        raise ChainWriteError(
                            f"cannot grant {role_name} to {login!r}: no such role in "
                            f"{store.location} (create the host's login role first)"
                        )
                # What older inits granted the appenders (USAGE on the tables' schema,
                # SELECT, INSERT, UPDATE on its tables) goes, and so does anything of the
                # kind given by hand to a host's own role, or passed on by a role that was
                # given it with the grant option (CASCADE): a host reads and writes only
                # through the functions of the API schema, and cannot name a table
                # (postgres_schema, _READ_FUNCTIONS).
                for holder in (appender, *(sql.Identifier(login) for login in grant_to)):
                    for statement in _TAKEN_AWAY:
                        _retrying(conn, sql.SQL(statement).format(
                            schema=sql.Identifier(SCHEMA), api=sql.Identifier(API_SCHEMA),
                            role=holder,
                        ))  # fmt: skip
                for statement in (
                    "GRANT USAGE ON SCHEMA {api} TO {role}",
                    *(f"GRANT EXECUTE ON FUNCTION {name} TO {{role}}" for name in API_FUNCTIONS),
                ):
                    _retrying(conn, sql.SQL(statement).format(
                        api=sql.Identifier(API_SCHEMA), role=appender
                    ))  # fmt: skip
                for login in grant_to:
                    conn.execute(sql.SQL("GRANT {} TO {}").format(appender, sql.Identifier(login)))
                conn.execute(
                    f"INSERT INTO {_META} (key, value) VALUES ('lock_hold_limit_ms', %s)"  # noqa: S608
                    " ON CONFLICT (key) DO NOTHING",
                    (str(LOCK_HOLD_LIMIT_MS),),
                )
                chain_id = conn.execute(_META_VALUE, ("chain_id",)).fetchone()
                owner = conn.execute("SELECT current_user").fetchone()
                # Ending a session that holds the chain's lock too long takes this (or
                # superuser); without it such a session stops every append until it ends.
                can_end = conn.execute(
                    "SELECT pg_catalog.pg_has_role('pg_signal_backend', 'USAGE'),"
                    " pg_catalog.current_setting('max_prepared_transactions')::integer"
                ).fetchone()
        except pg.errors.LockNotAvailable:
            held_by = (
                "; ".join(f"session {pid} ({why})" for pid, why in sorted(holders.items()))
                if holders
                else "the owner's own and a superuser's sessions are not ended, nor any "
                "without pg_signal_backend"
            )
            raise ChainWriteError(
                f"cannot initialise the audit chain {store.location}: a session held what "
                f"chain init waits for (the chain's lock, a table or a catalog row) for more "
                f"than {store.timeout:g}s (FLOORGUARD_CHAIN_TIMEOUT): {held_by}"
            ) from None
        except pg.Error as exc:
            raise ChainWriteError(
                f"cannot initialise the audit chain {store.location}: "
                + _init_reason(store, exc, fired)
            ) from None
    finally:
        _close_quietly(conn)
    return {
        "created": created,
        "chain_id": None if chain_id is None else chain_id[0],
        "owner": None if owner is None else owner[0],
        "appender_role": role_name,
        "granted_to": list(grant_to),
        "ends_lock_holders": bool(can_end and can_end[0]),
        "ended_sessions": ended,
        # A prepared transaction keeps its locks with no session to end: with these
        # enabled, an appender could hold the chain's lock until a superuser rolls it back.
        "prepared_transactions": int(can_end[1]) if can_end else 0,
    }


# Every session holding what init waits for, with its role, its kind and the owner's name.
# Init ends a "host": a client session that is neither the owner's nor a superuser's, while
# init does not wait for the chain's lock (take_lock ends a holder of that past the hold
# limit, as for an append): a host that rewrote a catalog row init must change (a GRANT
# that grants nothing still rewrites the function's or schema's row, and keeps it locked to
# its transaction's end), or one holding a lock on a table init alters. No honest host
# holds either while init holds the chain's lock. (A session with no role is the server's
# own: the owner sees no backend_type of another role's.)
_BLOCKING_INIT = f"""
SELECT a.pid, COALESCE(a.usename, ''), CASE
         WHEN a.usesysid IS NULL THEN 'server'
         WHEN a.usesysid = (SELECT r.oid FROM pg_catalog.pg_roles r
                             WHERE r.rolname = current_user) THEN 'own'
         WHEN COALESCE((SELECT r.rolsuper FROM pg_catalog.pg_roles r
                         WHERE r.oid = a.usesysid), true) THEN 'superuser'
         WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
                       WHERE l.pid = %(init)s AND NOT l.granted
                         AND (l.locktype = 'relation'
                              AND l.relation = pg_catalog.to_regclass('{SCHEMA}.append_lock')
                              -- (init waits behind a starved append's claim as an append does)
                              OR l.locktype = 'advisory' AND l.classid = {CLAIM_WAKE_KEY}
                                 AND l.objsubid = 2)) THEN 'append'
         ELSE 'host' END,
       current_user
  FROM pg_catalog.pg_stat_activity a
 WHERE a.pid = ANY (pg_catalog.pg_blocking_pids(%(init)s))
"""  # noqa: S608
# How often the watch looks, and how many looks in a row a session must be found blocking
# init before it is ended: well within the server's deadlock_timeout (1 s by default), so
# that a holder which then waits for the chain's lock (held by init) is ended before the
# server breaks the cycle by failing init.
_WATCH_SECONDS = 0.1
_LOOKS_BEFORE_ENDING = 2


@contextlib.contextmanager
def _ending_what_blocks(
    store: PostgresStore, init_pid: int, ended: list[str], holders: dict[int, str]
) -> Iterator[None]:
    """While the body runs, end (pg_terminate_backend) each host session of _BLOCKING_INIT
    found blocking the session ``init_pid`` at _LOOKS_BEFORE_ENDING looks in a row, from a
    connection of the owner's own; each ended is added to ``ended`` as "PID (ROLE)".
    ``holders`` is left holding the sessions of the last look that found any, each with
    why it was not ended (what a refusal names). A failure of the watch itself ends the
    watch, not init (init then waits its timeout)."""
    pg = _import_psycopg()
    watcher = store._connect(ChainWriteError, "initialise")
    stop = threading.Event()

    def watch() -> None:
        seen: dict[int, int] = {}
        refused: set[int] = set()
        while not stop.wait(_WATCH_SECONDS):
            try:
                rows = watcher.execute(_BLOCKING_INIT, {"init": init_pid}).fetchall()
            except pg.Error:
                return
            seen = {int(pid): seen.get(int(pid), 0) + 1 for pid, *_ in rows}
            for pid, role, kind, _ in rows:
                if kind != "host" or seen[int(pid)] < _LOOKS_BEFORE_ENDING or pid in refused:
                    continue
                try:
                    watcher.execute("SELECT pg_catalog.pg_terminate_backend(%s, 1000)", (pid,))
                except pg.errors.InsufficientPrivilege:
                    refused.add(int(pid))
                except pg.Error:
                    continue
                else:
                    ended.append(f"{pid} ({role})")
            if rows:  # (the look after init gave up finds none: what held it stays named)
                holders.clear()
                holders.update(
                    (int(pid), _why_not_ended(role, kind, owner, refused=int(pid) in refused))
                    for pid, role, kind, owner in rows
                )

    thread = threading.Thread(target=watch, name="floorguard-init-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        _close_quietly(watcher)


def _why_not_ended(role: str, kind: str, owner: str, *, refused: bool) -> str:
    """A session init found holding it up, named with the one reason it was not ended."""
    if kind == "server":
        return "a process of the server's own"
    if kind == "own":
        return f"{role}: the owner's own, which init does not end"
    if kind == "superuser":
        return f"{role}: a superuser's, which init does not end"
    if kind == "append":
        return f"{role}: an append holding the chain's lock, which init waits for as one does"
    if refused:
        return f"{role}: ending it was refused: GRANT pg_signal_backend TO {owner}, as a superuser"
    return f"{role}: found at the last look, not yet ended"


_TAKEN_AWAY = (
    "REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM {role} CASCADE",
    "REVOKE ALL ON ALL SEQUENCES IN SCHEMA {schema} FROM {role} CASCADE",
    "REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {schema} FROM {role} CASCADE",
    "REVOKE ALL ON SCHEMA {schema} FROM {role} CASCADE",
    "REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {api} FROM {role} CASCADE",
)
# How many times init tries a statement that lost a race for a catalog row: a host's GRANT
# that grants nothing still rewrites the row of the function or schema it names, and one
# committed between init's read of that row and its update fails init's statement with
# "tuple concurrently updated" (a host doing so without pause failed 5 inits in 10).
_RACE_TRIES = 20


def _retrying(conn: Any, statement: Any) -> None:
    """Run ``statement`` in a savepoint of init's transaction, again (after a pause that
    grows) when it lost a race for a catalog row; any other error is raised at once."""
    pg = _import_psycopg()
    for attempt in range(_RACE_TRIES):
        try:
            with conn.transaction():
                conn.execute(statement)
            return
        except pg.errors.InternalError_ as exc:
            if "concurrently updated" not in str(exc) or attempt == _RACE_TRIES - 1:
                raise
        time.sleep(0.005 * (attempt + 1))


def _init_reason(store: PostgresStore, exc: BaseException, fired: Fired) -> str:
    """Why ``chain init`` failed: a privilege it lacks is the owner's (the role running it),
    not the appenders' that the append path names."""
    from psycopg import errors

    if isinstance(exc, errors.InsufficientPrivilege):
        return (
            f"{store._scrub(str(getattr(exc.diag, 'message_primary', None) or exc))} (the role "
            "running chain init lacks it: it makes the chain's schemas and tables, so it must "
            "own the database or hold CREATE on it: CREATE DATABASE ... OWNER it, or GRANT "
            "CREATE ON DATABASE ... TO it, as a superuser)"
        )
    return store.explain(exc, fired)
