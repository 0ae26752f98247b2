"""What a node child runs, read from its arguments and environment: the legitimate forms are
understood with no doubt, and every form that can change which code loads is named as a doubt.
Where node's own reading is the question, the real node (when installed) is the judge."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from floorguard._identify.node_command import (
    NodeCommand,
    node_environment_doubts,
    node_options_preloads,
    parse_node_argv,
    split_node_options,
)

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")


def only_doubt(doubts: tuple[str, ...], *names: str) -> str:
    """The single doubt, checked to name every one of ``names``."""
    assert len(doubts) == 1, doubts
    for name in names:
        assert name in doubts[0], (name, doubts[0])
    return doubts[0]


# --- Legitimate commands: understood, no doubt ---------------------------------------------


@pytest.mark.parametrize(
    ("argv", "script", "script_args"),
    [
        (["cli.js", "--flag"], "cli.js", ("--flag",)),
        (["--max-old-space-size=4096", "cli.js"], "cli.js", ()),
        (["--max_old_space_size=4096", "cli.js"], "cli.js", ()),
        (["--no-warnings", "--enable-source-maps", "cli.js"], "cli.js", ()),
        (["--stack-size=2000", "--max-semi-space-size=64", "/o/c.mjs", "a"], "/o/c.mjs", ("a",)),
        (["--unhandled-rejections", "strict", "cli.js"], "cli.js", ()),
        (["--unhandled-rejections=warn-with-error-code", "cli.js"], "cli.js", ()),
        (["--title", "my agent", "--dns-result-order=ipv4first", "cli.js"], "cli.js", ()),
        (["--disable-warning=ExperimentalWarning", "--disable-warning", "DEP0", "c"], "c", ()),
        (["--tls-min-v1.2", "--use-openssl-ca", "--heapsnapshot-signal=SIGUSR2", "c"], "c", ()),
        (["--expose-gc", "--jitless", "--frozen-intrinsics", "--no-addons", "c.js"], "c.js", ()),
        (["--max-http-header-size", "16384", "c.js", "--", "x"], "c.js", ("--", "x")),
    ],
)  # fmt: skip
def test_allowlisted_options_before_the_script_raise_no_doubt(
    argv: list[str], script: str, script_args: tuple[str, ...]
) -> None:
    assert parse_node_argv(argv) == NodeCommand(script, "script", script_args, ())


def test_arguments_after_the_script_belong_to_the_script_never_to_node() -> None:
    command = parse_node_argv(["cli.js", "--require", "x"])
    assert command == NodeCommand("cli.js", "script", ("--require", "x"), ())


def test_double_dash_ends_options_and_the_next_argument_is_the_script_even_with_a_dash() -> None:
    assert parse_node_argv(["--", "--require", "x"]) == NodeCommand(
        "--require", "script", ("x",), ()
    )
    assert parse_node_argv(["--no-warnings", "--", "cli.js"]).script == "cli.js"


def test_a_lone_dash_reads_the_program_from_stdin_even_after_double_dash() -> None:
    assert parse_node_argv(["-", "--require", "x"]) == NodeCommand(
        None, "stdin", ("--require", "x"), ()
    )
    assert parse_node_argv(["--", "-"]).runs == "stdin"


def test_no_script_is_the_repl_on_a_terminal_and_stdin_otherwise() -> None:
    assert parse_node_argv([], stdin_is_terminal=True) == NodeCommand(None, "repl", (), ())
    assert parse_node_argv([]) == NodeCommand(None, "stdin", (), ())
    assert parse_node_argv(["--no-warnings"], stdin_is_terminal=False).runs == "stdin"


def test_an_empty_script_argument_is_a_doubt_because_node_then_reads_stdin() -> None:
    command = parse_node_argv(["", "a"])
    assert (command.script, command.runs, command.script_args) == (None, "stdin", ("a",))
    only_doubt(command.doubts, "empty")


@pytest.mark.parametrize("flag", ["-v", "--version", "-h", "--help", "--v8-options"])
def test_version_and_help_run_nothing(flag: str) -> None:
    assert parse_node_argv([flag, "cli.js"]) == NodeCommand(None, "nothing", ("cli.js",), ())


def test_running_nothing_still_reports_the_other_options() -> None:
    command = parse_node_argv(["--version", "--require", "./x.js"])
    assert command.runs == "nothing"
    only_doubt(command.doubts, "--require ./x.js")


# --- Code loaded before the program, or given on the command line ---------------------------


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--require=x", "cli.js"], "--require=x"),
        (["-r", "x", "cli.js"], "-r x"),
        (["--require", "./x.js", "cli.js"], "--require ./x.js"),
        (["--import=file:///x", "cli.js"], "--import=file:///x"),
        (["--import", "data:text/javascript,process.exit()", "cli.js"], "--import data:"),
        (["--experimental-loader", "x", "cli.js"], "--experimental-loader x"),
        (["--experimental_loader", "x", "cli.js"], "--experimental_loader x"),
        (["--loader=x", "cli.js"], "--loader=x"),
        (["-C", "evil", "cli.js"], "-C evil"),
        (["--conditions=evil", "cli.js"], "--conditions=evil"),
        (["--env-file=F", "cli.js"], "--env-file=F"),
        (["--env-file-if-exists", "F", "cli.js"], "--env-file-if-exists F"),
        (["--experimental-policy=p.json", "cli.js"], "--experimental-policy"),
        (["--preserve-symlinks", "cli.js"], "--preserve-symlinks"),
        (["--preserve-symlinks-main", "cli.js"], "--preserve-symlinks-main"),
        (["--experimental-network-imports", "cli.js"], "--experimental-network-imports"),
        (["--experimental-default-type=module", "cli.js"], "--experimental-default-type"),
        (["--input-type", "module", "cli.js"], "--input-type module"),
        (["--openssl-config=o.cnf", "cli.js"], "--openssl-config"),
        (["--openssl-shared-config", "cli.js"], "--openssl-shared-config"),
        (["--icu-data-dir=/d", "cli.js"], "--icu-data-dir"),
        (["--snapshot-blob", "s.blob", "cli.js"], "--snapshot-blob s.blob"),
        (["--build-snapshot", "cli.js"], "--build-snapshot"),
        (["--inspect", "cli.js"], "--inspect"),
        (["--inspect-brk=0.0.0.0:9229", "cli.js"], "--inspect-brk"),
        (["--inspect-port", "9229", "cli.js"], "--inspect-port 9229"),
        (["--watch", "cli.js"], "--watch"),
        (["--watch-path=src", "cli.js"], "--watch-path"),
        (["--test", "cli.js"], "--test"),
        (["--run", "build", "cli.js"], "--run build"),
        (["--experimental-vm-modules", "cli.js"], "--experimental-vm-modules"),
        (["--expose-internals", "cli.js"], "--expose-internals"),
        (["--some-future-option", "cli.js"], "--some-future-option"),
    ],
)
def test_every_option_off_the_allowlist_is_a_doubt_naming_it(argv: list[str], named: str) -> None:
    command = parse_node_argv(argv)
    only_doubt(command.doubts, named)
    # The option's value was read as node reads it: the script is still found.
    assert (command.script, command.runs) == ("cli.js", "script")


def test_code_loading_options_say_so() -> None:
    assert parse_node_argv(["--require", "./x.js", "cli.js"]).doubts == (
        "node option --require ./x.js loads code before the program",
    )


def test_combined_short_option_rx_is_unknown_to_node_and_refused() -> None:
    # node answers "bad option: -rx.js"; it is not "-r x.js", but it is a doubt either way.
    only_doubt(parse_node_argv(["-rx.js", "cli.js"]).doubts, "-rx.js")
    only_doubt(parse_node_argv(["-r=x.js", "cli.js"]).doubts, "-r=x.js")


@pytest.mark.parametrize(
    "argv",
    [["-e", "code"], ["--eval=code"], ["-p", "1"], ["--print", "1"], ["-pe", "1"]],
)
def test_code_on_the_command_line_runs_eval_and_is_a_doubt(argv: list[str]) -> None:
    command = parse_node_argv([*argv, "cli.js", "--require", "x"])
    assert (command.script, command.runs) == (None, "eval")
    # Node leaves the arguments after the code's options to the code; cli.js is not run.
    assert command.script_args == ("cli.js", "--require", "x")
    only_doubt(command.doubts, argv[0].split("=")[0], "code given on the command line")


def test_options_after_eval_code_but_before_any_argument_are_still_nodes() -> None:
    command = parse_node_argv(["-e", "code", "--require", "./x.js"])
    assert command.runs == "eval"
    assert len(command.doubts) == 2 and "--require ./x.js" in command.doubts[1]


def test_a_single_dash_v8_spelling_is_refused() -> None:
    # V8 would take -max-old-space-size=1 (node passes it on); only node's aliases pass here.
    only_doubt(parse_node_argv(["-max-old-space-size=1", "c.js"]).doubts, "-max-old-space-size")


# --- Values of allowlisted options ------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--max-old-space-size=0x10", "c.js"], "needs a number"),
        (["--max-old-space-size=4²", "c.js"], "needs a number"),
        (["--stack-size=", "c.js"], "needs a number"),
        (["--unhandled-rejections=bogus", "c.js"], "needs one of"),
        (["--dns-result-order=random", "c.js"], "needs one of"),
        (["--heapsnapshot-signal=BOGUS", "c.js"], "needs a signal"),
        (["--title=", "c.js"], "needs a title"),
        (["--no-warnings=1", "c.js"], "takes no value"),
        (["--jitless=1", "c.js"], "takes no value"),
    ],
)
def test_an_allowlisted_option_with_a_value_it_does_not_take_is_a_doubt(
    argv: list[str], named: str
) -> None:
    only_doubt(parse_node_argv(argv).doubts, argv[0], named)


def test_v8_options_take_only_the_equals_form_so_a_separate_value_becomes_the_script() -> None:
    # node: "illegal value for flag --max-old-space-size"; and 4096 sits in the script position.
    command = parse_node_argv(["--max-old-space-size", "4096", "cli.js"])
    assert (command.script, command.script_args) == ("4096", ("cli.js",))
    only_doubt(command.doubts, "--max-old-space-size", "needs =value")


def test_a_separate_value_starting_with_a_dash_is_refused_and_backslash_dash_escapes_it() -> None:
    command = parse_node_argv(["--title", "--require", "./x.js", "cli.js"])
    assert command.doubts[0] == "node option --title needs a value"
    assert "--require ./x.js" in command.doubts[1]
    assert parse_node_argv(["--title", "\\-x", "cli.js"]) == NodeCommand("cli.js", "script", (), ())


def test_option_names_are_case_sensitive() -> None:
    only_doubt(parse_node_argv(["--Max-old-space-size=10", "c.js"]).doubts, "--Max-old")


# --- Splitting NODE_OPTIONS -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "arguments"),
    [
        ("--max-old-space-size=8192", ["--max-old-space-size=8192"]),
        ("  --no-warnings   --title x  ", ["--no-warnings", "--title", "x"]),
        ('--title="a b"', ["--title=a b"]),
        ('--ti"tle=a b"c', ["--title=a bc"]),
        ('--title="a\\"b"', ['--title=a"b']),
        ('--title="a\\\\b"', ["--title=a\\b"]),
        ("--title=a\\b", ["--title=a\\b"]),
        ("--title=a\\ b", ["--title=a\\", "b"]),
        ('--title ""', ["--title"]),
        ("--no-warnings\t--title=x", ["--no-warnings\t--title=x"]),
        ("--title=a\nb", ["--title=a\nb"]),
        ("", []),
    ],
)
def test_node_options_split_on_spaces_with_double_quotes_and_escapes_inside_them(
    text: str, arguments: list[str]
) -> None:
    assert split_node_options(text) == arguments


@pytest.mark.parametrize("text", ['--title="ab', '--title="a\\', '"'])
def test_an_unterminated_quote_or_trailing_escape_in_node_options_is_an_error(text: str) -> None:
    with pytest.raises(ValueError, match="quote"):
        split_node_options(text)


def _node_title(node_options: str) -> subprocess.CompletedProcess[str]:
    assert NODE is not None
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("NODE_")}
    env["NODE_OPTIONS"] = node_options
    # The -e text is long on purpose: on Linux a title longer than node's own command line is cut.
    code = "process.stdout.write(JSON.stringify(process.title)) // " + "." * 40
    return subprocess.run(
        [NODE, "-e", code], env=env, capture_output=True, text=True, timeout=30, check=False
    )


@needs_node
@pytest.mark.parametrize(
    "text",
    [
        '--title="a b"',
        '--title="a\\"b"',
        "--title=a\\b",
        '--title="a\\\\b"',
        '--title=a"b c"d',
        '--ti"tle"="x y"',
        "  --no-warnings   --title   spaced  ",
        "--title=a\tb",
        "--title=a\nb",
        '--title "q\\ r"',
        '--title ""last ""',
        '--title="ab',
        '--title="a\\',
    ],
)
def test_node_options_splitting_matches_the_real_node(text: str) -> None:
    ran = _node_title(text)
    try:
        arguments = split_node_options(text)
    except ValueError:
        assert ran.returncode != 0 and "invalid value for NODE_OPTIONS" in ran.stderr
        return
    assert ran.returncode == 0, ran.stderr
    title = None
    for at, argument in enumerate(arguments):
        if argument.startswith("--title="):
            title = argument.removeprefix("--title=")
        elif argument == "--title" and at + 1 < len(arguments):
            title = arguments[at + 1]
    assert json.loads(ran.stdout) == title


@needs_node
def test_only_the_space_separates_node_options_as_the_real_node_shows() -> None:
    text = "--no-warnings\t--title=x"
    (argument,) = split_node_options(text)
    ran = _node_title(text)
    # node names the one argument it saw (up to its "="), tab included.
    assert ran.returncode != 0 and argument.split("=")[0] in ran.stderr


# --- NODE_OPTIONS and the rest of the environment ------------------------------------------


def test_allowlisted_environment_raises_no_doubt() -> None:
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "NODE_OPTIONS": "--max-old-space-size=8192 --no-warnings --title agent",
        "NODE_ENV": "production",
        "NODE_EXTRA_CA_CERTS": "/etc/ca.pem",
        "NODE_NO_WARNINGS": "1",
        "NODE_TLS_REJECT_UNAUTHORIZED": "1",
        "NODE_V8_COVERAGE": "/tmp/cov",
        "UV_THREADPOOL_SIZE": "8",
    }
    assert node_environment_doubts(environ) == ()


@pytest.mark.parametrize(
    ("node_options", "named"),
    [
        ("--require /old/cli.js", "--require /old/cli.js"),
        ("-r /old/cli.js", "-r /old/cli.js"),
        ("--max-old-space-size=1 --import=x", "--import=x"),
        ('--re"quire" ./x.js', "--require ./x.js"),
        ("--experimental_loader=./l.mjs", "--experimental_loader"),
        ("--env-file=.env", "--env-file"),
        ("--inspect=0.0.0.0:9229", "--inspect"),
        ("--no-warnings ./x.js", "./x.js"),
        ("--version", "--version"),
        ("--", "--"),
        ('--title "a', "unterminated"),
    ],
)
def test_node_options_off_the_allowlist_are_doubts_naming_the_option(
    node_options: str, named: str
) -> None:
    doubt = only_doubt(node_environment_doubts({"NODE_OPTIONS": node_options}), named)
    assert doubt.startswith("NODE_OPTIONS")


def test_node_options_code_loading_doubt_reads_as_such() -> None:
    assert node_environment_doubts({"NODE_OPTIONS": "--import x"}) == (
        "NODE_OPTIONS=... : option --import x loads code before the program",
    )


@pytest.mark.parametrize(
    "name",
    [
        "NODE_PATH",
        "NODE_PRESERVE_SYMLINKS",
        "NODE_REPL_EXTERNAL_MODULE",
        "NODE_COMPILE_CACHE",
        "NODE_ICU_DATA",
        "NODE_UNIQUE_ID",
        "NODE_CHANNEL_FD",
        "NODE_SOMETHING_NEW",
        "UV_USE_IO_URING",
        "OPENSSL_CONF",
        "OPENSSL_MODULES",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "DYLD_INSERT_LIBRARIES",
        "node_path",
    ],
)
def test_every_other_variable_node_reads_is_a_doubt_naming_it(name: str) -> None:
    only_doubt(node_environment_doubts({"PATH": "/usr/bin", name: "x"}), f"variable {name} ")


def test_node_path_doubt_says_what_it_changes() -> None:
    assert node_environment_doubts({"NODE_PATH": "/evil"}) == (
        "environment variable NODE_PATH changes where node finds modules",
    )


def test_a_thread_pool_size_that_is_not_a_number_is_a_doubt() -> None:
    only_doubt(node_environment_doubts({"UV_THREADPOOL_SIZE": "4; x"}), "UV_THREADPOOL_SIZE")


def test_the_modules_preload_options_name_are_reported_as_node_takes_them() -> None:
    command = parse_node_argv(
        ["-r", "./a.js", "--import=file:///b.mjs", "--loader", "c", "--experimental_loader=d",
         "--conditions", "e", "x.js", "-r", "not-node-s"]
    )  # fmt: skip
    assert command.preloads == (
        ("--require", "./a.js"), ("--import", "file:///b.mjs"), ("--loader", "c"),
        ("--experimental-loader", "d"),
    )  # fmt: skip
    assert command.script == "x.js"
    files = parse_node_argv(["--env-file", "a.env", "--env-file-if-exists=b.env", "x.js"])
    assert files.env_files == ("a.env", "b.env")
    assert parse_node_argv(["-r"]).preloads == ()  # node stops: no value


def test_the_modules_node_options_preload_are_reported_as_node_splits_them() -> None:
    environ = {"NODE_OPTIONS": '--require "/a b/c.js" --no-warnings --import=d', "X": "-r e"}
    assert node_options_preloads(environ) == (("--require", "/a b/c.js"), ("--import", "d"))
    assert node_options_preloads({"NODE_OPTIONS": '--require "unterminated'}) == ()


def test_doubts_come_in_the_order_met() -> None:
    environ = {"NODE_PATH": "/a", "NODE_OPTIONS": "-r x --import y", "LD_PRELOAD": "/l.so"}
    doubts = node_environment_doubts(environ)
    named = ["variable NODE_PATH", "option -r x", "option --import y", "variable LD_PRELOAD"]
    assert len(doubts) == len(named)
    for doubt, name in zip(doubts, named, strict=True):
        assert name in doubt


# --- The real node agrees on where the script is -----------------------------------------


@needs_node
@pytest.mark.parametrize(
    "argv",
    [
        ["--no-warnings", "{cli}", "--require", "x"],
        ["--title", "t t", "--unhandled-rejections", "strict", "{cli}", "a", "-"],
        ["--max_old_space_size=64", "--", "{cli}", "--", "b"],
        ["--disable-warning", "DEP0005", "{cli}", "--import=y"],
    ],
)
def test_the_real_node_runs_the_script_and_arguments_reported(
    tmp_path: Path, argv: list[str]
) -> None:
    assert NODE is not None
    cli = tmp_path / "cli.js"
    cli.write_text("process.stdout.write(JSON.stringify(process.argv.slice(1)))\n")
    concrete = [str(cli) if a == "{cli}" else a for a in argv]
    command = parse_node_argv(concrete)
    assert command.runs == "script" and command.doubts == ()
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("NODE_")}
    ran = subprocess.run(
        [NODE, *concrete], env=env, capture_output=True, text=True, timeout=30, check=True
    )
    assert json.loads(ran.stdout) == [command.script, *command.script_args]
