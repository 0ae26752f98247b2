"""What a ``node`` child will run, read from its arguments and environment, and what is doubtful.

A spawn of ``node cli.js`` is only as safe as the code node actually loads, and node takes
that decision from more than the script path: options such as ``--require`` or ``--import``
load code before the program, ``--env-file`` can set ``NODE_OPTIONS`` from a file,
``NODE_PATH`` moves module resolution, and so on. New ways keep being added with every node
release, so this module does not hunt for tricks. It holds *allowlists* of the options and
environment variables it understands (none of which changes which code loads) and reports
every other input as a "doubt": a short phrase naming the input. A caller that wants to vouch
for the script must refuse the spawn when there is any doubt.

Everything here is pure (no I/O, no process state): the caller passes the argument vector,
the environment, and whether stdin is a terminal.

How node reads its command line (checked against node v20):

* Options come first. The first argument that does not start with ``-`` is the script and
  everything after it belongs to the script, never to node. ``--`` ends the options (the
  argument after it is the script even if it starts with ``-``); a lone ``-`` means "read the
  program from stdin", and so does an empty script argument.
* Long options take ``--opt=value``; options node itself defines also take ``--opt value``
  (a value starting with ``-`` is refused, and a leading ``\\-`` stands for ``-``). Options
  node hands to V8 (``--max-old-space-size``, ``--stack-size``) take only ``=value``.
* Underscores in a long option's name count as dashes (``--max_old_space_size``,
  ``--experimental_loader``): names are normalised before any lookup, so no spelling slips
  past the allowlist. Single-dash spellings other than node's own short aliases (V8 would
  accept ``-max-old-space-size=1``) are refused.

Environment. Names are judged within the namespaces read by node and the libraries inside
its process: ``NODE_*`` (node), ``UV_*`` (libuv), ``OPENSSL_*`` (OpenSSL: its configuration
can load engines and providers, that is native code), and ``LD_*`` / ``DYLD_*`` (the dynamic
loader that starts node, which can preload libraries). Within them only the allowlisted names
pass. Of libuv's variables only ``UV_THREADPOOL_SIZE`` is understood: the others tune I/O
internals (``UV_USE_IO_URING``), none is needed to run a CLI, and refusing what we have not
read is the rule. ``NODE_V8_COVERAGE`` is allowed: it only makes node write coverage files when
it exits (test runners set it for their children) and never changes what loads. Names are
compared case-insensitively, as Windows does; on POSIX that can only add doubts.

Not covered here (examine and node_resolution handle them): files that steer loading
(package.json ``type``/``exports``, ``node_modules`` layout, the ``node_modules`` above the
program's install tree, and ``$HOME/.node_modules`` / ``$HOME/.node_libraries``, which
CommonJS ``require`` searches as a last resort), and which ``node`` binary PATH selects.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

__all__ = [
    "NodeCommand",
    "node_environment_doubts",
    "node_options_preloads",
    "parse_node_argv",
    "split_node_options",
]

RUNS_SCRIPT: Final = "script"
RUNS_EVAL: Final = "eval"
RUNS_STDIN: Final = "stdin"
RUNS_REPL: Final = "repl"
RUNS_NOTHING: Final = "nothing"


@dataclass(frozen=True)
class NodeCommand:
    """What ``node <argv>`` runs.

    ``script`` is the main script argument exactly as given, and is set only when node will
    load it as the program (``runs == "script"``); ``runs`` is one of ``script``, ``eval``
    (``-e``/``-p``), ``stdin`` (``-``, an empty script argument, or no script with stdin not a
    terminal), ``repl`` (no script, stdin a terminal), ``nothing`` (``--version``, ``--help``,
    ``--v8-options``); ``script_args`` the arguments node leaves to the program (after the
    script, or after ``-``; every positional argument when nothing or code from ``-e`` runs);
    ``doubts`` every input not understood, in the order met. Any doubt means the caller cannot
    know which code loads.
    """

    script: str | None
    runs: str
    script_args: tuple[str, ...]
    doubts: tuple[str, ...]
    # What the preload options name, as given, with the option (``("--require", X)``,
    # ``("--import", X)``, a loader's): code node runs before the program, read by the caller
    # for whose code it is; and the env files node reads (``--env-file``,
    # ``--env-file-if-exists``), whose NODE_OPTIONS may preload more.
    preloads: tuple[tuple[str, str], ...] = ()
    env_files: tuple[str, ...] = ()


# --- The option allowlist ---------------------------------------------------------------

_DIGITS: Final = re.compile(r"[0-9]+")
_SIGNAL: Final = re.compile(r"SIG[A-Z0-9]+")


def _is_number(value: str) -> bool:
    # re, not str.isdigit: isdigit also accepts "²" and other non-ASCII digits.
    return _DIGITS.fullmatch(value) is not None


@dataclass(frozen=True)
class _ValueRule:
    """How an allowlisted option takes its value."""

    # Options node defines itself also read "--opt value"; the ones node passes to V8 do not.
    separate: bool
    valid: Callable[[str], bool]
    expected: str


def _one_of(*choices: str) -> _ValueRule:
    return _ValueRule(True, frozenset(choices).__contains__, "one of " + ", ".join(choices))


_NUMBER_V8: Final = _ValueRule(False, _is_number, "a number")

# Allowed options that take no value. None of them decides which code is loaded.
_ALLOWED_FLAGS: Final = frozenset({
    "--no-warnings", "--no-deprecation", "--trace-warnings", "--trace-deprecation",
    "--throw-deprecation", "--pending-deprecation", "--trace-uncaught",
    "--enable-source-maps",
    "--use-openssl-ca", "--use-bundled-ca",
    "--tls-min-v1.0", "--tls-min-v1.1", "--tls-min-v1.2", "--tls-min-v1.3",
    "--tls-max-v1.2", "--tls-max-v1.3",
    "--expose-gc", "--abort-on-uncaught-exception", "--no-addons", "--frozen-intrinsics",
    "--disallow-code-generation-from-strings", "--zero-fill-buffers", "--jitless",
})  # fmt: skip

# Allowed options that take a value, and which values.
_ALLOWED_VALUED: Final[Mapping[str, _ValueRule]] = {
    "--max-old-space-size": _NUMBER_V8,
    "--max-semi-space-size": _NUMBER_V8,
    "--stack-size": _NUMBER_V8,
    "--max-http-header-size": _ValueRule(True, _is_number, "a number"),
    "--unhandled-rejections": _one_of("strict", "warn", "throw", "none", "warn-with-error-code"),
    "--dns-result-order": _one_of("verbatim", "ipv4first", "ipv6first"),
    "--heapsnapshot-signal": _ValueRule(True, lambda v: bool(_SIGNAL.fullmatch(v)), "a signal"),
    "--title": _ValueRule(True, bool, "a title"),
    "--disable-warning": _ValueRule(True, bool, "a warning code or type"),
}

_RUNS_NOTHING: Final = frozenset({"--version", "--help", "--v8-options"})
# Options whose value is a module node loads and runs before the program.
_PRELOADS: Final = frozenset({"--require", "--import", "--loader", "--experimental-loader"})
_ENV_FILES: Final = frozenset({"--env-file", "--env-file-if-exists"})
_EVAL: Final = frozenset({"--eval", "--print"})

# node's single-dash spellings. "-pe" is "--print --eval": both print the code's result.
_SHORT_ALIASES: Final[Mapping[str, str]] = {
    "-v": "--version", "-h": "--help", "-e": "--eval", "-p": "--print", "-pe": "--print",
    "-r": "--require", "-C": "--conditions", "-c": "--check", "-i": "--interactive",
}  # fmt: skip

# Options outside the allowlist that read "--opt value" (node v20's string, number, list and
# host:port options, plus later releases' common ones). They are doubts anyway; knowing they
# swallow the next argument keeps the script reported where node finds it.
_REFUSED_WITH_VALUE: Final = frozenset({
    "--require", "--import", "--experimental-loader", "--loader", "--conditions",
    "--env-file", "--env-file-if-exists", "--experimental-default-type", "--input-type",
    "--experimental-policy", "--policy-integrity", "--openssl-config", "--icu-data-dir",
    "--snapshot-blob", "--build-snapshot-config", "--experimental-sea-config",
    "--inspect-port", "--debug-port", "--inspect-publish-uid", "--watch-path",
    "--test-concurrency", "--test-name-pattern", "--test-reporter",
    "--test-reporter-destination", "--test-shard", "--test-timeout", "--allow-fs-read",
    "--allow-fs-write", "--cpu-prof-dir", "--cpu-prof-interval", "--cpu-prof-name",
    "--diagnostic-dir", "--disable-proto", "--heap-prof-dir", "--heap-prof-interval",
    "--heap-prof-name", "--heapsnapshot-near-heap-limit",
    "--network-family-autoselection-attempt-timeout", "--redirect-warnings", "--report-dir",
    "--report-directory", "--report-filename", "--report-signal", "--secure-heap",
    "--secure-heap-min", "--security-revert", "--security-reverts", "--tls-cipher-list",
    "--tls-keylog", "--trace-event-categories", "--trace-event-file-pattern",
    "--trace-require-module", "--use-largepages", "--v8-pool-size",
    # Later releases.
    "--run", "--experimental-config-file", "--localstorage-file", "--test-isolation",
    "--test-coverage-include", "--test-coverage-exclude", "--test-global-setup",
    "--watch-kill-signal",
})  # fmt: skip

_LOADS_CODE: Final = "loads code before the program"
_MODULE_RESOLUTION: Final = "changes how node finds or reads modules"
_REFUSED_REASONS: Final[Mapping[str, str]] = {
    "--require": _LOADS_CODE,
    "--import": _LOADS_CODE,
    "--experimental-loader": _LOADS_CODE,
    "--loader": _LOADS_CODE,
    "--eval": "runs code given on the command line",
    "--print": "runs code given on the command line",
    "--env-file": "reads environment variables (NODE_OPTIONS among them) from a file",
    "--env-file-if-exists": "reads environment variables (NODE_OPTIONS among them) from a file",
    "--conditions": _MODULE_RESOLUTION,
    "--preserve-symlinks": _MODULE_RESOLUTION,
    "--preserve-symlinks-main": _MODULE_RESOLUTION,
    "--experimental-default-type": _MODULE_RESOLUTION,
    "--input-type": _MODULE_RESOLUTION,
    "--experimental-network-imports": "lets modules be imported from the network",
    "--experimental-policy": "hands module loading to a policy file",
    "--openssl-config": "makes OpenSSL read a configuration that can load native code",
    "--openssl-shared-config": "makes OpenSSL read a configuration that can load native code",
    "--icu-data-dir": "replaces the data node starts from",
    "--snapshot-blob": "replaces the heap node starts from",
    "--build-snapshot": "runs the script to build a snapshot",
    "--run": "runs a package.json script instead of a program",
    "--interactive": "starts a REPL",
    "--check": "checks the script instead of running it",
}
# Families, judged by prefix once the exact names above have been tried.
_REFUSED_FAMILIES: Final = (
    ("--inspect", "opens a debugger through which any code can run"),
    ("--debug", "opens a debugger through which any code can run"),
    ("--watch", "reruns the program when files change"),
    ("--test", "runs test files instead of the program"),
    ("--experimental-", "turns on an experimental feature not on the allowlist"),
)
_NOT_ALLOWED: Final = "is not on the allowlist"


def _refusal_reason(name: str) -> str:
    if name in _REFUSED_REASONS:
        return _REFUSED_REASONS[name]
    for prefix, reason in _REFUSED_FAMILIES:
        if name.startswith(prefix):
            return reason
    return _NOT_ALLOWED


SHOWN_LENGTH: Final = 60  # (the most of an argument a doubt shows)


def shown(text: str) -> str:
    """``text`` cut short as a doubt shows it."""
    return text if len(text) <= SHOWN_LENGTH else text[: SHOWN_LENGTH - 3] + "..."


def _shown(text: str) -> str:
    """``text`` as it appears in a doubt: short, and quoted when it holds spaces or controls."""
    text = shown(text)
    if text and text.isprintable() and " " not in text:
        return text
    return repr(text)


# --- Reading options ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Option:
    """One option met while scanning: its canonical name, where scanning resumes, and why it
    is doubtful (None when it is allowed)."""

    name: str
    next_index: int
    doubt: str | None
    value: str | None = None  # (a refused option's value, as node takes it)


def _separate_value(args: Sequence[str], at: int) -> str | None:
    """The value of ``--opt value`` at ``args[at]``, as node reads it (None when missing)."""
    if at >= len(args) or args[at].startswith("-"):
        return None  # node stops: "--opt requires an argument".
    value = args[at]
    return value[1:] if value.startswith("\\-") else value  # "\-x" is how to write "-x".


def _read_option(args: Sequence[str], at: int) -> _Option:
    """The option at ``args[at]`` (which starts with ``-`` and is not ``-`` or ``--``)."""
    written = args[at]
    inline: str | None = None
    if written.startswith("--"):
        before, equals, after = written.partition("=")
        name = "--" + before[2:].replace("_", "-")
        if equals:
            inline = after
    else:
        # Only long options take "=value"; "-r=x" is simply an unknown option to node.
        name = _SHORT_ALIASES.get(written, written)

    def doubt(shown: str, reason: str) -> str:
        return f"option {shown} {reason}"

    def with_value(value_at: int) -> str:
        return f"{_shown(written)} {_shown(args[value_at])}"

    if name in _ALLOWED_FLAGS or name in _RUNS_NOTHING:
        if inline is not None:
            return _Option(name, at + 1, doubt(_shown(written), "takes no value"))
        return _Option(name, at + 1, None)

    rule = _ALLOWED_VALUED.get(name)
    if rule is not None:
        if inline is not None:
            value, shown, resume = inline, _shown(written), at + 1
        elif not rule.separate:
            return _Option(name, at + 1, doubt(_shown(written), "needs =value"))
        else:
            separate = _separate_value(args, at + 1)
            if separate is None:
                return _Option(name, at + 1, doubt(_shown(written), "needs a value"))
            value, shown, resume = separate, with_value(at + 1), at + 2
        if not rule.valid(value):
            return _Option(name, resume, doubt(shown, f"needs {rule.expected}"))
        return _Option(name, resume, None)

    # Refused: consume its value the way node would, so the script is found where node finds it.
    shown, resume, taken = _shown(written), at + 1, inline
    takes_value = name in _REFUSED_WITH_VALUE or name in _EVAL
    if inline is None and takes_value:
        taken = _separate_value(args, at + 1)
        if taken is not None:
            shown, resume = with_value(at + 1), at + 2
    return _Option(name, resume, doubt(shown, _refusal_reason(name)), taken)


def parse_node_argv(argv: Sequence[str], *, stdin_is_terminal: bool = False) -> NodeCommand:
    """What node runs given ``argv``, the arguments after the node program itself.

    ``stdin_is_terminal`` only matters when there is no script: node then starts a REPL on a
    terminal and otherwise runs stdin as the program. It defaults to False, the reading that
    does not assume a human is typing."""
    doubts: list[str] = []
    preloads: list[tuple[str, str]] = []
    env_files: list[str] = []
    runs_nothing = evaluates = interactive = False
    at = 0
    while at < len(argv):
        arg = argv[at]
        if arg == "--":
            at += 1
            break
        if arg == "-" or not arg.startswith("-"):
            break
        option = _read_option(argv, at)
        if option.doubt is not None:
            doubts.append("node " + option.doubt)
        if option.name in _PRELOADS and option.value is not None:
            preloads.append((option.name, option.value))
        if option.name in _ENV_FILES and option.value is not None:
            env_files.append(option.value)
        runs_nothing = runs_nothing or option.name in _RUNS_NOTHING
        evaluates = evaluates or option.name in _EVAL
        interactive = interactive or option.name == "--interactive"
        at = option.next_index
    positional = tuple(argv[at:])

    def made(script: str | None, runs: str, args: tuple[str, ...]) -> NodeCommand:
        return NodeCommand(script, runs, args, tuple(doubts), tuple(preloads), tuple(env_files))

    without_script = RUNS_REPL if interactive or stdin_is_terminal else RUNS_STDIN

    # --version and --help win over everything; code from -e wins over a script argument.
    if runs_nothing:
        return made(None, RUNS_NOTHING, positional)
    if evaluates:
        return made(None, RUNS_EVAL, positional)
    if not positional:
        return made(None, without_script, ())
    first, rest = positional[0], positional[1:]
    if first == "-":
        return made(None, RUNS_STDIN, rest)
    if first == "":
        doubts.append("node script argument '' is empty: node reads the program from stdin")
        return made(None, without_script, rest)
    return made(first, RUNS_SCRIPT, rest)


# --- NODE_OPTIONS -------------------------------------------------------------------------


def split_node_options(text: str) -> list[str]:
    """NODE_OPTIONS split into arguments exactly as node splits it.

    Only the space character separates (a tab or newline is part of an argument); double
    quotes group and are dropped, so ``--title="a b"`` and ``--ti"tle=a b"`` both give
    ``--title=a b``; inside quotes a backslash makes the next character literal, outside it is
    an ordinary character; quotes with nothing in them make no argument. Raises ValueError for
    an unterminated quote or a backslash ending the text inside quotes, which node rejects.
    """
    arguments: list[str] = []
    current: list[str] | None = None  # None between arguments
    quoted = False
    chars = iter(text)
    for met in chars:
        char = met
        if quoted and char == "\\":
            escaped = next(chars, None)
            if escaped is None:
                raise ValueError("a backslash ends the text inside double quotes")
            char = escaped
        elif char == " " and not quoted:
            if current is not None:
                arguments.append("".join(current))
                current = None
            continue
        elif char == '"':
            quoted = not quoted
            continue
        if current is None:
            current = []
        current.append(char)
    if quoted:
        raise ValueError("unterminated double quote")
    if current is not None:
        arguments.append("".join(current))
    return arguments


def _node_options_doubts(text: str) -> list[str]:
    prefix = "NODE_OPTIONS=... : "
    try:
        arguments = split_node_options(text)
    except ValueError as error:
        return [f"{prefix}cannot be split ({error})"]
    doubts: list[str] = []
    at = 0
    while at < len(arguments):
        arg = arguments[at]
        if arg in {"-", "--"} or not arg.startswith("-"):
            # node ignores or rejects these; nothing but options belongs in NODE_OPTIONS.
            doubts.append(f"{prefix}argument {_shown(arg)} is not an option")
            at += 1
            continue
        option = _read_option(arguments, at)
        if option.doubt is not None:
            doubts.append(prefix + option.doubt)
        elif option.name in _RUNS_NOTHING:
            doubts.append(f"{prefix}option {_shown(arg)} does not belong in NODE_OPTIONS")
        at = option.next_index
    return doubts


def node_options_preloads(environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """What the preload options in ``environ``'s NODE_OPTIONS name, with the option, as node
    splits it (none when it cannot be split: that is a doubt already)."""
    preloads: list[tuple[str, str]] = []
    for name, text in environ.items():
        if name.upper() != "NODE_OPTIONS":
            continue
        try:
            arguments = split_node_options(text)
        except ValueError:
            continue
        at = 0
        while at < len(arguments):
            if arguments[at] in {"-", "--"} or not arguments[at].startswith("-"):
                at += 1
                continue
            option = _read_option(arguments, at)
            if option.name in _PRELOADS and option.value is not None:
                preloads.append((option.name, option.value))
            at = option.next_index
    return tuple(preloads)


# --- Environment --------------------------------------------------------------------------

# Variables node (or a library in its process) reads that never change which code loads.
_ALLOWED_VARIABLES: Final = frozenset({
    "NODE_EXTRA_CA_CERTS", "NODE_NO_WARNINGS", "NODE_DEBUG", "NODE_DEBUG_NATIVE", "NODE_ENV",
    "NODE_TLS_REJECT_UNAUTHORIZED", "NODE_DISABLE_COLORS", "NODE_PENDING_DEPRECATION",
    "NODE_REDIRECT_WARNINGS", "NODE_SKIP_PLATFORM_CHECK", "NODE_USE_ENV_PROXY",
    "NODE_REPL_HISTORY", "NODE_V8_COVERAGE", "UV_THREADPOOL_SIZE",
})  # fmt: skip
# Allowed variables whose value is checked too.
_VARIABLE_VALUES: Final[Mapping[str, Callable[[str], bool]]] = {"UV_THREADPOOL_SIZE": _is_number}
_WATCHED_PREFIXES: Final = ("NODE_", "UV_", "OPENSSL_", "LD_", "DYLD_")
_LOADER: Final = "is read by the dynamic loader that starts node (it can load native code)"
_VARIABLE_REASONS: Final[Mapping[str, str]] = {
    "NODE_PATH": "changes where node finds modules",
    "NODE_PRESERVE_SYMLINKS": "changes how node resolves modules",
    "NODE_REPL_EXTERNAL_MODULE": "loads a module in place of the REPL",
    "NODE_COMPILE_CACHE": "makes node run compiled code from a cache directory",
    "NODE_ICU_DATA": "replaces the data node starts from",
    "NODE_UNIQUE_ID": "makes node start as a cluster worker",
    "NODE_CHANNEL_FD": "connects node to a parent process that can send it work",
    "OPENSSL_CONF": "makes OpenSSL read a configuration that can load native code",
    "OPENSSL_ENGINES": "tells OpenSSL where to load native engines from",
    "OPENSSL_MODULES": "tells OpenSSL where to load native providers from",
}


def _variable_reason(name: str) -> str:
    if name in _VARIABLE_REASONS:
        return _VARIABLE_REASONS[name]
    if name.startswith(("LD_", "DYLD_")):
        return _LOADER
    return "is not on the allowlist of variables node reads"


def node_environment_doubts(environ: Mapping[str, str]) -> tuple[str, ...]:
    """Every input in ``environ`` that node (or a library in its process) reads and that is not
    understood, in the mapping's order. NODE_OPTIONS is split and its options checked against
    the same allowlist as the command line."""
    doubts: list[str] = []
    for name, value in environ.items():
        folded = name.upper()
        if folded == "NODE_OPTIONS":
            doubts.extend(_node_options_doubts(value))
        elif folded in _ALLOWED_VARIABLES:
            valid = _VARIABLE_VALUES.get(folded)
            if valid is not None and not valid(value):
                doubts.append(f"environment variable {name}={_shown(value)} is not understood")
        elif folded.startswith(_WATCHED_PREFIXES):
            doubts.append(f"environment variable {name} {_variable_reason(folded)}")
    return tuple(doubts)
