"""python_command: a Python child's command line and environment, read as CPython reads them.

Each test names a behaviour or an attack. Legitimate invocations parse with no doubt;
anything that adds code, moves where code comes from, or is not understood is a doubt
(the runtime refuses it). The last part runs real interpreters to confirm the parse.
"""

from __future__ import annotations

import glob
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from floorguard._identify.python_command import (
    PythonCommand,
    parse_python_argv,
    python_environment_doubts,
    shebang_arguments,
)


def parse(line: str) -> PythonCommand:
    return parse_python_argv(line.split())


def assert_clean(command: PythonCommand) -> None:
    assert command.doubts == (), command.doubts


def env_doubts(environ: dict[str, str], line: str = "-m aider") -> tuple[str, ...]:
    return python_environment_doubts(environ, parse(line))


# --- legitimate command lines: understood, no doubt ------------------------------------


def test_module_run_names_the_module_and_its_arguments() -> None:
    command = parse("-m aider --model x")
    assert (command.runs, command.value, command.args) == ("module", "aider", ("--model", "x"))
    assert command.flags == frozenset()
    assert_clean(command)


def test_isolated_module_run_records_the_isolation_flag() -> None:
    command = parse("-I -m aider")
    assert (command.runs, command.value, command.flags) == ("module", "aider", frozenset("I"))
    assert_clean(command)


@pytest.mark.parametrize(
    "line",
    [
        "-X utf8 -m aider",
        "-Xutf8 -m aider",
        "-Wignore -m aider",
        "-W ignore -m aider",
        "-Wd -m aider",
        "-Werror::DeprecationWarning -m aider",
        "-W error::DeprecationWarning -m aider",
        "-W ignore:some_message:UserWarning:mod.sub:12 -m aider",
        "-W all -m aider",
        "-b -B -d -O -OO -q -R -u -v -t -m aider",
        "-bBdOqRuv -m aider",
        "--check-hash-based-pycs default -m aider",
        "--check-hash-based-pycs always -m aider",
    ],
)
def test_options_that_leave_the_loaded_code_unchanged_are_understood(line: str) -> None:
    command = parse(line)
    assert (command.runs, command.value) == ("module", "aider")
    assert_clean(command)


@pytest.mark.parametrize("line", ["-x run.py", "-Bx run.py", "-x -m aider"])
def test_skipping_the_scripts_first_line_is_a_doubt(line: str) -> None:
    # -x runs a script without its first line: a string opened there is closed nowhere,
    # so what runs is not the source as read.
    assert any("-x" in doubt for doubt in parse(line).doubts)


@pytest.mark.parametrize(
    "value",
    [
        "utf8",
        "utf8=0",
        "utf8=1",
        "dev",
        "importtime",
        "importtime=2",
        "faulthandler",
        "tracemalloc",
        "tracemalloc=5",
        "warn_default_encoding",
        "int_max_str_digits=640",
        "no_debug_ranges",
        "showrefcount",
        "frozen_modules=on",
        "frozen_modules",  # (bare or empty: CPython reads both as on)
        "frozen_modules=",
        "perf",
        "gil=0",
        "gil=1",
        "cpu_count=4",
        "cpu_count=default",
    ],
)
def test_allowlisted_x_options_are_understood(value: str) -> None:
    assert_clean(parse_python_argv(["-X", value, "-m", "aider"]))


def test_combined_short_options_take_the_code_from_the_next_argument() -> None:
    command = parse_python_argv(["-Ic", "import aider", "a", "-b"])
    assert (command.runs, command.value, command.args) == ("code", "import aider", ("a", "-b"))
    assert command.flags == frozenset("I")
    assert_clean(command)


def test_code_glued_to_c_is_the_code() -> None:
    command = parse_python_argv(["-cpass"])
    assert (command.runs, command.value) == ("code", "pass")


def test_module_glued_to_m_is_the_module() -> None:
    command = parse("-Imaider.main x")
    assert (command.runs, command.value, command.args) == ("module", "aider.main", ("x",))


def test_clustered_location_flags_are_all_recorded() -> None:
    command = parse("-IsSP -Ei script.py")
    assert command.flags == frozenset("IsSPEi")
    assert (command.runs, command.value) == ("script", "script.py")


def test_options_after_the_program_belong_to_the_program() -> None:
    command = parse("script.py -I -m evil")
    assert (command.runs, command.value, command.args) == (
        "script",
        "script.py",
        ("-I", "-m", "evil"),
    )
    assert command.flags == frozenset()


def test_double_dash_makes_the_next_argument_the_script_even_with_a_dash() -> None:
    command = parse("-I -- -m aider")
    assert (command.runs, command.value, command.args) == ("script", "-m", ("aider",))


def test_arguments_after_the_module_keep_a_double_dash() -> None:
    assert parse("-m aider -- x").args == ("--", "x")


@pytest.mark.parametrize(
    "line",
    ["-V", "--version", "-VV", "-h", "-?", "--help", "--help-env", "--help-xoptions", "--help-all"],
)
def test_help_and_version_run_nothing(line: str) -> None:
    command = parse(line)
    assert (command.runs, command.value, command.args) == ("nothing", None, ())
    assert_clean(command)


def test_version_anywhere_among_the_options_runs_nothing_not_the_code() -> None:
    # CPython reads all options, prints the version, and exits.
    assert parse_python_argv(["-V", "-c", "import evil"]).runs == "nothing"
    assert parse("-V script.py").runs == "nothing"


def test_version_after_the_program_is_the_programs_argument() -> None:
    command = parse("-m aider -V")
    assert (command.runs, command.args) == ("module", ("-V",))


def test_help_stops_reading_options_so_a_later_unknown_letter_is_never_seen() -> None:
    assert_clean(parse("-h -Z"))


def test_long_option_inside_a_cluster_is_read_as_cpython_reads_it() -> None:
    assert parse("-I-help-env").runs == "nothing"


# --- attacks and the not-understood: doubts ---------------------------------------------


def test_w_swallows_dash_m_so_the_file_named_like_the_module_runs() -> None:
    command = parse("-I -W -m aider")
    assert (command.runs, command.value) == ("script", "aider")
    assert any("-W -m" in doubt for doubt in command.doubts)


def test_x_swallows_dash_m_too() -> None:
    command = parse("-X -m aider")
    assert (command.runs, command.value) == ("script", "aider")
    assert command.doubts


def test_dotted_warning_category_is_a_doubt_since_it_imports_the_module() -> None:
    command = parse("-W ignore::evil.Category -m aider")
    assert command.runs == "module"
    assert command.doubts == ("-W ignore::evil.Category: the category imports module evil",)


def test_dotted_category_is_a_doubt_glued_and_with_spaces() -> None:
    assert parse_python_argv(["-Werror:: pkg.sub.Cat ", "-m", "a"]).doubts
    assert parse_python_argv(["-W", "ignore::os.Warning", "-m", "a"]).doubts


@pytest.mark.parametrize(
    "value",
    [
        "ignore::int",  # a builtin, but not a warning
        "bogus",  # not an action
        "ignore::Warning::x",  # not a line number
        "a:b:c:d:e:f",  # too many fields
    ],
)
def test_malformed_or_unknown_warning_filters_are_doubts(value: str) -> None:
    assert parse_python_argv(["-W", value, "-m", "aider"]).doubts


def test_pycache_prefix_is_a_doubt_since_bytecode_comes_from_elsewhere() -> None:
    command = parse("-X pycache_prefix=/tmp/x -m aider")
    assert command.doubts == ("-X pycache_prefix=/tmp/x: bytecode read from another tree",)
    assert parse("-Xpycache_prefix=/tmp/x -m aider").doubts


def test_frozen_modules_off_is_a_doubt_since_runpy_then_comes_from_sys_path() -> None:
    assert parse("-X frozen_modules=off -m aider").doubts


@pytest.mark.parametrize("value", ["presite=evil", "bogus", "utf8=2", "dev=1", "", "importtime=x"])
def test_unknown_x_options_are_doubts(value: str) -> None:
    assert parse_python_argv(["-X", value, "-m", "aider"]).doubts


def test_interactive_after_the_program_is_a_doubt() -> None:
    command = parse("-i -m aider")
    assert "i" in command.flags
    assert command.doubts == ("-i: code read from standard input after the program",)


def test_program_from_stdin_is_a_doubt() -> None:
    command = parse("-I - a b")
    assert (command.runs, command.value, command.args) == ("stdin", None, ("a", "b"))
    assert command.doubts


def test_dash_after_double_dash_still_reads_stdin() -> None:
    assert parse("-- -").runs == "stdin"


@pytest.mark.parametrize("line", ["", "-I", "-I --", "-i"])
def test_no_program_is_the_interactive_interpreter_and_a_doubt(line: str) -> None:
    command = parse(line)
    assert command.runs == "repl"
    assert command.doubts


@pytest.mark.parametrize("line", ["-Z -m aider", "-IZ -m aider", "-J -m aider", "-p -m aider"])
def test_unknown_option_letter_is_a_doubt(line: str) -> None:
    command = parse(line)
    assert command.runs == "nothing"  # CPython exits with a usage error
    assert command.doubts


@pytest.mark.parametrize(
    "line",
    ["--evil -m aider", "--check-hash-based-pycs=always -m aider", "--helpme", "-I-x -m aider"],
)
def test_unknown_long_option_is_a_doubt(line: str) -> None:
    command = parse(line)
    assert command.runs == "nothing"
    assert command.doubts


@pytest.mark.parametrize("line", ["-c", "-m", "-W", "-X", "-I -m", "--check-hash-based-pycs"])
def test_missing_value_is_a_doubt(line: str) -> None:
    command = parse(line)
    assert command.runs == "nothing"
    assert command.doubts


def test_unchecked_hash_based_bytecode_is_a_doubt() -> None:
    assert parse("--check-hash-based-pycs never -m aider").doubts
    assert parse("--check-hash-based-pycs sometimes -m aider").doubts


def test_module_name_that_is_not_dotted_identifiers_is_a_doubt() -> None:
    assert parse("-m foo-bar").doubts
    assert parse("-m .relative").doubts
    assert parse_python_argv(["-m", ""]).doubts


def test_stray_dash_in_a_cluster_ends_the_options_and_is_a_doubt() -> None:
    command = parse("-I- -m aider")
    assert (command.runs, command.value) == ("script", "-m")
    assert command.doubts


# --- the environment ---------------------------------------------------------------------


def test_environment_is_ignored_entirely_with_dash_e_or_dash_i() -> None:
    hostile = {"PYTHONHOME": "/evil", "PYTHON_PRESITE": "evil", "PYTHONFOO": "1"}
    assert env_doubts(hostile, "-E -m aider") == ()
    assert env_doubts(hostile, "-I -m aider") == ()
    assert env_doubts(hostile, "-m aider")


def test_understood_variables_are_no_doubt() -> None:
    environ = {
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONIOENCODING": "utf-8:surrogateescape",
        "PYTHONUTF8": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONOPTIMIZE": "2",
        "PYTHONFAULTHANDLER": "1",
        "PYTHONDEVMODE": "1",
        "PYTHONSAFEPATH": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHON_COLORS": "0",
        "PYTHON_GIL": "1",
        "PYTHON_FROZEN_MODULES": "on",
        "PYTHONBREAKPOINT": "0",
        "PYTHONPLATLIBDIR": "lib",
        "PYTHONWARNINGS": "ignore,error::DeprecationWarning,,default:msg:UserWarning:m:3",
        "PYTHONINSPECT": "",
        "HOME": "/root",
        "PATH": "/usr/bin",
    }
    assert env_doubts(environ) == ()


def test_search_path_variables_are_left_to_the_caller() -> None:
    assert env_doubts({"PYTHONPATH": "/somewhere", "PYTHONUSERBASE": "/u"}) == ()


def test_container_image_variables_that_cpython_never_reads_are_no_doubt() -> None:
    assert env_doubts({"PYTHON_VERSION": "3.12.1", "PYTHON_SHA256": "ab"}) == ()


@pytest.mark.parametrize(
    "name",
    ["PYTHONHOME", "PYTHONPYCACHEPREFIX", "PYTHON_PRESITE", "PYTHONCASEOK"],
)
def test_variables_that_move_or_add_code_are_doubts(name: str) -> None:
    assert env_doubts({name: "x"}) != ()


def test_pythonhome_doubt_names_the_variable() -> None:
    (doubt,) = env_doubts({"PYTHONHOME": "/evil"})
    assert doubt.startswith("PYTHONHOME")


def test_unknown_python_variable_is_a_doubt_in_a_closed_world() -> None:
    assert env_doubts({"PYTHONFOO": "1"}) == ("PYTHONFOO: not a known Python variable",)
    assert env_doubts({"PYTHON_NEW_THING": "1"}) != ()


def test_pythonwarnings_with_a_dotted_category_is_a_doubt() -> None:
    (doubt,) = env_doubts({"PYTHONWARNINGS": "default,ignore::evil.Category"})
    assert "evil" in doubt


def test_pythonstartup_is_a_doubt_only_when_the_run_is_interactive() -> None:
    startup = {"PYTHONSTARTUP": "/home/u/.pythonrc"}
    assert env_doubts(startup, "-m aider") == ()
    assert env_doubts(startup, "-i -m aider") != ()
    assert env_doubts(startup, "-") != ()
    assert env_doubts(startup, "") != ()
    assert len(env_doubts({**startup, "PYTHONINSPECT": "1"})) == 2
    assert env_doubts({"PYTHONSTARTUP": ""}, "-i -m aider") == ()


def test_pythoninspect_is_a_doubt_even_when_zero_but_not_when_empty() -> None:
    # CPython checks for a non-empty PYTHONINSPECT after the program, whatever its value.
    assert env_doubts({"PYTHONINSPECT": "0"}) != ()
    assert env_doubts({"PYTHONINSPECT": "1"}) != ()
    assert env_doubts({"PYTHONINSPECT": ""}) == ()


def test_pythonbreakpoint_may_only_disable_or_keep_the_default() -> None:
    assert env_doubts({"PYTHONBREAKPOINT": ""}) == ()
    assert env_doubts({"PYTHONBREAKPOINT": "0"}) == ()
    assert env_doubts({"PYTHONBREAKPOINT": "evil.hook"}) != ()


def test_py_sax_parser_is_a_doubt_unless_the_environment_is_ignored() -> None:
    # xml.sax.make_parser imports each module PY_SAX_PARSER names (not a PYTHON* name, but
    # read under the same -E).
    assert env_doubts({"PY_SAX_PARSER": "evil_parser"}) != ()
    assert env_doubts({"PY_SAX_PARSER": "evil_parser"}, "-E -m aider") == ()


def test_sysconfigs_build_variables_are_doubts_whatever_the_options() -> None:
    """sysconfig imports the module _PYTHON_SYSCONFIGDATA_NAME names, and getpath takes
    __PYVENV_LAUNCHER__ and PYTHONEXECUTABLE for the program it is (a venv of any folder),
    -E and -I or not."""
    from floorguard._identify.python_command import build_variable_doubts

    assert build_variable_doubts({"_PYTHON_SYSCONFIGDATA_NAME": "evil"}) != ()
    assert build_variable_doubts({"_PYTHON_HOST_PLATFORM": "x"}) != ()
    assert build_variable_doubts({"__PYVENV_LAUNCHER__": "/ws/bin/python"}) != ()
    assert build_variable_doubts({"PYTHONEXECUTABLE": "/ws/bin/python"}) != ()
    assert build_variable_doubts({"PYTHONPATH": "x", "HOME": "/h"}) == ()


def test_platlibdir_other_than_lib_is_a_doubt() -> None:
    assert env_doubts({"PYTHONPLATLIBDIR": "lib64"}) != ()


def test_frozen_modules_off_in_the_environment_is_a_doubt() -> None:
    assert env_doubts({"PYTHON_FROZEN_MODULES": "off"}) != ()


@pytest.mark.parametrize("value", ["on", ""])
def test_frozen_modules_on_or_empty_in_the_environment_is_understood(value: str) -> None:
    assert env_doubts({"PYTHON_FROZEN_MODULES": value}) == ()


@pytest.mark.parametrize("value", ["frozen_modules=On", "frozen_modules=1", "frozen_modules=off"])
def test_frozen_modules_spelled_otherwise_than_on_is_a_doubt(value: str) -> None:
    # (CPython refuses to start on the first two; off imports runpy from sys.path)
    assert parse_python_argv(["-X", value, "-m", "aider"]).doubts


# --- shebang lines ------------------------------------------------------------------------


def test_shebang_passes_one_isolation_option() -> None:
    # "#!/venv/bin/python -I"
    assert shebang_arguments(" -I", via_env_split=False) == ["-I"]
    assert_clean(parse_python_argv([*shebang_arguments(" -I", via_env_split=False), "app.py"]))


def test_shebang_rest_is_one_argument_so_two_options_are_not_understood() -> None:
    # The kernel passes "-I -s" whole: CPython reads "-I", then " " (unknown) and exits.
    rest = shebang_arguments("  -I -s \t", via_env_split=False)
    assert rest == ["-I -s"]
    assert parse_python_argv([*rest, "app.py"]).doubts


def test_shebang_via_env_split_splits_on_whitespace() -> None:
    assert shebang_arguments(" -I  -s\t-m aider ", via_env_split=True) == [
        "-I",
        "-s",
        "-m",
        "aider",
    ]


def test_empty_shebang_rest_is_no_argument() -> None:
    assert shebang_arguments("", via_env_split=False) == []
    assert shebang_arguments(" \t ", via_env_split=False) == []
    assert shebang_arguments("  ", via_env_split=True) == []


@pytest.mark.parametrize("rest", ["-c 'import x'", '-c "x"', r"-I\_-s", "-I ${OPTS}", "a# 'b"])
def test_env_split_strings_with_quotes_escapes_or_variables_are_refused(rest: str) -> None:
    with pytest.raises(ValueError, match="env -S"):
        shebang_arguments(rest, via_env_split=True)


@pytest.mark.parametrize(
    ("rest", "words"),
    [
        # As GNU env -S reads them (``env -S 'echo a #b c'`` prints ``a``).
        (" -I #c", ["-I"]),
        ("-I\t#-x -s", ["-I"]),
        (" #-x", []),
        # Nothing after the comment's start is read, quotes and $ included.
        (" -I #it's ${X} \\c", ["-I"]),
        # A # inside a word is a letter.
        (" -I a#b c#", ["-I", "a#b", "c#"]),
    ],
)
def test_env_split_string_ends_at_a_word_starting_with_a_hash(rest: str, words: list[str]) -> None:
    assert shebang_arguments(rest, via_env_split=True) == words


@pytest.mark.parametrize("blank", ["\x1c", "\x1f", "\x85", "\xa0", "\u2028"])
def test_env_split_string_splits_at_env_s_blanks_only(blank: str) -> None:
    # Python's str.split() takes these for blanks; env keeps them in the word.
    assert shebang_arguments(f" -I{blank}-s -x", via_env_split=True) == [f"-I{blank}-s", "-x"]


# --- confirmed against real interpreters --------------------------------------------------

_INTERPRETERS = sorted(
    {
        path
        for path in glob.glob("/root/.pyenv/versions/3.1[123].*/bin/python3.1[123]")
        if os.access(path, os.X_OK)
    }
) or [sys.executable]

_REPORT = "import json, sys; print(json.dumps([{kind!r}, sys.argv[1:], sys.flags.isolated]))"


def _run(python: str, argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    return subprocess.run(
        [python, *argv],
        cwd=cwd,
        env={**clean, **env},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


@pytest.fixture
def programs(tmp_path: Path) -> Path:
    """A directory with a script ``prog`` and a module ``mod`` that report how they ran."""
    (tmp_path / "prog").write_text(_REPORT.format(kind="script"))
    (tmp_path / "mod.py").write_text(_REPORT.format(kind="module"))
    return tmp_path


_PARITY_CASES = [
    ["-I", "-W", "-m", "prog"],
    ["-Ic", _REPORT.format(kind="code"), "a", "-b"],
    ["-Wd", "-m", "mod", "x"],
    ["-Xutf8", "-bb", "--", "prog", "-V"],
    ["-E", "-s", "-mmod", "--", "y"],
    ["-W", "error::DeprecationWarning", "prog"],
    ["--check-hash-based-pycs", "always", "prog"],
    ["-I-", "prog", "z"],
    ["-OO", "-t", "-c", _REPORT.format(kind="code")],
    ["-X", "dev", "-q", "prog", "-c", "z"],
    ["-X", "-m", "prog", "mod"],
]


@pytest.mark.parametrize("python", _INTERPRETERS)
@pytest.mark.parametrize("argv", _PARITY_CASES, ids=" ".join)
def test_real_interpreter_runs_what_the_parse_says(
    python: str, argv: list[str], programs: Path
) -> None:
    command = parse_python_argv(argv)
    done = _run(python, argv, programs)
    assert done.returncode == 0, done.stderr
    kind, program_args, isolated = json.loads(done.stdout.splitlines()[-1])
    assert kind == command.runs
    assert program_args == list(command.args)
    assert bool(isolated) == ("I" in command.flags)
    if command.runs == "script":
        assert command.value == "prog"


@pytest.mark.parametrize("python", _INTERPRETERS)
@pytest.mark.parametrize(
    "argv", [["-V", "-c", "print('ran')"], ["-h", "-Z"], ["-Z", "prog"], ["-W"], ["-I-x", "prog"]]
)
def test_real_interpreter_runs_nothing_where_the_parse_says_so(
    python: str, argv: list[str], programs: Path
) -> None:
    assert parse_python_argv(argv).runs == "nothing"
    done = _run(python, argv, programs)
    assert "ran" not in done.stdout
    assert '["script"' not in done.stdout


@pytest.mark.parametrize("python", _INTERPRETERS)
def test_real_interpreter_imports_a_dotted_warning_category(python: str, tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    package = tmp_path / "evil"
    package.mkdir()
    (package / "__init__.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nclass Category(Warning): pass\n"
    )
    argv = ["-W", "ignore::evil.Category", "-c", "pass"]
    assert parse_python_argv(argv).doubts
    done = _run(python, argv, tmp_path, PYTHONPATH=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert marker.exists()  # the module ran before the program


@pytest.mark.parametrize("python", _INTERPRETERS)
def test_real_interpreter_with_frozen_modules_off_runs_runpy_from_the_working_directory(
    python: str, programs: Path
) -> None:
    (programs / "runpy.py").write_text("print('shadowed runpy'); raise SystemExit(0)\n")
    argv = ["-X", "frozen_modules=off", "-m", "mod"]
    assert parse_python_argv(argv).doubts
    assert "shadowed runpy" in _run(python, argv, programs).stdout
    assert "shadowed runpy" not in _run(python, ["-m", "mod"], programs).stdout


@pytest.mark.parametrize("python", _INTERPRETERS)
def test_real_shebang_with_two_options_is_a_usage_error(python: str, tmp_path: Path) -> None:
    script = tmp_path / "app"
    script.write_text(f"#!{python} -I -s\nprint('ran')\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    done = subprocess.run([str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "ran" not in done.stdout
    one_option = tmp_path / "isolated"
    one_option.write_text(f"#!{python} -I\nimport sys; print(sys.flags.isolated)\n")
    one_option.chmod(one_option.stat().st_mode | stat.S_IXUSR)
    done = subprocess.run([str(one_option)], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "1"


# Values of variables that load nothing, some of which CPython refuses to start with: a
# child that cannot start must not be recorded as permitted.
_START_UP_VALUES = {
    "PYTHONUTF8": ["0", "1", "2", "yes", " 1"],
    "PYTHONHASHSEED": ["0", "random", "4294967295", "4294967296", " 5", "+5", "abc", "RANDOM"],
    "PYTHONMALLOC": ["malloc", "pymalloc_debug", "bogus", "MALLOC"],
    "PYTHONINTMAXSTRDIGITS": ["0", "640", "639", "5", "+640", "abc"],
    "PYTHONTRACEMALLOC": ["0", "25", "65535", "65536", "x", " 3"],
    "PYTHONIOENCODING": ["utf-8", "nope", "latin-1:surrogateescape", "utf-8:bogus", ":replace"],
}


@pytest.mark.parametrize("python", _INTERPRETERS)
@pytest.mark.parametrize("name", sorted(_START_UP_VALUES))
def test_a_value_cpython_refuses_to_start_with_is_a_doubt_and_one_it_takes_is_none(
    python: str, name: str, tmp_path: Path
) -> None:
    disagree = []
    for value in _START_UP_VALUES[name]:
        starts = _run(python, ["-c", "pass"], tmp_path, **{name: value}).returncode == 0
        permitted = env_doubts({name: value}) == ()
        if starts != permitted:
            disagree.append((value, "starts" if starts else "refuses to start"))
    assert not disagree, disagree


_X_VALUES = ["int_max_str_digits=5", "int_max_str_digits=640", "int_max_str_digits=+640",
             "int_max_str_digits=0", "tracemalloc=65536", "tracemalloc=65535",
             "cpu_count=0", "cpu_count=4", "importtime=5"]  # fmt: skip


@pytest.mark.parametrize("python", _INTERPRETERS)
def test_an_x_option_value_cpython_refuses_to_start_with_is_a_doubt(
    python: str, tmp_path: Path
) -> None:
    disagree = []
    for value in _X_VALUES:
        starts = _run(python, ["-X", value, "-c", "pass"], tmp_path).returncode == 0
        permitted = parse(f"-X {value} -m aider").doubts == ()
        if permitted and not starts:  # (stricter than one version is allowed: cpu_count=0)
            disagree.append(value)
    assert not disagree, disagree
    assert parse("-X int_max_str_digits=640 -m aider").doubts == ()
