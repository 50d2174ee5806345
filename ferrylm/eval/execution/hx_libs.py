"""The libraries HumanEval-X's Go and Rust tests import, prepared once per toolchain version outside
the sandbox and bound into it read-only.

- Go: the data set's module files and vendored testify, with a build cache that already holds
  testify compiled. Go keys a package's cache entry by its directory, so every program is built in
  the same module directory (GO_MODULE, in the sandbox's private /tmp; the warm-up uses that path on
  the host under a lock); the standard library comes precompiled with Debian's Go. Each program
  copies the small cache (go writes to it) and links the vendor tree.
- Rust: rand, regex and md5 compiled by Cargo, offline, from the crate sources Debian ships
  (librust-*-dev, /usr/share/cargo/registry); each program is one rustc call against their rlibs.

Kept under $XDG_CACHE_HOME/ferrylm/humaneval-x (or ~/.cache/...), keyed by the toolchain's
version; built in a temporary directory and renamed into place, so concurrent runs never see half
of one.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from ...errors import FerryError

GO = "/usr/bin/go"
GO_MODULE = "/tmp/ferrylm-go-module"
RUSTC, CARGO = "/usr/bin/rustc", "/usr/bin/cargo"
DEBIAN_CRATES = Path("/usr/share/cargo/registry")
RUST_CRATES = ("rand", "regex", "md5")
# What every Go step runs under: no network, no module downloads, no vet, no cgo (no C compiler in the sandbox).
GO_ENV = (
    "GOFLAGS=-mod=vendor",
    "GOPROXY=off",
    "GOSUMDB=off",
    "GOTOOLCHAIN=local",
    "CGO_ENABLED=0",
    "GOMAXPROCS=2",
    "GO111MODULE=on",
)


class LibsError(FerryError, RuntimeError):
    """A language's test libraries could not be prepared; the language is then not measured."""


def _root(under: str) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "ferrylm" / under


def tool_version(argv: list[str]) -> str:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise LibsError(f"{' '.join(argv)}: {out.stderr.strip()[:200]}")
    return "".join(c if c.isalnum() or c in ".-" else "-" for c in out.stdout.split("\n")[0].strip())


def prepared(name: str, build: Callable[[Path], None], under: str = "humaneval-x") -> str:
    """The directory `build` filled once (in a temporary directory, then renamed), readable by the sandbox's uids."""
    final = _root(under) / name
    if (final / ".ready").is_file():
        return str(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=final.parent))
    try:
        build(tmp)
        for d, _, files in os.walk(tmp):  # the programs' uids read it
            os.chmod(d, 0o755)
            for f in files:
                p = os.path.join(d, f)
                if not os.path.islink(p):
                    os.chmod(p, 0o755 if os.access(p, os.X_OK) else 0o644)
        (tmp / ".ready").write_text("")
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / ".ready").is_file():  # not a concurrent run that finished first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return str(final)


def _run(argv: list[str], cwd: Path, env: dict, what: str) -> None:
    out = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        said = (out.stderr or out.stdout).strip().splitlines()
        raise LibsError(f"{what}: {said[-1][:300] if said else f'exit code {out.returncode}'}")


def go_libs(data_dir: Path) -> str:
    src = data_dir / "go-evaluation"
    if not (src / "vendor.tar.gz").is_file():
        raise LibsError(f"HumanEval-X Go: {src}/vendor.tar.gz is missing (the data set's Go module files)")

    def build(d: Path) -> None:
        for f in ("go.mod", "go.sum"):
            shutil.copy(src / f, d / f)
        with tarfile.open(src / "vendor.tar.gz") as tar:
            tar.extractall(d, filter="data")
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(d),
            "GOCACHE": str(d / "cache"),
            "GOPATH": str(d / "gopath"),
            **dict(kv.split("=", 1) for kv in GO_ENV),
        }
        with open(f"{GO_MODULE}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            probe = Path(GO_MODULE)
            shutil.rmtree(probe, ignore_errors=True)
            probe.mkdir()
            try:
                for f in ("go.mod", "go.sum"):
                    shutil.copy(d / f, probe / f)
                (probe / "vendor").symlink_to(d / "vendor")
                (probe / "main_test.go").write_text(
                    'package main\n\nimport (\n    "testing"\n    '
                    '"github.com/stretchr/testify/assert"\n)\n\n'
                    "func TestProbe(t *testing.T) { assert.New(t).Equal(1, 1) }\n"
                )
                _run(
                    [GO, "test", "-c", "-vet=off", "-o", str(d / "probe.test"), "."],
                    probe,
                    env,
                    "HumanEval-X Go: compiling the vendored testify",
                )
            finally:
                shutil.rmtree(probe, ignore_errors=True)
        (d / "probe.test").unlink()
        shutil.rmtree(d / "gopath", ignore_errors=True)

    return prepared(f"go-{tool_version([GO, 'env', 'GOVERSION'])}", build)


def rust_libs() -> str:
    missing = [c for c in RUST_CRATES if not any(DEBIAN_CRATES.glob(f"{c}-[0-9]*"))]
    if missing or not Path(CARGO).is_file():
        raise LibsError(
            f"HumanEval-X Rust: {'cargo' if not Path(CARGO).is_file() else 'the crate sources of ' + ', '.join(missing)} "
            "missing (Debian: cargo, librust-rand-dev, librust-regex-dev, librust-md5-dev)"
        )

    def build(d: Path) -> None:
        crate = d / "crate"
        (crate / "src").mkdir(parents=True)
        (crate / "src" / "lib.rs").write_text("")
        (crate / "Cargo.toml").write_text(
            '[package]\nname = "ferry_libs"\nversion = "0.0.0"\nedition = "2021"\n\n'
            '[dependencies]\nrand = "*"\nmd5 = "*"\n'
            # regex's default "perf" feature needs crates Debian packages apart
            'regex = { version = "*", default-features = false, features = ["std", "unicode"] }\n'
        )
        (crate / ".cargo").mkdir()
        (crate / ".cargo" / "config.toml").write_text(
            f'[source.crates-io]\nreplace-with = "debian"\n\n[source.debian]\ndirectory = "{DEBIAN_CRATES}"\n'
        )
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(d),
            "CARGO_HOME": str(d / "cargo-home"),
            "RUSTC": RUSTC,
            "CARGO_PROFILE_DEV_DEBUG": "false",
        }  # smaller rlibs: each program links them under the file-size limit
        _run(
            [CARGO, "build", "--offline", "--quiet", "--target-dir", str(d / "target")],
            crate,
            env,
            "HumanEval-X Rust: building rand, regex and md5",
        )
        deps = d / "target" / "debug" / "deps"
        (d / "deps").mkdir()
        for f in deps.iterdir():
            if f.suffix == ".rlib" or f.suffix == ".rmeta":
                shutil.copy(f, d / "deps" / f.name)
        for extra in ("crate", "target", "cargo-home"):
            shutil.rmtree(d / extra, ignore_errors=True)

    return prepared(f"rust-{tool_version([RUSTC, '--version'])}", build)


def rust_externs(libs: str) -> list[str]:
    """rustc's --extern for each crate the tests name, from the prepared rlibs."""
    out = []
    for c in RUST_CRATES:
        found = sorted(Path(libs, "deps").glob(f"lib{c}-*.rlib"))
        if not found:
            raise LibsError(f"HumanEval-X Rust: no lib{c} in {libs}/deps")
        out += ["--extern", f"{c}={found[0]}"]
    return out
