"""A closed world at the spawn, the child's inputs: arguments, environment and working
directory that make the start fail after a permit was sealed (a permit for a child that
never ran, and an error that is no recorded refusal), a host tampering with the floor map
it reads, and the native loader's variables. Each is refused and recorded before any
permit, under the default policy and under deny-by-default.
"""

from __future__ import annotations

from pathlib import Path

from helpers.closed_world import World


def test_nul_byte_in_an_argument_is_refused_before_any_permit(
    world: World, untracked_policy: str
) -> None:
    """An argument holding a NUL byte cannot reach ``execve``: refused, no permit sealed."""
    new = world.new_aider()
    outcome = world.spawn(
        "aider", ["--message", "fix\x00it"], policy=untracked_policy,
        env=world.env(new.prefix / "bin"),
    )  # fmt: skip
    world.assert_refused(outcome, new.marker, "NUL", "null byte", "argument")
    world.assert_no_permit_recorded()


def test_nul_byte_in_an_environment_value_is_refused_before_any_permit(
    world: World, untracked_policy: str
) -> None:
    """An environment value holding a NUL byte: refused naming the variable, no permit."""
    new = world.new_aider()
    env = world.env(new.prefix / "bin", AGENT_TOKEN="abc\x00def")
    outcome = world.spawn("aider", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, new.marker, "AGENT_TOKEN", "NUL", "null byte")
    world.assert_no_permit_recorded()


def test_environment_name_with_an_equals_sign_is_refused_before_any_permit(
    world: World, untracked_policy: str
) -> None:
    """An environment variable name containing ``=`` cannot be passed to a child."""
    new = world.new_aider()
    env = world.env(new.prefix / "bin")
    env["AGENT=TOKEN"] = "x"
    outcome = world.spawn("aider", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, new.marker, "AGENT=TOKEN", "variable name", "'='")
    world.assert_no_permit_recorded()


def test_missing_working_directory_is_refused_before_any_permit(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """A ``cwd`` that does not exist: the child cannot start there; refused naming it."""
    new = world.new_aider()
    missing = tmp_path / "no-such-workspace"
    outcome = world.spawn(
        "aider", ["task"], cwd=missing, policy=untracked_policy,
        env=world.env(new.prefix / "bin"),
    )  # fmt: skip
    world.assert_refused(outcome, new.marker, str(missing), "cwd", "working directory")
    world.assert_no_permit_recorded()


def test_setattr_on_a_floor_map_entry_does_not_lower_the_floor_applied(
    world: World, untracked_policy: str
) -> None:
    """The host forces ``object.__setattr__(floorguard.FLOOR_MAP["aider"],
    "min_safe_version", "0.10.0")`` on the frozen entry; the next spawn of aider 0.50.0 is
    still refused against the floor the map states, 0.60.0."""
    old = world.old_aider()
    outcome = world.spawn(
        "aider", ["task"], policy=untracked_policy, env=world.env(old.prefix / "bin"),
        tamper={"adapter": "aider", "min_safe_version": "0.10.0"},
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "0.60.0", "floor")
    assert outcome["floor"] == "0.60.0", outcome


def test_ld_preload_in_the_child_environment_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``LD_PRELOAD`` makes the dynamic loader run a library inside any child, before its
    own code: a tracked spawn carrying it is refused naming the variable."""
    new = world.new_aider()
    env = world.env(new.prefix / "bin", LD_PRELOAD=str(tmp_path / "x.so"))
    outcome = world.spawn("aider", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, new.marker, "LD_PRELOAD")


def test_the_warn_policy_does_not_override_an_input_not_understood(
    world: World, untracked_policy: str
) -> None:
    """``FLOORGUARD_ADAPTER_FLOOR_POLICY=warn`` lets a below-floor version run as a recorded
    override; it never lets through a child whose inputs are not understood."""
    new = world.new_aider()
    outcome = world.spawn(
        "aider", ["task"], binary=new.script, policy=untracked_policy,
        env=world.env(LD_PRELOAD="/nonexistent/x.so"), floor_policy="warn",
    )  # fmt: skip
    world.assert_refused(outcome, new.marker, "LD_PRELOAD")
