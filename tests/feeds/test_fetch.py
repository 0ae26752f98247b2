"""Fetching feeds from a real HTTP server on loopback: every TUF-style attack is refused by
name, with nothing written; a valid signed feed is written, and a 304 reuses verified bytes.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from feedserver import (
    NOW,
    FeedServer,
    envelope,
    floorctl,
    floorctl_here,
    new_key,
    trusted_file,
    v2_feed,
)

from floorctl import fetch
from floorctl.errors import FetchError
from floorguard._base._canonical import sha256_digest


@pytest.fixture
def server() -> Iterator[FeedServer]:
    running = FeedServer()
    yield running
    running.close()


class Setup:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.key, _, self.public = new_key(root / "publisher")
        self.out = root / "out" / "feed.json"
        self.out.parent.mkdir()
        self.state = root / "feeds-state.json"

    def fetch(
        self, url: str, *extra: str, signed: bool = True, trusted: Path | None = None
    ) -> tuple[int, str]:
        args = [
            "fetch",
            url,
            "--out",
            str(self.out),
            "--state-file",
            str(self.state),
            "--now",
            NOW,
            *extra,
        ]
        if signed:
            args += ["--trusted-keys", str(trusted or self.public), "--require-signed"]
        done = floorctl_here(*args, home=self.home)
        assert "Traceback" not in done.stderr
        return done.returncode, done.stderr

    def publish(
        self, server: FeedServer, data: bytes, *signers: Ed25519PrivateKey, etag: str | None = None
    ) -> str:
        server.serve("/feed.json", data, etag=etag)
        if signers:
            server.serve("/feed.json.dsse", envelope(data, *signers))
        return server.url("/feed.json")

    def assert_nothing_written(self) -> None:
        assert not self.out.exists()
        assert not Path(str(self.out) + ".dsse").exists()
        assert not self.state.exists()


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def refused(result: tuple[int, str], *fragments: str) -> None:
    status, stderr = result
    assert status == 1, stderr
    assert stderr.startswith("floorctl: error: ")
    for fragment in fragments:
        assert fragment in stderr


# --- accepted -----------------------------------------------------------------------------------


def test_fetches_a_valid_signed_v2_feed_and_writes_it(server: FeedServer, setup: Setup) -> None:
    data = v2_feed(3)
    url = setup.publish(server, data, setup.key)
    done = floorctl(
        "fetch",
        url,
        "--out",
        str(setup.out),
        "--state-file",
        str(setup.state),
        "--trusted-keys",
        str(setup.public),
        "--require-signed",
        home=setup.home,
    )
    assert done.returncode == 0, done.stderr
    assert "version 3" in done.stdout
    assert setup.out.read_bytes() == data
    assert Path(str(setup.out) + ".dsse").exists()
    state = json.loads(setup.state.read_text())
    assert state["feeds"]["example-feed"]["version"] == 3


def test_a_304_reuses_the_cached_verified_bytes(server: FeedServer, setup: Setup) -> None:
    data = v2_feed(1)
    url = setup.publish(server, data, setup.key, etag='"v1"')
    assert setup.fetch(url)[0] == 0
    setup.out.unlink()
    status, stderr = setup.fetch(url, "--json")
    assert status == 0, stderr
    assert setup.out.read_bytes() == data
    feed_requests = [headers for path, headers in server.requests if path == "/feed.json"]
    assert feed_requests[-1].get("if-none-match") == '"v1"'


# An ETag with a byte outside ASCII (obs-text, which HTTP/1.1 parsers accept) cannot be sent
# back as If-None-Match: cached, it broke every later fetch of the URL.
NON_ASCII_ETAG = '"\xe9t\xe9"'


def test_an_etag_that_cannot_be_sent_back_is_not_cached(server: FeedServer, setup: Setup) -> None:
    data = v2_feed(1)
    url = setup.publish(server, data, setup.key, etag=NON_ASCII_ETAG)
    status, stderr = setup.fetch(url)
    assert status == 0, stderr
    assert "ETag" in stderr and "not cached" in stderr
    setup.out.unlink()
    status, stderr = setup.fetch(url)
    assert status == 0, stderr
    assert setup.out.read_bytes() == data
    feed_requests = [headers for path, headers in server.requests if path == "/feed.json"]
    assert [headers.get("if-none-match") for headers in feed_requests] == [None, None]


@pytest.mark.parametrize("command", ["fetch", "refresh"])
def test_a_cached_etag_that_cannot_be_sent_back_is_ignored(
    server: FeedServer, setup: Setup, command: str
) -> None:
    # A cache entry written by an older floorctl (or by hand): the feed is downloaded again.
    data = v2_feed(1)
    url = setup.publish(server, data, setup.key)
    meta_path, body_path = fetch._cache_files(setup.home / fetch.CACHE_DIR, url)
    meta_path.parent.mkdir(parents=True)
    body_path.write_bytes(data)
    meta = {"url": url, "etag": NON_ASCII_ETAG, "digest": sha256_digest(data)}
    meta_path.write_text(json.dumps(meta))
    if command == "fetch":
        status, stderr = setup.fetch(url)
    else:
        module = setup.root / "floor_map.py"
        module.write_text(MODULE)
        done = floorctl_here(
            "refresh", "--feed", url, "--module", str(module), "--now", NOW,
            "--state-file", str(setup.state), home=setup.home,
        )  # fmt: skip
        assert "Traceback" not in done.stderr
        status, stderr = done.returncode, done.stderr
    assert status == 0, stderr
    feed_requests = [headers for path, headers in server.requests if path == "/feed.json"]
    assert [headers.get("if-none-match") for headers in feed_requests] == [None]


def test_an_unsigned_v1_feed_is_fetched_without_require_signed(
    server: FeedServer, setup: Setup
) -> None:
    data = b'{"schema_version": 1, "adapters": {}}'
    url = setup.publish(server, data)
    status, stderr = setup.fetch(url, signed=False)
    assert status == 0, stderr
    assert setup.out.read_bytes() == data


# --- endless data and slow retrieval -------------------------------------------------------------


def test_refuses_oversized_body_with_a_lying_content_length(
    server: FeedServer, setup: Setup
) -> None:
    server.endless("/feed.json", declared_length=512)
    refused(
        setup.fetch(server.url("/feed.json"), "--max-bytes", "100000"),
        "endless data",
        "100,000-byte cap",
    )
    setup.assert_nothing_written()


def test_refuses_endless_chunked_body_without_content_length(
    server: FeedServer, setup: Setup
) -> None:
    server.endless("/feed.json")
    refused(setup.fetch(server.url("/feed.json")), "endless data", "4,194,304-byte cap")
    setup.assert_nothing_written()


def test_refuses_a_declared_length_over_the_cap_before_reading(
    server: FeedServer, setup: Setup
) -> None:
    server.lying_length("/feed.json", declared=10_000_000, actual=10)
    refused(setup.fetch(server.url("/feed.json")), "endless data", "Content-Length 10,000,000")
    setup.assert_nothing_written()


def test_reads_no_more_than_the_declared_length(server: FeedServer, setup: Setup) -> None:
    server.lying_length("/feed.json", declared=64, actual=1_000_000)
    refused(setup.fetch(server.url("/feed.json")), "malformed JSON")
    setup.assert_nothing_written()


def test_refuses_slow_drip_past_the_deadline(server: FeedServer, setup: Setup) -> None:
    server.drip("/feed.json", v2_feed(1), interval=0.05)
    refused(setup.fetch(server.url("/feed.json"), "--timeout", "1"), "slow retrieval", "1 s")
    setup.assert_nothing_written()


# The deadline is total: a server that keeps sending a byte at a time (faster than any
# per-read timeout) inside its status line, its headers or a chunk-size line is cut off at
# --timeout all the same. Each drip below would last DRIP_SECONDS if nothing cut it.
DEADLINE = 1.0
MARGIN = 1.5
DRIP_INTERVAL = 0.05
DRIP_SECONDS = 8.0
ENDLESS_DRIP = b"a" * int(DRIP_SECONDS / DRIP_INTERVAL)
OK_STATUS = b"HTTP/1.1 200 OK\r\n"
CHUNKED_HEAD = OK_STATUS + b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


def timed_fetch(setup: Setup, url: str, *extra: str) -> tuple[tuple[int, str], float]:
    started = time.monotonic()
    result = setup.fetch(url, "--timeout", f"{DEADLINE:g}", *extra, signed=False)
    return result, time.monotonic() - started


@pytest.mark.parametrize(
    ("head", "dripped"),
    [
        pytest.param(b"", OK_STATUS + ENDLESS_DRIP, id="status-line"),
        pytest.param(OK_STATUS + b"X-Slow: ", ENDLESS_DRIP, id="header-line"),
        pytest.param(CHUNKED_HEAD, b"0" * len(ENDLESS_DRIP), id="chunk-size-line"),
        pytest.param(CHUNKED_HEAD + b"1;", ENDLESS_DRIP, id="chunk-extension"),
    ],
)
def test_refuses_a_server_dripping_the_answer_outside_the_body_past_the_deadline(
    server: FeedServer, setup: Setup, head: bytes, dripped: bytes
) -> None:
    server.drip_raw("/feed.json", head, dripped, DRIP_INTERVAL)
    result, elapsed = timed_fetch(setup, server.url("/feed.json"))
    refused(result, "slow retrieval", f"{DEADLINE:g} s deadline")
    assert elapsed < DEADLINE + MARGIN, f"cut off only after {elapsed:.1f} s"
    setup.assert_nothing_written()


def test_refuses_a_signature_whose_headers_drip_past_the_deadline(
    server: FeedServer, setup: Setup
) -> None:
    # One deadline for the feed and its URL.dsse together: a fast feed leaves no time to spare.
    server.serve("/feed.json", v2_feed(1))
    server.drip_raw("/feed.json.dsse", OK_STATUS + b"X-Slow: ", ENDLESS_DRIP, DRIP_INTERVAL)
    result, elapsed = timed_fetch(setup, server.url("/feed.json"))
    refused(result, "slow retrieval", f"{DEADLINE:g} s deadline")
    assert elapsed < DEADLINE + MARGIN, f"cut off only after {elapsed:.1f} s"
    setup.assert_nothing_written()


def test_accepts_a_slow_answer_that_completes_within_the_deadline(
    server: FeedServer, setup: Setup
) -> None:
    data = v2_feed(1)
    answer = OK_STATUS + b"Content-Length: %d\r\n\r\n" % len(data) + data
    server.drip_raw("/feed.json", b"", answer, 1 / len(answer))  # about one second in all
    status, stderr = setup.fetch(server.url("/feed.json"), "--timeout", "20", signed=False)
    assert status == 0, stderr
    assert setup.out.read_bytes() == data


# --- redirects and schemes -----------------------------------------------------------------------


def test_follows_a_same_origin_redirect(server: FeedServer, setup: Setup) -> None:
    data = v2_feed(1)
    setup.publish(server, data, setup.key)
    server.redirect("/old.json", "/feed.json", status=301)
    server.serve("/old.json.dsse", envelope(data, setup.key))
    status, stderr = setup.fetch(server.url("/old.json"))
    assert status == 0, stderr
    assert setup.out.read_bytes() == data


def test_refuses_redirect_to_another_origin(server: FeedServer, setup: Setup) -> None:
    other = FeedServer()
    try:
        other.serve("/feed.json", v2_feed(1))
        server.redirect("/feed.json", other.url("/feed.json"))
        refused(setup.fetch(server.url("/feed.json")), "redirect to another origin")
    finally:
        other.close()
    assert not [path for path, _ in other.requests]
    setup.assert_nothing_written()


def test_refuses_redirect_to_another_host_name_of_the_same_machine(
    server: FeedServer, setup: Setup
) -> None:
    server.redirect("/feed.json", server.url("/real.json", host="localhost"))
    refused(setup.fetch(server.url("/feed.json")), "redirect to another origin")
    setup.assert_nothing_written()


@pytest.mark.parametrize(
    "host", ["user:s3cret@127.0.0.1", "user@127.0.0.1", ":s3cret@127.0.0.1", "u:s3cret@localhost"]
)
def test_refuses_a_redirect_to_a_url_with_credentials(
    server: FeedServer, setup: Setup, host: str
) -> None:
    # Credentials in the Location (same origin or not): refused as in the URL given, and
    # never named (the message reaches CI logs).
    data = v2_feed(1)
    setup.publish(server, data, setup.key)
    server.redirect("/old.json", server.url("/feed.json", host=host))
    server.serve("/old.json.dsse", envelope(data, setup.key))
    refused(setup.fetch(server.url("/old.json")), "credentials in URLs are not supported")
    assert "s3cret" not in setup.fetch(server.url("/old.json"))[1]
    assert [path for path, _ in server.requests if path == "/feed.json"] == []
    setup.assert_nothing_written()


def _raw_redirect(server: FeedServer, path: str, location: bytes) -> None:
    """A 302 whose Location is these bytes, as a hostile server sends them."""

    def behaviour(handler: Any) -> None:
        handler.wfile.write(
            b"HTTP/1.1 302 Found\r\nLocation: " + location + b"\r\nContent-Length: 0\r\n\r\n"
        )
        handler.close_connection = True

    server.routes[path] = behaviour


@pytest.mark.parametrize(
    "location",
    [b"http:f.json", b"https:f.json", b"x:y", b"http:\\\\127.0.0.1\\f.json"],
    ids=["no slashes", "https no slashes", "another scheme", "backslashes"],
)
def test_refuses_a_malformed_redirect_with_one_line(
    server: FeedServer, setup: Setup, location: bytes
) -> None:
    # httpx refuses such a URL only when asked to fetch it: a crash, not a refusal, before.
    _raw_redirect(server, "/old.json", location)
    status, stderr = setup.fetch(server.url("/old.json"))
    assert status == 1, stderr
    assert stderr.startswith("floorctl: error: ") and "Traceback" not in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    setup.assert_nothing_written()


@pytest.mark.parametrize("at", ["\uff20", "\ufe6b"], ids=["fullwidth", "small"])
def test_refuses_a_redirect_whose_at_sign_is_a_look_alike_without_naming_it(
    server: FeedServer, setup: Setup, at: str
) -> None:
    host = server.url("/feed.json").split("//", 1)[1]
    _raw_redirect(server, "/old.json", f"http://user:s3cret{at}{host}".encode())
    status, stderr = setup.fetch(server.url("/old.json"))
    assert status == 1, stderr
    assert "s3cret" not in stderr, stderr
    setup.assert_nothing_written()


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:99999/f.json",
        "http://127.0.0.1:-1/f.json",
        "http://u:pa#s3cret@127.0.0.1/f.json",
        "http://u:pa/s3cret@127.0.0.1/f.json",
        "http://u:s3cret%40x@127.0.0.1/f.json",
        "//u:s3cret@127.0.0.1/f.json",
    ],
)
def test_a_malformed_url_given_is_one_line_naming_no_password(setup: Setup, url: str) -> None:
    status, stderr = setup.fetch(url)
    assert status == 1, stderr
    assert stderr.startswith("floorctl: error: ") and len(stderr.strip().splitlines()) == 1
    assert "s3cret" not in stderr, stderr
    setup.assert_nothing_written()


def test_refuses_redirect_loop(server: FeedServer, setup: Setup) -> None:
    server.redirect("/feed.json", "/b.json")
    server.redirect("/b.json", "/feed.json")
    refused(setup.fetch(server.url("/feed.json")), "redirect loop")
    setup.assert_nothing_written()


def test_refuses_more_redirects_than_the_hop_limit(server: FeedServer, setup: Setup) -> None:
    for hop in range(8):
        server.redirect(f"/{hop}.json", f"/{hop + 1}.json")
    refused(setup.fetch(server.url("/0.json")), "more than 5 redirects")
    setup.assert_nothing_written()


def test_refuses_https_to_http_downgrade_redirect(server: FeedServer, setup: Setup) -> None:
    # The loopback server speaks plain http, so the redirect decision is shown on the fetcher
    # itself with a real httpx response, and end to end with a non-loopback http target.
    fetcher = fetch.Fetcher(fetch.Limits())
    current = httpx.URL("https://feeds.example.org/feed.json")
    response = httpx.Response(302, headers={"Location": "http://feeds.example.org/feed.json"})
    with pytest.raises(FetchError, match="downgrade"):
        fetcher._next_hop(
            "https://feeds.example.org/feed.json", current, response, fetch.origin(current), set()
        )
    server.redirect("/feed.json", "http://feeds.example.org/feed.json")
    refused(setup.fetch(server.url("/feed.json")), "redirect to another origin")
    setup.assert_nothing_written()


def test_refuses_plain_http_to_a_non_loopback_host_before_connecting(setup: Setup) -> None:
    # .invalid never resolves: a refusal that came after a connection attempt would say so.
    refused(setup.fetch("http://feeds.invalid/feed.json"), "plain http is allowed only")
    setup.assert_nothing_written()


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.org/feed.json",
        "file:///etc/passwd",
        "https://user:pw@example.org/f.json",
        "http://10.0.0.1/feed.json",
        "http://localhost.example.org/feed.json",
    ],
)
def test_refuses_urls_that_are_not_https_or_loopback_http(url: str) -> None:
    with pytest.raises(FetchError, match="refused"):
        fetch.check_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://example.org/f.json",
        "http://127.0.0.1:8/f.json",
        "http://localhost/f.json",
        "http://[::1]:9/f.json",
    ],
)
def test_accepts_https_and_loopback_http(url: str) -> None:
    fetch.check_url(url)


# --- content and signatures ----------------------------------------------------------------------


def test_refuses_invalid_json_served(server: FeedServer, setup: Setup) -> None:
    server.serve("/feed.json", b'{"schema_version": 2, "adapters": ')
    refused(setup.fetch(server.url("/feed.json")), "malformed JSON")
    setup.assert_nothing_written()


def test_refuses_feed_signed_by_an_untrusted_key(server: FeedServer, setup: Setup) -> None:
    stranger, _, _ = new_key(setup.root / "stranger")
    url = setup.publish(server, v2_feed(1), stranger)
    refused(setup.fetch(url), "bad signature", "no signature verifies against a trusted key")
    setup.assert_nothing_written()


def test_refuses_duplicate_signatures_from_one_key_padding_the_threshold(
    server: FeedServer, setup: Setup
) -> None:
    _, _, second_public = new_key(setup.root / "second")
    keys_file = trusted_file(setup.root / "trusted.json", 2, setup.public, second_public)
    url = setup.publish(server, v2_feed(1), setup.key, setup.key)
    status, stderr = setup.fetch(url, trusted=keys_file)
    refused((status, stderr), "only 1 of the required 2 trusted keys signed")
    setup.assert_nothing_written()


def test_accepts_a_threshold_of_distinct_keys(server: FeedServer, setup: Setup) -> None:
    second, _, second_public = new_key(setup.root / "second")
    keys_file = trusted_file(setup.root / "trusted.json", 2, setup.public, second_public)
    url = setup.publish(server, v2_feed(1), setup.key, second)
    status, stderr = setup.fetch(url, trusted=keys_file)
    assert status == 0, stderr


def test_refuses_an_unsigned_feed_when_signatures_are_required(
    server: FeedServer, setup: Setup
) -> None:
    url = setup.publish(server, v2_feed(1))
    refused(setup.fetch(url), "unsigned", "--require-signed")
    setup.assert_nothing_written()


def test_refuses_a_bad_signature_even_without_require_signed(
    server: FeedServer, setup: Setup
) -> None:
    stranger, _, _ = new_key(setup.root / "stranger")
    url = setup.publish(server, v2_feed(1), stranger)
    refused(setup.fetch(url, "--trusted-keys", str(setup.public), signed=False), "bad signature")
    setup.assert_nothing_written()


def test_a_signature_no_key_can_judge_leaves_the_feed_unsigned_and_says_so(
    server: FeedServer, setup: Setup
) -> None:
    # Without trusted keys, a signature vouches for nothing: the feed is what it would be
    # with the signature removed (an unsigned feed, accepted without --require-signed).
    url = setup.publish(server, v2_feed(1), setup.key)
    status, stderr = setup.fetch(url, signed=False)
    assert status == 0, stderr
    assert "signature not checked: no trusted keys are configured" in stderr
    assert setup.out.read_bytes() == v2_feed(1)


def test_refuses_a_malformed_signature_even_without_trusted_keys(
    server: FeedServer, setup: Setup
) -> None:
    server.serve("/feed.json", v2_feed(1))
    server.serve("/feed.json.dsse", b"not an envelope")
    refused(setup.fetch(server.url("/feed.json"), signed=False), "bad signature")
    setup.assert_nothing_written()


def test_refuses_a_stale_signature_even_without_trusted_keys(
    server: FeedServer, setup: Setup
) -> None:
    server.serve("/feed.json", v2_feed(2, floor="0.70.0"))
    server.serve("/feed.json.dsse", envelope(v2_feed(1), setup.key))
    refused(setup.fetch(server.url("/feed.json"), signed=False), "covers different bytes")
    setup.assert_nothing_written()


def test_refuses_a_fresh_feed_with_a_stale_signature(server: FeedServer, setup: Setup) -> None:
    # Mix-and-match: the new feed served beside the valid signature of the previous version.
    server.serve("/feed.json", v2_feed(2, floor="0.70.0"))
    server.serve("/feed.json.dsse", envelope(v2_feed(1), setup.key))
    refused(setup.fetch(server.url("/feed.json")), "covers different bytes")
    setup.assert_nothing_written()


def test_refuses_a_signature_with_another_payload_type(server: FeedServer, setup: Setup) -> None:
    data = v2_feed(1)
    server.serve("/feed.json", data)
    server.serve(
        "/feed.json.dsse", envelope(data, setup.key, payload_type="application/vnd.in-toto+json")
    )
    refused(setup.fetch(server.url("/feed.json")), "payloadType")
    setup.assert_nothing_written()


# --- rollback, mix-and-match, freeze -------------------------------------------------------------


def test_refuses_rolled_back_feed_version(server: FeedServer, setup: Setup) -> None:
    url = setup.publish(server, v2_feed(5), setup.key)
    assert setup.fetch(url)[0] == 0
    accepted = setup.out.read_bytes()
    state = setup.state.read_bytes()
    setup.publish(server, v2_feed(4), setup.key)  # validly signed, but older
    refused(setup.fetch(url), "rolled-back feed version", "version 4 is older than version 5")
    assert setup.out.read_bytes() == accepted
    assert setup.state.read_bytes() == state


def test_refuses_the_same_version_with_different_bytes(server: FeedServer, setup: Setup) -> None:
    url = setup.publish(server, v2_feed(5), setup.key)
    assert setup.fetch(url)[0] == 0
    accepted = setup.out.read_bytes()
    setup.publish(server, v2_feed(5, floor="0.1"), setup.key)
    refused(setup.fetch(url), "mix-and-match")
    assert setup.out.read_bytes() == accepted


def test_refuses_expired_feed(server: FeedServer, setup: Setup) -> None:
    url = setup.publish(server, v2_feed(1, expires="2029-12-31T23:59:59Z"), setup.key)
    refused(setup.fetch(url), "expired feed refused", "2029-12-31T23:59:59")
    setup.assert_nothing_written()


def test_refuses_a_304_after_expiry(server: FeedServer, setup: Setup) -> None:
    data = v2_feed(1, expires="2031-01-01T00:00:00Z")
    url = setup.publish(server, data, setup.key, etag='"v1"')
    assert setup.fetch(url)[0] == 0
    setup.out.unlink()
    args = [
        "fetch",
        url,
        "--out",
        str(setup.out),
        "--state-file",
        str(setup.state),
        "--trusted-keys",
        str(setup.public),
        "--require-signed",
        "--now",
        "2032-01-01T00:00:00Z",
    ]
    done = floorctl(*args, home=setup.home)
    refused((done.returncode, done.stderr), "expired feed refused")
    assert [h.get("if-none-match") for p, h in server.requests if p == "/feed.json"][-1] == '"v1"'
    assert not setup.out.exists()


def test_refuses_a_damaged_state_file_instead_of_forgetting(
    server: FeedServer, setup: Setup
) -> None:
    setup.state.write_text("{not json")
    url = setup.publish(server, v2_feed(1), setup.key)
    refused(setup.fetch(url), "feed state is damaged")
    assert not setup.out.exists()


@pytest.mark.parametrize("field", ["expires", "accepted_at"])
@pytest.mark.parametrize(
    "value",
    [
        "2099-01-01T00:00:00+01:60",
        "2099-02-30T00:00:00Z",
        "2099-01-01 00:00:00Z",
        "",
        None,
        20990101,
    ],
    ids=["offset-minute-60", "february-30", "space", "empty", "null", "integer"],
)
def test_refuses_a_state_file_whose_times_are_not_rfc_3339(
    server: FeedServer, setup: Setup, field: str, value: object
) -> None:
    url = setup.publish(server, v2_feed(1), setup.key)
    assert setup.fetch(url)[0] == 0
    state = json.loads(setup.state.read_text())
    (entry,) = state["feeds"].values()
    entry[field] = value
    setup.state.write_text(json.dumps(state))
    damaged = setup.state.read_bytes()
    accepted = setup.out.read_bytes()
    setup.publish(server, v2_feed(2), setup.key)
    refused(setup.fetch(url), "feed state is damaged", field)
    assert setup.state.read_bytes() == damaged
    assert setup.out.read_bytes() == accepted


def _state_text_with(setup: Setup, change: str) -> str:
    """The state file's text after one accepted fetch, changed as ``change`` names."""
    state = json.loads(setup.state.read_text())
    ((feed_id, entry),) = state["feeds"].items()
    body = json.dumps(entry)[1:-1]
    if change == "repeated-feed":
        older = json.dumps({**entry, "version": 1})
        return (
            f'{{"schema_version": 1, "feeds": {{"{feed_id}": {older}, "{feed_id}": {{{body}}}}}}}'
        )
    if change == "repeated-version":
        return f'{{"schema_version": 1, "feeds": {{"{feed_id}": {{"version": 1, {body}}}}}}}'
    if change == "repeated-feeds":
        return f'{{"schema_version": 1, "feeds": {{}}, "feeds": {json.dumps(state["feeds"])}}}'
    if change == "huge-integer":
        return json.dumps(state).replace(
            f'"version": {entry["version"]}', '"version": ' + "9" * 5000
        )
    if change == "nested-deeply":
        return '{"schema_version": 1, "feeds": {}, "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    if change == "version-below-1":
        entry["version"] = -5
        return json.dumps(state)
    if change == "feed-id-not-a-name":
        return json.dumps({"schema_version": 1, "feeds": {"acme\ud800": entry}})
    raise AssertionError(change)


@pytest.mark.parametrize(
    "change",
    ["repeated-feed", "repeated-version", "repeated-feeds", "huge-integer", "nested-deeply",
     "version-below-1", "feed-id-not-a-name"],
)  # fmt: skip
def test_refuses_a_damaged_state_file_in_one_line_and_leaves_it_as_it_was(
    server: FeedServer, setup: Setup, change: str
) -> None:
    # A state holding a key twice is read one way here and another by a reviewer (the
    # last copy of version 9 and 1 wins); none may stand for what was accepted.
    url = setup.publish(server, v2_feed(2), setup.key)
    assert setup.fetch(url)[0] == 0
    setup.state.write_text(_state_text_with(setup, change))
    damaged = setup.state.read_bytes()
    setup.publish(server, v2_feed(3), setup.key)
    code, stderr = setup.fetch(url)
    refused((code, stderr), "feed state is damaged")
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1, stderr
    assert setup.state.read_bytes() == damaged


# --- refresh from the network --------------------------------------------------------------------

MODULE = '''"""host module"""
# floor-map:begin
# floor-map:end
'''


def test_refresh_from_a_url_writes_the_module_and_records_freshness(
    server: FeedServer, setup: Setup
) -> None:
    url = setup.publish(server, v2_feed(7), setup.key)
    module = setup.root / "floor_map.py"
    module.write_text(MODULE)
    receipt_out = setup.root / "receipt.dsse"
    done = floorctl(
        "refresh",
        "--feed",
        url,
        "--module",
        str(module),
        "--write",
        "--trusted-keys",
        str(setup.public),
        "--require-signed",
        "--state-file",
        str(setup.state),
        "--now",
        NOW,
        "--receipt-out",
        str(receipt_out),
        "--signing-key",
        str(setup.root / "publisher" / "signing.key"),
        home=setup.home,
    )
    assert done.returncode == 0, done.stderr
    assert '"0.60.0"' in module.read_text()
    statement = json.loads(base64.b64decode(json.loads(receipt_out.read_text())["payload"]))
    receipt = statement["predicate"]
    assert receipt["reference_time"].startswith("2030-01-01T00:00:00")
    assert receipt["reference_time_source"] == "--now"
    [feed] = receipt["feeds"]
    assert (feed["feed_id"], feed["version"], feed["source"]) == ("example-feed", 7, url)
    assert feed["signed_by"]
    assert json.loads(setup.state.read_text())["feeds"]["example-feed"]["version"] == 7


def test_refresh_refuses_a_rolled_back_url_feed_before_writing(
    server: FeedServer, setup: Setup
) -> None:
    setup.state.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "feeds": {
                    "example-feed": {
                        "version": 9,
                        "digest": "sha256:" + "0" * 64,
                        "expires": "2099-01-01T00:00:00Z",
                        "accepted_at": NOW,
                    }
                },
            }
        )
    )
    url = setup.publish(server, v2_feed(8), setup.key)
    module = setup.root / "floor_map.py"
    module.write_text(MODULE)
    done = floorctl(
        "refresh",
        "--feed",
        url,
        "--module",
        str(module),
        "--write",
        "--trusted-keys",
        str(setup.public),
        "--require-signed",
        "--state-file",
        str(setup.state),
        "--now",
        NOW,
        home=setup.home,
    )
    refused((done.returncode, done.stderr), "rolled-back feed version")
    assert module.read_text() == MODULE


def timed_refresh(setup: Setup, *urls: str) -> tuple[tuple[int, str], float]:
    module = setup.root / "floor_map.py"
    module.write_text(MODULE)
    feeds = [arg for url in urls for arg in ("--feed", url)]
    started = time.monotonic()
    done = floorctl_here(
        "refresh",
        *feeds,
        "--module",
        str(module),
        "--write",
        "--state-file",
        str(setup.state),
        "--now",
        NOW,
        "--timeout",
        f"{DEADLINE:g}",
        home=setup.home,
    )
    elapsed = time.monotonic() - started
    assert "Traceback" not in done.stderr
    assert module.read_text() == MODULE
    assert not setup.state.exists()
    return (done.returncode, done.stderr), elapsed


@pytest.mark.parametrize("dripping", ["/feed.json", "/feed.json.dsse"])
def test_refresh_refuses_a_url_feed_whose_headers_drip_past_the_deadline(
    server: FeedServer, setup: Setup, dripping: str
) -> None:
    server.serve("/feed.json", v2_feed(1))
    server.drip_raw(dripping, OK_STATUS + b"X-Slow: ", ENDLESS_DRIP, DRIP_INTERVAL)
    result, elapsed = timed_refresh(setup, server.url("/feed.json"))
    refused(result, "slow retrieval", f"{DEADLINE:g} s deadline")
    assert elapsed < DEADLINE + MARGIN, f"cut off only after {elapsed:.1f} s"


def test_refresh_gives_all_its_url_feeds_one_deadline(server: FeedServer, setup: Setup) -> None:
    # Each answer alone fits in --timeout; together they do not: the deadline is the refresh's.
    for name in ("a", "b", "c"):
        data = v2_feed(1, feed_id=f"feed-{name}")
        answer = OK_STATUS + b"Content-Length: %d\r\n\r\n" % len(data) + data
        server.drip_raw(f"/{name}.json", b"", answer, 0.5 * DEADLINE / len(answer))
    urls = [server.url(f"/{name}.json") for name in ("a", "b", "c")]
    result, elapsed = timed_refresh(setup, *urls)
    refused(result, "slow retrieval", f"{DEADLINE:g} s deadline")
    assert elapsed < DEADLINE + MARGIN, f"cut off only after {elapsed:.1f} s"


def test_refuses_a_compressed_body(server: FeedServer, setup: Setup) -> None:
    # A few kilobytes of gzip can inflate to gigabytes: the cap counts bytes received.
    server.serve("/feed.json", b"\x1f\x8b", headers={"Content-Encoding": "gzip"})
    refused(setup.fetch(server.url("/feed.json")), "compressed body")
    setup.assert_nothing_written()


def test_refuses_an_error_status(server: FeedServer, setup: Setup) -> None:
    refused(setup.fetch(server.url("/missing.json")), "HTTP status 404")
    setup.assert_nothing_written()
