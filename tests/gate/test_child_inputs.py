"""What every judged child is given, checked before anything is decided: inputs the kernel
cannot pass, and variables that load code into any program (the loader's, iconv's,
OpenSSL's, and a PATH searched from the child's working directory) or make a shell it starts
run other code."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from floorguard._identify.child_inputs import (
    interpreter_start_up,
    invalid_inputs,
    loader_doubts,
    loading_variables,
    shell_start_up,
)


@pytest.mark.parametrize(
    ("argv", "environ", "cwd", "named"),
    [
        (["a\x00b"], {}, None, "argument 1 contains a NUL byte"),
        ([], {"A": "x\x00"}, None, "environment variable A contains a NUL byte"),
        ([], {"A=B": "x"}, None, "environment variable name 'A=B' cannot be passed"),
        ([], {"": "x"}, None, "environment variable name '' cannot be passed"),
        ([], {}, "/tmp/\x00", "the working directory contains a NUL byte"),
    ],
)
def test_inputs_the_kernel_cannot_pass_are_named(
    argv: list[str], environ: dict[str, str], cwd: str | None, named: str
) -> None:
    problem = invalid_inputs(argv, environ, cwd)
    assert problem is not None and problem.startswith(named), problem


def test_ordinary_inputs_pass() -> None:
    assert invalid_inputs(["--yes", "é"], {"HOME": "/root", "EMPTY": ""}, "/tmp") is None


@pytest.mark.parametrize(
    "name", ["LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "GCONV_PATH", "OPENSSL_CONF",
             "OPENSSL_ENGINES", "OPENSSL_MODULES", "LOCPATH", "LOCALE_ARCHIVE"],
)  # fmt: skip
def test_variables_that_load_code_into_any_program_are_doubts(name: str) -> None:
    [doubt] = loader_doubts({"PATH": "/usr/bin", name: "/x"})
    assert doubt.startswith(f"environment variable {name} "), doubt


def test_loader_variables_that_load_nothing_are_not_doubts() -> None:
    environ = {"PATH": "/usr/bin:/bin", "LD_BIND_NOW": "1", "LD_BIND_NOT": "1", "LD_WARN": "1"}
    assert loader_doubts(environ) == ()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("BASH_FUNC_node%%", "() { echo; }"),
        ("BASH_FUNC_node()", "() { echo; }"),
        ("BASH_FUNC_x", ""),
        ("node", "() { echo; }"),
    ],
)
def test_a_shell_function_exported_to_any_bash_of_the_child_is_a_doubt(
    name: str, value: str
) -> None:
    [doubt] = loader_doubts({"PATH": "/usr/bin:/bin", name: value})
    assert name in doubt and "function" in doubt and "echo" not in doubt


@pytest.mark.parametrize(
    "name",
    ["BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "ZDOTDIR", "FPATH",
     "PERL5OPT", "PERL5LIB", "PERLLIB", "RUBYOPT", "RUBYLIB", "TCL_LIBRARY", "TCLLIBPATH",
     "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "LUA_INIT", "LUA_INIT_5_4",
     "LUA_PATH", "LUA_CPATH_5_1", "GEM_PATH", "GEM_HOME", "RUBYPATH", "CLASSPATH",
     "TCL8_6_TM_PATH", "TCL8_5_TM_PATH", "READNULLCMD", "NULLCMD", "CDPATH", "PERL5DB",
     "BASH_LOADABLES_PATH"],
)  # fmt: skip
def test_a_variable_that_makes_a_shell_of_the_child_run_code_is_a_doubt(name: str) -> None:
    [doubt] = loader_doubts({"PATH": "/usr/bin:/bin", name: "/tmp/evil.sh"})
    assert doubt.startswith(f"environment variable {name} ") and "evil" not in doubt


@pytest.mark.parametrize("value", ["()", "(x) {", " () {", "{ () {"])
def test_a_value_bash_would_not_take_for_a_function_is_no_doubt(value: str) -> None:
    assert loader_doubts({"PATH": "/usr/bin:/bin", "GREETING": value}) == ()


def test_a_relative_path_entry_is_named_by_its_place_not_its_text() -> None:
    [doubt] = loader_doubts({"PATH": "/usr/bin:sk-SECRET13/bin"})
    assert doubt.startswith("entry 2 of PATH is relative") and "SECRET" not in doubt, doubt


@pytest.mark.parametrize("path", ["bin:/usr/bin", "/usr/bin:", "/usr/bin::/bin", ""])
def test_a_path_with_a_relative_or_empty_entry_is_a_doubt(path: str) -> None:
    [doubt] = loader_doubts({"PATH": path})
    assert "is relative: the child searches it in its working directory" in doubt


def test_no_path_at_all_is_no_doubt() -> None:
    assert loader_doubts({}) == ()


_NAMES = st.sampled_from(
    [
        "LD_PRELOAD",
        "LD_BIND_NOW",
        "LD_",
        "XLD_PRELOAD",
        "GCONV_PATH",
        "BASH_FUNC_x%%",
        "BASH_FUNC_",
        "XBASH_FUNC_x",
        "BASH_ENV",
        "PS4",
        "HOME",
        "TERM",
        "ENVX",
        "ENV",
    ]
) | st.text(alphabet="ABLD_F", min_size=1, max_size=12)
_VALUES = st.sampled_from(["", "x", "() {", "() { echo; }", " () {", "a() {"]) | st.text(max_size=8)


@given(st.dictionaries(_NAMES, _VALUES, max_size=8))
def test_each_variable_is_named_as_if_every_one_were_looked_at_in_turn(
    environ: dict[str, str],
) -> None:
    """The names and values are searched as one text before any is looked at alone: the
    variables named are those a look at each one in turn would name."""
    expected = {
        name
        for name, value in environ.items()
        if (name.startswith("LD_") and name not in {"LD_BIND_NOW", "LD_BIND_NOT", "LD_WARN"})
        or name in {"GCONV_PATH", "OPENSSL_CONF", "OPENSSL_ENGINES", "OPENSSL_MODULES",
                    "LOCPATH", "LOCALE_ARCHIVE", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS",
                    "PS4", "PROMPT_COMMAND", "ZDOTDIR", "FPATH", "PERL5OPT", "PERL5LIB",
                    "PERLLIB", "RUBYOPT", "RUBYLIB", "TCL_LIBRARY", "TCLLIBPATH",
                    "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS",
                    "BASH_LOADABLES_PATH", "CDPATH", "NULLCMD", "READNULLCMD", "PERL5DB",
                    "RUBYPATH", "GEM_PATH", "GEM_HOME", "CLASSPATH"}
        or name.startswith(("BASH_FUNC_", "LUA_INIT", "LUA_PATH", "LUA_CPATH", "TCL8_", "TCL9_"))
        or value.startswith("() {")
    }  # fmt: skip
    named = [doubt.split()[2] for doubt in loading_variables(environ) + shell_start_up(environ)]
    assert set(named) == expected


MIXED = {
    "PYTHONPATH": "lib", "NODE_OPTIONS": "--require x", "_PYTHON_SYSCONFIGDATA_NAME": "m",
    "PYTHONUNBUFFERED": "1", "NODE_ENV": "production", "PATH": "/usr/bin",
}  # fmt: skip


@pytest.mark.parametrize(
    ("judged", "named"),
    [
        (None, ["NODE_OPTIONS", "PYTHONPATH", "_PYTHON_SYSCONFIGDATA_NAME"]),
        ("python", ["NODE_OPTIONS"]),  # (its own PYTHON* and _PYTHON_ ones: the Python rules)
        ("node", ["PYTHONPATH", "_PYTHON_SYSCONFIGDATA_NAME"]),  # (its NODE_*: node's rules)
    ],
)
def test_what_a_python_or_node_started_by_the_child_reads_is_named_but_its_own(
    judged: str | None, named: list[str]
) -> None:
    doubts = interpreter_start_up(MIXED, judged)
    assert [d.split()[2] for d in doubts] == named, doubts
    assert interpreter_start_up({"PATH": "/usr/bin", "NODE_ENV": "x"}, judged) == ()
