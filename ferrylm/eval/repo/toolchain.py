"""Which build tool a repository's tests run with in the sandbox, named with its version, and a line where the
user's shell would run another (rustup's cargo before Debian's: a Cargo.lock of version 4 that the sandbox's older
cargo refuses is then explained, not a mystery)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache

TOOLS = {"rust": "cargo", "go": "go", "java": "javac", "cpp": "g++"}
JAIL_PATH = "/usr/bin:/bin"  # what the sandbox's PATH holds besides ferrylm's own shims (sandbox.bwrap_command)
_VERSION_ARGS = {"go": ["version"], "javac": ["-version"]}  # the rest answer --version


@dataclass(frozen=True)
class Toolchain:
    runs: str | None  # "cargo 1.65.0 (/usr/bin/cargo)", or None for Python (the interpreter is ferrylm's own)
    other: str | None = None  # the user's PATH runs another: which, and what to do


@cache
def version(path: str) -> str:
    """The first line a tool prints about its version, or "version unknown"."""
    tool = os.path.basename(path)
    try:
        out = subprocess.run(
            [path, *_VERSION_ARGS.get(tool, ["--version"])], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return "version unknown"
    lines = (out.stdout or out.stderr).strip().splitlines()
    return lines[0] if lines else "version unknown"


def named(language: str) -> Toolchain:
    """What the sandbox runs for `language`'s tests, and a line where the user's PATH finds another program."""
    tool = TOOLS.get(language)
    if tool is None:
        return Toolchain(None)
    jail, user = shutil.which(tool, path=JAIL_PATH), shutil.which(tool)
    runs = f"{version(jail)} ({jail})" if jail else f"no {tool} in {JAIL_PATH}"
    if user is None or (jail and os.path.realpath(user) == os.path.realpath(jail)):
        return Toolchain(runs)
    return Toolchain(
        runs,
        f"your PATH's {tool} is {user} ({version(user)}), but the sandbox runs "
        f"{jail or 'none'} ({version(jail) if jail else f'no {tool} in {JAIL_PATH}'}): the tests run with the "
        f"sandbox's; a repository that needs yours (a Cargo.lock of version 4, a newer go.mod) gives no task",
    )
