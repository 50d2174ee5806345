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
Cargo run offline (GOPROXY=off, CARGO_NET_OFFLINE), their caches inside the program's directory.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from functools import cache
from pathlib import Path

from ...data import go_std
from ...data.holdout import is_test_file
from ...data.pairs import called_name
from ..execution import hx_libs
from ..execution.sandbox import Sandbox, _python, past_alternatives
from . import reason

GO_ENV = "GOPROXY=off GOSUMDB=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod GOMAXPROCS=2"
GO_VARS = dict(kv.split("=", 1) for kv in GO_ENV.split())  # the same, for a process started here
CARGO_ENV = "CARGO_NET_OFFLINE=true CARGO_INCREMENTAL=0 CARGO_BUILD_JOBS=2 CARGO_TERM_COLOR=never MALLOC_ARENA_MAX=2"
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


SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "node_modules", "build", "dist", ".tox", ".pytest_cache"}


def skip_dirs(language: str) -> set[str]:
    """Directories that hold no source of the repository's own (Cargo builds into target/)."""
    return SKIP_DIRS | {"target"} if language == "rust" else SKIP_DIRS


def test_files(repo: Path, language: str) -> list[str]:
    """The repository's test files, relative to its root (Rust: its integration tests, under tests/)."""
    found = []
    for dirpath, dirnames, names in os.walk(repo):
        dirnames[:] = sorted(d for d in dirnames if d not in skip_dirs(language) and not d.startswith("."))
        for n in sorted(names):
            rel = Path(dirpath, n).relative_to(repo)
            if language == "python":
                is_test = (n.startswith("test_") or n.endswith("_test.py")) and n.endswith(".py")
            elif language == "rust":
                is_test = n.endswith(".rs") and "tests" in rel.parts[:-1]
            elif language in ("java", "cpp"):
                is_test = n.endswith((".java",) if language == "java" else (".cc", ".cpp", ".cxx")) and is_test_file(
                    str(rel)
                )
            else:
                is_test = n.endswith("_test.go")
            if is_test:
                found.append(str(rel))
    return found


def _rust_unit_tests(repo: Path) -> bool:
    return any(
        "#[test]" in p.read_text(errors="replace")
        for p in repo.rglob("*.rs")
        if "target" not in p.relative_to(repo).parts
    )


def detect_command(repo: Path, language: str) -> str | None:
    """The test command a repository of this language most likely runs, or None without tests (Java and
    C++: always None, their builds vary too much; the manifest's `test:` names it)."""
    if language in ("java", "cpp"):
        return None
    if language == "rust":
        has_tests = (repo / "Cargo.toml").is_file() and (test_files(repo, language) or _rust_unit_tests(repo))
        return "cargo test --offline -q" if has_tests else None
    if not test_files(repo, language):
        return None
    if language == "go":  # a standard-library package: its own tests alone, never a cached result
        return "go test -count=1 ." if go_std.std_package(repo) else "go test ./..."
    try:
        import pytest  # noqa: F401 — pytest runs unittest suites too

        return "pytest -q -p no:cacheprovider"
    except ImportError:
        return "python -m unittest discover -q"


AUTOLOAD_OFF = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 "  # pytest without the plugins installed beside it


def pytest_command(command: str) -> bool:
    """Whether the command runs pytest (`pytest`, `python -m pytest`), behind environment assignments."""
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: the shell will say
        return False
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", words[0]):
        words.pop(0)
    return words[:1] == ["pytest"] or (words[:1] in (["python"], ["python3"]) and words[1:3] == ["-m", "pytest"])


def narrowed(command: str, language: str, files: list[str]) -> str:
    """The command limited to some test files (pytest) or a package (Go), when it is a detected one."""
    if language == "python" and pytest_command(command) and files:
        return f"{command} {' '.join(shlex.quote(f) for f in files)}"
    if language == "go" and command == "go test ./..." and files:
        dirs = sorted({"./" + str(Path(f).parent) if str(Path(f).parent) != "." else "." for f in files})
        return f"go test {' '.join(dirs)}"
    return command


def failing_fast(command: str, language: str) -> str:
    """The command stopping at its first failing test, for runs that only ask whether all pass (a stub's):
    a blanked function fails most of its tests, each of which would otherwise run (pytest's -x; Go's -failfast
    on a detected command)."""
    if language == "python":
        return f'export PYTEST_ADDOPTS="-x $PYTEST_ADDOPTS" && {command}'
    if language == "go" and command.startswith("go test "):
        return command.replace("go test ", "go test -failfast ", 1)
    return command


def mentions(tests: dict[str, str], fn) -> list[str]:
    """What of the tests (path → text) names the function (its last name), for the narrowed command: a Python
    file's top-level tests that name it (pytest node ids), else the files."""
    if fn.language == "go":  # a Go package's tests run together: the function's own package
        return [f for f in tests if Path(f).parent == Path(fn.file).parent]
    name = re.compile(rf"\b{re.escape(called_name(fn.name))}\b")
    named = [f for f, text in tests.items() if name.search(text)]
    if fn.language != "python":
        return named
    return [node for f in named for node in _test_nodes(f, tests[f], name)]


def _test_nodes(file: str, text: str, name: re.Pattern) -> list[str]:
    """The file's top-level tests (test functions, Test* or TestCase classes) that name the function, as
    pytest node ids; the whole file when the name is used outside them too (a module-level table, a fixture,
    a helper the tests share). A large suite (more_itertools: 10-20 s a file) then runs in a second."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return [file]
    nodes = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        decorators = [ast.get_source_segment(text, d) or "" for d in getattr(node, "decorator_list", ())]
        if not name.search("\n".join([ast.get_source_segment(text, node) or "", *decorators])):
            continue
        if not _is_test(node):
            return [file]
        nodes.append(f"{file}::{node.name}")
    return nodes or [file]


def _is_test(node: ast.stmt) -> bool:
    """A top-level node pytest collects by its defaults: test* functions, Test* classes, TestCase subclasses."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return node.name.startswith("test")
    if isinstance(node, ast.ClassDef):
        bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases]
        return node.name.startswith("Test") or any(b.endswith("TestCase") for b in bases)
    return False


# pytest's last hook writes the sandbox's token once the session ended with every test passed, so a body
# that ends the process early with status 0 (os._exit(0) inside a test) cannot pass.
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
    return sys.executable if _venv() else _python()[0]


def _tools() -> dict[str, str]:
    py = _interpreter()
    return {
        "ferrylm_token.py": _PYTEST_TOKEN,
        "ferrylm_reason.py": _REASON,  # a failed run's one line (reason.py)
        "pytest": _PYTEST.format(py=py),
        "python": _PYTHON.format(py=py),
    }


def _prelude(repo_in_sandbox: str, deps: str | None = None) -> str:
    """Shell lines that put `python`, `python3` and `pytest` (this interpreter, pytest with the token
    hook) and the compilers Debian links through /etc/alternatives first on PATH, set up Go's, Cargo's and
    the JVM's settings, then copy the repository and enter it. `deps`: the repository's test requirements."""
    site = os.pathsep.join([*([deps] if deps else []), *site_dirs()])
    return (
        f"mkdir bin && mv pytest python bin/ && ln -s python bin/python3 && chmod +x bin/*{_resolved_tools()} && "
        f'export PATH="$PWD/bin:$PATH" PYTHONPATH="{site}:$PWD" PYTHONDONTWRITEBYTECODE=1 '
        f'GOCACHE="$PWD/.gocache" GOPATH="$PWD/.gopath" {GO_ENV} CARGO_HOME="$PWD/.cargo" {CARGO_ENV} {JAVA_ENV} && '
        f"cp -r {shlex.quote(repo_in_sandbox)} r && chmod -R u+w r && cd r && "
        '{ [ ! -d src ] || export PYTHONPATH="$PWD/src:$PYTHONPATH"; } && export PYTHONPATH="$PWD:$PYTHONPATH"'
    )


# A repository's tests get more room than a benchmark's program; finding and scoring use the same.
LIMITS = {"memory_mb": 4096, "file_mb": 256, "nproc": 256}
# Where the repository is seen inside the sandbox (its own path may lie under /tmp, which the sandbox replaces).
REPO_IN_SANDBOX = "/ferrylm-repo"


def run(box: Sandbox, repo: Path, command: str, replaced: dict[str, str] | None = None, timeout_s: float | None = None):
    """The outcome of `command` on a copy of `repo` with `replaced` ({path in repo: text}) written over it."""
    # a standard-library package is run where it is (GOROOT is in the sandbox's /usr)
    seen_at = str(repo) if box.isolation == "unconfined" or go_std.std_package(repo) else REPO_IN_SANDBOX
    return box.run(program(seen_at, command, replaced, getattr(box, "deps", None)), timeout_s)


def run_alternatives(box: Sandbox, repo: Path, command: str, alternatives: list[dict[str, str]], each_s: float):
    """The outcome of `command` tried on the copy with each of `alternatives` ({path in repo: text}) written
    over it in turn, in one sandbox run: passed as soon as one passes (a repository outside GOROOT). Each try
    has `each_s` seconds: one that hangs (a constant `popitem` in a loop that waits for it) fails alone
    and the next is still tried."""
    files = {f"alt_{k}_{i}": text for k, alt in enumerate(alternatives) for i, text in enumerate(alt.values())}
    limited = f"timeout -k 1 {each_s:g} sh -c {shlex.quote(command)}"
    tries = " || ".join(
        "{ " + "".join(f"cp ../alt_{k}_{i} {shlex.quote(p)} && " for i, p in enumerate(alt)) + f"{limited} ; }}"
        for k, alt in enumerate(alternatives)
    )
    seen_at = str(repo) if box.isolation == "unconfined" else REPO_IN_SANDBOX
    code = program(seen_at, tries, None, getattr(box, "deps", None))
    code["files"] |= files
    return box.run(code, (each_s + 2) * len(alternatives) + 10)


def program(repo: str, command: str, replaced: dict[str, str] | None = None, deps: str | None = None) -> dict:
    """The sandbox program that copies the repository (seen at `repo`), writes `replaced` and runs `command`;
    a package of Go's standard library is not copied: `replaced` is laid over it by `go test -overlay`."""
    files = {f"replaced_{i}": text for i, text in enumerate((replaced or {}).values())} | _tools()
    if package := go_std.std_package(repo):
        # the compiler names a laid-over file by its replacement's path: keep the file's own name at its end
        over = {path: f"replaced_{i}_{Path(path).name}" for i, path in enumerate(replaced or {})}
        files |= {over[path]: files.pop(f"replaced_{i}") for i, path in enumerate(over)}
        files["overlay.in"] = json.dumps(
            {"Replace": {os.path.join(go_std.package_dir(package), p): f"@HERE@/{n}" for p, n in over.items()}}
        )
        start = _prelude_in_goroot(package)
    else:
        place = "".join(f" && cp ../replaced_{i} {shlex.quote(path)}" for i, path in enumerate(replaced or {}))
        start = _prelude(repo, deps) + place
    script = (
        f"{start} && {{ {command} ; }} > $HOME/test_output.txt 2>&1; code=$?; "
        'if [ $code -eq 0 ] && [ ! -e "$HOME/.pytest_used" ]; then printf %s "$FERRY_TOKEN" >&3; elif [ $code -ne 0 ]; then '
        f"{_python()[0]} -I -S $HOME/ferrylm_reason.py $HOME/test_output.txt > $HOME/reason.txt; fi; exit $code"
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


def binds_for(roots: list[str]) -> list[str]:
    """What the sandbox must see, beside the repositories, to run the tests of these roots: the warm caches
    of Go's standard-library packages, and GOROOT where it lies outside /usr."""
    packages = [p for r in roots if (p := go_std.std_package(r))]
    root = go_std.goroot()
    return [go_std_cache(p) for p in packages] + ([root] if packages and not root.startswith("/usr/") else [])


def _prelude_in_goroot(package: str) -> str:
    """The prelude's tools, a copy of the package's warm build cache and the overlay file, then into the
    package's directory in GOROOT (read-only in the sandbox)."""
    warm = go_std_cache(package)
    return (
        f'mkdir bin && mv pytest python bin/ && chmod +x bin/* && export PATH="$PWD/bin:$PATH" '
        f'GOCACHE="$PWD/.gocache" GOPATH="$PWD/.gopath" {GO_ENV} && '
        f"cp -r {shlex.quote(warm)} .gocache && chmod -R u+w .gocache && "
        'sed "s|@HERE@|$PWD|g" overlay.in > overlay.json && export GOFLAGS="$GOFLAGS -overlay=$PWD/overlay.json" && '
        f"cd {shlex.quote(go_std.package_dir(package))}"
    )


def sandbox(repo: Path, timeout_s: float, slots: int = 2, unconfined: bool = False, deps: str | None = None) -> Sandbox:
    """A sandbox that sees `repo` (read-only), this interpreter's packages and the repository's test
    requirements (`deps`, test_deps()); files up to 256 MB."""
    binds = [f"{repo.resolve()}={REPO_IN_SANDBOX}", *site_binds()]
    binds += binds_for([str(repo)]) + ([deps] if deps else [])
    box = Sandbox(slots, timeout_s, **LIMITS, unconfined=unconfined, binds=tuple(binds) if not unconfined else ())
    box.deps = deps
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
