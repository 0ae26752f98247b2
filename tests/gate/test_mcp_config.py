"""Reading the MCP servers an agent will start: each client's files and arguments, read
exactly, and every file the reader cannot read exactly refused by name (hostile files:
duplicate keys, huge, deep, FIFOs, links out of the project, wrong types, unknown keys).

Real files in a temporary home and project; nothing is mocked.
"""

from __future__ import annotations

import json
import os
import unicodedata
from pathlib import Path

import pytest

from floorguard._identify import mcp_files
from floorguard._identify.mcp_config import REMOTE, STDIO, Servers, read_servers


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "work" / "project"
    path.mkdir(parents=True)
    return path


def read(client: str, home: Path, project: Path, *argv: str, **env: str) -> Servers:
    return read_servers(client, argv=argv, cwd=str(project), environ={"HOME": str(home), **env})


def write_json(path: Path, value: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def servers(**entries: object) -> dict[str, object]:
    return {"mcpServers": entries}


def only_doubt(found: Servers) -> str:
    assert not found.declarations or found.doubts, found
    assert len(found.doubts) == 1, found.doubts
    return found.doubts[0]


# ------------------------------------------------------------------ Claude Code


def test_claude_reads_the_project_the_user_and_the_local_scope(home: Path, project: Path) -> None:
    write_json(project / ".mcp.json", servers(a={"command": "npx", "args": ["-y", "x@1.0.0"]}))
    write_json(
        home / ".claude.json",
        {
            "numStartups": 3,  # the client's own state: not a server, not a doubt
            "mcpServers": {"b": {"type": "http", "url": "https://mcp.example/x"}},
            "projects": {
                str(project): {"mcpServers": {"c": {"command": "uvx", "env": {"K": "v"}}}},
                "/elsewhere": {"mcpServers": {"d": {"command": "never-read"}}},
            },
        },
    )
    found = read("claude", home, project)
    assert found.doubts == ()
    by_name = {d.name: d for d in found.declarations}
    assert sorted(by_name) == ["a", "b", "c"]
    assert by_name["a"].transport == STDIO and by_name["a"].args == ("-y", "x@1.0.0")
    assert by_name["a"].declared_in == (str(project / ".mcp.json"),)
    assert by_name["b"].transport == REMOTE and by_name["b"].url == "https://mcp.example/x"
    assert by_name["c"].at == f'projects["{project}"].mcpServers.c'
    assert by_name["c"].env == (("K", "v"),)


def test_claude_reads_a_parent_folder_mcp_json_too(home: Path, project: Path) -> None:
    write_json(project.parent / ".mcp.json", servers(up={"command": "up"}))
    assert [d.name for d in read("claude", home, project).declarations] == ["up"]


def test_claude_mcp_config_takes_files_and_inline_json(home: Path, project: Path) -> None:
    write_json(project / "extra.json", servers(f={"command": "from-file"}))
    inline = json.dumps(servers(i={"command": "inline"}))
    found = read("claude", home, project, "-p", "--mcp-config", "extra.json", inline, "--verbose")
    assert [(d.name, d.declared_in) for d in found.declarations] == [
        ("f", (str(project / "extra.json"),)),
        ("i", ("--mcp-config argument 4",)),
    ]


# Claude Code trims each --mcp-config value with JavaScript's trim() (white space, line
# terminators and U+FEFF), takes it as JSON when it parses, and else as a file through
# path.resolve, which removes `dir/..` from the text before the file is opened.
MCP_CONFIG_SPELLINGS = {
    "leading space": " m.json",
    "trailing newline": "m.json\n",
    "byte-order mark": "\ufeffm.json",
    "climbing out of a link": "link/../m.json",
    "climbing out of the working directory's link": "../project/m.json",
}


@pytest.mark.parametrize(
    "value", list(MCP_CONFIG_SPELLINGS.values()), ids=list(MCP_CONFIG_SPELLINGS)
)
def test_claude_reads_an_mcp_config_file_where_claude_code_reads_it(
    home: Path, tmp_path: Path, value: str
) -> None:
    real = tmp_path / "real" / "project"
    write_json(real / "m.json", servers(old={"command": "x"}))
    (tmp_path / "elsewhere" / "sub").mkdir(parents=True)
    (real / "link").symlink_to(tmp_path / "elsewhere" / "sub")
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    project = tmp_path / "linked" / "project"  # (the working directory, through a link)
    found = read("claude", home, project, "--mcp-config", value)
    assert [d.name for d in found.declarations] == ["old"], found


@pytest.mark.parametrize("space", ["\ufeff", " ", "\n", "\u2028", "\u00a0"])
def test_claude_reads_inline_mcp_config_after_any_space_claude_code_trims(
    home: Path, project: Path, space: str
) -> None:
    inline = space + json.dumps(servers(old={"command": "x"}))
    found = read("claude", home, project, "--mcp-config", inline)
    assert [d.name for d in found.declarations] == ["old"], found


# Claude Code normalises its working directory and its config folder to NFC: on Linux the
# NFD spelling of a name is another folder, whose files claude never reads. Unicode 16
# decomposes U+1611E U+1611E into a character Python 3.11's tables (14) do not hold, which
# node's newer tables compose: another folder too, unknown here.
OTHERWISE_SPELLED = {"NFD": ("proj-e\u0301", "NFC"), "newer": ("proj-\U0001611e" * 2, "Unicode")}


@pytest.mark.parametrize("spelling", list(OTHERWISE_SPELLED))
@pytest.mark.parametrize("where", ["cwd", "HOME", "CLAUDE_CONFIG_DIR"])
def test_claude_doubts_a_folder_whose_name_node_would_spell_otherwise(
    home: Path, tmp_path: Path, where: str, spelling: str
) -> None:
    name, said = OTHERWISE_SPELLED[spelling]
    if spelling == "newer" and unicodedata.category("\U0001611e") != "Cn":
        pytest.skip("this Python's Unicode tables know U+1611E")
    folder = tmp_path / name
    folder.mkdir()
    project = folder if where == "cwd" else tmp_path
    env = {} if where == "cwd" else {where: str(folder)}
    assert said in only_doubt(read("claude", home, project, **env))


@pytest.mark.parametrize("climb", ["link", "missing"])
def test_claude_reads_its_config_dir_as_node_joins_it(
    home: Path, project: Path, tmp_path: Path, climb: str
) -> None:
    # node's path.join removes `dir/..` from the text, whether `dir` is a link or missing;
    # the kernel would climb out of the link's target, or find nothing.
    (tmp_path / "X" / "sub").mkdir(parents=True)
    (tmp_path / "T").mkdir()
    (tmp_path / "T" / "link").symlink_to(tmp_path / "X" / "sub")
    write_json(tmp_path / "T" / ".claude.json", servers(old={"command": "x"}))
    config_dir = str(tmp_path / "T" / climb / "..")
    found = read("claude", home, project, CLAUDE_CONFIG_DIR=config_dir)
    assert [d.name for d in found.declarations] == ["old"], found


def test_claude_strict_mcp_config_reads_every_source_still(home: Path, project: Path) -> None:
    # (the flag may be another option's value: it is not taken to remove anything)
    write_json(project / ".mcp.json", servers(also={"command": "x"}))
    inline = json.dumps(servers(given={"command": "y"}))
    found = read("claude", home, project, "--strict-mcp-config", f"--mcp-config={inline}")
    assert sorted(d.name for d in found.declarations) == ["also", "given"]


def test_claude_config_dir_adds_its_own_claude_json(
    home: Path, project: Path, tmp_path: Path
) -> None:
    config = tmp_path / "cc"
    write_json(config / ".claude.json", servers(cc={"command": "z"}))
    found = read("claude", home, project, CLAUDE_CONFIG_DIR=str(config))
    assert [d.name for d in found.declarations] == ["cc"]


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"command": "x", "args": ["ok", 3]}, "mcpServers.s.args: not a list of strings"),
        ({"command": ["x"]}, "mcpServers.s.command: not a non-empty string"),
        ({"command": "x", "env": {"A": 1}}, "mcpServers.s.env: not an object of strings"),
        ({"type": "pipe", "command": "x"}, "mcpServers.s.type: unknown transport 'pipe'"),
        ({"command": "x", "shell": True}, "mcpServers.s: unknown key 'shell'"),
        ({"url": "https://a.example"}, 'mcpServers.s: has a "url" but no remote "type"'),
        (
            {"type": "http", "url": "https://a.example", "headersHelper": "./token.sh"},
            "mcpServers.s.headersHelper: runs a command that is not judged",
        ),
        ({"command": "${TOOL}"}, "mcpServers.s.command: '${TOOL}' names a variable"),
        ({"command": "x", "args": ["${HOME}/s.js"]}, "mcpServers.s.args[0]: names a variable"),
        ({"command": "x", "env": {"NODE_OPTIONS": "${UNSET_HERE}"}}, "cannot be expanded here"),
    ],
)
def test_claude_refuses_an_entry_it_does_not_understand(
    home: Path, project: Path, entry: dict[str, object], problem: str
) -> None:
    path = write_json(project / ".mcp.json", servers(s=entry))
    doubt = only_doubt(read("claude", home, project))
    assert doubt.startswith(f"{path}: ") and problem in doubt


def test_claude_expands_an_env_value_it_can_know(home: Path, project: Path) -> None:
    entry = {"command": "x", "env": {"TOKEN": "${API_TOKEN}", "MODE": "${MODE:-fast}"}}
    write_json(project / ".mcp.json", servers(s=entry))
    [declared] = read("claude", home, project, API_TOKEN="t0k").declarations
    assert declared.env == (("TOKEN", "t0k"), ("MODE", "fast"))


def test_claude_refuses_a_vs_code_servers_key(home: Path, project: Path) -> None:
    write_json(project / ".mcp.json", {"servers": {"s": {"command": "x"}}})
    assert "servers: not a key of an MCP configuration" in only_doubt(read("claude", home, project))


# ------------------------------------------------------------------ hostile files


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"mcpServers": {"s": {"command": "a"}, "s": {"command": "b"}}}', "repeats the key 's'"),
        ('{"mcpServers": {"s": {"command": "a", "timeout": NaN}}}', "NaN is not a JSON number"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"mcpServers": {', "not valid JSON"),
        ("\ufeff{}", "byte order mark"),
    ],
)
def test_refuses_a_malformed_or_ambiguous_file(
    home: Path, project: Path, text: str, problem: str
) -> None:
    (project / ".mcp.json").write_text(text, encoding="utf-8")
    doubt = only_doubt(read("claude", home, project))
    assert doubt.startswith(str(project / ".mcp.json")) and problem in doubt


def test_refuses_a_file_that_is_not_utf8(home: Path, project: Path) -> None:
    (project / ".mcp.json").write_bytes(b'{"mcpServers": {"\xff": {}}}')
    assert "not UTF-8" in only_doubt(read("claude", home, project))


def test_refuses_a_huge_file_without_parsing_it(home: Path, project: Path) -> None:
    with open(project / ".mcp.json", "wb") as huge:
        huge.truncate(mcp_files.MAX_CONFIG_BYTES + 1)  # sparse: nothing written to disk
    assert "larger than 16 MiB" in only_doubt(read("claude", home, project))


def test_refuses_a_fifo_without_blocking(home: Path, project: Path) -> None:
    os.mkfifo(project / ".mcp.json")
    assert "FIFO" in only_doubt(read("claude", home, project))


def test_refuses_a_folder_where_the_file_belongs(home: Path, project: Path) -> None:
    (project / ".mcp.json").mkdir()
    assert "a folder" in only_doubt(read("claude", home, project))


def test_refuses_a_file_where_a_configuration_folder_belongs(home: Path, project: Path) -> None:
    # .claude/settings.json cannot be opened through a file: not absent, so not skipped.
    (project / ".claude").write_text("{}", encoding="utf-8")
    doubts = read("claude", home, project).doubts
    assert [d.split(": ")[0] for d in doubts] == [
        str(project / ".claude" / name) for name in ("settings.json", "settings.local.json")
    ]
    assert all(d.endswith("Not a directory") for d in doubts), doubts


def test_refuses_a_link_out_of_the_project(home: Path, project: Path, tmp_path: Path) -> None:
    outside = write_json(tmp_path / "elsewhere" / "mcp.json", servers(s={"command": "x"}))
    (project / ".mcp.json").symlink_to(outside)
    doubt = only_doubt(read("claude", home, project))
    assert f"is a link to {outside}, outside {project}" in doubt


def test_refuses_a_home_file_linked_out_of_home(home: Path, project: Path, tmp_path: Path) -> None:
    outside = write_json(tmp_path / "elsewhere" / "claude.json", servers(s={"command": "x"}))
    (home / ".claude.json").symlink_to(outside)
    assert "outside" in only_doubt(read("claude", home, project))


def test_follows_a_link_that_stays_inside_the_project(home: Path, project: Path) -> None:
    target = write_json(project / "config" / "mcp.json", servers(s={"command": "x"}))
    (project / ".mcp.json").symlink_to(target)
    assert [d.name for d in read("claude", home, project).declarations] == ["s"]


def test_refuses_an_unreadable_file(home: Path, project: Path) -> None:
    path = write_json(project / ".mcp.json", servers())
    path.chmod(0)
    if os.access(path, os.R_OK):
        pytest.skip("running as root: no file is unreadable")
    assert "cannot read" in only_doubt(read("claude", home, project))


def test_an_absent_file_and_a_dangling_link_are_simply_absent(home: Path, project: Path) -> None:
    (project / ".mcp.json").symlink_to(project / "nowhere.json")
    assert read("claude", home, project) == Servers("claude")


# ------------------------------------------------------------------ Codex


def write_toml(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_codex_merges_the_layers_key_by_key(home: Path, project: Path) -> None:
    user = write_toml(
        home / ".codex" / "config.toml",
        '[mcp_servers.a]\ncommand = "npx"\nargs = ["-y", "old@1.0.0"]\n\n'
        '[mcp_servers.off]\ncommand = "x"\nenabled = false\n',
    )
    (project / ".git").mkdir()
    local = write_toml(
        project / ".codex" / "config.toml", '[mcp_servers.a]\nargs = ["new@2.0.0"]\n'
    )
    found = read("codex", home, project)
    assert found.doubts == ()
    by_name = {d.name: d for d in found.declarations}
    assert by_name["a"].command == "npx" and by_name["a"].args == ("new@2.0.0",)
    assert by_name["a"].declared_in == (str(user), str(local))
    assert by_name["off"].enabled is True  # (judged: releases before `enabled` start it)


def test_codex_home_and_a_profile_file(home: Path, project: Path, tmp_path: Path) -> None:
    codex_home = tmp_path / "ch"
    write_toml(codex_home / "work.config.toml", '[mcp_servers.p]\ncommand = "p"\n')
    found = read("codex", home, project, "--profile", "work", CODEX_HOME=str(codex_home))
    assert [d.name for d in found.declarations] == ["p"]


def test_codex_override_enables_a_disabled_server(home: Path, project: Path) -> None:
    write_toml(home / ".codex" / "config.toml", '[mcp_servers.s]\ncommand = "x"\nenabled = false\n')
    [declared] = read("codex", home, project, "-c", "mcp_servers.s.enabled=true").declarations
    assert declared.enabled is True
    assert declared.declared_in[-1] == "-c mcp_servers.s.enabled"


def test_codex_override_declares_a_whole_server(home: Path, project: Path) -> None:
    found = read(
        "codex", home, project,
        "exec", "--config", 'mcp_servers.n.command="uvx"', "-c", 'mcp_servers.n.args=["srv==1.2"]',
        "-c", "mcp_servers.n.env.TOKEN=secret", "-c", "model=o3",
    )  # fmt: skip
    [declared] = found.declarations
    assert (declared.command, declared.args, declared.env) == (
        "uvx",
        ("srv==1.2",),
        (("TOKEN", "secret"),),
    )
    assert "secret" not in declared.source  # a value may be a credential: only keys are named


def test_codex_reads_the_project_layers_of_a_cd_folder(
    home: Path, project: Path, tmp_path: Path
) -> None:
    """The -C folder's layers are read, and a server without a cwd is read once as
    declared (earlier releases start it in codex's own folder) and once in the -C folder
    (current ones start it in the session's)."""
    other = tmp_path / "other"
    write_toml(other / ".codex" / "config.toml", '[mcp_servers.o]\ncommand = "o"\n')
    found = read("codex", home, project, "-C", str(other)).declarations
    assert [(d.name, d.cwd) for d in found] == [("o", None), ("o", str(other))]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('[mcp_servers.s]\ncommand = "a"\ncommand = "b"\n', "not valid TOML"),
        ('[mcp_servers.s]\ncommand = "a"\nshell = true\n', "unknown key 'shell'"),
        ('[mcp_servers.s]\ncommand = "a"\nenabled = "no"\n', "enabled: not a boolean"),
        ('[mcp_servers.s]\ncommand = "a"\nurl = "https://x"\n', "both a command and a url"),
        ("[mcp_servers.s]\nrequired = true\n", "neither a command nor a url"),
        ("mcp_servers = 3\n", "mcp_servers: not a table"),
        ('[mcp_servers.s]\ncommand = "a"\nargs = ["x", 1]\n', "args: not a list of strings"),
    ],
)
def test_codex_refuses_what_it_does_not_understand(
    home: Path, project: Path, text: str, problem: str
) -> None:
    write_toml(home / ".codex" / "config.toml", text)
    assert problem in only_doubt(read("codex", home, project))


# ------------------------------------------------------------------ Gemini CLI and Cursor


def test_gemini_reads_settings_with_comments(home: Path, project: Path) -> None:
    (home / ".gemini").mkdir()
    (home / ".gemini" / "settings.json").write_text(
        '{\n  // the user\'s servers\n  "mcpServers": {"g": {"command": "npx", /* pinned */'
        ' "args": ["-y", "a//b@1.0.0"]}}\n}\n',
        encoding="utf-8",
    )
    write_json(
        project / ".gemini" / "settings.json",
        servers(w={"httpUrl": "https://w.example", "command": "ignored"}),
    )
    found = read("gemini", home, project)
    assert found.doubts == ()
    by_name = {d.name: d for d in found.declarations}
    assert by_name["g"].args == ("-y", "a//b@1.0.0")
    assert by_name["w"].transport == REMOTE  # a url wins over a command in Gemini CLI


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"mcp": {"serverCommand": "npx -y srv"}}, "mcp.serverCommand"),
        (servers(s={"command": "$TOOL"}), "names a variable the client expands"),
        (servers(s={"command": "x", "shell": "bash"}), "unknown key 'shell'"),
    ],
)
def test_gemini_refuses_what_it_does_not_understand(
    home: Path, project: Path, settings: dict[str, object], problem: str
) -> None:
    write_json(project / ".gemini" / "settings.json", settings)
    assert problem in only_doubt(read("gemini", home, project))


def test_cursor_reads_the_project_and_the_user_file(home: Path, project: Path) -> None:
    write_json(home / ".cursor" / "mcp.json", servers(u={"url": "https://u.example"}))
    write_json(project / ".cursor" / "mcp.json", servers(p={"type": "stdio", "command": "p"}))
    found = read("cursor", home, project)
    assert [(d.name, d.transport) for d in found.declarations] == [("u", REMOTE), ("p", STDIO)]
    write_json(project / ".cursor" / "mcp.json", servers(p={"command": "p", "envFile": ".env"}))
    assert "envFile" in only_doubt(read("cursor", home, project))


def test_codex_doubts_a_home_that_climbs_out_of_a_symbolic_link(
    home: Path, project: Path, tmp_path: Path
) -> None:
    # HOME=.../ws/link/.. with link -> X/sub: node (claude, gemini) normalises the text to
    # .../ws, while codex's own home lookup (releases that open $HOME/.codex as given) is
    # resolved by the kernel to X/.codex. The two readings name different files.
    (tmp_path / "X" / "sub").mkdir(parents=True)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "link").symlink_to(tmp_path / "X" / "sub")
    write_toml(tmp_path / "X" / ".codex" / "config.toml", '[mcp_servers.old]\ncommand = "x"\n')
    climbing = str(tmp_path / "ws" / "link" / "..")
    assert "codex" in only_doubt(read("codex", home, project, HOME=climbing))
    # A `..` that climbs no link is one folder whichever way it is read.
    (tmp_path / "ws" / "plain").mkdir()
    write_toml(tmp_path / "ws" / ".codex" / "config.toml", '[mcp_servers.ok]\ncommand = "x"\n')
    found = read("codex", home, project, HOME=str(tmp_path / "ws" / "plain" / ".."))
    assert found.doubts == ()
    assert [d.name for d in found.declarations] == ["ok"]


def test_claude_doubts_an_empty_claude_config_dir(home: Path, project: Path) -> None:
    # Claude Code takes CLAUDE_CONFIG_DIR ?? ~/.claude: an empty value is kept, and its
    # config folder is then the working directory.
    write_json(project / ".config.json", servers(old={"command": "x"}))
    assert "CLAUDE_CONFIG_DIR" in only_doubt(read("claude", home, project, CLAUDE_CONFIG_DIR=""))


# Node, which runs Claude Code and Gemini CLI, reads a byte that is not UTF-8 in its
# arguments, environment and working directory as U+FFFD: it opens another file than the
# one named, which the gate cannot read in its place.
NOT_UTF8 = os.fsdecode(b"cfg-\xff")


@pytest.mark.parametrize(
    ("client", "where"),
    [("claude", "cwd"), ("claude", "HOME"), ("claude", "CLAUDE_CONFIG_DIR"),
     ("claude", "--mcp-config"), ("gemini", "cwd"), ("gemini", "HOME")],
)  # fmt: skip
def test_a_node_client_doubts_a_name_with_bytes_that_are_not_utf8(
    home: Path, tmp_path: Path, client: str, where: str
) -> None:
    folder = tmp_path / NOT_UTF8
    folder.mkdir()
    project = folder if where == "cwd" else tmp_path
    argv = ("--mcp-config", str(folder / "m.json")) if where == "--mcp-config" else ()
    env = {} if where in ("cwd", "--mcp-config") else {where: str(folder)}
    assert "UTF-8" in only_doubt(read(client, home, project, *argv, **env))


# Not only the names it opens itself: node passes every variable and argument on as the
# text it read, so a server's PATH, a settings file named by a variable or an option, and
# any name still to come reach the agent and its servers re-encoded (\xff as \xef\xbf\xbd).
@pytest.mark.parametrize(
    ("client", "variable"),
    [("gemini", "PATH"), ("claude", "PATH"), ("gemini", "GEMINI_CLI_SYSTEM_SETTINGS_PATH"),
     ("gemini", "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"), ("claude", "XDG_CACHE_HOME"),
     ("gemini", "ANY_NAME")],
)  # fmt: skip
def test_a_node_client_doubts_any_variable_with_bytes_that_are_not_utf8(
    home: Path, project: Path, client: str, variable: str
) -> None:
    value = os.fsdecode(b"/opt/tools/bin-\xff") + ":/usr/bin"
    doubt = only_doubt(read(client, home, project, **{variable: value}))
    assert variable in doubt and "UTF-8" in doubt


@pytest.mark.parametrize("client", ["claude", "gemini"])
def test_a_node_client_doubts_a_variable_name_with_bytes_that_are_not_utf8(
    home: Path, project: Path, client: str
) -> None:
    assert "UTF-8" in only_doubt(read(client, home, project, **{os.fsdecode(b"X\xff"): "1"}))


@pytest.mark.parametrize(
    ("client", "argv"),
    [("claude", ("--settings", "s.json")), ("gemini", ("--include-directories", "d")),
     ("gemini", ("-p", "hi"))],
)  # fmt: skip
def test_a_node_client_doubts_any_argument_with_bytes_that_are_not_utf8(
    home: Path, project: Path, client: str, argv: tuple[str, str]
) -> None:
    spelled = (argv[0], argv[1] + os.fsdecode(b"\xff"))
    assert "UTF-8" in only_doubt(read(client, home, project, *spelled))


@pytest.mark.parametrize("client", ["claude", "gemini"])
def test_a_node_client_reads_utf8_variables_and_arguments_that_are_not_ascii(
    home: Path, project: Path, client: str
) -> None:
    found = read(client, home, project, "-p", "caf\u00e9", PATH="/opt/caf\u00e9:/usr/bin")
    assert found.doubts == ()
