"""``[tool.floorctl]`` in pyproject.toml: where it is read from, what it may hold, and what
it changes, on the real CLI in real folders (plus the pure parser on strings)."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest
from helpers.cli import floorctl

from floorctl import config, render
from floorctl.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
EMPTY_MODULE = '"""Host module."""\n\n# floor-map:begin\n# floor-map:end\n'
PEM = (
    "-----BEGIN PRIVATE KEY-----\n"
    "MC4CAQAwBQYDK2VwBCIEIHc2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlYw==\n"
    "-----END PRIVATE KEY-----\n"
)


def feed(floor: str = "0.60.0") -> str:
    entry = {"min_safe_version": floor, "advisory_id": "BSA-0001", "note": "Upgrade."}
    return json.dumps({"schema_version": 1, "adapters": {"aider": entry}})


def toml_table(**values: object) -> str:
    """A [tool.floorctl] table (keys spelt with hyphens: trusted_keys -> trusted-keys)."""
    lines = ["[project]", 'name = "host"', "", "[tool.floorctl]"]
    lines += [f"{key.replace('_', '-')} = {json.dumps(value)}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def make_project(root: Path, floor: str = "0.60.0", **values: object) -> Path:
    """root/pyproject.toml naming root/feeds/feed.json and root/src/floor_map.py, the module
    written (in sync) by one refresh."""
    (root / "feeds").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "feeds" / "feed.json").write_text(feed(floor))
    (root / "src" / "floor_map.py").write_text(EMPTY_MODULE)
    table = {"feeds": ["feeds/feed.json"], "module": "src/floor_map.py", **values}
    (root / "pyproject.toml").write_text(toml_table(**table))
    written = floorctl("refresh", "--write", cwd=root, state=root.parent / "state")
    assert written.returncode == 0, written.stderr
    return root


def run(cwd: Path, *args: str | Path, **extra: str) -> tuple[int, str, str]:
    done = floorctl(*args, cwd=cwd, state=cwd.parent / "state", **extra)
    assert "Traceback" not in done.stderr
    return done.returncode, done.stdout, done.stderr


def usage_error(result: tuple[int, str, str], *fragments: str, ours: bool = True) -> str:
    """Exit 2 with every fragment on stderr; for floorctl's own errors (not click's), the
    one documented line."""
    status, _, stderr = result
    assert status == 2, stderr
    if ours:
        assert stderr.startswith("floorctl: error: "), stderr
        assert len(stderr.strip().splitlines()) == 1, stderr
    for fragment in fragments:
        assert fragment in stderr, stderr
    return stderr


# --- the pure parser ------------------------------------------------------------------------


def parse(text: str, base: str = ".", *, required: bool = False) -> config.Config | None:
    return config.parse(text.encode(), Path("pyproject.toml"), base=Path(base), required=required)


def test_a_pyproject_without_the_table_is_no_configuration() -> None:
    assert parse('[project]\nname = "x"\n') is None
    assert parse("[tool.ruff]\nline-length = 100\n") is None


def test_a_file_named_with_config_must_hold_the_table() -> None:
    with pytest.raises(ConfigError, match=r"pyproject.toml: no \[tool.floorctl\] table"):
        parse("[tool.ruff]\nline-length = 100\n", required=True)


def test_relative_paths_are_joined_to_the_config_folder_urls_and_names_kept() -> None:
    parsed = parse(
        toml_table(
            feeds=["feeds/a.json", "https://example.org/f.json", "/abs/b.json"],
            module="src/floor_map.py",
            template="bernstein",
            trusted_keys="keys/pub.pem",
            waivers="w.json",
            signing_key="/run/secrets/k",
        ),
        base="..",
    )
    assert parsed == config.Config(
        source=Path("pyproject.toml"),
        feeds=("../feeds/a.json", "https://example.org/f.json", "/abs/b.json"),
        module=Path("../src/floor_map.py"),
        template="bernstein",
        trusted_keys=Path("../keys/pub.pem"),
        waivers=Path("../w.json"),
        signing_key=Path("/run/secrets/k"),
    )


def test_a_template_path_is_resolved_and_a_bare_unknown_name_refused() -> None:
    parsed = parse(toml_table(template="tpl/mine.py.j2"), base="..")
    assert parsed is not None and parsed.template == "../tpl/mine.py.j2"
    with pytest.raises(ConfigError, match="template must be floorguard or bernstein"):
        parse(toml_table(template="floorgaurd"))


def test_the_template_names_are_floorctl_renders() -> None:
    assert config.TEMPLATE_NAMES == render.TEMPLATE_NAMES


@pytest.mark.parametrize(
    ("table", "fragment"),
    [
        ('feeds = "feeds/a.json"', "feeds must be a non-empty list of paths or URLs, not a string"),
        ("feeds = []", "feeds must be a non-empty list"),
        ('feeds = ["a.json", 3]', "feeds[1] is an integer"),
        ('feeds = [""]', "feeds[0] is a string"),
        ('feeds = ["ftp://example.org/f.json"]', "feeds[0]: only https"),
        ("module = 1", "module must be a non-empty string"),
        ('template = ["floorguard"]', "template must be a non-empty string"),
        ("trusted-keys = true", "trusted-keys must be a non-empty string"),
        ('waivers = ""', "waivers must be a non-empty string"),
        ("signing-key = {path = 'k'}", "signing-key must be a non-empty string"),
    ],
)
def test_a_wrong_type_is_refused_naming_the_key(table: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse(f"[tool.floorctl]\n{table}\n")
    assert str(raised.value).startswith("pyproject.toml: [tool.floorctl]: ")
    assert fragment in str(raised.value)


def test_a_table_that_is_not_a_table_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"\[tool.floorctl\] must be a table, not a string"):
        parse('[tool]\nfloorctl = "yes"\n')


@pytest.mark.parametrize("key", ["signing-key", "trusted-keys", "module", "waivers"])
def test_a_pem_key_where_a_path_belongs_is_refused_without_repeating_it(key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse(f"[tool.floorctl]\n{key} = '''{PEM}'''\n")
    message = str(raised.value)
    assert f"{key} holds a PEM key, not a path" in message
    assert "BEGIN" not in message and "MC4C" not in message


def test_invalid_toml_is_refused_naming_the_file() -> None:
    with pytest.raises(ConfigError, match=r"^pyproject.toml: invalid TOML: .*line 2"):
        parse("[tool.floorctl]\nfeeds = ]\n")


# --- the CLI: where the configuration is read from -----------------------------------------


def test_refresh_check_needs_no_flag_with_a_config(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    assert run(project, "refresh", "--check")[0] == 0
    (project / "feeds" / "feed.json").write_text(feed("0.61.0"))
    status, _, stderr = run(project, "refresh", "--check")
    assert status == 1
    assert "src/floor_map.py: stale" in stderr


def test_a_config_in_a_parent_folder_is_found_from_a_subfolder(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    deep = project / "docs" / "deep"
    deep.mkdir(parents=True)
    status, stdout, stderr = run(deep, "refresh", "--check")
    assert status == 0, stderr
    assert stdout.startswith("../../src/floor_map.py: 1 adapters")


def test_relative_paths_are_resolved_against_the_config_folder_not_the_cwd(
    tmp_path: Path,
) -> None:
    project = make_project(tmp_path / "project")
    # Decoys where the same relative paths would lead from the subfolder: never read.
    sub = project / "sub"
    (sub / "feeds").mkdir(parents=True)
    (sub / "src").mkdir()
    (sub / "feeds" / "feed.json").write_text(feed("9.0.0"))
    (sub / "src" / "floor_map.py").write_text("not a module")
    assert run(sub, "refresh", "--check")[0] == 0
    (project / "feeds" / "feed.json").write_text(feed("0.61.0"))
    status, _, stderr = run(sub, "refresh", "--write")
    assert status == 0, stderr
    assert "0.61.0" in (project / "src" / "floor_map.py").read_text()
    assert (sub / "src" / "floor_map.py").read_text() == "not a module"


def test_the_nearest_pyproject_without_the_table_stops_the_search(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    nested = project / "packages" / "other"
    nested.mkdir(parents=True)
    (nested / "pyproject.toml").write_text('[project]\nname = "other"\n')
    usage_error(run(nested, "refresh", "--check"), "no feed: pass --feed SRC", ours=False)
    # Its own subfolders too: the nested project is the nearest one.
    (nested / "src").mkdir()
    usage_error(run(nested / "src", "refresh", "--check"), "no feed", ours=False)


def test_config_option_reads_the_named_file_from_anywhere(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    (project / "pyproject.toml").rename(project / "floorctl.toml")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    status, stdout, stderr = run(
        elsewhere, "--config", "../project/floorctl.toml", "refresh", "--check"
    )
    assert status == 0, stderr
    assert stdout.startswith("../project/src/floor_map.py: 1 adapters")
    (project / "feeds" / "feed.json").write_text(feed("0.61.0"))
    assert run(elsewhere, "--config", project / "floorctl.toml", "refresh", "--check")[0] == 1


def test_config_option_wins_over_the_nearest_pyproject(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    (project / "other.toml").write_text(
        toml_table(feeds=["feeds/other.json"], module="src/floor_map.py")
    )
    (project / "feeds" / "other.json").write_text(feed("0.70.0"))
    assert run(project, "refresh", "--check")[0] == 0
    assert run(project, "--config", "other.toml", "refresh", "--check")[0] == 1


def test_config_option_naming_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    usage_error(
        run(project, "--config", "missing.toml", "refresh", "--check"),
        "cannot read the configuration",
        "missing.toml",
    )
    # Even for a command that does not use the configuration: it was asked for.
    usage_error(run(project, "--config", "missing.toml", "doctor"), "missing.toml")


def test_config_option_naming_a_file_without_the_table_is_a_usage_error(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    (project / "plain.toml").write_text('[project]\nname = "x"\n')
    usage_error(
        run(project, "--config", "plain.toml", "refresh", "--check"),
        "plain.toml: no [tool.floorctl] table",
    )


# --- the CLI: what the configuration may hold ------------------------------------------------


def test_an_unknown_key_is_a_usage_error_naming_it_and_the_file(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text + 'feed = "feeds/feed.json"\n')
    usage_error(
        run(project, "refresh", "--check"),
        "pyproject.toml: [tool.floorctl]: unknown key 'feed'",
    )
    sub = project / "sub"
    sub.mkdir()
    usage_error(run(sub, "refresh", "--check"), "../pyproject.toml: [tool.floorctl]: unknown key")


def test_a_pem_key_as_signing_key_is_a_usage_error_that_never_echoes_it(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text + f"signing-key = '''{PEM}'''\n")
    for args in (["refresh", "--check"], ["refresh", "--write"], ["sign", "feeds/feed.json"]):
        status, stdout, stderr = run(project, *args)
        usage_error((status, stdout, stderr), "signing-key holds a PEM key, not a path")
        assert "BEGIN" not in stderr + stdout and "MC4C" not in stderr + stdout


def test_a_wrong_type_is_a_usage_error_naming_key_and_file(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    (project / "pyproject.toml").write_text(toml_table(feeds="feeds/feed.json"))
    usage_error(
        run(project, "refresh", "--check"),
        "pyproject.toml: [tool.floorctl]: feeds must be a non-empty list",
    )


def test_invalid_toml_is_a_usage_error(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    (project / "pyproject.toml").write_text("[tool.floorctl\nfeeds = 1\n")
    usage_error(run(project, "refresh", "--check"), "pyproject.toml: invalid TOML")


def test_an_unreadable_config_is_a_usage_error(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    (project / "pyproject.toml").unlink()
    (project / "pyproject.toml").mkdir()
    usage_error(run(project, "refresh", "--check"), "cannot read the configuration")


def test_commands_that_do_not_use_the_config_ignore_a_broken_one(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.floorctl]\nbogus = 1\n")
    status, _, stderr = run(project, "keygen", "--out", "keys")
    assert status == 0, stderr
    assert (project / "keys" / "signing.pub").exists()


# --- the CLI: flags override, and each command's keys ---------------------------------------


def test_a_feed_flag_replaces_the_configured_feeds(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    (project / "newer.json").write_text(feed("0.61.0"))
    status, stdout, _ = run(project, "refresh", "--check", "--feed", "newer.json")
    assert status == 1
    assert "0.60.0' -> '0.61.0'" in stdout
    # Replaced, not added to: the configured feed's adapter would otherwise be merged in.
    (project / "other.json").write_text(
        json.dumps(
            {
                "schema_version": 1,
                "adapters": {
                    "codex": {"min_safe_version": "1.0.0", "advisory_id": "BSA-0002", "note": "x"}
                },
            }
        )
    )
    status, stdout, _ = run(project, "refresh", "--feed", "other.json", "--allow-downgrade")
    assert status == 0
    assert "  - aider" in stdout and "  + codex" in stdout


def test_a_module_flag_overrides_the_configured_module(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    (project / "fresh.py").write_text(EMPTY_MODULE)
    status, stdout, stderr = run(project, "refresh", "--check", "--module", "fresh.py")
    assert status == 1, stderr
    assert stdout.startswith("fresh.py: 1 adapters")


def test_template_from_the_config_a_name_or_a_path_beside_it(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project", template="bernstein")
    assert "ADAPTER_MIN_SAFE_VERSIONS" in (project / "src" / "floor_map.py").read_text()
    other = tmp_path / "other"
    (other / "tpl").mkdir(parents=True)
    shutil.copy(REPO / "templates" / "bernstein.py.j2", other / "tpl" / "mine.py.j2")
    other = make_project(other, template="tpl/mine.py.j2")
    (other / "sub").mkdir()
    assert run(other / "sub", "refresh", "--check")[0] == 0
    assert "ADAPTER_MIN_SAFE_VERSIONS" in (other / "src" / "floor_map.py").read_text()


def test_waivers_and_several_feeds_from_the_config(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    for name in ("example.v1.json", "example.v3.json", "example-waivers.json"):
        shutil.copy(REPO / "feeds" / name, project / name)
    (project / "floor_map.py").write_text(EMPTY_MODULE)
    (project / "pyproject.toml").write_text(
        toml_table(
            feeds=["example.v1.json", "example.v3.json"],
            module="floor_map.py",
            waivers="example-waivers.json",
        )
    )
    status, _, stderr = run(project, "refresh", "--write", "--now", "2026-06-01T00:00:00Z")
    assert status == 0, stderr
    assert "WVR-" in (project / "floor_map.py").read_text()
    assert run(project, "refresh", "--check", "--now", "2026-06-01T00:00:00Z")[0] == 0
    # validate without FILE checks the configured feed files and the waivers document.
    status, stdout, stderr = run(project, "validate")
    assert status == 0, stderr
    assert stdout.splitlines() == [
        "ok  example.v1.json (6 adapters)",
        "ok  example.v3.json (2 adapters)",
        "ok  example-waivers.json (1 waivers)",
    ]


def test_signing_key_from_the_config_signs_and_the_variable_wins(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project", signing_key="keys/signing.key")
    assert run(project, "keygen", "--out", "keys")[0] == 0
    assert run(project, "keygen", "--out", "other")[0] == 0
    status, stdout, stderr = run(project, "sign", "feeds/feed.json", "--json")
    assert status == 0, stderr
    assert "development key" not in stderr
    configured = json.loads(stdout)["keyid"]
    explicit = run(
        project, "sign", "feeds/feed.json", "--signing-key", "keys/signing.key", "--json"
    )
    assert json.loads(explicit[1])["keyid"] == configured
    # FLOORCTL_SIGNING_KEY (a CI secret) wins over the file; --signing-key over both.
    by_variable = run(
        project,
        "sign",
        "feeds/feed.json",
        "--json",
        FLOORCTL_SIGNING_KEY=str(project / "other/signing.key"),
    )
    assert json.loads(by_variable[1])["keyid"] != configured
    by_flag = run(
        project, "sign", "feeds/feed.json", "--json", "--signing-key", "keys/signing.key",
        FLOORCTL_SIGNING_KEY=str(project / "other/signing.key"),
    )  # fmt: skip
    assert json.loads(by_flag[1])["keyid"] == configured


def test_publish_takes_module_and_signing_key_from_the_config(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project", signing_key="keys/signing.key")
    assert run(project, "keygen", "--out", "keys")[0] == 0
    sub = project / "sub"
    sub.mkdir()
    status, stdout, stderr = run(sub, "publish", "--out", "out", "--json")
    assert status == 0, stderr
    assert "development key" not in stderr
    assert json.loads(stdout)["adapters"] == 1


def test_a_missing_configured_file_is_named_as_resolved(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text + 'trusted-keys = "keys/missing.pem"\n')
    sub = project / "sub"
    sub.mkdir()
    status, _, stderr = run(sub, "refresh", "--check")
    assert status == 1
    assert "../keys/missing.pem" in stderr


def test_help_says_where_the_config_is_read_from(tmp_path: Path) -> None:
    for args in (["--help"], ["refresh", "--help"]):
        status, stdout, _ = run(tmp_path, *args)
        assert status == 0
        text = " ".join(stdout.split())
        assert "[tool.floorctl] of the nearest pyproject.toml" in text
        assert "--config PATH" in text


def test_this_repository_checks_its_own_floor_map_from_its_config(tmp_path: Path) -> None:
    status, stdout, stderr = run_in(REPO, tmp_path, "refresh", "--check")
    assert status == 0, stderr
    assert stdout.startswith("generated/floorguard/floor_map.py: 6 adapters")


def run_in(cwd: Path, state: Path, *args: str) -> tuple[int, str, str]:
    done = floorctl(*args, cwd=cwd, state=state)
    return done.returncode, done.stdout, done.stderr


def checkpoint_key_hash(note: str) -> bytes:
    """The C2SP key hash (first 4 bytes) of a signed note's signature line."""
    (line,) = [line for line in note.splitlines() if line.startswith("\u2014 ")]
    return base64.b64decode(line.split()[-1])[:4]


def test_chain_checkpoint_signs_with_the_configured_key(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project", signing_key="keys/signing.key")
    assert run(project, "keygen", "--out", "keys")[0] == 0
    (project / "feeds" / "feed.json").write_text(feed("0.61.0"))
    status, _, stderr = run(project, "refresh", "--write", "--anchor")
    assert status == 0, stderr
    status, configured, stderr = run(project, "chain", "checkpoint")
    assert status == 0, stderr
    assert "development key" not in stderr
    _, explicit, _ = run(project, "chain", "checkpoint", "--signing-key", "keys/signing.key")
    (project / "other.toml").write_text(toml_table(module="src/floor_map.py"))
    _, dev, stderr = run(project, "--config", "other.toml", "chain", "checkpoint")
    assert "development" in stderr
    assert checkpoint_key_hash(configured) == checkpoint_key_hash(explicit)
    assert checkpoint_key_hash(dev) != checkpoint_key_hash(configured)


def test_validate_without_file_skips_configured_urls(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    (project / "pyproject.toml").write_text(
        toml_table(feeds=["https://example.org/f.json", "feeds/feed.json"])
    )
    status, stdout, stderr = run(project, "validate")
    assert status == 0, stderr
    assert stdout == "ok  feeds/feed.json (1 adapters)\n"
    (project / "pyproject.toml").write_text(toml_table(feeds=["https://example.org/f.json"]))
    usage_error(run(project, "validate"), "Missing argument", ours=False)
