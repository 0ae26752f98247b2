"""A real HTTP server on 127.0.0.1 for fetch tests, with one behaviour per attack.

Routes are registered per path; each test gets its own server on a free port. Nothing is
mocked: the client under test talks to this server over a real socket.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Behaviour = Callable[[BaseHTTPRequestHandler], None]
# A server that keeps sending stops after this much, so a broken client cannot hang the run.
RUNAWAY_LIMIT = 64 * 1024 * 1024


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-response (as the fetcher must, on a refused body) is not
    an error worth a traceback on this process's stderr, which tests read."""

    def handle_error(self, request: object, client_address: object) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


@dataclass
class FeedServer:
    routes: dict[str, Behaviour] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                server.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                behaviour = server.routes.get(self.path)
                try:
                    if behaviour is None:
                        self.send_response(404)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                    else:
                        behaviour(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up, as it should

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # --- behaviours ---------------------------------------------------------------------

    def serve(
        self,
        path: str,
        body: bytes,
        *,
        etag: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """200 with ``body``; with ``etag``, a matching If-None-Match gets 304."""

        def behaviour(handler: BaseHTTPRequestHandler) -> None:
            if etag is not None and handler.headers.get("If-None-Match") == etag:
                handler.send_response(304)
                handler.send_header("ETag", etag)
                handler.send_header("Content-Length", "0")
                handler.end_headers()
                return
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(body)))
            if etag is not None:
                handler.send_header("ETag", etag)
            for name, value in (headers or {}).items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(body)

        self.routes[path] = behaviour

    def redirect(self, path: str, location: str, status: int = 302) -> None:
        def behaviour(handler: BaseHTTPRequestHandler) -> None:
            handler.send_response(status)
            handler.send_header("Location", location)
            handler.send_header("Content-Length", "0")
            handler.end_headers()

        self.routes[path] = behaviour

    def endless(self, path: str, *, declared_length: int | None = None) -> None:
        """Chunked data that never ends; optionally with a (lying) Content-Length as well."""

        def behaviour(handler: BaseHTTPRequestHandler) -> None:
            handler.send_response(200)
            handler.send_header("Transfer-Encoding", "chunked")
            if declared_length is not None:
                handler.send_header("Content-Length", str(declared_length))
            handler.end_headers()
            chunk = b"[" * 65536
            sent = 0
            while sent < RUNAWAY_LIMIT:
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)

        self.routes[path] = behaviour

    def lying_length(self, path: str, declared: int, actual: int) -> None:
        """Declares ``declared`` bytes, then sends ``actual`` and closes (HTTP/1.0 style)."""

        def behaviour(handler: BaseHTTPRequestHandler) -> None:
            handler.close_connection = True
            handler.wfile.write(
                b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % declared
            )
            remaining = actual
            while remaining > 0:
                piece = min(remaining, 65536)
                handler.wfile.write(b"{" * piece)
                remaining -= piece

        self.routes[path] = behaviour

    def drip(self, path: str, body: bytes, interval: float) -> None:
        """Sends ``body`` one byte every ``interval`` seconds (slow retrieval)."""

        def behaviour(handler: BaseHTTPRequestHandler) -> None:
            handler.send_response(200)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            for byte in body:
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
                time.sleep(interval)

        self.routes[path] = behaviour

    def drip_raw(self, path: str, head: bytes, dripped: bytes, interval: float) -> None:
        """Sends the raw bytes ``head`` at once, then ``dripped`` one byte every ``interval``
        seconds, then hangs up: a status line, headers or a chunk-size line that arrive at a
        pace no per-read timeout notices."""

        def behaviour(handler: BaseHTTPRequestHandler) -> None:
            handler.close_connection = True
            handler.wfile.write(head)
            for byte in dripped:
                handler.wfile.write(bytes([byte]))
                time.sleep(interval)

        self.routes[path] = behaviour


# --- feeds, keys and the CLI, as the fetch tests use them ------------------------------------

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402

from floorctl import keys  # noqa: E402
from floorguard._crypto import dsse  # noqa: E402

FEED_TYPE = "application/vnd.floorctl.feed+json"
FAR_FUTURE = "2099-01-01T00:00:00Z"
NOW = "2030-01-01T00:00:00Z"


def v2_feed(
    version: int = 1,
    *,
    feed_id: str = "example-feed",
    expires: str = FAR_FUTURE,
    floor: str = "0.60.0",
    extra: dict[str, Any] | None = None,
) -> bytes:
    entry: dict[str, Any] = {
        "min_safe_version": floor,
        "advisory_id": "BSA-0001",
        "note": f"aider below {floor} is known-unsafe.",
    }
    entry.update(extra or {})
    return json.dumps(
        {
            "schema_version": 2,
            "feed_id": feed_id,
            "version": version,
            "published": "2025-01-01T00:00:00Z",
            "expires": expires,
            "adapters": {"aider": entry},
        },
        indent=1,
    ).encode()


def envelope(data: bytes, *signers: Ed25519PrivateKey, payload_type: str = FEED_TYPE) -> bytes:
    """A DSSE envelope over ``data`` with one signature per signer (repeats allowed)."""
    signatures = tuple(dsse.sign(payload_type, data, key).signatures[0] for key in signers)
    return dsse.Envelope(payload_type, data, signatures).to_bytes()


def new_key(directory: Path) -> tuple[Ed25519PrivateKey, Path, Path]:
    private, public = keys.generate(directory)
    return keys.load_private(private), private, public


def trusted_file(path: Path, threshold: int, *publics: Path) -> Path:
    pems = [p.read_text() for p in publics]
    path.write_text(json.dumps({"threshold": threshold, "keys": pems}))
    return path


def floorctl(
    *args: str, home: Path, cwd: Path | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOORGUARD_", "FLOORCTL_"))}
    env["FLOORCTL_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "floorctl", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
        check=False,
    )


def floorctl_here(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """The real CLI entry point run in this process (same code path as the console script,
    without a fresh interpreter's import cost); the environment is set as for a subprocess."""
    import contextlib
    import io

    from floorctl.cli import main

    saved = dict(os.environ)
    out, err = io.StringIO(), io.StringIO()
    status = 0
    try:
        for name in [k for k in os.environ if k.startswith(("FLOORGUARD_", "FLOORCTL_"))]:
            del os.environ[name]
        os.environ["FLOORCTL_HOME"] = str(home)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as exit_:
                status = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(["floorctl", *args], status, out.getvalue(), err.getvalue())
