"""What of FLOORGUARD_CHAIN_URL a message may show: only what floorguard parsed itself into
host, port, database and user, each only in a safe shape; never a password, whatever shape
the URL is in, on any surface a host operator sees.

Each leaking shape goes through every surface: the SpawnRefused message, what a host's
``logger.exception`` prints (``traceback.format_exception`` of the raised error, with its
chained causes), every exception the refusal holds (its causes and contexts, hidden ones
too), ``python -m floorguard exec``'s stderr, ``floorctl chain export``'s stderr,
``floorctl canary last-green --json``'s output and ``floorctl chain init``'s. No server is
needed: every URL here fails before or at connecting.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import quote

import pytest
from helpers.cli import isolated_env
from helpers.pg_chain import Chain, append, floorctl
from hosts import Host, floor
from probes.native import Run, native_agent

from floorguard.chainstore.postgres import redact

pytestmark = pytest.mark.fleet

SECRET = "Sekr3t-H0st1"

# Each a URL whose password (SECRET) libpq reads, or refuses to read, where a message could
# show it.
LEAKING = {
    # The "@host" forgotten: libpq reads the password as the port.
    "password read as the port": f"postgresql://host1:{SECRET}/audit",
    "password after a host read as its port": f"postgresql://host1@127.0.0.1:{SECRET}/audit",
    # libpq refuses the URL, quoting the bad token; psycopg's exception carries it.
    "password with a bad percent escape": f"postgresql://app:{SECRET}%zz@127.0.0.1:1/audit",
    "password percent-encoded": "postgresql://app:Sekr3t%2DH0st1@127.0.0.1:1/audit",
    # A database name that is itself a URL, with a password in it.
    "URL inside the dbname of a conninfo": (
        f"host=127.0.0.1 port=1 dbname=postgresql://app:{SECRET}@127.0.0.1:1/audit"
    ),
    "password in a conninfo with a stray word": f"host=127.0.0.1 port=1 password={SECRET} x",
    "password in the query": f"postgresql://app@127.0.0.1:1/audit?password={SECRET}",
    "password as an unknown query key": f"postgresql://app@127.0.0.1:1/audit?{SECRET}=1",
    "sslpassword in the query": f"postgresql://app@127.0.0.1:1/audit?sslpassword={SECRET}",
}

PREFLIGHT = textwrap.dedent(
    """
    import logging, sys, traceback
    import floorguard
    logging.basicConfig(stream=sys.stdout)
    try:
        floorguard.preflight("aider", version="999.0.0")
    except floorguard.SpawnRefused as exc:
        print("MESSAGE", exc)
        print("TRACEBACK", "".join(traceback.format_exception(exc)))
        logging.getLogger("host").exception("spawn refused")
        # Every exception the refusal holds, hidden or not (an error reporter may walk
        # __context__ whatever __suppress_context__ says).
        held, seen = [exc], set()
        while held:
            one = held.pop()
            if one is not None and id(one) not in seen:
                seen.add(id(one))
                print("HELD", repr(one), one.args)
                held += [one.__cause__, one.__context__]
    else:
        print("NOT REFUSED")
    """
)


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120,
                          check=False)  # fmt: skip


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Host:
    root = tmp_path_factory.mktemp("host")
    made = Host(root / "host", {"aider": floor("0.60.0"), "codex": floor("0.2.0")})
    (root / "bin").mkdir()
    native_agent(root / "bin" / "codex", version=b"codex-cli 0.70.0\n",
                 run=Run(marker=root / "ran"))  # fmt: skip
    return made


def _surfaces(url: str, host: Host, tmp_path: Path, **extra: str) -> dict[str, str]:
    """What each surface printed for a chain at ``url`` (every one must refuse)."""
    env = isolated_env(tmp_path, FLOORGUARD_CHAIN_URL=url, FLOORGUARD_CHAIN_TIMEOUT="2",
                       FLOORGUARD_CHAIN_KEY_FILE=str(tmp_path / "chain.key"), **extra)  # fmt: skip
    shown: dict[str, str] = {}
    done = _run([sys.executable, "-c", PREFLIGHT], env)
    assert "MESSAGE refusing to spawn aider" in done.stdout, done
    shown["SpawnRefused, its traceback and logger.exception"] = done.stdout + done.stderr
    done = host.python("-m", "floorguard", "exec", "codex", "--", "task",
                       PATH=str(host.root.parent / "bin"), FLOORGUARD_CHAIN_URL=url,
                       FLOORGUARD_CHAIN_TIMEOUT="2", **extra)  # fmt: skip
    assert done.returncode == 126 and "could not be recorded" in done.stderr, done
    shown["python -m floorguard exec"] = done.stdout + done.stderr
    for argv in (["chain", "export"], ["canary", "last-green", "--json"],
                 ["chain", "init", "--url", url]):  # fmt: skip
        done = _run([sys.executable, "-m", "floorctl", *argv], env)
        assert done.returncode == 1, done
        assert "audit chain" in done.stdout + done.stderr, done
        shown[f"floorctl {' '.join(argv[:2])}"] = done.stdout + done.stderr
    return shown


@pytest.mark.parametrize("url", LEAKING.values(), ids=LEAKING.keys())
def test_no_surface_shows_a_password_whatever_the_shape_of_the_url(
    url: str, host: Host, tmp_path: Path
) -> None:
    for surface, text in _surfaces(url, host, tmp_path).items():
        assert SECRET not in text, f"{surface} shows the password:\n{text}"
        assert "Sekr3t" not in text and "H0st1" not in text, f"{surface}:\n{text}"


def test_no_surface_shows_the_password_libpq_reads_from_pgpassword(
    host: Host, tmp_path: Path
) -> None:
    url = "postgresql://app@127.0.0.1:1/audit"
    for surface, text in _surfaces(url, host, tmp_path, PGPASSWORD=SECRET).items():
        assert SECRET not in text, f"{surface} shows PGPASSWORD:\n{text}"


def test_the_refusal_names_the_safe_parts_of_the_url(host: Host, tmp_path: Path) -> None:
    shown = _surfaces(f"postgresql://host1@127.0.0.1:{SECRET}/audit", host, tmp_path)
    for surface, text in shown.items():
        # A spawn's refusal hides any URL's user information, as its receipt does (a
        # user name may be a token: https://TOKEN@host); the other surfaces name the user.
        user = (
            "<hidden>" if surface.startswith(("SpawnRefused", "python -m floorguard")) else "host1"
        )
        assert f"postgresql://{user}@127.0.0.1:***/audit" in text, f"{surface}:\n{text}"


# --- what is shown of a URL -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql://host-17@db.internal/audit?sslmode=verify-full",
            "postgresql://host-17@db.internal/audit",
        ),
        (
            "postgresql://host-17:pw@db.internal:5433/audit",
            "postgresql://host-17@db.internal:5433/audit",
        ),
        ("postgres://db.internal", "postgresql://db.internal"),
        ("postgresql://a:1,b:2,[::1]:3/audit", "postgresql://a:1,b:2,[::1]:3/audit"),
        ("postgresql://a,b:5432/audit", "postgresql://a,b:5432/audit"),
        (
            "postgresql:///audit?host=/run/postgresql&user=app",
            "postgresql://app@%2Frun%2Fpostgresql/audit",
        ),
        ("postgresql://%2Ftmp%2Fsock/audit", "postgresql://%2Ftmp%2Fsock/audit"),
        (
            "host=db.internal port=5433 dbname=audit user=app password=pw",
            "postgresql://app@db.internal:5433/audit",
        ),
        ("host = 10.0.0.7 dbname = 'audit'", "postgresql://10.0.0.7/audit"),
        (f"postgresql://host1:{SECRET}/audit", "postgresql://host1:***/audit"),
        (f"postgresql://host1@127.0.0.1:{SECRET}/audit", "postgresql://host1@127.0.0.1:***/audit"),
        ("postgresql://127.0.0.1:99999/audit", "postgresql://127.0.0.1:***/audit"),
        ("postgresql://app@h/My Db", "postgresql://app@h/***"),
        ("postgresql://ap%20p@h/audit", "postgresql://***@h/audit"),
        ("postgresql://a%40b@h/audit", "postgresql://***@h/audit"),
        ("host=h dbname=postgresql://u:pw@h/db", "postgresql://h/***"),
        ("host=@abstract dbname=audit", "postgresql://***/audit"),
        ("host=/tmp/../etc dbname=audit", "postgresql://***/audit"),
    ],
)
def test_a_location_shows_only_host_port_database_and_user_in_safe_shapes(
    url: str, shown: str
) -> None:
    assert redact(url) == shown


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://app:{SECRET}%zz@h/audit",
        f"postgresql://app:{SECRET}@[::1/audit",
        f"host=h password='{SECRET}",
        f"host=h {SECRET}",
        f"host=h nosuchkey={SECRET}",
        f"postgresql://h/audit?nosuchkey={SECRET}",
        "postgresql://h/audit?%00=1",
    ],
)
def test_a_url_that_does_not_parse_is_shown_as_a_fixed_phrase(url: str) -> None:
    assert redact(url) == "named by FLOORGUARD_CHAIN_URL (not shown: it does not parse)"


BAD_URL = f"postgresql://app:{SECRET}%zz@127.0.0.1:1/audit"


@pytest.mark.parametrize(
    "argv",
    [["chain", "init", "--url", BAD_URL], ["chain", "view", "--accept-current", "--url", BAD_URL]],
    ids=["chain init", "chain view"],
)
def test_a_url_given_with_the_url_option_that_does_not_parse_is_named_by_the_option(
    tmp_path: Path, argv: list[str]
) -> None:
    env = isolated_env(tmp_path, FLOORGUARD_CHAIN_KEY_FILE=str(tmp_path / "chain.key"))
    env.pop("FLOORGUARD_CHAIN_URL", None)
    done = _run([sys.executable, "-m", "floorctl", *argv], env)
    assert done.returncode == 1, done
    shown = done.stdout + done.stderr
    assert "--url is not a libpq URL" in shown and "FLOORGUARD_CHAIN_URL" not in shown, shown
    assert "Sekr3t" not in shown, shown


def test_the_same_url_from_the_variable_is_named_by_the_variable(tmp_path: Path) -> None:
    env = isolated_env(tmp_path, FLOORGUARD_CHAIN_KEY_FILE=str(tmp_path / "chain.key"),
                       FLOORGUARD_CHAIN_URL=BAD_URL)  # fmt: skip
    done = _run([sys.executable, "-m", "floorctl", "chain", "init"], env)
    assert done.returncode == 1, done
    assert "FLOORGUARD_CHAIN_URL is not a libpq URL" in done.stdout + done.stderr, done


@pytest.mark.parametrize(
    "options",
    ["-c Sekr3tH0st1=1", "-c work_mem=Sekr3tH0st1", "-c work_mem=1MB Sekr3tH0st1"],
    ids=["a setting's name", "a setting's value", "a stray word"],
)
def test_no_surface_shows_the_part_of_options_a_server_error_quotes(
    pg: Chain, host: Host, tmp_path: Path, options: str
) -> None:
    url = f"{pg.url}&options={quote(options)}"
    for surface, text in _surfaces(url, host, tmp_path).items():
        assert "Sekr3tH0st1" not in text, f"{surface} shows part of options:\n{text}"


# --- passwords in messages -------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app:Sup3rSecret@[::1/db",  # urlsplit refuses it: not redacted by URL rules
        "postgresql://app@localhost/db?sslpassword=Sup3rSecret",
        "postgresql://app:Sup3rSecret%zz@localhost/db",  # libpq quotes the bad token
        "host=localhost password=Sup3r Secret dbname=db",  # libpq quotes the stray word
        "host=localhost sslpassword=Sup3rSecret dbname=db",
    ],
)
def test_a_password_in_the_url_never_appears_in_an_error_or_location(
    url: str, tmp_path: Path
) -> None:
    assert "Sup3r" not in redact(url) and "Secret" not in redact(url)
    env = isolated_env(tmp_path, FLOORGUARD_CHAIN_URL=url, FLOORGUARD_CHAIN_TIMEOUT="1",
                       PGCONNECT_TIMEOUT="1")  # fmt: skip
    for argv in (["chain", "export"], ["chain", "init", "--url", url]):
        done = floorctl(*argv, env=env)
        assert done.returncode == 1, done
        assert "Sup3r" not in done.stderr + done.stdout
        assert "Secret" not in done.stderr + done.stdout
    done = append(env)
    assert done.returncode == 1
    assert "Sup3r" not in done.stderr and "Secret" not in done.stderr


# --- secrets in the URL ------------------------------------------------------------------------


@pytest.mark.parametrize("mark", ["#", "?"])
def test_a_password_with_a_hash_or_question_mark_never_appears_in_the_refusal(
    pg: Chain, tmp_path: Path, mark: str
) -> None:
    """The password is never shown (README). libpq reads a password holding '#' or '?' whole,
    while urllib ends the netloc there: redact() must not print "postgresql://host-17:s3cr"."""
    url = f"postgresql://host-17:s3cr{mark}Tpw@127.0.0.1:1/audit"
    env = {**pg.env(tmp_path, FLOORGUARD_CHAIN_TIMEOUT="1"), "FLOORGUARD_CHAIN_URL": url}
    done = append(env)
    assert done.returncode == 1
    assert "cannot append to the audit chain" in done.stderr
    assert "s3cr" not in done.stderr, done.stderr
