"""Python source read exactly as CPython reads it: what it imports, and what it does that the
check cannot follow.

The runtime names the agent CLI a Python program will run from the modules it imports (a
pip console script's ``from aider.main import main``). That is only sound when the imports
read are the imports that run, so:

- bytes are decoded as the interpreter decodes them (a UTF-8 BOM, a coding cookie on line 1
  or 2, an unknown codec or a BOM under a non-UTF-8 cookie being errors), by the
  interpreter's own parser; ``tokenize.detect_encoding`` reads them a second time and the two
  readings must give the same tree. An import written in UTF-7 escapes is an import.
- code that could make an import statement load something other than what its name says,
  or run code the statements do not show, is reported as a *doubt*. Doubts come from an
  allowlist: a handful of standard-library modules (``sys``, ``os``, ``os.path``, ``re``,
  ``__future__``) with allowlisted attributes, ordinary statements, and imports of other
  packages. Everything else that touches the import system, builds code at run time,
  changes the environment or the working directory, or starts another program is a doubt,
  and the caller refuses a program with any.

Nothing here reads files or runs code: callers hand in the bytes (or the ``-c`` text).
"""

from __future__ import annotations

import ast
import io
import itertools
import re
import sys
import tokenize
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from floorguard.errors import DetectionError

MAX_SOURCE_BYTES: Final = 1 << 20


class SourceError(DetectionError):
    """The bytes cannot be read as Python source the way the interpreter would read them."""


@dataclass(frozen=True)
class PythonSource:
    """What a program imports and what in it the check does not understand.

    ``imports``: every absolute module an import statement names, anywhere, in source order,
    once each (``from a.b import c`` gives ``a.b``). ``doubts``: one ``"line N: ..."`` phrase
    per construct not understood; a program is understood only when there are none.
    """

    imports: tuple[str, ...]
    doubts: tuple[str, ...]
    # Every dotted name the program takes from another package, as written after its
    # imports are resolved (``aider.main.main``, ``aider.main.git.Git``): what it names in
    # that package's modules is for the caller to look up.
    references: tuple[str, ...] = ()

    @property
    def understood(self) -> bool:
        return not self.doubts


# Standard-library modules whose use is followed, attribute by attribute. Any other
# standard-library module is a doubt: its surface (file writes that shadow a module, loaders,
# evaluators such as typing.get_type_hints) is too wide to vouch for.
_FOLLOWED_MODULES: Final = frozenset({"__future__", "sys", "os", "os.path", "re"})

_SYS_ALLOWED: Final = frozenset(
    {
        # pip's and uv's wrappers rewrite argv[0] and exit with main()'s result.
        "argv", "orig_argv", "exit", "stdin", "stdout", "stderr",
        "version", "version_info", "hexversion", "api_version", "implementation", "platform",
        "maxsize", "maxunicode", "byteorder", "executable", "flags", "float_info", "int_info",
        "getdefaultencoding", "getfilesystemencoding", "getfilesystemencodeerrors",
        "getrecursionlimit", "getsizeof", "exc_info", "exception",
    }
)  # fmt: skip

# What a program may do with sys.stdin, sys.stdout and sys.stderr (not reach the buffer and
# raw file objects under them, whose classes open files).
_STREAMS: Final = frozenset({"stdin", "stdout", "stderr"})
_STREAM_ALLOWED: Final = frozenset(
    {"write", "writelines", "flush", "read", "readline", "readlines", "isatty", "fileno",
     "encoding", "errors", "reconfigure", "name", "closed", "line_buffering"}
)  # fmt: skip

# Named so the doubt says why; every other sys attribute is a doubt too, as "interpreter state".
_SYS_REASONS: Final = {
    **dict.fromkeys(
        ("path", "meta_path", "path_hooks", "path_importer_cache", "modules"), "the import system"
    ),
    **dict.fromkeys(
        ("settrace", "setprofile", "addaudithook", "_getframe", "monitoring"),
        "hooks into running code",
    ),
}

_OS_ALLOWED: Final = frozenset(
    {
        "path", "sep", "altsep", "extsep", "pathsep", "linesep", "curdir", "pardir", "devnull",
        "name", "getcwd", "getcwdb", "get_terminal_size", "terminal_size", "isatty", "fspath",
        "fsencode", "fsdecode", "getpid", "getppid", "cpu_count", "getenv", "strerror",
        "PathLike", "error",
    }
)  # fmt: skip

# posixpath minus the modules it holds (os, sys, genericpath, stat): os.path.os.system.
_OS_PATH_ALLOWED: Final = frozenset(
    {
        "abspath", "altsep", "basename", "commonpath", "commonprefix", "curdir", "defpath",
        "devnull", "dirname", "exists", "expanduser", "expandvars", "extsep", "getatime",
        "getctime", "getmtime", "getsize", "isabs", "isdir", "isfile", "islink", "ismount",
        "join", "lexists", "normcase", "normpath", "pardir", "pathsep", "realpath", "relpath",
        "samefile", "sep", "split", "splitdrive", "splitext",
    }
)  # fmt: skip

# re minus the modules it holds (enum, functools, copyreg): re.enum reaches builtins.
_RE_ALLOWED: Final = frozenset(
    {
        "A", "ASCII", "DOTALL", "I", "IGNORECASE", "L", "LOCALE", "M", "MULTILINE", "NOFLAG",
        "S", "U", "UNICODE", "VERBOSE", "X", "Match", "Pattern", "RegexFlag", "error",
        "compile", "escape", "findall", "finditer", "fullmatch", "match", "purge", "search",
        "split", "sub", "subn",
    }
)  # fmt: skip

# How each judge reports a doubt: the node it is about and a short phrase.
_Doubt = Callable[[ast.AST, str], None]

_IMPORT_SYSTEM: Final = "changes or drives the import system"
_RUN_TIME_CODE: Final = "runs code built at run time"
_PROGRAMS: Final = "starts or execs another program"

# Imports (any form) that are doubts whatever is taken from them. Most are standard library
# and would be doubts anyway; listing them gives the reason. The rest are packages that load
# entry points by name or start programs.
_DENIED_MODULES: Final = {
    **dict.fromkeys(
        (
            "importlib", "imp", "_imp", "zipimport", "pkgutil", "runpy", "site", "builtins",
            "_frozen_importlib", "_frozen_importlib_external", "sitecustomize",
            "usercustomize", "pkg_resources", "importlib_metadata", "importlib_resources",
        ),
        _IMPORT_SYSTEM,
    ),
    **dict.fromkeys(
        (
            "code", "codeop", "marshal", "pickle", "_pickle", "types", "ctypes", "_ctypes",
            "cffi", "dill", "cloudpickle",
        ),
        _RUN_TIME_CODE,
    ),
    **dict.fromkeys(
        (
            "subprocess", "_posixsubprocess", "multiprocessing", "pty", "posix", "nt",
            "_winapi", "sh", "pexpect", "plumbum", "psutil",
        ),
        _PROGRAMS,
    ),
}  # fmt: skip

_DENIED_BUILTINS: Final = {
    **dict.fromkeys(("exec", "eval", "compile"), _RUN_TIME_CODE),
    **dict.fromkeys(("getattr", "setattr", "delattr"), "reaches attributes by run-time names"),
    **dict.fromkeys(("globals", "locals", "vars"), "reaches a namespace as a dictionary"),
    "breakpoint": "enters a debugger chosen by the environment",
    # A written file can shadow a module the next import statement loads.
    "open": "opens files (a written file can shadow a module)",
    "help": "imports modules by run-time names",
    # type(sys.stdout.buffer.raw) is io.FileIO: a class reached from any object builds more
    # of its kind (a file opened for writing, with no open() in sight).
    "type": "reaches the class of an object (whose constructor may open files)",
}

# Dunder names and attributes lead to the interpreter's internals (__builtins__, __import__,
# __loader__, __spec__, __globals__, __subclasses__, ...); only these are ordinary.
_DUNDER_NAMES_ALLOWED: Final = frozenset(
    {"__name__", "__file__", "__doc__", "__debug__", "__annotations__", "__requires__"}
)
# The methods a class of a program may define under a dunder name: the protocols of plain
# objects, none of which names an attribute or a module by a string.
_DUNDER_DEFS_ALLOWED: Final = frozenset(
    {"__init__", "__repr__", "__str__", "__eq__", "__ne__", "__hash__", "__bool__", "__len__",
     "__iter__", "__next__", "__enter__", "__exit__", "__call__", "__lt__", "__le__", "__gt__",
     "__ge__", "__contains__"}
)  # fmt: skip
_DUNDER_BINDINGS_ALLOWED: Final = _DUNDER_NAMES_ALLOWED | _DUNDER_DEFS_ALLOWED
# The builtins whose class pattern ``case str(x)`` matches the subject itself.
_SELF_MATCHING: Final = frozenset(
    {"bool", "bytearray", "bytes", "dict", "float", "frozenset", "int", "list", "set", "str",
     "tuple"}
)  # fmt: skip
_DUNDER_ATTRS_ALLOWED: Final = frozenset(
    {"__name__", "__qualname__", "__doc__", "__version__", "__file__", "__init__"}
)
# Frames and code objects hold globals and builtins without a dunder in the way.
_FRAME_ATTRS: Final = frozenset(
    {
        "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "f_trace", "gi_frame",
        "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame", "ag_code",
        "tb_frame", "tb_next",
    }
)  # fmt: skip

# A pyc's magic number: two bytes of version (3000-3999 for Python 3), then b"\r\n".
_PYC_VERSIONS: Final = range(3000, 4000)
# zipimport finds an archive by its end record in the last 64 KiB + 22 bytes.
_ZIP_END: Final = b"PK\x05\x06"
_ZIP_TAIL: Final = 0xFFFF + 22


def read_source(data: bytes, *, name: str) -> PythonSource:
    """Read a program file's bytes as ``python FILE`` would. ``name`` names it in messages.

    Raises SourceError for bytes over MAX_SOURCE_BYTES, bytes the interpreter would run as
    something other than source (a pyc, a zip archive), an encoding that cannot be determined
    or does not decode, and text this interpreter cannot parse.
    """
    if len(data) > MAX_SOURCE_BYTES:
        raise SourceError(f"{name}: over {MAX_SOURCE_BYTES} bytes of Python source; not read")
    magic = int.from_bytes(data[:2], "little")
    if data[2:4] == b"\r\n" and magic in _PYC_VERSIONS:
        raise SourceError(f"{name}: starts with a bytecode magic number; python runs it as a pyc")
    if _ZIP_END in data[-_ZIP_TAIL:]:
        raise SourceError(f"{name}: is also a zip archive; python runs the __main__ inside it")
    try:
        encoding, lines_read = tokenize.detect_encoding(io.BytesIO(data).readline)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (unicode_escape warns of unknown escapes)
            text = data.decode(encoding)
    except (SyntaxError, LookupError, ValueError) as exc:
        raise SourceError(f"{name}: its encoding cannot be read: {exc}") from None
    # The interpreter's own reader decides (bytes in, so BOM and cookie apply); the second
    # reading guards against the two ever disagreeing about what the text is.
    tree = _parse(data, name)
    dumped = _dump(tree, name)
    if dumped != _dump(_parse(text, name), name):
        raise SourceError(f"{name}: reads differently as {encoding} than the interpreter reads it")
    # ``python FILE`` reads the file otherwise than import and runpy do: the lines up to the
    # cookie raw, the rest decoded from the cookie line's last byte on. A codec that reads a
    # line into the next (a backslash under unicode_escape, a tilde under HZ) makes the two
    # differ: the program must read the same both ways.
    by_line = _file_reading(data, encoding, lines_read, name)
    if by_line is not None and dumped != _dump(_parse(by_line, name), name):
        raise SourceError(
            f"{name}: reads differently as {encoding} when python runs the file (its coding "
            "line decoded apart from the lines after it) than when it is imported"
        )
    return _survey(tree)


_LINE_END = re.compile(rb"\r\n|\r|\n")


def _file_reading(data: bytes, encoding: str, lines_read: Sequence[bytes], name: str) -> str | None:
    """The text CPython's file reader makes of ``data`` under a cookie naming ``encoding``
    (found in ``lines_read``, the lines ``detect_encoding`` read), or None when that is the
    text decoded whole (UTF-8: no codec state crosses a line). Its lines are split at
    ``\\n``, ``\\r\\n`` or ``\\r``; those up to the cookie's are comments (only their count
    matters), and the codec starts at the last byte of the cookie line's end."""
    if encoding in ("utf-8", "utf-8-sig"):
        return None
    cookie_line = len(lines_read)  # (1 or 2: detect_encoding stops at the cookie)
    ends = [found.end() for found in itertools.islice(_LINE_END.finditer(data), cookie_line)]
    if ends != list(itertools.accumulate(len(line) for line in lines_read)):
        if len(ends) < cookie_line and b"".join(lines_read) == data and b"\r" not in data:
            return None  # the cookie line ends the file: no line follows it
        # A bare carriage return: CPython's reader ends a line there, detect_encoding (and
        # the import's decoding) does not, so they may not even agree on the cookie.
        raise SourceError(
            f"{name}: a bare carriage return in its first lines leaves its encoding in doubt"
        )
    cut = ends[-1] - 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (unicode_escape warns of unknown escapes)
            # As the reader does: a text stream over the bytes from there, read line by
            # line, so its decoder meets them in the same chunks (an escape cut at a
            # chunk's end reads otherwise than whole under some codecs).
            stream = io.TextIOWrapper(io.BytesIO(data[cut:]), encoding=encoding)
            rest = "".join(iter(stream.readline, ""))
    except (UnicodeDecodeError, LookupError, ValueError) as exc:
        raise SourceError(
            f"{name}: the lines after its coding line cannot be decoded: {exc}"
        ) from None
    return "\n" * (cookie_line - 1) + "#" + rest


def read_code_string(code: str, *, name: str = "-c") -> PythonSource:
    """Read ``python -c CODE``'s code. It is text already, and CPython ignores a coding
    cookie in it (as compile() of a str does), so no decoding happens here."""
    if len(code.encode("utf-8", "surrogatepass")) > MAX_SOURCE_BYTES:
        raise SourceError(f"{name}: over {MAX_SOURCE_BYTES} bytes of Python source; not read")
    return _survey(_parse(code, name))


def _parse(source: bytes | str, name: str) -> ast.Module:
    try:
        return ast.parse(source, filename=name)
    # ValueError: NUL bytes, lone surrogates; the others: nesting or size beyond the parser.
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise SourceError(f"{name}: not Python this interpreter can parse: {exc}") from None


def _dump(tree: ast.AST, name: str) -> str:
    try:
        return ast.dump(tree, include_attributes=True)
    except RecursionError:
        raise SourceError(f"{name}: nested too deeply to compare its readings") from None


@dataclass(frozen=True)
class _Finding:
    line: int
    column: int
    end: int  # of a dotted chain the inner part ends first, and is reported first
    text: str


def _survey(tree: ast.Module) -> PythonSource:
    """The imports and doubts of a parsed program. Walks iteratively: the parser accepts
    nesting deeper than a recursive visitor could follow."""
    imports: list[_Finding] = []
    doubts: list[_Finding] = []
    references: list[str] = []
    # Local name -> what it stands for ("sys", "os.path", "aider.main.main"). sys and os are
    # followed even unimported: a parameter may carry them in.
    bound: dict[str, str] = {"sys": "sys", "os": "os"}
    module_paths: set[str] = set()
    parents: dict[ast.AST, ast.AST] = {}
    nodes = list(ast.walk(tree))
    for node in nodes:
        for child in ast.iter_child_nodes(node):
            parents[child] = node

    def doubt(node: ast.AST, text: str) -> None:
        line = getattr(node, "lineno", 0)
        column, end = getattr(node, "col_offset", 0), getattr(node, "end_col_offset", 0)
        doubts.append(_Finding(line, column, end or 0, f"line {line}: {text}"))

    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                imports.append(_Finding(node.lineno, node.col_offset, 0, alias.name))
                _judge_module(alias.name, node, doubt)
                parts = alias.name.split(".")
                module_paths.update(".".join(parts[: i + 1]) for i in range(len(parts)))
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    bound[parts[0]] = parts[0]
        elif isinstance(node, ast.ImportFrom):
            if node.level or not node.module:
                where = "." * node.level + (node.module or "")
                doubt(node, f"relative import from {where} (the package is not known)")
                continue
            imports.append(_Finding(node.lineno, node.col_offset, 0, node.module))
            _judge_module(node.module, node, doubt)
            for alias in node.names:
                if alias.name == "*":
                    doubt(node, f"from {node.module} import * binds names that cannot be followed")
                    continue
                target = f"{node.module}.{alias.name}"
                if _judge_reference(target, node, doubt, module_paths | {node.module}):
                    references.append(target)
                bound[alias.asname or alias.name] = target

    for node in nodes:
        if isinstance(node, ast.Name):
            _judge_name(node, parents, bound, doubt)
        elif isinstance(node, ast.MatchClass):
            # ``case C(x)`` reads the attributes C.__match_args__ names, which no name here
            # shows (but a builtin that matches itself, ``case str(x)``).
            if node.patterns and not (
                isinstance(node.cls, ast.Name) and node.cls.id in _SELF_MATCHING
            ):
                doubt(node, "a class pattern with positional parts reads the attributes its "
                      "class's __match_args__ names, which are not followed")  # fmt: skip
            # ``case C(attr=x)`` reads ``subject.attr``: each keyword is an attribute.
            for attr in node.kwd_attrs:
                reason = (
                    _internals_doubt(attr)
                    or _unfollowed_doubt(attr)
                    or (
                        f".{attr} is read from an object other than super()"
                        if attr == "__init__"
                        else None
                    )
                )
                if reason is not None:
                    doubt(node, reason)
        elif isinstance(node, ast.Attribute):
            taken = _judge_attribute(node, parents, bound, module_paths, doubt)
            if taken is not None:
                references.append(taken)
        for name in _bound_without_a_name_node(node):
            # A dunder bound where no Name node shows it (``def __match_args__``, ``from os
            # import curdir as __path__``, ``case x as __path__``): the interpreter reads it.
            if _is_dunder(name) and name not in _DUNDER_BINDINGS_ALLOWED:
                doubt(node, f"{name} is bound, a name the interpreter itself reads")

    ordered_imports = sorted(imports, key=lambda f: (f.line, f.column))
    ordered_doubts = sorted(doubts, key=lambda f: (f.line, f.column, f.end))
    return PythonSource(
        imports=tuple(dict.fromkeys(f.text for f in ordered_imports)),
        doubts=tuple(dict.fromkeys(f.text for f in ordered_doubts)),
        references=tuple(dict.fromkeys(references)),
    )


def _judge_module(module: str, node: ast.AST, doubt: _Doubt) -> None:
    """An imported module: followed, denied with its reason, other standard library (a doubt)
    or another package (identified by the caller)."""
    if module in _FOLLOWED_MODULES:
        return
    top = module.split(".", 1)[0]
    reason = _DENIED_MODULES.get(top)
    if reason is not None:
        doubt(node, f"imports {module} ({reason})")
    elif top in sys.stdlib_module_names:
        doubt(node, f"imports {module} (a standard-library module this check does not follow)")


def _judge_name(
    node: ast.Name, parents: dict[ast.AST, ast.AST], bound: dict[str, str], doubt: _Doubt
) -> None:
    name = node.id
    if name in _DENIED_BUILTINS:
        doubt(node, f"{name}() {_DENIED_BUILTINS[name]}")
    elif _is_dunder(name) and name not in _DUNDER_NAMES_ALLOWED:
        doubt(node, f"{name} reaches the interpreter's internals")
    elif bound.get(name) in _FOLLOWED_MODULES and not isinstance(parents.get(node), ast.Attribute):
        # x = sys; f(sys); sys = ...: the module escapes the attribute allowlist.
        doubt(node, f"{bound[name]} is used as a value (its attributes cannot be followed)")
    elif (
        name in bound
        and _of_another_package(bound[name])
        and not isinstance(parents.get(node), ast.Attribute)
    ):
        _judge_taken_use(node, bound[name], parents, doubt)


def _judge_attribute(
    node: ast.Attribute,
    parents: dict[ast.AST, ast.AST],
    bound: dict[str, str],
    module_paths: set[str],
    doubt: _Doubt,
) -> str | None:
    """Judge one attribute; the dotted name it takes from another package, if it does."""
    attr = node.attr
    reason = _internals_doubt(attr)
    if reason is not None:
        doubt(node, reason)
        return None
    if attr == "__init__" and not _is_super_call(node.value):
        # obj.__init__(...) builds an object anew: a stream's FileIO reopened on a path.
        doubt(node, ".__init__ is called on an object other than super()")
        return None
    dotted = _dotted(node, bound)
    # (sys._getframe: the reason sys's own allowlist gives, before the private name's)
    if dotted is not None and not _judge_reference(dotted, node, doubt, module_paths):
        return None
    reason = _unfollowed_doubt(attr)
    if reason is not None:
        doubt(node, reason)
        return None
    if dotted is None:
        return None
    if dotted in _FOLLOWED_MODULES and not isinstance(parents.get(node), ast.Attribute):
        doubt(node, f"{dotted} is used as a value (its attributes cannot be followed)")
    if not _of_another_package(dotted):
        return None
    if not isinstance(parents.get(node), ast.Attribute):
        _judge_taken_use(node, dotted, parents, doubt)
    return dotted


def _bound_without_a_name_node(node: ast.AST) -> list[str]:
    """The names ``node`` binds that are no ``ast.Name`` of it (those are judged as names)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Import | ast.ImportFrom):
        return [alias.asname or alias.name.split(".")[0] for alias in node.names]
    if isinstance(node, ast.MatchAs | ast.MatchStar | ast.ExceptHandler):
        return [node.name] if node.name else []
    if isinstance(node, ast.MatchMapping):
        return [node.rest] if node.rest else []
    if isinstance(node, ast.Global | ast.Nonlocal):
        return list(node.names)
    return []


def _internals_doubt(attr: str) -> str | None:
    """Why reading the attribute ``attr`` of any object reaches the interpreter's internals
    (a dunder but the ordinary ones, a frame's globals), or None."""
    if _is_dunder(attr) and attr not in _DUNDER_ATTRS_ALLOWED:
        return f".{attr} reaches the interpreter's internals"
    if attr in _FRAME_ATTRS:
        return f".{attr} reaches a frame's globals or builtins"
    return None


def _unfollowed_doubt(attr: str) -> str | None:
    """Why reading the attribute ``attr`` of any object leads where the check cannot follow,
    or None. It follows names, not values, so what an allowed name hands out must not lead
    further: not to a private member (Enum._convert_ looks a module's globals up by name),
    nor to the classes a class derives from (``mro``: enum.Enum from re.RegexFlag)."""
    if attr.startswith("_") and not _is_dunder(attr):
        return f".{attr} is a private name (what it leads to is not followed)"
    if attr == "mro":
        return f".{attr} reaches the classes a class derives from (their members are not followed)"
    return None


def _of_another_package(dotted: str) -> bool:
    top = dotted.split(".", 1)[0]
    return top not in _FOLLOWED_MODULES and top not in sys.stdlib_module_names


def _judge_taken_use(
    node: ast.expr, dotted: str, parents: dict[ast.AST, ast.AST], doubt: _Doubt
) -> None:
    """What a program takes from another package (a module, a function, a class) may only
    be called, its result ending the program (``sys.exit(main())``) or left unused: held
    in a variable, passed on, or looked into, it leads to whatever that code holds (a
    module it imported, an attribute set at run time), which the check cannot follow."""
    parent = parents.get(node)
    if not (isinstance(parent, ast.Call) and parent.func is node):
        doubt(node, f"{dotted} is used as a value (what it leads to cannot be followed)")
        return
    outer = parents.get(parent)
    if isinstance(outer, ast.Expr):
        return  # (not returned: a caller would hold it)
    if (
        isinstance(outer, ast.Call)
        and parent in outer.args
        and isinstance(outer.func, ast.Attribute)
        and isinstance(outer.func.value, ast.Name)
        and outer.func.value.id == "sys"
        and outer.func.attr == "exit"
    ):
        return
    doubt(node, f"what {dotted}() returns is used (what it leads to cannot be followed)")


def _is_super_call(value: ast.expr) -> bool:
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "super"
    )


def _judge_reference(dotted: str, node: ast.AST, doubt: _Doubt, module_paths: set[str]) -> bool:
    """A dotted name rooted at an imported module (``sys.path``, ``aider.main.main``).
    Returns False when it raised a doubt."""
    parts = dotted.split(".")
    head = parts[0]
    if head == "sys" and len(parts) > 1 and parts[1] not in _SYS_ALLOWED:
        reason = _SYS_REASONS.get(parts[1], "interpreter state the check does not follow")
        doubt(node, f"sys.{parts[1]} is used ({reason})")
        return False
    if (
        head == "sys"
        and len(parts) > 2
        and parts[1] in _STREAMS
        and parts[2] not in _STREAM_ALLOWED
    ):
        doubt(node, f"sys.{parts[1]}.{parts[2]} is used (the file objects under a stream)")
        return False
    if head == "os" and len(parts) > 1:
        if parts[1] not in _OS_ALLOWED:
            doubt(node, f"os.{parts[1]} is used ({_os_reason(parts[1])})")
            return False
        if parts[1] == "path" and len(parts) > 2 and parts[2] not in _OS_PATH_ALLOWED:
            doubt(node, f"os.path.{parts[2]} is used (only os.path's functions are followed)")
            return False
    if head == "re" and len(parts) > 1 and parts[1] not in _RE_ALLOWED:
        doubt(node, f"re.{parts[1]} is used (only re's functions are followed)")
        return False
    if head in {"sys", "os", "re"}:
        return True
    # Another package's module: what it holds is trusted, except a module reached through
    # it (aider.main.sys, aider.main.subprocess) or a dunder.
    for index, part in enumerate(parts[1:], start=1):
        if ".".join(parts[: index + 1]) in module_paths:
            continue
        if part in sys.stdlib_module_names or part in _DENIED_MODULES:
            doubt(node, f"{'.'.join(parts[: index + 1])} reaches the module {part} indirectly")
            return False
        if _is_dunder(part) and part not in _DUNDER_ATTRS_ALLOWED:
            doubt(node, f"{'.'.join(parts[: index + 1])} reaches the interpreter's internals")
            return False
    return True


def _os_reason(attr: str) -> str:
    if attr in {"environ", "environb", "putenv", "unsetenv"}:
        return "the environment"
    if attr in {"chdir", "fchdir", "chroot"}:
        return "the working directory"
    if attr.startswith(("exec", "spawn", "posix_spawn", "fork")) or attr in {"system", "popen"}:
        return _PROGRAMS
    return "only a few os names are followed"


def _dotted(node: ast.expr, bound: dict[str, str]) -> str | None:
    """``a.b.c`` as the dotted name it stands for when ``a`` is bound by an import."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in bound:
        return None
    return ".".join([bound[node.id], *reversed(attrs)])


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def defined_names(data: bytes, *, name: str) -> frozenset[str]:
    """The names a module's source binds at its top level by ``def``, ``async def`` or
    ``class`` and by nothing else (not rebound by an import, an assignment or a ``global``
    anywhere): its own code, which a program may take by name. Raises SourceError."""
    tree = _parse(data, name)
    defined = {
        statement.name
        for statement in tree.body
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    rebound: set[str] = set()
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            # (its decorators, defaults and bases run at the top level, its body does not)
            inner = [*statement.decorator_list]
            if isinstance(statement, ast.ClassDef):
                inner += [*statement.bases, *(keyword.value for keyword in statement.keywords)]
            walked = [node for part in inner for node in ast.walk(part)]
        else:
            walked = list(ast.walk(statement))
        for node in walked:
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                rebound.add(node.id)
            elif isinstance(node, ast.alias):
                rebound.add((node.asname or node.name).split(".", 1)[0])
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                rebound.add(node.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Global | ast.Nonlocal):
            rebound.update(node.names)
    return frozenset(defined - rebound)
