"""The PostgreSQL chain's schema as SQL text: its tables, triggers and roles, and the
functions of ``floorguard_api`` through which alone a host appends (``open_append``,
``append_record``, ``append_next``, ``add_tree_nodes``) and reads (``read_meta`` and
_READ_FUNCTIONS), with the limits they enforce. Text only: nothing here talks to a server
(``postgres_init`` runs it, ``postgres`` calls the functions).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

SCHEMA = "floorguard"
# What a host calls: its role may use this schema and execute the functions in it, and
# nothing in SCHEMA, not even its name (see _READ_FUNCTIONS).
API_SCHEMA = "floorguard_api"
APPENDER_ROLE = "floorguard_appender"  # + "_" + the database's name: see appender_role


def appender_role(database: str) -> str:
    """The appenders' role of the chain in ``database``: one per database, because roles
    are cluster-wide (one shared role would let a host of one chain append to every other
    chain in the cluster). Longer than PostgreSQL's 63 bytes: "-" and a digest of the
    name; no database's own name can give that form, which the "_" of the other tells
    apart (a database named after another's digest would otherwise share its role)."""
    name = f"{APPENDER_ROLE}_{database}"
    if len(name.encode("utf-8")) <= 63:
        return name
    return f"{APPENDER_ROLE}-{hashlib.sha256(database.encode('utf-8')).hexdigest()[:40]}"


# pg_advisory_xact_lock key ("floorgd" as an integer): serialises two first `chain init`s.
LOCK_KEY = int.from_bytes(b"floorgd", "big")
_RECORDS = f"{SCHEMA}.records"
_TREE = f"{SCHEMA}.tree"
_META = f"{SCHEMA}.meta"
_META_VALUE = f"SELECT value FROM {_META} WHERE key = %s"  # noqa: S608
# The chain's lock as its owner takes it (`chain init`); appenders take it only through
# the chain's functions (floorguard.take_lock).
LOCK_STATEMENT = f"LOCK TABLE {SCHEMA}.append_lock IN EXCLUSIVE MODE"

# --- floorctl chain init ---------------------------------------------------------------------

# UPDATE, DELETE and TRUNCATE are refused to everyone but the tables' owner (an appender
# has no such privilege anyway; this holds even where someone grants it).
_REFUSE_CHANGE = """
CREATE OR REPLACE FUNCTION floorguard.refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF current_user <> pg_catalog.pg_get_userbyid(
       (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID)) THEN
    RAISE EXCEPTION 'floorguard: % on %.% refused: the audit chain is append-only',
      TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
      USING ERRCODE = 'insufficient_privilege',
            HINT = 'only the owner of the chain''s tables may change them';
  END IF;
  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
  RETURN NEW;
END $$
"""
# A record's ts: a real time in the chain's format, no earlier than the head, than its
# transaction's start or than MAX_STAMP_AGE_SECONDS before it is stored, and no later than
# the server's clock (or the head's, when the server's clock stepped back below it: honest
# appenders then reuse the head's time). An honest append stamps the server's clock read
# under the lock (after its BEGIN), and stores its record within twice
# FLOORGUARD_CHAIN_TIMEOUT of that or is cut; a transaction kept open for hours cannot
# stamp its record with its start.
MAX_STAMP_AGE_SECONDS = 10
# How long before its transaction began a record appended in one round trip (append_next)
# may be stamped: its host stamps it before sending, from the server's clock as the last
# append saw it and the time gone by since (its estimate trails the server's clock by
# about a round trip; it is used only within AHEAD_SAMPLE_SECONDS of that reading).
AHEAD_SLACK_MS = 250
AHEAD_SAMPLE_SECONDS = 30


def _stamp_check(seq: str, ts: str, head_ts: str, *, slack_ms: int = 0) -> str:
    """A PL/pgSQL block refusing the stamp ``ts`` of record ``seq`` after a head stamped
    ``head_ts`` (NULL for the first record): see MAX_STAMP_AGE_SECONDS; ``slack_ms``: see
    AHEAD_SLACK_MS."""
    began = "pg_catalog.transaction_timestamp()"
    if slack_ms:
        began = f"({began} - interval '{int(slack_ms)} milliseconds')"
    return f"""
  DECLARE
    stamp text := 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"';
    server_ts text := pg_catalog.to_char(pg_catalog.clock_timestamp() AT TIME ZONE 'UTC', stamp);
    began_ts text := pg_catalog.to_char(GREATEST({began},
      pg_catalog.clock_timestamp() - interval '{MAX_STAMP_AGE_SECONDS} seconds') AT TIME ZONE 'UTC',
      stamp);
    latest text;
    earliest text;
  BEGIN
    -- The format with its fields in range, then a time that exists: a 30 February fails
    -- the cast (with PostgreSQL's own message), and a time it would read as another comes
    -- back written otherwise.
    IF {ts} !~ ('^[0-9]{{4}}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])'
                'T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9][.][0-9]{{6}}Z$')
       OR pg_catalog.to_char({ts}::timestamptz AT TIME ZONE 'UTC', stamp) <> {ts} THEN
      RAISE EXCEPTION 'floorguard: record % is stamped %, which is not a time in the chain''s form',
        {seq}, {ts} USING ERRCODE = 'check_violation';
    END IF;
    latest := CASE WHEN {head_ts} COLLATE "C" > server_ts COLLATE "C" THEN {head_ts}
                   ELSE server_ts END;
    earliest := CASE WHEN {head_ts} COLLATE "C" > began_ts COLLATE "C" THEN {head_ts}
                     ELSE began_ts END;
    IF {ts} COLLATE "C" > latest COLLATE "C" OR {ts} COLLATE "C" < earliest COLLATE "C" THEN
      RAISE EXCEPTION
        'floorguard: record % is stamped %, not between % and the server''s %',
        {seq}, {ts}, earliest, latest USING ERRCODE = 'check_violation';
    END IF;
  END;
"""


# The records' trigger: a row not inserted by append_record (which checks all this itself,
# then marks the seq it checked; only the tables' owner, as whom it runs, can skip the
# trigger with that mark, and the owner may drop the trigger anyway) must be the next one,
# with a ts as above: even the owner's own inserts by hand are held to what every honest
# appender writes.
CHECKED_SEQ_SETTING = "floorguard.checked_seq"
_CHECK_RECORD = f"""
CREATE OR REPLACE FUNCTION floorguard.check_record() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  head_seq bigint;
  head_ts text;
BEGIN
  SELECT r.seq, r.ts INTO head_seq, head_ts FROM floorguard.records r ORDER BY r.seq DESC LIMIT 1;
  IF NEW.seq IS DISTINCT FROM coalesce(head_seq + 1, 0) THEN
    RAISE EXCEPTION 'floorguard: record % is not the next one (the head is %)',
      NEW.seq, head_seq USING ERRCODE = 'check_violation';
  END IF;
{_stamp_check("NEW.seq", "NEW.ts", "head_ts")}
  RETURN NEW;
END $$
"""  # noqa: S608


def _check_record_trigger(owner: str) -> str:
    """The trigger running check_record on every row but those append_record checked."""
    quoted = owner.replace("'", "''")
    return (
        f"CREATE OR REPLACE TRIGGER records_next_in_line BEFORE INSERT ON {_RECORDS}"
        f" FOR EACH ROW WHEN (pg_catalog.current_setting('{CHECKED_SEQ_SETTING}', true)"
        f" IS DISTINCT FROM NEW.seq::text OR CURRENT_USER <> '{quoted}')"
        f" EXECUTE FUNCTION {SCHEMA}.check_record()"
    )


# RFC 8785 (JSON Canonicalization Scheme) text of a parsed JSON value, to hold a receipt to
# the form every verifier re-derives: a record's link is the digest of its stored text, and
# a receipt in any other form (spaces, another key order, a repeated key, 1.0, 1e2, an
# escape such as \u0041) would make the next record fail its check in every verifier.
# Strings, true, false and null come out of jsonb as RFC 8785 writes them; objects and
# arrays are rebuilt here; numbers: an integer as is (beyond 2^53 no host writes one), any
# other as ECMAScript writes the double it reads as. Keys sort by UTF-16 code units, which
# is code-point order ("C") unless a key holds a character beyond the BMP.
def _canonical_value_sql(value: str) -> str:
    return f"""CASE pg_catalog.jsonb_typeof({value})
      WHEN 'number' THEN CASE WHEN {value}::text ~ '^-?[0-9]{{1,15}}$' THEN {value}::text
                              ELSE floorguard.canonical_number({value}::text) END
      WHEN 'object' THEN floorguard.canonical_json({value}, utf16)
      WHEN 'array' THEN floorguard.canonical_json({value}, utf16)
      ELSE {value}::text END"""


def _canonical_object_sql(value: str, order: str) -> str:
    """PL/pgSQL setting ``rebuilt`` to the canonical text of the jsonb object ``value``,
    its keys sorted by ``order`` (of ``e.key``). Each statement has its own ORDER BY: a
    parameter there costs a plan per call."""
    # (An array of the members, not string_agg: no aggregate to set up on every append.)
    return f"""    rebuilt := '{{' || pg_catalog.array_to_string(ARRAY(
             SELECT pg_catalog.to_json(e.key)::text || ':' || {_canonical_value_sql("e.value")}
               FROM pg_catalog.jsonb_each({value}) e ORDER BY {order}), ',') || '}}';"""  # noqa: S608


# A \u0000 escape in JSON text (after an even run of backslashes: an escape, not an escaped
# backslash), which jsonb cannot read; and the text with each such escape as \uffff.
_NUL_ESCAPE = r"(?<!\\)((?:\\\\)*)\\u0000"


def _nul_as_ffff_sql(text: str) -> str:
    return f"pg_catalog.regexp_replace({text}, '{_NUL_ESCAPE}', '\\1\\\\uffff', 'g')"


def canonical_receipt_sql(text: str) -> str:
    """SQL for the RFC 8785 form of the JSON text ``text`` (NULL when it has none). jsonb
    cannot read a \\u0000 escape: each stands in as \\uffff while the text is read, and
    comes back once it is written. A text holding U+FFFF itself, or a key holding a NUL
    (U+FFFF would sort it elsewhere), then has no form here."""
    beyond_bmp = f"{text} ~ '[\\U00010000-\\U0010FFFF]'"
    nul = _NUL_ESCAPE
    nul_in_key = nul + r"""(?:[^"\\]|\\.)*":"""
    nul_as_ffff = _nul_as_ffff_sql(text)
    return (
        f"CASE WHEN pg_catalog.strpos({text}, '\\u0000') = 0 OR {text} !~ '{nul}'"
        f" THEN floorguard.canonical_json({text}::jsonb, {beyond_bmp})"
        f" WHEN pg_catalog.strpos({text}, U&'\\FFFF') = 0 AND {text} !~ '{nul_in_key}'"
        f" THEN pg_catalog.replace(floorguard.canonical_json({nul_as_ffff}::jsonb, {beyond_bmp}),"
        f" U&'\\FFFF', '\\u0000') END"
    )


_CANONICAL_JSON = (
    """
CREATE OR REPLACE FUNCTION floorguard.utf16_units(t text) RETURNS integer[]
LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
  SELECT pg_catalog.array_agg(v.u ORDER BY s.o, v.p)
    FROM pg_catalog.regexp_split_to_table(t, '') WITH ORDINALITY AS s(c, o),
         LATERAL (VALUES
           (1, CASE WHEN pg_catalog.ascii(s.c) < 65536 THEN pg_catalog.ascii(s.c)
                    ELSE 55296 + ((pg_catalog.ascii(s.c) - 65536) >> 10) END),
           (2, CASE WHEN pg_catalog.ascii(s.c) >= 65536
                    THEN 56320 + ((pg_catalog.ascii(s.c) - 65536) & 1023) END)) AS v(p, u)
   WHERE v.u IS NOT NULL
$$
""",
    """
CREATE OR REPLACE FUNCTION floorguard.canonical_number(raw text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp SET extra_float_digits = 1 AS $$
DECLARE
  parts text[];
  digits text;
  point integer;
  k integer;
  e integer;
  body text;
  cand numeric;
BEGIN
  IF raw ~ '^-?[0-9]{1,16}$' AND pg_catalog.abs(raw::numeric) <= 9007199254740991 THEN
    RETURN raw::numeric::text;  -- an integer, as it reads
  END IF;
  -- The double's shortest digits (extra_float_digits 1), as ECMAScript's Number::toString
  -- lays them out: digits d1..dk and the point after n of them.
  parts := pg_catalog.regexp_match(raw::float8::text,
    '^(-?)([0-9]+)(?:[.]([0-9]+))?(?:e([-+][0-9]+))?$');
  IF parts IS NULL THEN RETURN NULL; END IF;
  digits := parts[2] || COALESCE(parts[3], '');
  point := pg_catalog.length(parts[2]) + COALESCE(parts[4]::integer, 0);
  k := pg_catalog.length(digits);
  digits := pg_catalog.ltrim(digits, '0');
  point := point - (k - pg_catalog.length(digits));
  digits := pg_catalog.rtrim(digits, '0');
  k := pg_catalog.length(digits);
  IF k = 0 THEN RETURN '0'; END IF;
  -- PostgreSQL writes some doubles with 17 digits where fewer read back the same (5e22 as
  -- 4.9999999999999996e+22): the fewest digits that do, rounded from these.
  IF k >= 16 THEN
    FOR p IN 1 .. k - 1 LOOP
      cand := pg_catalog.round(digits::numeric / (10::numeric ^ (k - p)));
      -- (Beyond the largest double's rounding range the cast would fail: no such candidate.)
      IF cand * (10::numeric ^ (point - p)) < 1.7976931348623158e308
         AND (cand * (10::numeric ^ (point - p)))::float8 = pg_catalog.abs(raw::float8) THEN
        point := point + pg_catalog.length(cand::text) - p;
        digits := pg_catalog.rtrim(cand::text, '0');
        k := pg_catalog.length(digits);
        EXIT;
      END IF;
    END LOOP;
  END IF;
  IF k <= point AND point <= 21 THEN
    body := digits || pg_catalog.repeat('0', point - k);
  ELSIF 0 < point AND point <= 21 THEN
    body := pg_catalog.left(digits, point) || '.' || pg_catalog.substr(digits, point + 1);
  ELSIF -6 < point AND point <= 0 THEN
    body := '0.' || pg_catalog.repeat('0', -point) || digits;
  ELSE
    e := point - 1;
    body := CASE WHEN k = 1 THEN digits
                 ELSE pg_catalog.left(digits, 1) || '.' || pg_catalog.substr(digits, 2) END
            || 'e' || CASE WHEN e >= 0 THEN '+' ELSE '-' END || pg_catalog.abs(e)::text;
  END IF;
  -- Digits alone beyond 2^53 read back as an integer no writer may write (RFC 8785's
  -- integers are exact doubles): refused, as floorguard's own writer refuses them.
  IF body !~ '[.e]' AND (k > 16 OR body::numeric > 9007199254740991) THEN
    RETURN NULL;
  END IF;
  RETURN CASE WHEN parts[1] = '-' THEN '-' || body ELSE body END;
END $$
""",
    f"""
CREATE OR REPLACE FUNCTION floorguard.canonical_json(j jsonb, utf16 boolean) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  rebuilt text;
BEGIN
  -- (Two statements, not one ORDER BY with a CASE: a parameter there costs a plan per call.)
  IF pg_catalog.jsonb_typeof(j) = 'object' AND NOT utf16 THEN
{_canonical_object_sql("j", 'e.key COLLATE "C"')}
  ELSIF pg_catalog.jsonb_typeof(j) = 'object' THEN
{_canonical_object_sql("j", "floorguard.utf16_units(e.key)")}
  ELSIF pg_catalog.jsonb_typeof(j) = 'array' THEN
    SELECT '[' || COALESCE(pg_catalog.string_agg({_canonical_value_sql("a.v")}, ','
             ORDER BY a.o), '') || ']'
      INTO rebuilt FROM pg_catalog.jsonb_array_elements(j) WITH ORDINALITY AS a(v, o);
  END IF;  -- (a scalar is never passed: its value's form is rebuilt where it stands)
  RETURN rebuilt;
END $$
""",  # noqa: S608
)


def _json_text_sql(row: str, *, mac: bool) -> str:
    """SQL for the canonical JSON of a record whose fields are ``row`` + column name: its
    body, or with ``mac`` its export line. The same text as chain.body_text and line_text:
    to_json escapes a string exactly as the chain's JSON encoder does, and the receipt is
    stored as its canonical text. One format() call: as many concatenations cost a third
    more to set up and run, on every append."""
    names = ["chain_id", "event", *(["mac"] if mac else []), "prev"]
    members = [f'"{name}":%s' for name in names]
    members += ['"receipt":%s', '"receipt_id":%s', '"seq":%s', '"ts":%s']
    values = [f"pg_catalog.to_json({row}{name})" for name in names]
    values += [f"{row}receipt", f"pg_catalog.to_json({row}receipt_id)", f"{row}seq",
               f"pg_catalog.to_json({row}ts)"]  # fmt: skip
    # (format() writes a NULL as nothing: every NULL stays NULL, as in a concatenation.)
    every = (*names, "receipt", "receipt_id", "seq", "ts")
    nulls = " OR ".join(f"{row}{name} IS NULL" for name in every)
    return (
        f"CASE WHEN {nulls} THEN NULL ELSE pg_catalog.format('{{{','.join(members)}}}', "
        f"{', '.join(values)}) END"
    )


# How long a session may hold the chain's lock before a waiting append ends it (meta
# 'lock_hold_limit_ms', written by init; the owner may change it). An honest append holds
# it for one round trip and a commit.
LOCK_HOLD_LIMIT_MS = 1000

# The sessions (not this one) asking for or holding a lock on the chain's relations that a
# waiting append ends: a lock no append takes (DDL, a parse-time write lock; an appender may
# run none of these, yet PostgreSQL queues its request before checking that, and every
# append, and every read of meta, would queue behind it), and with ``holders`` the holders
# of the chain's lock too (holds_lock).
_LOCK_SESSIONS = """
CREATE OR REPLACE FUNCTION floorguard.lock_sessions(holders boolean,
  OUT pid integer, OUT usesysid oid, OUT xid bigint, OUT holds_lock boolean)
RETURNS SETOF record
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
  -- (One reading of the lock table: two could see a session's lock on records and then,
  -- its transaction ended in between, not its chain's lock.)
  WITH locks AS MATERIALIZED (SELECT * FROM pg_catalog.pg_locks)
  SELECT DISTINCT l.pid, a.usesysid, a.backend_xid::text::bigint,
         l.mode = 'ExclusiveLock' AND l.relation = 'floorguard.append_lock'::pg_catalog.regclass
    FROM locks l
    CROSS JOIN LATERAL pg_catalog.pg_stat_get_activity(l.pid) a
    JOIN pg_catalog.pg_class c ON c.oid = l.relation
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
   WHERE l.locktype = 'relation' AND n.nspname = 'floorguard'
     AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d
                        WHERE d.datname = pg_catalog.current_database())
     AND l.pid <> pg_catalog.pg_backend_pid()
     AND CASE WHEN l.mode = 'ExclusiveLock'
                   AND l.relation = 'floorguard.append_lock'::pg_catalog.regclass
              THEN l.granted AND holders
              -- PostgreSQL takes a statement's lock when it parses it and checks the
              -- privilege when it runs it: a PREPARE, a view, a rule or a MERGE that does
              -- nothing holds a write lock no privilege allowed. No append takes any lock
              -- on the lock's table but its own; a write lock on another table of the
              -- chain is an append's only while it holds the chain's lock.
              WHEN l.relation = 'floorguard.append_lock'::pg_catalog.regclass
              THEN l.mode <> 'AccessShareLock'
              WHEN l.mode IN ('RowShareLock', 'RowExclusiveLock') THEN
                c.relkind = 'r' AND NOT EXISTS (
                  SELECT 1 FROM locks o
                   WHERE o.pid = l.pid AND o.locktype = 'relation'
                     AND o.relation = 'floorguard.append_lock'::pg_catalog.regclass
                     AND o.mode = 'ExclusiveLock' AND o.granted)
              ELSE l.mode <> 'AccessShareLock' END
$$
"""

# Before a session found in a reading of the lock table (FOR holder IN lock_sessions(...))
# is ended: a second reading must find it again as it was, in the same transaction. A
# holder past its limit may have let go while this append looked; and pg_locks reads each
# session's fast-path locks apart from the shared table, so an append that committed
# between the two parts looks like a session holding a lock on records without the
# chain's lock.
_SEEN_AGAIN = """
      PERFORM pg_catalog.pg_stat_clear_snapshot();
      CONTINUE WHEN NOT EXISTS (
        SELECT 1 FROM floorguard.lock_sessions({holders}) s
         WHERE s.pid = holder.pid AND s.holds_lock = holder.holds_lock
           AND s.xid IS NOT DISTINCT FROM holder.xid);
"""
_SEEN_AGAIN_REQUESTING = _SEEN_AGAIN.format(holders="false")
_SEEN_AGAIN_ANY = _SEEN_AGAIN.format(holders="true")


# Ends the sessions lock_sessions(false) finds, except the owner's and a superuser's; false
# when one is left because the owner lacks pg_signal_backend.
_END_LOCK_REQUESTS = f"""
CREATE OR REPLACE FUNCTION floorguard.end_lock_requests() RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  holder record;
  owner_oid oid;
  ended boolean := true;
BEGIN
  SELECT r.oid INTO owner_oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user;
  -- (Sessions as they are now: within a transaction PostgreSQL answers from a snapshot.)
  PERFORM pg_catalog.pg_stat_clear_snapshot();
  FOR holder IN SELECT * FROM floorguard.lock_sessions(false) LOOP
    CONTINUE WHEN holder.usesysid = owner_oid OR COALESCE(
      (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.oid = holder.usesysid), true);
{_SEEN_AGAIN_REQUESTING}    IF NOT pg_catalog.pg_has_role('pg_signal_backend', 'USAGE') THEN
      ended := false;
      CONTINUE;
    END IF;
    RAISE LOG 'floorguard: ending backend % (role %): it asked for a lock on the chain''s '
      'tables that no append takes', holder.pid, pg_catalog.pg_get_userbyid(holder.usesysid);
    PERFORM pg_catalog.pg_terminate_backend(holder.pid, 1000);
  END LOOP;
  RETURN ended;
END $$
"""  # noqa: S608

# How long a read of meta waits at a time before it ends what queued ahead of it.
META_LOOK_MS = 100

# A value of meta as an appender reads it: a plain read waits behind any request queued on
# the table (DDL an appender asked for, which it may not run but which PostgreSQL queues
# first), outside every function that would end it. This one waits META_LOOK_MS at a time,
# ends such requests (end_lock_requests) between its looks, and gives up with
# lock_not_available at the caller's lock_timeout.
_READ_META = f"""
CREATE OR REPLACE FUNCTION floorguard_api.read_meta(name text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  caller_timeout text := pg_catalog.current_setting('lock_timeout');
  deadline timestamptz;
  found text;
BEGIN
  IF caller_timeout::interval > interval '0' THEN
    deadline := pg_catalog.clock_timestamp() + caller_timeout::interval;
  END IF;
  LOOP
    PERFORM pg_catalog.set_config('lock_timeout', '{META_LOOK_MS}', true);
    BEGIN
      SELECT m.value INTO found FROM floorguard.meta m WHERE m.key = read_meta.name;
      PERFORM pg_catalog.set_config('lock_timeout', caller_timeout, true);
      RETURN found;
    EXCEPTION WHEN lock_not_available THEN
      NULL;
    END;
    PERFORM pg_catalog.set_config('lock_timeout', caller_timeout, true);
    IF deadline IS NOT NULL AND pg_catalog.clock_timestamp() >= deadline THEN
      RAISE EXCEPTION 'floorguard: another session holds a lock on the chain''s metadata'
        USING ERRCODE = 'lock_not_available';
    END IF;
    PERFORM floorguard.end_lock_requests();
  END LOOP;
END $$
"""  # noqa: S608
# How a host reads a value of meta.
META_VALUE_FOR_APPENDS = f"SELECT {API_SCHEMA}.read_meta(%s)"

# The lock's claim. PostgreSQL hands a released lock to the first session in its queue,
# and a waiting append leaves that queue to look for a holder to end: sessions of several
# hosts taking the lock in turn, each under its limit, would keep it behind them for good.
# So an append that has waited the hold limit, starved (see served_since below), claims
# the lock: lock_claim holds when it
# began waiting (ms since CLAIM_EPOCH_MS) above its backend's pid (22 bits, Linux's
# largest), and the oldest such waiter's claim stands while that session waits in the
# lock's queue or has looked within CLAIM_FRESH_MS (lock_claim_seen). Whoever else is
# given the lock meanwhile lets it go at once; the claimant clears its claim once it holds
# the lock. Only the chain's functions write either sequence; a claimant that was ended,
# or whose statement was cancelled, stops standing within CLAIM_FRESH_MS.
CLAIM_EPOCH_MS = 1_700_000_000_000
CLAIM_PID_BITS = 22
CLAIM_FRESH_MS = 100
# Waiters outside the queue sleep on the claimant's advisory lock (CLAIM_WAKE_KEY, its pid)
# while it claims (see _WAIT_FOR_CLAIMANT); pg_locks shows a two-key lock with objsubid 2.
CLAIM_WAKE_KEY = int.from_bytes(b"flwk", "big")
_WAKE_LOCK_ROWS = (
    f"l.locktype = 'advisory' AND l.classid = {CLAIM_WAKE_KEY} AND l.objsubid = 2"
    " AND l.pid = pg_catalog.pg_backend_pid() AND l.granted"
)
_PID_MASK = (1 << CLAIM_PID_BITS) - 1
_NOW_MS = "(EXTRACT(epoch FROM pg_catalog.clock_timestamp()) * 1000)::bigint"
_CLAIM_STANDS = f"""
CREATE OR REPLACE FUNCTION floorguard.claim_stands() RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  claim bigint := COALESCE(pg_catalog.pg_sequence_last_value('floorguard.lock_claim'), 0);
  claimant integer := claim & {_PID_MASK};
BEGIN
  IF claim = 0 OR claimant = pg_catalog.pg_backend_pid() THEN
    RETURN false;
  END IF;
  -- (fresh only while its session lives: a claim seen "in the future", after the server's
  -- clock stepped back, would otherwise outlive an ended claimant by the step)
  RETURN ({_NOW_MS}
            - COALESCE(pg_catalog.pg_sequence_last_value('floorguard.lock_claim_seen'), 0)
            < {CLAIM_FRESH_MS}
          AND EXISTS (SELECT 1 FROM pg_catalog.pg_stat_get_activity(claimant)))
    OR EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
                WHERE l.pid = claimant AND l.locktype = 'relation' AND NOT l.granted
                  AND l.mode = 'ExclusiveLock'
                  AND l.relation = 'floorguard.append_lock'::pg_catalog.regclass
                  AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d
                                     WHERE d.datname = pg_catalog.current_database()));
END $$
"""  # noqa: S608
# Only a starved append may claim: one whose role (host) has not been served since it
# began waiting. Sessions of one host, or of several in league, each older than the
# append, would otherwise each be served ahead of it in turn; so each role is served at
# most once ahead of a starved append's claim. The last SERVED_RING appends that waited for
# the lock (take_lock) are kept, each as its role and the millisecond it was served
# (modulo 2^31: about 24 days, far more than any wait), in as many unlogged sequences
# (written outside the transaction: a rollback does not hide a turn). When all of them
# were served since the append began waiting, its role, found in none, is taken as not
# served: hosts in league could otherwise take that many short turns while it waits, and
# no claim of it would ever stand. (Appends that find the lock free are not counted: no
# claim stands then, and counting them would cost every append.)
SERVED_RING = 32
_MS_MASK = (1 << 31) - 1
_NOW_MS_MOD = f"(({_NOW_MS} - {CLAIM_EPOCH_MS}) & {_MS_MASK})"
# The ring's turns, each as its value v (role in the low 32 bits) and its age in ms.
_SERVED_SLOTS = f"""(SELECT v, ({_NOW_MS_MOD} - (v >> 32)) & {_MS_MASK} AS age
            FROM (SELECT pg_catalog.pg_sequence_last_value(
                           pg_catalog.format('floorguard.lock_served_%s', n)::pg_catalog.regclass)
                         AS v
                    FROM pg_catalog.generate_series(0, {SERVED_RING - 1}) AS n) raw
           WHERE v IS NOT NULL) slots"""  # noqa: S608 (constants only)
_SERVED_SINCE = f"""
CREATE OR REPLACE FUNCTION floorguard.served_since(role oid, waited_ms bigint)
RETURNS boolean
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
  SELECT COALESCE(pg_catalog.bool_or(v & 4294967295 = role::bigint AND age < waited_ms),
                  false)
    FROM {_SERVED_SLOTS}
$$
"""  # noqa: S608
# How long a role (host) has gone unserved, in ms: since its last turn in the ring, or,
# when it has none there, longer than the ring's oldest turn (NULL while the ring is
# empty). A starved append claims as of then, not as of when it began waiting: of two
# claims, the one whose host has waited longest for a turn wins. So a host that appends
# now and then goes before the hosts of a league, each served a moment ago, rather than
# after one turn of each of them that began waiting before it.
_UNSERVED_FOR = f"""
CREATE OR REPLACE FUNCTION floorguard.unserved_for(role oid) RETURNS bigint
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
  SELECT COALESCE(pg_catalog.min(age) FILTER (WHERE v & 4294967295 = role::bigint),
                  pg_catalog.max(age) + 1)
    FROM {_SERVED_SLOTS}
$$
"""  # noqa: S608
_SERVED_SEQUENCES = [
    f"CREATE UNLOGGED SEQUENCE IF NOT EXISTS floorguard.lock_served_{n} MINVALUE 0"
    for n in range(SERVED_RING)
] + ["CREATE UNLOGGED SEQUENCE IF NOT EXISTS floorguard.lock_served_next MINVALUE 0"]
# (Read first, cheaply: no claim is the rule, and its check costs a call. A sequence never
# set reads NULL, and NULL AND x still evaluates x: hence the COALESCE.)
_CLAIM_STANDS_TEST = (
    "COALESCE(pg_catalog.pg_sequence_last_value('floorguard.lock_claim'), 0) <> 0"
    " AND floorguard.claim_stands()"
)


# Whether a waiting append is starved, and may claim the lock: its host has gone unserved
# the hold limit, by the ring's count, since it began waiting, or since a look last found
# a session of its host holding the lock. A host's own hold is its host served: a session
# that begins to wait while another of its host holds the lock (taken at once, which
# writes no turn) would otherwise be starved to order, and claim ahead of the others.
_STARVED = f"""(NOT own_holding
       AND pg_catalog.clock_timestamp() - unserved_since
           >= COALESCE(hold_limit, interval '{LOCK_HOLD_LIMIT_MS} ms')
       AND NOT floorguard.served_since(own_role, (EXTRACT(epoch FROM
             pg_catalog.clock_timestamp() - unserved_since) * 1000)::bigint))"""

# A waiting append's claim (see _CLAIM_STANDS), written or renewed at the start of each
# look and again just before it queues for the lock.
_CLAIM_STEP = f"""
    IF my_claim IS NOT NULL AND {_STARVED} THEN
      IF NOT ranked THEN  -- (once: a claim, once made, keeps its value)
        ranked := true;
        my_claim := (LEAST((EXTRACT(epoch FROM started) * 1000)::bigint,
                           {_NOW_MS} - COALESCE(floorguard.unserved_for(own_role), 0))
                     - {CLAIM_EPOCH_MS}) << {CLAIM_PID_BITS} | pg_catalog.pg_backend_pid();
      END IF;
      claim := COALESCE(pg_catalog.pg_sequence_last_value('floorguard.lock_claim'), 0);
      IF claim = my_claim OR claim >> {CLAIM_PID_BITS} > my_claim >> {CLAIM_PID_BITS}
         OR NOT floorguard.claim_stands() THEN
        IF NOT waking THEN  -- (before the claim: a waiter that reads it finds the lock)
          waking := pg_catalog.pg_try_advisory_lock({CLAIM_WAKE_KEY},
                                                    pg_catalog.pg_backend_pid());
        END IF;
        PERFORM pg_catalog.setval('floorguard.lock_claim_seen', {_NOW_MS});
        IF claim <> my_claim THEN
          PERFORM pg_catalog.setval('floorguard.lock_claim', my_claim);
        END IF;
      END IF;
    END IF;
"""

# A claimant says it still waits between the steps of its look too: each reads the lock
# table, which a loaded server makes slow, and a claim not renewed within CLAIM_FRESH_MS
# lets a younger waiter claim ahead of it.
_CLAIM_RENEWED = f"""
    IF my_claim IS NOT NULL
       AND pg_catalog.pg_sequence_last_value('floorguard.lock_claim') = my_claim THEN
      PERFORM pg_catalog.setval('floorguard.lock_claim_seen', {_NOW_MS});
    END IF;
"""

# While another's claim stands, a waiter outside the queue sleeps until the claimant lets
# its wake lock go (an advisory lock on its pid, taken before it first claims and let go
# once it holds the chain's lock or gives up), looking again at least every CLAIM_FRESH_MS:
# an older claimant may take the claim over, and one whose statement was cancelled keeps
# a session's advisory lock while its claim stops standing. Any session may take the same
# key: held by another exclusively, a waiter looks every CLAIM_FRESH_MS; held shared (so
# the claimant could not take it), every 20 ms, as it would without the lock. Either way
# nothing waits past its deadline, and no one is served out of turn: the lock only says
# when to look again.
_WAIT_FOR_CLAIMANT = f"""
        claimant := pg_catalog.pg_sequence_last_value('floorguard.lock_claim') & {_PID_MASK};
        IF pg_catalog.pg_try_advisory_lock_shared({CLAIM_WAKE_KEY}, claimant) THEN
          PERFORM pg_catalog.pg_advisory_unlock_shared({CLAIM_WAKE_KEY}, claimant);
          PERFORM pg_catalog.pg_sleep(0.02);
        ELSE
          PERFORM pg_catalog.set_config('lock_timeout', GREATEST(1, pg_catalog.ceil(
            EXTRACT(epoch FROM LEAST(interval '{CLAIM_FRESH_MS} ms',
              COALESCE(deadline - pg_catalog.clock_timestamp(), interval '{CLAIM_FRESH_MS} ms')))
            * 1000))::bigint::text, true);
          -- A transaction's lock, in a block always rolled back, which lets it go: when
          -- the claimant lets go just as the wait times out, PostgreSQL raises the timeout
          -- but grants the lock all the same, and a session's lock so granted would be
          -- kept for good (the claimant could then never take its wake lock again).
          BEGIN
            PERFORM pg_catalog.pg_advisory_xact_lock_shared({CLAIM_WAKE_KEY}, claimant);
            RAISE EXCEPTION USING ERRCODE = 'lock_not_available';
          EXCEPTION WHEN lock_not_available THEN
            NULL;
          END;
        END IF;
"""

# The chain's lock: an EXCLUSIVE lock on floorguard.append_lock, taken only inside the
# chain's functions (an appender has no privilege on that table: it can neither lock it
# nor take a row lock in it). Re-entrant within a transaction. The wait is bounded by the
# caller's lock_timeout; a holder that has held the lock longer than the limit is ended
# (pg_terminate_backend: the owner needs pg_signal_backend), except the owner's and a
# superuser's sessions. When it was taken, and by which transaction (its 32-bit xid), is
# kept in two unlogged sequences (written outside the transaction, so a waiter sees them at
# once; the time first, so a waiter that reads the holder and then the time never pairs a
# holder with an earlier holder's time): a holder cannot refresh its time by calling again,
# nor can a waiter that waited long be taken for a long holder once it holds the lock. A
# waiter ends only the holder whose time it read: the lock may change hands between its
# reads, and a holder whose hold is not written yet (it has just taken the lock, or its
# statement was cancelled in between) is written by the waiter, counted from then.
_TAKE_LOCK = f"""
CREATE OR REPLACE FUNCTION floorguard.take_lock() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  me bigint := pg_catalog.pg_current_xact_id()::text::bigint % 4294967296;
  caller_timeout text := pg_catalog.current_setting('lock_timeout');
  deadline timestamptz;
  wait interval := interval '{LOCK_HOLD_LIMIT_MS} ms';
  hold_limit interval;
  since timestamptz;
  recorded bigint;
  holder record;
  owner_oid oid;
  stuck boolean := false;
  started timestamptz := pg_catalog.clock_timestamp();
  unserved_since timestamptz := started;
  own_holding boolean;
  own_seen boolean;
  my_claim bigint;
  claim bigint;
  own_role oid;
  waking boolean := false;
  claimant integer;
  looked timestamptz;
  leftover record;
  ranked boolean := false;
BEGIN
  -- Already held by this session (the lock is re-entrant): nothing to wait for, and
  -- nothing written. Written again, the hold's time would be renewed (a holder calling
  -- again would never be ended) and a turn added to the ring for each call (a ring full
  -- of one holder's turns counts every waiter as served, and none would claim).
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
              WHERE l.pid = pg_catalog.pg_backend_pid() AND l.locktype = 'relation'
                AND l.relation = 'floorguard.append_lock'::pg_catalog.regclass
                AND l.mode = 'ExclusiveLock' AND l.granted) THEN
    RETURN;
  END IF;
  IF caller_timeout::interval > interval '0' THEN
    deadline := pg_catalog.clock_timestamp() + caller_timeout::interval;
  END IF;
  IF pg_catalog.pg_backend_pid() <= {_PID_MASK} THEN
    my_claim := ((EXTRACT(epoch FROM started) * 1000)::bigint - {CLAIM_EPOCH_MS})
                << {CLAIM_PID_BITS} | pg_catalog.pg_backend_pid();
  END IF;
  SELECT r.oid INTO own_role FROM pg_catalog.pg_roles r WHERE r.rolname = session_user;
  -- Whether a session of this host holds the lock as this one begins to wait (see
  -- _STARVED; the looks below tell when it no longer does).
  PERFORM pg_catalog.pg_stat_clear_snapshot();
  own_holding := EXISTS (
    SELECT 1 FROM pg_catalog.pg_locks l
      CROSS JOIN LATERAL pg_catalog.pg_stat_get_activity(l.pid) a
     WHERE l.locktype = 'relation' AND l.granted AND l.mode = 'ExclusiveLock'
       AND l.relation = 'floorguard.append_lock'::pg_catalog.regclass
       AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d
                          WHERE d.datname = pg_catalog.current_database())
       AND l.pid <> pg_catalog.pg_backend_pid() AND a.usesysid = own_role);
  -- A claim this session left (its statement cancelled, or a session ended whose pid it
  -- now has) must not stand for this wait: it would put this session ahead of its time.
  claim := COALESCE(pg_catalog.pg_sequence_last_value('floorguard.lock_claim'), 0);
  IF claim <> 0 AND claim & {_PID_MASK} = pg_catalog.pg_backend_pid() THEN
    PERFORM pg_catalog.setval('floorguard.lock_claim', 0);
  END IF;
  -- Likewise the wake lock such a claimant kept (waiters would sleep on it for nothing),
  -- and a claimant's that this session was granted as its wait timed out under an older
  -- floorguard (that claimant could not take it again). None is held here otherwise.
  FOR leftover IN SELECT l.objid::bigint::integer AS pid, l.mode FROM pg_catalog.pg_locks l
                   WHERE {_WAKE_LOCK_ROWS}
  LOOP
    IF leftover.mode = 'ExclusiveLock' THEN  -- (taken once a call at most)
      PERFORM pg_catalog.pg_advisory_unlock({CLAIM_WAKE_KEY}, leftover.pid);
    ELSE
      PERFORM pg_catalog.pg_advisory_unlock_shared({CLAIM_WAKE_KEY}, leftover.pid);
    END IF;
  END LOOP;
  LOOP
    IF deadline IS NOT NULL THEN
      wait := LEAST(wait, deadline - pg_catalog.clock_timestamp());
      IF wait <= interval '0' THEN
        IF pg_catalog.pg_sequence_last_value('floorguard.lock_claim') = my_claim THEN
          PERFORM pg_catalog.setval('floorguard.lock_claim', 0);
        END IF;
        IF waking THEN
          PERFORM pg_catalog.pg_advisory_unlock({CLAIM_WAKE_KEY}, pg_catalog.pg_backend_pid());
        END IF;
        RAISE EXCEPTION 'floorguard: another session holds the chain''s lock'
          USING ERRCODE = 'lock_not_available',
                HINT = CASE WHEN stuck THEN 'the chain''s owner cannot end it: grant it '
                  'pg_signal_backend (GRANT pg_signal_backend TO ' || current_user || ')'
                  ELSE 'it is ended once it has held the lock for longer than meta '
                  'lock_hold_limit_ms' END;
      END IF;
    END IF;
    -- While another's claim stands, wait outside the lock's queue: the claimant is then
    -- next when the holder lets the lock go, rather than after every session queued
    -- before it, each given the lock in turn only to let it go. (An older starved waiter
    -- may take the claim over meanwhile; the claimant ends a holder past its limit.)
    IF {_CLAIM_STANDS_TEST} THEN
{_CLAIM_STEP}      IF {_CLAIM_STANDS_TEST} THEN
{_WAIT_FOR_CLAIMANT}        wait := interval '50 ms';
        CONTINUE;
      END IF;
    END IF;
    -- A claimant renews its claim well within CLAIM_FRESH_MS, so that others find it
    -- standing without reading the lock table; a waiter not yet starved looks again (and
    -- may claim) once it has waited the hold limit.
    IF pg_catalog.pg_sequence_last_value('floorguard.lock_claim') = my_claim THEN
      wait := LEAST(wait, interval '{CLAIM_FRESH_MS // 2} ms');
    ELSIF pg_catalog.clock_timestamp() - unserved_since
          < COALESCE(hold_limit, interval '{LOCK_HOLD_LIMIT_MS} ms') THEN
      wait := LEAST(wait, unserved_since
                          + COALESCE(hold_limit, interval '{LOCK_HOLD_LIMIT_MS} ms')
                          - pg_catalog.clock_timestamp());
    END IF;
    PERFORM pg_catalog.set_config('lock_timeout',
      GREATEST(1, pg_catalog.ceil(EXTRACT(epoch FROM wait) * 1000))::bigint::text, true);
    BEGIN
      LOCK TABLE floorguard.append_lock IN EXCLUSIVE MODE;
      -- Given the lock while another's claim stands: let it go (the block's rollback
      -- releases it) and wait again, behind the claimant. (Before the tables' locks: a
      -- session seen with those and not the chain's lock would be ended.)
      IF {_CLAIM_STANDS_TEST} THEN
        RAISE EXCEPTION USING ERRCODE = 'lock_not_available';
      END IF;
      -- (what the append writes: a request queued on them would stall its INSERT)
      LOCK TABLE floorguard.records, floorguard.tree IN ROW EXCLUSIVE MODE;
      EXIT;
    EXCEPTION WHEN lock_not_available THEN
      NULL;
    END;
    -- Once this append has waited the hold limit (as of its last look), it claims the lock
    -- unless an older waiter's claim stands, and while it claims, it says it still waits.
{_CLAIM_STEP}
    -- While another's claim stands, its claimant looks for a holder to end: this one waits
    -- for it outside the queue (above), rather than read the lock table too, and looks
    -- itself soon after the claim is gone.
    wait := interval '50 ms';
    CONTINUE WHEN {_CLAIM_STANDS_TEST};
    SELECT r.oid INTO owner_oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user;
    -- Backends and their transactions as they are now: within a transaction PostgreSQL
    -- answers from a snapshot taken at the first look, which misses a session that
    -- connected since, and the transaction a session runs now.
    PERFORM pg_catalog.pg_stat_clear_snapshot();
    wait := interval '50 ms';
    -- First the requests for (or holds of) a lock no append takes, before anything below
    -- reads a table or sequence of the chain that such a queued request would make this
    -- append wait on.
    IF NOT floorguard.end_lock_requests() THEN
      stuck := true;
      wait := COALESCE(hold_limit, interval '{LOCK_HOLD_LIMIT_MS} ms');
    END IF;
{_CLAIM_RENEWED}
    hold_limit := COALESCE((SELECT (m.value || ' ms')::interval FROM floorguard.meta m
                             WHERE m.key = 'lock_hold_limit_ms'),
                           interval '{LOCK_HOLD_LIMIT_MS} ms');
    -- Every holder gets the whole limit, however long this append has waited: a starved
    -- append is served through its claim (whoever is given the lock while it stands lets
    -- it go), after the holder of the moment. A shorter limit for holders while an append
    -- is starved would end an honest append that holds the lock across round trips to a
    -- distant server, and a host (with an accomplice, or its own timing) can make a
    -- session of its own starved to order.
    -- The holder before its time (see above).
    recorded := pg_catalog.pg_sequence_last_value('floorguard.lock_holder');
    since := pg_catalog.to_timestamp(
      pg_catalog.pg_sequence_last_value('floorguard.lock_since') / 1000000.0);
{_CLAIM_RENEWED}
    -- Ended, unless the owner's or a superuser's: the holder of the chain's lock past the
    -- limit, and (again) the requests ended above. A hold is judged as of the time before
    -- the lock table was read, not after: a slow reading must not count time in which the
    -- holder may have let go.
    looked := pg_catalog.clock_timestamp();
    own_seen := false;
    FOR holder IN SELECT * FROM floorguard.lock_sessions(true)
    LOOP
      own_seen := own_seen OR (holder.holds_lock AND holder.usesysid = own_role);
      CONTINUE WHEN holder.usesysid = owner_oid OR COALESCE(
        (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.oid = holder.usesysid), true);
      IF holder.holds_lock THEN
        IF COALESCE(holder.xid, 0) IS DISTINCT FROM recorded THEN
          since := pg_catalog.clock_timestamp();
          PERFORM pg_catalog.setval('floorguard.lock_since',
            (EXTRACT(epoch FROM since) * 1000000)::bigint);
          recorded := COALESCE(holder.xid, 0);
          PERFORM pg_catalog.setval('floorguard.lock_holder', recorded);
        END IF;
        IF since + hold_limit > looked THEN
          wait := GREATEST(since + hold_limit - pg_catalog.clock_timestamp(), interval '0')
                  + interval '20 ms';
          CONTINUE;
        END IF;
      END IF;
{_SEEN_AGAIN_ANY}
      IF NOT pg_catalog.pg_has_role('pg_signal_backend', 'USAGE') THEN
        stuck := true;
        wait := hold_limit;
        CONTINUE;
      END IF;
      RAISE LOG 'floorguard: ending backend % (role %): %', holder.pid,
        pg_catalog.pg_get_userbyid(holder.usesysid), CASE WHEN holder.holds_lock
          THEN 'it held the chain''s lock for over ' || hold_limit::text
          ELSE 'it asked for a lock on the chain''s tables that no append takes' END;
      PERFORM pg_catalog.pg_terminate_backend(holder.pid, 1000);
    END LOOP;
    -- (A hold of this host's that has ended since the last look ended before this one.)
    IF own_seen THEN
      own_holding := true;
    ELSIF own_holding THEN
      own_holding := false;
      unserved_since := looked;
    END IF;
{_CLAIM_STEP}  END LOOP;
  PERFORM pg_catalog.set_config('lock_timeout', caller_timeout, true);
  PERFORM pg_catalog.setval('floorguard.lock_since',
    (EXTRACT(epoch FROM pg_catalog.clock_timestamp()) * 1000000)::bigint);
  PERFORM pg_catalog.setval('floorguard.lock_holder', me);
  IF pg_catalog.pg_sequence_last_value('floorguard.lock_claim') = my_claim THEN
    PERFORM pg_catalog.setval('floorguard.lock_claim', 0);
  END IF;
  IF waking THEN
    PERFORM pg_catalog.pg_advisory_unlock({CLAIM_WAKE_KEY}, pg_catalog.pg_backend_pid());
  END IF;
  PERFORM pg_catalog.setval(pg_catalog.format('floorguard.lock_served_%s',
    pg_catalog.nextval('floorguard.lock_served_next') % {SERVED_RING})::pg_catalog.regclass,
    {_NOW_MS_MOD} << 32 | own_role::bigint);
END $$
"""  # noqa: S608

_READ_COMMITTED = """
  IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'floorguard: an append runs at READ COMMITTED, not %',
      pg_catalog.current_setting('transaction_isolation')
      USING ERRCODE = 'invalid_transaction_state';
  END IF;
"""

# The chain's lock, as open_append takes it (it declares ``me bigint``): inline when
# uncontended (a call of take_lock costs more than the rest), else waiting in take_lock.
# Always asked of PostgreSQL, never inferred from lock_holder: a savepoint rolled back
# releases the lock but not what the (non-transactional) sequence says. A hold taken at
# once is not written: no one waited for it, and the first waiter to see it writes it,
# counted from then (its transaction has an id from the start, which is how a waiter
# knows it); calling again writes nothing, so a holder cannot renew its hold.
_LOCK_STEP = f"""
  me := pg_catalog.pg_current_xact_id()::text::bigint % 4294967296;
  -- (Nothing but the LOCK in the block: an expression inside one is set up afresh. A
  -- claim written between the test and the LOCK lets this one hold go first.)
  IF {_CLAIM_STANDS_TEST} THEN
    PERFORM floorguard.take_lock();
  ELSE
    BEGIN
      LOCK TABLE floorguard.append_lock IN EXCLUSIVE MODE NOWAIT;
      LOCK TABLE floorguard.records, floorguard.tree IN ROW EXCLUSIVE MODE NOWAIT;
    EXCEPTION WHEN lock_not_available THEN
      PERFORM floorguard.take_lock();  -- waits, ends what stalls it, and records the hold
    END;
  END IF;
"""


# An append's first step: the chain's lock, then the server's clock (the new record's
# time), the head record (NULLs for an empty chain) and, as "level:index:hex,...", the
# right edge of the tree of n = head + 1 leaves: the head's leaf (0, head), which says the
# tree is built up to the head, and for each bit L set in n the node (L, (n >> L) - 1). The
# new leaf is hashed with the lowest of them, and all of them fold into the tree's root
# before and after it (what a host remembers: floorguard.chain_view). With a known_size,
# also the left edge of a tree of that size, (L, (known_size >> L) - 1) for each bit L set
# in it: the nodes of the root a witness compares with the one it remembers.
_OPEN_APPEND_FUNCTION = f"""
CREATE OR REPLACE FUNCTION floorguard_api.open_append(known_size bigint,
  OUT clock text, OUT seq bigint, OUT ts text, OUT chain_id text, OUT event text,
  OUT receipt_id text, OUT receipt text, OUT prev text, OUT mac text, OUT nodes text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  me bigint;
  levels integer[];
  idxs bigint[];
  lvl integer;
  i integer;
  node bytea;
BEGIN
{_READ_COMMITTED}
  IF known_size < 0 THEN
    RAISE EXCEPTION 'floorguard: known_size % is negative', known_size
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
{_LOCK_STEP}
  open_append.clock := pg_catalog.to_char(pg_catalog.clock_timestamp() AT TIME ZONE 'UTC',
                                          'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');
  SELECT r.seq, r.ts, r.chain_id, r.event, r.receipt_id, r.receipt, r.prev, r.mac,
         (SELECT t.hash FROM floorguard.tree t WHERE t.level = 0 AND t.idx = r.seq)
    INTO open_append.seq, open_append.ts, open_append.chain_id, open_append.event,
         open_append.receipt_id, open_append.receipt, open_append.prev, open_append.mac, node
    FROM floorguard.records r ORDER BY r.seq DESC LIMIT 1;
  IF node IS NOT NULL THEN
    open_append.nodes := '0:' || open_append.seq::text || ':' || pg_catalog.encode(node, 'hex');
  END IF;
  -- One index probe per node: a join here would be planned afresh for each call.
  IF open_append.seq IS NOT NULL THEN
    FOR lvl IN 1 .. 62 LOOP
      EXIT WHEN (open_append.seq + 1) >> lvl = 0;
      IF (open_append.seq + 1) & (1::bigint << lvl) <> 0 THEN
        levels := levels || lvl;
        idxs := idxs || ((open_append.seq + 1) >> lvl) - 1;
      END IF;
    END LOOP;
  END IF;
  -- (Of a known_size equal to the head's tree, every node is listed above already.)
  FOR lvl IN 0 .. 62 LOOP
    EXIT WHEN known_size IS NULL OR known_size >> lvl = 0
           OR known_size = open_append.seq + 1;
    IF known_size & (1::bigint << lvl) <> 0 THEN
      levels := levels || lvl;
      idxs := idxs || (known_size >> lvl) - 1;
    END IF;
  END LOOP;
  FOR i IN 1 .. COALESCE(pg_catalog.cardinality(levels), 0) LOOP
    SELECT t.hash INTO node FROM floorguard.tree t WHERE t.level = levels[i] AND t.idx = idxs[i];
    IF FOUND THEN
      open_append.nodes := pg_catalog.concat_ws(',', open_append.nodes,
        levels[i]::text || ':' || idxs[i]::text || ':' || pg_catalog.encode(node, 'hex'));
    END IF;
  END LOOP;
END $$
"""  # noqa: S608

_LEAF = "pg_catalog.sha256(pg_catalog.decode('00', 'hex') || {utf8})".format(
    utf8="pg_catalog.convert_to({line}, 'UTF8')"
)
_NODE = "pg_catalog.sha256(pg_catalog.decode('01', 'hex') || {left} || {right})"
_EVENT_NAMES = ", ".join(
    f"'{name}'"
    for name in sorted(
        (
            "adapter.spawn_preflight_receipt",
            "adapter.version_posture",
            "adapter.floor_update_receipt",
            "adapter.canary_receipt",
        )
    )
)
MAX_RECEIPT_BYTES = 1 << 20  # chain.MAX_RECEIPT_BYTES: the receipt's UTF-8 bytes
# _canonical.MAX_NESTING: no verifier reads a record line nesting deeper (nor a receipt
# nesting deeper than one level less: its line holds it).
MAX_NESTING = 200

# The one way an appender writes: a well-formed next record, and exactly the tree nodes it
# adds (its leaf and the subtrees it completes), each recomputed here from the record and
# the stored siblings; its ts as the records' trigger would check it (which then skips the
# row). On a chain whose tree is not built up to the head yet (written before the tree
# existed), the record comes without nodes; the tree is then built through add_tree_nodes.
_APPEND_RECORD_ARGS = (
    "bigint, text, text, text, text, text, text, text, integer[], bigint[], bytea[]"
)


def _append_function(name: str, *, ahead: bool) -> str:
    """The CREATE statement of ``append_record`` or, with ``ahead``, of ``append_next``.

    append_next is an append in one round trip, for a host that already knows the head (it
    wrote it): it takes the chain's lock if no one holds it (else lock_not_available),
    refuses with serialization_failure unless the right edge of the stored tree is the one
    the host sent (the tree it remembers), stores the record as append_record does, and returns the
    server's clock, which the host's next stamp is estimated from. Its record may be stamped
    up to AHEAD_SLACK_MS before its transaction began: the host stamps it before sending.
    """
    slack_ms = AHEAD_SLACK_MS if ahead else 0
    extra_args = (
        ",\n  edge_levels integer[], edge_idxs bigint[], edge_hashes bytea[]" if ahead else ""
    )
    returns = "text" if ahead else "void"
    lock = (_LOCK_AT_ONCE + _EDGE_CHECK) if ahead else _LOCK_HELD_OR_FREE
    head_check = _HEAD_CHECK if ahead else ""
    # Ahead, the edge checked above is the stored right edge: the head's leaf is its first
    # node (assigned by the head check, once the edge is known to start there), and the
    # left sibling at each level the new leaf completes is the edge's node of that level.
    head_leaf = (
        "NULL::bytea"
        if ahead
        else "(SELECT t.hash FROM floorguard.tree t WHERE t.level = 0 AND t.idx = r.seq)"
    )
    left_sibling = (
        "        left_hash := CASE WHEN edge_levels[lvl + 1] = lvl\n"
        "                           AND edge_idxs[lvl + 1] = pos - 1\n"
        "                          THEN edge_hashes[lvl + 1] END;\n"
        if ahead
        else "        left_hash := NULL;\n"
        "        SELECT t.hash INTO left_hash FROM floorguard.tree t\n"
        "         WHERE t.level = lvl AND t.idx = pos - 1;\n"
    )
    ending = (
        "  RETURN pg_catalog.to_char(pg_catalog.clock_timestamp() AT TIME ZONE 'UTC',\n"
        '                            \'YYYY-MM-DD"T"HH24:MI:SS.US"Z"\');\n'
        if ahead
        else ""
    )
    # Plans made once per session: left to choose, PostgreSQL kept planning the edge
    # check's query anew on every call (its array arguments make a custom plan look
    # cheaper), which cost about as much as running it. Every query here is an index probe
    # or reads the function's own arguments, so one generic plan serves every call; with
    # sequential scans off, a plan made while the tables were tiny stays a probe as they grow.
    return f"""
CREATE OR REPLACE FUNCTION floorguard_api.{name}(seq bigint, ts text, chain_id text,
  event text, receipt_id text, receipt text, prev text, mac text,
  levels integer[], idxs bigint[], hashes bytea[]{extra_args}) RETURNS {returns}
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
  head floorguard.records%ROWTYPE;
  rebuilt text;
  utf16 boolean := false;  -- (what the nested values' rebuilding reads: no key beyond the BMP)
  has_head boolean;
  head_leaf bytea;
  chain text;
  expected text;
  node bytea;
  left_hash bytea;
  pos bigint;
  lvl integer := 0;
  want_levels integer[];
  want_idxs bigint[];
  want_hashes bytea[];
  stored_records bigint;
  stored_nodes bigint;
BEGIN
{_READ_COMMITTED}
{lock}  -- The head and its leaf (the tree is built up to the head) in one query (ahead, the
  -- leaf is the edge's, assigned below). A record names the chain its head names (the
  -- first one, meta's: chain init's).
  SELECT r.seq, r.ts, r.chain_id, r.event, r.receipt_id, r.receipt, r.prev, r.mac,
         {head_leaf}
    INTO head.seq, head.ts, head.chain_id, head.event, head.receipt_id, head.receipt,
         head.prev, head.mac, head_leaf
    FROM floorguard.records r ORDER BY r.seq DESC LIMIT 1;
  has_head := FOUND;
{head_check}  chain := head.chain_id;
  IF NOT has_head THEN
    chain := (SELECT m.value FROM floorguard.meta m WHERE m.key = 'chain_id');
  END IF;
  IF {name}.seq IS DISTINCT FROM (CASE WHEN has_head THEN head.seq + 1 ELSE 0 END) THEN
    RAISE EXCEPTION 'floorguard: record % is not the next one (the head is %)',
      {name}.seq, head.seq USING ERRCODE = 'check_violation';
  END IF;
  expected := 'sha256:' || CASE WHEN has_head THEN pg_catalog.encode(pg_catalog.sha256(
    pg_catalog.convert_to({_json_text_sql("head.", mac=False)}, 'UTF8')), 'hex')
    ELSE pg_catalog.repeat('0', 64) END;
  IF {name}.prev IS DISTINCT FROM expected THEN
    RAISE EXCEPTION 'floorguard: record %''s prev % is not the digest of the head (%)',
      {name}.seq, {name}.prev, expected USING ERRCODE = 'check_violation';
  END IF;
  IF {name}.chain_id IS DISTINCT FROM chain THEN
    RAISE EXCEPTION 'floorguard: record % names chain %, not this chain (%)',
      {name}.seq, {name}.chain_id, chain USING ERRCODE = 'check_violation';
  END IF;
  IF {name}.event IS NULL OR {name}.event NOT IN ({_EVENT_NAMES}) THEN
    RAISE EXCEPTION 'floorguard: record %''s event % is not one of the chain''s events',
      {name}.seq, {name}.event USING ERRCODE = 'check_violation';
  END IF;
  -- A JSON object in RFC 8785 form: what every verifier re-derives from the record. (A
  -- receipt that is not JSON at all fails the cast, with PostgreSQL's own message: a block
  -- catching it would cost a subtransaction on every append.)
  -- (The common receipt, an object with no NUL and no key beyond the BMP, rebuilt here:
  -- a call of canonical_json costs more than the rebuilding.)
  IF pg_catalog.octet_length({name}.receipt) <= {MAX_RECEIPT_BYTES}
     AND pg_catalog.left({name}.receipt, 1) = '{{' THEN
    IF pg_catalog.strpos({name}.receipt, '\\u0000') = 0
       AND {name}.receipt !~ '[\\U00010000-\\U0010FFFF]' THEN
{_canonical_object_sql(name + ".receipt::jsonb", 'e.key COLLATE "C"')}
    ELSE
      rebuilt := {canonical_receipt_sql(name + ".receipt")};
    END IF;
  END IF;
  IF rebuilt IS DISTINCT FROM {name}.receipt THEN
    RAISE EXCEPTION 'floorguard: record %''s receipt is not a JSON object of at most % bytes '
      'in canonical form (RFC 8785: no spaces, keys sorted and unique, each string, '
      'number and literal written one way)', {name}.seq, {MAX_RECEIPT_BYTES}
      USING ERRCODE = 'check_violation';
  END IF;
  -- What no verifier reads is no well-formed record: a receipt whose containers nest more
  -- than {MAX_NESTING - 1} deep (a container at level {MAX_NESTING - 1}, the receipt itself
  -- at 0). Looked for only when it has that many brackets at all: a receipt writers make
  -- has a few.
  -- (Counted in bytes: no other character's UTF-8 holds the byte of '[' or '{{'; replace
  -- finds a byte as memchr does, where translate looks at every character.)
  IF pg_catalog.octet_length({name}.receipt) - pg_catalog.octet_length(pg_catalog.replace(
       pg_catalog.replace({name}.receipt, '[', ''), '{{', '')) >= {MAX_NESTING}
     AND pg_catalog.jsonb_path_exists((CASE WHEN pg_catalog.strpos({name}.receipt, '\\u0000') = 0
       THEN {name}.receipt ELSE {_nul_as_ffff_sql(name + ".receipt")} END)::jsonb,
       'strict $.**{{{MAX_NESTING - 1}}} ? (@.type() == "object" || @.type() == "array")') THEN
    RAISE EXCEPTION 'floorguard: record %''s receipt nests deeper than % levels, which no '
      'verifier reads', {name}.seq, {MAX_NESTING - 1} USING ERRCODE = 'check_violation';
  END IF;
  IF {name}.receipt_id IS DISTINCT FROM 'sha256:' || pg_catalog.encode(
       pg_catalog.sha256(pg_catalog.convert_to({name}.receipt, 'UTF8')), 'hex') THEN
    RAISE EXCEPTION 'floorguard: record %''s receipt_id is not the digest of its receipt',
      {name}.seq USING ERRCODE = 'check_violation';
  END IF;
  -- ^([0-9a-f]{{64}}|ed25519:[0-9a-f]{{16}}:[0-9a-f]{{128}})$, in a tenth of a regex's time.
  IF (CASE pg_catalog.length({name}.mac)
      WHEN 64 THEN pg_catalog.ltrim({name}.mac, '0123456789abcdef') = ''
      WHEN 153 THEN pg_catalog.left({name}.mac, 8) = 'ed25519:'
        AND pg_catalog.substr({name}.mac, 25, 1) = ':'
        AND pg_catalog.ltrim(pg_catalog.substr({name}.mac, 9, 16), '0123456789abcdef') = ''
        AND pg_catalog.ltrim(pg_catalog.substr({name}.mac, 26), '0123456789abcdef') = ''
      END) IS NOT TRUE THEN
    RAISE EXCEPTION 'floorguard: record %''s mac is neither an HMAC (64 lowercase hex) nor '
      'a host signature (ed25519:<key id>:<signature>)', {name}.seq
      USING ERRCODE = 'check_violation';
  END IF;
{_stamp_check(name + ".seq", name + ".ts", "head.ts", slack_ms=slack_ms)}
  IF {name}.seq = 0 OR head_leaf IS NOT NULL THEN
    node := {_LEAF.format(line=_json_text_sql(name + ".", mac=True))};
    pos := {name}.seq;
    want_levels := ARRAY[0];
    want_idxs := ARRAY[pos];
    want_hashes := ARRAY[node];
    WHILE pos & 1 = 1 LOOP
      left_hash := head_leaf;  -- (0, seq - 1)
      IF lvl > 0 THEN
{left_sibling}      END IF;
      IF left_hash IS NULL THEN
        RAISE EXCEPTION 'floorguard: the Merkle tree lacks subtree (%, %)', lvl, pos - 1
          USING ERRCODE = 'data_corrupted';
      END IF;
      node := {_NODE.format(left="left_hash", right="node")};
      lvl := lvl + 1;
      pos := pos >> 1;
      want_levels := want_levels || lvl;
      want_idxs := want_idxs || pos;
      want_hashes := want_hashes || node;
    END LOOP;
  END IF;
  IF COALESCE(want_levels, '{{}}') IS DISTINCT FROM levels
     OR COALESCE(want_idxs, '{{}}') IS DISTINCT FROM idxs
     OR COALESCE(want_hashes, '{{}}') IS DISTINCT FROM hashes THEN
    RAISE EXCEPTION 'floorguard: record %''s tree nodes are not its leaf and the subtrees it '
      'completes', {name}.seq USING ERRCODE = 'check_violation';
  END IF;
  -- Checked: the records' trigger need not read the head again for this row.
  PERFORM pg_catalog.set_config('{CHECKED_SEQ_SETTING}', {name}.seq::text, true);
  -- One statement (each costs an executor's start): the record, then its nodes (none on a
  -- chain whose tree is not built yet).
  WITH r AS (
    INSERT INTO floorguard.records (seq, ts, chain_id, event, receipt_id, receipt, prev, mac)
    VALUES ({name}.seq, {name}.ts, {name}.chain_id, {name}.event,
            {name}.receipt_id, {name}.receipt, {name}.prev,
            {name}.mac) RETURNING 1),
  t AS (
    INSERT INTO floorguard.tree (level, idx, hash)
    SELECT want_levels[g.i], want_idxs[g.i], want_hashes[g.i]
      FROM pg_catalog.generate_series(1, pg_catalog.cardinality(want_levels)) AS g(i)
    RETURNING 1)
  SELECT (SELECT pg_catalog.count(*) FROM r), (SELECT pg_catalog.count(*) FROM t)
    INTO stored_records, stored_nodes;
  -- (a trigger or rule of the database's own that drops a row would leave a permit with
  -- no record: the append fails instead)
  IF stored_records IS DISTINCT FROM 1
     OR stored_nodes IS DISTINCT FROM COALESCE(pg_catalog.cardinality(want_levels), 0) THEN
    RAISE EXCEPTION 'floorguard: record % was not stored as written (% record rows and % '
      'tree rows of %): something in the database drops or adds rows', {name}.seq,
      stored_records, stored_nodes, COALESCE(pg_catalog.cardinality(want_levels), 0)
      USING ERRCODE = 'check_violation';
  END IF;
{ending}END $$
"""  # noqa: S608


def _lock_at_once(refused_when: str) -> str:
    """The chain's lock and its tables', asked of PostgreSQL itself and never waited for:
    refused (lock_not_available) when ``refused_when`` holds or another holds the lock.
    Only take_lock waits for the lock: it bounds the wait and serves a starved append first;
    a session queued anywhere else would wait outside it, never stepping aside for a claim
    nor being ended. (Not lock_holder's word: a savepoint rolled back releases the lock,
    not the sequence.) The transaction has its id before it holds the lock: a waiter knows
    a hold by that id, and one given later (at the INSERT, after a large record's checks)
    would read as a new hold, timed afresh."""
    return f"""
  IF {refused_when} THEN
    RAISE EXCEPTION 'floorguard: another append claims the chain''s lock'
      USING ERRCODE = 'lock_not_available';
  END IF;
  PERFORM pg_catalog.pg_current_xact_id();
  LOCK TABLE floorguard.append_lock IN EXCLUSIVE MODE NOWAIT;
  LOCK TABLE floorguard.records, floorguard.tree IN ROW EXCLUSIVE MODE NOWAIT;
"""


# append_record's lock: granted at once to the transaction that holds it (open_append took
# it, as an honest append does, even if a claim stands now); else taken at once when it is
# free and no other append claims it.
_HOLDS_THE_LOCK = """EXISTS (
       SELECT 1 FROM pg_catalog.pg_locks l
        WHERE l.pid = pg_catalog.pg_backend_pid() AND l.locktype = 'relation'
          AND l.granted AND l.mode = 'ExclusiveLock'
          AND l.relation = 'floorguard.append_lock'::pg_catalog.regclass)"""
_LOCK_HELD_OR_FREE = _lock_at_once(f"{_CLAIM_STANDS_TEST} AND NOT {_HOLDS_THE_LOCK}")
# append_next's lock: taken at once or not at all (lock_not_available, a miss). A chain
# another append holds is not quiet; the ordinary way then waits for it in take_lock, which
# bounds the wait and records the hold. (No exception block here: entering one costs a
# subtransaction on every append.)
_LOCK_AT_ONCE = _lock_at_once(_CLAIM_STANDS_TEST)
# append_next's check of the host's tree: every node of the right edge it sent is stored.
# The stored hashes at the edge's positions, in its order, against the hashes sent: one
# index probe per node (seq scans are off in the append functions, so the plan made once
# per session stays a probe however small the tree was then), and no join or aggregate to
# set up on every append. A NULL sent is never a match, even where no node is stored. No
# edge has more than 63 nodes: a longer one is refused before any probe (under the lock).
_EDGE_CHECK = """
  IF pg_catalog.cardinality(edge_levels) > 63
     OR pg_catalog.cardinality(edge_levels) IS DISTINCT FROM pg_catalog.cardinality(edge_idxs)
     OR pg_catalog.cardinality(edge_levels) IS DISTINCT FROM pg_catalog.cardinality(edge_hashes)
     OR pg_catalog.array_position(edge_hashes, NULL) IS NOT NULL
     OR edge_hashes IS DISTINCT FROM ARRAY(
          SELECT (SELECT t.hash FROM floorguard.tree t WHERE t.level = e.l AND t.idx = e.i)
            FROM ROWS FROM (pg_catalog.unnest(edge_levels), pg_catalog.unnest(edge_idxs))
                 WITH ORDINALITY AS e(l, i, o)
           ORDER BY e.o) THEN
    RAISE EXCEPTION 'floorguard: the chain is not the one this host last wrote'
      USING ERRCODE = 'serialization_failure';
  END IF;
"""
# append_next's check that the edge sent is the whole right edge of the tree of n = head + 1
# leaves, in order: the head's leaf (0, head), then (L, (n >> L) - 1) for each bit L >= 1 set
# in n, levels rising. The edge check above found each of them stored as sent, so the
# stored tree's root is the one the host remembers; a node left out or sent twice would
# leave part of the tree unchecked. One comparison per node sent; the count of bits set
# says none is missing. (IS NOT TRUE: a NULL, or a subscript outside the arrays, fails.)
# Then the head, whole: its export line (its mac included, which its successor's prev
# does not cover) must hash to its leaf, so the head is the record the host wrote, byte
# for byte.
_HEAD_CHECK = f"""
  pos := head.seq + 1;
  IF NOT has_head
     OR (edge_levels[1] = 0 AND edge_idxs[1] = head.seq
         AND pg_catalog.cardinality(edge_levels)
             = 1 + pg_catalog.bit_count((pos >> 1)::bit(64))) IS NOT TRUE THEN
    RAISE EXCEPTION 'floorguard: the tree sent is not the right edge of the chain''s tree'
      USING ERRCODE = 'serialization_failure';
  END IF;
  FOR k IN 2 .. pg_catalog.cardinality(edge_levels) LOOP
    IF (edge_levels[k] BETWEEN edge_levels[k - 1] + 1 AND 62
        AND (pos >> edge_levels[k]) & 1 = 1
        AND edge_idxs[k] = (pos >> edge_levels[k]) - 1) IS NOT TRUE THEN
      RAISE EXCEPTION 'floorguard: the tree sent is not the right edge of the chain''s tree'
        USING ERRCODE = 'serialization_failure';
    END IF;
  END LOOP;
  head_leaf := edge_hashes[1];  -- (the stored (0, head), as the edge check found it)
  IF {_LEAF.format(line=_json_text_sql("head.", mac=True))}
       IS DISTINCT FROM head_leaf THEN
    RAISE EXCEPTION 'floorguard: the head is not the record this host wrote'
      USING ERRCODE = 'serialization_failure';
  END IF;
"""
_APPEND_RECORD = _append_function("append_record", ahead=False)
_APPEND_NEXT = _append_function("append_next", ahead=True)
_APPEND_NEXT_ARGS = _APPEND_RECORD_ARGS + ", integer[], bigint[], bytea[]"

# Tree nodes of stored records (a chain written before the tree existed gets its tree this
# way): each is recomputed from its record (a leaf) or from its two stored children.
_ADD_TREE_NODES = f"""
CREATE OR REPLACE FUNCTION floorguard_api.add_tree_nodes(levels integer[], idxs bigint[],
  hashes bytea[]) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  node bytea;
  linked boolean;
  named boolean;
  i integer;
BEGIN
{_READ_COMMITTED}
  PERFORM floorguard.take_lock();
  IF pg_catalog.cardinality(levels) IS DISTINCT FROM pg_catalog.cardinality(idxs)
     OR pg_catalog.cardinality(levels) IS DISTINCT FROM pg_catalog.cardinality(hashes) THEN
    RAISE EXCEPTION 'floorguard: levels, indexes and hashes differ in number'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  FOR i IN 1 .. pg_catalog.cardinality(levels) LOOP
    node := NULL;
    IF levels[i] = 0 THEN
      -- A leaf only of a record linked to the one before it and holding its receipt_id's
      -- receipt, as every append checks its head: a record the owner inserted by hand,
      -- unlinked or holding another receipt, is never built into the tree by any host.
      SELECT {_LEAF.format(line=_json_text_sql("r.", mac=True))},
             r.prev IS NOT DISTINCT FROM CASE WHEN r.seq = 0
               THEN 'sha256:' || pg_catalog.repeat('0', 64)
               ELSE (SELECT 'sha256:' || pg_catalog.encode(pg_catalog.sha256(
                       pg_catalog.convert_to({_json_text_sql("p.", mac=False)}, 'UTF8')), 'hex')
                       FROM floorguard.records p WHERE p.seq = r.seq - 1) END,
             r.receipt_id IS NOT DISTINCT FROM 'sha256:' || pg_catalog.encode(pg_catalog.sha256(
               pg_catalog.convert_to(r.receipt, 'UTF8')), 'hex')
        INTO node, linked, named
        FROM floorguard.records r WHERE r.seq = idxs[i];
      IF node IS NOT NULL AND NOT linked THEN
        RAISE EXCEPTION 'floorguard: record %''s prev is not the digest of the record before '
          'it: its leaf is not built', idxs[i] USING ERRCODE = 'check_violation';
      END IF;
      IF node IS NOT NULL AND NOT named THEN
        RAISE EXCEPTION 'floorguard: record %''s receipt_id is not the digest of its receipt: '
          'its leaf is not built', idxs[i] USING ERRCODE = 'check_violation';
      END IF;
    ELSIF levels[i] BETWEEN 1 AND 62 THEN
      SELECT {_NODE.format(left="a.hash", right="b.hash")} INTO node
        FROM floorguard.tree a JOIN floorguard.tree b
          ON b.level = a.level AND b.idx = a.idx + 1
       WHERE a.level = levels[i] - 1 AND a.idx = idxs[i] * 2;
    END IF;
    IF node IS NULL OR node IS DISTINCT FROM hashes[i] THEN
      RAISE EXCEPTION 'floorguard: tree node (%, %) is not the hash of its stored %',
        levels[i], idxs[i], CASE WHEN levels[i] = 0 THEN 'record' ELSE 'children' END
        USING ERRCODE = 'check_violation';
    END IF;
    INSERT INTO floorguard.tree (level, idx, hash) VALUES (levels[i], idxs[i], node);
    IF NOT FOUND THEN
      RAISE EXCEPTION 'floorguard: tree node (%, %) was not stored: something in the '
        'database drops rows', levels[i], idxs[i] USING ERRCODE = 'check_violation';
    END IF;
  END LOOP;
END $$
"""  # noqa: S608

# --- what a host reads ----------------------------------------------------------------------
# A host's role has no privilege in the tables' schema, not even USAGE. PostgreSQL locks
# a table a statement names when it parses the statement, and checks privileges only when
# it runs it: a role that could name the chain's tables could hold locks on them that no
# append takes (a PREPAREd DELETE, a MERGE that does nothing, DDL queued behind its own
# read) and stall every host. Without USAGE the name itself is refused, before any lock.
# So a host reads, as it appends, through functions of API_SCHEMA: SECURITY DEFINER,
# owned by the owner, run in the caller's transaction and snapshot. PL/pgSQL, whose plans
# a session keeps (a SQL function's are made again at every call).
_ROW_COLUMNS = (
    "seq bigint, ts text, chain_id text, event text, receipt_id text, receipt text,"
    " prev text, mac text"
)
_ROW_OF_R = "r.seq, r.ts, r.chain_id, r.event, r.receipt_id, r.receipt, r.prev, r.mac"
_READER = "LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp"
_READ_FUNCTIONS = (
    # The last record's seq, the last leaf's index and the genesis record's chain id.
    f"""
CREATE OR REPLACE FUNCTION floorguard_api.extent(OUT last_seq bigint, OUT last_leaf bigint,
  OUT chain_id text)
{_READER} AS $$
BEGIN
  SELECT max(r.seq) INTO extent.last_seq FROM floorguard.records r;
  SELECT max(t.idx) INTO extent.last_leaf FROM floorguard.tree t WHERE t.level = 0;
  SELECT r.chain_id INTO extent.chain_id FROM floorguard.records r WHERE r.seq = 0;
END $$
""",  # noqa: S608
    f"""
CREATE OR REPLACE FUNCTION floorguard_api.head() RETURNS TABLE ({_ROW_COLUMNS})
{_READER} AS $$
BEGIN
  RETURN QUERY SELECT {_ROW_OF_R} FROM floorguard.records r ORDER BY r.seq DESC LIMIT 1;
END $$
""",  # noqa: S608
    # At most ``most`` records from ``first`` to ``last``, in seq order (a reader pages
    # through a long chain with it: a function's rows are all made before the first is sent).
    f"""
CREATE OR REPLACE FUNCTION floorguard_api.records(first bigint, last bigint, most integer)
RETURNS TABLE ({_ROW_COLUMNS})
{_READER} AS $$
BEGIN
  RETURN QUERY SELECT {_ROW_OF_R} FROM floorguard.records r
   WHERE r.seq BETWEEN records.first AND records.last ORDER BY r.seq LIMIT records.most;
END $$
""",  # noqa: S608
    f"""
CREATE OR REPLACE FUNCTION floorguard_api.first_seq_of(wanted text) RETURNS bigint
{_READER} AS $$
BEGIN
  RETURN (SELECT min(r.seq) FROM floorguard.records r WHERE r.receipt_id = first_seq_of.wanted);
END $$
""",  # noqa: S608
    # The stored nodes among (levels[i], idxs[i]).
    f"""
CREATE OR REPLACE FUNCTION floorguard_api.tree_nodes(levels integer[], idxs bigint[])
RETURNS TABLE (level integer, idx bigint, hash bytea)
{_READER} AS $$
BEGIN
  RETURN QUERY SELECT t.level, t.idx, t.hash
    FROM unnest(tree_nodes.levels, tree_nodes.idxs) AS w (l, i)  -- (syntax: no schema)
    JOIN floorguard.tree t ON t.level = w.l AND t.idx = w.i;
END $$
""",  # noqa: S608
    # ReadView.nodes_ending: the stored nodes that leaves from_leaf .. to_leaf - 1
    # complete, in the order a tree built leaf by leaf completes them (an index range of
    # the primary key per level).
    f"""
CREATE OR REPLACE FUNCTION floorguard_api.nodes_ending(from_leaf bigint, to_leaf bigint)
RETURNS TABLE (level integer, idx bigint, hash bytea)
{_READER} AS $$
BEGIN
  RETURN QUERY SELECT t.level, t.idx, t.hash
    FROM pg_catalog.generate_series(0, 62) AS l (lv)
    JOIN floorguard.tree t ON t.level = l.lv AND t.idx >= (nodes_ending.from_leaf >> l.lv)
                          AND t.idx < (nodes_ending.to_leaf >> l.lv)
   ORDER BY (t.idx + 1) << t.level, t.level;
END $$
""",  # noqa: S608
    # ReadView.stray_node: a stored node no tree of ``size`` leaves holds. Each arm reads
    # one end of one range of the primary key (the lowest and highest level; per level,
    # its lowest and highest index): one probe each, however large the tree.
    f"""
CREATE OR REPLACE FUNCTION floorguard_api.stray_node(size bigint)
RETURNS TABLE (level integer, idx bigint)
{_READER} AS $$
BEGIN
  RETURN QUERY SELECT s.level, s.idx FROM (
      (SELECT t.level, t.idx FROM floorguard.tree t ORDER BY t.level, t.idx LIMIT 1)
      UNION ALL
      (SELECT t.level, t.idx FROM floorguard.tree t ORDER BY t.level DESC, t.idx DESC LIMIT 1)
    ) AS s WHERE s.level < 0 OR s.level > 62
  UNION ALL
  SELECT l.lv, e.idx FROM pg_catalog.generate_series(0, 62) AS l (lv) CROSS JOIN LATERAL (
      (SELECT t.idx FROM floorguard.tree t WHERE t.level = l.lv ORDER BY t.idx LIMIT 1)
      UNION ALL
      (SELECT t.idx FROM floorguard.tree t WHERE t.level = l.lv ORDER BY t.idx DESC LIMIT 1)
    ) AS e WHERE e.idx < 0 OR e.idx >= (stray_node.size >> l.lv)
  LIMIT 1;
END $$
""",  # noqa: S608
)
# The functions a host may call (EXECUTE is granted on these only).
API_FUNCTIONS = (
    f"{API_SCHEMA}.open_append(bigint)",
    f"{API_SCHEMA}.read_meta(text)",
    f"{API_SCHEMA}.append_record({_APPEND_RECORD_ARGS})",
    f"{API_SCHEMA}.append_next({_APPEND_NEXT_ARGS})",
    f"{API_SCHEMA}.add_tree_nodes(integer[], bigint[], bytea[])",
    f"{API_SCHEMA}.extent()",
    f"{API_SCHEMA}.head()",
    f"{API_SCHEMA}.records(bigint, bigint, integer)",
    f"{API_SCHEMA}.first_seq_of(text)",
    f"{API_SCHEMA}.tree_nodes(integer[], bigint[])",
    f"{API_SCHEMA}.nodes_ending(bigint, bigint)",
    f"{API_SCHEMA}.stray_node(bigint)",
)
# Where chains initialised before API_SCHEMA kept the functions a host called: dropped
# (a host has no USAGE there any more; nothing else calls them). One something depends on
# (a host's temporary view calling it, made to keep the upgrade from going through) is kept
# with no grant at all: the hosts lose EXECUTE on it, and init goes on.
_MOVED_FUNCTIONS = ("open_append", "read_meta", "append_record", "append_next", "add_tree_nodes")
_DROP_MOVED = f"""
DO $$
DECLARE
  f regprocedure;
BEGIN
  FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
            WHERE p.pronamespace = '{SCHEMA}'::regnamespace
              AND p.proname IN ({", ".join(f"'{name}'" for name in _MOVED_FUNCTIONS)}) LOOP
    BEGIN
      EXECUTE 'DROP FUNCTION ' || f::text;
    EXCEPTION WHEN dependent_objects_still_exist THEN
      EXECUTE 'REVOKE ALL ON FUNCTION ' || f::text || ' FROM PUBLIC';
    END;
  END LOOP;
END $$
"""  # noqa: S608
_DDL = (
    f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}",
    f"CREATE SCHEMA IF NOT EXISTS {API_SCHEMA}",
    f"CREATE TABLE IF NOT EXISTS {_META} (key text PRIMARY KEY, value text NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {_RECORDS} ("
    " seq bigint PRIMARY KEY CHECK (seq >= 0), ts text NOT NULL, chain_id text NOT NULL,"
    " event text NOT NULL, receipt_id text NOT NULL, receipt text NOT NULL,"
    " prev text NOT NULL, mac text NOT NULL)",
    f"CREATE INDEX IF NOT EXISTS records_receipt_id ON {_RECORDS} (receipt_id)",
    f"CREATE TABLE IF NOT EXISTS {SCHEMA}.append_lock (id integer PRIMARY KEY CHECK (id = 1))",
    f"INSERT INTO {SCHEMA}.append_lock VALUES (1) ON CONFLICT DO NOTHING",  # noqa: S608
    f"CREATE TABLE IF NOT EXISTS {_TREE} (level integer NOT NULL, idx bigint NOT NULL,"
    " hash bytea NOT NULL, PRIMARY KEY (level, idx))",
    # Unlogged: who took the chain's lock and when matters only while the server runs.
    f"CREATE UNLOGGED SEQUENCE IF NOT EXISTS {SCHEMA}.lock_holder MINVALUE 0",
    f"CREATE UNLOGGED SEQUENCE IF NOT EXISTS {SCHEMA}.lock_since MINVALUE 0",
    f"CREATE UNLOGGED SEQUENCE IF NOT EXISTS {SCHEMA}.lock_claim MINVALUE 0",
    f"CREATE UNLOGGED SEQUENCE IF NOT EXISTS {SCHEMA}.lock_claim_seen MINVALUE 0",
    _CLAIM_STANDS,
    *_SERVED_SEQUENCES,
    _SERVED_SINCE,
    # (What an earlier init made for cutting a turn taker's hold short: see _TAKE_LOCK.)
    f"DROP FUNCTION IF EXISTS {SCHEMA}.served_before(oid, bigint)",
    f"DROP SEQUENCE IF EXISTS {SCHEMA}.lock_claimed",
    _UNSERVED_FOR,
    _REFUSE_CHANGE,
    _CHECK_RECORD,
    _LOCK_SESSIONS,
    _END_LOCK_REQUESTS,
    _READ_META,
    _TAKE_LOCK,
    *_CANONICAL_JSON,
    _OPEN_APPEND_FUNCTION,
    _APPEND_RECORD,
    _APPEND_NEXT,
    _ADD_TREE_NODES,
    *_READ_FUNCTIONS,
    _DROP_MOVED,
    *(
        statement
        for table in ("meta", "records", "tree", "append_lock")
        for statement in (
            f"CREATE OR REPLACE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE"
            f" ON {SCHEMA}.{table} FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.refuse_change()",
            f"CREATE OR REPLACE TRIGGER {table}_no_truncate BEFORE TRUNCATE"
            f" ON {SCHEMA}.{table} FOR EACH STATEMENT EXECUTE FUNCTION {SCHEMA}.refuse_change()",
            # ALWAYS: they fire under session_replication_role = replica too, which would
            # otherwise let a superuser's session skip them without touching the table.
            f"ALTER TABLE {SCHEMA}.{table} ENABLE ALWAYS TRIGGER {table}_append_only",
            f"ALTER TABLE {SCHEMA}.{table} ENABLE ALWAYS TRIGGER {table}_no_truncate",
        )
    ),
    f"REVOKE ALL ON SCHEMA {SCHEMA} FROM PUBLIC",
    f"REVOKE ALL ON ALL TABLES IN SCHEMA {SCHEMA} FROM PUBLIC",
    f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA {SCHEMA} FROM PUBLIC",
    # Every role may execute a new function: not these.
    f"REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {SCHEMA} FROM PUBLIC",
    f"REVOKE ALL ON SCHEMA {API_SCHEMA} FROM PUBLIC",
    f"REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {API_SCHEMA} FROM PUBLIC",
)


# What in the chain's schemas (the schemas themselves, their relations, their functions) is
# owned by a role other than the one running init (parameters: a list of the schemas' names,
# three times).
_FOREIGN_OWNERS = """
SELECT 'schema ' || n.nspname, pg_catalog.pg_get_userbyid(n.nspowner)
  FROM pg_catalog.pg_namespace n WHERE n.nspname = ANY(%s) AND n.nspowner <> (
    SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)
UNION ALL
SELECT 'table ' || c.relname, pg_catalog.pg_get_userbyid(c.relowner)
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = ANY(%s) AND c.relowner <> (
    SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)
UNION ALL
SELECT 'function ' || p.proname, pg_catalog.pg_get_userbyid(p.proowner)
  FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = ANY(%s) AND p.proowner <> (
    SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)
"""
