"""Benchmark (run with ``-m perf -s``): what reading and judging an agent's MCP servers adds
to its preflight, warm.

A claude preflight in a project whose ``.mcp.json`` declares a handful of servers (three
local native programs: one tracked at its floor, two untracked; two remote) plus a user
``~/.claude.json`` with one more local server, against the same preflight in a project
with no configuration at all, interleaved. Target: under 2 ms added (the median of the
one minus the median of the other, in wall time and in this process's CPU time, which a
busy neighbour disturbs less); the spread is printed as the quartiles of each.

And the read of npm's local trees that judging ``npx -y PKG@V`` takes (every package.json
of every ``node_modules`` from the working directory up): a project of 2,000 packages,
read afresh (each judgement, before it was kept) against reused while every folder and file
it read is unchanged (one stat each). Target: the reuse under a fifth of the read.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import pytest
from hosts import write_script
from probes import aider_at

import floorguard

pytestmark = pytest.mark.perf


def _quartiles(samples: list[float]) -> str:
    q1, q2, q3 = statistics.quantiles(samples, n=4)
    return f"{q1 * 1e6:.0f}/{q2 * 1e6:.0f}/{q3 * 1e6:.0f} us"


def test_bench_preflight_with_a_handful_of_mcp_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rounds = 300
    for variable in ("FLOORGUARD_FLOOR_MAP", "FLOORGUARD_ADAPTER_FLOOR_POLICY"):
        monkeypatch.delenv(variable, raising=False)
    bin_dir, home = tmp_path / "bin", tmp_path / "home"
    with_servers, without = tmp_path / "with", tmp_path / "without"
    for folder in (bin_dir, home, with_servers, without):
        folder.mkdir()
    claude = write_script(bin_dir / "claude", "echo '1.0.30 (Claude Code)'")
    aider_at(bin_dir / "aider", "0.70.0")
    write_script(bin_dir / "files-server", "echo 'files-server 1.0.0'")
    write_script(bin_dir / "db-server", "echo 'db-server 2.1.0'")
    servers = {
        "aider": {"command": "aider", "args": ["--mcp"]},
        "files": {"command": "files-server", "args": ["--root", "."], "env": {"LOG": "1"}},
        "db": {"command": str(bin_dir / "db-server")},
        "docs": {"type": "http", "url": "https://mcp.example/docs"},
        "search": {"type": "sse", "url": "https://mcp.example/search"},
    }
    (with_servers / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    user = {"numStartups": 12, "mcpServers": {"mine": {"command": "files-server"}}}
    (home / ".claude.json").write_text(json.dumps(user))
    empty_home = tmp_path / "empty-home"
    empty_home.mkdir()
    monkeypatch.setenv("FLOORGUARD_HOME", str(tmp_path / "fg"))
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")

    cpu: dict[Path, list[float]] = {with_servers: [], without: []}

    def once(project: Path, home_dir: Path) -> float:
        os.environ["HOME"] = str(home_dir)
        os.chdir(project)
        started, used = time.perf_counter(), time.process_time()
        decision = floorguard.preflight("claude", binary=str(claude))
        elapsed = time.perf_counter() - started
        cpu[project].append(time.process_time() - used)
        assert decision.verdict == "permit", decision.reason
        return elapsed

    monkeypatch.chdir(tmp_path)  # restored afterwards
    monkeypatch.setenv("HOME", str(home))
    once(with_servers, home)  # warm: every server's identification is cached
    once(without, empty_home)
    ours, bare = [], []
    for _ in range(rounds):  # interleaved: both see the same disk and neighbours
        ours.append(once(with_servers, home))
        bare.append(once(without, empty_home))
    added = statistics.median(ours) - statistics.median(bare)
    cpu_added = statistics.median(cpu[with_servers]) - statistics.median(cpu[without])
    print(
        f"\npreflight of claude with 4 local and 2 remote MCP servers: median "
        f"{statistics.median(ours) * 1e6:.0f} us (quartiles {_quartiles(ours)}); without "
        f"configuration {statistics.median(bare) * 1e6:.0f} us (quartiles {_quartiles(bare)});"
        f" added {added * 1e3:.2f} ms (target < 2 ms), ratio "
        f"{statistics.median(ours) / statistics.median(bare):.2f}x; this process's CPU time "
        f"added {cpu_added * 1e3:.2f} ms (steadier than wall time on a shared machine)"
    )


def test_bench_the_read_of_npms_local_trees_fresh_and_reused(tmp_path: Path) -> None:
    from floorguard._identify import launchers
    from floorguard._identify.consulted import clear_cache

    project = tmp_path / "project"
    for n in range(2000):
        # a tenth in scopes, a fifth nested under another package
        folder = project / "node_modules" / (f"@s{n % 7}/p{n}" if n % 10 == 0 else f"p{n}")
        if n % 5 == 1:
            folder = project / "node_modules" / f"p{n - 1}" / "node_modules" / f"d{n}"
        folder.mkdir(parents=True, exist_ok=True)
        manifest = {"name": folder.name, "version": "1.0.0", "description": "x" * 400,
                    "dependencies": {f"d{i}": "^1.0.0" for i in range(10)}}  # fmt: skip
        (folder / "package.json").write_text(json.dumps(manifest), encoding="utf-8")
    launch = launchers.Launch("npx", "npm", "mcp-remote", "mcp-remote@0.1.16", "0.1.16")
    fresh, reused = [], []
    for _ in range(15):
        clear_cache()
        started = time.perf_counter()
        assert launchers._stated_in_the_local_trees(launch, project) is None
        fresh.append(time.perf_counter() - started)
        started = time.perf_counter()
        assert launchers._stated_in_the_local_trees(launch, project) is None
        reused.append(time.perf_counter() - started)
    ratio = statistics.median(reused) / statistics.median(fresh)
    print(
        f"\nnpm's local trees, 2,000 packages: read {statistics.median(fresh) * 1e3:.1f} ms, "
        f"reused {statistics.median(reused) * 1e3:.1f} ms, {ratio:.2f} of a read (target < 0.2)"
    )
