"""A real host process for runtime tests: a private copy of floorguard with a chosen floor map.

The runtime reads its floor map from the package's own ``floor_map.py``; to test a given or a
tampered map without touching the repository, each test gets a copy of the package and runs
its host code in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from probes.native import native_program

import floorguard
from floorguard._base._canonical import content_address
from floorguard._maps.map_model import entries_hash

PACKAGE = Path(floorguard.__file__).parent

HOST = r"""
import json, os, sys
import floorguard
os.environ.pop("PYTHONPATH", None)  # (the host's own, for its copy of floorguard)
request = json.loads(sys.argv[1])
try:
    d = floorguard.preflight(
        request["adapter"], binary=request.get("binary"), version=request.get("version")
    )
    out = {"raised": None, "verdict": d.verdict, "reason": d.reason, "receipt_id": d.receipt_id,
           "version": d.version, "detected_by": d.detected_by, "policy": d.policy, "floor": d.floor}
except floorguard.SpawnRefused as exc:
    d = exc.decision
    out = {"raised": "SpawnRefused", "message": str(exc),
           "verdict": d.verdict if d else None, "reason": d.reason if d else None,
           "receipt_id": d.receipt_id if d else None, "version": d.version if d else None,
           "detected_by": d.detected_by if d else None, "policy": d.policy if d else None,
           "floor": d.floor if d else None}
print(json.dumps(out))
"""


SPAWN_HOST = r"""
import json, os, sys
import floorguard
import floorguard._gate.launcher as launcher
request = json.loads(sys.argv[1])
def swapper(swap):
    def run():
        if swap["kind"] == "replace":
            os.replace(swap["with"], swap["path"])
        elif swap["kind"] == "retarget":
            os.remove(swap["path"])
            os.symlink(swap["with"], swap["path"])
        elif swap["kind"] == "exchange":
            os.rename(swap["path"], swap["path"] + ".swapping")
            os.rename(swap["with"], swap["path"])
            os.rename(swap["path"] + ".swapping", swap["with"])
    return run
if request.get("swap"):
    launcher._race_window_hook = swapper(request["swap"])
if request.get("after_open"):
    launcher._after_open_hook = swapper(request["after_open"])
# The host's PYTHONPATH brings it its own copy of floorguard: not the child's path.
env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
env.update(request.get("child_env", {}))
results = []
for policy in request.get("policies", [None]):
    if policy is None:
        os.environ.pop("FLOORGUARD_ADAPTER_FLOOR_POLICY", None)
    else:
        os.environ["FLOORGUARD_ADAPTER_FLOOR_POLICY"] = policy
    try:
        child = floorguard.spawn(request["adapter"], request["argv"], binary=request.get("binary"),
                                 env=env, cwd=request.get("cwd"), stdout=-1, text=True)
        out, _ = child.communicate(timeout=60)
        results.append({"started": True, "returncode": child.returncode, "stdout": out})
    except floorguard.SpawnRefused as exc:
        d = exc.decision
        results.append({"started": False, "message": str(exc),
                        "verdict": d.verdict if d else None,
                        "adapter": d.adapter if d else None,
                        "requested": getattr(d, "requested", None) if d else None,
                        "receipt_id": d.receipt_id if d else None})
print(json.dumps(results))
"""


# `python -I -m floorguard ARGS` of the package copy in the folder given first.
EXEC_COPY = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "from floorguard.__main__ import main; sys.exit(main())"
)


def map_module(
    entries: dict[str, dict[str, str]], *, stated_hash: str | None = None, version: int = 1
) -> str:
    """A floor_map.py in the default layout (as floorctl renders it)."""
    return (
        "# floor-map:begin\n"
        f"FLOOR_MAP_VERSION = {version}\n"
        f"FLOOR_MAP_HASH = {json.dumps(stated_hash or entries_hash(entries))}\n"
        f"FLOOR_MAP_ENTRIES = {json.dumps(entries, indent=4)}\n"
        "# floor-map:end\n"
    )


def floor(version: str, advisory: str = "BSA-0001") -> dict[str, str]:
    return {"min_safe_version": version, "advisory_id": advisory, "note": "test floor"}


class Host:
    """A package copy plus a state home: everything one runtime test touches."""

    def __init__(self, root: Path, entries: dict[str, dict[str, str]]) -> None:
        self.root = root
        self.site = root / "site"
        self.home = root / "home"
        shutil.copytree(
            PACKAGE, self.site / "floorguard", ignore=shutil.ignore_patterns("__pycache__", "maps")
        )
        self.set_map(map_module(entries))

    @property
    def map_file(self) -> Path:
        return self.site / "floorguard" / "floor_map.py"

    def set_map(self, text: str) -> None:
        self.map_file.write_text(text, encoding="utf-8")

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("FLOORGUARD_", "FLOORCTL_"))
        }
        env["PYTHONPATH"] = str(self.site)
        env["FLOORGUARD_HOME"] = str(self.home)
        env.update(extra)
        return env

    def python(
        self, *args: str, wrap: Sequence[str] = (), **extra: str
    ) -> subprocess.CompletedProcess[str]:
        """This host's Python run with ``args`` (under the command ``wrap``, when given)."""
        env = self.env(**extra)
        if args[:2] == ("-m", "floorguard"):
            # As the docs say to run exec: -I. It reads no PYTHONPATH, so this host's copy
            # of the package goes first on its path by hand, and what it judges (exec's
            # child, the doctor's agents) gets no PYTHONPATH of the host's.
            args = ("-I", "-c", EXEC_COPY, str(self.site), *args[2:])
            if "PYTHONPATH" not in extra:
                env.pop("PYTHONPATH", None)
        return subprocess.run(
            [*wrap, sys.executable, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )

    def preflight(
        self, adapter: str, *, binary: str | None = None, version: str | None = None, **extra: str
    ) -> dict[str, Any]:
        request = json.dumps({"adapter": adapter, "binary": binary, "version": version})
        done = self.python("-c", HOST, request, **extra)
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    def spawn(self, **request: Any) -> list[dict[str, Any]]:
        """Run ``floorguard.spawn`` in a host process once per policy in ``request``."""
        extra = request.pop("host_env", {})
        done = self.python("-c", SPAWN_HOST, json.dumps(request), **extra)
        assert done.returncode == 0, done.stderr
        result: list[dict[str, Any]] = json.loads(done.stdout)
        return result

    def chain_records(self) -> list[dict[str, Any]]:
        """Every record in the chain, read straight from SQLite (no floorguard code)."""
        import sqlite3

        db = self.home / "chain.sqlite3"
        if not db.exists():
            return []
        with sqlite3.connect(db) as conn:
            conn.row_factory = sqlite3.Row
            names = [r[1] for r in conn.execute("PRAGMA table_info(records)")]
            rows = conn.execute("SELECT * FROM records ORDER BY seq").fetchall()
        records = [dict(zip(names, row, strict=True)) for row in rows]
        for record in records:
            if isinstance(record.get("receipt"), str):
                record["receipt"] = json.loads(record["receipt"])
        return records


def receipt_in_chain(host: Host, receipt_id: str) -> dict[str, Any]:
    """The receipt named ``receipt_id``; fails unless its content address matches."""
    matches = [r for r in host.chain_records() if r["receipt_id"] == receipt_id]
    assert len(matches) == 1, f"{receipt_id} is in the chain {len(matches)} times"
    receipt: dict[str, Any] = matches[0]["receipt"]
    assert content_address(receipt) == receipt_id
    return receipt


def path_with(*dirs: Path) -> str:
    """A PATH that searches ``dirs`` first, then this process's PATH."""
    return os.pathsep.join([*map(str, dirs), os.environ.get("PATH", "")])


def write_script(path: Path, body: str) -> Path:
    """A native agent binary for the probe to run, behaving as the shell ``body`` says.

    The runtime only trusts ``--version`` answers from native executables, so the agent
    stand-ins are native programs. ``body`` reads like the script it replaces but may only
    use the statements a native stand-in can do: ``echo 'text'`` (``>&2`` for stderr),
    ``sleep N`` (or ``/bin/sleep N``) before any output, and a final ``exit N``, separated by
    ``;`` or newlines. Anything else is an error: a test that needs a shell says so with
    ``probes.sh_script``.
    """
    stdout, stderr, status, pause = b"", b"", 0, 0.0
    pieces = (piece.strip() for line in body.splitlines() for piece in line.split(";"))
    statements = [piece for piece in pieces if piece]
    for statement in statements:
        words = shlex.split(statement)
        if words[0] == "echo" and words[-1] == ">&2":
            stderr += " ".join(words[1:-1]).encode() + b"\n"
        elif words[0] == "echo":
            stdout += " ".join(words[1:]).encode() + b"\n"
        elif words[0] in {"sleep", "/bin/sleep"} and len(words) == 2 and not stdout + stderr:
            pause += float(words[1])
        elif words[0] == "exit" and len(words) == 2 and statement == statements[-1]:
            status = int(words[1])
        else:
            raise ValueError(f"not something a native stand-in does: {statement!r}")
    return native_program(path, stdout=stdout, stderr=stderr, exit_status=status, sleep=pause)


def calls_while_os_environ_changes(call: str, times: int) -> str:
    """Host code that evaluates the expression ``call`` ``times`` times while another thread
    sets and removes a variable of os.environ, and prints how often each outcome came
    (``refused: REASON`` for a SpawnRefused, ``NAME: MESSAGE`` for another exception).
    ``sys.argv[1]`` is the code's first argument; the host's own PYTHONPATH is taken out of
    os.environ first (a child given os.environ must not get it)."""
    return f"""
import json, os, sys, threading
import floorguard

os.environ.pop("PYTHONPATH", None)
stop = False

def churn():
    while not stop:
        os.environ["UNRELATED_VAR"] = "1"
        os.environ.pop("UNRELATED_VAR", None)

sys.setswitchinterval(1e-6)
thread = threading.Thread(target=churn)
thread.start()
outcomes = {{}}
try:
    for _ in range({times}):
        try:
            what = {call}
        except floorguard.SpawnRefused as exc:
            what = "refused: " + exc.decision.reason
        except Exception as exc:
            what = f"{{type(exc).__name__}}: {{exc}}"
        outcomes[what] = outcomes.get(what, 0) + 1
finally:
    stop = True
    thread.join()
print(json.dumps(outcomes))
"""
