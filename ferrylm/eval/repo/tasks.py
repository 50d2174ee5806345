"""Tasks from a repository and its own tests: functions whose tests are proven to check them.

For each function with a body (documented or not: asked with its file shown, a function needs no doc comment):
1. the repository's tests must pass as checked out, in the sandbox, `runs` times (a suite that fails is
   skipped with its reason; one that passes only sometimes makes every task prove stability alone);
2. a cheap first look at which functions the tests call at all (trace.py: each function's first start for Python, Go's coverage
   profile; none for Rust), outside the sandbox on a copy;
3. the tests that name the function (pytest: the top-level tests naming it; Go: its package; Rust: the crate's) pass with the original
   body (`runs` times when the suite flaked), and fail with each of two blanked bodies — one that
   raises and one that returns a wrong value of the right type (functions.py). A test that passes on
   either is not proof, and the function is no task;
4. those tests also fail every constant body a broken model writes first (`return None`, `return False`, Go's
   zero values, …: functions.constant_stubs); one that passes drops the function, naming the body;
5. each task keeps its wall-clock limit: a multiple of its reference run.
Every function left out is counted under its reason, and every function considered is listed with its verdict;
the repository's tasks go to a JSONL file.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ...errors import FerryError
from ...log import get_logger
from ...manifest import write_text_atomic
from ...source.pairs import without_accessor
from ...source.spans import LANGUAGES, Function, functions, same_named
from ...source.test_files import is_test_file
from ..progress import Progress
from . import runner, suite, task_cache, trace
from .facts import RepoFacts, facts_of
from .proof import Verdict, prove

log = get_logger("eval")
SUITE_TIMEOUT_S = 600.0
MAX_DESELECTED = 5  # failing tests left out before a repository is called broken


class RepoTaskError(FerryError, ValueError):
    """A repository cannot be read for tasks as asked (a missing path, an unknown language)."""


@dataclass
class RepoTasks:
    repo: str
    language: str
    command: str | None
    tasks: list[dict] = field(default_factory=list)
    skipped: str | None = None  # why the whole repository gave no task
    dropped: Counter = field(default_factory=Counter)  # function -> no task, by reason
    suite_s: float | None = None
    deselected: list[str] = field(default_factory=list)  # pytest tests (or files) that failed as checked out, left out
    considered: list[dict] = field(default_factory=list)  # each function looked at: id, verdict, reason, detail
    toolchain: str | None = None  # what the sandbox ran the tests with (toolchain.py)

    def summary(self) -> dict:
        return {
            "repo": self.repo,
            "language": self.language,
            "command": self.command,
            "tasks": len(self.tasks),
            "skipped": self.skipped,
            "dropped": dict(self.dropped),
            "suite_s": self.suite_s,
            "deselected_tests": self.deselected,
            "considered": len(self.considered),
            "toolchain": self.toolchain,
        }

    def as_json(self) -> dict:
        return {**asdict(self), "dropped": dict(self.dropped)}

    def drop(self, fn: Function, verdict: Verdict) -> None:
        self.dropped[verdict.reason] += 1
        self.considered.append({"id": fn.id, "verdict": "dropped", "reason": verdict.reason, "detail": verdict.detail})

    @classmethod
    def from_json(cls, d: dict) -> RepoTasks:
        return cls(**{**d, "dropped": Counter(d["dropped"])})


def language_of(repo: Path) -> str:
    counts = Counter(LANGUAGES[p.suffix] for p in repo.rglob("*") if p.suffix in LANGUAGES and p.is_file())
    if not counts:
        raise RepoTaskError(f"{repo}: no Python, Go, Rust, Java or C++ files (repository tasks read those languages)")
    return counts.most_common(1)[0][0]


MAX_TASK_LINES = 40  # a body longer than this is no task (the data stage's limit): listed with that reason
SAME_NAME = "two or more functions of its name in its file (overloads): no id tells them apart"


def suffixes(language: str) -> list[str]:
    """The file names a language's functions are read from. `.h` alone says neither C nor C++: in a C++ repository
    it is C++ (a header-only library's functions live there: picojson.h, tinyxml2.h)."""
    own = [suffix for suffix, lang in LANGUAGES.items() if lang == language]
    return [*own, ".h"] if language == "cpp" else own


def _source_files(repo: Path, language: str) -> list[tuple[str, str]]:
    """(path in the repository, text) of each source file whose functions may be tasks: test code (test files,
    helpers under tests/ or testing/) never is."""
    tests = set(suite.test_files(repo, language))
    found = []
    for path in sorted(p for suffix in suffixes(language) for p in repo.rglob(f"*{suffix}")):
        rel = str(path.relative_to(repo))
        if (
            rel in tests
            or is_test_file(rel)
            or any(part.startswith(".") or part in suite.skip_dirs(language) for part in Path(rel).parts[:-1])
        ):
            continue
        try:
            found.append((rel, path.read_bytes().decode()))  # line ends as written: a task's offsets count bytes
        except (UnicodeDecodeError, OSError):
            continue
    return found


def source_functions(repo: Path, language: str, max_lines: int = MAX_TASK_LINES) -> list[Function]:
    # a tested one-liner is a task too, and a function without a doc comment (asked with its file shown)
    return [
        f
        for rel, text in _source_files(repo, language)
        for f in functions(text, rel, language, min_lines=1, max_lines=max_lines, documented=False)
    ]


def same_named_ids(repo: Path, language: str) -> list[str]:
    """The ids (file::name) two or more functions of one file share: overloads, no task (listed with the reason)."""
    return [f"{rel}::{name}" for rel, text in _source_files(repo, language) for name in same_named(text, language)]


def find_tasks(
    repo: str | Path,
    language: str | None = None,
    command: str | None = None,
    only: set[str] | None = None,
    runs: int = 3,
    unconfined: bool = False,
    workers: int = 2,
    limit: int | None = None,
    suite_timeout_s: float = SUITE_TIMEOUT_S,
    test_requires: list[str] | None = None,
    cache: bool = False,
    shared=None,
) -> RepoTasks:
    """The tasks of one repository (see the module's docstring). `only`: function ids (file::name) to
    consider; `limit`: stop after this many tasks; `suite_timeout_s`: the whole suite's time limit;
    `test_requires`: what its tests need installed (pip requirements); `cache`: an answer found before to
    the same question on the same files is read back, a new one kept (task_cache.py); `shared`: a semaphore of slots
    the repositories proved at once take turns at (`workers` is then this repository's most at once)."""
    repo = Path(repo).resolve()
    if not repo.is_dir():
        raise RepoTaskError(f"{repo}: not a directory")
    language = language or language_of(repo)
    if language not in LANGUAGES.values():
        raise RepoTaskError(f"{repo}: repository tasks read Python, Go, Rust, Java and C++, not {language!r}")
    facts = facts_of(repo, language, command)  # decided here once, carried through the finding
    if facts.toolchain.other is not None:
        log.warning("repo tasks: %s: %s", repo.name, facts.toolchain.other)
    asked = {
        "command": facts.command,
        "test_requires": sorted(test_requires or []),
        "only": sorted(only) if only is not None else None,
        "limit": limit,
        "runs": runs,
        "suite_timeout_s": suite_timeout_s,
        "unconfined": unconfined,
        "functions": "with and without a doc comment",  # what was considered (an answer kept before: documented only)
        "toolchain": facts.toolchain.runs,  # another cargo or go: another answer
    }
    if not cache:
        return _find(facts, asked, workers, shared)

    def answer() -> dict:
        found = _find(facts, asked, workers, shared)
        if found.skipped:
            raise task_cache.NotKept(found.as_json())
        return found.as_json()

    out = RepoTasks.from_json(task_cache.kept(repo, language, asked, answer))
    if out.tasks and test_requires:  # kept on another run: the requirements' folder of this machine
        deps = runner.test_deps(test_requires)
        out.tasks = [t | {"test_deps": deps} for t in out.tasks]
    return out


def _find(facts: RepoFacts, asked: dict, workers: int, shared=None) -> RepoTasks:
    """find_tasks' work on the repository of `facts`, for the question `asked` (the cache's key)."""
    repo, language = facts.path, facts.language
    command, runs, limit = asked["command"], asked["runs"], asked["limit"]
    only = None if asked["only"] is None else set(asked["only"])
    test_requires, suite_timeout_s, unconfined = (
        asked["test_requires"] or None,
        asked["suite_timeout_s"],
        asked["unconfined"],
    )
    out = RepoTasks(repo.name, language, command, skipped=_unrunnable(language, command))
    out.toolchain = asked["toolchain"]
    if out.skipped:
        return out
    candidates = [f for f in source_functions(repo, language) if only is None or f.id in only]
    ids = {f.id for f in candidates}
    for f in source_functions(repo, language, max_lines=10**6):  # every function is listed, the long ones too
        if f.id not in ids and (only is None or f.id in only):
            out.drop(f, Verdict(f"its body is longer than {MAX_TASK_LINES} lines"))
    for fid in same_named_ids(repo, language):
        if only is None or fid in only:
            out.dropped[SAME_NAME] += 1
            out.considered.append({"id": fid, "verdict": "dropped", "reason": SAME_NAME, "detail": None})
    if not candidates:
        out.skipped = f"no function with a body of 1-{MAX_TASK_LINES} lines" + (
            " among those asked for" if only else ""
        )
        return out
    try:
        deps = runner.test_deps(test_requires)
    except runner.TestDepsError as e:
        out.skipped = f"its test requirements ({' '.join(test_requires or [])}) could not be installed: {e}"
        return out
    log.info(
        "repo tasks: %s: %d functions; its suite first (%s, %d runs%s)",
        repo.name,
        len(candidates),
        command,
        runs,
        f", with {out.toolchain}" if out.toolchain else "",
    )
    with runner.sandbox(facts, suite_timeout_s, workers, unconfined, deps, shared) as box:
        suite = _suite_runs(box, runs, out)
        if suite is None:
            return out
        # without the tests left out
        called = trace.called(facts, out.command, out.repo, suite_timeout_s, deps)
        for f in candidates if called is not None else []:
            if not _in(f, called):
                out.drop(f, Verdict("no test calls it"))
        candidates = [f for f in candidates if called is None or _in(f, called)]
        _prove_all(box, candidates, 1 if suite == runs else runs, workers, limit, out)
    return out


def _prove_all(box, candidates: list[Function], each: int, workers: int, limit, out: RepoTasks) -> None:
    """Each candidate proved (or dropped with its reason) into `out`, until `limit` tasks."""
    repo = box.facts.path
    left_out = set(out.deselected)  # the suite's failing tests and files: never what a task runs
    tests = {
        f: (repo / f).read_text(errors="replace") for f in suite.test_files(repo, out.language) if f not in left_out
    }
    progress = Progress(f"repo tasks: {repo.name}: functions proved", len(candidates))
    with ThreadPoolExecutor(workers) as pool:  # as many functions at once as the sandbox has slots
        for at in range(0, len(candidates), 2 * workers):
            batch = candidates[at : at + 2 * workers]
            for fn, (task, verdict) in zip(
                batch, pool.map(lambda f: prove(box, f, out.command, each, tests, left_out), batch)
            ):
                if task:
                    out.tasks.append({"task_id": f"{repo.name}/{fn.id}", "repo": str(repo), **task})
                    out.considered.append({"id": fn.id, "verdict": "task", "reason": None, "detail": None})
                else:
                    out.drop(fn, verdict)
                progress.note = f"{len(out.tasks)} tasks kept" + (f" of {limit} asked" if limit else "")
                progress.tick()
            if limit and len(out.tasks) >= limit:
                out.tasks = out.tasks[:limit]
                return


_NAME_IT = "`--test` for ferrylm eval repo-tasks, `test:` in a data manifest"


def _in(fn: Function, called: set[str]) -> bool:
    """Whether the first look saw `fn` called. Go's coverage names a method without its receiver's type:
    `SliceIndex.Key` counts as called when any `Key` of its file was (the blanking then decides); Python's
    `Class.x.setter` when `Class.x` was."""
    if fn.language == "python":  # a property's setter runs under its getter's name (co_qualname)
        return fn.id in called or f"{fn.file}::{without_accessor(fn.name)}" in called
    return fn.id in called or (fn.language == "go" and f"{fn.file}::{fn.name.rsplit('.', 1)[-1]}" in called)


def _unrunnable(language: str, command: str | None) -> str | None:
    """Why a repository's tests cannot be run as asked, or None."""
    if command is None and language in ("java", "cpp"):
        return f"a {language} repository's test command is not detected: name it ({_NAME_IT})"
    if command is None:
        return (
            "no tests found (no test_*.py / *_test.go files, no Cargo.toml with #[test] or tests/); "
            f"name its test command ({_NAME_IT})"
        )
    if why := runner.missing_tool(command):
        return f"its test command {command!r}: {why}"
    return None


def _suite_runs(box, runs: int, out: RepoTasks) -> int | None:
    """How many of `runs` runs of the whole suite passed; None (and the reason) when none did. A pytest
    test that fails in a run is deselected on its own (at most MAX_DESELECTED, each counted) and the runs
    start again without it, so one flaky or broken test does not cost the repository or its file. A pytest
    suite that never passes and names no failing test is tried once more without the plugins installed beside
    pytest: one the project never asked for (pytest-benchmark against its own `benchmark` fixture) must not
    cost it its tasks."""
    asked, repo = out.command, box.facts.path
    passed, first_failure = _runs(box, runs, out)
    if passed == 0 and not out.deselected and suite.pytest_command(asked) and suite.AUTOLOAD_OFF not in asked:
        out.command = suite.AUTOLOAD_OFF + asked
        passed, _ = _runs(box, runs, out)
        if passed:
            log.info("repo tasks: %s: its tests pass only without the pytest plugins installed here: run so", repo.name)
        else:  # as the first runs left it: nothing deselected, the command as asked
            out.command, out.deselected, out.skipped, passed = asked, [], None, 0
    if passed is None:
        return None
    if not passed:
        out.skipped = _not_passing(repo, out.language, asked, first_failure or "", out.deselected)
        return None
    if out.deselected:
        log.info("repo tasks: %s: tests that failed as checked out, left out: %s", repo.name, ", ".join(out.deselected))
    if passed < runs:
        log.info(
            "repo tasks: %s: the suite passed %d of %d runs; each task's tests must pass %d times alone",
            repo.name,
            passed,
            runs,
            runs,
        )
    return passed


_REQUIRES_HINT = "name it with --test-requires (test_requires: in a data manifest)"


def _not_passing(repo: Path, language: str, asked: str, failure: str, deselected: list[str]) -> str:
    """The skip reason of a suite that never passed: its first error, the command that shows it on the
    repository's own code (Python: its src/ and root first on the path, as in the sandbox), and a hint."""
    hint = ""
    if "ModuleNotFoundError" in failure:
        hint = f"; a test dependency missing here? {_REQUIRES_HINT}"
    elif m := re.search(r"unrecognized arguments: (--?[\w-]+)", failure):
        hint = f"; {m.group(1)} is a pytest plugin's option its configuration names? {_REQUIRES_HINT}"
    path = ("src:." if (repo / "src").is_dir() else ".") if language == "python" else ""
    see = f"cd {repo} && {'PYTHONPATH=' + path + ' ' if path else ''}{asked}"
    left = f"; without {', '.join(deselected)} no test passes either" if deselected else ""
    return f"its tests do not pass as checked out ({asked}): {failure} (to see it: {see}){left}{hint}"


def _runs(box, runs: int, out: RepoTasks) -> tuple[int | None, str | None]:
    """(passed runs of `runs`, the first failure) of out.command, deselecting failing pytest tests as they
    show; None passed (and out.skipped) when the first run timed out."""
    passed, tries, first_failure, asked = 0, 0, None, out.command
    while tries < runs:
        t0 = time.perf_counter()
        status = runner.run(box, out.command).status
        out.suite_s = max(out.suite_s or 0, round(time.perf_counter() - t0, 2))
        tries += 1
        if status == "timed out" and not passed:
            out.skipped = f"its tests did not finish within {box.timeout_s:g} s as checked out ({out.command})"
            return None, status
        passed += status == "passed"
        first_failure = first_failure or (status if status != "passed" else None)
        test = _failed_test(status)
        if status != "passed" and test and suite.pytest_command(asked) and len(out.deselected) < MAX_DESELECTED:
            _leave_out(out, asked, test)
            passed, tries = 0, 0  # the suite without it, from the start
    return passed, first_failure


def _leave_out(out: RepoTasks, asked: str, test: str) -> None:
    """Deselect the test that failed; a second failing test of the same file leaves the whole file out
    (a test module broken here, as a benchmark file whose plugin is missing)."""
    file = test.split("::", 1)[0]
    if any(t.split("::", 1)[0] == file for t in out.deselected):
        out.deselected = [t for t in out.deselected if t.split("::", 1)[0] != file] + [file]
    else:
        out.deselected.append(test)
    out.command = asked + "".join(
        f" --deselect {shlex.quote(t)}" if "::" in t else f" --ignore={shlex.quote(t)}" for t in out.deselected
    )


def _failed_test(status: str) -> str | None:
    """The pytest node id the failure's reason names first (reason.py: `first failed: tests/x.py::test_y`), or
    the test file that failed to collect (`first failed: tests/x.py`): left out as a file."""
    m = re.search(r"first failed: (\S+?::\S+?|\S+?\.py)(?:;|$)", status)
    return m.group(1) if m else None


def write_tasks(
    repos: list[str],
    output: str | Path,
    command: str | None = None,
    runs: int = 3,
    limit: int | None = None,
    workers: int = 2,
    unconfined: bool = False,
    suite_timeout_s: float = SUITE_TIMEOUT_S,
    test_requires: list[str] | None = None,
) -> list[RepoTasks]:
    """`ferrylm eval repo-tasks`: every repository's tasks into one JSONL file (written whole, at the
    end), each repository's summary into `<output>.log.jsonl`, each function considered (its verdict and
    reason) into `<output>.functions.jsonl`."""
    if runs < 1 or workers < 1 or (limit is not None and limit < 1):
        raise RepoTaskError(f"--runs, --workers and --limit must be >= 1 (got {runs}, {workers}, {limit})")
    missing = [r for r in repos if not Path(r).is_dir()]
    if missing:
        raise FileNotFoundError(f"repo-tasks: {missing[0]} is not a directory")
    found = [
        find_tasks(
            r,
            command=command,
            runs=runs,
            workers=workers,
            unconfined=unconfined,
            limit=limit,
            suite_timeout_s=suite_timeout_s,
            test_requires=test_requires,
        )
        for r in repos
    ]
    for r in found:
        if r.skipped:
            log.warning("repo tasks: %s skipped: %s", r.repo, r.skipped)
    output = Path(output)
    write_text_atomic(output, "".join(json.dumps(t) + "\n" for r in found for t in r.tasks))
    write_text_atomic(
        output.with_name(output.name + ".log.jsonl"), "".join(json.dumps(r.summary()) + "\n" for r in found)
    )
    write_text_atomic(
        output.with_name(output.name + ".functions.jsonl"),
        "".join(json.dumps({"repo": r.repo, **c}) + "\n" for r in found for c in r.considered),
    )
    return found
