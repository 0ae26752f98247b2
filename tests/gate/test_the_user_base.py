"""The user site is looked for where CPython's ``site`` puts it, whatever the child's HOME.

A child started without HOME takes its home from the password database, and one with an
empty HOME takes ``/``: ``site`` adds that home's ``.local/lib/pythonX.Y/site-packages``
ahead of the interpreter's own, so the gate must judge what is there (an older aider, a
``usercustomize``). Compared with what the real interpreter answers in the same
environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from floorguard._identify.python_imports import user_base

SITE_ANSWERS = "import json, site; print(json.dumps(site.getuserbase()))"


@pytest.mark.parametrize(
    "given",
    [
        {},  # no HOME: the password database's home
        {"HOME": ""},
        {"HOME": "/"},
        {"HOME": "/srv/someone/"},
        {"HOME": "relative/home"},
        {"HOME": "/srv/someone", "PYTHONUSERBASE": "/opt/base"},
        {"HOME": "/srv/someone", "PYTHONUSERBASE": ""},
        {"PYTHONUSERBASE": "rel/base"},
    ],
)
def test_the_user_base_is_where_cpython_s_site_puts_it(
    tmp_path: Path, given: dict[str, str]
) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **given}
    answered = subprocess.run(
        [sys.executable, "-c", SITE_ANSWERS], env=env, cwd=tmp_path, capture_output=True,
        text=True, timeout=60, check=True,
    )  # fmt: skip
    cpython = json.loads(answered.stdout)
    # (site makes a relative one absolute against the working directory, by its letters)
    assert user_base(env, str(tmp_path)) == os.path.normpath(os.path.join(tmp_path, cpython))
