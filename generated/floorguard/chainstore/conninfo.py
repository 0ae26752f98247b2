"""FLOORGUARD_CHAIN_URL read as libpq reads it, without libpq: what a message may show of it,
what must be scrubbed from a message, and whether it asks for TLS over a Unix socket.

Nothing of the URL's text reaches a message unless it was parsed here into one of the four
fields a location shows (host, port, database, user) and has that field's safe shape; any
other field is shown as ``***``, and a URL that does not parse as one whole is shown as a
fixed phrase. The parser follows libpq's (``conninfo_uri_parse_options`` and
``conninfo_parse`` in fe-connect.c): a URL's user part ends at its first "@" before any "/",
a password may hold "#" or "?", values are percent-decoded, an unknown key is an error.
Where this parser and libpq might still disagree, the safe shapes decide: a password libpq
reads as a port is not all digits, one read as a host name is not a path, and so on.
Pure functions; no psycopg.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from urllib.parse import quote

URL_ENV = "FLOORGUARD_CHAIN_URL"
UNPARSED = f"named by {URL_ENV} (not shown: it does not parse)"


def unparsed(source: str = URL_ENV) -> str:
    """The phrase for a URL ``source`` gave (a variable, an option) that does not parse."""
    return f"named by {source} (not shown: it does not parse)"


HIDDEN = "***"

# libpq 18's connection keywords (PQconndefaults), and "ssl", which a URL's query may use.
KEYWORDS = frozenset(
    """service user password passfile channel_binding connect_timeout dbname host hostaddr
    port client_encoding options application_name fallback_application_name keepalives
    keepalives_idle keepalives_interval keepalives_count tcp_user_timeout sslmode
    sslnegotiation sslcompression sslcert sslkey sslcertmode sslpassword sslrootcert sslcrl
    sslcrldir sslsni requirepeer require_auth min_protocol_version max_protocol_version
    ssl_min_protocol_version ssl_max_protocol_version gssencmode krbsrvname gsslib
    gssdelegation replication target_session_attrs load_balance_hosts scram_client_key
    scram_server_key oauth_issuer oauth_client_id oauth_client_secret oauth_scope
    sslkeylogfile requiressl""".split()  # noqa: SIM905
)
_SCHEMES = ("postgresql://", "postgres://")

_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")
_SOCKET_DIR = re.compile(r"/(?:[A-Za-z0-9_.-]+/?)*")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}")
# Values that are harmless in a message however they are spelled: small numbers and libpq's
# own words (sslmode, target_session_attrs, ...). Every other value is scrubbed from one.
_PLAIN_VALUE = re.compile(r"[0-9]{1,5}|[a-z]+(?:-[a-z]+)?")
# libpq's modes that ask for TLS; it ignores sslmode on a Unix socket.
TLS_MODES = frozenset({"require", "verify-ca", "verify-full"})


def _decode(text: str) -> str | None:
    """libpq's percent-decoding: "%" and two hex digits, never %00; else None."""
    out = bytearray()
    i = 0
    raw = text.encode("utf-8", "surrogateescape")
    while i < len(raw):
        if raw[i] == ord("%"):
            digits = raw[i + 1 : i + 3].decode("ascii", "replace")
            if len(digits) != 2 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                return None
            value = int(digits, 16)
            if value == 0:
                return None
            out.append(value)
            i += 3
        else:
            out.append(raw[i])
            i += 1
    return out.decode("utf-8", "surrogateescape")


def _store(params: dict[str, str], key: str, value: str, *, uri: bool) -> bool:
    if uri:
        decoded = _decode(value)
        if decoded is None:
            return False
        value = decoded
    if key == "ssl" and uri:  # libpq's one alias, of a URL's query only
        if value != "true":
            return False
        key, value = "sslmode", "require"
    if key not in KEYWORDS:
        return False
    params[key] = value
    return True


def _parse_uri(rest: str) -> dict[str, str] | None:
    params: dict[str, str] = {}
    stop = min((i for i in (rest.find("@"), rest.find("/")) if i >= 0), default=-1)
    if stop >= 0 and rest[stop] == "@":
        user, colon, password = rest[:stop].partition(":")
        if user and not _store(params, "user", user, uri=True):
            return None
        if colon and password and not _store(params, "password", password, uri=True):
            return None
        rest = rest[stop + 1 :]
    hosts: list[str] = []
    ports: list[str] = []
    end = ""
    while True:
        if rest.startswith("["):
            close = rest.find("]")
            if close <= 1:
                return None
            host, rest = rest[1:close], rest[close + 1 :]
            if rest and rest[0] not in ":/?,":
                return None
        else:
            cut = re.search(r"[:/?,]", rest)
            host, rest = (rest, "") if cut is None else (rest[: cut.start()], rest[cut.start() :])
        hosts.append(host)
        end, rest = (rest[:1], rest[1:])
        port = ""
        if end == ":":
            cut = re.search(r"[/?,]", rest)
            port, rest = (rest, "") if cut is None else (rest[: cut.start()], rest[cut.start() :])
            end, rest = (rest[:1], rest[1:])
        ports.append(port)  # one per host, as libpq lists them
        if end != ",":
            break
    if any(hosts) and not _store(params, "host", ",".join(hosts), uri=True):
        return None
    if any(ports) and not _store(params, "port", ",".join(ports), uri=True):
        return None
    if end == "/":
        dbname, mark, rest = rest.partition("?")
        if dbname and not _store(params, "dbname", dbname, uri=True):
            return None
        end = mark
    if end == "?":
        for pair in rest.split("&"):
            key, eq, value = pair.partition("=")
            if not eq or "=" in value or not _store(params, _decode(key) or "", value, uri=True):
                return None
    return params


def _parse_pairs(text: str) -> dict[str, str] | None:
    params: dict[str, str] = {}
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return params
        start = i
        while i < n and text[i] != "=" and not text[i].isspace():
            i += 1
        key = text[start:i]
        while i < n and text[i].isspace():
            i += 1
        if i >= n or text[i] != "=":
            return None
        i += 1
        while i < n and text[i].isspace():
            i += 1
        value: list[str] = []
        if i < n and text[i] == "'":
            i += 1
            while True:
                if i >= n:
                    return None  # unterminated quote
                if text[i] == "\\" and i + 1 < n:
                    value.append(text[i + 1])
                    i += 2
                elif text[i] == "'":
                    i += 1
                    break
                else:
                    value.append(text[i])
                    i += 1
        else:
            while i < n and not text[i].isspace():
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                value.append(text[i])
                i += 1
        if not _store(params, key, "".join(value), uri=False):
            return None


def parse(url: str) -> dict[str, str] | None:
    """The parameters libpq reads from ``url`` (a URL or a key=value string), or None when
    it does not parse."""
    for scheme in _SCHEMES:
        if url.startswith(scheme):
            return _parse_uri(url[len(scheme) :])
    return _parse_pairs(url)


def _safe_host(host: str) -> str | None:
    """``host`` as a URL shows it when it has a safe shape: a host name, an IP address or
    an absolute socket folder (percent-encoded); else None."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return f"[{address}]" if address.version == 6 else str(address)
    if _HOSTNAME.fullmatch(host) and not host.replace(".", "").isdigit():
        return host
    if _SOCKET_DIR.fullmatch(host) and "/../" not in f"{host}/" and "/./" not in f"{host}/":
        return quote(host, safe="")
    return None


def _safe_port(port: str) -> str | None:
    return port if port.isdigit() and 0 < int(port) < 65536 and len(port) <= 5 else None


def _safe_name(name: str) -> str | None:
    return name if _NAME.fullmatch(name) else None


def describe(url: str, source: str = URL_ENV) -> str:
    """The location to show for ``url``: ``postgresql://user@host:port/database`` built from
    the fields parsed here, each in its safe shape or ``***``; the fixed phrase UNPARSED when
    ``url`` does not parse (naming ``source``, where it came from). No other part of the
    URL (no password, no option) is shown."""
    params = parse(url)
    if params is None:
        return unparsed(source)
    hosts = params.get("host", "").split(",") if params.get("host") else []
    ports = params.get("port", "").split(",") if params.get("port") else []
    if len(ports) == 1 and len(hosts) > 1:
        ports *= len(hosts)
    shown: list[str] = []
    for index in range(max(len(hosts), len(ports))):
        host = hosts[index] if index < len(hosts) else ""
        port = ports[index] if index < len(ports) else ""
        where = "" if not host else (_safe_host(host) or HIDDEN)
        if port:
            where += f":{_safe_port(port) or HIDDEN}"
        shown.append(where)
    user = params.get("user")
    dbname = params.get("dbname")
    text = "postgresql://"
    if user:
        text += f"{_safe_name(user) or HIDDEN}@"
    text += ",".join(shown)
    if dbname:
        text += f"/{_safe_name(dbname) or HIDDEN}"
    return text


def secrets_of(url: str, *parsed: Mapping[str, str] | None) -> list[str]:
    """What must never appear in a message about ``url``: the URL itself, each of its
    whitespace-separated words, and every value parsed from it (here, and in ``parsed``,
    e.g. libpq's own reading) that ``describe`` would not show as safe. Longest first."""
    found: set[str] = {url, *url.split()}
    own = parse(url)
    if own is None:  # nothing known of it: each word's value may be part of a password
        found.update(w.partition("=")[2] for w in url.split() if not _PLAIN_VALUE.fullmatch(w))
    for params in (own, *parsed):
        for key, value in (params or {}).items():
            found.update(_unsafe_values(key, str(value)))
    return sorted((s for s in found if len(s) >= 3), key=len, reverse=True)


def _unsafe_values(key: str, value: str) -> Iterable[str]:
    if key == "host":
        return [h for h in value.split(",") if _safe_host(h) is None]
    if key == "port":
        return [p for p in value.split(",") if _safe_port(p) is None]
    if key in ("user", "dbname") and _safe_name(value) is not None:
        return []
    if key not in ("password", "sslpassword") and _PLAIN_VALUE.fullmatch(value):
        return []
    # And each piece of it: a server's message quotes part of a value, such as one setting
    # of ``options`` ("-c name=value": unrecognized configuration parameter "name").
    pieces = (piece.lstrip("-") for piece in re.split(r"[\s=,]+", value))
    return [value, quote(value, safe=""), *(p for p in pieces if not _PLAIN_VALUE.fullmatch(p))]


def scrub(text: str, secrets: Iterable[str], *, parsed: bool = True) -> str:
    """``text`` on one line, with each of ``secrets`` (see ``secrets_of``) replaced by
    ``***`` and each quoted fragment by ``"..."``: libpq quotes the offending part of a URL,
    which may be part of a password. With ``parsed`` (the URL parsed, so its secrets are
    known), a fragment in a safe shape (a host name, address, socket folder or plain name:
    libpq's "server certificate for "db.internal"") is kept."""
    for secret in secrets:
        # (in any case: a server quoting a password back may change its letters' case)
        text = re.sub(re.escape(secret), HIDDEN, text, flags=re.IGNORECASE)

    def quoted(match: re.Match[str]) -> str:
        inner = match.group(1)
        keep = parsed and (_safe_host(inner) is not None or _safe_name(inner) is not None)
        return match.group(0) if keep else '"..."'

    return re.sub(r'"([^"]*)"', quoted, " ".join(text.split()))


def tls_over_socket(params: Mapping[str, str], environ: Mapping[str, str]) -> str | None:
    """Why ``params`` (libpq's reading of the URL) with ``environ`` (the PG* variables libpq
    reads) would send the password unprotected: an sslmode asking for TLS while a host it may
    use is a Unix socket, where libpq ignores sslmode. None when that cannot happen."""
    mode = params["sslmode"] if "sslmode" in params else environ.get("PGSSLMODE", "")
    if params.get("requiressl") == "1" and mode in ("", "disable", "allow", "prefer"):
        mode = "require"
    if mode not in TLS_MODES:
        return None
    host = params["host"] if "host" in params else environ.get("PGHOST", "")
    address = params["hostaddr"] if "hostaddr" in params else environ.get("PGHOSTADDR", "")
    hosts, addresses = host.split(","), address.split(",")
    for index in range(max(len(hosts), len(addresses))):
        name = hosts[index] if index < len(hosts) else ""
        if index < len(addresses) and addresses[index]:
            continue  # hostaddr: TCP, whatever the host's name
        if not name:
            what = "the default Unix socket (no host given)"
        elif name.startswith(("/", "@")):
            shown = _safe_host(name)
            what = f"the Unix socket in {shown}" if shown else "a Unix socket"
        else:
            continue
        return (
            f"sslmode={mode} asks for TLS, but the chain's host is {what}, where libpq "
            "ignores sslmode and would send the password to whatever listens there, "
            f"unencrypted; in {URL_ENV} use a TCP host (host name or address) for TLS, or "
            "drop sslmode for a local socket whose folder's permissions you trust"
        )
    return None
