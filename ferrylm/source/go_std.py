"""Go's standard library as repositories (the "go-stdlib" source): a few of its packages, each one
repository with its own `_test.go` files (Debian's golang source package ships them).

Their tests run in place, in GOROOT, with a model's body laid over its file by `go test -overlay`
(eval/repo/runner.py), so GOROOT is never copied or written. The overlay's keys must be the paths
under `go env GOROOT` as Go prints it: keyed through a link to it (/usr/lib/go), they are ignored.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

# Leaf packages (no sub-packages) whose tests take under a second and which the test runner's own
# dependencies do not import, so a changed file recompiles little: about 0.5 s a run with a warm cache.
PACKAGES = ("container/list", "container/ring", "encoding/csv", "encoding/hex", "text/tabwriter", "unicode/utf16")
REPO_PREFIX = "go-std/"  # the packages' repository names: go-std/<import path>


@cache
def goroot() -> str | None:
    """`go env GOROOT` (None without Go, or when it does not answer)."""
    go = shutil.which("go")
    if go is None:
        return None
    try:
        out = subprocess.run([go, "env", "GOROOT"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    root = out.stdout.strip()
    return root if out.returncode == 0 and root and os.path.isdir(os.path.join(root, "src")) else None


def package_dir(package: str) -> str:
    """Where the package's files are, under GOROOT as Go prints it (the path an overlay must name)."""
    return os.path.join(goroot(), "src", package)


def package_dirs() -> list[tuple[str, Path]]:
    """(import path, directory) of each of PACKAGES that this machine's GOROOT holds with its tests."""
    if goroot() is None:
        return []
    dirs = [(p, Path(package_dir(p))) for p in PACKAGES]
    return [(p, d) for p, d in dirs if d.is_dir() and any(d.glob("*_test.go"))]


def std_package(directory: str | Path) -> str | None:
    """The import path of the standard-library package at `directory`, or None when it lies outside GOROOT/src."""
    root = goroot()
    if root is None:
        return None
    src = os.path.realpath(os.path.join(root, "src"))
    here = os.path.realpath(directory)
    return os.path.relpath(here, src) if here.startswith(src + os.sep) else None
