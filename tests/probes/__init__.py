"""Real executables for detection tests: native programs, scripts, npm and pip layouts on disk.

Everything here writes files that the code under test really resolves, reads or runs;
nothing is mocked.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from probes.native import native_program


def write_executable(path: Path, text: str, *, mode: int = 0o755) -> Path:
    """Write ``text`` to ``path`` (replacing any file there by a new inode) and chmod it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    return path


def sh_script(path: Path, body: str, *, mode: int = 0o755) -> Path:
    """A ``#!/bin/sh`` script running ``body``."""
    return write_executable(path, "#!/bin/sh\n" + body + "\n", mode=mode)


def python_script(path: Path, body: str) -> Path:
    """A script run by the interpreter running the tests."""
    return write_executable(path, f"#!{sys.executable}\n{body}\n")


def printer(path: Path, output: str, *, counter: Path | None = None) -> Path:
    """A native program printing ``output`` exactly, appending a line to ``counter`` per run.

    Native, not a script: the runtime only trusts ``--version`` answers from native
    executables. It needs no PATH either (probes may run with a PATH holding nothing but the
    directory under test).
    """
    return native_program(path, stdout=output.encode("utf-8"), counter=counter)


def marker_script(path: Path, marker: Path, output: str) -> Path:
    """A native program that proves it ran (creates ``marker``) and prints ``output``."""
    return native_program(path, stdout=output.encode("utf-8") + b"\n", marker=marker)


def npm_package(folder: Path, *, node: str = "/usr/bin/env node") -> Path:
    """npm's own package in ``folder`` (its ``npmrc`` there is npm's builtin configuration):
    a package.json naming npm and its two scripts, ``bin/npx-cli.js`` and ``bin/npm-cli.js``,
    whose ``#!`` line runs ``node``. Returns ``folder``."""
    (folder / "bin").mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text(json.dumps({"name": "npm", "version": "11.19.1"}))
    for name in ("npx-cli.js", "npm-cli.js"):
        write_executable(folder / "bin" / name, f"#!{node}\nrequire('../lib/cli.js')\n")
    return folder


def node_with_npm(prefix: Path, *, env_node: bool = False) -> Path:
    """npm as node's installers lay it out under ``prefix``: a native ``bin/node`` (a stub
    that prints a version), npm's own package in ``lib/node_modules/npm``, and ``bin/npx``,
    ``bin/npm`` linked to its scripts. The scripts name that node (``env_node``: as npm
    ships them, ``#!/usr/bin/env node``, so the node first on PATH runs them). npm's global
    configuration is then ``prefix/etc/npmrc``. Returns ``prefix/bin``."""
    node = native_program(prefix / "bin" / "node", stdout=b"v20.20.2\n")
    npm_package(
        prefix / "lib" / "node_modules" / "npm", node="/usr/bin/env node" if env_node else str(node)
    )
    for name in ("npx", "npm"):
        (prefix / "bin" / name).symlink_to(f"../lib/node_modules/npm/bin/{name}-cli.js")
    return prefix / "bin"


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie awaiting its reaper counts as dead)."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    state = stat_line.rsplit(")", 1)[1].split()[0]
    return state not in {"Z", "X"}


def npm_layout(
    root: Path,
    *,
    package: str,
    bin_name: str,
    version: str,
    marker: Path,
    script_output: str,
    bin_rel: str = "cli.js",
    manifest: dict[str, Any] | None = None,
    manifest_text: str | None = None,
    package_dir_name: str | None = None,
) -> Path:
    """A global npm install under ``root``: ``lib/node_modules/<pkg>/`` with a package.json
    and an executable entry script, and ``bin/<bin_name>`` symlinked to it, as npm does.

    The entry script creates ``marker`` if it is ever executed. Returns ``root/bin``.
    """
    package_dir = root / "lib" / "node_modules" / (package_dir_name or package)
    script = marker_script(package_dir / bin_rel, marker, script_output)
    if manifest_text is None:
        data = (
            manifest
            if manifest is not None
            else {"name": package, "version": version, "bin": {bin_name: bin_rel}}
        )
        manifest_text = json.dumps(data)
    (package_dir / "package.json").write_text(manifest_text, encoding="utf-8")
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(script, bin_dir), bin_dir / bin_name)
    return bin_dir


def record_line(relpath: str, content: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
    return f"{relpath},sha256={digest},{len(content)}"


def pip_layout(
    prefix: Path,
    *,
    script_name: str,
    dist: str,
    version: str,
    marker: Path,
    script_output: str,
    dist_info_name: str | None = None,
    metadata_name: str | None = None,
    list_in_record: bool = True,
    interpreter: Path | None = None,
) -> Path:
    """A pip install under ``prefix``: ``bin/python`` (the test interpreter, symlinked),
    a console script ``bin/<script_name>`` whose shebang names it, and
    ``lib/python3.11/site-packages/<dist>-<version>.dist-info`` with METADATA and RECORD.

    The console script creates ``marker`` if executed. Returns the script's path.
    """
    bin_dir = prefix / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    python = bin_dir / "python"
    if not python.exists():
        os.symlink(sys.executable, python)
    shebang = interpreter if interpreter is not None else python
    script = write_executable(
        bin_dir / script_name,
        f"#!{shebang}\nimport pathlib\npathlib.Path({str(marker)!r}).touch()\n"
        f"print({script_output!r})\n",
    )
    site = prefix / "lib" / "python3.11" / "site-packages"
    info_name = dist_info_name or f"{dist.replace('-', '_')}-{version}.dist-info"
    info = site / info_name
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {metadata_name or dist}\nVersion: {version}\n"
        "Summary: test distribution\n\nVersion: 0.0.1 appears in the description only.\n",
        encoding="utf-8",
    )
    lines = [f"{info_name}/METADATA,,", f"{info_name}/RECORD,,"]
    if list_in_record:
        lines.append(record_line(f"../../../bin/{script_name}", script.read_bytes()))
    (info / "RECORD").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return script


# The console-script wrapper pip (and uv) generate for ``module:function``.
PIP_WRAPPER = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys
from {module} import {function}
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit({function}())
"""


def real_venv(prefix: Path) -> Path:
    """A real virtual environment (no pip) at ``prefix``; returns its ``bin/python``."""
    import venv

    venv.EnvBuilder(with_pip=False, symlinks=True).create(prefix)
    return prefix / "bin" / "python"


def linked_stdlib(lib: Path) -> Path:
    """``lib`` made a standard library of links to this interpreter's (without its
    site-packages), to which a test adds a module. Returns ``lib``."""
    stdlib = Path(sys.base_prefix) / "lib" / f"python3.{sys.version_info[1]}"
    lib.mkdir(parents=True, exist_ok=True)
    for entry in stdlib.iterdir():
        if entry.name != "site-packages":
            os.symlink(entry, lib / entry.name)
    return lib


def plain_interpreter(prefix: Path) -> Path | None:
    """A non-venv interpreter at ``prefix`` (a copy of this one, standard library linked
    in, empty site-packages), as a system or pyenv Python is laid out; returns its
    ``bin/pythonX.Y`` (``bin/python`` links to it), None if it cannot be relocated so."""
    import glob
    import shutil
    import subprocess

    real = Path(os.path.realpath(sys.executable))
    (prefix / "bin").mkdir(parents=True)
    lib = linked_stdlib(prefix / "lib" / f"python3.{sys.version_info[1]}")
    (lib / "site-packages").mkdir()
    for shared in glob.glob(str(Path(sys.base_prefix) / "lib" / "libpython*")):
        os.symlink(shared, prefix / "lib" / Path(shared).name)
    python = prefix / "bin" / real.name
    shutil.copy2(real, python)
    os.symlink(python.name, prefix / "bin" / "python")
    done = subprocess.run(
        [str(python), "-c", "import sys; print(sys.prefix)"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    return python if done.stdout.strip() == str(prefix) else None


def site_packages(prefix: Path) -> Path:
    [site] = sorted((prefix / "lib").glob("python3*/site-packages"))
    return site


def pip_install(
    prefix: Path,
    *,
    dist: str,
    module: str,
    version: str,
    marker: Path,
    script_name: str | None = None,
    banner: str | None = None,
    says: str | None = None,
    exit_status: int = 0,
) -> Path:
    """Install a fake but real-shaped distribution into the venv at ``prefix``.

    ``module`` is a package whose ``main()`` prints ``banner`` (default ``<module> <version>``)
    for ``--version`` and otherwise creates ``marker``, prints ``says`` (default ``ran`` and
    its arguments) and exits with ``exit_status``; ``python -m module`` works too. The
    console script ``bin/<script_name>`` is pip's generated wrapper. RECORD lists every file
    with its hash, as an installer writes it. Returns the console script's path.
    """
    python = prefix / "bin" / "python"
    if not python.exists():
        real_venv(prefix)
    site = site_packages(prefix)
    package = site / module
    package.mkdir(parents=True, exist_ok=True)
    said = banner if banner is not None else f"{module} {version}"
    files = {
        f"{module}/__init__.py": "",
        f"{module}/main.py": (
            "import pathlib, sys\n"
            "def main():\n"
            "    if sys.argv[1:] == ['--version']:\n"
            f"        print({said!r})\n"
            "        return 0\n"
            f"    pathlib.Path({str(marker)!r}).touch()\n"
            + (
                "    print('ran', *sys.argv[1:])\n"
                if says is None
                else f"    print({says!r}, end='')\n"
            )
            + f"    return {int(exit_status)}\n"
            "if __name__ == '__main__':\n"
            "    sys.exit(main())\n"
        ),
        f"{module}/__main__.py": f"import sys\nfrom {module}.main import main\nsys.exit(main())\n",
    }
    for rel, text in files.items():
        (site / rel).write_text(text, encoding="utf-8")
    script = write_executable(
        prefix / "bin" / (script_name or module),
        PIP_WRAPPER.format(python=python, module=f"{module}.main", function="main"),
    )
    info_name = f"{dist.replace('-', '_')}-{version}.dist-info"
    info = site / info_name
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8"
    )
    (info / "top_level.txt").write_text(module + "\n", encoding="utf-8")
    lines = [record_line(rel, (site / rel).read_bytes()) for rel in files]
    lines.append(record_line(f"../../../bin/{script.name}", script.read_bytes()))
    lines += [f"{info_name}/METADATA,,", f"{info_name}/top_level.txt,,", f"{info_name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return script


def aider_install(
    prefix: Path,
    version: str,
    *,
    marker: Path | None = None,
    says: str | None = None,
    exit_status: int = 0,
) -> Path:
    """aider ``version`` (distribution aider-chat) as pip installs it, in a virtual
    environment at ``prefix``: its console script, which creates ``marker`` (default
    ``prefix/ran``) when run. aider is published only as a Python package, so this, not a
    native program, is what stands in for it."""
    return pip_install(prefix, dist="aider-chat", module="aider", version=version,
                       marker=marker or prefix / "ran", script_name="aider", says=says,
                       exit_status=exit_status)  # fmt: skip


def node_cli_install(
    root: Path, *, package: str, bin_name: str, version: str, marker: Path | None = None
) -> Path:
    """A node CLI as npm installs it globally under ``root`` (its package's ``package.json``
    and ``cli.js``, ``bin/<bin_name>`` linked to it), whose ``#!`` line names a native
    stand-in for node at ``root/node/bin/node``: node is never needed, and running the CLI
    creates ``marker`` (default ``root/ran``). gemini and qwen are published only as node
    packages, so this, not a native program, stands in for them. Returns the bin link."""
    from probes.native import Run, native_agent

    node = native_agent(root / "node" / "bin" / "node", version=b"v20.20.2\n",
                        run=Run(marker=marker or root / "ran"))  # fmt: skip
    folder = root / "lib" / "node_modules" / package
    folder.mkdir(parents=True, exist_ok=True)
    manifest = {"name": package, "version": version, "bin": {bin_name: "cli.js"}}
    (folder / "package.json").write_text(json.dumps(manifest), encoding="utf-8")
    script = write_executable(folder / "cli.js", f"#!{node}\n")
    link = root / "bin" / bin_name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(script, link.parent))
    return link


def _install_folder(command: Path) -> Path:
    """A new folder for what ``command`` will link to, beside the folder ``command`` is in
    (never in it: a PATH folder holds only the command)."""
    import tempfile

    root = command.parent.parent / ".installs"
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{command.name}-", dir=root))


def _linked(command: Path, target: Path) -> Path:
    command.parent.mkdir(parents=True, exist_ok=True)
    command.unlink(missing_ok=True)
    command.symlink_to(target)
    return command


def aider_at(command: Path, version: str, **running: Any) -> Path:
    """``command`` linked to aider ``version``'s console script (``aider_install``, in a
    virtual environment of its own; ``running``: its keywords). Returns ``command``."""
    return _linked(command, aider_install(_install_folder(command), version, **running))


def gemini_at(command: Path, version: str, *, marker: Path | None = None) -> Path:
    """``command`` linked to gemini ``version``'s cli.js (``node_cli_install``, a global npm
    install of its own). Returns ``command``."""
    installed = node_cli_install(_install_folder(command), package="@google/gemini-cli",
                                 bin_name="gemini", version=version, marker=marker)  # fmt: skip
    return _linked(command, installed.resolve())


NODE_CLI = """#!/usr/bin/env node
const fs = require('fs');
const lib = require('./lib/version.js');
if (process.argv[2] === '--version') {{ console.log(lib.banner); process.exit(0); }}
fs.writeFileSync({marker}, 'ran');
console.log('ran ' + process.argv.slice(2).join(' '));
"""


def npm_install(
    root: Path, *, package: str, bin_name: str, version: str, marker: Path, banner: str
) -> Path:
    """A global npm install of a real node CLI under ``root`` (``lib/node_modules/<pkg>`` and a
    ``bin/<bin_name>`` symlink). The entry script requires a module relative to its real
    path, as bundled CLIs do. Returns ``root/bin``."""
    package_dir = root / "lib" / "node_modules" / package
    (package_dir / "lib").mkdir(parents=True, exist_ok=True)
    (package_dir / "lib" / "version.js").write_text(
        f"module.exports = {{banner: {json.dumps(banner)}}};\n", encoding="utf-8"
    )
    write_executable(package_dir / "cli.js", NODE_CLI.format(marker=json.dumps(str(marker))))
    (package_dir / "package.json").write_text(
        json.dumps({"name": package, "version": version, "bin": {bin_name: "cli.js"}}),
        encoding="utf-8",
    )
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(package_dir / "cli.js", bin_dir), bin_dir / bin_name)
    return bin_dir
