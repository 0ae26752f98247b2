"""The MCP servers an agent CLI will start, as its client declares them for one spawn.

For a spawn's home folder, working directory, environment and the agent's own arguments,
:func:`read_servers` reads every declaration the client would load (the formats and where
each client reads them are in docs/mcp-servers.md) and returns them with the file and the
JSON or TOML path of each. It reads the union of every scope rather than reproducing each
client's precedence: a server defined twice is judged twice, which is stricter, never
looser. Anything it cannot read exactly is a doubt naming the file and the path; the
caller refuses on a doubt. Nothing here runs or judges a server.
"""

from __future__ import annotations

import codecs
import copy
import functools
import hashlib
import itertools
import json
import os
import re
import stat
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from floorguard._base._text import recordable
from floorguard._identify.claude_options import (
    doubtful_options,
    names_claude,
    wrapped_doubtful_options,
)
from floorguard._identify.dotenv_expand import dotenv_expand
from floorguard._identify.dotenvy_file import RUST_WHITE_SPACE, DotenvDoubt, load
from floorguard._identify.mcp_files import (
    MAX_CONFIG_BYTES,
    ConfigDoubt,
    is_text,
    parse_json,
    parse_toml,
    read_config,
    refuse_process_paths,
)
from floorguard._identify.node_resolution import resolved_as_node_does
from floorguard._identify.process_paths import Walk

STDIO, REMOTE = "stdio", "remote"
CLAUDE, CODEX, GEMINI, CURSOR = "claude", "codex", "gemini", "cursor"
# Which configuration format each catalogued agent reads; other agents declare no servers
# that floorguard knows how to read.
CLIENT_OF_ADAPTER: Final = {"claude": CLAUDE, "codex": CODEX, "gemini": GEMINI}

# Claude Code's managed file takes over from every other scope; it is read as one more.
CLAUDE_MANAGED: Final = "/etc/claude-code/managed-mcp.json"
CLAUDE_MANAGED_SETTINGS: Final = "/etc/claude-code/managed-settings.json"
CLAUDE_MANAGED_SETTINGS_DIR: Final = "/etc/claude-code/managed-settings.d"
# The names Claude Code's global file takes (``.claude<suffix>.json``): plain, with
# CLAUDE_CODE_CUSTOM_OAUTH_URL set, and Anthropic's own local and staging builds.
_CLAUDE_GLOBAL_SUFFIXES: Final = ("", "-custom-oauth", "-local-oauth", "-staging-oauth")
CODEX_SYSTEM: Final = "/etc/codex/config.toml"
# Codex's legacy managed layer (codex-rs config loader ``CODEX_MANAGED_CONFIG_SYSTEM_PATH``,
# Unix): a whole config layer over the user's, so it may declare servers as config.toml does.
CODEX_MANAGED: Final = "/etc/codex/managed_config.toml"
# The variables codex copies from its own environment into a stdio server's, which it
# otherwise clears (codex-rs rmcp-client ``DEFAULT_ENV_VARS``, Unix).
CODEX_SERVER_ENV: Final = (
    "HOME", "LOGNAME", "PATH", "SHELL", "USER", "__CF_USER_TEXT_ENCODING", "LANG", "LC_ALL",
    "TERM", "TMPDIR", "TZ",
)  # fmt: skip
GEMINI_SYSTEM: Final = "/etc/gemini-cli/settings.json"
# The variables Gemini CLI keeps for a stdio server when it sanitizes strictly (GITHUB_SHA
# set, or SURFACE=Github: core ``sanitizeEnvironment``), names compared upper-cased, with
# every GEMINI_CLI_ one. Releases have kept a few more (TERM, GIT_CONFIG_*) and settings
# may allow more: such a server is judged with these alone and with the whole environment.
_GEMINI_STRICTLY_KEPT: Final = frozenset(
    {
        "PATH", "SYSTEMROOT", "COMSPEC", "PATHEXT", "WINDIR", "TEMP", "TMP", "USERPROFILE",
        "SYSTEMDRIVE", "HOME", "LANG", "SHELL", "TMPDIR", "USER", "LOGNAME",
        "ADDITIONAL_CONTEXT", "AVAILABLE_LABELS", "BRANCH_NAME", "DESCRIPTION", "EVENT_NAME",
        "GITHUB_ENV", "IS_PULL_REQUEST", "ISSUES_TO_TRIAGE", "ISSUE_BODY", "ISSUE_NUMBER",
        "ISSUE_TITLE", "PULL_REQUEST_NUMBER", "REPOSITORY", "TITLE", "TRIGGERING_ACTOR",
    }
)  # fmt: skip

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}\Z")
_PROFILE = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")
# Expansion a client applies to command and args, which the gate cannot reproduce (a
# settings file or a project's .env may supply the variable): a doubt.
_CLAUDE_EXPANSION = re.compile(r"\$\{")
_GEMINI_EXPANSION = re.compile(r"\$(?:\w|\{)")
_ENV_REFERENCE = re.compile(
    r"\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}(?P<name>)"
)
# What node's ``process.env[name]`` (and a plain object's lookup) answers for a name that
# is no variable: Object.prototype's own properties, a function whose text a client puts
# in place of the reference.
_JS_OBJECT_NAMES: Final = frozenset(
    {"constructor", "hasOwnProperty", "isPrototypeOf", "propertyIsEnumerable",
     "toLocaleString", "toString", "valueOf", "__proto__", "__defineGetter__",
     "__defineSetter__", "__lookupGetter__", "__lookupSetter__"}
)  # fmt: skip
# Claude Code's own reading of a reference in a server's env: everything between the
# braces, split on ``:-`` (two parts at most), the name looked up as written.
_CLAUDE_ANY_REFERENCE = re.compile(r"\$\{([^}]+)\}")
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _reference_problem(value: str, gemini: bool, environ: Mapping[str, str]) -> str | None:
    """Why a client's expansion of ``value`` is not read here, or None: a claude reference
    other than a plain ``${NAME}`` or ``${NAME:-DEFAULT}`` (Claude Code looks up whatever is
    between the braces, untrimmed, and drops what follows a second ``:-``), or a name of
    Object's own properties that the environment does not hold (node answers it with a
    function's text)."""
    if gemini:
        names = [m["name"] or m["braced"] for m in _GEMINI_REFERENCE.finditer(value)]
    else:
        names = []
        for match in _CLAUDE_ANY_REFERENCE.finditer(value):
            parts = match.group(1).split(":-")
            if not _PLAIN_NAME.match(parts[0]) or len(parts) > 2:
                return (
                    f"{match.group(0)!r} is not a plain ${{NAME}} or ${{NAME:-DEFAULT}}: Claude "
                    "Code looks up the text between the braces as written and drops what "
                    "follows a second ':-'"
                )
            names.append(parts[0])
    for name in names:
        if name in _JS_OBJECT_NAMES and name not in environ:
            return (
                f"names {name}, which node answers with a function's text (a property of "
                "every JavaScript object), not an unset variable"
            )
    return None


# Gemini CLI expands ``$VAR`` too (its own pattern, applied to every string of a settings
# file; JavaScript's ``\w`` is ASCII). Older releases know no ``:-default``: there
# ``${VAR:-d}`` names a variable ``VAR:-d`` (``_GEMINI_OLD_REFERENCE``).
_GEMINI_REFERENCE = re.compile(
    r"\$(?:(?P<name>\w+)|\{(?P<braced>[^}]+?)(?::-(?P<default>[^}]*))?\})", re.ASCII
)
_GEMINI_OLD_REFERENCE = re.compile(r"\$(?:(?P<name>\w+)|\{(?P<braced>[^}]+)\})", re.ASCII)
# The variable Gemini CLI's second expansion of a server's env (dotenv-expand) goes through.
_GEMINI_EXPAND_TARGET: Final = "__GCLI_EXPAND_TARGET__"
# Variables whose value decides what a program loads: an env value for one of these must be
# known exactly, not left to the client's expansion.
_LOADING_PREFIXES: Final = ("PYTHON", "NODE_", "LD_", "UV_", "NPM_", "npm_", "BUN_", "DENO_")
_LOADING_NAMES: Final = frozenset(
    {"PATH", "GCONV_PATH", "OPENSSL_CONF", "OPENSSL_ENGINES", "OPENSSL_MODULES", "BASH_ENV", "ENV"}
)


@dataclass(frozen=True)
class Declaration:
    """One MCP server as declared: ``declared_in`` the file (or argument) and ``at`` the
    path in it; for Codex, whose files merge key by key, every source that set a key."""

    name: str
    transport: str
    declared_in: tuple[str, ...]
    at: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    url: str | None = None
    enabled: bool = True
    # The whole environment the client starts the server with, before its ``env``: None
    # for the agent's own (claude, gemini); codex clears it (``base_env`` of
    # :func:`read_servers`' codex reading).
    base_env: tuple[tuple[str, str], ...] | None = None

    @property
    def source(self) -> str:
        return "; ".join(self.declared_in)

    def digest(self) -> str:
        """A digest of everything that decides what runs (arguments and env included), so
        a receipt binds the declaration without carrying values that may be secrets."""
        body = [self.transport, self.command, list(self.args), [list(p) for p in self.env],
                self.cwd, self.url]  # fmt: skip
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Servers:
    """What :func:`read_servers` found: the declarations, and the doubts that refuse."""

    client: str
    declarations: tuple[Declaration, ...] = ()
    doubts: tuple[str, ...] = ()
    files: tuple[str, ...] = field(default=())
    # Variables the client gives its own process from its configuration that would make
    # what it starts load code not judged (each refuses the agent itself).
    own_environment: tuple[str, ...] = ()
    # The project folders whose entries of the client's global file were taken (claude's
    # ``projects[<folder>]``): the servers they declare may come from there too.
    projects: tuple[str, ...] = ()


def home_of(environ: Mapping[str, str], cwd: str) -> str:
    """The home folder a client computes for a spawn in ``cwd``: HOME, else the user's entry
    (as node's ``os.homedir`` and Rust's ``home_dir`` do). Both return a relative HOME as it
    is, and the client's files under it are then found from its working directory."""
    home = environ.get("HOME")
    if home is None:
        import pwd

        home = pwd.getpwuid(os.getuid()).pw_dir
    # (node's os.homedir() returns an empty HOME as it is: the working directory)
    return _normal_join(cwd, home)


def names_agent_program(client: str, path: str, cwd: str) -> bool:
    """Whether ``path`` is ``client``'s own program (its arguments then the agent's, under
    whatever name it was started): for claude, a file of its package or named claude."""
    return client == CLAUDE and names_claude(path, cwd)


# How many `--` of wrappers (npx, node, env...) an agent's arguments are read past.
MAX_WRAPPER_ENDS: Final = 8


def read_servers(
    client: str,
    *,
    argv: Sequence[str],
    cwd: str,
    environ: Mapping[str, str],
    wrapped: bool = False,
    own_arguments: bool | None = None,
) -> Servers:
    """Every MCP server ``client`` declares for a spawn in ``cwd`` (absolute) with the
    agent's arguments ``argv`` and environment ``environ``; ``wrapped``: ``argv`` are those
    of a program that runs the agent (a launcher, an interpreter). Never raises for a file:
    a problem is a doubt in the answer."""
    found: list[Declaration] = []
    doubts: list[str] = []
    files: list[str] = []
    own: list[str] = []
    projects: list[str] = []
    # Run through wrappers (``wrapped``: launchers, interpreters, env), the agent's own
    # arguments may follow a `--` that ends each wrapper's options (``npx -y -- PKG
    # --mcp-config F``, ``env -u X -- node -- cli.js ...``), which the agent never sees:
    # they are read without the first `--`, the first two, ... too. Reading more is
    # stricter, never looser (an agent's own `--` may so refuse, never allow).
    readings = [list(argv)]
    ends = [index for index, arg in enumerate(argv) if arg == "--"] if wrapped else []
    if len(ends) > MAX_WRAPPER_ENDS:
        # (each is one more reading of every file: a count no chain of wrappers needs)
        return Servers(client, (), (f"the agent's arguments hold {len(ends)} `--`, more than "
                                    f"the {MAX_WRAPPER_ENDS} wrappers' read past",))  # fmt: skip
    for count in range(1, len(ends) + 1):
        dropped = set(ends[:count])
        readings.append([arg for index, arg in enumerate(argv) if index not in dropped])
    # (the arguments are the agent's own when it runs under another name, not a wrapper's)
    among_a_wrappers = wrapped if own_arguments is None else not own_arguments
    for reading in readings:
        passes: list[frozenset[str]] = [frozenset()]
        while passes:
            reader = _Reader(client, cwd, environ, wrapped=among_a_wrappers, without=passes.pop())
            try:
                if client == CLAUDE:
                    reader.claude(reading)
                elif client == CODEX:
                    reader.codex(reading)
                elif client == GEMINI:
                    reader.gemini(reading)
                elif client == CURSOR:
                    reader.cursor()
                else:
                    raise ValueError(f"unknown MCP client {client!r}")
            except ConfigDoubt as exc:
                reader.doubts.append(str(exc))
            own += [d for d in _own_environment_doubts(client, reader) if d not in own]
            found += [d for d in reader.found if d not in found]
            doubts += [d for d in reader.doubts if d not in doubts]
            files += [f for f in reader.files if f not in files]
            projects += [f for f in reader.projects if f not in projects]
            if reader.without or not reader.uncertain_env:
                continue
            # Read again without each set of the files the client may not load that give
            # it variables: a file it skips must not re-route what it starts.
            uncertain = list(dict.fromkeys(reader.uncertain_env))
            if len(uncertain) > _MOST_UNCERTAIN_ENV:
                doubts.append(
                    f"{len(uncertain)} configuration files that {client} may not load give it "
                    f"variables ({', '.join(uncertain[:3])}, ...): more than the "
                    f"{_MOST_UNCERTAIN_ENV} read without each other"
                )
                continue
            passes = [
                frozenset(combination)
                for size in range(1, len(uncertain) + 1)
                for combination in itertools.combinations(uncertain, size)
            ]
    servers = Servers(
        client, tuple(found), tuple(doubts), tuple(files), tuple(own), tuple(projects),
    )  # fmt: skip
    return _text_only(servers)


# How many configuration files a client may not load may give it variables: every set of
# them is left out in turn (2^n readings).
_MOST_UNCERTAIN_ENV: Final = 3
# Claude's .env files, loaded together (a Bun build) or none (its node build).
_CLAUDE_ENV_FILES_GROUP: Final = "claude's .env files in the working directory"
_CLAUDE_OTHER_MODES_GROUP: Final = "claude's .env files of the modes NODE_ENV does not select"
# Gemini CLI's choice to ignore the local .env, which earlier releases do not make.
_GEMINI_IGNORING: Final = "gemini's --ignore-env or advanced.ignoreLocalEnv"


# (codex's shell tool gives its commands these too)
_CODEX_SHELL_SET: Final = "its shell_environment_policy.set"
# Where each client takes the variables it adds to its own process from.
_OWN_ENVIRONMENT_FROM: Final = {
    CLAUDE: "its settings files' or global configuration's env",
    GEMINI: "its .env file",
    CODEX: "its .env files",
}


def _own_environment_doubts(client: str, reader: _Reader) -> list[str]:
    """The variables ``client`` gives its own process from its configuration (claude's
    settings ``env``, gemini's and codex's ``.env``) that would make what it starts load
    code not judged: judged as the spawn's own environment is, since every command, hook
    and server the agent starts inherits them."""
    from floorguard._identify.child_inputs import interpreter_start_up, loader_doubts

    if client == CODEX:
        added = {
            name: value
            for environment in reader.codex_environments
            for name, value in environment.items()
            if reader.environ.get(name) != value
        }
    else:
        # (what claude's .env files gave and its settings did not change: named as theirs)
        added = {
            name: value
            for name, value in reader.inherited.items()
            if reader.claude_dotenv.get(name) != value
        }
    source = _OWN_ENVIRONMENT_FROM.get(client)
    dotenv = f"its working directory's {', '.join(reader.claude_dotenv_files)}"
    found: list[str] = []
    for given, where in (
        (added, source),
        (reader.codex_shell_set, _CODEX_SHELL_SET),
        ({n: v for n, v in reader.claude_dotenv.items() if reader.inherited.get(n) == v}, dotenv),
    ):
        if given and where is not None:
            # (whatever the agent is: set after it started, they reach only what it starts)
            doubts = [*loader_doubts(given), *interpreter_start_up(given, None)]
            found += [f"from {where}, {doubt}" for doubt in doubts]
    return found


def _text_only(found: Servers) -> Servers:
    """``found`` with every declaration that holds something not text (a lone surrogate: a
    file name or an argument with bytes that are not UTF-8) turned into a doubt, and every
    doubt made text, so the refusal can be recorded and names what it refuses."""
    kept: list[Declaration] = []
    doubts = [recordable(d) for d in found.doubts]
    for declared in found.declarations:
        strings = [declared.name, *declared.declared_in, declared.at, *declared.args]
        strings += [declared.command or "", declared.cwd or "", declared.url or ""]
        strings += [part for pair in declared.env for part in pair]
        strings += [part for pair in declared.base_env or () for part in pair]
        if all(is_text(value) for value in strings):
            kept.append(declared)
        else:
            doubts.append(
                f"{recordable(declared.source)}: {recordable(declared.at)}: holds bytes that "
                "are not UTF-8 text (in a file name, an argument or a value)"
            )
    files = tuple(recordable(f) for f in found.files)
    own = tuple(recordable(d) for d in found.own_environment)
    projects = tuple(recordable(f) for f in found.projects)
    return Servers(found.client, tuple(kept), tuple(doubts), files, own, projects)


# An agent file's front matter (between the first two ``---`` lines) naming MCP servers,
# in any YAML spelling (a block key, a flow mapping): the word anywhere there, as written
# or once escapes are undone (``_unescaped``).
_AGENT_SERVERS: Final = "mcpServers"
_GEMINI_AGENT_SERVERS: Final = "mcp_servers"
# What can spell a letter in a YAML double-quoted scalar or a JSON string without writing
# it: a hexadecimal escape, and an escaped line break (it joins the two lines' text).
_ESCAPE: Final = re.compile(
    r"\\(?:x([0-9A-Fa-f]{2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|\r?\n[ \t]*)"
)
# How many files and folders below an agents folder are looked at, how large an agent file
# may be, and how much of them all is read, before that is a doubt (a workspace can fill
# them; an agent's definition is a page of text).
_AGENT_ENTRIES: Final = 5000
_AGENT_FILE_BYTES: Final = 1024 * 1024
_AGENT_BYTES: Final = 16 * 1024 * 1024
_PATH_MAX: Final = 4096  # (Linux: a longer path is refused by every call that opens one)


def _unescaped(text: str) -> str:
    """``text`` with every hexadecimal escape turned into its character and every escaped
    line break joined, wherever they stand (in a plain scalar, where YAML keeps them as
    written, this only adds text to look in)."""

    def one(match: re.Match[str]) -> str:
        digits = match.group(1) or match.group(2) or match.group(3)
        if digits is None:
            return ""
        code = int(digits, 16)
        return chr(code) if code <= 0x10FFFF else match.group(0)

    return _ESCAPE.sub(one, text)


def _names_servers(text: str, key: str = _AGENT_SERVERS) -> bool:
    """Whether ``text`` (front matter, or ``--agents`` JSON) names ``key`` (claude's
    ``mcpServers`` unless told), as written or through escapes."""
    return key in text or key in _unescaped(text)


# Git variables that name the repository (and so the root Claude Code keys projects by).
_GIT_REPOSITORY_VARIABLES: Final = ("GIT_DIR", "GIT_COMMON_DIR")

# Any Unicode signature: a reader that decodes by it (or drops it) may find servers there.
_BYTE_ORDER_MARKS: Final = (
    codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_LE,
    codecs.BOM_UTF32_BE,
)  # fmt: skip


def _utf8_text(data: bytes) -> bool:
    """Whether ``data`` is UTF-8 without a NUL (valid UTF-8, but UTF-16 text without a
    byte order mark is full of them)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\x00" not in data


def _front_matter(data: bytes) -> bytes:
    """The front matter of a Markdown agent file (all of it when it is never closed)."""
    text = data.lstrip()
    if not text.startswith(b"---"):
        return b""
    body = text[3:]
    end = re.search(rb"^---\s*$", body, re.MULTILINE)
    return body if end is None else body[: end.start()]


_GEMINI_INSTALL: Final = ".gemini-extension-install.json"
_EXTENSION_VARIABLE: Final = re.compile(r"\$\{(extensionPath|workspacePath|/|pathSeparator)\}")


def _strings(value: Any) -> list[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [*value.keys(), *(s for v in value.values() for s in _strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _substituted(value: Any, known: Mapping[str, str]) -> Any:
    """``value`` with every string's ``${NAME}`` for a NAME in ``known`` replaced."""
    if isinstance(value, str):
        return _EXTENSION_VARIABLE.sub(lambda m: known[m.group(1)], value)
    if isinstance(value, dict):
        return {k: _substituted(v, known) for k, v in value.items()}
    if isinstance(value, list):
        return [_substituted(v, known) for v in value]
    return value


# The names Gemini CLI gives an extension (its ``validateName``; any other is not loaded).
_GEMINI_EXTENSION_NAME: Final = re.compile(r"[a-zA-Z0-9-]+\Z")


def _gemini_custom(value: Any, custom: Mapping[str, str]) -> Any:
    """``value`` with each string's references to a variable of ``custom`` put in, as
    Gemini CLI's ``resolveEnvVarsInObject`` expands an extension's declaration: from the
    extension's variables before its environment. Every other reference is left as written,
    for the expansion from the environment that follows."""
    if isinstance(value, str):

        def one(match: re.Match[str]) -> str:
            name = match["name"] or match["braced"]
            return custom[name] if name in custom else match.group(0)

        return _GEMINI_REFERENCE.sub(one, value)
    if isinstance(value, dict):
        return {k: _gemini_custom(v, custom) for k, v in value.items()}
    if isinstance(value, list):
        return [_gemini_custom(v, custom) for v in value]
    return value


def _gemini_references(value: Any) -> set[str]:
    """The names ``value``'s strings refer to, as any Gemini CLI release reads them."""
    if isinstance(value, str):
        return {
            match["name"] or match["braced"]
            for pattern in (_GEMINI_REFERENCE, _GEMINI_OLD_REFERENCE)
            for match in pattern.finditer(value)
        }
    if isinstance(value, dict):
        return set().union(*map(_gemini_references, value.values()))
    if isinstance(value, list):
        return set().union(*map(_gemini_references, value))
    return set()


def _loading(name: str) -> bool:
    """Whether a variable decides what a program loads (see ``_LOADING_NAMES``)."""
    return name in _LOADING_NAMES or name.startswith(_LOADING_PREFIXES)


def _gemini_referred(servers: Any) -> set[str]:
    """The names an extension's servers refer to anywhere but in an ``env`` value of a
    variable that decides nothing of what a program loads."""
    if not isinstance(servers, dict):
        return _gemini_references(servers)
    names: set[str] = set()
    for entry in servers.values():
        for key, value in entry.items() if isinstance(entry, dict) else [("", entry)]:
            plain = key == "env" and isinstance(value, dict)
            names |= _gemini_references(
                {k: v for k, v in value.items() if _loading(k)} if plain else value
            )
    return names


def _gemini_sanitizes_strictly(environ: Mapping[str, str]) -> bool:
    """Whether Gemini CLI strips a stdio server's environment to
    ``_GEMINI_STRICTLY_KEPT`` (as in a GitHub Actions job)."""
    return bool(environ.get("GITHUB_SHA")) or environ.get("SURFACE") == "Github"


def _gemini_strictly_kept(name: str) -> bool:
    upper = name.upper()
    return upper in _GEMINI_STRICTLY_KEPT or upper.startswith("GEMINI_CLI_")


# What Gemini CLI 0.31 and later strip from a stdio server's inherited environment always
# (core ``sanitizeEnvironment`` with redaction on; the strictly kept names are never
# stripped): names listed or holding a credential's word, values that look like a key, a
# certificate, a URL's credentials or a known kind of token. Compared case-blind.
_GEMINI_STRIPPED_NAMES: Final = frozenset(
    {
        "CLIENT_ID", "DB_URI", "CONNECTION_STRING", "AWS_DEFAULT_REGION", "AZURE_CLIENT_ID",
        "AZURE_TENANT_ID", "SLACK_WEBHOOK_URL", "TWILIO_ACCOUNT_SID", "DATABASE_URL",
        "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_ACCOUNT", "FIREBASE_PROJECT_ID",
    }
)  # fmt: skip
_GEMINI_STRIPPED_NAME = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|KEY|AUTH|CREDENTIAL|CREDS|PRIVATE|CERT"
)
_GEMINI_STRIPPED_VALUE = re.compile(
    r"-----BEGIN (?:RSA|OPENSSH|EC|PGP) PRIVATE KEY-----|-----BEGIN CERTIFICATE-----"
    r"|(?:HTTPS?|FTP|SMTP)://[^:]+:[^@]+@|(?:GHP|GHO|GHU|GHS|GHR|GITHUB_PAT)_[A-Z0-9_]{36,}"
    r"|AIZASY[A-Z0-9_\\-]{33}|AKIA[A-Z0-9]{16}|EYJ[A-Z0-9_-]*\.[A-Z0-9_-]*\.[A-Z0-9_-]*"
    r"|(?:S|R)K_(?:LIVE|TEST)_[0-9A-Z]{24}|XOX[ABPR]-[A-Z0-9-]+",
    re.ASCII,
)


def gemini_strips(name: str, value: str) -> bool:
    """Whether Gemini CLI (0.31 and later) strips variable ``name`` of ``value`` from the
    environment a stdio server inherits (settings' own allowed and blocked lists aside)."""
    upper = name.upper()
    if _gemini_strictly_kept(upper):
        return False
    if upper in _GEMINI_STRIPPED_NAMES or _GEMINI_STRIPPED_NAME.search(upper):
        return True
    return bool(value) and _GEMINI_STRIPPED_VALUE.search(value.upper()) is not None


def _js_truthy(value: Any) -> bool:
    """A JSON value's truth in JavaScript, where every object and array is true."""
    return isinstance(value, (dict, list)) or bool(value)


# The variables of its ``.env`` that would move where Gemini CLI finds its extensions,
# agents and settings (GEMINI_CLI_HOME, HOME, the settings paths; TMPDIR, TMP and TEMP,
# node's temporary folder in that order, its IDE server files and, HOME empty, its home)
# or name a command it runs
# (GEMINI_CLI_IDE_SERVER_STDIO_COMMAND), or choose the sandbox it re-runs itself and its
# servers in (GEMINI_SANDBOX and its image and proxy command, SANDBOX_FLAGS and the other
# SANDBOX_ variables, the seatbelt profile, an image built from the workspace), or load
# code into the node Gemini CLI relaunches itself in (releases before April 2026 relaunch
# after loading the file, the child given their environment: NODE_OPTIONS, NODE_PATH, the
# dynamic loader's LD_ and DYLD_ variables): the file is loaded after the gate read them,
# and before Gemini CLI decides on its sandbox.
# The .env files a Bun executable loads from its working directory (which of .development,
# .production and .test, and of their .local forms, by NODE_ENV; .local last, but for
# tests): claude's are all read.
_CLAUDE_ENV_FILES: Final = (".env", ".env.development", ".env.production", ".env.test",
                            ".env.local", ".env.development.local", ".env.production.local",
                            ".env.test.local")  # fmt: skip


def _bun_env_files(node_env: str | None) -> tuple[str, ...]:
    """The ``.env`` files Bun loads into a process started with ``node_env``, the first to
    set a variable keeping it: its mode's local file, ``.env.local`` (never in test mode),
    its mode's file, ``.env`` (Bun's env_loader: NODE_ENV "production" or "test" chooses
    that mode, anything else is development)."""
    mode = node_env if node_env in ("production", "test") else "development"
    local = () if mode == "test" else (".env.local",)
    return (f".env.{mode}.local", *local, f".env.{mode}", ".env")


# What decides where Claude Code reads its configuration (GIT_DIR and GIT_COMMON_DIR, which
# decide which project entry it takes, are looked at where project entries are read).
# Variables naming what Claude Code loads from where nothing is read here, with what they
# name: a refusal wherever they come from, the environment included.
_CLAUDE_UNREAD_VARIABLES: Final = {
    "CLAUDE_CODE_PLUGIN_DIRS": "plugin folders (as --plugin-dir), not read here",
    "CLAUDE_CODE_REMOTE_SETTINGS_PATH": "a settings file taken for the organisation's, not "
    "read here",
    "CLAUDE_ENV_FILE": "a file claude sources before each Bash command (as BASH_ENV is), "
    "not judged here",
    "CLAUDE_CODE_SHELL_PREFIX": "a program claude starts every stdio MCP server and command "
    "through, not judged here",
    "CLAUDE_CODE_SHELL": "the shell claude runs every Bash command with, not judged here",
    "CLAUDE_CODE_USE_COWORK_PLUGINS": "user settings read from cowork_settings.json instead "
    "of settings.json, not read here",
}
_CLAUDE_PLACE_NAMES: Final = frozenset(
    {
        "HOME", "CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME", "CLAUDE_CODE_CUSTOM_OAUTH_URL",
        "USER_TYPE", "USE_LOCAL_OAUTH", "USE_STAGING_OAUTH", *_CLAUDE_UNREAD_VARIABLES,
    }
)  # fmt: skip
# Keys of Bun's configuration that run code in the process or load variables from files.
_BUN_CODE_KEYS: Final = frozenset({"preload", "plugins", "env"})
_GEMINI_PLACE_PREFIXES: Final = ("GEMINI_CLI_", "XDG_", "GEMINI_SANDBOX", "SANDBOX", "LD_", "DYLD_")
_GEMINI_PLACE_NAMES: Final = frozenset(
    {
        "HOME",
        "TMPDIR",
        "TMP",
        "TEMP",
        "SEATBELT_PROFILE",
        "BUILD_SANDBOX",
        "NODE_OPTIONS",
        "NODE_PATH",
    }
)

# Where Python's reading of a .env (its white space, its line breaks) and node's dotenv
# (JavaScript's: a line feed alone breaks a line) part: a file holding one is a doubt.
_DOTENV_ODD_CHARACTERS: Final = frozenset("\v\f\x1c\x1d\x1e\x1f\x85\u2028\u2029\ufeff")
_DOTENV_LINE: Final = re.compile(
    r"\s*(?:export\s+)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*=(?P<value>.*)\Z"
)


def _gemini_reading(value: str, pattern: re.Pattern[str], environ: Mapping[str, str]) -> str:
    """``value`` as Gemini CLI expands it with ``pattern`` from ``environ``: a variable set
    (even to nothing) gives its value, else a default gives the default, else the text
    stays as written."""

    def one(match: re.Match[str]) -> str:
        name = match["name"] or match["braced"]
        if name in environ:
            return environ[name]
        default = match.groupdict().get("default")
        return match.group(0) if default is None else default

    return pattern.sub(one, value)


def _gemini_env_path(cwd: str, home: str, ignoring: str | None = None, *, walk: Walk) -> str | None:
    """The one ``.env`` file Gemini CLI loads for ``cwd``, or None. ``ignoring``: the home
    as Gemini CLI compares it, when it ignores the local ``.env`` (``findEnvFile`` then
    passes a plain ``.env`` by in every folder but one whose path is that text). A path
    reached through /proc or /dev/fd is taken for a file (reading it then refuses): what
    is there for the agent is not what is here."""
    for folder in _ancestors(cwd):
        for path in (os.path.join(folder, ".gemini", ".env"), os.path.join(folder, ".env")):
            if walk.present(path) and (
                ignoring is None or path.endswith(os.sep + ".gemini" + os.sep + ".env")
                or folder == ignoring
            ):  # fmt: skip
                return path
    for path in (os.path.join(home, ".gemini", ".env"), os.path.join(home, ".env")):
        if walk.present(path):
            return path
    return None


def _node_dirname(path: str) -> str:
    """``path.posix.dirname(path)`` as node computes it: trailing slashes are no part,
    ``.`` for a name without a folder, the root for one in the root."""
    if not path:
        return "."
    end = -1
    matched_slash = True
    for index in range(len(path) - 1, 0, -1):
        if path[index] == "/":
            if not matched_slash:
                end = index
                break
        else:
            matched_slash = False
    if end == -1:
        return "/" if path.startswith("/") else "."
    if path.startswith("/") and end == 1:
        return "//"
    return path[:end]


def _gemini_defaults_beside(system: str) -> str:
    """The system defaults file Gemini CLI reads when GEMINI_CLI_SYSTEM_DEFAULTS_PATH is
    not set: ``path.join(path.dirname(<system settings>), 'system-defaults.json')``
    (path.join normalises the text)."""
    joined = os.path.normpath(os.path.join(_node_dirname(system), "system-defaults.json"))
    return "/" + joined.lstrip("/") if joined.startswith("/") else joined


# Gemini CLI's sandbox: the keys of its settings object (settingsSchema's
# ``BooleanOrStringOrObject``), the options turning it on (yargs keys: ``s`` is
# ``--sandbox``'s alias, ``--sandbox-image`` an older release's), and why it refuses.
_GEMINI_SANDBOX_KEYS: Final = frozenset(
    {"enabled", "command", "image", "allowedPaths", "networkAccess"}
)
_GEMINI_SANDBOX_OPTIONS: Final = frozenset({"sandbox", "s", "sandbox-image", "sandboxImage"})
_IN_A_SANDBOX: Final = (
    "turns Gemini CLI's sandbox on: gemini and its MCP servers would run in a container "
    "image the gate cannot judge"
)
# The arguments yargs reads as ``sandbox: false`` in every release (a boolean option; a
# string ``"0"`` or ``"false"`` is off too): then the settings' sandbox is not looked at.
_GEMINI_SANDBOX_OFF_ARGUMENTS: Final = frozenset(
    {"--no-sandbox", "--sandbox=false", "--sandbox=0", "-s=false", "-s=0"}
)


def _takes_false(argv: Sequence[str], index: int, key: str) -> bool:
    """Whether the option at ``index`` (from 1) is ``--sandbox`` or a short group ending in
    ``s``, followed by the word ``false``, which yargs gives it whether it reads the option
    as a boolean (it takes a following ``true`` or ``false``) or a string (it takes the
    next word: ``"false"`` is off): ``--sandbox false``, ``-s false``, ``-ys false``."""
    if index >= len(argv) or argv[index] != "false":
        return False
    spelled = argv[index - 1]
    if spelled.startswith("--"):
        return spelled == "--sandbox"
    return key == "s" and spelled.endswith("s") and not _yargs_valued(spelled)


def _gemini_sandbox_off(value: Any) -> bool:
    """Whether a settings value leaves Gemini CLI's sandbox off in every reading
    (``loadSandboxConfig``): absent, false, ``""``, ``"0"`` or ``"false"``, or an object
    of the known keys whose ``enabled`` is false in JavaScript (absent, false, 0, ``""``,
    null). A number 0 is off too (``!sandbox``). Any other shape is taken for on."""
    if isinstance(value, dict):
        return set(value) <= _GEMINI_SANDBOX_KEYS and value.get("enabled") in (None, False, "")
    zero = type(value) in (int, float) and value == 0
    return value is None or value is False or zero or value in ("", "0", "false")


# What yargs (Gemini CLI's argument parser) takes for a group of short options: the
# letters up to the first character that is not a word character, after which the rest
# is a value (``-s=x``, ``-a-b``).
_YARGS_SHORT_GROUP: Final = re.compile(r"-(\w+)", re.ASCII)


def _yargs_valued(arg: str) -> bool:
    """Whether an option argument carries a value of its own (``--X=V``, ``-s=V``,
    ``-s.x``), which yargs gives its last key."""
    if arg.startswith("--"):
        return "=" in arg
    group = _YARGS_SHORT_GROUP.match(arg)
    return group is not None and group.end() < len(arg)


def _yargs_keys(argv: Sequence[str]) -> list[tuple[int, str, str]]:
    """Each option key yargs sets from ``argv`` (up to ``--``, options anywhere before
    it), with its argument's place (from 1) and the option as spelled, without a value:
    a long option's name (``--no-X``, ``--X=V`` and a dotted ``--X.y`` all give X) and
    each letter of a short group (``-ys`` gives y and s). A value that looks like an
    option is one to yargs, whatever option comes before it."""
    keys: list[tuple[int, str, str]] = []
    for index, arg in enumerate(argv, 1):
        if arg == "--":
            break
        if arg.startswith("--"):
            spelled = arg.partition("=")[0]
            name = spelled[2:].split(".")[0]
            keys.append((index, name.removeprefix("no-"), spelled))
        elif (group := _YARGS_SHORT_GROUP.match(arg)) is not None:
            keys += [(index, letter, "-" + letter) for letter in group[1]]
    return keys


# The IDE companion's connection files Gemini CLI reads (the older name without ``-<n>``).
_GEMINI_IDE_FILE: Final = re.compile(r"gemini-ide-server-\d+(?:-\d+)?\.json\Z", re.ASCII)


def _node_tmpdir(environ: Mapping[str, str]) -> str:
    """node's ``os.tmpdir()`` on POSIX: TMPDIR, else TMP, else TEMP, else ``/tmp``, a
    trailing slash dropped."""
    default = "/tmp"  # noqa: S108 (node's default, only looked in here)
    folder = environ.get("TMPDIR") or environ.get("TMP") or environ.get("TEMP") or default
    return folder[:-1] if len(folder) > 1 and folder.endswith("/") else folder


def _owned_by_this_user(path: str) -> bool:
    """Whether the file at ``path`` (links followed) is this process's user's, as Gemini
    CLI requires of an IDE connection file; an error reading it counts as owned, so the
    file is then looked at (and refused) rather than passed over."""
    try:
        return os.stat(path).st_uid == os.getuid()
    except FileNotFoundError:
        return False
    except OSError:
        return True


def _commander_option(arg: str) -> bool:
    """Whether commander takes ``arg`` for an option (its ``maybeOption``): longer than one
    character and starting with ``-``. A lone ``-`` is a value (a path ``./-``)."""
    return len(arg) > 1 and arg.startswith("-")


def _variadic_values(argv: Sequence[str], option: str) -> list[str]:
    """The values commander gives a variadic ``option``: after ``option``, its first value
    whatever it is, then every argument up to the next option; ``option=V`` gives V."""
    return [value for _, value in _variadic_indexed(argv, option)]


def _variadic_indexed(argv: Sequence[str], option: str) -> list[tuple[int, str]]:
    """:func:`_variadic_values` with each value's place in ``argv`` (counted from 1)."""
    values: list[tuple[int, str]] = []
    taking = first = False
    for index, arg in enumerate(argv, 1):
        if first:  # commander gives the option its first value whatever it looks like
            values.append((index, arg))
            first = False
        elif arg == "--":
            break
        elif arg == option:
            taking = first = True
        elif arg.startswith(option + "="):
            values.append((index, arg.partition("=")[2]))
            taking = False
        elif _commander_option(arg):
            taking = False
        elif taking:
            values.append((index, arg))
    return values


def _claude_setting_sources_given(argv: Sequence[str]) -> bool:
    """Whether ``--setting-sources`` is among claude's arguments (up to ``--``), in either
    form: it chooses which of the user's, the project's and the local settings load."""
    for arg in argv:
        if arg == "--":
            return False
        if arg.partition("=")[0] == "--setting-sources":
            return True
    return False


def _claude_settings_values(argv: Sequence[str]) -> list[tuple[str, str]]:
    """Each settings layer claude's arguments give, with the option: ``--settings`` and
    ``--managed-settings`` (the policy tier, from a spawning parent), ``OPTION V`` or
    ``OPTION=V``."""
    values: list[tuple[str, str]] = []
    for index, arg in enumerate(argv):
        if arg == "--":
            break
        name, equals, value = arg.partition("=")
        if name not in ("--settings", "--managed-settings"):
            continue
        if equals:
            values.append((name, value))
        elif index + 1 < len(argv):
            values.append((name, argv[index + 1]))
    return values


# What JavaScript's String.prototype.trim removes: its WhiteSpace (tab, vertical tab, form
# feed, U+FEFF and the space separators) and LineTerminator characters.
_JS_TRIMMED = (
    "\t\n\v\f\r \u00a0\u1680" + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)  # fmt: skip


def _node_path(cwd: str, path: str) -> str:
    """The file or folder node opens for ``path`` given in ``cwd``: path.join and
    path.resolve remove ``dir/..`` from the text (whether ``dir`` is a link, or missing),
    and the kernel takes a relative path from the physical working directory."""
    base = "" if os.path.isabs(path) else os.path.realpath(cwd)
    return os.path.normpath(os.path.join(base, os.path.normpath(path)))


def _climbs_out_of_a_link(cwd: str, path: str) -> bool:
    """Whether ``path`` (taken from ``cwd``) names another folder once its ``..`` parts are
    resolved by the kernel (after any link before them) than once its text is normalised."""
    joined = os.path.join(cwd, path)
    if ".." not in joined.split(os.sep):
        return False
    return os.path.realpath(joined) != os.path.realpath(os.path.normpath(joined))


def _ancestors(folder: str) -> list[str]:
    """``folder`` and every folder above it, nearest first."""
    out = [folder]
    while (parent := os.path.dirname(out[-1])) != out[-1]:
        out.append(parent)
    return out


def _key(path: str, key: str) -> str:
    return f"{path}.{key}" if _NAME.match(key) else f"{path}[{json.dumps(key)}]"


# os.path.join, its answers kept (a pure function of its text): the paths of the files and
# folders a client reads are the same few dozen at every spawn, and joining them anew was
# 10 us of a claude reading's 60. Only for the folders looked in and the names looked for
# (what a folder lists, or an argument names, is joined afresh).
_joined = functools.lru_cache(maxsize=256)(os.path.join)


# The working directory and the home as a reading takes them, kept as _joined is (the same
# at every spawn).
_normal = functools.lru_cache(maxsize=64)(os.path.normpath)


@functools.lru_cache(maxsize=64)
def _normal_join(folder: str, path: str) -> str:
    return os.path.normpath(os.path.join(folder, path))


@functools.lru_cache(maxsize=64)
def _above(folder: str) -> tuple[str, ...]:
    """``_ancestors(folder)``, kept as _joined is (the working directory's, at every spawn)."""
    return tuple(_ancestors(folder))


def _not_text_in(cwd: str, argv: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """The first of the working directory, an environment variable's name or value, or an
    argument that holds bytes that are not UTF-8 (named), or None."""
    if not is_text(cwd):
        return "the working directory"
    for name, value in environ.items():
        # (isascii first: nearly every name and value is, and it costs no encoding)
        if not (name.isascii() or is_text(name)):
            return f"the name of the environment variable {name!r}"
        if not (value.isascii() or is_text(value)):
            return f"the environment variable {name}"
    for number, arg in enumerate(argv, 1):
        if not is_text(arg):
            return f"argument {number} ({arg!r})"
    return None


class _Reader:
    def __init__(
        self,
        client: str,
        cwd: str,
        environ: Mapping[str, str],
        *,
        wrapped: bool = False,
        without: frozenset[str] = frozenset(),
    ) -> None:
        self.client = client
        # The configuration files the client may not load (claude's settings of a parent
        # folder, ...) whose ``env`` this reading leaves out, and every such file whose
        # ``env`` was found (claude's; gemini's choice to ignore its local .env too): the
        # servers are read again without each set of them, so that a source the client
        # skips cannot re-route what it does start.
        self.without = without
        self.uncertain_env: list[str] = []
        # The arguments are a wrapper's (npx, node, env), the agent's own among them.
        self.wrapped = wrapped
        self.cwd = _normal(cwd)
        # The working directory and every folder above it, nearest first (looked in for
        # several kinds of file).
        self.above = _above(self.cwd)
        self.environ = environ
        # Variables the client adds to its own environment before it starts its servers
        # (claude's settings files, gemini's .env), in order; a server's own env wins over
        # them. ``expanding``: the variables a client expands references from.
        self.inherited: dict[str, str] = {}
        self.expanding: Mapping[str, str] = environ
        # While gemini's settings files are read: the environment Gemini CLI expands them
        # from, which current releases read before they load the .env (earlier ones after).
        self.settings_expanding: Mapping[str, str] | None = None
        # Whether GEMINI_SANDBOX or an argument decided gemini's sandbox (off), so that
        # its settings' sandbox is not looked at.
        self.gemini_sandbox_decided = False
        self.home = home_of(environ, self.cwd)
        self.found: list[Declaration] = []
        # The environments codex may run with, its .env files loaded (codex only; read,
        # never changed: the environment itself until codex's are found, not a copy).
        self.codex_environments: Sequence[Mapping[str, str]] = (environ,)
        # The folders codex is told with -C/--cd, as it resolves them (codex only).
        self.codex_folders: list[str] = []
        # What codex's shell_environment_policy.set gives the commands of its shell tool,
        # from every layer and -c override (codex only).
        self.codex_shell_set: dict[str, str] = {}
        # What the working directory's .env files give claude's own process, and the files
        # that give it (claude only).
        self.claude_dotenv: dict[str, str] = {}
        self.claude_dotenv_files: list[str] = []
        # A gemini settings layer that configures its environment redaction for servers
        # (security.environmentVariableRedaction): which variables then reach them is not
        # modelled, so each server is judged with the fewest as well (gemini only).
        self.gemini_redacts = False
        self.doubts: list[str] = []
        self.files: list[str] = []
        self.projects: list[str] = []
        # The folders whose claude project entry a linked git worktree shares (claude only).
        self.shared_roots: set[str] | None = None
        # Whether each of the client's own folders (``.claude``) was found missing, by one
        # lstat, this reading: nothing in it is then opened or listed.
        self.missing_folders: dict[str, bool] = {}
        # This reading's path lookups: a file or folder reached through /proc or /dev/fd is
        # a doubt (the plain folders on the way are remembered, not looked up again).
        self.walk = Walk()

    # ------------------------------------------------------------------ reading files

    def _read_config(
        self, path: str, *, within: str | None, what: str, max_bytes: int = MAX_CONFIG_BYTES
    ) -> tuple[bytes, str] | None:
        """read_config, with this reading's lookups (they remember the plain folders)."""
        return read_config(path, within=within, what=what, max_bytes=max_bytes, walk=self.walk)

    def _load(self, path: str, within: str | None, fmt: str) -> Any:
        """The parsed file, or None when absent; a doubt is recorded, not raised."""
        try:
            got = self._read_config(path, within=within, what=f"{self.client} MCP configuration")
            if got is None:
                return None
            self.files.append(path)
            if fmt == "toml":
                return parse_toml(got[0], path)
            return parse_json(got[0], path, comments=fmt == "jsonc")
        except ConfigDoubt as exc:
            self.doubts.append(str(exc))
            return None

    def _doubt(self, where: str, at: str, problem: str) -> None:
        self.doubts.append(f"{where}: {at}: {problem}")

    def _missing(self, folder: str) -> bool:
        """Whether nothing at all is at ``folder`` (not even a dangling link): then every
        file looked for in it is absent, and one lstat stands for opening each (most hosts
        have no ``.claude`` folder in most folders above the working directory). Anything
        else there (a folder, a file, a link, an error) is not missing: its files are read
        as ever, and say what is wrong."""
        missing = self.missing_folders.get(folder)
        if missing is None:
            try:
                os.lstat(folder)
                missing = False
            except FileNotFoundError:
                missing = True
            except (OSError, ValueError):
                missing = False
            self.missing_folders[folder] = missing
        return missing

    # ------------------------------------------------------------------ Claude Code

    def claude(self, argv: Sequence[str]) -> None:
        # (--strict-mcp-config removes nothing here: it may be another option's value)
        self._node_names_are_text(argv)
        self._claude_spellings()
        # (loaded as the process starts: the settings' env, applied later, wins over them)
        self._claude_env_files()
        if self.claude_dotenv:
            # (Bun puts them in claude's own process.env, where a server's ${X} is read)
            self.expanding = {**self.claude_dotenv, **self.environ}
        self._claude_bun_configuration()
        global_files = [
            (path, document)
            for path, within in self._claude_global_files()
            if (document := self._load(path, within, "json")) is not None
        ]
        for path, document in global_files:
            self._claude_global_env(document, path)  # (before the settings', which win)
        self._claude_settings_env(argv)
        self._claude_sources_not_read(argv)
        self._claude_agents(argv, folders=self._claude_config_dirs())
        for index, value in self._claude_argv(argv):
            where, document = self._claude_mcp_config(value, f"--mcp-config argument {index}")
            if document is not None:
                self._claude_document(document, where)
        managed = self._load(CLAUDE_MANAGED, None, "json")
        if managed is not None:
            self._claude_document(managed, CLAUDE_MANAGED)
        for path, document in global_files:
            self._claude_user(document, path)
        for folder in self.above:
            path = _joined(folder, ".mcp.json")
            document = self._load(path, folder, "json")
            if document is not None:
                self._claude_document(document, path)

    def _claude_global_files(self) -> list[tuple[str, str]]:
        """Every file Claude Code may take for its global configuration, with the folder it
        must stay in. ``getGlobalClaudeFile`` takes the legacy ``.config.json`` of its config
        folder whenever it exists, else ``.claude<suffix>.json`` in CLAUDE_CONFIG_DIR or the
        home, the suffix chosen by CLAUDE_CODE_CUSTOM_OAUTH_URL (``-custom-oauth``) or, for
        Anthropic's own builds, USER_TYPE with USE_LOCAL_OAUTH or USE_STAGING_OAUTH: all are
        read, and the home's ``.claude.json`` (which releases before CLAUDE_CONFIG_DIR read)
        too, rather than telling which one this release and these variables choose."""
        files = [
            (_joined(folder, ".config.json"), inside)
            for folder, inside in self._claude_config_dirs()
            if not self._missing(folder)
        ]
        # (a config folder of its own, CLAUDE_CONFIG_DIR's or XDG_CONFIG_HOME's, may hold
        # the .claude<suffix>.json files too)
        folders = [self.home] + [inside for _, inside in self._claude_config_dirs()]
        for folder in dict.fromkeys(folders):
            for suffix in _CLAUDE_GLOBAL_SUFFIXES:
                files.append((_joined(folder, f".claude{suffix}.json"), folder))
        return files

    def _claude_global_file(self) -> str | None:
        """The global file every release loads when it is the only one there: the config
        folder's (CLAUDE_CONFIG_DIR's, else the home's) ``.claude.json``; None when a legacy
        ``.config.json`` may be taken instead."""
        config_dir = self.environ.get("CLAUDE_CONFIG_DIR")
        folder = _node_path(self.cwd, config_dir) if config_dir else self.home
        legacy = [_joined(f, ".config.json") for f, _ in self._claude_config_dirs()]
        if any(os.path.lexists(path) for path in legacy):
            return None
        return _joined(folder, ".claude.json")

    def _node_names_are_text(self, argv: Sequence[str]) -> None:
        """Node (Claude Code, Gemini CLI) reads its working directory, every argument and
        every environment variable as UTF-8, a byte that is not UTF-8 becoming U+FFFD, and
        passes them on as it read them: the files it opens, the servers it finds on PATH
        and the environment those servers get are another name than the one given, which
        cannot be read here in its place. Raises ConfigDoubt."""
        where = _not_text_in(self.cwd, argv, self.environ)
        if where is not None:
            raise ConfigDoubt(
                f"{self.client}: {where} holds bytes that are not UTF-8, which node reads as "
                "U+FFFD and passes on so: another name than the one given"
            )

    def _claude_spellings(self) -> None:
        """Claude Code normalises its working directory and its config folder to Unicode NFC
        (``.normalize('NFC')``): a name otherwise spelled names another folder than the
        one it reads; and it keeps an empty CLAUDE_CONFIG_DIR. Raises ConfigDoubt."""
        for name, value in (
            ("the working directory", self.cwd),
            ("HOME", self.environ.get("HOME")),
            ("CLAUDE_CONFIG_DIR", self.environ.get("CLAUDE_CONFIG_DIR")),
            ("XDG_CONFIG_HOME", self.environ.get("XDG_CONFIG_HOME")),
        ):
            if value and not value.isascii():
                if any(unicodedata.category(c) == "Cn" for c in value):
                    # (newer Unicode may compose them: node's tables may be newer than these)
                    raise ConfigDoubt(
                        f"claude: {name} holds a character this Python's Unicode tables "
                        f"({unicodedata.unidata_version}) do not know: which folder claude "
                        "reads under its NFC spelling is not known"
                    )
                if unicodedata.normalize("NFC", value) != value:
                    raise ConfigDoubt(
                        f"claude: {name} is not spelled in Unicode NFC, and claude reads its "
                        "files under the NFC spelling, which is another folder here"
                    )
        config_dir = self.environ.get("CLAUDE_CONFIG_DIR")
        if config_dir == "":
            # (``CLAUDE_CONFIG_DIR ?? ~/.claude`` keeps it: the working directory)
            raise ConfigDoubt(
                "claude: CLAUDE_CONFIG_DIR is set but empty: claude would take the working "
                "directory for its config folder"
            )

    def _claude_mcp_config(self, value: str, inline: str) -> tuple[str, Any | None]:
        """An ``--mcp-config`` value read as Claude Code reads it: trimmed as JavaScript
        trims, JSON when it is an object (or starts as one), and else a file through
        path.resolve: ``..`` removed from the text after the physical working directory."""
        # (every argument is text here: _node_names_are_text refused any other first)
        value = value.strip(_JS_TRIMMED)
        if not value:
            return inline, None  # (claude skips an empty value)
        if value.startswith("{"):
            return self._json_argument(value, inline, None)
        where = _node_path(self.cwd, value)
        return where, self._load(where, None, "json")

    def _claude_config_dirs(self) -> list[tuple[str, str]]:
        """Every folder a Claude Code release takes for its config folder, with the folder
        its files must stay in: CLAUDE_CONFIG_DIR, else ``~/.claude`` (a home file may be a
        link anywhere in the home, as dotfile managers make them); and, when XDG_CONFIG_HOME
        is set, ``$XDG_CONFIG_HOME/claude``, which releases of mid-2025 (1.0.28 to about
        1.0.4x) took instead whenever it was set (read whichever this release is)."""
        config_dir = self.environ.get("CLAUDE_CONFIG_DIR")
        if config_dir:
            folder = _node_path(self.cwd, config_dir)
            found = [(folder, folder)]
        else:
            found = [(_joined(self.home, ".claude"), self.home)]
        xdg = self.environ.get("XDG_CONFIG_HOME")
        if xdg:
            folder = _joined(_node_path(self.cwd, xdg), "claude")
            found.append((folder, folder))
        return list(dict.fromkeys(found))

    def _claude_sources_not_read(self, argv: Sequence[str]) -> None:
        """Claude Code's options and variables that may load servers, plugins or settings
        from what is not read here (a new worktree, another project folder, plugins, its
        standard input, and any session option not known here: claude_options, which finds
        claude's own arguments among a wrapper's): each one present is a doubt."""
        for name, problem in _CLAUDE_UNREAD_VARIABLES.items():
            if self.environ.get(name):
                self._doubt("the environment", name, problem)
        found = wrapped_doubtful_options(argv, self.cwd) if self.wrapped else doubtful_options(argv)
        for index, name, problem in found:
            self._doubt(f"argument {index}", name, problem)

    def _claude_agents(self, argv: Sequence[str], *, folders: Sequence[tuple[str, str]]) -> None:
        """Claude Code starts the servers an agent definition declares (``mcpServers`` in
        an agent file's front matter, or in ``--agents`` JSON): none is read here, so each
        one present is a doubt."""
        for index, arg in enumerate(argv, 1):
            if arg == "--":
                break
            name, equals, value = arg.partition("=")
            if not equals and index < len(argv):
                value = argv[index]
            if name == "--agents" and self._agents_name_servers(value):
                self._doubt(f"argument {index}", name, "agents declaring MCP servers, not read")
        found = [_joined(folder, "agents") for folder, _ in folders if not self._missing(folder)]
        found += [
            _joined(claude, "agents")
            for claude in (_joined(d, ".claude") for d in self.above)
            if not self._missing(claude)
        ]
        found += [
            os.path.join(os.path.normpath(os.path.join(self.cwd, added)), ".claude", "agents")
            for added in _variadic_values(argv, "--add-dir")
        ]
        self._agent_definitions(found, _AGENT_SERVERS, "claude agent file")

    def _agents_name_servers(self, value: str) -> bool:
        """Whether an ``--agents`` value names MCP servers: JSON text, or (a value that is
        not an object, which Claude Code then opens) a file's text; a file that cannot be
        read exactly counts as naming them."""
        text = value.strip(_JS_TRIMMED)
        if not text or text.startswith("{"):
            return _names_servers(value)
        try:
            got = self._read_config(_node_path(self.cwd, text), within=None,
                              what="claude agents file", max_bytes=_AGENT_FILE_BYTES)  # fmt: skip
        except ConfigDoubt:
            return True
        if got is None:
            return False  # (no such file: claude stops)
        return not _utf8_text(got[0]) or _names_servers(got[0].decode("utf-8"))

    def _agent_definitions(self, folders: Sequence[str], key: str, what: str) -> None:
        """Each Markdown agent file in ``folders`` and the folders below them whose front
        matter names ``key``, as written or through escapes, is a doubt: the servers it
        declares are not read here. So is one that starts with a byte order mark, which a
        front-matter reader may drop (gray-matter does) or decode by (UTF-16, UTF-32) and
        then find ``key``, and one that is not UTF-8 or holds a NUL (UTF-16 without a mark)."""
        budget = _AGENT_BYTES
        for agents in dict.fromkeys(folders):
            for path in self._agent_files(agents):
                if budget <= 0:
                    self._doubt(agents, "(the folder)", f"agent files over {_AGENT_BYTES} bytes")
                    break
                try:
                    got = self._read_config(
                        path, within=None, what=what, max_bytes=_AGENT_FILE_BYTES
                    )
                except ConfigDoubt as exc:
                    self.doubts.append(str(exc))
                    continue
                data = b"" if got is None else got[0]
                budget -= len(data)
                if data.startswith(_BYTE_ORDER_MARKS):
                    self._doubt(
                        path, "(the file)",
                        "starts with a byte order mark: whether its front matter is read is "
                        "not known here",
                    )  # fmt: skip
                    continue
                if not _utf8_text(data):
                    self._doubt(
                        path, "(the file)",
                        "not UTF-8 text without NULs: whether its front matter is read is not "
                        "known here",
                    )  # fmt: skip
                    continue
                if _names_servers(_front_matter(data).decode("utf-8"), key):
                    self._doubt(path, key, "an agent's own MCP servers, not read here")

    def _agent_files(self, agents: str, suffix: str = ".md") -> list[str]:
        """Every file named ``*<suffix>`` (Markdown unless told) in ``agents`` and the
        folders below it (Claude Code collects them all), sorted. A linked folder below it,
        or more than _AGENT_ENTRIES entries, is a doubt: what it holds is not read."""
        found: list[str] = []
        pending, seen = [agents], 0
        while pending:
            folder = pending.pop()
            for name in self._listed(folder):
                seen += 1
                if seen > _AGENT_ENTRIES:
                    self._doubt(agents, "(the folder)", f"over {_AGENT_ENTRIES} entries to look at")
                    return sorted(found)
                path = os.path.join(folder, name)
                if len(os.fsencode(path)) >= _PATH_MAX:
                    self._doubt(path, "(the path)", "too long to open")
                elif os.path.islink(path) and (os.path.isdir(path) or self.walk.reaches(path, "/")):
                    self._doubt(path, "(the folder)", "a linked folder of agents, not read")
                elif os.path.isdir(path):
                    pending.append(path)
                elif name.lower().endswith(suffix):
                    found.append(path)
        return sorted(found)

    def _claude_env_files(self) -> None:
        """The working directory's ``.env`` files, which Claude Code loads into its own
        process (its native build is a Bun executable, which loads them unless built not
        to, ``NODE_ENV`` choosing among them; releases have been reported loading ``.env``
        into their bash tool's environment). The files of the mode NODE_ENV selects, in
        Bun's order, the first to set a variable keeping it; then the other modes' files,
        which no value of them overrides, as a group claude may not load (the servers are
        judged without it too). A variable the environment already holds keeps its value;
        one deciding where claude reads its configuration or what it runs is a doubt."""
        taken: set[str] = set()
        loaded = _bun_env_files(self.environ.get("NODE_ENV"))
        others = [name for name in _CLAUDE_ENV_FILES if name not in loaded]
        for name in (*loaded, *others):
            group = _CLAUDE_ENV_FILES_GROUP if name in loaded else _CLAUDE_OTHER_MODES_GROUP
            path = os.path.join(self.cwd, name)
            if os.path.isdir(path):
                continue  # (a virtual environment called .env: no file Bun could load)
            added = self._dotenv(path, "claude environment file", node=False)
            if not added:
                continue
            if "NODE_ENV" in added:
                # (which files Bun loads is told by NODE_ENV as the process starts)
                self._doubt(path, "NODE_ENV", "a mode for Bun's .env files, not read here")
                continue
            # (the first file to set a variable keeps it)
            added = {n: v for n, v in added.items() if n not in taken}
            taken.update(added)
            if not added:
                continue
            expanded = sorted(n for n, v in added.items() if "$" in v or "#" in v)
            if expanded:
                # (Bun puts other variables' values in place of $NAME and ${NAME}, quoted
                # or not, and takes a # for a comment where this reading does not: what
                # such a value comes to is not worked out here)
                self._doubt(
                    path, expanded[0],
                    "a value holding $ or #, which Bun expands or cuts as it loads the file: "
                    "not read here",
                )  # fmt: skip
                continue
            added = {n: v for n, v in added.items() if n not in self.environ}
            # (not certain: claude's node build, and a Bun build made not to, load none; a
            # Bun build loads them together, NODE_ENV choosing which)
            if added and self._claude_own_variables(added, path, certain=False, group=group):
                self.claude_dotenv.update(added)
                self.claude_dotenv_files.append(name)

    def _claude_own_variables(
        self, given: Mapping[str, str], path: str, *, certain: bool = True, group: str = ""
    ) -> bool:
        """Take ``given`` (what a file makes claude add to its own process) into the
        variables claude's servers and commands inherit; False, with a doubt, when one of
        them decides where claude reads its configuration (it is read here where the
        environment says, not where they would move it). A file claude may not load
        (``certain`` false) is noted, and left out by a reading ``without`` it (or without
        its ``group``: files loaded all together or none)."""
        placing = sorted(n for n in given if n in _CLAUDE_PLACE_NAMES)
        if placing:
            self._doubt(
                path, placing[0],
                "sets a variable deciding where Claude Code reads its configuration or what "
                "it runs, none of which the gate would then have judged",
            )  # fmt: skip
            return False
        if not certain and given:
            self.uncertain_env.append(group or path)
            if (group or path) in self.without:
                return True
        self.inherited.update(given)
        return True

    def _claude_bun_configuration(self) -> None:
        """Bun's configuration, which claude's native build (a Bun executable) reads unless
        built not to: ``bunfig.toml`` in the working directory and the folders above it,
        ``~/.bunfig.toml`` and ``$XDG_CONFIG_HOME/.bunfig.toml``. A ``preload`` or
        ``plugins`` in it runs code in claude's process before claude's own, and an
        ``[env]`` table chooses other files to load variables from: each is a doubt."""
        files = [(os.path.join(folder, "bunfig.toml"), folder) for folder in self.above]
        files.append((os.path.join(self.home, ".bunfig.toml"), self.home))
        xdg = self.environ.get("XDG_CONFIG_HOME")
        if xdg:
            folder = _node_path(self.cwd, xdg)
            files.append((os.path.join(folder, ".bunfig.toml"), folder))
        for path, within in dict.fromkeys(files):
            document = self._load(path, within, "toml")
            if document is None:
                continue
            tables = [("", document)] + [
                (f"{key}.", value) for key, value in document.items() if isinstance(value, dict)
            ]
            for prefix, table in tables:
                for key in sorted(_BUN_CODE_KEYS & table.keys()):
                    if prefix and key == "env":
                        continue  # (a table's own env, not Bun's [env])
                    self._doubt(
                        path, prefix + key,
                        "Bun's configuration, which a Bun-built claude reads: it runs code in "
                        "claude's process or loads its variables from other files, not judged "
                        "here",
                    )  # fmt: skip

    def _claude_settings_env(self, argv: Sequence[str]) -> None:
        """The ``env`` of Claude Code's settings files, which it applies to its own process
        and so to every server it starts: the user's, every project's ``.claude/settings``
        and ``settings.local`` from the farthest folder above down to the working directory,
        each ``--settings`` value (a file, or inline JSON), and the managed file; a later
        file's value wins."""
        # (remote-settings.json: the config folder's cached copy of the organisation's
        # settings, which releases apply over the managed file)
        config_dirs = self._claude_config_dirs()
        files: list[tuple[str, str | None]] = [
            (_joined(folder, "settings.json"), inside)
            for folder, inside in config_dirs
            if not self._missing(folder)
        ]
        # The organisation's settings (remote-settings.json) are the policy tier, over every
        # other file: claude then takes the managed file's for nothing.
        remote = [
            (_joined(folder, "remote-settings.json"), inside)
            for folder, inside in config_dirs
            if not self._missing(folder)
        ]
        # What every release loads: the config folder's settings (not XDG_CONFIG_HOME's,
        # which only some took, nor the cached remote copy), the working directory's
        # project settings (not a parent folder's) and the managed files. Any other file's
        # env may not be applied: the servers are judged without it too.
        certain = {_joined(config_dirs[0][0], "settings.json")}
        for above in reversed(self.above):
            claude = _joined(above, ".claude")
            if not self._missing(claude):
                files += [(_joined(claude, name), above)
                          for name in ("settings.json", "settings.local.json")]  # fmt: skip
        certain |= {
            _joined(self.cwd, ".claude", n) for n in ("settings.json", "settings.local.json")
        }
        # (each value trimmed as JavaScript trims it, as claude does before it tells inline
        # JSON from a file; an empty one is skipped)
        values = [(o, v.strip(_JS_TRIMMED)) for o, v in _claude_settings_values(argv)]
        values = [(option, value) for option, value in values if value]
        given = dict(values[::-1])  # (value -> its option)
        files += [(value, None) for _, value in values]
        files.append((CLAUDE_MANAGED_SETTINGS, None))
        files += [(path, None) for path in self._claude_managed_drop_ins()]
        if not any(os.path.lexists(path) for path, _ in remote):
            certain |= {CLAUDE_MANAGED_SETTINGS, *self._claude_managed_drop_ins()}
        files += remote
        if _claude_setting_sources_given(argv):
            # (--setting-sources leaves out the user's, the project's or the local files:
            # none of them is certain, the servers are judged without each too)
            certain &= {CLAUDE_MANAGED_SETTINGS, *self._claude_managed_drop_ins()}
        for path, within in dict.fromkeys(files):
            inline = f"{given.get(path, '--settings')} argument"
            where, document = self._json_argument(path, inline, within)
            if document is None:
                continue
            env = document.get("env") if isinstance(document, dict) else None
            plugins = document.get("enabledPlugins") if isinstance(document, dict) else None
            if isinstance(plugins, dict):
                for plugin in [k for k, on in plugins.items() if on is not False]:
                    self._doubt(
                        where, _key("enabledPlugins", plugin),
                        "an enabled plugin, whose MCP servers are not read here",
                    )  # fmt: skip
            elif plugins is not None and not isinstance(plugins, dict):
                self._doubt(where, "enabledPlugins", "not an object")
            if not isinstance(document, dict):
                self._doubt(where, "(the document)", "not a JSON object")
            elif env is None:
                continue
            elif type(env) is not dict or not all(type(v) is str for v in env.values()):
                self._doubt(where, "env", "not an object of strings")
            else:
                # (a --settings value may be another option's: never certain)
                self._claude_own_variables(env, where, certain=path in certain and path == where)

    def _claude_managed_drop_ins(self) -> list[str]:
        """The ``.json`` files of ``managed-settings.d`` beside the managed settings file,
        in name order: Claude Code merges each into its policy settings."""
        folder = CLAUDE_MANAGED_SETTINGS_DIR
        return [os.path.join(folder, name) for name in self._listed(folder)
                if name.endswith(".json")]  # fmt: skip

    def _claude_argv(self, argv: Sequence[str]) -> list[tuple[int, str]]:
        """The ``--mcp-config`` values (one flag takes every value up to the next option).
        ``--strict-mcp-config`` is not read: it may be the value of another option
        (commander gives an option its next argument whatever it looks like), and which
        options take one is not known here, so every source is read whatever it says."""
        return _variadic_indexed(argv, "--mcp-config")

    def _claude_global_env(self, document: Any, path: str) -> None:
        """The ``env`` of a global file (``~/.claude.json``), which claude copies into its own
        process before its settings files' (whose values win over it). Which global file a
        release takes is not told here: only the config folder's ``.claude.json``, with no
        legacy ``.config.json`` beside it, is certainly loaded."""
        env = document.get("env") if isinstance(document, dict) else None
        if env is None:
            return
        if type(env) is not dict or not all(type(v) is str for v in env.values()):
            self._doubt(path, "env", "not an object of strings")
        else:
            self._claude_own_variables(env, path, certain=path == self._claude_global_file())

    def _claude_user(self, document: Any, path: str) -> None:
        """``~/.claude.json``: its own servers, and those of every project entry for the
        working directory or a folder above it (by the path given and the real one)."""
        if not isinstance(document, dict):
            raise ConfigDoubt(f"{path}: not a JSON object")
        if "mcpServers" in document:
            self._claude_servers(document["mcpServers"], path, "mcpServers")
        projects = document.get("projects")
        if projects is None:
            return
        if not isinstance(projects, dict):
            self._doubt(path, "projects", "not an object")
            return
        here = set(self.above) | set(_ancestors(os.path.realpath(self.cwd)))
        logical = {**self.environ, **self.inherited}.get("PWD")
        if (
            logical and os.path.isabs(logical)
            and _folder_identity(logical) == _folder_identity(self.cwd)
        ):  # fmt: skip
            # The shell's spelling of the same folder, which a program may take for its
            # working directory: its letters make keys (backslashes made slashes) no
            # folder's identity leads to.
            here |= set(_ancestors(logical))
        for variable in _GIT_REPOSITORY_VARIABLES:
            if projects and variable in {**self.environ, **self.inherited}:
                self._doubt(
                    path, "projects",
                    f"{variable} is set: which repository's project entry Claude Code takes "
                    "is not known here",
                )  # fmt: skip
        if projects:
            if self.shared_roots is None:  # (once: a doubt is recorded once)
                self.shared_roots = self._shared_project_roots()
            here |= self.shared_roots
            # Claude Code turns every backslash of the folder into a slash for its key, on
            # Linux too (normalizePathForConfigKey): `a\b` is looked up as `a/b`.
            here |= {
                above for folder in list(here) if "\\" in folder
                for above in _ancestors(folder.replace("\\", "/"))
            }  # fmt: skip
        # ... after node's path.normalize, by its letters: `x\/y` is the key `x//y`, and
        # `q/..\z` the key `q/../z`, looked up as spelled.
        keyed = {
            resolved_as_node_does(folder).replace("\\", "/") for folder in here if "\\" in folder
        }
        # (a key spelled through a link names the same folder: claude writes one for each
        # spelling it was started under; told by the folder's identity, one stat a key)
        identities: set[tuple[int, int]] | None = None
        for key, project in projects.items():
            if not key.startswith("/"):
                continue
            if key not in keyed and os.path.normpath(key) not in here:
                if identities is None:
                    identities = {i for i in map(_folder_identity, here) if i is not None}
                if _folder_identity(key) not in identities:
                    continue
            at = f"projects[{json.dumps(key)}]"
            if not isinstance(project, dict):
                self._doubt(path, at, "not an object")
            elif "mcpServers" in project:
                self.projects.append(os.path.normpath(key))
                self._claude_servers(project["mcpServers"], path, at + ".mcpServers")

    def _shared_project_roots(self) -> set[str]:
        """The repository root (and the folders above it) whose project entry Claude Code
        takes in a linked git worktree, which shares it with every worktree of that
        repository (since 2.1.63): when the nearest ``.git`` up from the working directory
        is a file, the folder holding git's common folder, as given and with links
        resolved."""
        roots: set[str] = set()
        for start in dict.fromkeys([self.cwd, os.path.realpath(self.cwd)]):
            for folder in _ancestors(start):
                dot_git = os.path.join(folder, ".git")
                if not os.path.lexists(dot_git):
                    continue
                common = None if os.path.isdir(dot_git) else self._git_common_dir(dot_git)
                if common is not None:
                    # git walks the path through its links (``lnk/..`` is the link target's
                    # parent); a reader of the text would drop ``lnk/..``: both are read.
                    for found in dict.fromkeys(
                        (os.path.realpath(common), os.path.normpath(common))
                    ):
                        root = os.path.dirname(found)
                        roots |= set(_ancestors(root)) | set(_ancestors(os.path.realpath(root)))
                break
        return roots

    def _git_common_dir(self, dot_git: str) -> str | None:
        """Git's common folder for a ``.git`` file (``gitdir: <path>``, relative to its
        folder; then that folder's ``commondir``, relative to it, else the gitdir itself),
        read as git reads them, or None (a doubt recorded) for one not read exactly."""
        try:
            got = self._read_config(dot_git, within=None, what="git file", max_bytes=_PATH_MAX * 2)
            text = None if got is None else got[0].decode("utf-8").rstrip("\r\n")
            if text is None or not text.startswith("gitdir: ") or "\n" in text:
                raise ConfigDoubt(f"{dot_git}: not one line naming a gitdir")
            gitdir = os.path.join(os.path.dirname(dot_git), text[len("gitdir: ") :])
            got = self._read_config(
                os.path.join(gitdir, "commondir"), within=None, what="git commondir file",
                max_bytes=_PATH_MAX * 2,
            )  # fmt: skip
            common = None if got is None else got[0].decode("utf-8").rstrip("\r\n")
            if common:
                # (git follows it in its own process: a path through /proc/self is its own)
                refuse_process_paths(os.path.join(gitdir, common), "git common folder", self.walk)
        except (ConfigDoubt, UnicodeDecodeError) as exc:
            self._doubt(
                dot_git, "(the file)",
                f"{exc}: which repository's project entry Claude Code takes is not known here",
            )  # fmt: skip
            return None
        # (not normalized by its letters: the caller resolves it both ways)
        return gitdir if not common else os.path.join(gitdir, common)

    def _claude_document(self, document: Any, where: str) -> None:
        """A ``.mcp.json``-shaped document: ``{"mcpServers": {...}}`` and nothing else."""
        if not isinstance(document, dict):
            raise ConfigDoubt(f"{where}: not a JSON object")
        for key in document:
            if key != "mcpServers":
                self._doubt(where, _key("", key).lstrip("."), "not a key of an MCP configuration")
        if "mcpServers" in document:
            self._claude_servers(document["mcpServers"], where, "mcpServers")

    _CLAUDE_STDIO: Final = frozenset({"type", "command", "args", "env", "timeout", "alwaysLoad"})
    _CLAUDE_REMOTE: Final = frozenset({"type", "url", "headers", "timeout", "alwaysLoad", "oauth"})
    _CLAUDE_SDK: Final = frozenset({"type", "name"})

    def _claude_servers(self, servers: Any, where: str, at: str) -> None:
        if not isinstance(servers, dict):
            self._doubt(where, at, "not an object")
            return
        for name, entry in servers.items():
            here = _key(at, name)
            if not isinstance(entry, dict):
                self._doubt(where, here, "not an object")
                continue
            kind = entry.get("type", "stdio")
            if "headersHelper" in entry:
                self._doubt(where, here + ".headersHelper", "runs a command that is not judged")
            elif kind == "stdio":
                if "url" in entry:
                    self._doubt(where, here, 'has a "url" but no remote "type"')
                elif self._known(entry, self._CLAUDE_STDIO, where, here):
                    self._stdio(name, entry, where, here, _CLAUDE_EXPANSION)
            elif kind in ("http", "sse", "ws"):
                if self._known(entry, self._CLAUDE_REMOTE, where, here):
                    self._remote(name, entry.get("url"), (where,), here)
            elif kind == "sdk":
                # An Agent SDK host's own in-process server: claude starts nothing for it,
                # its calls go back to the host (recorded as remote, as a URL's are).
                if type(entry.get("name")) is not str:
                    self._doubt(where, here + ".name", "not a string")
                elif self._known(entry, self._CLAUDE_SDK, where, here):
                    self._remote(name, None, (where,), here)
            else:
                self._doubt(where, here + ".type", f"unknown transport {kind!r}")

    # ------------------------------------------------------------------ Codex

    _CODEX_KEYS: Final = frozenset(
        {
            "command", "args", "env", "env_vars", "cwd", "url", "bearer_token_env_var",
            "http_headers", "env_http_headers", "enabled", "required",
            "supports_parallel_tool_calls", "experimental_environment", "startup_timeout_sec",
            "startup_timeout_ms", "tool_timeout_sec", "default_tools_approval_mode",
            "enabled_tools", "disabled_tools", "scopes", "oauth", "oauth_resource", "tools",
            "name",
        }
    )  # fmt: skip

    def codex(self, argv: Sequence[str]) -> None:
        if self.environ.get("HOME") == "" and not self.environ.get("CODEX_HOME"):
            # Rust's home lookups differ on an empty HOME (as given, or the user's entry).
            raise ConfigDoubt("codex: HOME is set but empty: which home codex reads is not known")
        if self.environ.get("CODEX_MANAGED_CONFIG_PATH"):
            raise ConfigDoubt(
                "codex: CODEX_MANAGED_CONFIG_PATH names a managed configuration layer (read by "
                "releases up to 0.78, over every other layer), not read here"
            )
        overrides, profiles, told = self._codex_argv(argv)
        told = self._codex_cd_folders(told)
        folders = [os.path.normpath(os.path.join(self.cwd, value)) for value in told]
        # Codex takes a relative -C from its real working directory, the kernel resolving
        # each `..` (``current_dir().push``): that is the session's folder.
        self.codex_folders = [os.path.realpath(os.path.join(self.cwd, value)) for value in told]
        # (the folder codex works in is the repository's as the agent's own folder is)
        self.projects.extend(self.codex_folders)
        codex_home = os.path.join(self.cwd, self.environ.get("CODEX_HOME") or "")
        if not self.environ.get("CODEX_HOME"):
            given = self.environ.get("HOME")
            if given is not None and _climbs_out_of_a_link(self.cwd, given):
                # Releases that open $HOME/.codex as given have the kernel resolve the
                # `..` after the link; later ones normalise the text first, as self.home
                # does: two homes, and which one this release reads is not known.
                raise ConfigDoubt(
                    "codex: HOME climbs out of a symbolic link with '..': codex releases "
                    "read their home from it in two places"
                )
            codex_home = os.path.join(self.home, ".codex")
        self.codex_environments = self._codex_environments(codex_home)
        layers: list[tuple[str, str | None]] = [
            (CODEX_SYSTEM, None),
            (os.path.join(codex_home, "config.toml"), codex_home),
        ]
        project: list[tuple[str, str | None]] = []
        # Each folder's layers, outermost first: codex reads those from its project root
        # down, and none in a folder it does not trust.
        groups: list[list[tuple[str, str | None]]] = []
        # (a -C climbing out of a link with `..`: the folder by its letters and the one the
        # kernel lands in are both read)
        for folder in dict.fromkeys([self.cwd, *folders, *self.codex_folders]):
            groups.append([])
            for layer in _project_layers(folder):
                if os.path.dirname(layer) != os.path.normpath(codex_home):
                    groups[-1].append((layer, os.path.dirname(os.path.dirname(layer))))
                    project.append(groups[-1][-1])
        # A layer may select a profile itself (``profile = "NAME"``; Codex is documented to
        # take it from the user's config only): its file, when there is one, is read too,
        # as is every profile the command line names (the flag's and ``-c profile=``'s).
        for path, within in [layers[1], *project]:
            try:  # a doubt about this file is recorded when its layer is read, below
                got = self._read_config(path, within=within, what="codex MCP configuration")
                document = None if got is None else parse_toml(got[0], path)
            except ConfigDoubt:
                continue
            chosen = document.get("profile") if isinstance(document, dict) else None
            if isinstance(chosen, str):
                profiles.append(chosen)
        # Codex loads one profile at most (the command line's, else the user config's), so
        # each is a reading of its own, as is none: a profile it does not load must not
        # replace what the others declare.
        chosen_profiles: list[list[tuple[str, str | None]]] = [[]]
        for name in dict.fromkeys(profiles):
            if not _PROFILE.match(name):
                raise ConfigDoubt(f"codex profile {name!r}: not a profile name")
            chosen_profiles.append([(os.path.join(codex_home, f"{name}.config.toml"), codex_home)])
        every = [*layers, *itertools.chain(*chosen_profiles), *project, (CODEX_MANAGED, None)]
        servers_in: dict[str, Any] = {}
        roles_seen: set[str] = set()
        for path, within in dict.fromkeys(every):
            self._codex_role_folder(os.path.dirname(path), roles_seen)
            document = self._load(path, within, "toml")
            if document is not None:
                self._codex_roles(document, path, roles_seen)
                self._codex_plugins(document, path)
                if "shell_environment_policy" in document:
                    self._codex_shell_set(document["shell_environment_policy"], path)
                if "mcp_servers" in document:
                    servers_in[path] = document["mcp_servers"]
        # The project layers codex may read: none (an untrusted folder), or a folder's from
        # any of them down (its root, which markers in any layer move, may be any of those
        # folders; those above it are not read); every folder's, as read before. A layer
        # codex does not read must not replace or switch off what the others declare: the
        # servers are judged as each of these readings merges them.
        stacks = [
            [],
            *(
                [layer for layer in group[start:] if layer[0] in servers_in]
                for group in groups
                for start in range(len(group))
            ),
            project,
        ]
        # Codex's legacy managed layer sits over every other; releases before its config
        # loader do not read it: the servers are judged as they stand with it and without.
        judged: list[tuple[str, Any]] = []
        for profile in chosen_profiles:
            for stack in dict.fromkeys(tuple(stack) for stack in stacks):
                for managed in ((), ((CODEX_MANAGED, None),)):
                    merged: dict[str, Any] = {}
                    sources: dict[str, list[str]] = {}
                    for path, _ in dict.fromkeys([*layers, *profile, *stack, *managed]):
                        if path in servers_in:
                            self._codex_merge(servers_in[path], path, merged, sources)
                    self._codex_overridden(merged, sources, overrides, judged)

    def _codex_overridden(
        self,
        merged: dict[str, Any],
        sources: dict[str, list[str]],
        overrides: Sequence[tuple[str, list[str], Any]],
        judged: list[tuple[str, Any]],
    ) -> None:
        """Each server of the merged layers ``merged`` with the ``-c`` overrides applied,
        judged unless ``judged`` (every server judged so far, with its table) has it. An
        override merges key by key here; Codex may put its value in place instead (a table
        replacing the one below, ``enabled`` or ``env`` included): both are judged."""
        replaced = copy.deepcopy(merged)
        for source, parts, value in overrides:
            table = _nested(parts, value)
            if not isinstance(table, dict):
                raise ConfigDoubt(f"{source}: mcp_servers must be a table")
            self._codex_merge(table, source, merged, sources)
            _put(replaced, parts, copy.deepcopy(value))
        for name, entry in [*merged.items(), *replaced.items()]:
            if not isinstance(entry, dict):
                raise ConfigDoubt(f"codex: {_key('mcp_servers', name)}: not a table")
            if (name, entry) in judged:
                continue
            judged.append((name, entry))
            self._codex_server(name, entry, tuple(dict.fromkeys(sources.get(name, ()))))

    def _codex_shell_set(self, policy: Any, where: str) -> None:
        """The variables a ``shell_environment_policy`` table's ``set`` gives every command
        of codex's shell tool, kept to be judged as codex's own environment; a table that
        is not read exactly is a doubt."""
        if not isinstance(policy, dict):
            self._doubt(where, "shell_environment_policy", "not a table")
            return
        given = policy.get("set")
        if given is None:
            return
        if not isinstance(given, dict) or not all(isinstance(v, str) for v in given.values()):
            self._doubt(where, "shell_environment_policy.set", "not a table of strings")
            return
        self.codex_shell_set.update(given)

    def _codex_roles(self, document: dict[str, Any], path: str, seen: set[str]) -> None:
        """The role layers a codex config layer names (``[agents.<role>] config_file``, a
        relative path taken from the folder of the file naming it, ``~/`` from the home),
        each checked by :meth:`_codex_role_file`."""
        agents = document.get("agents")
        if agents is None:
            return
        if not isinstance(agents, dict):
            self._doubt(path, "agents", "not a table")
            return
        for role, entry in agents.items():
            named = entry.get("config_file") if isinstance(entry, dict) else None
            if named is None:
                continue
            at = _key("agents", role) + ".config_file"
            if type(named) is not str or not named or "\x00" in named:
                self._doubt(path, at, "not a non-empty string")
                continue
            role_file = self._codex_path(named, os.path.dirname(path))
            if role_file is None:
                self._doubt(path, at, "starts with ~ and HOME is not absolute: not followed here")
                continue
            self._codex_role_file(role_file, None, seen)

    def _codex_plugins(self, document: dict[str, Any], path: str) -> None:
        """A doubt for each plugin a codex layer enables (see :func:`_enabled_plugins`)."""
        enabled = _enabled_plugins(document.get("plugins", {}))
        if enabled is None:
            self._doubt(path, "plugins", "not a table")
        for name in enabled or ():
            self._doubt(path, _key("plugins", name), _CODEX_PLUGIN)

    def _codex_cd_folders(self, told: Sequence[str]) -> list[str]:
        """The ``-C`` folders codex may take: current releases read one as an
        ``AbsolutePathBuf`` (a leading ``~`` alone or before ``/`` is the home), earlier
        ones pushed it onto the working directory as written (a folder named ``~``): both
        are judged. Raises ConfigDoubt for a ``~`` one under a relative HOME."""
        folders: list[str] = []
        for value in told:
            folders.append(value)
            if value == "~" or value.startswith("~/"):
                expanded = self._codex_path(value, self.cwd)
                if expanded is None:
                    raise ConfigDoubt(
                        f"codex -C {value!r}: codex takes a leading ~ for the home, and HOME "
                        "is not absolute: which folder it starts in is not known"
                    )
                folders.append(expanded)
        return folders

    def _codex_path(self, named: str, base: str) -> str | None:
        """A path codex reads as an ``AbsolutePathBuf`` (codex-rs ``utils/absolute-path``):
        a leading ``~`` alone or followed by ``/`` is the home, the rest is taken from
        ``base``. None for a ``~`` path under a relative HOME, which codex resolves against
        ``base`` (not the working directory, as ``self.home`` does)."""
        if named == "~" or named.startswith("~/"):
            if not os.path.isabs(self.environ.get("HOME", "/")):
                return None
            named = os.path.join(self.home, named[1:].lstrip("/"))
        return os.path.normpath(os.path.join(base, named))

    def _codex_role_folder(self, folder: str, seen: set[str]) -> None:
        """Every ``.toml`` file below a config layer's folder's ``agents/``, which codex
        discovers as role layers (links and more than _AGENT_ENTRIES entries: doubts)."""
        agents = os.path.join(folder, "agents")
        if agents in seen:  # (a profile's folder is the home's)
            return
        seen.add(agents)
        for path in self._agent_files(agents, suffix=".toml"):
            self._codex_role_file(path, agents, seen)

    def _codex_role_file(self, path: str, within: str | None, seen: set[str]) -> None:
        """An agent role's config layer, which codex applies to the sub-agents it spawns
        with that role: its ``[mcp_servers]`` are not read here, so a role layer declaring
        any is a doubt, as is one that cannot be read exactly."""
        if path in seen:
            return
        seen.add(path)
        document = self._load(path, within, "toml")
        if document is None:
            return
        if "mcp_servers" in document:
            self._doubt(path, "mcp_servers", "an agent role's own MCP servers, not read here")
        self._codex_roles(document, path, seen)

    def _codex_environments(self, codex_home: str) -> list[dict[str, str]]:
        """Each environment codex may run with once it has loaded its ``.env`` files into its
        own (codex-rs arg0 ``load_dotenv``), as releases differ: current ones load
        ``$CODEX_HOME/.env``, overriding, every key but ``CODEX_*``, skipping lines dotenvy
        rejects; earlier ones also the nearest ``.env`` from the working directory up; the
        first ones both with dotenvy's ``load`` (keeping what the environment has, every
        key, stopping at a rejected line). Raises ConfigDoubt, naming the file, for one that
        cannot be read exactly or that moves where codex reads its configuration."""
        home_file = os.path.join(codex_home, ".env")
        for name in sorted(self._listed(codex_home)):
            # Current releases also load every $CODEX_HOME/.env.<suffix> whose first line is
            # a "# codex-env-if:" condition, over .env, setting and unsetting: not read here.
            if name.startswith(".env."):
                overlay = os.path.join(codex_home, name)
                got = self._read_config(overlay, within=codex_home, what="codex environment file")
                if got is not None and b"codex-env-if" in got[0]:
                    raise ConfigDoubt(
                        f"{overlay}: a conditional overlay codex loads over its .env, not read here"
                    )
        files: list[tuple[str, str]] = [(home_file, codex_home)]
        workspace = _dotenv_found_from(os.path.realpath(self.cwd), self.walk)
        if workspace is not None:
            files.append(workspace)
        texts: dict[str, str] = {}
        for path, within in files:
            got = self._read_config(path, within=within, what="codex environment file")
            if got is None or path in texts:
                continue
            self.files.append(path)
            try:
                texts[path] = got[0].decode("utf-8")
            except UnicodeDecodeError:
                raise ConfigDoubt(f"{path}: not UTF-8 text") from None

        def current(text: str, env: dict[str, str]) -> dict[str, str]:
            return load(text, env, override=True, stop_at_error=False, strip_bom=False,
                        keep=lambda key: not key.upper().startswith("CODEX_"))  # fmt: skip

        def first(text: str, env: dict[str, str]) -> dict[str, str]:
            return load(text, env, override=False, stop_at_error=True, strip_bom=True)

        workspace_file = [] if workspace is None else [workspace[0]]
        readings = [
            [(home_file, current)],
            [(path, current) for path in [home_file, *workspace_file]],
            [(path, first) for path in [home_file, *workspace_file]],
        ]
        found: list[dict[str, str]] = []
        for reading in readings:
            env = dict(self.environ)
            for path, loading in reading:
                if path not in texts:
                    continue
                try:
                    env = loading(texts[path], env)
                except DotenvDoubt as exc:
                    raise ConfigDoubt(f"{path}: {exc}") from None
                for name in ("HOME", "CODEX_HOME", "CODEX_MANAGED_CONFIG_PATH"):
                    if env.get(name) != self.environ.get(name):
                        # (codex looks its home up again after loading the file)
                        raise ConfigDoubt(
                            f"{path}: sets {name}, which moves where codex reads its "
                            "configuration (in some releases)"
                        )
            if env not in found:
                found.append(env)
        return found

    def _codex_env_vars(self, value: Any, where: str, at: str) -> tuple[str, ...] | None:
        """The names ``env_vars`` forwards (a name, or a table with ``name`` and a
        ``source`` of ``local``), or None (a doubt recorded)."""
        if type(value) is not list:
            self._doubt(where, at, "not a list")
            return None
        names: list[str] = []
        for index, item in enumerate(value):
            named = item
            if (
                isinstance(item, dict) and set(item) <= {"name", "source"}
                and item.get("source", "local") == "local"
            ):  # fmt: skip
                named = item.get("name")
            if type(named) is not str or not named or "=" in named or "\x00" in named:
                self._doubt(
                    where, f"{at}[{index}]",
                    'not a variable name (a string, or a table with a name and source "local")',
                )  # fmt: skip
                return None
            names.append(named)
        return tuple(names)

    def _codex_argv(
        self, argv: Sequence[str]
    ) -> tuple[list[tuple[str, list[str], Any]], list[str], list[str]]:
        """The ``-c``/``--config`` overrides of ``mcp_servers`` (as tables to merge), the
        profiles named (``--profile``, ``-c profile=``) and the ``-C``/``--cd`` values."""
        overrides: list[tuple[str, list[str], Any]] = []
        profiles: list[str] = []
        folders: list[str] = []
        args = list(argv)
        i = 0
        while i < len(args):
            arg = args[i]
            value: str | None = None
            if arg == "--":
                break
            for short, long in (("-c", "--config"), ("-p", "--profile"), ("-C", "--cd")):
                if arg in (short, long):
                    if i + 1 >= len(args):
                        raise ConfigDoubt(f"codex {arg}: no value follows")
                    value, i = args[i + 1], i + 1
                elif arg.startswith(long + "="):
                    value = arg.partition("=")[2]
                elif arg.startswith(short) and len(arg) > 2 and not arg.startswith("--"):
                    value = arg[2:]
                    if value.startswith("="):  # clap reads -c=VALUE as -c VALUE
                        value = value[1:]
                else:
                    continue
                if short == "-c":
                    overrides.extend(_codex_override(value))
                    key = value.partition("=")[0].strip(_RUST_WHITE_SPACE)
                    parts = key.split(".")
                    if parts[0] == "shell_environment_policy":
                        policy = _nested(parts[1:], _codex_setting(value)[1])
                        self._codex_shell_set(policy, f"codex -c {key}")
                    if parts[0] == "plugins":
                        table = _nested(parts[1:], _codex_setting(value)[1])
                        if _enabled_plugins(table) != []:
                            raise ConfigDoubt(f"codex -c {key}: {_CODEX_PLUGIN}")
                    if key.split(".")[0] == "agents" and "config_file" in value:
                        raise ConfigDoubt(
                            f"codex -c {key}: names an agent role's config layer, which may "
                            "declare MCP servers, not read here"
                        )
                    if value.partition("=")[0].strip(_RUST_WHITE_SPACE) == "profile":
                        # (the key --profile sets: the profile it names, as the flag's)
                        chosen = _codex_setting(value)[1]
                        if not isinstance(chosen, str):
                            raise ConfigDoubt(f"codex -c profile: {chosen!r} is not a name")
                        profiles.append(chosen)
                elif short == "-p":
                    profiles.append(value)
                else:
                    folders.append(value)
                break
            i += 1
        return overrides, profiles, folders

    def _codex_merge(
        self, table: Any, source: str, merged: dict[str, Any], sources: dict[str, list[str]]
    ) -> None:
        """Merge one layer's ``mcp_servers`` key by key, as Codex does. An empty table clears
        nothing here (versions differ): the union is judged."""
        if not isinstance(table, dict):
            raise ConfigDoubt(f"{source}: mcp_servers: not a table")
        for name, entry in table.items():
            if not isinstance(entry, dict):
                raise ConfigDoubt(f"{source}: {_key('mcp_servers', name)}: not a table")
            merged[name] = _deep_merge(merged.get(name, {}), entry)
            sources.setdefault(name, []).append(source)

    def _codex_server(self, name: str, entry: dict[str, Any], sources: tuple[str, ...]) -> None:
        where, here = "; ".join(sources), _key("mcp_servers", name)
        if not self._known(entry, self._CODEX_KEYS, where, here):
            return
        enabled = entry.get("enabled", True)
        if type(enabled) is not bool:
            self._doubt(where, here + ".enabled", "not a boolean")
            return
        place = entry.get("experimental_environment")
        if place is not None and place != "remote":
            self._doubt(where, here + ".experimental_environment", f"unknown value {place!r}")
            return
        if "command" in entry:
            if "url" in entry:
                self._doubt(where, here, "has both a command and a url")
            else:
                # Judged as a server codex starts, whatever ``enabled`` and
                # ``experimental_environment`` say: releases before each key ignore it
                # (and start the command), and codex starts a "remote" one here when no
                # remote executor is available.
                self._codex_stdio(name, entry, sources, enabled=True)
        elif "url" in entry:
            self._remote(name, entry["url"], sources, here, enabled=enabled)
        else:
            self._doubt(where, here, "has neither a command nor a url")

    def _codex_stdio(
        self, name: str, entry: dict[str, Any], sources: tuple[str, ...], *, enabled: bool
    ) -> None:
        """A codex stdio server, once for each environment codex may start it with: codex
        clears it but for its default variables and the names ``env_vars`` lists (from
        codex's own environment, its ``.env`` loaded), then adds ``env``. Releases before
        ``env_vars`` forwarded none: judged without them too."""
        where, here = "; ".join(sources), _key("mcp_servers", name)
        forwarded = self._codex_env_vars(entry.get("env_vars", []), where, here + ".env_vars")
        if forwarded is None:
            return
        bases: list[tuple[tuple[str, str], ...]] = []
        for environment in self.codex_environments:
            for names in (forwarded, ()):
                wanted = dict.fromkeys([*CODEX_SERVER_ENV, *names])
                base = tuple((n, environment[n]) for n in wanted if n in environment)
                if base not in bases:
                    bases.append(base)
        doubts = len(self.doubts)
        for base in bases:
            for placed in self._codex_placed(entry):
                self._stdio(name, placed, where, here, None, sources=sources, enabled=enabled,
                            base=base)  # fmt: skip
                if len(self.doubts) > doubts:
                    return

    def _codex_placed(self, entry: dict[str, Any]) -> list[dict[str, Any]]:
        """``entry`` as declared, and once more for each ``-C`` folder when its ``cwd`` is
        not absolute: current releases start a server without one in the session's folder
        (the ``-C`` one; a relative one may be taken from it), earlier ones in codex's own
        working directory. Both are judged, each with that folder as its ``cwd``."""
        cwd = entry.get("cwd")
        if cwd is not None and (type(cwd) is not str or os.path.isabs(cwd)):
            return [entry]
        here = os.path.realpath(self.cwd)
        placed = [entry]
        for folder in dict.fromkeys(self.codex_folders):
            if folder == here:  # (the same folder: judged as declared)
                continue
            placed.append({**entry, "cwd": folder if cwd is None else os.path.join(folder, cwd)})
        return placed

    # ------------------------------------------------------------------ Gemini CLI

    _GEMINI_KEYS: Final = frozenset(
        {
            "command", "args", "env", "cwd", "url", "httpUrl", "headers", "tcp", "type",
            "timeout", "trust", "description", "includeTools", "excludeTools", "oauth",
            "authProviderType", "targetAudience", "targetServiceAccount",
        }
    )  # fmt: skip

    def _gemini_home(self) -> str:
        """GEMINI_CLI_HOME when set (a relative one found from the working directory, as
        node finds it), else the home."""
        given = self.environ.get("GEMINI_CLI_HOME")
        return os.path.normpath(os.path.join(self.cwd, given)) if given else self.home

    def _gemini_homes(self) -> list[str]:
        """The homes whose ``.gemini`` a Gemini CLI release reads: GEMINI_CLI_HOME's when
        set, and HOME's, which releases before GEMINI_CLI_HOME (up to 0.6) read whatever it
        says."""
        return list(dict.fromkeys([self._gemini_home(), self.home]))

    def gemini(self, argv: Sequence[str]) -> None:
        self._node_names_are_text(argv)
        # (GEMINI_SANDBOX, then an argument, decides before the settings are looked at)
        self.gemini_sandbox_decided = self._gemini_sandbox(argv)
        self._gemini_worktree(argv)
        self._gemini_acp(argv)
        self._gemini_ide_companion()
        if self.environ.get("HOME") == "":
            # (node's os.homedir() is then empty, and Storage.getGlobalGeminiDir() falls
            # back to os.tmpdir(): a folder anyone may write, and TMPDIR may move it; the
            # releases before GEMINI_CLI_HOME read that home whatever it says)
            raise ConfigDoubt(
                "gemini: HOME is set but empty: Gemini CLI then takes the temporary "
                "folder's .gemini ($TMPDIR/.gemini) for its home, not read here (set HOME; "
                "releases before GEMINI_CLI_HOME take HOME's whatever it says)"
            )
        homes = self._gemini_homes()
        # (a relative path is opened from the working directory, as node opens it)
        system = self.environ.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH") or GEMINI_SYSTEM
        defaults = self.environ.get("GEMINI_CLI_SYSTEM_DEFAULTS_PATH")
        if not defaults:  # (getSystemDefaultsPath(): beside the system settings)
            defaults = _node_path(self.cwd, _gemini_defaults_beside(system))
        files: list[tuple[str, str | None]] = [
            (os.path.join(self.cwd, defaults), None),
            (os.path.join(self.cwd, system), None),
            *((os.path.join(home, ".gemini", "settings.json"), home) for home in homes),
        ]
        if all(os.path.realpath(self.cwd) != os.path.realpath(home) for home in homes):
            files.append((os.path.join(self.cwd, ".gemini", "settings.json"), self.cwd))
        files = list(dict.fromkeys(files))
        # (Gemini CLI loads its settings, then its .env, which they and its argv choose)
        documents = [(path, self._load(path, within, "jsonc")) for path, within in files]
        self._gemini_env_file(argv, documents)
        for path, document in documents:
            if document is None:
                continue
            if not isinstance(document, dict):
                self._doubt(path, "(the document)", "not a JSON object")
                continue
            self._gemini_sandbox_setting(document, path)
            security = document.get("security")
            if not isinstance(security, dict) or "environmentVariableRedaction" in security:
                self.gemini_redacts |= security is not None
            mcp = document.get("mcp")
            if "mcpServerCommand" in document:
                # (the name before settings were nested: newer releases move it there)
                self._doubt(path, "mcpServerCommand", "a shell command line that is not judged")
            if isinstance(mcp, dict) and "serverCommand" in mcp:
                self._doubt(path, "mcp.serverCommand", "a shell command line that is not judged")
            elif mcp is not None and not isinstance(mcp, dict):
                self._doubt(path, "mcp", "not an object")
            servers = document.get("mcpServers")
            if servers is None:
                continue
            if not isinstance(servers, dict):
                self._doubt(path, "mcpServers", "not an object")
                continue
            self.settings_expanding = self.environ
            self._gemini_servers(servers, path, self._GEMINI_KEYS)
            self.settings_expanding = None
        self._gemini_extensions(homes)
        self._gemini_agents(homes)

    def _gemini_sandbox(self, argv: Sequence[str]) -> bool:
        """Gemini CLI with its sandbox on re-runs itself, and so starts its servers, in a
        container image (``loadSandboxConfig`` -> ``start_sandbox``): the gemini and the
        servers there are the image's, which the gate cannot judge. GEMINI_SANDBOX (taken
        first when not empty) or an argument not known to turn it off is a doubt; the
        settings are checked as they are read (:meth:`_gemini_sandbox_setting`). Whether
        the variable or an argument turned it off, so that the settings are not looked at
        (``argv.sandbox ?? settings.tools.sandbox``). Raises ConfigDoubt."""
        sandbox = (self.environ.get("GEMINI_SANDBOX") or "").lower().strip(_JS_TRIMMED)
        if sandbox not in ("", "0", "false"):
            raise ConfigDoubt(f"gemini: GEMINI_SANDBOX {_IN_A_SANDBOX}")
        off = False
        for index, key, spelled in _yargs_keys(argv):
            if key not in _GEMINI_SANDBOX_OPTIONS:
                continue
            if argv[index - 1] in _GEMINI_SANDBOX_OFF_ARGUMENTS or _takes_false(argv, index, key):
                off = True
            elif _yargs_valued(argv[index - 1]):
                raise ConfigDoubt(
                    f"gemini argument {index} ({spelled}=...) gives Gemini CLI's sandbox a "
                    "value not read here as off: gemini and its MCP servers may run in a "
                    "container image the gate cannot judge"
                )
            else:
                raise ConfigDoubt(f"gemini argument {index} ({spelled}) {_IN_A_SANDBOX}")
        return off or sandbox != ""

    def _gemini_worktree(self, argv: Sequence[str]) -> None:
        """``-w``/``--worktree`` (with ``experimental.worktrees``, else gemini stops) makes
        Gemini CLI run ``git worktree add`` and move into that checkout of HEAD before it
        starts its servers (``setupWorktree``): a server found from there is HEAD's file,
        not the working tree's the gate judged. Any spelling yargs reads is a doubt (a
        negated one asks for a generated name). Raises ConfigDoubt."""
        for index, key, spelled in _yargs_keys(argv):
            if key in ("worktree", "w"):
                raise ConfigDoubt(
                    f"gemini argument {index} ({spelled}): starts gemini in a new git "
                    "worktree of HEAD, whose files were not judged"
                )

    def _gemini_acp(self, argv: Sequence[str]) -> None:
        """``--acp`` (``--experimental-acp``) runs Gemini CLI for an ACP client, whose
        ``session/new`` names the stdio servers to start and a folder whose settings are
        loaded, at run time: nothing the gate reads. Any spelling yargs reads is a doubt.
        Raises ConfigDoubt."""
        for index, key, spelled in _yargs_keys(argv):
            if key.replace("-", "").lower() in ("acp", "experimentalacp"):
                raise ConfigDoubt(
                    f"gemini argument {index} ({spelled}): runs gemini for an ACP client, "
                    "which names the MCP servers it starts (and a folder whose settings it "
                    "loads) at run time, not judged here"
                )

    def _gemini_ide_companion(self) -> None:
        """In IDE mode Gemini CLI connects to its IDE companion's MCP server, and starts a
        command for it over stdio (``establishStdioConnection``) when
        GEMINI_CLI_IDE_SERVER_STDIO_COMMAND names one or a companion's connection file
        (``gemini-ide-server-<pid>[-<n>].json`` in ``os.tmpdir()/gemini/ide``, the
        user's own: gemini skips another's) gives ``stdio``: a server not judged here, so
        either is a doubt, whether IDE mode is on or not. Raises ConfigDoubt."""
        if self.environ.get("GEMINI_CLI_IDE_SERVER_STDIO_COMMAND"):
            raise ConfigDoubt(
                "gemini: GEMINI_CLI_IDE_SERVER_STDIO_COMMAND names a command Gemini CLI "
                "starts as its IDE companion's MCP server, not judged here"
            )
        folder = os.path.join(_node_path(self.cwd, _node_tmpdir(self.environ)), "gemini", "ide")
        refuse_process_paths(folder, "folder of IDE connection files", self.walk)
        try:
            names = sorted(os.listdir(folder))
        except OSError:  # (gemini, of the same user, cannot list it either: no file read)
            return
        for name in names:
            path = os.path.join(folder, name)
            if not _GEMINI_IDE_FILE.match(name):
                continue
            # (a link into /proc leads nowhere, or to another file, here: refused first)
            refuse_process_paths(path, "gemini IDE connection file", self.walk)
            if not _owned_by_this_user(path):
                continue
            got = self._read_config(path, within=None, what="gemini IDE connection file")
            if got is not None and _names_servers(got[0].decode("utf-8", "replace"), "stdio"):
                raise ConfigDoubt(
                    f"{path}: stdio: a command Gemini CLI starts as its IDE companion's "
                    "MCP server, not judged here"
                )

    def _gemini_sandbox_setting(self, document: dict[str, Any], path: str) -> None:
        """A settings file's ``tools.sandbox`` (``sandbox`` before settings were nested)
        that is not plainly off is a doubt (:meth:`_gemini_sandbox`)."""
        tools = document.get("tools")
        if tools is not None and not isinstance(tools, dict):
            self._doubt(path, "tools", "not an object")
            return
        for at, holder in (("tools.sandbox", tools or {}), ("sandbox", document)):
            if self.gemini_sandbox_decided:
                break
            if "sandbox" in holder and not _gemini_sandbox_off(holder["sandbox"]):
                self._doubt(path, at, _IN_A_SANDBOX)

    def _gemini_agents(self, homes: Sequence[str]) -> None:
        """Gemini CLI's local subagents declare servers of their own (``mcp_servers`` in a
        Markdown file's front matter, started when the subagent runs): the home's
        ``.gemini/agents``, the project's (every folder up from the working directory is
        looked at) and each extension's ``agents/``. None is read: each one present is a
        doubt."""
        folders = [os.path.join(home, ".gemini", "agents") for home in homes]
        folders += [os.path.join(d, ".gemini", "agents") for d in self.above]
        for extensions in self._gemini_extension_folders(homes):
            folders += [
                os.path.join(extensions, name, "agents") for name in self._listed(extensions)
            ]
        self._agent_definitions(folders, _GEMINI_AGENT_SERVERS, "gemini agent file")

    def _gemini_servers(self, servers: dict[str, Any], path: str, keys: frozenset[str]) -> None:
        for name, entry in servers.items():
            here = _key("mcpServers", name)
            if not isinstance(entry, dict):
                self._doubt(path, here, "not an object")
            elif self._known(entry, keys, path, here):
                self._gemini_server(name, entry, path, here)

    def _gemini_server(self, name: str, entry: dict[str, Any], path: str, here: str) -> None:
        """One Gemini CLI server, remote or local as Gemini CLI picks its transport: by
        truth, on the values it expanded (``createTransport``: a non-empty ``httpUrl``, else
        ``url``, else ``command``; ``tcp`` is no transport there, so it never wins over a
        command). A URL that expands to nothing is no URL; the server is taken for remote
        only when every release's expansion leaves it a URL (for a settings file, also
        the reading from the agent's environment alone, before the .env is loaded)."""
        given = [key for key in ("httpUrl", "url", "tcp") if key in entry]
        wrong = next((key for key in given if not isinstance(entry[key], str)), None)
        if wrong is not None:
            self._doubt(path, f"{here}.{wrong}", "not a string")
            return
        readings = [
            any(_gemini_reading(entry[key], pattern, environ) for key in given if key != "tcp")
            for pattern in (_GEMINI_REFERENCE, _GEMINI_OLD_REFERENCE)
            for environ in (
                self.expanding,
                {**self.expanding, **self.inherited},
                *filter(None, [self.settings_expanding]),
            )
        ]
        # (recorded as written: the URL the current resolver leaves non-empty, else any)
        shown = next(
            (entry[key] for key in given
             if _gemini_reading(entry[key], _GEMINI_REFERENCE, self.expanding)),
            next((entry[key] for key in given if entry[key]), None),
        )  # fmt: skip
        if all(readings):
            self._remote(name, shown, (path,), here)
        elif "command" in entry:
            self._gemini_stdio(name, entry, path, here)
        elif shown is not None:  # (Gemini CLI starts nothing here: a URL, or nothing valid)
            self._remote(name, shown, (path,), here)
        else:
            self._doubt(path, here, "has neither a command nor a url")

    def _gemini_stdio(self, name: str, entry: dict[str, Any], path: str, here: str) -> None:
        """A Gemini CLI stdio server, judged with the agent's environment (and the .env's
        and extension's variables); under strict sanitization (from that environment, as
        ``createTransport`` passes it), or when a settings layer configures the redaction
        (its ``blocked`` list may remove any name), once more with only what Gemini CLI
        keeps of it strictly, the server's own ``env`` added, since a variable the gate
        credits may not reach it; and with what releases since 0.31 strip always
        (``gemini_strips``) when that is anything. Each with the ``env`` values as releases
        before 0.31 give them and, when that differs, as later ones do (dotenv-expand)."""
        doubts = len(self.doubts)
        self._stdio(name, entry, path, here, _GEMINI_EXPANSION)
        if len(self.doubts) > doubts:
            return
        current = self._gemini_dotenv_reading(entry, path, here)
        if current is None:
            return
        readings = [entry]
        if current is not entry:
            self._stdio(name, current, path, here, _GEMINI_EXPANSION)
            if len(self.doubts) > doubts:
                return
            readings.append(current)
        saved = self.inherited
        variants: list[tuple[tuple[tuple[str, str], ...], dict[str, str]]] = []
        # (releases since 0.31 strip what looks like a credential always; before, nothing)
        base = tuple((k, v) for k, v in self.environ.items() if not gemini_strips(k, v))
        inherited = {k: v for k, v in saved.items() if not gemini_strips(k, v)}
        if len(base) < len(self.environ) or len(inherited) < len(saved):
            variants.append((base, inherited))
        if self.gemini_redacts or _gemini_sanitizes_strictly({**self.environ, **saved}):
            base = tuple((k, v) for k, v in self.environ.items() if _gemini_strictly_kept(k))
            variants.append((base, {k: v for k, v in saved.items() if _gemini_strictly_kept(k)}))
        for (base, inherited), reading in itertools.product(variants, readings):
            self.inherited = inherited
            try:
                self._stdio(name, reading, path, here, _GEMINI_EXPANSION, base=base)
            finally:
                self.inherited = saved
            if len(self.doubts) > doubts:
                return

    def _json_argument(self, value: str, inline: str, within: str | None) -> tuple[str, Any | None]:
        """Where an argument that is inline JSON or a file's path (relative to the working
        directory) is read from, and its document: None when it cannot be read (a doubt)."""
        if value.lstrip().startswith("{"):
            try:
                return inline, parse_json(value.encode("utf-8", "surrogatepass"), inline)
            except ConfigDoubt as exc:
                self.doubts.append(str(exc))
                return inline, None
        where = os.path.join(self.cwd, value)
        return where, self._load(where, within, "json")

    def _listed(self, folder: str) -> list[str]:
        """The names in ``folder``, sorted; none when it does not exist, and a doubt when it
        cannot be listed or is reached through /proc or /dev/fd (the agent would list its
        own)."""
        try:
            refuse_process_paths(folder, "folder", self.walk)
        except ConfigDoubt as exc:
            self.doubts.append(str(exc))
            return []
        try:
            return sorted(os.listdir(folder))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            self._doubt(folder, "(the folder)", f"cannot be listed: {exc.strerror or exc}")
            return []

    def _gemini_extensions(self, homes: Sequence[str]) -> None:
        """The servers of every extension installed in the home's ``.gemini/extensions``
        and in the working directory's (releases have loaded a workspace's extensions too,
        ahead of the home's): each folder's ``gemini-extension.json``, its
        ``${extensionPath}``, ``${workspacePath}`` and ``${/}`` put in as Gemini CLI does;
        the variables of the extension's own ``.env`` reach its servers. An extension
        linked from elsewhere is a doubt: its declarations are not read here."""
        for folder, home in self._gemini_extension_folders(homes).items():
            self._gemini_extensions_in(folder, home)

    def _gemini_extension_folders(self, homes: Sequence[str]) -> dict[str, str]:
        """Each extensions folder, the working directory's first, with the home its
        extensions take their settings from (the first home's for the working directory's)."""
        found: dict[str, str] = {}
        for root, home in ((self.cwd, homes[0]), *((home, home) for home in homes)):
            found.setdefault(os.path.join(root, ".gemini", "extensions"), home)
        return found

    def _gemini_extensions_in(self, folder: str, home: str) -> None:
        for name in self._listed(folder):
            extension = os.path.join(folder, name)
            if self.walk.reaches(extension, "/"):
                self._doubt(extension, "(the folder)", "reached through /proc or /dev/fd, "
                            "which lead to each process's own files: not read here")  # fmt: skip
                continue
            if not os.path.isdir(extension):
                continue
            install = self._load(os.path.join(extension, _GEMINI_INSTALL), extension, "json")
            if isinstance(install, dict) and install.get("type") == "link":
                self._doubt(extension, _GEMINI_INSTALL, "a linked extension, not read here")
                continue
            path = os.path.join(extension, "gemini-extension.json")
            document = self._load(path, extension, "json")
            if document is None:
                continue
            servers = document.get("mcpServers") if isinstance(document, dict) else None
            if not isinstance(document, dict) or not isinstance(servers, (dict, type(None))):
                self._doubt(path, "mcpServers", "not an object")
                continue
            if not servers:
                continue
            known = {"extensionPath": extension, "workspacePath": self.cwd, "/": "/",
                     "pathSeparator": "/"}  # fmt: skip
            inherited = sorted(
                name for text in _strings(servers) for name in _JS_OBJECT_NAMES
                if "${" + name + "}" in text
            )  # fmt: skip
            if inherited:
                self._doubt(
                    path, "mcpServers",
                    f"names ${{{inherited[0]}}}, which Gemini CLI fills in with a function's "
                    "text (a property of the object it looks the extension's variables up in)",
                )  # fmt: skip
                continue
            servers = _substituted(servers, known)
            variables = self._gemini_extension_variables(document, servers, path, home)
            if variables is None:
                continue
            custom, given = variables
            saved = dict(self.inherited)
            # Read as releases without extension variables (or with ``experimental.
            # extensionConfig`` off) read it, then as current ones do, when that differs.
            keys = self._GEMINI_KEYS - {"trust"}
            self._gemini_servers(servers, path, keys)
            expanded = _gemini_custom(servers, custom)
            if expanded != servers or given:
                self.inherited = {**saved, **given}
                self._gemini_servers(expanded, path, keys)
                self.inherited = saved

    def _gemini_extension_variables(
        self, document: dict[str, Any], servers: Any, path: str, home: str
    ) -> tuple[dict[str, str], dict[str, str]] | None:
        """An extension's variables as Gemini CLI takes them (``_buildExtension``): those
        of ``extensions/<its name>/.env`` in the home (found by the name it declares, not
        by its folder) under those of the workspace's ``.env``; and, of them, the values
        of its declared ``settings``, which reach its servers over the environment. A
        sensitive setting's value may come from the system keychain instead, which is not
        read: a doubt when it decides what a server loads or is referred to outside an
        ``env`` value that does not. None when the extension is refused (a doubt)."""
        name = document.get("name")
        files = [os.path.join(self.cwd, ".env")]
        if isinstance(name, str) and _GEMINI_EXTENSION_NAME.match(name):
            files.insert(0, os.path.join(home, ".gemini", "extensions", name, ".env"))
        custom: dict[str, str] = {}
        for env_file in files:
            # Gemini CLI reads what is there (a FIFO, a device: read here, they are doubts);
            # a folder (a virtual environment called .env) gives it nothing.
            if self.walk.present(env_file) and not os.path.isdir(env_file):
                added = self._dotenv(env_file)
                if added is None:
                    return None
                custom.update(added)
        settings = document.get("settings", [])
        if not isinstance(settings, list) or not all(
            isinstance(s, dict) and isinstance(s.get("envVar"), str) for s in settings
        ):
            self._doubt(path, "settings", "not a list of objects with an envVar string")
            return None
        given: dict[str, str] = {}
        for index, setting in enumerate(settings):
            variable = setting["envVar"]
            if _gemini_references(variable):
                self._doubt(path, f"settings[{index}].envVar", "names a variable")
                return None
            if _js_truthy(setting.get("sensitive")):
                custom.pop(variable, None)
                if _loading(variable) or variable in _gemini_referred(servers):
                    self._doubt(
                        path, f"settings[{index}]",
                        f"{variable} is a sensitive setting: its value may come from the "
                        "system keychain, which is not read here",
                    )  # fmt: skip
                    return None
            elif variable in custom:
                given[variable] = custom[variable]
        return custom, given

    def _gemini_ignoring(
        self, argv: Sequence[str], documents: Sequence[tuple[str, Any]]
    ) -> bool | tuple[str, str]:
        """Whether Gemini CLI ignores the local ``.env`` (``loadEnvironment``):
        ``--ignore-env`` among its raw arguments before ``--`` (sniffed, not parsed), or
        ``advanced.ignoreLocalEnv`` true in its merged settings. When settings files
        disagree on it (which one wins is not modelled here) or it names a variable: the
        file and the problem instead."""
        given = list(argv[: argv.index("--")] if "--" in argv else argv)
        if "--ignore-env" in given:
            return True
        values = {
            path: document["advanced"]["ignoreLocalEnv"]
            for path, document in documents
            if isinstance(document, dict) and isinstance(document.get("advanced"), dict)
            and "ignoreLocalEnv" in document["advanced"]
        }  # fmt: skip
        said = {path: _js_truthy(value) for path, value in values.items()}
        named = next((p for p, value in values.items() if _gemini_references(value)), None)
        if named is not None:
            return named, "names a variable"
        if len(set(said.values())) > 1:
            return next(p for p, value in said.items() if value), "settings files disagree on it"
        return any(said.values())

    def _gemini_env_file(self, argv: Sequence[str], documents: Sequence[tuple[str, Any]]) -> None:
        """The ``.env`` file Gemini CLI loads into its environment (the nearest
        ``.gemini/.env`` or ``.env`` from the working directory up, else the home's; when
        it ignores the local ``.env``, only a ``.gemini/.env`` or the home's): a variable it
        sets that the agent's environment lacks reaches every server and every expansion.
        Read plainly (``NAME=value``, optionally quoted on one line, optionally after
        ``export``) or refused.

        The home is ``GEMINI_CLI_HOME`` when set, as for the settings; releases that took
        the ``.env`` from HOME regardless would load another file when HOME's differs: a
        doubt, since its variables would reach the servers unjudged."""
        cli_home = self._gemini_home()
        # (findEnvFile compares each folder with homedir()'s text: GEMINI_CLI_HOME or HOME)
        home_text = self.environ.get("GEMINI_CLI_HOME") or self.environ.get("HOME", self.home)
        ignoring = self._gemini_ignoring(argv, documents)
        if ignoring is True and _gemini_env_path(
            self.cwd, cli_home, None, walk=self.walk
        ) != _gemini_env_path(self.cwd, cli_home, home_text, walk=self.walk):
            # Releases before ``--ignore-env`` and ``advanced.ignoreLocalEnv`` load the local
            # .env whatever they say: the servers are judged with either file.
            self.uncertain_env.append(_GEMINI_IGNORING)
            ignoring = _GEMINI_IGNORING not in self.without
        path = _gemini_env_path(
            self.cwd, cli_home, home_text if ignoring is True else None, walk=self.walk
        )
        if isinstance(ignoring, tuple):
            ignored = _gemini_env_path(self.cwd, cli_home, home_text, walk=self.walk)
            if ignored != path:
                where, problem = ignoring
                self._doubt(
                    where, "advanced.ignoreLocalEnv",
                    f"{problem}, and it decides whether Gemini CLI loads {path or 'no .env'} "
                    f"or {ignored or 'none'}",
                )  # fmt: skip
                return
        if cli_home != self.home:
            other = _gemini_env_path(
                self.cwd, self.home, home_text if ignoring is True else None, walk=self.walk
            )
            if other is not None and other != path:
                self._doubt(
                    other,
                    "(the file)",
                    "Gemini CLI takes this .env from HOME in some releases and "
                    f"{path or 'none'} from GEMINI_CLI_HOME in others; which one the agent "
                    "loads is not known here (move it out of HOME, or put the .env the "
                    "servers need in the working directory)",
                )
                return
        if path is None:
            return
        added = self._dotenv(path)
        if added is None:
            return
        added = {name: value for name, value in added.items() if name not in self.environ}
        if os.path.basename(os.path.dirname(path)) != ".gemini":
            # A project .env: Gemini CLI leaves out the names its settings exclude
            # (advanced.excludedEnvVars; before settings were nested, excludedProjectEnvVars),
            # merged across layers as it merges them, which is not modelled here.
            for where, document in documents:
                advanced = document.get("advanced") if isinstance(document, dict) else None
                for at, listed in (
                    ("advanced.excludedEnvVars",
                     advanced.get("excludedEnvVars") if isinstance(advanced, dict) else None),
                    ("excludedProjectEnvVars",
                     document.get("excludedProjectEnvVars") if isinstance(document, dict)
                     else None),
                ):  # fmt: skip
                    if listed is None:
                        continue
                    names = (
                        set(listed)
                        if isinstance(listed, list) and all(type(n) is str for n in listed)
                        else None
                    )
                    if names is None or names & set(added):
                        self._doubt(
                            where, at,
                            f"leaves variables of {path} out of what Gemini CLI loads (its "
                            "layers merged as it merges them): not modelled here",
                        )  # fmt: skip
                        return
        moving = sorted(
            n for n in added if n in _GEMINI_PLACE_NAMES or n.startswith(_GEMINI_PLACE_PREFIXES)
        )
        if moving:
            # (gemini loads the file after its settings, before its extensions and agents)
            self._doubt(
                path, moving[0],
                "sets a variable deciding where Gemini CLI reads its configuration, what it "
                "runs or the sandbox it runs in, none of which the gate would then have judged",
            )  # fmt: skip
            return
        self.inherited.update(added)
        self.expanding = {**added, **self.environ}

    def _dotenv(
        self, path: str, what: str = "gemini environment file", *, node: bool = True
    ) -> dict[str, str] | None:
        """The variables a ``.env`` file sets, read plainly (``node``: as node's dotenv
        reads it, Gemini CLI's), or None (a doubt recorded)."""
        got = None
        try:
            got = self._read_config(path, within=None, what=what)
        except ConfigDoubt as exc:
            self.doubts.append(str(exc))
            return None
        if got is None:
            return {}
        if path not in self.files:  # (the workspace's is read for each extension too)
            self.files.append(path)
        try:
            text = got[0].decode("utf-8")
        except UnicodeDecodeError:
            self._doubt(path, "(the file)", "not UTF-8 text")
            return None
        odd = next((c for c in text if c in _DOTENV_ODD_CHARACTERS), None)
        if odd is None and not node:
            # (Bun's loader takes ASCII blanks alone for blanks: it keeps a Unicode one
            # around a value and reads no name after one)
            odd = next((c for c in text if c.isspace() and c not in " \t\n\r"), None)
        if odd is not None:
            loader = "node's dotenv" if node else "Bun's loader"
            self._doubt(
                path, "(the file)",
                f"holds {odd!r}, which {loader} and this reader do not take alike for a line "
                "break or a space",
            )  # fmt: skip
            return None
        added: dict[str, str] = {}
        # (dotenv breaks lines at a line feed alone, a carriage return first made one)
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        for number, line in enumerate(lines, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            match = _DOTENV_LINE.match(line)
            if match is None:
                self._doubt(path, f"line {number}", "not a NAME=value line read plainly here")
                return None
            name, value = match["name"], match["value"].strip()
            if value[:1] in ("'", '"', "`"):
                quote = value[0]
                if (
                    len(value) < 2
                    or not value.endswith(quote)
                    or "\\" in value
                    or (not node and quote in value[1:-1])  # (Bun ends it at the first)
                ):
                    self._doubt(path, f"line {number}", "a quoted value not read plainly here")
                    return None
                value = value[1:-1]
            else:
                # (node's dotenv ends a value at its first '#'; Bun at one after a space,
                # and claude's reading refuses a value still holding one)
                value = value.split("#" if node else " #", 1)[0].strip()
                if not node and value and not (value[0].isascii() and value[-1].isascii()):
                    # (Bun trims blank bytes from the ends of a value one byte at a time, and
                    # 0xA0 is the last byte of à as of a no-break space)
                    self._doubt(
                        path, f"line {number}",
                        "an unquoted value starting or ending in a character other than "
                        "ASCII, whose bytes Bun's loader may trim: not read here",
                    )  # fmt: skip
                    return None
            added[name] = value
        return added

    # ------------------------------------------------------------------ Cursor

    _CURSOR_KEYS: Final = frozenset({"type", "command", "args", "env", "url", "headers", "auth"})

    def cursor(self) -> None:
        for path, within in (
            (os.path.join(self.home, ".cursor", "mcp.json"), self.home),
            (os.path.join(self.cwd, ".cursor", "mcp.json"), self.cwd),
        ):
            document = self._load(path, within, "json")
            if document is None:
                continue
            if not isinstance(document, dict) or not isinstance(
                document.get("mcpServers", {}), dict
            ):
                self._doubt(path, "mcpServers", "not an object")
                continue
            for name, entry in document.get("mcpServers", {}).items():
                here = _key("mcpServers", name)
                if not isinstance(entry, dict):
                    self._doubt(path, here, "not an object")
                    continue
                kind = entry.get("type")
                if "envFile" in entry:
                    self._doubt(path, here + ".envFile", "variables from a file are not judged")
                elif not self._known(entry, self._CURSOR_KEYS, path, here):
                    continue
                elif kind in ("sse", "http", "streamable-http") or (
                    kind is None and "url" in entry and "command" not in entry
                ):
                    self._remote(name, entry.get("url"), (path,), here)
                elif kind in (None, "stdio") and "url" not in entry:
                    self._stdio(name, entry, path, here, _CLAUDE_EXPANSION)
                else:
                    self._doubt(path, here, f"unknown transport {kind!r}")

    # ------------------------------------------------------------------ entries

    def _known(self, entry: dict[str, Any], keys: frozenset[str], where: str, at: str) -> bool:
        unknown = sorted(set(entry) - keys)
        if unknown:
            self._doubt(where, at, "unknown key " + ", ".join(map(repr, unknown)))
        return not unknown

    def _stdio(
        self,
        name: str,
        entry: dict[str, Any],
        where: str,
        at: str,
        expansion: re.Pattern[str] | None,
        *,
        sources: tuple[str, ...] | None = None,
        enabled: bool = True,
        base: tuple[tuple[str, str], ...] | None = None,
    ) -> None:
        """One stdio server; ``base``: the environment the client starts it with before
        its ``env`` (None: the agent's, with the variables the client adds)."""
        command, args = entry.get("command"), entry.get("args", [])
        env, cwd = entry.get("env", {}), entry.get("cwd")
        if type(command) is not str or not command or "\x00" in command:
            self._doubt(where, at + ".command", "not a non-empty string")
            return
        if type(args) is not list or not all(type(a) is str for a in args):
            self._doubt(where, at + ".args", "not a list of strings")
            return
        if type(env) is not dict or not all(type(v) is str for v in env.values()):
            self._doubt(where, at + ".env", "not an object of strings")
            return
        odd = sorted(name for name in env if not name or "=" in name or "\x00" in name)
        if odd:
            # (node writes NAME=VALUE as it is: a name holding "=" sets the variable its
            # first part names, to what follows, which is not what the gate would judge)
            self._doubt(where, _key(at + ".env", odd[0]), "not a variable name")
            return
        if cwd is not None and (type(cwd) is not str or not cwd or "\x00" in cwd):
            # (a NUL: no folder is named so, and the client's change of directory fails)
            self._doubt(where, at + ".cwd", "not a non-empty string without a NUL")
            return
        if expansion is not None:
            for index, value in enumerate([command, *args, cwd or ""]):
                if expansion.search(value):
                    spot = at + (
                        ".command" if index == 0
                        else ".cwd" if index == len(args) + 1
                        else f".args[{index - 1}]"
                    )  # fmt: skip
                    # (an argument is not shown: it may hold a credential)
                    shown = f"{value!r} " if index == 0 or index == len(args) + 1 else ""
                    self._doubt(where, spot, f"{shown}names a variable the client expands")
                    return
        reference = _GEMINI_REFERENCE if expansion is _GEMINI_EXPANSION else _ENV_REFERENCE
        resolved: list[tuple[str, str]] = [
            (key, value) for key, value in self.inherited.items() if key not in env
        ]
        # Claude Code expands a server's env from its own process's, which by then holds
        # its global file's and settings files' env too (over the environment's).
        source = (
            {**self.expanding, **self.inherited}
            if expansion is _CLAUDE_EXPANSION
            else self.expanding
        )
        for key, value in env.items():
            problem = (
                None if expansion is None
                else _reference_problem(value, expansion is _GEMINI_EXPANSION, source)
            )  # fmt: skip
            if problem is not None:
                self._doubt(where, f"{at}.env.{key}", problem)
                return
            known = self._expanded(value, reference, source) if expansion is not None else value
            if expansion is _GEMINI_EXPANSION and self._gemini_expands_through_its_own():
                self._doubt(
                    where, f"{at}.env.{key}",
                    f"{_GEMINI_EXPAND_TARGET} is set, and Gemini CLI's expansion (dotenv-expand) "
                    "gives its value for every value a server's env declares",
                )  # fmt: skip
                return
            if known is not None and expansion is _GEMINI_EXPANSION and self._twice(known):
                # Gemini CLI expands env values again when it starts the server (newer
                # releases; older ones do not): which value the server gets is not known.
                self._doubt(
                    where, f"{at}.env.{key}",
                    "names a variable once expanded, which Gemini CLI expands again when it "
                    "starts the server (and some releases do not)",
                )  # fmt: skip
                return
            if known is None:
                if key in _LOADING_NAMES or key.startswith(_LOADING_PREFIXES):
                    self._doubt(where, f"{at}.env.{key}", "cannot be expanded here")
                    return
                known = value  # left as the client leaves an unset variable: literal
            if expansion is _GEMINI_EXPANSION and self._before_dotenv(value) not in (None, known):
                self._doubt(
                    where, f"{at}.env.{key}",
                    "names a variable only the .env sets: current Gemini CLI expands its "
                    "settings before it loads the .env (earlier releases after), so the "
                    "value differs (the .env's variables reach the server without naming them)",
                )  # fmt: skip
                return
            resolved.append((key, known))
        start = self.environ if base is None else dict(base)
        search = dict(resolved).get("PATH", start.get("PATH"))
        if os.sep not in command and search is not None:
            relative = [
                n for n, e in enumerate(search.split(os.pathsep), 1) if not os.path.isabs(e)
            ]
            if relative:
                # The client's spawn looks a bare command up in such an entry from the
                # server's working folder; the gate looks only in absolute ones. The entry
                # is named by its place: a value may be a credential, whatever it is called.
                given = (
                    f"{at}.env.PATH" if "PATH" in env
                    else "the PATH its client's settings or .env give it"
                    if "PATH" in self.inherited
                    else "the agent's PATH" if base is None or self.client == GEMINI
                    else "the PATH codex gives it"
                )  # fmt: skip
                self._doubt(
                    where, at + ".command",
                    f"{command!r} is looked up in a relative PATH entry "
                    f"(entry {relative[0]} of {given})",
                )  # fmt: skip
                return
        self.found.append(
            Declaration(
                name, STDIO, sources or (where,), at, command=command, args=tuple(args),
                env=tuple(resolved), cwd=cwd, enabled=enabled, base_env=base,
            )
        )  # fmt: skip

    def _before_dotenv(self, value: str) -> str | None:
        """A settings file's env ``value`` as current Gemini CLI gives it: expanded from
        the agent's environment alone (an unset variable without a default left as
        written), then again when it starts the server, the .env loaded by then. None
        outside a settings file."""
        if self.settings_expanding is None:
            return None
        first = self._expanded(value, _GEMINI_REFERENCE, self.settings_expanding)
        start = {**self.expanding, **self.inherited}
        return _gemini_reading(value if first is None else first, _GEMINI_REFERENCE, start)

    def _gemini_expands_through_its_own(self) -> bool:
        """Whether ``__GCLI_EXPAND_TARGET__`` is set for Gemini CLI: dotenv-expand then
        takes its value for every value of a server's ``env`` (its expansion goes through
        that variable, and a value set before wins)."""
        return any(
            environ.get(_GEMINI_EXPAND_TARGET)
            for environ in (self.environ, self.expanding, self.inherited)
        )

    def _gemini_dotenv_reading(
        self, entry: dict[str, Any], path: str, here: str
    ) -> dict[str, Any] | None:
        """``entry`` with each ``env`` value as Gemini CLI 0.31 and later give it: its
        settings' expansion (from the agent's environment), then dotenv-expand's
        (``dotenv_expand``, from the environment with the .env's and the extension's
        variables), which releases before do not apply. None when a value cannot be read
        so (a doubt)."""
        env = entry.get("env")
        if not isinstance(env, dict) or not env:
            return entry
        first_from = self.expanding if self.settings_expanding is None else self.settings_expanding
        start = {**self.expanding, **self.inherited}
        changed = {}
        for key, value in env.items():
            first = self._expanded(value, _GEMINI_REFERENCE, first_from)
            text = value if first is None else first
            second = dotenv_expand(text, start)
            if second is None or (second != text and _GEMINI_EXPANSION.search(second)):
                self._doubt(
                    path, f"{here}.env.{key}",
                    "is expanded again as Gemini CLI starts the server, by dotenv-expand, to a "
                    "value not read here (one naming a variable, or put in place holding '$')",
                )  # fmt: skip
                return None
            if second != text:
                changed[key] = second
        return {**entry, "env": {**env, **changed}} if changed else entry

    def _twice(self, value: str) -> bool:
        """Whether Gemini CLI's second expansion (``expandEnvVars`` at the server's start,
        from its environment and the extension's) changes ``value``, once expanded."""
        environ = {**self.expanding, **self.inherited}
        return any(
            _gemini_reading(value, pattern, environ) != value
            for pattern in (_GEMINI_REFERENCE, _GEMINI_OLD_REFERENCE)
        )

    def _expanded(
        self, value: str, reference: re.Pattern[str], environ: Mapping[str, str] | None = None
    ) -> str | None:
        """``${VAR}`` and ``${VAR:-default}`` (and gemini's ``$VAR``) from the spawn's
        environment, or None when a variable is unset and has no default (or the value
        holds another ``${`` form)."""
        unknown = False
        given = self.expanding if environ is None else environ

        def one(match: re.Match[str]) -> str:
            nonlocal unknown
            name, default = match["name"] or match["braced"], match["default"]
            if name in given:
                return given[name]
            if default is not None:
                return default
            unknown = True
            return match.group(0)

        text = reference.sub(one, value)
        if unknown or "${" in reference.sub("", value):
            return None
        return text

    def _remote(
        self, name: str, url: Any, sources: tuple[str, ...], at: str, *, enabled: bool = True
    ) -> None:
        if url is not None and type(url) is not str:
            self._doubt("; ".join(sources), at + ".url", "not a string")
            return
        self.found.append(Declaration(name, REMOTE, sources, at, url=url, enabled=enabled))


def _dotenv_found_from(folder: str, walk: Walk) -> tuple[str, str] | None:
    """The ``.env`` dotenvy's ``dotenv()`` finds from ``folder`` (its ``Finder``): the
    nearest regular file of that name, links followed, from ``folder`` up, with the folder
    it lies in. Raises ConfigDoubt where it would stop on an error, and for a name that
    leads through /proc or /dev/fd (codex would find its own file there)."""
    for place in _ancestors(folder):
        candidate = os.path.join(place, ".env")
        try:
            found = os.stat(candidate)
        except FileNotFoundError:
            refuse_process_paths(candidate, "codex environment file", walk)
            continue
        except OSError as exc:
            raise ConfigDoubt(
                f"{candidate}: {exc.strerror}: whether codex loads it is not known here"
            ) from None
        if stat.S_ISREG(found.st_mode):
            return candidate, place
    return None


def _folder_identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the folder ``path`` leads to, links followed; None for none."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return (info.st_dev, info.st_ino) if stat.S_ISDIR(info.st_mode) else None


def _project_layers(folder: str) -> list[str]:
    """Codex's project layers for ``folder``, outermost first: ``.codex/config.toml`` in
    ``folder`` and every folder above it. Codex reads them from its project root down, and
    the root is wherever ``project_root_markers`` (any layer's, or an override's; ``.git``
    by default) finds it: every one is read, which is never less than Codex reads."""
    return [os.path.join(d, ".codex", "config.toml") for d in reversed(_ancestors(folder))]


# What Rust's ``str::trim`` removes (Unicode White_Space), which Codex applies to both halves
# of an override; Python's ``str.strip()`` removes a few more characters.
_RUST_WHITE_SPACE: Final = RUST_WHITE_SPACE


# What a -c value that this reader cannot parse must hold for Codex's TOML 1.1 reader to take
# it as anything but raw text: a string's quotes or escapes, an array's or a table's brackets.
_TOML_MARKS: Final = ('"', "'", "\\", "[", "{")


def _codex_setting(text: str) -> tuple[str, Any]:
    """One ``-c key=value`` as Codex reads it: the key (trimmed), and the value as TOML,
    else the raw text."""
    key, equals, raw = text.partition("=")
    if not equals:
        raise ConfigDoubt(f"codex -c {text!r}: not key=value")
    key, raw = key.strip(_RUST_WHITE_SPACE), raw.strip(_RUST_WHITE_SPACE)
    if not is_text(text):
        raise ConfigDoubt(f"codex -c {key}: the value holds bytes that are not UTF-8 text")
    try:
        return key, parse_toml(f"_x_ = {raw}".encode(), "-c")["_x_"]
    except (ConfigDoubt, KeyError):
        if any(mark in raw for mark in _TOML_MARKS):
            # Codex reads TOML 1.1 (its toml crate), this reader 1.0: a value holding a
            # quote, a bracket or a backslash may be TOML to Codex (``"\x69"``, an inline
            # table over lines) that is raw text here, naming another file than was read.
            raise ConfigDoubt(
                f"codex -c {key}: its value is not TOML as read here (TOML 1.0), and Codex "
                "reads TOML 1.1, which may take it otherwise than as raw text"
            ) from None
        return key, raw


def _nested(parts: Sequence[str], value: Any) -> Any:
    """``value`` under the keys ``parts`` (``a.b = v`` is ``{"a": {"b": v}}``)."""
    for part in reversed(parts):
        value = {part: value}
    return value


def _put(table: dict[str, Any], parts: Sequence[str], value: Any) -> None:
    """``table`` with ``value`` put in place at the keys ``parts`` (the whole table for
    none), replacing whatever was there."""
    if not parts:
        table.clear()
        table.update(value if isinstance(value, dict) else {})
        return
    for part in parts[:-1]:
        below = table.get(part)
        if not isinstance(below, dict):
            below = table[part] = {}
        table = below
    table[parts[-1]] = value


def _codex_override(text: str) -> list[tuple[str, list[str], Any]]:
    """One ``-c key=value`` of an ``mcp_servers`` key: its source, the keys below
    ``mcp_servers`` (the key split on every ``.``) and the value; none for any other key."""
    if text.partition("=")[0].strip(_RUST_WHITE_SPACE).split(".")[0] != "mcp_servers":
        return []
    key, value = _codex_setting(text)
    parts = key.split(".")
    if not parts[1:] and not isinstance(value, dict):
        raise ConfigDoubt(f"codex -c {text!r}: mcp_servers must be a table")
    # The source names the key only: the value may be a secret (an env entry).
    return [(f"-c {key}", parts[1:], value)] if parts[1:] or value else []


# Codex starts an enabled plugin's servers from the version it installed under
# ``$CODEX_HOME/plugins/cache/<marketplace>/<plugin>/``, its manifest able to name another
# file than ``.mcp.json``, and may install or refresh that cache itself at start-up.
_CODEX_PLUGIN: Final = (
    "enables a codex plugin, whose MCP servers (its .mcp.json, installed under "
    "$CODEX_HOME/plugins/cache) are not read here"
)


def _enabled_plugins(plugins: Any) -> list[str] | None:
    """The plugins a codex ``plugins`` table enables (each is on unless its ``enabled`` is
    false), or None when it is not a table."""
    if not isinstance(plugins, dict):
        return None
    return [
        name for name, entry in plugins.items()
        if not (isinstance(entry, dict) and entry.get("enabled", True) is False)
    ]  # fmt: skip


def _deep_merge(lower: dict[str, Any], higher: dict[str, Any]) -> dict[str, Any]:
    out = dict(lower)
    for key, value in higher.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out
