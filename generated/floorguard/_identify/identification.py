"""What an identification says: the catalogued adapter recognised in what will run, how it
was recognised, and the version of the code that will be loaded, when known."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from floorguard._maps.packages import CATALOGUE_INDEX, PackageIndex


@dataclass(frozen=True)
class Identification:
    """A catalogued adapter recognised in what will run.

    ``via`` says how (``npm-package``, ``pip-record``, ``pip-script``, for interpreter
    invocations ``python -m``, ``python -c``, ``python-script``, ``node-script``, ``node-preload``
    (code a node preload option names), and for
    package launchers the launcher: ``npx``, ``npm exec``, ``pnpm dlx``, ``bunx``,
    ``yarn dlx``, ``uvx``, ``pipx run``);
    ``subject`` is the file or module recognised. ``version`` (with ``version_source``, the
    metadata file it was read from) is set when the package's version is known from where
    its code will be loaded; ``version_known`` says whether identification is the authority
    on the version (True for interpreted code, Python wrappers and the files of an npm
    package: None then means unknown; a native build is asked, its answer held to its
    package's version). ``vouches`` is False for metadata the interpreter does not import
    through (a workspace's, a ``pip install --target`` folder's): it may refuse the file as
    that package's at a version the map refuses, never let it run as that package.
    """

    adapter: str
    via: str
    subject: str
    version: str | None = None
    version_source: str | None = None
    version_known: bool = False
    # How the version was established, when identification says so (a launcher's pinned
    # spec: ``launcher-spec``); else the gate tells it from ``via``.
    detected_by: str | None = None
    vouches: bool = True


def as_interpreted(hit: Identification, via: str, subject: str) -> Identification:
    """``hit`` recast as found through ``via``, by an interpreter: its version is the one
    identification read (None: unknown)."""
    return Identification(
        hit.adapter, via, subject, hit.version, hit.version_source, version_known=True
    )


# The packages identification recognises: the catalogue's, and those the map in force names.
# Set for the duration of one examination (``examine``), read by every lookup below it.
_PACKAGES: ContextVar[PackageIndex] = ContextVar("floorguard_packages", default=CATALOGUE_INDEX)


def current_packages() -> PackageIndex:
    return _PACKAGES.get()


class packages_in_force:  # (named as the function it was: ``with packages_in_force(i):``)
    """Identify with ``index`` (None: the catalogue's alone) inside the block. A class, not a
    generator under @contextmanager: it is entered at every examination (0.5 us, against
    1.6 us)."""

    __slots__ = ("_index", "_token")

    def __init__(self, index: PackageIndex | None) -> None:
        self._index = index if index is not None else CATALOGUE_INDEX

    def __enter__(self) -> None:
        self._token = _PACKAGES.set(self._index)

    def __exit__(self, *exc_info: object) -> None:
        _PACKAGES.reset(self._token)


# The working directory of the agent a child is judged for (an MCP server's own ``cwd`` may
# lie below it): what the child's inputs put anywhere in it is the workspace's too. Set for
# the judgement of one server; None: the child is judged for itself.
_WORKSPACE: ContextVar[str | None] = ContextVar("floorguard_workspace", default=None)
# That agent's own environment, when known: a folder variable the child's environment sets
# otherwise was chosen by the child's declaration, not by whoever started the agent.
_AGENT_ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar(
    "floorguard_agent_environ", default=None
)


# The project folders whose files declared the server judged (a ``.mcp.json``'s folder, the
# folder above a ``.gemini``, ``.codex`` or ``.claude``): the repository that declared it
# writes there too, even above the agent's working directory (a monorepo's root).
_DECLARING: ContextVar[tuple[str, ...]] = ContextVar("floorguard_declaring", default=())


def agent_workspace() -> str | None:
    return _WORKSPACE.get()


def server_workspaces() -> tuple[str, ...]:
    """Every folder a repository declaring the judged MCP server can write into: the agent's
    working directory and the project folders of the declaring files (none for a child
    judged for itself)."""
    folder = _WORKSPACE.get()
    return () if folder is None else (folder, *_DECLARING.get())


def agent_environment() -> Mapping[str, str] | None:
    return _AGENT_ENVIRON.get()


@contextmanager
def workspace_in_force(
    folder: str | None,
    environ: Mapping[str, str] | None = None,
    declaring: tuple[str, ...] = (),
) -> Iterator[None]:
    """Judge a child started for an agent whose working directory is ``folder`` (and whose
    environment is ``environ``, when given; ``declaring``: the project folders of the files
    that declared it, added to those of any server judged around it) inside the block."""
    token = _WORKSPACE.set(folder)
    environ_token = _AGENT_ENVIRON.set(environ)
    declaring_token = _DECLARING.set((*_DECLARING.get(), *declaring))
    try:
        yield
    finally:
        _DECLARING.reset(declaring_token)
        _AGENT_ENVIRON.reset(environ_token)
        _WORKSPACE.reset(token)
