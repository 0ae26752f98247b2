"""Benchmark of ``floorctl import osv`` (run with ``-m perf``; excluded from the default run).

- Time: importing a zip of 200,000 synthetic OSV records (the layout of the OSV export
  ``all.zip``: mostly records of other packages, a fixed number for adapters) against the
  bare floor of reading every member of the same zip with ``zipfile`` and ``json.loads``
  of each: target at most 3x.
- Memory: the import streams the zip member by member and keeps only what maps to an
  adapter, so its peak memory (VmHWM of a fresh process) stays flat as the zip grows
  tenfold, 20,000 to 200,000 records.

The numbers are printed (``-s`` shows them); the assertions allow for noisy shared machines
and catch only regressions well past the targets.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from helpers.bench import interleaved_medians

from floorctl import osv, osv_sources

pytestmark = pytest.mark.perf

ADAPTER_RECORDS = 500  # the same number in both zips: memory may grow with these only


def _record(n: int) -> dict[str, Any]:
    mine = n % 37 == 0 and n < 37 * ADAPTER_RECORDS  # all within the first 20,000
    package = (
        {"ecosystem": "npm", "name": "@anthropic-ai/claude-code"}
        if mine
        else {"ecosystem": "npm", "name": f"package-{n % 50_000}"}
    )
    ghsa = f"GHSA-{n:04x}-{n % 9973:04x}-{n % 7919:04x}"
    return {
        "schema_version": "1.6.0",
        "id": ghsa,
        "modified": "2025-06-01T12:00:00Z",
        "published": "2025-05-30T08:00:00Z",
        "aliases": [f"CVE-2025-{n:05d}"],
        "summary": f"Prototype pollution in package {n}",
        "details": "### Impact\n" + "An attacker can change object prototypes. " * 12,
        "severity": [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}],
        "affected": [
            {
                "package": package,
                "ranges": [
                    {
                        "type": "ECOSYSTEM",
                        "events": [
                            {"introduced": "0"},
                            {"fixed": f"1.{n % 40}.{n % 17}"},
                            {"introduced": "2.0.0-beta.1"},
                            {"fixed": f"2.{n % 9}.{n % 5}"},
                        ],
                    }
                ],
                "database_specific": {"source": f"https://github.com/advisories/{ghsa}"},
            }
        ],
        "references": [
            {"type": "ADVISORY", "url": f"https://nvd.nist.gov/vuln/detail/CVE-2025-{n:05d}"},
            {"type": "PACKAGE", "url": "https://github.com/example/package"},
        ],
        "database_specific": {"cwe_ids": ["CWE-1321"], "severity": "HIGH"},
    }


def _write_zip(path: Path, count: int) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for n in range(count):
            item = _record(n)
            archive.writestr(f"{item['id']}.json", json.dumps(item, indent=2))
    return path


@pytest.fixture(scope="module")
def zips(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    folder = tmp_path_factory.mktemp("osv")
    return {count: _write_zip(folder / f"all-{count}.zip", count) for count in (20_000, 200_000)}


def read_and_parse(path: Path) -> None:
    """The least any importer must do: inflate every member and json.loads it."""
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            json.loads(archive.read(info))


def test_bench_import_osv_200k_records_against_the_bare_floor(
    zips: dict[int, Path], tmp_path: Path
) -> None:
    count = 200_000
    source = zips[count]
    packages = osv.package_map()

    def ours() -> None:
        result = osv.import_records(osv_sources.iter_source(source), packages, skip_invalid=False)
        assert result.counts.records_read == count
        assert result.counts.advisories == ADAPTER_RECORDS
        text = json.dumps(result.feed, indent=2)
        (tmp_path / "feed.json").write_text(text)

    medians = interleaved_medians({"floor": lambda: read_and_parse(source), "ours": ours})
    floor_s, ours_s = medians["floor"], medians["ours"]
    ratio = ours_s / floor_s
    print(
        f"\nimport osv over {count:,} records: {ours_s:.2f} s "
        f"({ours_s / count * 1e6:.1f} us/record), bare floor (zipfile + json.loads) "
        f"{floor_s:.2f} s, ratio {ratio:.2f}x (target <= 3x)"
    )
    assert ratio < 4.5


_MEASURE = """
import resource, sys
from pathlib import Path
from floorctl import osv, osv_sources
result = osv.import_records(
    osv_sources.iter_source(Path(sys.argv[1])), osv.package_map(), skip_invalid=False
)
assert result.counts.advisories == int(sys.argv[2]), result.counts
# ru_maxrss survives exec on Linux (it would report the forking parent's peak); VmHWM
# belongs to this process's own address space.
status = Path("/proc/self/status")
if status.exists():
    print(next(l.split()[1] for l in status.read_text().splitlines() if l.startswith("VmHWM:")))
else:
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _peak_kib(path: Path) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path), str(ADAPTER_RECORDS)],
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    )
    return int(done.stdout.strip())


def test_bench_import_osv_memory_is_flat_as_the_zip_grows_tenfold(zips: dict[int, Path]) -> None:
    small, large = _peak_kib(zips[20_000]), _peak_kib(zips[200_000])
    size_mib = zips[200_000].stat().st_size / 2**20
    print(
        f"\npeak RSS of import osv: 20,000 records {small / 1024:.1f} MiB, 200,000 records "
        f"{large / 1024:.1f} MiB (zip of {size_mib:.0f} MiB); "
        f"this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )
    assert large - small < 16 * 1024
