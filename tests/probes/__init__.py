"""Real executables for detection tests: small scripts, npm and pip layouts on disk.

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
    """A script that prints ``output`` exactly, appending a line to ``counter`` per run."""
    body = ""
    if counter is not None:
        body += f"echo run >> '{counter}'\n"
    # Octal escapes and the shell's own printf: no quoting pitfalls, and no dependency on
    # PATH (probes may run with a PATH holding nothing but the directory under test).
    escaped = "".join(f"\\{byte:03o}" for byte in output.encode("utf-8"))
    body += f"printf '{escaped}'"
    return sh_script(path, body)


def marker_script(path: Path, marker: Path, output: str) -> Path:
    """A shell script that proves it ran (creates ``marker``) and prints ``output``."""
    # ":" and printf are shell builtins: the script works whatever PATH the probe gets.
    return sh_script(path, f": > '{marker}'\nprintf '%s\\n' '{output}'")


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
