"""A repository's test suite as read from its files: where its tests are, the command that runs them (given, or
detected: pytest for Python, `go test ./...` for Go, `cargo test --offline -q` for Rust), that command narrowed to the
tests that name a function and stopping at their first failure."""

from __future__ import annotations

import ast
import os
import re
import shlex
from pathlib import Path

from ...source.pairs import called_name, parse
from ...source.test_files import is_test_file

SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "node_modules", "build", "dist", ".tox", ".pytest_cache"}


def skip_dirs(language: str) -> set[str]:
    """Directories that hold no source of the repository's own to ask for (Cargo builds into target/; a crate's
    benches/ and examples/ are programs beside it, not its library)."""
    return SKIP_DIRS | {"target", "benches", "examples"} if language == "rust" else SKIP_DIRS


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
                is_test = n.endswith(
                    (".java",) if language == "java" else (".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx")
                ) and is_test_file(str(rel))
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


def detect_command(repo: Path, language: str, std_package: str | None = None) -> str | None:
    """The test command a repository of this language most likely runs, or None without tests (Java and
    C++: always None, their builds vary too much; the manifest's `test:` names it). `std_package`: the Go
    standard-library package `repo` is (facts.py)."""
    if language in ("java", "cpp"):
        return None
    if language == "rust":
        has_tests = (repo / "Cargo.toml").is_file() and (test_files(repo, language) or _rust_unit_tests(repo))
        return "cargo test --offline -q" if has_tests else None
    if not test_files(repo, language):
        return None
    if language == "go":  # a standard-library package: its own tests alone, never a cached result
        return "go test -count=1 ." if std_package else "go test ./..."
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
        tree = parse(text)
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
