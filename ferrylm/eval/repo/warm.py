"""A Rust crate's build, warmed once from the original and copied into each sandbox run, so a run rebuilds only what
the replaced file touches, as Go's runs reuse a warm build cache.

Cargo keys a build by the crate's path and judges what is stale by modification times, so:
- every run builds the crate at one path, WARM_CRATE, in the sandbox's private /tmp (emptied after each program);
  the warm-up builds at the same path on this machine, under a lock;
- a run copies the crate and the warm target keeping their times, then writes the replaced file, which is newer
  than every artifact: Cargo rebuilds it and what depends on it, and never runs a stale test binary.
The warm target is bound read-only and copied per run: no run writes what another reads. The warm-up compiles and
runs nothing (`cargo test --no-run`): a crate with a build script, which would run outside the sandbox, is not
warmed, nor one whose build fails or outgrows the sandbox's /tmp; its runs stay cold.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
from functools import cache
from pathlib import Path

from ..execution import hx_libs
from . import suite

WARM_CRATE = "/tmp/ferrylm-crate"
MAX_TARGET_BYTES = 96 << 20  # the sandbox's /tmp holds 256 MB: the crate, its target and the build's new files
# Cargo's settings in every run and the warm-up: offline, no incremental cache, two jobs
CARGO_ENV = "CARGO_NET_OFFLINE=true CARGO_INCREMENTAL=0 CARGO_BUILD_JOBS=2 CARGO_TERM_COLOR=never MALLOC_ARENA_MAX=2"


def _digest(repo: Path, tools: str | None) -> str:
    """The crate's files with their modification times (Cargo judges by them; its own target/ and hidden folders
    aside) and the cargo that builds it."""
    h = hashlib.sha256(hx_libs.tool_version([os.path.join(tools or "/usr/bin", "cargo"), "--version"]).encode())
    skip = suite.skip_dirs("rust")
    for p in sorted(repo.rglob("*")):
        rel = p.relative_to(repo)
        if p.is_file() and not any(part in skip or part.startswith(".") for part in rel.parts[:-1]):
            h.update(f"{rel}\0{p.stat().st_mtime_ns}\0".encode() + hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()[:20]


def warm_target(repo: str, tools: str | None) -> str | None:
    """A directory holding `target/`, the crate at `repo` built for its tests by the cargo in `tools` (None:
    /usr/bin's), or None where the crate is not warmed (the module's docstring says when)."""
    root = Path(repo)
    if (root / "build.rs").exists() or not (root / "Cargo.toml").is_file():
        return None
    return _warmed(repo, tools)


@cache  # once per crate and process: its files are hashed once
def _warmed(repo: str, tools: str | None) -> str | None:
    root = Path(repo)

    def build(d: Path) -> None:
        env = {"PATH": f"{tools}:/usr/bin:/bin" if tools else "/usr/bin:/bin", "HOME": str(d)}
        env |= dict(kv.split("=", 1) for kv in CARGO_ENV.split()) | {"CARGO_HOME": str(d / ".cargo")}
        with open(f"{WARM_CRATE}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            shutil.rmtree(WARM_CRATE, ignore_errors=True)
            try:  # copytree keeps each file's modification time, as the run's `cp --preserve=timestamps`
                shutil.copytree(root, WARM_CRATE, symlinks=True, ignore=shutil.ignore_patterns("target", ".git"))
                done = subprocess.run(
                    ["cargo", "test", "--offline", "--no-run", "-q"],
                    cwd=WARM_CRATE,
                    env=env,
                    capture_output=True,
                    timeout=900,
                )
                target = Path(WARM_CRATE) / "target"
                size = sum(f.stat().st_size for f in target.rglob("*") if f.is_file()) if target.is_dir() else 0
                if done.returncode or not 0 < size <= MAX_TARGET_BYTES:
                    raise hx_libs.LibsError(f"{repo}: not warmed (exit {done.returncode}, {size >> 20} MB)")
                shutil.copytree(target, d / "target", symlinks=True)
            finally:
                shutil.rmtree(WARM_CRATE, ignore_errors=True)
                shutil.rmtree(d / ".cargo", ignore_errors=True)

    try:
        return hx_libs.prepared(f"{root.name}-{_digest(root, tools)}", build, under="cargo-target")
    except (hx_libs.LibsError, OSError, subprocess.SubprocessError):
        return None


def copy_in(repo_in_sandbox: str, warm: str) -> str:
    """Shell lines that copy the crate to WARM_CRATE and the warm target into it, their times kept, and enter it."""
    crate, repo = shlex.quote(WARM_CRATE), shlex.quote(repo_in_sandbox)
    return (
        f"rm -rf {crate} && cp -r --preserve=timestamps {repo} {crate} && rm -rf {crate}/target && "
        f"cp -r --preserve=timestamps {shlex.quote(warm)}/target {crate}/target && chmod -R u+w {crate} && cd {crate}"
    )
