"""A small world for the "closed world at the spawn" tests: real venvs, real node CLIs, a
host process running ``floorguard.spawn`` and a full account of what it did.

Every agent here is real code that leaves a marker file when it runs (``--version`` only
prints), so a test can tell whether below-floor code ran. The floor map gives aider a floor
of 0.60.0 and claude one of 1.0.100; the "old" installs sit below them, the "new" above.
Nothing of floorguard is mocked: the host is a fresh interpreter with a private copy of it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import venv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hosts import Host, floor, receipt_in_chain
from probes import npm_install, pip_install, site_packages

OLD_AIDER = "0.50.0"
NEW_AIDER = "0.70.0"
OLD_CLAUDE = "1.0.51"
NEW_CLAUDE = "1.0.200"
CLAUDE_PACKAGE = "@anthropic-ai/claude-code"

DEFAULT = "default"
DENY_BY_DEFAULT = "deny-by-default"
POLICIES = (DEFAULT, DENY_BY_DEFAULT)

# The interpreter version of the world's venvs, node, and a script body that runs whichever
# aider it imports: shared by the closed-world test modules.
PY = f"python{sys.version_info.major}.{sys.version_info.minor}"
NODE = shutil.which("node") or "/usr/bin/node"
needs_node = pytest.mark.skipif(not Path(NODE).exists(), reason="node is not installed")
RUN_AIDER = "import sys\nfrom aider.main import main\nsys.exit(main())\n"

# The system folders a child needs (sh, env, node); never the test run's own PATH, so the
# only agents a spawn can find are the ones a test put there.
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"

# Runs one spawn and reports everything: a start, a refusal with its whole decision, or any
# other exception (which is what an unrecorded failure after a permit looks like).
HOST = r"""
import json, os, sys
import floorguard
request = json.loads(sys.argv[1])
tamper = request.get("tamper")
if tamper:
    entry = floorguard.FLOOR_MAP[tamper["adapter"]]
    object.__setattr__(entry, "min_safe_version", tamper["min_safe_version"])
out = {"outcome": None}
try:
    child = floorguard.spawn(request["adapter"], request["argv"], binary=request.get("binary"),
                             env=request["env"], cwd=request.get("cwd"),
                             stdout=-1, stderr=-1, text=True)
    try:
        stdout, stderr = child.communicate(timeout=60)
    except BaseException:
        child.kill()  # (a child that never ends, one that execs itself for ever, is not left)
        child.communicate()
        raise
    out.update(outcome="started", returncode=child.returncode, stdout=stdout, stderr=stderr)
except floorguard.SpawnRefused as exc:
    d = exc.decision
    out.update(outcome="refused", message=str(exc))
    if d is not None:
        out.update(verdict=d.verdict, reason=d.reason, adapter=d.adapter,
                   requested=d.requested, version=d.version, floor=d.floor,
                   receipt_id=d.receipt_id, identified_by=d.identified_by)
except Exception as exc:
    out.update(outcome="error", error=f"{type(exc).__name__}: {exc}")
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Venv:
    """An aider install in a real virtual environment."""

    prefix: Path
    python: Path
    script: Path
    site: Path
    marker: Path
    version: str


@dataclass(frozen=True)
class NodeCli:
    """A claude install: its package folder, entry script, the folder of its bin link."""

    package: Path
    cli: Path
    bin_dir: Path
    marker: Path
    version: str


@dataclass
class Outcome:
    """What one spawn did, as the host saw it."""

    data: dict[str, Any]
    policy: str

    @property
    def reason(self) -> str:
        return str(self.data.get("reason") or "")

    def __getitem__(self, key: str) -> Any:
        return self.data.get(key)

    def __repr__(self) -> str:
        return f"Outcome({self.policy}: {json.dumps(self.data)[:3000]})"


class World:
    """Installs, a child environment and a host for one test's spawns."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.host = Host(root / "host", {"aider": floor("0.60.0"), "claude": floor("1.0.100")})
        self.home = root / "home"
        self.home.mkdir()

    # -------------------------------------------------------------------- installs

    def aider(self, version: str, *, name: str, system_site: bool = False) -> Venv:
        """aider-chat ``version`` pip-installed in a new venv ``name``."""
        prefix = self.root / name
        if system_site:
            venv.EnvBuilder(with_pip=False, symlinks=True, system_site_packages=True).create(prefix)
        marker = self.root / f"{name}-ran"
        script = pip_install(
            prefix, dist="aider-chat", module="aider", version=version, marker=marker
        )
        return Venv(prefix, prefix / "bin" / "python", script, site_packages(prefix), marker,
                    version)  # fmt: skip

    def old_aider(self, **kwargs: Any) -> Venv:
        return self.aider(OLD_AIDER, name="old-aider", **kwargs)

    def new_aider(self, **kwargs: Any) -> Venv:
        return self.aider(NEW_AIDER, name="new-aider", **kwargs)

    def claude(self, version: str, *, name: str) -> NodeCli:
        """claude ``version`` installed globally under ``name`` (``lib/node_modules`` and a
        ``bin/claude`` link); its package.json also names ``cli.js`` as ``main``, as the real
        package's does, so the package folder itself can be required or run."""
        marker = self.root / f"{name}-ran"
        bin_dir = npm_install(
            self.root / name,
            package=CLAUDE_PACKAGE,
            bin_name="claude",
            version=version,
            marker=marker,
            banner=f"{version} (Claude Code)",
        )
        package = self.root / name / "lib" / "node_modules" / CLAUDE_PACKAGE
        manifest = json.loads((package / "package.json").read_text(encoding="utf-8"))
        manifest["main"] = "cli.js"
        (package / "package.json").write_text(json.dumps(manifest), encoding="utf-8")
        return NodeCli(package, package / "cli.js", bin_dir, marker, version)

    def old_claude(self) -> NodeCli:
        return self.claude(OLD_CLAUDE, name="old-claude")

    def new_claude(self) -> NodeCli:
        return self.claude(NEW_CLAUDE, name="new-claude")

    def project_claude(self, project: Path, version: str) -> NodeCli:
        """claude ``version`` as a project dependency: ``project/node_modules/<pkg>`` and the
        ``node_modules/.bin/claude`` link npm makes for it."""
        staged = self.claude(version, name=f"staged-{project.name}-{version}")
        package = project / "node_modules" / CLAUDE_PACKAGE
        package.parent.mkdir(parents=True, exist_ok=True)
        os.rename(staged.package, package)
        bin_dir = project / "node_modules" / ".bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(package / "cli.js", bin_dir), bin_dir / "claude")
        return NodeCli(package, package / "cli.js", bin_dir, staged.marker, version)

    # ----------------------------------------------------------------------- spawns

    def env(self, *path: Path, **extra: str) -> dict[str, str]:
        """A child environment: ``path`` folders first on PATH, a private HOME, ``extra``."""
        env = {
            "PATH": os.pathsep.join([*map(str, path), SYSTEM_PATH]),
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
        }
        env.update(extra)
        return env

    def spawn(
        self,
        adapter: str,
        argv: list[str],
        *,
        policy: str,
        env: dict[str, str],
        binary: Path | str | None = None,
        cwd: Path | str | None = None,
        tamper: dict[str, str] | None = None,
        floor_policy: str | None = None,
        wrap: Sequence[str] = (),
    ) -> Outcome:
        """``floorguard.spawn`` in a fresh host process; ``policy`` is the host's untracked
        policy (deny-by-default sets ``FLOORGUARD_UNTRACKED_POLICY=refuse`` in the host's
        environment, never the child's), ``floor_policy`` its FLOORGUARD_ADAPTER_FLOOR_POLICY,
        ``wrap`` a command the host runs under (a private noexec mount)."""
        request = {
            "adapter": adapter,
            "argv": argv,
            "binary": None if binary is None else str(binary),
            "env": env,
            "cwd": None if cwd is None else str(cwd),
            "tamper": tamper,
        }
        host_env = {"FLOORGUARD_UNTRACKED_POLICY": "refuse"} if policy == DENY_BY_DEFAULT else {}
        if floor_policy is not None:
            host_env["FLOORGUARD_ADAPTER_FLOOR_POLICY"] = floor_policy
        done = self.host.python("-c", HOST, json.dumps(request), wrap=wrap, **host_env)
        assert done.returncode == 0, done.stderr
        return Outcome(json.loads(done.stdout), policy)

    # ------------------------------------------------------------------- assertions

    def run_workspace_script(self, venv: Venv, program: str) -> Outcome:
        """``program`` written to ``ws/run.py`` and run by ``venv``'s python in the workspace
        (deny-by-default), as a launcher script there would be."""
        workspace = self.root / "ws"
        workspace.mkdir(exist_ok=True)
        (workspace / "run.py").write_text(program, encoding="utf-8")
        return self.spawn(
            "python", [str(workspace / "run.py"), "task"], policy=DENY_BY_DEFAULT,
            binary=venv.python, env=self.env(), cwd=workspace,
        )  # fmt: skip

    def assert_refused(self, outcome: Outcome, marker: Path, *names: str) -> None:
        """Refused and recorded, the old code never ran, and the reason names one of
        ``names`` (case-insensitively: the input responsible)."""
        recorded = self.recorded()
        assert not marker.exists(), f"the below-floor code ran: {outcome!r}; recorded {recorded}"
        assert outcome["outcome"] == "refused", f"not refused: {outcome!r}; recorded {recorded}"
        assert outcome["verdict"] == "refuse", outcome
        receipt = receipt_in_chain(self.host, str(outcome["receipt_id"]))
        assert receipt["verdict"] == "refuse", receipt
        if names:
            reason = outcome.reason.lower()
            assert any(name.lower() in reason for name in names), (
                f"the reason names none of {names}: {outcome.reason!r}"
            )

    def recorded(self) -> list[dict[str, Any]]:
        """The gist of every spawn decision in this world's chain, oldest first."""
        keys = ("verdict", "adapter", "requested", "version", "identified_by", "reason")
        return [
            {key: r["receipt"].get(key) for key in keys}
            for r in self.host.chain_records()
            if isinstance(r.get("receipt"), dict) and "verdict" in r["receipt"]
        ]

    def assert_no_permit_recorded(self) -> None:
        """No permit (nor any other allowing verdict) was ever sealed in this world's chain."""
        allowed = [
            r["receipt"].get("verdict")
            for r in self.host.chain_records()
            if isinstance(r.get("receipt"), dict)
            and r["receipt"].get("verdict") in {"permit", "untracked", "warn_override", "waived"}
        ]
        assert not allowed, f"allowing receipts were sealed: {allowed}"

    def assert_permitted_and_ran(self, outcome: Outcome, marker: Path) -> None:
        """The child started, exited 0 and left its marker; the last receipt is a permit."""
        assert outcome["outcome"] == "started", f"not started: {outcome!r}"
        assert outcome["returncode"] == 0, outcome
        assert marker.exists(), f"the child did not run: {outcome!r}"
        verdicts = [
            r["receipt"].get("verdict")
            for r in self.host.chain_records()
            if isinstance(r.get("receipt"), dict)
        ]
        assert verdicts and verdicts[-1] == "permit", verdicts


def old_aider_code(site: Path) -> str:
    """Module source that, when imported, runs the below-floor aider installed at ``site``."""
    return (
        "import sys\n"
        f"sys.path.insert(0, {str(site)!r})\n"
        "for name in [m for m in sys.modules if m == 'aider' or m.startswith('aider.')]:\n"
        "    del sys.modules[name]\n"
        "from aider.main import main\n"
        "main()\n"
    )


def editable_install(
    site: Path,
    dist: str,
    source: Path,
    *,
    top_level: str | None = None,
    pth: str | None = None,
    version: str = "0.1",
) -> None:
    """An editable install of ``dist`` ``version`` from ``source``: a ``.pth`` path line
    (``pth``, by default named as hatchling names it) and the dist-info whose RECORD lists
    it, as pip leaves a PEP 660 install (setuptools also writes top_level.txt)."""
    pth = pth or f"_{dist.replace('-', '_')}.pth"
    (site / pth).write_text(f"{source}\n", encoding="utf-8")
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8"
    )
    if top_level is not None:
        (info / "top_level.txt").write_text(f"{top_level}\n", encoding="utf-8")
    lines = [f"{pth},,", f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(lines) + "\n", encoding="utf-8")
