"""Version detection of installed agent CLIs, against real files and real processes.

Every probe here is a real executable written into a temporary directory; the npm and pip
layouts are real directory trees. Detection must fail closed: any doubt is a DetectionError.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from probes import (
    alive,
    marker_script,
    npm_layout,
    pip_layout,
    printer,
    python_script,
    sh_script,
    write_executable,
)
from probes.native import native_program

from floorguard._identify.detect import (
    Detection,
    ProbeSettings,
    clear_cache,
    detect_version,
    file_identity,
    resolve_binary,
)
from floorguard.errors import DetectionError

FAST = ProbeSettings(timeout_s=0.5)
SECRETS = {
    "OPENAI_API_KEY": "sk-test-openai",
    "ANTHROPIC_API_KEY": "sk-ant-test",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "GITHUB_TOKEN": "ghp_test",
}


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("FLOORGUARD_PROBE_TIMEOUT", raising=False)
    clear_cache()
    yield
    clear_cache()


def wait_until_dead(pid: int) -> bool:
    """A liveness wait, not a timing assertion: SIGKILL lands asynchronously."""
    for _ in range(1000):
        if not alive(pid):
            return True
        time.sleep(0.01)
    return False


# -------------------------------------------------------------------------- resolution


def test_resolves_adapter_name_on_path(tmp_path: Path) -> None:
    binary = printer(tmp_path / "bin" / "claude", "1.0.51 (Claude Code)\n")
    assert resolve_binary("claude", path_env=str(tmp_path / "bin")) == binary


def test_resolves_symlink_to_the_real_file(tmp_path: Path) -> None:
    real = printer(tmp_path / "real" / "gemini-main", "0.1.12\n")
    (tmp_path / "bin").mkdir()
    os.symlink(real, tmp_path / "bin" / "gemini")
    assert resolve_binary("gemini", path_env=str(tmp_path / "bin")) == real


def test_resolves_explicit_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = printer(tmp_path / "tools" / "aider", "aider 0.86.1\n")
    monkeypatch.chdir(tmp_path)
    assert resolve_binary("aider", "tools/aider") == real


def test_refuses_missing_binary(tmp_path: Path) -> None:
    with pytest.raises(DetectionError, match="binary not found"):
        resolve_binary("claude", path_env=str(tmp_path))
    with pytest.raises(DetectionError, match="binary not found"):
        resolve_binary("claude", tmp_path / "nope")


def test_refuses_dangling_symlink(tmp_path: Path) -> None:
    os.symlink(tmp_path / "gone", tmp_path / "claude")
    with pytest.raises(DetectionError, match="binary not found"):
        resolve_binary("claude", tmp_path / "claude")


def test_refuses_directory_as_binary(tmp_path: Path) -> None:
    (tmp_path / "claude").mkdir()
    with pytest.raises(DetectionError, match="not a regular file"):
        resolve_binary("claude", tmp_path / "claude")


def test_refuses_non_executable_file(tmp_path: Path) -> None:
    binary = native_program(tmp_path / "claude", stdout=b"1.0.51 (Claude Code)\n", mode=0o644)
    with pytest.raises(DetectionError, match="not executable"):
        resolve_binary("claude", binary)
    with pytest.raises(DetectionError, match="not executable"):
        detect_version("claude", binary=binary)


def test_ignores_binary_planted_in_current_directory_via_relative_path_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    printer(tmp_path / "claude", "1.0.51 (Claude Code)\n")
    monkeypatch.chdir(tmp_path)
    for path_env in ("", ".", f"{os.pathsep}/nonexistent"):
        # (refused, not "not found": the child would search that entry, the gate does not)
        with pytest.raises(DetectionError, match="entry 1 of PATH is relative"):
            resolve_binary("claude", path_env=path_env)


def test_refuses_adapter_name_that_is_a_path(tmp_path: Path) -> None:
    with pytest.raises(DetectionError, match="invalid adapter name"):
        detect_version("../claude", path_env=str(tmp_path))


def test_file_identity_changes_when_the_file_is_replaced(tmp_path: Path) -> None:
    binary = printer(tmp_path / "tool", "1.0.0\n")
    before = file_identity(binary)
    assert file_identity(binary) == before
    printer(binary, "1.0.0\n")
    assert file_identity(binary) != before


# -------------------------------------------------------------------------- caller


def test_caller_version_is_used_without_running_anything(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    binary = marker_script(tmp_path / "claude", marker, "9.9.9 (Claude Code)")
    detection = detect_version("claude", binary=binary, version="1.0.51")
    assert detection == Detection("1.0.51", "caller", str(binary), None)
    assert not marker.exists()


def test_caller_version_without_binary_records_no_binary() -> None:
    assert detect_version("aider", version="0.86.1").binary is None


@pytest.mark.parametrize(
    "bad", ["latest", "1.0.51 ", " 1.0", "", "1.0.51\n", "1.0.51 (Claude Code)"]
)
def test_refuses_invalid_caller_version(bad: str) -> None:
    with pytest.raises(DetectionError):
        detect_version("claude", version=bad)


def test_caller_version_with_missing_binary_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DetectionError, match="binary not found"):
        detect_version("claude", binary=tmp_path / "missing", version="1.0.51")


# -------------------------------------------------------------------------- probe


@pytest.mark.parametrize(
    ("adapter", "output", "expected"),
    [
        ("aider", "aider 0.86.1\n", "0.86.1"),
        ("amp", "0.0.1755000000-g1234abc\n", "0.0.1755000000-g1234abc"),
        ("claude", "1.0.51 (Claude Code)\n", "1.0.51"),
        ("codex", "codex-cli 0.5.0\n", "0.5.0"),
        ("gemini", "0.1.12\n", "0.1.12"),
        ("goose", " 1.0.29\n", "1.0.29"),
        ("gptme", "gptme v0.27.0\nPython 3.12.3 on Linux\n", "0.27.0"),
        ("opencode", "0.3.58\n", "0.3.58"),
        ("qwen", "0.0.9\n", "0.0.9"),
        ("some-new-agent", "some-new-agent version 2.4.1\n", "2.4.1"),
    ],
)
def test_probe_reads_real_version_formats(
    tmp_path: Path, adapter: str, output: str, expected: str
) -> None:
    binary = printer(tmp_path / "bin" / adapter, output)
    detection = detect_version(adapter, path_env=str(tmp_path / "bin"), settings=FAST)
    assert detection == Detection(expected, "probe", str(binary), output)


def test_probe_reads_version_printed_on_stderr(tmp_path: Path) -> None:
    binary = native_program(tmp_path / "goose", stderr=b"1.0.29\n")
    assert detect_version("goose", binary=binary, settings=FAST).version == "1.0.29"


def test_probe_does_not_receive_api_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATEST")
    dump = tmp_path / "env.json"
    binary = python_script(
        tmp_path / "gemini",
        f"import json, os\nopen({str(dump)!r}, 'w').write(json.dumps(dict(os.environ)))\n"
        "print('0.1.12')",
    )
    assert detect_version("gemini", binary=binary, settings=FAST).version == "0.1.12"
    seen = json.loads(dump.read_text())
    for name in [*SECRETS, "AWS_ACCESS_KEY_ID"]:
        assert name not in seen
    assert not any(value in seen.values() for value in SECRETS.values())
    # Only the allow-list reaches the probe (the interpreter may add LC_CTYPE itself).
    assert set(seen) - {"LC_CTYPE"} <= {"PATH", "HOME", "LANG", "LC_ALL", "TERM", "NO_COLOR"}
    assert seen["TERM"] == "dumb"
    assert seen["NO_COLOR"] == "1"


def test_probe_gets_no_stdin(tmp_path: Path) -> None:
    # A probe that waits for input must see end-of-file, not hang on the host's terminal.
    binary = sh_script(tmp_path / "gemini", 'read line; echo "0.1.12$line"')
    assert detect_version("gemini", binary=binary, settings=FAST).version == "0.1.12"


def test_refuses_hanging_probe_and_kills_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    binary = sh_script(tmp_path / "claude", f"echo $$ > '{pid_file}'\nexec sleep 60")
    with pytest.raises(DetectionError, match="timeout"):
        detect_version("claude", binary=binary, settings=FAST)
    assert wait_until_dead(int(pid_file.read_text()))


def test_refuses_probe_whose_grandchild_hangs_and_kills_the_whole_group(tmp_path: Path) -> None:
    # The leader exits at once, but a grandchild keeps the output pipe open and hangs.
    pid_file = tmp_path / "grandchild"
    binary = sh_script(
        tmp_path / "claude",
        f"(sleep 60; echo never) &\necho $! > '{pid_file}'\necho '1.0.51 (Claude Code)'\nexit 0",
    )
    with pytest.raises(DetectionError, match="timeout"):
        detect_version("claude", binary=binary, settings=FAST)
    assert wait_until_dead(int(pid_file.read_text()))


def test_probe_leaves_no_background_process_behind(tmp_path: Path) -> None:
    pid_file = tmp_path / "background"
    binary = sh_script(
        tmp_path / "claude",
        f"sleep 60 >/dev/null 2>&1 &\necho $! > '{pid_file}'\necho '1.0.51 (Claude Code)'",
    )
    assert detect_version("claude", binary=binary, settings=FAST).version == "1.0.51"
    assert wait_until_dead(int(pid_file.read_text()))


def test_refuses_probe_exiting_non_zero(tmp_path: Path) -> None:
    binary = native_program(tmp_path / "gemini", stdout=b"0.1.12\n", exit_status=3)
    with pytest.raises(DetectionError, match="exited with status 3"):
        detect_version("gemini", binary=binary, settings=FAST)


def test_refuses_probe_killed_by_a_signal(tmp_path: Path) -> None:
    binary = sh_script(tmp_path / "gemini", "echo 0.1.12\nkill -9 $$")
    with pytest.raises(DetectionError, match="exited with status -9"):
        detect_version("gemini", binary=binary, settings=FAST)


def test_refuses_probe_printing_two_versions(tmp_path: Path) -> None:
    binary = printer(tmp_path / "mytool", "mytool 1.2.3 (engine 4.5.6)\n")
    with pytest.raises(DetectionError, match=r"ambiguous version output: found 1\.2\.3, 4\.5\.6"):
        detect_version("mytool", binary=binary, settings=FAST)


def test_refuses_probe_printing_nothing(tmp_path: Path) -> None:
    binary = native_program(tmp_path / "gemini")
    with pytest.raises(DetectionError, match="printed nothing"):
        detect_version("gemini", binary=binary, settings=FAST)


def test_refuses_probe_printing_only_whitespace(tmp_path: Path) -> None:
    binary = printer(tmp_path / "gemini", "\n   \n")
    with pytest.raises(DetectionError, match="printed nothing"):
        detect_version("gemini", binary=binary, settings=FAST)


def test_refuses_probe_printing_garbage(tmp_path: Path) -> None:
    binary = native_program(tmp_path / "gemini", stdout=b"\xff\xfe\x00garbage\n")
    with pytest.raises(DetectionError, match="version format expected for gemini"):
        detect_version("gemini", binary=binary, settings=FAST)
    other = native_program(tmp_path / "mytool", stdout=b"\xff\xfe\x00garbage\n")
    with pytest.raises(DetectionError, match="no version found"):
        detect_version("mytool", binary=other, settings=FAST)


def test_refuses_probe_flooding_output(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    binary = python_script(
        tmp_path / "gemini",
        f"import os, sys\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "sys.stdout.write('0.1.12\\n')\nsys.stdout.write('x' * (10 * 1024 * 1024))\n"
        "sys.stdout.flush()\nimport time\ntime.sleep(60)",
    )
    with pytest.raises(DetectionError, match="output exceeds 65536 bytes"):
        detect_version("gemini", binary=binary, settings=ProbeSettings(timeout_s=30))
    assert wait_until_dead(int(pid_file.read_text()))


def test_timeout_comes_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOORGUARD_PROBE_TIMEOUT", "0.3")
    binary = native_program(tmp_path / "gemini", sleep=60)
    with pytest.raises(DetectionError, match=r"timeout: still running after 0\.3s"):
        detect_version("gemini", binary=binary)


@pytest.mark.parametrize("bad", ["abc", "", "0", "-1", "nan", "inf", "1e9"])
def test_refuses_invalid_timeout_in_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    monkeypatch.setenv("FLOORGUARD_PROBE_TIMEOUT", bad)
    marker = tmp_path / "ran"
    binary = marker_script(tmp_path / "gemini", marker, "0.1.12")
    with pytest.raises(DetectionError, match="FLOORGUARD_PROBE_TIMEOUT"):
        detect_version("gemini", binary=binary)
    assert not marker.exists()


def test_refuses_invalid_probe_settings() -> None:
    with pytest.raises(DetectionError):
        ProbeSettings(timeout_s=0)
    with pytest.raises(DetectionError):
        ProbeSettings(timeout_s=float("nan"))
    with pytest.raises(DetectionError):
        ProbeSettings(max_output_bytes=0)
    with pytest.raises(DetectionError):
        ProbeSettings(timeout_s="5")  # type: ignore[arg-type]
    with pytest.raises(DetectionError):
        ProbeSettings(max_output_bytes=True)


def test_refuses_binary_that_cannot_be_started(tmp_path: Path) -> None:
    binary = write_executable(tmp_path / "gemini", "#!/nonexistent/interpreter\n")
    with pytest.raises(DetectionError, match="cannot run"):
        detect_version("gemini", binary=binary, settings=FAST)


# -------------------------------------------------------------------------- npm metadata


def claude_npm(tmp_path: Path, **kwargs: object) -> tuple[Path, Path]:
    marker = tmp_path / "cli-ran"
    options: dict[str, object] = {
        "package": "@anthropic-ai/claude-code",
        "bin_name": "claude",
        "version": "1.0.51",
        "marker": marker,
        "script_output": "9.9.9 (Claude Code)",
    }
    options.update(kwargs)
    bin_dir = npm_layout(tmp_path / "usr", **options)  # type: ignore[arg-type]
    return bin_dir, marker


def test_reads_npm_package_json_without_executing_the_cli(tmp_path: Path) -> None:
    bin_dir, marker = claude_npm(tmp_path)
    detection = detect_version("claude", path_env=str(bin_dir), settings=FAST)
    assert detection.version == "1.0.51"
    assert detection.detected_by == "npm-metadata"
    assert detection.binary == str(
        tmp_path / "usr/lib/node_modules/@anthropic-ai/claude-code/cli.js"
    )
    assert detection.raw is not None
    assert detection.raw.endswith("claude-code/package.json")
    assert not marker.exists()


@pytest.mark.parametrize(
    ("adapter", "package", "bin_rel"),
    [
        ("codex", "@openai/codex", "bin/codex.js"),
        ("gemini", "@google/gemini-cli", "dist/index.js"),
        ("qwen", "@qwen-code/qwen-code", "cli.js"),
        ("opencode", "opencode-ai", "bin/opencode"),
    ],
)
def test_reads_npm_metadata_of_each_npm_adapter(
    tmp_path: Path, adapter: str, package: str, bin_rel: str
) -> None:
    marker = tmp_path / "ran"
    bin_dir = npm_layout(
        tmp_path / "usr",
        package=package,
        bin_name=adapter,
        version="3.2.1",
        marker=marker,
        script_output="0.0.0",
        bin_rel=bin_rel,
    )
    detection = detect_version(adapter, path_env=str(bin_dir), settings=FAST)
    assert (detection.version, detection.detected_by) == ("3.2.1", "npm-metadata")
    assert not marker.exists()


def test_amp_npm_version_with_git_suffix_is_kept_as_written(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    bin_dir = npm_layout(
        tmp_path / "usr",
        package="@sourcegraph/amp",
        bin_name="amp",
        version="0.0.1755000000-g1234abc",
        marker=marker,
        script_output="0.0.1",
        bin_rel="dist/main.js",
    )
    detection = detect_version("amp", path_env=str(bin_dir), settings=FAST)
    assert (detection.version, detection.detected_by) == ("0.0.1755000000-g1234abc", "npm-metadata")


def test_npm_package_with_foreign_name_falls_back_to_probe(tmp_path: Path) -> None:
    bin_dir, marker = claude_npm(
        tmp_path,
        manifest={"name": "@evil/claude-code", "version": "99.0.0", "bin": {"claude": "cli.js"}},
    )
    detection = detect_version("claude", path_env=str(bin_dir), settings=FAST)
    assert (detection.version, detection.detected_by) == ("9.9.9", "probe")
    assert marker.exists()


def test_npm_package_in_unexpected_directory_falls_back_to_probe(tmp_path: Path) -> None:
    # package.json claims the right name, but the directory is some other package's.
    bin_dir, marker = claude_npm(tmp_path, package_dir_name="claude-code-helper")
    detection = detect_version("claude", path_env=str(bin_dir), settings=FAST)
    assert detection.detected_by == "probe"
    assert marker.exists()


def test_npm_script_not_declared_as_bin_falls_back_to_probe(tmp_path: Path) -> None:
    bin_dir, _ = claude_npm(
        tmp_path,
        manifest={
            "name": "@anthropic-ai/claude-code",
            "version": "1.0.51",
            "bin": {"claude": "other.js"},
        },
    )
    assert detect_version("claude", path_env=str(bin_dir), settings=FAST).detected_by == "probe"


@pytest.mark.parametrize(
    "manifest_text",
    [
        '{"name": "@anthropic-ai/claude-code", "version": "1.0.51", "version": "99.0.0",'
        ' "bin": {"claude": "cli.js"}}',
        '{"name": "@anthropic-ai/claude-code", "version": "latest", "bin": {"claude": "cli.js"}}',
        '{"name": "@anthropic-ai/claude-code", "version": 1, "bin": {"claude": "cli.js"}}',
        "not json",
        '["@anthropic-ai/claude-code"]',
    ],
)
def test_doubtful_package_json_falls_back_to_probe(tmp_path: Path, manifest_text: str) -> None:
    bin_dir, _ = claude_npm(tmp_path, manifest_text=manifest_text)
    detection = detect_version("claude", path_env=str(bin_dir), settings=FAST)
    assert (detection.version, detection.detected_by) == ("9.9.9", "probe")


def test_oversized_package_json_is_not_read(tmp_path: Path) -> None:
    padding = " " * (1 << 20)
    bin_dir, _ = claude_npm(
        tmp_path,
        manifest_text='{"name": "@anthropic-ai/claude-code", "version": "1.0.51",'
        f' "bin": {{"claude": "cli.js"}}{padding}}}',
    )
    assert detect_version("claude", path_env=str(bin_dir), settings=FAST).detected_by == "probe"


def test_npm_metadata_of_another_adapter_is_not_accepted(tmp_path: Path) -> None:
    # claude's package is installed under the name "gemini": its metadata is not gemini's.
    marker = tmp_path / "ran"
    bin_dir = npm_layout(
        tmp_path / "usr",
        package="@anthropic-ai/claude-code",
        bin_name="gemini",
        version="1.0.51",
        marker=marker,
        script_output="0.1.12",
    )
    detection = detect_version("gemini", path_env=str(bin_dir), settings=FAST)
    assert (detection.version, detection.detected_by) == ("0.1.12", "probe")


# -------------------------------------------------------------------------- pip metadata


def aider_pip(tmp_path: Path, **kwargs: object) -> tuple[Path, Path]:
    marker = tmp_path / "script-ran"
    options: dict[str, object] = {
        "script_name": "aider",
        "dist": "aider-chat",
        "version": "0.86.1",
        "marker": marker,
        "script_output": "aider 7.7.7",
    }
    options.update(kwargs)
    script = pip_layout(tmp_path / "venv", **options)  # type: ignore[arg-type]
    return script, marker


def test_reads_pip_metadata_without_executing_the_script(tmp_path: Path) -> None:
    script, marker = aider_pip(tmp_path)
    detection = detect_version("aider", binary=script, settings=FAST)
    assert (detection.version, detection.detected_by) == ("0.86.1", "pip-metadata")
    assert detection.raw is not None
    assert detection.raw.endswith("aider_chat-0.86.1.dist-info/METADATA")
    assert not marker.exists()


def test_reads_pip_metadata_through_a_pipx_style_symlink(tmp_path: Path) -> None:
    script, marker = aider_pip(tmp_path)
    (tmp_path / "local-bin").mkdir()
    os.symlink(script, tmp_path / "local-bin" / "aider")
    detection = detect_version("aider", path_env=str(tmp_path / "local-bin"), settings=FAST)
    assert (detection.version, detection.detected_by) == ("0.86.1", "pip-metadata")
    assert not marker.exists()


def test_reads_gptme_pip_metadata(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    script = pip_layout(
        tmp_path / "venv",
        script_name="gptme",
        dist="gptme",
        version="0.27.0",
        marker=marker,
        script_output="gptme v0.0.1",
    )
    detection = detect_version("gptme", binary=script, settings=FAST)
    assert (detection.version, detection.detected_by) == ("0.27.0", "pip-metadata")


def test_pip_names_are_normalized(tmp_path: Path) -> None:
    script, _ = aider_pip(
        tmp_path, dist_info_name="Aider.Chat-0.86.1.dist-info", metadata_name="Aider_Chat"
    )
    assert detect_version("aider", binary=script, settings=FAST).detected_by == "pip-metadata"


def test_script_missing_from_record_falls_back_to_probe(tmp_path: Path) -> None:
    script, marker = aider_pip(tmp_path, list_in_record=False)
    detection = detect_version("aider", binary=script, settings=FAST)
    assert (detection.version, detection.detected_by) == ("7.7.7", "probe")
    assert marker.exists()


def test_script_modified_after_install_falls_back_to_probe(tmp_path: Path) -> None:
    # RECORD's hash no longer matches: the metadata does not describe what would run.
    script, _ = aider_pip(tmp_path)
    text = script.read_text().replace("aider 7.7.7", "aider 8.8.8")
    write_executable(script, text)
    detection = detect_version("aider", binary=script, settings=FAST)
    assert (detection.version, detection.detected_by) == ("8.8.8", "probe")


def test_two_installed_versions_fall_back_to_probe(tmp_path: Path) -> None:
    script, _ = aider_pip(tmp_path)
    aider_pip(tmp_path, version="0.50.0")
    assert detect_version("aider", binary=script, settings=FAST).detected_by == "probe"


def test_metadata_of_another_distribution_is_not_accepted(tmp_path: Path) -> None:
    script, _ = aider_pip(tmp_path, dist="aider-chat-plugins", metadata_name="aider-chat-plugins")
    detection = detect_version("aider", binary=script, settings=FAST)
    assert (detection.version, detection.detected_by) == ("7.7.7", "probe")


def test_dist_info_whose_metadata_names_another_project_is_not_accepted(tmp_path: Path) -> None:
    script, _ = aider_pip(tmp_path, metadata_name="evil-project")
    assert detect_version("aider", binary=script, settings=FAST).detected_by == "probe"


def test_shebang_to_a_python_elsewhere_falls_back_to_probe(tmp_path: Path) -> None:
    script, _ = aider_pip(tmp_path, interpreter=Path(sys.executable))
    assert detect_version("aider", binary=script, settings=FAST).detected_by == "probe"


# -------------------------------------------------------------------------- cache


def runs(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def test_an_unchanged_program_is_asked_again_at_every_judgement(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    binary = printer(tmp_path / "gemini", "0.1.12\n", counter=counter)
    first = detect_version("gemini", binary=binary, settings=FAST)
    second = detect_version("gemini", binary=binary, settings=FAST)
    assert first == second
    assert runs(counter) == 2


def test_a_programs_answer_that_depends_on_its_working_directory_is_the_answer_now(
    tmp_path: Path,
) -> None:
    # A version manager's native shim answers for the version its working directory names
    # (.tool-versions, which the workspace writes): the same program, unchanged, answers
    # otherwise once the workspace changes. This one answers only while the file is there.
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / ".tool-versions").write_text("codex 0.50.0\n", encoding="utf-8")
    shim = native_program(
        tmp_path / "codex", stdout=b"codex-cli 0.50.0\n", requires=Path(".tool-versions")
    )
    found = detect_version("codex", binary=shim, settings=FAST, cwd=str(workspace))
    assert found.version == "0.50.0"
    (workspace / ".tool-versions").unlink()
    with pytest.raises(DetectionError, match="exited with status 1"):
        detect_version("codex", binary=shim, settings=FAST, cwd=str(workspace))


def test_replaced_binary_is_probed_again(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    binary = printer(tmp_path / "gemini", "0.1.12\n", counter=counter)
    assert detect_version("gemini", binary=binary, settings=FAST).version == "0.1.12"
    printer(binary, "0.2.0\n", counter=counter)
    assert detect_version("gemini", binary=binary, settings=FAST).version == "0.2.0"
    assert runs(counter) == 2


def test_binary_rewritten_in_place_with_its_mtime_restored_is_probed_again(
    tmp_path: Path,
) -> None:
    counter = tmp_path / "count"
    binary = printer(tmp_path / "gemini", "0.1.12\n", counter=counter)
    stat_before = binary.stat()
    detect_version("gemini", binary=binary, settings=FAST)
    content = binary.read_bytes()
    new_content = printer(tmp_path / "other", "0.9.12\n", counter=counter).read_bytes()
    assert new_content != content and len(new_content) == len(content)
    with open(binary, "wb") as fh:  # same inode, same size
        fh.write(new_content)
    os.utime(binary, ns=(stat_before.st_atime_ns, stat_before.st_mtime_ns))
    assert detect_version("gemini", binary=binary, settings=FAST).version == "0.9.12"
    assert runs(counter) == 2


def test_failures_are_not_cached(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    ready = tmp_path / "ready"
    binary = native_program(
        tmp_path / "gemini", stdout=b"0.1.12\n", counter=counter, requires=ready
    )
    with pytest.raises(DetectionError):
        detect_version("gemini", binary=binary, settings=FAST)
    with pytest.raises(DetectionError):
        detect_version("gemini", binary=binary, settings=FAST)
    ready.touch()
    assert detect_version("gemini", binary=binary, settings=FAST).version == "0.1.12"
    assert runs(counter) == 3


def test_clear_cache_forces_a_new_probe(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    binary = printer(tmp_path / "gemini", "0.1.12\n", counter=counter)
    detect_version("gemini", binary=binary, settings=FAST)
    clear_cache()
    detect_version("gemini", binary=binary, settings=FAST)
    assert runs(counter) == 2


def test_cache_is_per_adapter(tmp_path: Path) -> None:
    # The same file asked about as another adapter is judged by that adapter's format.
    binary = printer(tmp_path / "tool", "0.1.12\n")
    assert detect_version("gemini", binary=binary, settings=FAST).version == "0.1.12"
    with pytest.raises(DetectionError, match="version format expected for claude"):
        detect_version("claude", binary=binary, settings=FAST)


def test_rewritten_package_json_is_read_again(tmp_path: Path) -> None:
    bin_dir, _ = claude_npm(tmp_path)
    assert detect_version("claude", path_env=str(bin_dir), settings=FAST).version == "1.0.51"
    manifest = tmp_path / "usr/lib/node_modules/@anthropic-ai/claude-code/package.json"
    data = json.loads(manifest.read_text())
    data["version"] = "1.0.60"
    tmp = manifest.with_name("package.json.new")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, manifest)
    assert detect_version("claude", path_env=str(bin_dir), settings=FAST).version == "1.0.60"


def test_rewritten_pip_metadata_is_read_again(tmp_path: Path) -> None:
    script, _ = aider_pip(tmp_path)
    assert detect_version("aider", binary=script, settings=FAST).version == "0.86.1"
    metadata = next((tmp_path / "venv").glob("lib/python3.11/site-packages/*/METADATA"))
    tmp = metadata.with_name("METADATA.new")
    tmp.write_text(metadata.read_text().replace("Version: 0.86.1", "Version: 0.86.2"))
    os.replace(tmp, metadata)
    assert detect_version("aider", binary=script, settings=FAST).version == "0.86.2"


def test_importing_detection_does_not_import_packaging() -> None:
    # Hosts import floorguard on their spawn path; packaging loads only when first needed.
    code = "import sys, floorguard._identify.detect; print('packaging' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_concurrent_detections_agree(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    binary = printer(tmp_path / "gemini", "0.1.12\n", counter=counter)
    results: list[str] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(detect_version("gemini", binary=binary, settings=FAST).version)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert results == ["0.1.12"] * 8
    assert runs(counter) == 8
