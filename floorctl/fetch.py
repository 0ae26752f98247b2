"""Fetching feeds over the network without trusting the network.

Every response is untrusted until it has been checked, so the fetcher is deliberately
narrow (the attacks named are TUF's):

- HTTPS only; plain http only to ``localhost`` or a loopback address (tests), checked before
  any connection is made; no credentials in URLs.
- Redirects are followed by hand: same origin only (scheme, host, port), at most
  ``max_redirects`` hops, no loops; an https -> http redirect is refused as a downgrade.
- Endless data: the body is streamed under a byte cap that ignores what Content-Length
  claims (a declared length above the cap is refused before reading); compressed bodies are
  refused (a few kilobytes of gzip can inflate to gigabytes).
- Slow retrieval: one total deadline for every request of a command (a feed, its
  ``URL.dsse``, every feed of a refresh), enforced by an anyio cancel scope over each
  exchange (connect, TLS, status line, headers, body); httpx's per-read timeouts alone would
  let a server drip one byte a second forever.
- Nothing is written here: callers parse and verify the bytes first, then write atomically.

A 304 reuses bytes cached (after they were verified) under the state directory; the bytes
are verified again and their own ``expires`` still decides freshness, so a 304 can never
keep an expired feed alive.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import ipaddress
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from floorctl import feeds, freshness, trust
from floorctl.errors import FetchError, FloorctlError, TrustError
from floorguard._base import atomic
from floorguard._base._canonical import sha256_digest
from floorguard._base.files import read_regular, read_regular_if_exists
from floorguard._base.folders import make_private_folder
from floorguard._crypto.trust import TrustedKeys
from floorguard.errors import InvalidInput, UnreadableFileError

if TYPE_CHECKING:
    import httpx  # imported where used: refresh from local files never loads it

DEFAULT_MAX_BYTES = 4 * 1024 * 1024
DEFAULT_TIMEOUT = 30.0
# A day: a deadline further off is a typo, and keeps clear of clock arithmetic's limits.
MAX_TIMEOUT = 24 * 60 * 60
MAX_REDIRECTS = 5
MAX_CACHE_META_BYTES = 64 * 1024  # {"url", "etag", "digest"}
# An ETag is kept only if it can be sent back as If-None-Match as received: visible ASCII.
# RFC 9110 also allows obs-text bytes, which httpx cannot send (nor floorctl tell apart from
# the encoding it decoded them with).
_REPLAYABLE_ETAG = re.compile(r"[\x21-\x7e]{1,1024}")
# An envelope carries the feed itself (base64) plus signatures.
SIGNATURE_OVERHEAD = 256 * 1024
PROGRESS_MIN_BYTES = 1024 * 1024
CACHE_DIR = "http-cache"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_DEFAULT_PORTS = {"https": 443, "http": 80}

Progress = Callable[[int, int | None], None]
Notify = Callable[[str], None]


def _silent(_message: str) -> None:
    """The default ``notify``: say nothing."""


@dataclass(frozen=True)
class Limits:
    """How much and how long a fetch may take. ``max_bytes`` is at most the feed limit.

    Raises InvalidInput for a limit out of range: a cap above the feed limit is refused,
    never quietly lowered, so what was asked for is what applies.
    """

    max_bytes: int = DEFAULT_MAX_BYTES
    timeout: float = DEFAULT_TIMEOUT
    max_redirects: int = MAX_REDIRECTS

    def __post_init__(self) -> None:
        if self.max_bytes < 1 or self.max_redirects < 0:
            raise InvalidInput("fetch limits must be positive")
        if not 0 < self.timeout <= MAX_TIMEOUT:  # false for NaN too
            raise InvalidInput(
                f"fetch timeout {self.timeout!r} is not a number of seconds above 0 and at "
                f"most {MAX_TIMEOUT:,}"
            )
        if self.max_bytes > feeds.MAX_FEED_BYTES:
            raise InvalidInput(
                f"--max-bytes {self.max_bytes:,} is above the {feeds.MAX_FEED_BYTES:,}-byte "
                "feed limit (16 MiB)"
            )


def is_url(source: str) -> bool:
    # (A scheme is case-insensitive: "HTTP://u:pw@host" taken for a path would be named.)
    return source[:8].lower().startswith(("https://", "http://"))


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_url(url: str) -> httpx.URL:
    """Parse ``url`` and refuse anything but https (or http to loopback). Raises FetchError."""
    import httpx

    if not url.isascii() or not url.isprintable():
        # Not named: a look-alike of "@" (U+FF20) makes the text before it a password.
        raise FetchError(
            f"{_scheme_only(url)}: refused: URLs must be printable ASCII (percent-encode the rest)"
        )
    shown = _without_userinfo(url)
    try:
        parsed = httpx.URL(url)
        port = parsed.port
    except (httpx.InvalidURL, ValueError, OverflowError) as exc:
        # (httpx's reason quotes the part it could not read, a password among them)
        raise FetchError(f"{shown}: refused: not a valid URL") from exc
    if port is not None and not 0 < port < 65536:
        raise FetchError(f"{shown}: refused: not a valid URL (port {port})")
    if parsed.scheme not in _DEFAULT_PORTS or not parsed.host:
        raise FetchError(f"{shown}: refused: only https:// URLs are fetched")
    if parsed.userinfo:
        # Named without them: the message reaches CI logs.
        raise FetchError(
            f"{parsed.copy_with(userinfo=b'')}: refused: credentials in URLs are not supported"
        )
    if parsed.scheme == "http" and not _is_loopback(parsed.host):
        raise FetchError(
            f"{url}: refused: plain http is allowed only to localhost or a loopback address "
            "(use https)"
        )
    return parsed


def _without_userinfo(url: str) -> str:
    """``url`` as it may be shown: whatever precedes its last ``@`` after ``//`` hidden (a
    password may hold ``/``, ``?`` or ``#``, so the authority's end cannot be trusted)."""
    head, separator, rest = url.partition("//")
    if not separator or "@" not in rest:
        return url
    return f"{head}//***{rest[rest.rfind('@') :]}"


def _scheme_only(url: str) -> str:
    """What of a URL that is not printable ASCII can be shown: its scheme, if plain."""
    scheme, separator, _ = url.partition("://")
    if separator and scheme.isascii() and scheme.isalpha():
        return f"a {scheme}:// URL"
    return "a URL"


def origin(url: httpx.URL) -> tuple[str, str, int]:
    return (url.scheme, url.host.lower(), url.port or _DEFAULT_PORTS[url.scheme])


def signature_url(url: str) -> str:
    """``URL.dsse``: the detached signature beside a feed URL (query kept)."""
    import httpx

    parsed = httpx.URL(url)
    return str(parsed.copy_with(path=parsed.path + trust.SIGNATURE_SUFFIX))


@dataclass(frozen=True)
class Response:
    url: str
    status: int
    body: bytes
    etag: str | None


class Fetcher:
    """GETs under one total deadline, started by the first request and shared by every
    request made through this fetcher (a feed and its ``URL.dsse``, every feed of a refresh).
    """

    def __init__(self, limits: Limits, *, progress: Progress | None = None) -> None:
        self.limits = limits
        self.deadline: float | None = None
        self.progress = progress

    def _slow(self, url: str) -> FetchError:
        return FetchError(
            f"{url}: refused: slow retrieval: not done within the {self.limits.timeout:g} s "
            "deadline"
        )

    def _remaining(self, url: str) -> float:
        if self.deadline is None:
            self.deadline = time.monotonic() + self.limits.timeout
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self._slow(url)
        return left

    def get(
        self, url: str, *, max_bytes: int, etag: str | None = None, allow_missing: bool = False
    ) -> Response | None:
        """The body of ``url`` (status 200, or 304 when ``etag`` matched).

        Returns None for a 404 when ``allow_missing``. Raises FetchError for every refusal.
        """
        import anyio

        check_url(url)
        left = self._remaining(url)

        async def within_deadline() -> Response | None:
            # httpx's timeouts are per read: a server sending a byte just before each one
            # expires (in its status line, its headers, a chunk-size line) is never cut off
            # by them. A cancel scope over the whole exchange is: at the deadline it cancels
            # whatever is awaited, and the connection is closed, whatever the server sends.
            with anyio.fail_after(left):
                return await self._get(
                    url, max_bytes=max_bytes, etag=etag, allow_missing=allow_missing
                )

        try:
            return anyio.run(within_deadline)
        except TimeoutError:
            raise self._slow(url) from None

    async def _get(
        self, url: str, *, max_bytes: int, etag: str | None, allow_missing: bool
    ) -> Response | None:
        import httpx

        current = check_url(url)
        start = origin(current)
        seen = {str(current)}
        for _hop in range(self.limits.max_redirects + 1):
            headers = {"Accept-Encoding": "identity", "Accept": "application/json"}
            if etag is not None:
                headers["If-None-Match"] = etag
            # Proxies from the environment serve real hosts; loopback (tests) goes direct.
            async with httpx.AsyncClient(
                follow_redirects=False,
                trust_env=not _is_loopback(current.host),
                timeout=httpx.Timeout(self._remaining(url)),
            ) as client:
                try:
                    async with client.stream("GET", current, headers=headers) as response:
                        if response.status_code in _REDIRECTS:
                            current = self._next_hop(url, current, response, start, seen)
                            continue
                        return await self._finish(
                            url,
                            current,
                            response,
                            max_bytes=max_bytes,
                            etag=etag,
                            allow_missing=allow_missing,
                        )
                except httpx.TimeoutException as exc:
                    raise self._slow(url) from exc
                except httpx.InvalidURL as exc:
                    # A Location that parsed but that httpx will not request: never named.
                    raise FetchError(f"{url}: refused: redirect to an invalid URL") from exc
                except httpx.RemoteProtocolError as exc:
                    # httpx reads every redirect's Location itself, and quotes it when it
                    # cannot parse it: the text may hold credentials. Any message of its
                    # that speaks of a location is not repeated, whatever its wording.
                    if "location" in str(exc).lower():
                        raise FetchError(f"{url}: refused: redirect to an invalid URL") from exc
                    raise FetchError(f"{url}: fetch failed: RemoteProtocolError: {exc}") from exc
                except httpx.HTTPError as exc:
                    why = f"{exc.__class__.__name__}: {exc}"
                    raise FetchError(f"{url}: fetch failed: {why}") from exc
        raise FetchError(
            f"{url}: refused: more than {self.limits.max_redirects} redirects (hop limit)"
        )

    def _next_hop(
        self,
        url: str,
        current: httpx.URL,
        response: httpx.Response,
        start: tuple[str, str, int],
        seen: set[str],
    ) -> httpx.URL:
        import httpx

        location = response.headers.get("Location")
        if not location:
            raise FetchError(f"{url}: refused: redirect {response.status_code} without a Location")
        try:
            target = current.join(location)
        except (httpx.InvalidURL, ValueError) as exc:
            raise FetchError(f"{url}: refused: redirect to an invalid URL") from exc
        # First: the refusals below name the target, and the messages reach CI logs.
        if target.userinfo:
            # As for the URL given, named without them.
            raise FetchError(
                f"{url}: refused: redirect to {target.copy_with(userinfo=b'')} with "
                "credentials: credentials in URLs are not supported"
            )
        if current.scheme == "https" and target.scheme != "https":
            raise FetchError(
                f"{url}: refused: redirect from https to {target.scheme}:// is a downgrade "
                f"({target})"
            )
        if target.scheme not in _DEFAULT_PORTS or not target.host or origin(target) != start:
            raise FetchError(
                f"{url}: refused: redirect to another origin ({target}); only same-origin "
                "redirects are followed"
            )
        if str(target) in seen:
            raise FetchError(f"{url}: refused: redirect loop (back to {target})")
        seen.add(str(target))
        return target

    async def _finish(
        self,
        url: str,
        current: httpx.URL,
        response: httpx.Response,
        *,
        max_bytes: int,
        etag: str | None,
        allow_missing: bool,
    ) -> Response | None:
        status = response.status_code
        if status == 404 and allow_missing:
            return None
        if status == 304:
            if etag is None:
                raise FetchError(f"{url}: refused: 304 Not Modified to a request without an ETag")
            return Response(str(current), 304, b"", etag)
        if status != 200:
            raise FetchError(f"{url}: refused: HTTP status {status} {response.reason_phrase}")
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise FetchError(
                f"{url}: refused: compressed body (Content-Encoding {encoding}); the size cap "
                "applies to the bytes received"
            )
        declared = _declared_length(response)
        if declared is not None and declared > max_bytes:
            raise FetchError(
                f"{url}: refused: endless data: Content-Length {declared:,} is over the "
                f"{max_bytes:,}-byte cap"
            )
        body = bytearray()
        show = self.progress if (declared or 0) >= PROGRESS_MIN_BYTES else None
        async for chunk in response.aiter_raw():
            body += chunk
            if len(body) > max_bytes:
                raise FetchError(
                    f"{url}: refused: endless data: the body exceeds the {max_bytes:,}-byte cap "
                    "(whatever Content-Length said)"
                )
            self._remaining(url)
            if show is not None:
                show(len(body), declared)
            elif self.progress is not None and len(body) >= PROGRESS_MIN_BYTES:
                show = self.progress
        if show is not None:
            show(len(body), len(body))  # received == total: the line is finished
        return Response(str(current), 200, bytes(body), response.headers.get("ETag"))


def _declared_length(response: httpx.Response) -> int | None:
    raw = response.headers.get("Content-Length")
    if raw is None:
        return None
    try:
        return int(raw.strip())
    except ValueError:
        return None  # ignored: the cap is enforced on the bytes, not on the header


# --- feeds ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FetchedFeed:
    """A feed whose bytes parsed and whose signature (if any) verified; not yet fresh-checked."""

    feed: feeds.Feed
    data: bytes
    envelope: bytes | None
    not_modified: bool
    etag: str | None


def fetch_feed(
    url: str,
    *,
    trusted: TrustedKeys | None,
    require_signed: bool,
    limits: Limits,
    cache_dir: Path | None,
    progress: Progress | None = None,
    notify: Notify = _silent,
    fetcher: Fetcher | None = None,
) -> FetchedFeed:
    """Fetch a feed and its ``URL.dsse``; parse and verify both. Writes nothing.

    ``fetcher``: one shared with the command's other fetches, so that they all keep to one
    deadline (default: a new one, from ``limits`` and ``progress``). ``notify`` hears of a
    signature left unchecked (no trusted keys). Raises FetchError (transport refusals),
    FeedError (invalid feed) or TrustError.
    """
    check_url(url)
    if fetcher is None:
        fetcher = Fetcher(limits, progress=progress)
    cached = _cached(cache_dir, url)
    response = fetcher.get(url, max_bytes=limits.max_bytes, etag=cached[0] if cached else None)
    if response is None:  # only possible with allow_missing; fail closed anyway
        raise FetchError(f"{url}: refused: no feed at this URL")
    etag: str | None
    if response.status == 304 and cached is not None:
        data, etag, reused = cached[1], cached[0], True
    else:
        data, etag, reused = response.body, response.etag, False
        if etag is not None and not replayable_etag(etag):
            notify(
                f"{url}: the server's ETag is not visible ASCII, so it cannot be sent back: "
                "not cached (the next fetch downloads the feed again)"
            )
            etag = None
    feed = feeds.parse_feed(data, url)
    signature = fetcher.get(
        signature_url(url),
        allow_missing=True,
        max_bytes=limits.max_bytes * 4 // 3 + SIGNATURE_OVERHEAD,
    )
    envelope = signature.body if signature else None
    feed = verify_feed(feed, data, envelope, trusted, require_signed=require_signed, notify=notify)
    return FetchedFeed(feed, data, envelope, reused, etag)


def verify_feed(
    feed: feeds.Feed,
    data: bytes,
    envelope: bytes | None,
    trusted: TrustedKeys | None,
    *,
    require_signed: bool,
    notify: Notify = _silent,
) -> feeds.Feed:
    """``feed`` with its verified signers. Raises TrustError.

    A signed feed must state its version and expiry under ``--require-signed`` (schema 2,
    or schema 3 with its identity fields): without them an old signed copy could be
    replayed forever. A signature that no trusted key can judge leaves the feed unsigned,
    and ``notify`` is told.
    """
    checked = trust.check_signature(
        data, envelope, trusted, require_signed=require_signed, source=feed.source
    )
    if checked.unchecked:
        notify(
            f"warning: {feed.source}{trust.SIGNATURE_SUFFIX}: signature not checked: no "
            "trusted keys are configured, so the feed is used as an unsigned one (pass "
            "--trusted-keys to check it)"
        )
    if require_signed and feed.schema_version < 2:
        raise TrustError(
            f"{feed.source}: --require-signed needs a schema version 2 feed (version 1 has no "
            "version or expiry, so a signed copy could be replayed forever)"
        )
    if require_signed and feed.feed_id is None:
        raise TrustError(
            f"{feed.source}: --require-signed needs feed_id, version, published and expires "
            "(without them a signed copy could be replayed forever)"
        )
    return replace(feed, signed_by=checked.signed_by)


def read_local(
    path: Path, *, trusted: TrustedKeys | None, require_signed: bool, notify: Notify = _silent
) -> feeds.Feed:
    """A feed file and ``FEED.dsse`` beside it, parsed and verified. Raises like fetch_feed."""
    feed = feeds.load_feed(path)
    data = read_regular(path, max_bytes=feeds.MAX_FEED_BYTES, what="feed")
    if sha256_digest(data) != feed.digest:
        raise FetchError(f"{path}: changed while being read; try again")
    signature_path = Path(str(path) + trust.SIGNATURE_SUFFIX)
    envelope = read_regular_if_exists(
        signature_path, max_bytes=feeds.MAX_FEED_BYTES * 2, what="feed signature"
    )
    return verify_feed(feed, data, envelope, trusted, require_signed=require_signed, notify=notify)


# --- the ETag cache -----------------------------------------------------------------------------


def _cache_files(cache_dir: Path, url: str) -> tuple[Path, Path]:
    name = hashlib.sha256(url.encode("utf-8")).hexdigest()
    return cache_dir / f"{name}.json", cache_dir / f"{name}.body"


def replayable_etag(etag: str) -> bool:
    """Whether ``etag`` can be sent back as If-None-Match exactly as it was received."""
    return _REPLAYABLE_ETAG.fullmatch(etag) is not None


def _cached(cache_dir: Path | None, url: str) -> tuple[str, bytes] | None:
    """(etag, bytes) cached for ``url``, only if the bytes still match their recorded digest."""
    if cache_dir is None:
        return None
    meta_path, body_path = _cache_files(cache_dir, url)
    try:
        # A cache entry that is not a regular file is ignored (never waited on).
        meta = json.loads(read_regular(meta_path, max_bytes=MAX_CACHE_META_BYTES, what="cache"))
        body = read_regular(body_path, max_bytes=feeds.MAX_FEED_BYTES, what="cached feed")
    except (UnreadableFileError, ValueError):
        return None
    if (
        not isinstance(meta, dict)
        or meta.get("url") != url
        or not isinstance(meta.get("etag"), str)
        or not replayable_etag(meta["etag"])
    ):
        return None
    if meta.get("digest") != sha256_digest(body):
        return None
    return meta["etag"], body


def remember(cache_dir: Path | None, url: str, fetched: FetchedFeed) -> None:
    """Cache verified bytes under their ETag (call only after they were accepted)."""
    if cache_dir is None or fetched.etag is None or not replayable_etag(fetched.etag):
        return
    # Best effort: a cache that cannot be written only costs a full download next time.
    with contextlib.suppress(OSError, FloorctlError):
        make_private_folder(cache_dir)
        meta_path, body_path = _cache_files(cache_dir, url)
        atomic.write_atomic(body_path, fetched.data)
        meta = {"url": url, "etag": fetched.etag, "digest": sha256_digest(fetched.data)}
        atomic.write_atomic(meta_path, json.dumps(meta, sort_keys=True).encode("utf-8"))


def download(
    url: str,
    out: Path,
    *,
    trusted: TrustedKeys | None,
    require_signed: bool,
    limits: Limits,
    state_path: Path,
    cache_dir: Path | None,
    now: _dt.datetime,
    progress: Progress | None = None,
    notify: Notify = _silent,
) -> FetchedFeed:
    """``floorctl fetch``: fetch, verify, check freshness, then write ``out`` (and ``out.dsse``).

    Nothing is written unless every check passed; the freshness state is updated only after
    the feed was written. Raises FetchError, FeedError, TrustError or FreshnessError.
    """
    freshness.load_state(state_path)  # a damaged state is an error before any download
    fetched = fetch_feed(
        url,
        trusted=trusted,
        require_signed=require_signed,
        limits=limits,
        cache_dir=cache_dir,
        progress=progress,
        notify=notify,
    )
    signature_out = Path(str(out) + trust.SIGNATURE_SUFFIX)
    # The state is shared with every other fetch and refresh: locked from reading to saving.
    # The feed, its signature and the state are written together or not at all.
    with freshness.state_lock(state_path), atomic.undoable([signature_out, out]):
        updated = freshness.accept(freshness.load_state(state_path), [fetched.feed], now)
        if fetched.envelope is not None:
            atomic.write_atomic(signature_out, fetched.envelope)
        else:
            # A signature left from an older download would not match these bytes.
            signature_out.unlink(missing_ok=True)
        atomic.write_atomic(out, fetched.data)
        if fetched.feed.feed_id is not None:
            freshness.save_state(state_path, updated)
    remember(cache_dir, url, fetched)
    return fetched
