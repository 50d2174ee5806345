"""The build tool a repository's tests run with: the one the user's shell would run (PATH's cargo, go, javac, g++;
rustup's proxy resolved to the toolchain it picks for the repository), shown to the sandbox read-only where it lies
outside /usr and put first on the sandbox's PATH, named with its version in the task log. A toolchain the sandbox
cannot be shown gives one line saying which and how to point at another."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

TOOLS = {"rust": "cargo", "go": "go", "java": "javac", "cpp": "g++"}
JAIL_PATH = "/usr/bin:/bin"  # what the sandbox's PATH holds besides ferrylm's own shims (sandbox.bwrap_command)
SEEN = ("/usr/", "/bin/", "/lib/", "/opt/")  # the system the sandbox sees whole, read-only
_VERSION_ARGS = {"go": ["version"], "javac": ["-version"]}  # the rest answer --version
_POINT = {  # how a user points ferrylm at another toolchain
    "cargo": "put its cargo first on PATH, or pin it in the repository's rust-toolchain.toml (rustup)",
    "go": "put its go first on PATH",
    "javac": "put its JDK's bin first on PATH",
    "g++": "put its g++ first on PATH",
}


@dataclass(frozen=True)
class Toolchain:
    runs: str | None  # "cargo 1.95.0 (… /bin/cargo)", or None for Python (the interpreter is ferrylm's own)
    other: str | None = None  # a line: the sandbox cannot run the user's toolchain, which, and what to do
    bin: str | None = None  # its programs' directory, first on the sandbox's PATH (None: /usr/bin's)
    root: str | None = None  # the directory the sandbox is shown read-only for it (None: under /usr already)


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


def _resolved(tool: str, found: str, repo: Path | None) -> str:
    """The program behind PATH's `found`: rustup's proxy asks rustup which toolchain it runs in `repo`."""
    real = os.path.realpath(found)
    if os.path.basename(real) != "rustup":
        return real
    try:
        out = subprocess.run([real, "which", tool], capture_output=True, text=True, timeout=60, cwd=repo)
    except (OSError, subprocess.SubprocessError):
        return real
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else os.path.realpath(found)


def named(language: str, repo: Path | None = None) -> Toolchain:
    """The toolchain the user's shell runs for `language`'s tests (in `repo`, where rustup pins one), as the
    sandbox will run it."""
    tool = TOOLS.get(language)
    if tool is None:
        return Toolchain(None)
    found = shutil.which(tool)
    if found is None:
        jail = shutil.which(tool, path=JAIL_PATH)
        runs = f"{version(jail)} ({jail})" if jail else f"no {tool} on PATH"
        return Toolchain(runs, None if jail else f"no {tool} on PATH: install one, or {_POINT[tool]}")
    program = _resolved(tool, found, repo)
    runs = f"{version(program)} ({program})"
    bin_dir = os.path.dirname(program)
    if os.path.realpath(shutil.which(tool, path=JAIL_PATH) or "") == program:
        return Toolchain(runs)  # the sandbox's own PATH runs it already
    root = os.path.dirname(bin_dir) if os.path.basename(bin_dir) == "bin" else bin_dir
    if root.startswith(SEEN):
        return Toolchain(runs, bin=bin_dir)
    if root in ("/", os.path.expanduser("~")) or not os.access(program, os.X_OK):
        jail = shutil.which(tool, path=JAIL_PATH)
        return Toolchain(
            f"{version(jail)} ({jail})" if jail else f"no {tool} in {JAIL_PATH}",
            f"your {tool} ({runs}) cannot be shown to the sandbox on its own, so the tests run with "
            f"{jail or 'none'}: {_POINT[tool]}",
        )
    return Toolchain(runs, bin=bin_dir, root=root)
