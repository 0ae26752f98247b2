"""A script's ``--version`` answer is never taken: asking runs the script's code, and it
answers whatever it prints. A file of a catalogued package, named by the package's `bin`
or not, is the package's code at the version its metadata states; one whose metadata
states no valid version is refused as of unknown version, and the script is not run at all.
"""

from __future__ import annotations

import json

import pytest
from helpers.closed_world import DEFAULT, World

pytestmark = pytest.mark.attack

# What the at-floor claude's package.json says of its version instead of "1.0.100".
MANIFEST_VERSIONS = {
    "no version": None,
    "a range": "=1.0.40",
    "a v prefix": "v1.0.40",
    "surrounding space": " 1.0.40",
    "not a version": "latest",
}


@pytest.mark.parametrize("stated", sorted(MANIFEST_VERSIONS))
def test_a_catalogued_script_without_a_valid_metadata_version_is_refused_unasked(
    world: World, stated: str
) -> None:
    # The code is below the floor (1.0.40); asked --version, it would claim 1.0.100.
    cli = world.claude("1.0.40", name="claude-pkg")
    asked = world.root / "asked"
    (cli.package / "lib" / "version.js").write_text(
        f"require('fs').writeFileSync({json.dumps(str(asked))}, 'asked');\n"
        "module.exports = {banner: '1.0.100 (Claude Code)'};\n",
        encoding="utf-8",
    )
    manifest_file = cli.package / "package.json"
    manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    if MANIFEST_VERSIONS[stated] is None:
        del manifest["version"]
    else:
        manifest["version"] = MANIFEST_VERSIONS[stated]
    manifest_file.write_text(json.dumps(manifest), encoding="utf-8")
    outcome = world.spawn("claude", ["task"], policy=DEFAULT, env=world.env(cli.bin_dir))
    world.assert_refused(outcome, cli.marker, "package.json", "not a valid SemVer version")
    assert not asked.exists(), "the script was run to ask its version"


@pytest.mark.parametrize(("version", "permitted"), [("1.0.100", True), ("1.0.40", False)])
def test_any_file_of_the_package_run_by_the_adapter_s_name_is_judged_by_the_package(
    world: World, version: str, permitted: bool
) -> None:
    # PATH's claude leads to a file of the package that its `bin` does not name: the
    # package's code at the package's version, as `node FILE` is (never asked).
    cli = world.claude(version, name=f"claude-other-file-{version}")
    other = cli.package / "other.js"
    other.write_bytes(cli.cli.read_bytes())
    other.chmod(0o755)
    (cli.bin_dir / "claude").unlink()
    (cli.bin_dir / "claude").symlink_to(other)
    outcome = world.spawn("claude", ["task"], policy=DEFAULT, env=world.env(cli.bin_dir))
    if permitted:
        world.assert_permitted_and_ran(outcome, cli.marker)
        assert world.recorded()[-1]["version"] == version
    else:
        world.assert_refused(outcome, cli.marker, "below the floor")
