"""A repository's own tests, run in the sandbox on a copy of it with one file replaced.

The repository is bound into the sandbox read-only; each run copies it into the program's own
directory, writes the replaced file there, and runs the test command from the copy's root. So the
original checkout is never written, and a body that deletes files, forks or loops is contained as a
HumanEval program is (execution/sandbox.py). The run passes when the command exits 0 and the sandbox's token was
written: by pytest's last hook once every test passed (a body that ends the process early with status
0 cannot pass), by the shell after any other command (Go's test binaries fail an `os.Exit(0)` during a
test themselves).

Test commands: given per repository (the data manifest's `test:`; Java and C++ only so), or detected —
pytest (or unittest) for Python, `go test ./...` for Go, `cargo test --offline` for Rust. `python`, `python3` and
`pytest` in a command are this interpreter, with its packages (pytest among them) visible; Go and
Cargo run offline (GOPROXY=off, CARGO_NET_OFFLINE), their caches inside the program's directory; a crate's
runs start from its warm build (warm.py).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from functools import cache
from pathlib import Path

from ...source import go_std
from ..execution import hx_libs
from ..execution.sandbox import Sandbox, past_alternatives, real_python
from . import reason
from .facts import RepoFacts
from .warm import CARGO_ENV, warm_target
from .warm import copy_in as warm_copy_in

GO_ENV = "GOPROXY=off GOSUMDB=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod GOMAXPROCS=2"
GO_VARS = dict(kv.split("=", 1) for kv in GO_ENV.split())  # the same, for a process started here
# The JVM (javac's too) reserves address space by the machine's memory, not the sandbox's limit: these keep it under.
JAVA_ENV = (
    'JAVA_TOOL_OPTIONS="-Xmx512m -Xss4m -XX:ReservedCodeCacheSize=64m -XX:MaxMetaspaceSize=256m '
    '-XX:CompressedClassSpaceSize=64m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:CICompilerCount=1"'
)


# Debian points these at their programs through /etc/alternatives, which the sandbox does not have
ALTERNATIVES = ("cc", "c++", "gcc", "g++", "java", "javac", "jar", "ld")


@cache  # read once: every test run's program starts with these lines
def _resolved_tools() -> str:
    """Shell lines linking each of ALTERNATIVES that goes through /etc/alternatives to its program, in bin/."""
    links = {
        t: target
        for t in ALTERNATIVES
        if (p := shutil.which(t, path="/usr/bin:/bin")) and (target := past_alternatives(t)) != p
    }
    return "".join(f" && ln -s {shlex.quote(target)} bin/{t}" for t, target in links.items())


_PYTEST_TOKEN = """
import os
def pytest_sessionfinish(session, exitstatus):
    done = os.path.join(os.environ["HOME"], ".token_written")
    if exitstatus == 0 and session.testscollected and not os.path.exists(done) and os.environ.get("FERRY_TOKEN"):
        open(done, "w").close()
        os.write(3, os.environ["FERRY_TOKEN"].encode())
"""
# `pytest` and `python -m pytest` run with that hook (and say so: the shell then leaves the token to it). anyio's
# plugin (installed with vLLM's server) is left out where the repository never names anyio: it imports trio and
# anyio's streams at each start, 0.8 of pytest's 1.6 s on 2 cores, and a task's tests start dozens of times.
_PYTEST = (
    '#!/bin/sh\ntouch "$HOME/.pytest_used"\n'
    "grep -rqsI --include='*.py' --include='*.toml' --include='*.cfg' --include='*.ini' anyio . "
    '|| set -- -p no:anyio "$@"\n'
    'exec {py} -m pytest -p ferrylm_token "$@"\n'
)
_PYTHON = (
    '#!/bin/sh\nif [ "$1" = -m ] && [ "$2" = pytest ]; then shift 2; exec "$HOME/bin/pytest" "$@"; fi\nexec {py} "$@"\n'
)


_REASON = Path(reason.__file__).read_text()


def site_dirs() -> list[str]:
    """This interpreter's package directories as its path holds them (a venv's, and those its .pth
    files add, such as a system environment's under `make install DEVICE=system`): where pytest and the
    repositories' dependencies are found."""
    dirs = [
        sysconfig.get_paths()["purelib"],
        sysconfig.get_paths()["platlib"],
        *(p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages"))),
    ]
    return list(dict.fromkeys(os.path.realpath(d) for d in dirs if os.path.isdir(d)))


def site_binds() -> list[str]:
    """The package directories the sandbox must be shown (those under /usr it sees already): finding a
    repository's tasks and scoring replies to them run pytest from the same places."""
    return [d for d in [*filter(None, [_venv()]), *site_dirs()] if not d.startswith("/usr/")]


def _venv() -> str | None:
    """This interpreter's virtual environment, or None outside one."""
    return sys.prefix if sys.prefix != sys.base_prefix else None


def _interpreter() -> str:
    """What `python` and `pytest` run in the sandbox: a virtual environment's own python, whose pyvenv.cfg keeps
    the base interpreter's site-packages (and the pytest plugins installed there) out, as outside the sandbox;
    else the interpreter's real binary. (The call trace outside the sandbox runs sys.executable too.)"""
    return sys.executable if _venv() else real_python()[0]


def _tools() -> dict[str, str]:
    py = _interpreter()
    return {
        "ferrylm_token.py": _PYTEST_TOKEN,
        "ferrylm_reason.py": _REASON,  # a failed run's one line (reason.py)
        "pytest": _PYTEST.format(py=py),
        "python": _PYTHON.format(py=py),
    }


def _prelude(repo_in_sandbox: str, deps: str | None = None, tools: str | None = None, warm: str | None = None) -> str:
    """Shell lines that put `python`, `python3` and `pytest` (this interpreter, pytest with the token
    hook), the repository's toolchain (`tools`, its bin directory) and the compilers Debian links through
    /etc/alternatives first on PATH, set up Go's, Cargo's and the JVM's settings, then copy the repository and
    enter it. `deps`: the repository's test requirements; `warm`: a crate's warm build (warm.py)."""
    site = os.pathsep.join([*([deps] if deps else []), *site_dirs()])
    path, own = "$PWD/bin:$PATH", ""
    if tools:  # its compilers before Debian's alternatives
        path = f"$PWD/bin:{shlex.quote(tools)}:$PATH"
        own = f" && for t in {' '.join(ALTERNATIVES)}; do [ ! -e {shlex.quote(tools)}/$t ] || rm -f bin/$t; done"
    return (
        f"mkdir bin && mv pytest python bin/ && ln -s python bin/python3 && chmod +x bin/*{_resolved_tools()}{own} && "
        f'export PATH="{path}" PYTHONPATH="{site}:$PWD" PYTHONDONTWRITEBYTECODE=1 '
        f'GOCACHE="$PWD/.gocache" GOPATH="$PWD/.gopath" {GO_ENV} CARGO_HOME="$PWD/.cargo" {CARGO_ENV} {JAVA_ENV} && '
        + (
            warm_copy_in(repo_in_sandbox, warm)
            if warm
            else f"cp -r {shlex.quote(repo_in_sandbox)} r && chmod -R u+w r && cd r"
        )
        + ' && { [ ! -d src ] || export PYTHONPATH="$PWD/src:$PYTHONPATH"; } && export PYTHONPATH="$PWD:$PYTHONPATH"'
    )


# A repository's tests get more room than a benchmark's program; finding and scoring use the same.
LIMITS = {"memory_mb": 4096, "file_mb": 256, "nproc": 256}
# Where the repository is seen inside the sandbox (its own path may lie under /tmp, which the sandbox replaces).
REPO_IN_SANDBOX = "/ferrylm-repo"


def run(box: Sandbox, command: str, replaced: dict[str, str] | None = None, timeout_s: float | None = None):
    """The outcome of `command` on a copy of the sandbox's repository with `replaced` ({path in repo: text})
    written over it."""
    facts = box.facts
    # a standard-library package is run where it is (GOROOT is in the sandbox's /usr)
    seen_at = str(facts.path) if box.isolation == "unconfined" or facts.in_place else REPO_IN_SANDBOX
    return box.run(program(seen_at, command, replaced, box.deps, facts, box.warm), timeout_s)


def run_alternatives(box: Sandbox, command: str, alternatives: list[dict[str, str]], each_s: float):
    """The outcome of `command` tried on the copy with each of `alternatives` ({path in repo: text}) written
    over it in turn, in one sandbox run: passed as soon as one passes (a repository outside GOROOT). Each try
    has `each_s` seconds: one that hangs (a constant `popitem` in a loop that waits for it) fails alone
    and the next is still tried."""
    files = {f"alt_{k}_{i}": text for k, alt in enumerate(alternatives) for i, text in enumerate(alt.values())}
    limited = f"timeout -k 1 {each_s:g} sh -c {shlex.quote(command)}"
    tries = " || ".join(
        "{ " + "".join(f'cp "$HOME/alt_{k}_{i}" {shlex.quote(p)} && ' for i, p in enumerate(alt)) + f"{limited} ; }}"
        for k, alt in enumerate(alternatives)
    )
    seen_at = str(box.facts.path) if box.isolation == "unconfined" else REPO_IN_SANDBOX
    code = program(seen_at, tries, None, box.deps, box.facts, box.warm)
    code["files"] |= files
    return box.run(code, (each_s + 2) * len(alternatives) + 10)


def program(
    repo: str,
    command: str,
    replaced: dict[str, str] | None = None,
    deps: str | None = None,
    facts=None,
    warm: str | None = None,
) -> dict:
    """The sandbox program that copies the repository (seen at `repo`), writes `replaced` and runs `command` with
    the repository's toolchain (`facts`, a RepoFacts) and a crate's warm build (`warm`: crate_warm); a package of
    Go's standard library is not copied: `replaced` is laid over it by `go test -overlay`."""
    files = {f"replaced_{i}": text for i, text in enumerate((replaced or {}).values())} | _tools()
    package = facts.std_package if facts else None
    if package:
        # the compiler names a laid-over file by its replacement's path: keep the file's own name at its end
        over = {path: f"replaced_{i}_{Path(path).name}" for i, path in enumerate(replaced or {})}
        files |= {over[path]: files.pop(f"replaced_{i}") for i, path in enumerate(over)}
        files["overlay.in"] = json.dumps(
            {"Replace": {os.path.join(go_std.package_dir(package), p): f"@HERE@/{n}" for p, n in over.items()}}
        )
        start = _prelude_in_goroot(package, facts.toolchain.bin)
    else:
        place = "".join(f' && cp "$HOME/replaced_{i}" {shlex.quote(path)}' for i, path in enumerate(replaced or {}))
        start = _prelude(repo, deps, facts.toolchain.bin if facts else None, warm) + place
    script = (
        f"{start} && {{ {command} ; }} > $HOME/test_output.txt 2>&1; code=$?; "
        'if [ $code -eq 0 ] && [ ! -e "$HOME/.pytest_used" ]; then printf %s "$FERRY_TOKEN" >&3; elif [ $code -ne 0 ]; then '
        f"{real_python()[0]} -I -S $HOME/ferrylm_reason.py $HOME/test_output.txt > $HOME/reason.txt; fi; exit $code"
    )
    return {"files": files, "steps": [["/bin/sh", "-c", script]]}


@cache  # once per package and process; the directory itself is kept per Go version
def go_std_cache(package: str) -> str:
    """A build cache that the package's own tests warmed (a run then builds only what its overlay changed:
    0.4-0.9 s instead of 2-3 s cold for the demo's packages), prepared outside the sandbox; a failed warm-up leaves it empty (cold)."""

    def build(d: Path) -> None:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(d), "GOCACHE": str(d / "cache"), "GOPATH": str(d / "gopath")}
        env |= GO_VARS
        (d / "cache").mkdir()
        subprocess.run(
            ["go", "test", "-count=1", "."], cwd=go_std.package_dir(package), env=env, capture_output=True, timeout=600
        )
        shutil.rmtree(d / "gopath", ignore_errors=True)

    version = hx_libs.tool_version(["go", "env", "GOVERSION"])
    return os.path.join(hx_libs.prepared(f"{version}-{package.replace('/', '-')}", build, under="go-std"), "cache")


def crate_warm(facts: RepoFacts, unconfined: bool = False) -> str | None:
    """A Rust crate's warm build, for a sandboxed run to copy (warm.py); None for other languages, a cold crate or
    an unconfined run (it shares this machine's /tmp: no fixed path)."""
    if unconfined or facts.language != "rust":
        return None
    return warm_target(str(facts.path), facts.toolchain.bin)


def toolchain_binds(facts: list[RepoFacts]) -> list[str]:
    """What the sandbox must see, beside the repositories, to run their tests: each toolchain's directory outside
    /usr, a crate's warm build, and what Go's standard-library packages among them need."""
    roots = sorted({f.toolchain.root for f in facts if f.toolchain.root})
    warm = sorted({w for f in facts if (w := crate_warm(f))})
    return roots + warm + binds_for([f.std_package for f in facts if f.std_package])


def binds_for(packages: list[str]) -> list[str]:
    """What the sandbox must see, beside the repositories, to run the tests of Go's standard-library `packages`
    (import paths; facts.py): their warm build caches, and GOROOT where it lies outside /usr."""
    root = go_std.goroot()
    return [go_std_cache(p) for p in packages] + ([root] if packages and not root.startswith("/usr/") else [])


def _prelude_in_goroot(package: str, tools: str | None = None) -> str:
    """The prelude's tools (`tools`: the toolchain's bin directory), a copy of the package's warm build cache and
    the overlay file, then into the package's directory in GOROOT (read-only in the sandbox)."""
    warm = go_std_cache(package)
    path = f"$PWD/bin:{shlex.quote(tools)}:$PATH" if tools else "$PWD/bin:$PATH"
    return (
        f'mkdir bin && mv pytest python bin/ && chmod +x bin/* && export PATH="{path}" '
        f'GOCACHE="$PWD/.gocache" GOPATH="$PWD/.gopath" {GO_ENV} && '
        f"cp -r {shlex.quote(warm)} .gocache && chmod -R u+w .gocache && "
        'sed "s|@HERE@|$PWD|g" overlay.in > overlay.json && export GOFLAGS="$GOFLAGS -overlay=$PWD/overlay.json" && '
        f"cd {shlex.quote(go_std.package_dir(package))}"
    )


def sandbox(
    facts: RepoFacts, timeout_s: float, slots: int = 2, unconfined: bool = False, deps: str | None = None, shared=None
) -> Sandbox:
    """A sandbox that sees the repository of `facts` (read-only), this interpreter's packages and the repository's
    test requirements (`deps`, test_deps()); files up to 256 MB. `shared`: a semaphore whose slots it takes turns
    at with other repositories' sandboxes. run() asks it for the repository's facts (and a crate's warm build)."""
    binds = [] if unconfined else [f"{facts.path.resolve()}={REPO_IN_SANDBOX}", *site_binds()]
    binds += [] if unconfined else toolchain_binds([facts]) + ([deps] if deps else [])
    box = Sandbox(slots, timeout_s, **LIMITS, unconfined=unconfined, binds=tuple(binds), shared=shared)
    box.facts, box.deps = facts, deps
    box.warm = crate_warm(facts, unconfined)
    return box


class TestDepsError(RuntimeError):
    pass


def test_deps(requires: list[str] | tuple[str, ...] | None) -> str | None:
    """A folder holding the repository's test requirements (pip requirement strings), installed once per
    set with `pip install --target` from the index or wheel cache pip is set up with (PIP_INDEX_URL,
    PIP_FIND_LINKS, PIP_NO_INDEX); the sandbox and the call-tracing run put it first on the path."""
    if not requires:
        return None
    import hashlib

    key = hashlib.sha256("\n".join(sorted(requires)).encode()).hexdigest()[:16]

    def build(d: Path) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-input", "--target", str(d), *requires],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if done.returncode:
            said = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip() and "WARNING" not in ln]
            raise TestDepsError((said or [f"pip exit {done.returncode}"])[-1].strip())

    return hx_libs.prepared(key, build, under="test-deps")


def missing_tool(command: str) -> str | None:
    """The first word of the command when it is neither a known alias nor on PATH (a typo, a tool not installed)."""
    try:
        words = shlex.split(command)
    except ValueError as e:
        return f"cannot be read as a shell command ({e})"
    first = next((w for w in words if "=" not in w), "")
    if not first or first in ("python", "python3", "pytest", "cd", "env") or shutil.which(first):
        return None
    return f"{first!r} is not installed here (not on PATH)"
