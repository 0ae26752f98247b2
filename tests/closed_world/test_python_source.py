"""floorguard._identify.python_source: Python source is read as CPython reads it, and every
construct the check does not understand is a doubt.

The decoding tests run the real interpreter on the same bytes and compare what it imports
with what read_source reports: the two must never differ.
"""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from pathlib import Path

import pytest

from floorguard._identify.python_source import (
    MAX_SOURCE_BYTES,
    PythonSource,
    SourceError,
    read_code_string,
    read_source,
)
from floorguard.errors import DetectionError

PIP_WRAPPER = b"""#!/venv/bin/python
# -*- coding: utf-8 -*-
import re
import sys
from aider.main import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""

UV_WRAPPER = b"""#!/venv/bin/python3
# -*- coding: utf-8 -*-
import sys
from aider.main import main
if __name__ == "__main__":
    if sys.argv[0].endswith("-script.pyw"):
        sys.argv[0] = sys.argv[0][:-11]
    elif sys.argv[0].endswith(".exe"):
        sys.argv[0] = sys.argv[0][:-4]
    sys.exit(main())
"""

OLD_SETUPTOOLS_WRAPPER = b"""#!/usr/bin/python
# EASY-INSTALL-ENTRY-SCRIPT: 'aider-chat==0.50.0','console_scripts','aider'
__requires__ = 'aider-chat==0.50.0'
import re
import sys
from pkg_resources import load_entry_point

if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw?|\\.exe)?$', '', sys.argv[0])
    sys.exit(load_entry_point('aider-chat==0.50.0', 'console_scripts', 'aider')())
"""


def read(text: str) -> PythonSource:
    return read_source(text.encode(), name="prog.py")


def doubts(text: str) -> tuple[str, ...]:
    return read(text).doubts


def utf7_hidden(statement: str) -> bytes:
    """A program whose ``statement`` exists only for a UTF-7 reader: to a UTF-8 reader it is
    the inside of a string literal."""
    inner = f'"\n{statement}\nx = "'
    escaped = base64.b64encode(inner.encode("utf-16-be")).decode().rstrip("=")
    return f'# -*- coding: utf-7 -*-\nx = "+{escaped}-"\n'.encode()


# --- the wrappers installers write are understood -----------------------------------------


def test_pip_console_script_is_understood() -> None:
    source = read_source(PIP_WRAPPER, name="aider")
    assert source == PythonSource(
        imports=("re", "sys", "aider.main"), doubts=(), references=("aider.main.main",)
    )
    assert source.understood


def test_uv_console_script_is_understood() -> None:
    assert read_source(UV_WRAPPER, name="aider") == PythonSource(
        ("sys", "aider.main"), (), ("aider.main.main",)
    )


def test_plain_import_and_call_is_understood() -> None:
    assert read("import aider.main\naider.main.main()\n") == PythonSource(
        ("aider.main",), (), ("aider.main.main", "aider.main")
    )


def test_old_setuptools_wrapper_is_a_doubt_because_pkg_resources_loads_by_name() -> None:
    # The adapter is named only in a string load_entry_point resolves at run time.
    source = read_source(OLD_SETUPTOOLS_WRAPPER, name="aider")
    assert "aider.main" not in source.imports
    assert "line 6: imports pkg_resources (changes or drives the import system)" in source.doubts


def test_ordinary_statements_are_understood() -> None:
    program = """
import os
import os.path as osp
from os.path import join
from __future__ import annotations
from aider.main import main as run

class App:
    def __init__(self, args: list[str]) -> None:
        super().__init__()
        self.args = [a for a in args if a]

def home() -> str:
    return join(os.path.expanduser("~"), os.sep, osp.basename(os.getcwd()))

try:
    with open_thing() as f:
        pass
except (OSError, KeyError) as exc:
    print(exc, __name__, __file__)
match sys.argv:
    case [_, "x"]:
        run()
    case _:
        sys.exit(run(App(sys.argv).args))
"""
    assert doubts(program) == ()


# --- imports -----------------------------------------------------------------------------


def test_imports_anywhere_are_listed_in_source_order_once() -> None:
    program = """
def f():
    import b.c as bc
    if x:
        from d.e import f, g
import a
import b.c
try:
    import h, i.j
except ImportError:
    pass
"""
    assert read(program).imports == ("b.c", "d.e", "a", "h", "i.j")


def test_relative_import_is_a_doubt_and_not_an_import() -> None:
    source = read("from . import main\nfrom ..pkg.mod import x\n")
    assert source.imports == ()
    assert source.doubts == (
        "line 1: relative import from . (the package is not known)",
        "line 2: relative import from ..pkg.mod (the package is not known)",
    )


def test_star_import_is_a_doubt() -> None:
    assert doubts("from aider.main import *\n") == (
        "line 1: from aider.main import * binds names that cannot be followed",
    )


@pytest.mark.parametrize(
    "statement",
    [
        "import importlib",
        "import importlib.util",
        "from importlib import import_module",
        "from importlib.machinery import SourceFileLoader",
        "import runpy",
        "import pkgutil",
        "import zipimport",
        "import site",
        "import builtins",
        "import _imp",
        "import imp",
        "import _frozen_importlib",
        "import _frozen_importlib_external",
        "import ctypes",
        "from _ctypes import dlopen",
        "import cffi",
        "import subprocess",
        "from subprocess import run",
        "import _posixsubprocess",
        "import multiprocessing.pool",
        "import pty",
        "import code",
        "import codeop",
        "import marshal",
        "import pickle",
        "from types import FunctionType",
        "import posix",
        "import nt",
        "import pkg_resources",
        "import importlib_metadata",
    ],
)
def test_denied_module_import_is_a_doubt(statement: str) -> None:
    found = doubts(statement + "\n")
    assert len(found) == 1
    assert found[0].startswith("line 1: imports ")


@pytest.mark.parametrize("module", ["shutil", "pathlib", "tempfile", "inspect", "typing"])
def test_other_standard_library_modules_are_doubts(module: str) -> None:
    # Their surfaces (writing a file that shadows a module, evaluating strings) are too wide.
    assert doubts(f"import {module}\n") == (
        f"line 1: imports {module} (a standard-library module this check does not follow)",
    )


# --- the import system -------------------------------------------------------------------


def test_sys_path_insert_before_import_is_a_doubt() -> None:
    source = read("import sys\nsys.path.insert(0, '/old')\nfrom aider.main import main\n")
    assert source.imports == ("sys", "aider.main")
    assert source.doubts == ("line 2: sys.path is used (the import system)",)


def test_alias_of_sys_path_is_a_doubt() -> None:
    assert doubts("import sys\np = sys.path\np.insert(0, '/old')\n") == (
        "line 2: sys.path is used (the import system)",
    )


def test_aliased_sys_module_is_followed() -> None:
    assert doubts("import sys as s\ns.modules['aider'] = None\n") == (
        "line 2: sys.modules is used (the import system)",
    )


def test_sys_used_as_a_value_is_a_doubt() -> None:
    assert doubts("import sys\nm = sys\nm.path.append('x')\n") == (
        "line 2: sys is used as a value (its attributes cannot be followed)",
    )


def test_vars_of_sys_is_a_doubt() -> None:
    assert doubts("import sys\nvars(sys)['path'].insert(0, 'x')\n") == (
        "line 2: vars() reaches a namespace as a dictionary",
        "line 2: sys is used as a value (its attributes cannot be followed)",
    )


@pytest.mark.parametrize(
    ("statement", "doubt"),
    [
        ("from sys import path", "sys.path is used (the import system)"),
        ("from sys import path as p", "sys.path is used (the import system)"),
        ("from sys import meta_path", "sys.meta_path is used (the import system)"),
        ("sys.path_hooks.append(h)", "sys.path_hooks is used (the import system)"),
        ("sys.path_importer_cache.clear()", "sys.path_importer_cache is used (the import system)"),
        ("del sys.modules['aider']", "sys.modules is used (the import system)"),
        ("sys.path = ['/old']", "sys.path is used (the import system)"),
        ("sys.settrace(t)", "sys.settrace is used (hooks into running code)"),
        ("sys.setprofile(t)", "sys.setprofile is used (hooks into running code)"),
        ("sys.addaudithook(t)", "sys.addaudithook is used (hooks into running code)"),
        ("sys._getframe().f_back", "sys._getframe is used (hooks into running code)"),
        ("sys.__dict__['path']", ".__dict__ reaches the interpreter's internals"),
        ("sys.setrecursionlimit(9)", "sys.setrecursionlimit is used (interpreter state"),
    ],
)
def test_sys_outside_its_allowlist_is_a_doubt(statement: str, doubt: str) -> None:
    assert any(
        found.startswith(f"line 2: {doubt}") for found in doubts(f"import sys\n{statement}\n")
    )


def test_sys_argv_writes_and_exit_are_understood() -> None:
    program = """
import sys
sys.argv[0] = sys.argv[0][:-4]
sys.argv = ['aider', '--yes']
if sys.version_info >= (3, 11) and sys.platform != 'win32':
    sys.stdout.write('x')
    print('y', file=sys.stderr)
sys.exit(0)
"""
    assert doubts(program) == ()


def test_sys_reached_through_an_adapter_module_is_a_doubt() -> None:
    assert doubts("import aider.main\naider.main.sys.path.insert(0, 'x')\n") == (
        "line 2: aider.main.sys reaches the module sys indirectly",
    )


def test_module_imported_from_an_adapter_module_is_a_doubt() -> None:
    assert doubts("from aider.main import subprocess\n") == (
        "line 1: aider.main.subprocess reaches the module subprocess indirectly",
    )


def test_modules_held_by_os_path_and_re_are_doubts() -> None:
    assert doubts("import os\nos.path.os.system('x')\nimport re\nre.enum.sys\n") == (
        "line 2: os.path.os is used (only os.path's functions are followed)",
        "line 4: re.enum is used (only re's functions are followed)",
    )


# --- code built at run time and the interpreter's internals ------------------------------


@pytest.mark.parametrize(
    "name", ["exec", "eval", "compile", "getattr", "setattr", "delattr", "globals", "locals",
             "vars", "breakpoint", "open", "help", "type"],
)  # fmt: skip
def test_denied_builtin_is_a_doubt(name: str) -> None:
    found = doubts(f"{name}('x')\n")
    assert len(found) == 1
    assert found[0].startswith(f"line 1: {name}() ")


@pytest.mark.parametrize(
    "program",
    [
        "import sys\nF = type(sys.stdout.buffer.raw)\nF('nt.py', 'w').write(b'x')\n",
        "import sys\nsys.stdout.buffer.raw.__init__('nt.py', 'w')\n",
        "import sys\nf = sys.stderr\nf.buffer.raw.__init__('nt.py', 'w')\n",
    ],
    ids=["type-of-the-raw-stream", "raw-stream-reinitialised", "through-an-alias"],
)
def test_a_file_opened_through_a_standard_stream_is_a_doubt(program: str) -> None:
    """No open() in sight: the FileIO under sys.stdout, its class or its __init__, opens a
    file for writing (a module planted beside the program, imported later)."""
    assert doubts(program), program


def test_the_streams_plain_use_and_super_init_are_no_doubt() -> None:
    program = (
        "import sys\nsys.stdout.write('x')\nsys.stderr.flush()\nprint(1, file=sys.stderr)\n"
        "class A(Exception):\n    def __init__(self):\n        super().__init__('a')\n"
    )
    assert doubts(program) == ()


def test_exec_reports_code_built_at_run_time() -> None:
    assert doubts("exec('import aider')\n") == ("line 1: exec() runs code built at run time",)


def test_denied_builtin_passed_as_a_value_is_a_doubt() -> None:
    assert doubts("f = eval\nf('1')\n") == ("line 1: eval() runs code built at run time",)


@pytest.mark.parametrize("name", ["__import__", "__builtins__", "__loader__", "__spec__"])
def test_interpreter_internal_names_are_doubts(name: str) -> None:
    assert doubts(f"x = {name}\n") == (f"line 1: {name} reaches the interpreter's internals",)


@pytest.mark.parametrize(
    "expression",
    [
        "().__class__.__base__.__subclasses__()",
        "f.__globals__['sys']",
        "main.__code__",
        "(lambda: 0).__builtins__",
    ],
)
def test_dunder_attributes_are_doubts(expression: str) -> None:
    found = doubts(expression + "\n")
    assert found
    assert "reaches the interpreter's internals" in found[0]


def test_frame_attributes_are_doubts() -> None:
    # No dunder is needed to reach builtins from a generator's frame.
    assert doubts("g = (x for x in ())\ng.gi_frame.f_builtins['exec']('x')\n") == (
        "line 2: .gi_frame reaches a frame's globals or builtins",
        "line 2: .f_builtins reaches a frame's globals or builtins",
    )


# A class pattern reads the attributes its keywords name: ``case C(attr=x)`` is x = subject.attr.
MATCHED_EXEC = """
def helper():
    pass

match helper:
    case object(__globals__=g):
        pass
match g["__builtins__"]:
    case object(exec=run):
        run("print(1)")
"""


def test_a_class_pattern_s_attribute_names_are_judged_as_attributes() -> None:
    assert doubts(MATCHED_EXEC) == ("line 6: .__globals__ reaches the interpreter's internals",)
    assert doubts("match f:\n    case object(gi_frame=x):\n        pass\n") == (
        "line 2: .gi_frame reaches a frame's globals or builtins",
    )
    assert doubts("match f:\n    case object(_convert_=x):\n        pass\n") == (
        "line 2: ._convert_ is a private name (what it leads to is not followed)",
    )


# The members of the classes allowed names hand out (re.RegexFlag is an enum.IntFlag) look
# modules up by name: Enum._convert_("E", "builtins", ...) makes builtins' exec a member.
ENUM_CONVERT = """
import re
for kind in re.RegexFlag.mro():
    if kind.__name__ == "Enum":
        base = kind
E = base._convert_("E", "builtins", lambda name: name == "exec")
E.exec.value("print(1)")
"""


def test_private_names_and_a_class_s_method_resolution_order_are_doubts() -> None:
    assert doubts(ENUM_CONVERT) == (
        "line 3: .mro reaches the classes a class derives from (their members are not followed)",
        "line 6: ._convert_ is a private name (what it leads to is not followed)",
    )
    assert doubts("x = obj._private\n") == (
        "line 1: ._private is a private name (what it leads to is not followed)",
    )


@pytest.mark.parametrize(
    ("program", "name"),
    [
        ("@lambda f: ('__globals__',)\ndef __match_args__():\n    pass\n", "__match_args__"),
        ("from os import curdir as __path__\n", "__path__"),
        ("import os as __path__\n", "__path__"),
        ("match x:\n    case y as __path__:\n        pass\n", "__path__"),
        ("match x:\n    case {**__path__}:\n        pass\n", "__path__"),
        ("try:\n    pass\nexcept OSError as __path__:\n    pass\n", "__path__"),
        ("def f():\n    global __path__\n", "__path__"),
        ("class A:\n    def __subclasshook__(c):\n        return True\n", "__subclasshook__"),
        ("def __getattr__(name):\n    pass\n", "__getattr__"),
    ],
)
def test_a_dunder_bound_where_no_name_shows_it_is_a_doubt(program: str, name: str) -> None:
    # A package's __path__ says where its submodules are found; __match_args__ which
    # attributes a class pattern reads; __subclasshook__ what counts as an instance.
    assert f"{name} is bound, a name the interpreter itself reads" in " ".join(doubts(program))


def test_a_class_patterns_positional_parts_are_a_doubt_but_a_builtins() -> None:
    assert doubts("match f:\n    case Any(g):\n        pass\n") == (
        "line 2: a class pattern with positional parts reads the attributes its class's "
        "__match_args__ names, which are not followed",
    )
    assert doubts("match f:\n    case str(s) | int(s):\n        pass\n") == ()


def test_a_class_may_define_the_plain_protocols() -> None:
    program = (
        "class A:\n    def __init__(self):\n        pass\n    def __repr__(self):\n"
        "        return 'A'\n    def __enter__(self):\n        return self\n"
        "    def __exit__(self, *a):\n        pass\n"
    )
    assert doubts(program) == ()


def test_the_dunder_attributes_allowed_stay_allowed() -> None:
    assert doubts("print(main.__name__, main.__doc__, main.__qualname__)\n") == ()


# --- the environment, the working directory, other programs ------------------------------


@pytest.mark.parametrize(
    ("statement", "reason"),
    [
        ("os.environ['PYTHONPATH'] = '/old'", "the environment"),
        ("os.environ.get('HOME')", "the environment"),
        ("os.putenv('A', 'B')", "the environment"),
        ("os.chdir('/old')", "the working directory"),
        ("os.execv('/old/aider', ['aider'])", "starts or execs another program"),
        ("os.execvpe('aider', [], {})", "starts or execs another program"),
        ("os.spawnv(0, 'x', [])", "starts or execs another program"),
        ("os.system('aider')", "starts or execs another program"),
        ("os.popen('aider')", "starts or execs another program"),
        ("os.fork()", "starts or execs another program"),
        ("os.posix_spawn('x', [], {})", "starts or execs another program"),
        ("os.remove('x')", "only a few os names are followed"),
    ],
)
def test_os_outside_its_allowlist_is_a_doubt(statement: str, reason: str) -> None:
    called = re.match(r"os\.(\w+)", statement)
    assert called is not None
    name = called.group(1)
    assert doubts(f"import os\n{statement}\n") == (f"line 2: os.{name} is used ({reason})",)


def test_from_os_import_execv_is_a_doubt() -> None:
    assert doubts("from os import execv\nexecv('x', [])\n") == (
        "line 1: os.execv is used (starts or execs another program)",
    )


def test_aliased_os_is_followed() -> None:
    assert doubts("import os as o\no.environ['A'] = '1'\n") == (
        "line 2: os.environ is used (the environment)",
    )


def test_os_path_as_a_value_is_a_doubt() -> None:
    assert doubts("import os\np = os.path\n") == (
        "line 2: os.path is used as a value (its attributes cannot be followed)",
    )


# --- reading bytes as CPython does --------------------------------------------------------


def run_python(tmp_path: Path, program: bytes) -> set[str]:
    """Run ``program`` with the real interpreter; which of visible_mod, hidden_mod it ran."""
    for module in ("visible_mod", "hidden_mod"):
        (tmp_path / f"{module}.py").write_text(
            f"import pathlib\npathlib.Path({str(tmp_path)!r}, '{module}.ran').touch()\n"
        )
    script = tmp_path / "prog.py"
    script.write_bytes(program)
    subprocess.run([sys.executable, str(script)], check=True, cwd=tmp_path, timeout=60)
    return {path.stem for path in tmp_path.glob("*.ran")}


def test_utf7_cookie_imports_are_seen(tmp_path: Path) -> None:
    program = utf7_hidden("import hidden_mod") + b"import visible_mod\n"
    assert b"hidden_mod" not in program  # invisible to a UTF-8 reader
    ran = run_python(tmp_path, program)
    assert ran == {"hidden_mod", "visible_mod"}
    assert set(read_source(program, name="prog.py").imports) == ran


def test_utf8_bom_imports_are_seen(tmp_path: Path) -> None:
    program = b"\xef\xbb\xbfimport hidden_mod\n"
    assert run_python(tmp_path, program) == {"hidden_mod"}
    assert read_source(program, name="prog.py").imports == ("hidden_mod",)


def test_latin1_cookie_is_honoured(tmp_path: Path) -> None:
    # "\xe9" is not UTF-8: only a reader that honours the cookie parses this at all.
    program = (
        b"#!/usr/bin/python\n# vim: set fileencoding=latin-1 :\nx = '\xe9'\nimport hidden_mod\n"
    )
    assert run_python(tmp_path, program) == {"hidden_mod"}
    assert read_source(program, name="prog.py").imports == ("hidden_mod",)


def test_cookie_after_a_code_line_is_ignored_as_cpython_does(tmp_path: Path) -> None:
    program = b"import visible_mod\n" + utf7_hidden("import hidden_mod")
    assert run_python(tmp_path, program) == {"visible_mod"}
    assert read_source(program, name="prog.py").imports == ("visible_mod",)


# A codec whose decoding of a line can reach into the next: a backslash (unicode_escape)
# or a tilde (HZ) before the cookie line's newline. CPython's file reader decodes the rest
# of the file only from that newline on, so the next line runs; decoded whole (as import
# and runpy decode a module), it is part of the comment.
LINE_SPLITTING_COOKIES = {
    "unicode_escape": b"# coding: unicode_escape \\\n",
    "hz": b"# coding: hz ~\n",
    "after-a-shebang": b"#!/usr/bin/python3\n# coding: unicode_escape \\\n",
    "crlf": b"# coding: unicode_escape \\\r\n",
}


@pytest.mark.parametrize("cookie", sorted(LINE_SPLITTING_COOKIES))
def test_a_cookie_line_that_reads_into_the_next_line_is_refused(
    tmp_path: Path, cookie: str
) -> None:
    program = LINE_SPLITTING_COOKIES[cookie] + b"import hidden_mod\nimport visible_mod\n"
    assert run_python(tmp_path, program) == {"hidden_mod", "visible_mod"}
    with pytest.raises(SourceError, match="reads differently"):
        read_source(program, name="prog.py")


def test_a_bare_carriage_return_before_a_cookie_is_refused(tmp_path: Path) -> None:
    """CPython's file reader ends a line at a bare CR, detect_encoding does not: the cookie
    on the chunk's third CPython line counts for one reading and not for the other."""
    program = b"#a\r#b\r# coding: hz\nimport visible_mod\n"
    with pytest.raises(SourceError, match="bare carriage return"):
        read_source(program, name="prog.py")


def test_the_same_codecs_without_a_line_reaching_into_the_next_are_read(tmp_path: Path) -> None:
    program = b"# coding: unicode_escape\nx = '\\x41'\nimport hidden_mod\n"
    assert run_python(tmp_path, program) == {"hidden_mod"}
    assert read_source(program, name="prog.py").imports == ("hidden_mod",)


def test_code_string_ignores_a_coding_cookie_as_python_c_does(tmp_path: Path) -> None:
    code = utf7_hidden("import hidden_mod").decode() + "import visible_mod\n"
    run_python(tmp_path, b"")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path, timeout=60)
    ran = {path.stem for path in tmp_path.glob("*.ran")}
    assert ran == {"visible_mod"}
    assert read_code_string(code) == PythonSource(("visible_mod",), ())


def test_code_string_reports_doubts() -> None:
    assert read_code_string("import sys; sys.path.insert(0, 'x')").doubts == (
        "line 1: sys.path is used (the import system)",
    )


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"\xef\xbb\xbf# -*- coding: latin-1 -*-\nimport a\n", "encoding"),
        (b"# -*- coding: no-such-codec -*-\nimport a\n", "encoding"),
        (b"import a\nx = '\xff'\n", "encoding"),
        (b"# coding: utf-8\nx = '\xe9'\n", "encoding"),
        (b"import a\x00\n", "parse"),
        (b"import a +\n", "parse"),
        (b"x = " + b"(" * 300 + b")" * 300 + b"\n", "parse"),
    ],
)
def test_unreadable_source_is_a_source_error(data: bytes, words: str) -> None:
    with pytest.raises(SourceError, match=rf"^prog\.py: .*{words}"):
        read_source(data, name="prog.py")


def test_source_error_is_a_detection_error() -> None:
    # Callers that refuse on DetectionError refuse on unreadable source without new code.
    assert issubclass(SourceError, DetectionError)


def test_source_over_the_cap_is_refused_unread() -> None:
    data = b"#" * MAX_SOURCE_BYTES + b"\n"
    with pytest.raises(SourceError, match="over"):
        read_source(data, name="big.py")
    with pytest.raises(SourceError, match="over"):
        read_code_string(data.decode())


def test_source_at_the_cap_is_read() -> None:
    data = b"import a\n" + b"#" * (MAX_SOURCE_BYTES - 10) + b"\n"
    assert read_source(data, name="prog.py").imports == ("a",)


def test_code_string_with_lone_surrogates_is_a_source_error() -> None:
    # python -c cannot encode such text either; it never runs.
    with pytest.raises(SourceError, match=r"^-c: "):
        read_code_string("import a\nx = '\udcff'\n")


def test_file_python_would_run_as_bytecode_is_a_source_error() -> None:
    import importlib.util

    data = importlib.util.MAGIC_NUMBER + b"\n# coding: latin-1\nimport a\n"
    with pytest.raises(SourceError, match="pyc"):
        read_source(data, name="prog.py")


def test_file_that_is_also_a_zip_archive_is_a_source_error(tmp_path: Path) -> None:
    import zipfile

    archive = tmp_path / "poly.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        # The archive is sys.path[0], so it marks its run itself.
        marker = tmp_path / "hidden_mod.ran"
        zf.writestr("__main__.py", f"import pathlib\npathlib.Path({str(marker)!r}).touch()\n")
    # Source text in front of an archive: python runs the archive's __main__.py, never the
    # import the text shows.
    data = b"import visible_mod\n#" + archive.read_bytes()
    with pytest.raises(SourceError, match="zip"):
        read_source(data, name="prog.py")
    assert run_python(tmp_path, data) == {"hidden_mod"}


def test_readings_that_disagree_are_a_source_error(tmp_path: Path) -> None:
    # With bare-CR lines the cookie is on line 3 for CPython (ignored: it reads UTF-8, len 1)
    # but on line 1 for tokenize.detect_encoding (latin-1): refuse rather than pick one.
    program = b'#\r\r# coding: latin-1\rx = "\xc3\xa9"\rimport visible_mod\r'
    assert run_python(tmp_path, program) == {"visible_mod"}
    with pytest.raises(SourceError, match="reads differently"):
        read_source(program, name="prog.py")


def test_an_escape_cut_at_the_file_readers_chunk_end_is_read_as_the_reader_reads_it(
    tmp_path: Path,
) -> None:
    """python FILE decodes the lines after the cookie through a text stream, 8 KiB at a
    time: under unicode_escape an octal escape cut at a chunk's end (\\12|0) is a newline
    there, and the 0 after it code; decoded whole it is one character of a comment."""
    head = b"# -*- coding: unicode_escape -*-\n"
    body = b"# " + b"x" * 8186 + b"\\12" + b"0;import hidden_mod\nimport visible_mod\n"
    program = head + body
    assert run_python(tmp_path, program) == {"hidden_mod", "visible_mod"}
    with pytest.raises(SourceError, match="reads differently"):
        read_source(program, name="prog.py")
