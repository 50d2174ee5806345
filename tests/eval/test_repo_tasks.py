"""Tasks from small real repositories made here, run against their own tests in the sandbox: the reference
body passes, blanked and wrong bodies fail, a test that only expects an exception is no proof, a flaky
test is dropped, a hostile body is contained and the checkout stays as it was."""

import hashlib
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from ferrylm.data.corpus import ManifestError, load_manifest
from ferrylm.eval.repo import find_tasks, score
from ferrylm.eval.repo.functions import stub
from ferrylm.eval.repo.tasks import source_functions
from ferrylm.source import go_std
from ferrylm.source.spans import LANGUAGES, functions, same_named

LIB = '''
def add(a, b):
    """Add two numbers and return the sum."""
    total = a + b
    return total


def words(text):
    """Split a text into its lower-case words."""
    parts = text.lower().split()
    return parts


def only_raises_tested(x):
    """Halve a number, refusing odd ones."""
    if x % 2:
        raise ValueError(x)
    return x // 2


def untested(x):
    """Nothing in the suite calls this one."""
    y = x * 3
    return y


class Counter:
    def bump(self, by):
        """Raise the count by a step."""
        self.n = getattr(self, "n", 0) + by
        return None
'''
TESTS = """
import pytest
from pkg import add, words, only_raises_tested, Counter

def test_add():
    assert add(2, 3) == 5

def test_words():
    assert words("A b") == ["a", "b"]

def test_only_raises():
    with pytest.raises(Exception):
        only_raises_tested(3)

def test_counter():
    c = Counter()
    c.bump(2)
    assert c.n == 2
"""


def _python_repo(root: Path, lib: str = LIB, tests: str = TESTS) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text(lib)
    (root / "tests").mkdir()
    (root / "tests" / "test_pkg.py").write_text(tests)
    (root / "tests" / "helpers.py").write_text(
        'def pairs(n):\n    """Pairs for the tests."""\n    out = []\n'
        "    for i in range(n):\n        out.append((i, i))\n    return out\n"
    )
    return root


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def py_tasks(tmp_path_factory):
    repo = _python_repo(tmp_path_factory.mktemp("pyrepo") / "pyrepo")
    found = find_tasks(repo)
    path = repo.parent / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in found.tasks))
    return repo, found, path


@pytest.mark.integration
def test_python_tasks_are_the_functions_their_tests_check(py_tasks):
    repo, found, _ = py_tasks
    assert found.command.startswith("pytest") and found.skipped is None
    assert sorted(t["name"] for t in found.tasks) == ["Counter.bump", "add", "words"]
    # a test that expects any exception passes on a raising stub; nobody calls `untested`
    assert found.dropped == {"its tests pass with a raising body": 1, "no test calls it": 1}
    # the tests' own helpers (under tests/) are test code: never a task, not even a candidate
    assert "pairs" not in {f.name for f in source_functions(repo, "python")}
    add = next(t for t in found.tasks if t["name"] == "add")
    assert (
        add["tests"] == ["tests/test_pkg.py::test_add"]  # only the tests that name it run
        and add["timeout_s"] >= 10
        and add["prompt"].startswith("def add(a, b):")
    )
    kept = type(found).from_json(json.loads(json.dumps(found.as_json())))  # what the cache writes and reads
    assert kept == found


def _samples(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps({"task_id": t, "completion": c}) + "\n" for t, c in rows))
    return path


def _passed(repo: Path, found, tmp_path: Path, rows) -> list[bool]:
    """Each (task id, reply) of `rows` scored against the tasks `found`; the checkout must stay as it was."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in found.tasks))
    before = _digest(repo)
    out = score(tasks, _samples(tmp_path / "s.jsonl", rows))
    assert _digest(repo) == before
    return [json.loads(line)["passed"] for line in Path(out["results"]).read_text().splitlines()]


def test_found_tasks_are_kept_and_found_again_when_anything_they_depend_on_changes(tmp_path, monkeypatch):
    """The cache's key: the files, the question asked; a skipped repository is never kept; a kept task takes
    this machine's requirements folder."""
    from ferrylm.eval.repo import tasks as tasks_mod

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    repo = _python_repo(tmp_path / "r")
    calls = []

    def fake_find(facts, asked, workers, shared=None):
        calls.append(asked["only"])
        out = tasks_mod.RepoTasks(
            facts.path.name, facts.language, asked["command"], dropped=Counter({"its tests flake": 1})
        )
        if asked["limit"] == 1:
            out.skipped = "its tests did not finish"
            return out
        out.tasks = [{"task_id": "r/pkg/__init__.py::add", "repo": str(repo), "test_deps": "/elsewhere"}]
        return out

    monkeypatch.setattr(tasks_mod, "_find", fake_find)
    monkeypatch.setattr(tasks_mod.runner, "test_deps", lambda requires: f"/here/{len(requires)}")
    first = find_tasks(repo, cache=True, test_requires=["six"])
    again = find_tasks(repo, cache=True, test_requires=["six"])
    assert len(calls) == 1 and again.as_json() == first.as_json()
    assert again.tasks[0]["test_deps"] == "/here/1" and again.dropped == Counter({"its tests flake": 1})
    find_tasks(repo, cache=True, test_requires=["six"], only={"pkg/__init__.py::add"})  # another question
    (repo / "tests" / "test_pkg.py").write_text(TESTS + "\n# edited\n")  # another repository
    find_tasks(repo, cache=True, test_requires=["six"])
    assert len(calls) == 3 and calls[1] == ["pkg/__init__.py::add"]
    (repo / "pkg" / "__pycache__").mkdir()
    (repo / "pkg" / "__pycache__" / "x.pyc").write_bytes(b"0")  # what a run leaves is not the repository
    find_tasks(repo, cache=True, test_requires=["six"])
    assert len(calls) == 3
    for _ in range(2):
        assert find_tasks(repo, cache=True, limit=1).skipped == "its tests did not finish"
    assert len(calls) == 5
    find_tasks(repo, test_requires=["six"])  # cache off: always found
    assert len(calls) == 6


@pytest.mark.integration
def test_python_scoring_passes_the_reference_and_fails_wrong_bodies(py_tasks, tmp_path):
    repo, found, tasks = py_tasks
    before = _digest(repo)
    add, words, bump = (f"pyrepo/pkg/__init__.py::{n}" for n in ("add", "words", "Counter.bump"))
    rows = [
        (add, "```python\n    total = a + b\n    return total\n```"),  # the reference, fenced
        (add, 'Sure:\n```python\ndef add(a, b):\n    """Add."""\n    return b + a\n```\nIt adds.'),  # whole function
        (add, "return a - b"),  # plausible, wrong
        (add, "import os\nos._exit(0)"),  # ends the tests early, status 0
        (words, "return text.split()"),  # wrong case
        (
            bump,
            f"import shutil\nshutil.rmtree({str(repo)!r}, ignore_errors=True)\nshutil.rmtree('/ferrylm-repo', "
            "ignore_errors=True)\nself.n = getattr(self, 'n', 0) + by",
        ),  # hostile, then right
    ]
    out = score(tasks, _samples(tmp_path / "s.jsonl", rows))
    results = [json.loads(line) for line in Path(out["results"]).read_text().splitlines()]
    assert [r["passed"] for r in results] == [True, True, False, False, False, True], results
    assert "exited before the tests finished" in results[3]["result"]
    assert "1 failed" in results[2]["result"]
    assert out["pass@1"] == pytest.approx((2 / 4 + 0 + 1) / 3) and out["isolation"] == ["bwrap+uid"]
    assert _digest(repo) == before  # the checkout is untouched


@pytest.mark.integration
def test_scoring_shows_the_sandbox_the_packages_finding_showed_it(tmp_path, monkeypatch):
    """A test requirement found on this interpreter's path outside /usr (a user's or a venv's site-packages):
    a reply scored through the eval's track runs with it, as the finding did."""
    from ferrylm.config.loader import load_config
    from ferrylm.eval.repo import runner
    from ferrylm.eval.repo.track import Asking, _track
    from ferrylm.eval.tasks.benchmark import execute

    extra = tmp_path / "user" / "site-packages" / "probe_requirement"
    extra.mkdir(parents=True)
    (extra / "__init__.py").write_text("FACTOR = 1\n")
    monkeypatch.setattr(runner, "site_dirs", lambda real=runner.site_dirs: [*real(), str(extra.parent)])
    tests = "import probe_requirement\nfrom pkg import add\n\ndef test_add():\n    assert add(2, 3) * probe_requirement.FACTOR == 5\n"
    repo = _python_repo(tmp_path / "r", tests=tests)
    found = find_tasks(repo, only={"pkg/__init__.py::add"})
    assert [t["name"] for t in found.tasks] == ["add"], found.summary()
    track = _track("repositories", "python", found.tasks, Asking.of(load_config().eval))
    (result,) = execute(track, [(found.tasks[0]["task_id"], found.tasks[0]["body"])], 1024, 1)
    assert result["passed"], result["result"]


def test_a_function_is_tried_on_the_top_level_tests_that_name_it():
    """pytest node ids of the tests naming it; the whole file where the name is used outside a test (a table the
    tests share) or the test is one pytest would not collect by its defaults."""
    from ferrylm.eval.repo.suite import mentions

    fn = functions(LIB, "pkg/__init__.py", "python", min_lines=1)[0]  # add
    tests = {
        "tests/test_a.py": "from pkg import add\n\ndef test_add():\n    assert add(1, 2) == 3\n\n"
        "def test_other():\n    assert True\n\n"
        "class AddTests(unittest.TestCase):\n    def test_it(self):\n        self.assertEqual(add(0, 0), 0)\n\n"
        "@pytest.mark.parametrize('f', [add])\ndef test_through(f):\n    assert f(1, 1) == 2\n",
        "tests/test_b.py": "from pkg import add\nCASES = [(add, 3)]\n\ndef test_cases():\n    assert CASES\n",
        "tests/test_c.py": "class Helper:\n    adder = add\n\ndef test_h():\n    assert Helper\n",
        "tests/test_d.py": "def test_unrelated():\n    assert 1\n",
    }
    assert mentions(tests, fn) == [
        "tests/test_a.py::test_add",
        "tests/test_a.py::AddTests",
        "tests/test_a.py::test_through",
        "tests/test_b.py",
        "tests/test_c.py",
    ]


def test_stale_tasks_are_refused(py_tasks, tmp_path):
    repo, _, tasks = py_tasks
    copy = tmp_path / "pyrepo"
    shutil.copytree(repo, copy)
    rows = [json.loads(line) | {"repo": str(copy)} for line in tasks.read_text().splitlines()]
    (copy / "pkg" / "__init__.py").write_text(LIB.replace("Add two", "Add 2"))
    stale = tmp_path / "stale.jsonl"
    stale.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(Exception, match="changed since its tasks were found"):
        score(stale, _samples(tmp_path / "s.jsonl", [(rows[0]["task_id"], "return 1")]))


FLAKY = """
import os
def test_add():
    from pkg import add
    path = COUNT
    n = int(open(path).read()) + 1 if os.path.exists(path) else 1
    open(path, "w").write(str(n))
    assert n % 3 and add(1, 1) == 2
"""


@pytest.mark.integration
def test_a_flaky_test_is_dropped(tmp_path):
    """Unconfined (the count must outlive each run): every third run fails. The suite's third run fails,
    so the test is left out; without it nothing tests `add`, and the repository gives no task."""
    flaky = FLAKY.replace("COUNT", repr(str(tmp_path / "count")))
    repo = _python_repo(tmp_path / "flaky", LIB.split("\n\n\ndef words")[0] + "\n", flaky)
    found = find_tasks(repo, unconfined=True, workers=1)
    assert found.tasks == [] and found.deselected == ["tests/test_pkg.py::test_add"]
    assert found.skipped.startswith("its tests do not pass as checked out"), found.skipped
    assert (tmp_path / "count").read_text() == "3"


@pytest.mark.parametrize(
    "tests, command, reason",
    [
        (None, None, "no tests found"),
        (
            "def test_x():\n    assert False\n",
            None,
            "its tests do not pass as checked out (pytest -q -p no:cacheprovider): "
            "failed: run step sh failed (exit code 1): assert False; first failed: tests/test_pkg.py::test_x; 1 failed in",
        ),
        ("def test_x():\n    pass\n", "sleep 60", "its tests did not finish within 5 s as checked out (sleep 60)"),
        ("def test_x():\n    pass\n", "pytset -q", "its test command 'pytset -q': 'pytset' is not installed here"),
    ],
)
@pytest.mark.integration
def test_repositories_that_give_no_task_say_why(tmp_path, tests, command, reason):
    repo = _python_repo(tmp_path / "r", LIB, tests or "")
    if tests is None:
        (repo / "tests" / "test_pkg.py").unlink()
    found = find_tasks(repo, command=command, suite_timeout_s=5 if command == "sleep 60" else 120)
    assert found.tasks == [] and found.skipped.startswith(reason), found.skipped


@pytest.mark.integration
def test_repo_tasks_cli_writes_tasks_and_refuses_bad_input(tmp_path):
    repo = _python_repo(tmp_path / "r")
    run = [sys.executable, "-m", "ferrylm", "eval", "repo-tasks"]
    bad = subprocess.run(
        [*run, str(tmp_path / "missing"), "-o", str(tmp_path / "t.jsonl")], capture_output=True, text=True
    )
    assert (
        bad.returncode == 2
        and bad.stderr.strip() == f"ferrylm: error: repo-tasks: {tmp_path / 'missing'} is not a directory"
    )
    ok = subprocess.run(
        [*run, str(repo), "-o", str(tmp_path / "t.jsonl"), "--runs", "1", "--limit", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert len((tmp_path / "t.jsonl").read_text().splitlines()) == 1
    no_tasks = subprocess.run(
        [
            sys.executable,
            "-m",
            "ferrylm",
            "eval",
            "score",
            "--benchmark",
            "repo",
            "--samples",
            str(tmp_path / "t.jsonl"),
        ],
        capture_output=True,
        text=True,
    )
    assert no_tasks.returncode == 2 and "needs --tasks" in no_tasks.stderr


def test_a_manifest_test_command_is_read_and_a_typo_named(tmp_path):
    (tmp_path / "r").mkdir()
    good = tmp_path / "good.yaml"
    good.write_text("repositories:\n  - path: r\n    test: pytest -q tests\n")
    assert load_manifest(good)[0].test == "pytest -q tests"
    bad = tmp_path / "bad.yaml"
    bad.write_text("repositories:\n  - path: r\n    tset: pytest -q tests\n")
    with pytest.raises(ManifestError, match="entry 0 of .* has an unknown key 'tset' \\(known: language, name, path"):
        load_manifest(bad)


def test_python_stubs_raise_or_return_a_wrong_value_of_the_same_type():
    text = (
        LIB
        + '''

def pairs(xs):
    """Yield each item with its index."""
    for i, x in enumerate(xs):
        yield i, x
'''
    )
    fns = {f.name: f for f in functions(text, "pkg.py", "python")}
    assert {n: f.kind for n, f in fns.items()} == {
        "add": "value",
        "words": "value",
        "only_raises_tested": "value",
        "untested": "value",
        "Counter.bump": "procedure",
        "pairs": "generator",
    }
    space: dict = {}
    exec(stub(fns["add"], "wrong", text), space)
    assert space["add"](2, 3) == 6 and space["words"]("A b") == ["a", "b"]
    exec(stub(fns["words"], "wrong", text), space)
    assert space["words"]("A b c") == ["b", "c"]
    exec(stub(fns["pairs"], "wrong", text), space)
    assert list(space["pairs"]("ab")) == [(1, "b")]
    exec(stub(fns["Counter.bump"], "wrong", text), space)
    c = space["Counter"]()
    c.bump(2)
    assert not hasattr(c, "n")
    exec(stub(fns["add"], "raising", text), space)
    with pytest.raises(NotImplementedError):
        space["add"](1, 2)


GO_LIB = """package strs

import "strings"

// Reverse returns the string with its runes in reverse order.
func Reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

// Fields splits a text at blanks and says whether it found any.
func Fields(s string) ([]string, bool) {
	f := strings.Fields(s)
	return f, len(f) > 0
}

// Shout prints nothing but is only checked for not panicking.
func Shout(s string) string {
	out := strings.ToUpper(s)
	return out
}
"""
GO_TESTS = """package strs

import "testing"

func TestReverse(t *testing.T) {
	if Reverse("abc") != "cba" {
		t.Fatal("reverse")
	}
}

func TestFields(t *testing.T) {
	f, ok := Fields("a b")
	if !ok || len(f) != 2 || f[0] != "a" {
		t.Fatal("fields")
	}
}

func TestShout(t *testing.T) {
	_ = Shout("x")
}
"""


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("go") is None, reason="Go is not installed (make toolchains installs it as root)")
def test_go_tasks_and_scoring(tmp_path):
    repo = tmp_path / "gorepo"
    (repo / "strs").mkdir(parents=True)
    (repo / "go.mod").write_text("module example.com/gorepo\n\ngo 1.19\n")
    (repo / "strs" / "strs.go").write_text(GO_LIB)
    (repo / "strs" / "strs_test.go").write_text(GO_TESTS)
    found = find_tasks(repo)
    assert found.command == "go test ./..." and sorted(t["name"] for t in found.tasks) == ["Fields", "Reverse"]
    assert found.dropped == {"its tests pass with a wrong value": 1}  # Shout's test checks nothing
    rows = [
        (
            "gorepo/strs/strs.go::Reverse",
            "```go\nfunc Reverse(s string) string {\n\tr := []rune(s)\n"
            "\tfor i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {\n"
            "\t\tr[i], r[j] = r[j], r[i]\n\t}\n\treturn string(r)\n}\n```\r\n",
        ),
        ("gorepo/strs/strs.go::Reverse", "\treturn s\n}"),
        ("gorepo/strs/strs.go::Fields", "```go\n\tf := strings.Fields(s)\n\treturn f, len(f) > 0\n}\n```"),
    ]
    assert _passed(repo, found, tmp_path, rows) == [True, False, True]


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("go") is None, reason="Go is not installed (make toolchains installs it as root)")
def test_the_report_names_the_toolchain_each_repository_ran_with(tmp_path):
    """A compiled language's verdict depends on its compiler: each track carries the toolchain its repositories'
    tests ran with (the finder's, with its version) and the report names it; Python's run in our interpreter."""
    from ferrylm.config.loader import load_config
    from ferrylm.eval.repo.track import Asking, tracks
    from ferrylm.eval.report.render import subset_note

    repo = tmp_path / "gorepo"
    (repo / "strs").mkdir(parents=True)
    (repo / "go.mod").write_text("module example.com/gorepo\n\ngo 1.19\n")
    (repo / "strs" / "strs.go").write_text(GO_LIB)
    (repo / "strs" / "strs_test.go").write_text(GO_TESTS)
    py = _python_repo(tmp_path / "pyrepo")
    e = load_config(overrides=["eval.repo_task_cache=false"]).eval
    repos = [
        {"name": "gorepo", "root": str(repo), "split": "eval"},
        {"name": "pyrepo", "root": str(py), "split": "eval"},
    ]
    found = {t.language: t for t in tracks(Asking.of(e), repos)}
    assert found["python"].ran_with == {}
    tool = found["go"].ran_with["gorepo"]
    assert tool.startswith("go version go1.") and tool.endswith("/go)"), tool
    summaries = [{"title": t.title, "ran_with": t.ran_with} for t in found.values()]
    note = subset_note({"base": {"benchmarks": summaries}, "tuned": {"benchmarks": summaries}})
    assert note == f"Own code's tests ran with {tool} for gorepo."


@pytest.mark.integration
@pytest.mark.skipif(
    "container/ring" not in dict(go_std.package_dirs()), reason="Go's standard library with its tests is not installed"
)
def test_a_go_standard_library_package_runs_in_place_under_an_overlay(tmp_path):
    ring = dict(go_std.package_dirs())["container/ring"]
    found = find_tasks(ring, only={"ring.go::Ring.Len", "ring.go::Ring.Unlink"})
    # the package alone, never a cached result; Unlink returns a pointer: its wrong value (nil) compiles too
    assert found.command == "go test -count=1 ." and sorted(t["name"] for t in found.tasks) == [
        "Ring.Len",
        "Ring.Unlink",
    ]
    reference = next(t for t in found.tasks if t["name"] == "Ring.Len")["body"]
    rows = [
        ("ring/ring.go::Ring.Len", f"```go\nfunc (r *Ring) Len() int {{\n{reference}\n```"),
        ("ring/ring.go::Ring.Len", "\treturn 1\n}"),
        ("ring/ring.go::Ring.Len", "\tfor {\n\t}\n}"),  # loops: stopped at the task's limit
        ("ring/ring.go::Ring.Len", "\treturn r.size\n}"),  # does not compile: the compiler's line says why
    ]
    assert _passed(ring, found, tmp_path, rows) == [True, False, False, False]
    said = json.loads((tmp_path / "s.jsonl_results.jsonl").read_text().splitlines()[-1])["result"]
    assert "replaced_0_ring.go:" in said and "r.size undefined" in said and "[build failed]" in said


needs_cargo = pytest.mark.skipif(
    shutil.which("cargo") is None, reason="Cargo is not installed (make toolchains installs Debian's as root)"
)
RUST_LIB = """
/// Adds one to each number and sums them.
pub fn bump_sum(xs: &[i64]) -> i64 {
    let mut total = 0;
    for x in xs {
        total += x + 1;
    }
    total
}

/// Joins words with a dash.
pub fn dashed(words: &[&str]) -> String {
    let parts: Vec<String> = words.iter().map(|w| w.to_string()).collect();
    parts.join("-")
}

/// Doubles a number; its test only checks that it does not panic.
pub fn noisy(x: i32) -> i32 {
    let y = x * 2;
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bump() {
        assert_eq!(bump_sum(&[1, 2]), 5);
    }

    #[test]
    fn dash() {
        assert_eq!(dashed(&["a", "b"]), "a-b");
    }

    #[test]
    fn noise() {
        let _ = noisy(3);
    }
}
"""


@needs_cargo
@pytest.mark.integration
def test_rust_tasks_and_scoring(tmp_path):
    repo = tmp_path / "rsrepo"
    (repo / "src").mkdir(parents=True)
    (repo / "Cargo.toml").write_text('[package]\nname = "rsrepo"\nversion = "0.1.0"\nedition = "2021"\n')
    (repo / "src" / "lib.rs").write_text(RUST_LIB)
    found = find_tasks(repo)
    assert found.command == "cargo test --offline -q" and found.language == "rust", found.summary()
    assert sorted(t["name"] for t in found.tasks) == ["bump_sum", "dashed"], found.summary()
    assert found.dropped == {"its tests pass with a wrong value": 1}  # noisy's test checks nothing
    rows = [
        (
            "rsrepo/src/lib.rs::bump_sum",
            "```rust\n/// Adds one.\npub fn bump_sum(xs: &[i64]) -> i64 {\n    xs.iter().map(|x| x + 1).sum()\n}\n```",
        ),
        ("rsrepo/src/lib.rs::bump_sum", "    0\n}"),
        ("rsrepo/src/lib.rs::dashed", '```rust\n    words.join("-")\n}\n```'),
    ]
    assert _passed(repo, found, tmp_path, rows) == [True, False, True]


@needs_cargo
@pytest.mark.integration
def test_a_crate_s_runs_start_from_its_warm_build_and_rebuild_what_a_reply_changes(tmp_path, monkeypatch):
    """Each sandboxed run copies the crate's warm target: Cargo finds the original fresh (nothing compiled), and a
    replaced file is newer than every artifact, so a wrong body is compiled and fails (no stale test binary)."""
    from ferrylm.eval.repo import runner
    from ferrylm.eval.repo.facts import facts_of

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo = tmp_path / "rsrepo"
    (repo / "src").mkdir(parents=True)
    (repo / "Cargo.toml").write_text('[package]\nname = "rsrepo"\nversion = "0.1.0"\nedition = "2021"\n')
    (repo / "src" / "lib.rs").write_text(RUST_LIB)
    facts = facts_of(repo, "rust")
    assert (Path(runner.crate_warm(facts)) / "target" / "debug").is_dir()
    nothing_compiled = "cargo test --offline --no-run -v > $HOME/log 2>&1 && ! grep -q Compiling $HOME/log"
    wrong = {"src/lib.rs": RUST_LIB.replace("    total\n}", "    total + 1\n}", 1)}
    with runner.sandbox(facts, 120) as box:
        got = [runner.run(box, nothing_compiled).status, runner.run(box, "cargo test --offline -q", wrong).status]
        box.warm = None  # cold, as before: the crate compiled in the run
        cold = runner.run(box, nothing_compiled).status
    assert got[0] == "passed" and got[1].startswith("failed") and "test failed" in got[1], got
    assert cold.startswith("failed"), cold
    (repo / "build.rs").write_text("fn main() {}\n")  # a build script would run outside the sandbox: not warmed
    assert runner.crate_warm(facts_of(repo, "rust")) is None


def test_rust_stubs_panic_or_return_a_wrong_value_of_the_same_type():
    fns = {f.name: f for f in functions(RUST_LIB, "src/lib.rs", "rust")}
    assert sorted(fns) == ["bump_sum", "dashed", "noisy"] and fns["dashed"].kind == "String"
    # the panic first, the original after it (unreachable to the run, not to the compiler: its type stays)
    assert 'if true { panic!("blanked by ferrylm"); }\n    let mut total' in stub(fns["bump_sum"], "raising", RUST_LIB)
    wrong = stub(fns["dashed"], "wrong", RUST_LIB)
    assert "let ferry_r: String = (|| -> String {\n    let parts" in wrong and 'ferry_r + "x"\n}' in wrong


RUST_TYPES_LIB = """use std::fmt;

/// Why two strings cannot be compared.
#[derive(Debug, PartialEq)]
pub enum StrSimError {
    DifferentLengthArgs,
}

impl fmt::Display for StrSimError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "different lengths")
    }
}

pub type HammingResult = Result<usize, StrSimError>;

/// Counts the positions where two strings of one length differ.
pub fn hamming(a: &str, b: &str) -> HammingResult {
    let (mut ita, mut itb, mut count) = (a.chars(), b.chars(), 0);
    loop {
        match (ita.next(), itb.next()) {
            (Some(x), Some(y)) => {
                if x != y {
                    count += 1
                }
            }
            (None, None) => return Ok(count),
            _ => return Err(StrSimError::DifferentLengthArgs),
        }
    }
}

/// The pairs of neighbouring characters of a string.
pub fn bigrams(s: &str) -> impl Iterator<Item = (char, char)> + '_ {
    s.chars().zip(s.chars().skip(1))
}

/// Sums the first 42 numbers, one line each: longer than a task may be.
pub fn long_sum(xs: &[i64]) -> i64 {
    let mut total = 0;
    total += xs.get(0).copied().unwrap_or(0);
    total += xs.get(1).copied().unwrap_or(0);
    total += xs.get(2).copied().unwrap_or(0);
    total += xs.get(3).copied().unwrap_or(0);
    total += xs.get(4).copied().unwrap_or(0);
    total += xs.get(5).copied().unwrap_or(0);
    total += xs.get(6).copied().unwrap_or(0);
    total += xs.get(7).copied().unwrap_or(0);
    total += xs.get(8).copied().unwrap_or(0);
    total += xs.get(9).copied().unwrap_or(0);
    total += xs.get(10).copied().unwrap_or(0);
    total += xs.get(11).copied().unwrap_or(0);
    total += xs.get(12).copied().unwrap_or(0);
    total += xs.get(13).copied().unwrap_or(0);
    total += xs.get(14).copied().unwrap_or(0);
    total += xs.get(15).copied().unwrap_or(0);
    total += xs.get(16).copied().unwrap_or(0);
    total += xs.get(17).copied().unwrap_or(0);
    total += xs.get(18).copied().unwrap_or(0);
    total += xs.get(19).copied().unwrap_or(0);
    total += xs.get(20).copied().unwrap_or(0);
    total += xs.get(21).copied().unwrap_or(0);
    total += xs.get(22).copied().unwrap_or(0);
    total += xs.get(23).copied().unwrap_or(0);
    total += xs.get(24).copied().unwrap_or(0);
    total += xs.get(25).copied().unwrap_or(0);
    total += xs.get(26).copied().unwrap_or(0);
    total += xs.get(27).copied().unwrap_or(0);
    total += xs.get(28).copied().unwrap_or(0);
    total += xs.get(29).copied().unwrap_or(0);
    total += xs.get(30).copied().unwrap_or(0);
    total += xs.get(31).copied().unwrap_or(0);
    total += xs.get(32).copied().unwrap_or(0);
    total += xs.get(33).copied().unwrap_or(0);
    total += xs.get(34).copied().unwrap_or(0);
    total += xs.get(35).copied().unwrap_or(0);
    total += xs.get(36).copied().unwrap_or(0);
    total += xs.get(37).copied().unwrap_or(0);
    total += xs.get(38).copied().unwrap_or(0);
    total += xs.get(39).copied().unwrap_or(0);
    total += xs.get(40).copied().unwrap_or(0);
    total += xs.get(41).copied().unwrap_or(0);
    total
}

/// Shows a string's length.
pub fn shown(s: &str) -> impl fmt::Display {
    s.len()
}

/// A string seen as its characters.
pub struct Letters<'a>(pub &'a str);

impl<'a> IntoIterator for &Letters<'a> {
    type Item = char;
    type IntoIter = std::str::Chars<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.chars()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hamming_counts() {
        assert_eq!(hamming("karolin", "kathrin"), Ok(3));
        assert_eq!(hamming("a", "ab"), Err(StrSimError::DifferentLengthArgs));
    }

    #[test]
    fn bigrams_pairs() {
        assert_eq!(bigrams("abc").collect::<Vec<_>>(), vec![('a', 'b'), ('b', 'c')]);
    }

    #[test]
    fn letters_iterate() {
        assert_eq!((&Letters("ab")).into_iter().collect::<String>(), "ab");
    }

    #[test]
    fn shown_length() {
        assert_eq!(shown("abc").to_string(), "3");
    }
}
"""


@needs_cargo
@pytest.mark.integration
def test_rust_results_named_by_an_alias_or_an_impl_iterator_make_tasks(tmp_path):
    # strsim's shapes: `hamming` returns an alias of a Result (its wrong stub did not compile: no Default), `bigrams`
    # an `impl Iterator` (its raising stub did not compile: a bare panic has no iterator type), `into_iter` an
    # IntoIterator's `Self::IntoIter` (no Default); its benches/ are no library code to ask for
    repo = tmp_path / "strsim"
    (repo / "src").mkdir(parents=True)
    (repo / "benches").mkdir()
    (repo / "Cargo.toml").write_text('[package]\nname = "strsim"\nversion = "0.1.0"\nedition = "2021"\n')
    (repo / "src" / "lib.rs").write_text(RUST_TYPES_LIB)
    (repo / "benches" / "benches.rs").write_text("pub fn bench_hamming() -> usize {\n    1\n}\n")
    found = find_tasks(repo)
    assert sorted(t["name"] for t in found.tasks) == ["bigrams", "hamming", "into_iter"], found.summary()
    assert found.dropped == {  # `shown`, StrSimError's `fmt`, which no test reaches, and `long_sum`
        "its result (impl fmt::Display) has no wrong value ferrylm can write": 1,
        "its tests pass with a raising body": 1,
        "its body is longer than 40 lines": 1,
    }, found.summary()
    # every function of the file is in the verdict list, with its reason
    assert {c["id"] for c in found.considered} == {
        f"src/lib.rs::{n}" for n in ("hamming", "bigrams", "shown", "fmt", "long_sum", "into_iter")
    }
    fns = {f.name: f for f in functions(RUST_TYPES_LIB, "src/lib.rs", "rust", min_lines=1, documented=False)}
    assert "ferry_r.map(|v| v.wrapping_add(1))" in stub(fns["hamming"], "wrong", RUST_TYPES_LIB)
    assert "ferry_r.skip(1)" in stub(fns["bigrams"], "wrong", RUST_TYPES_LIB)
    assert "let mut it = ferry_r; it.next(); it" in stub(fns["into_iter"], "wrong", RUST_TYPES_LIB)


JAVA_LIB = """package calc;

public class Calc {
    /** Adds one to each number and sums them. */
    public static int bumpSum(int[] xs) {
        int total = 0;
        for (int x : xs) total += x + 1;
        return total;
    }

    /** Joins words with a dash. */
    public static String dashed(String[] words) {
        String out = String.join("-", words);
        return out;
    }

    /** Doubles a number; its test only checks that it does not throw. */
    public static int noisy(int x) {
        int y = x * 2;
        return y;
    }
}
"""
JAVA_TESTS = """package calc;

public class CalcTest {
    public static void main(String[] args) {
        check(Calc.bumpSum(new int[] {1, 2}) == 5, "bump");
        check(Calc.dashed(new String[] {"a", "b"}).equals("a-b"), "dash");
        Calc.noisy(3);
    }

    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }
}
"""
CPP_LIB = """#include "calc.h"

// Adds one to each number and sums them.
int bump_sum(const std::vector<int>& xs) {
    int total = 0;
    for (int x : xs) total += x + 1;
    return total;
}

// Joins words with a dash.
std::string dashed(const std::vector<std::string>& words) {
    std::string out;
    for (size_t i = 0; i < words.size(); ++i) out += (i ? "-" : "") + words[i];
    return out;
}

// Doubles a number; its test only checks that it does not throw.
int noisy(int x) {
    int y = x * 2;
    return y;
}
"""
CPP_HEADER = """#pragma once
#include <string>
#include <vector>
int bump_sum(const std::vector<int>& xs);
std::string dashed(const std::vector<std::string>& words);
int noisy(int x);
"""
CPP_TESTS = """#include "../calc.h"

int main() {
    if (bump_sum({1, 2}) != 5) return 1;
    if (dashed({"a", "b"}) != "a-b") return 2;
    noisy(3);
    return 0;
}
"""


# per language: a right body of bumpSum (fenced, as a chat model writes it), a wrong one, a right body of dashed
REPLIES = {
    "java": [
        "```java\n        return java.util.Arrays.stream(xs).map(x -> x + 1).sum();\n    }\n```",
        "        return 0;\n    }",
        '        return String.join("-", words);\n    }',
    ],
    "cpp": [
        "```cpp\n    int t = 0;\n    for (int x : xs) t += x + 1;\n    return t;\n}\n```",
        "    return 0;\n}",
        '    std::string s;\n    for (auto& w : words) s += (s.empty() ? "" : "-") + w;\n    return s;\n}',
    ],
}


def _java_repo(root: Path) -> tuple[str, str]:
    (root / "src/main/java/calc").mkdir(parents=True)
    (root / "src/test/java/calc").mkdir(parents=True)
    (root / "src/main/java/calc/Calc.java").write_text(JAVA_LIB)
    (root / "src/test/java/calc/CalcTest.java").write_text(JAVA_TESTS)
    return (
        "mkdir -p out && javac -d out $(find src -name '*.java') && java -cp out calc.CalcTest",
        "src/main/java/calc/Calc.java",
    )


def _cpp_repo(root: Path) -> tuple[str, str]:
    (root / "tests").mkdir(parents=True)
    (root / "calc.h").write_text(CPP_HEADER)
    (root / "calc.cpp").write_text(CPP_LIB)
    (root / "tests/test_calc.cc").write_text(CPP_TESTS)
    return "g++ -std=c++17 -o t calc.cpp tests/test_calc.cc && ./t", "calc.cpp"


@pytest.mark.integration
@pytest.mark.parametrize("language", ["java", "cpp"])
def test_java_and_cpp_tasks_through_a_given_test_command(tmp_path, language):
    tool = {"java": "javac", "cpp": "g++"}[language]
    if not Path(f"/usr/bin/{tool}").exists():
        pytest.skip(f"{tool} is not installed (make toolchains installs it as root)")
    repo = tmp_path / f"{language}repo"
    command, file = (_java_repo if language == "java" else _cpp_repo)(repo)
    assert "name it (`--test` for ferrylm eval repo-tasks, `test:` in a data manifest)" in find_tasks(repo).skipped
    found = find_tasks(repo, command=command)
    names = {"java": ["Calc.bumpSum", "Calc.dashed"], "cpp": ["bump_sum", "dashed"]}[language]  # Java's with its class
    assert found.language == language and sorted(t["name"] for t in found.tasks) == names, found.summary()
    assert found.dropped == {"its tests pass with a wrong value": 1}  # noisy's test checks nothing
    rows = [(f"{repo.name}/{file}::{names[0]}", reply) for reply in REPLIES[language][:2]]
    rows.append((f"{repo.name}/{file}::{names[1]}", REPLIES[language][2]))
    assert _passed(repo, found, tmp_path, rows) == [True, False, True]


def test_java_and_cpp_stubs_and_a_stub_that_does_not_compile_is_no_proof(tmp_path):
    fns = {f.name.split(".")[-1]: f for f in functions(JAVA_LIB, "Calc.java", "java")}
    assert fns["bumpSum"].kind == "int" and "Callable<Integer>" in stub(fns["bumpSum"], "wrong", JAVA_LIB)
    assert 'if (true) throw new UnsupportedOperationException("blanked by ferrylm");\n        String out' in stub(
        fns["dashed"], "raising", JAVA_LIB
    )
    cpp = {f.name: f for f in functions(CPP_LIB, "calc.cpp", "cpp")}
    assert cpp["dashed"].kind == "std::string" and 'return ferry_r + "x";\n}' in stub(cpp["dashed"], "wrong", CPP_LIB)
    assert "if (true) throw 0;\n    int y" in stub(cpp["noisy"], "raising", CPP_LIB)
    from ferrylm.eval.repo.proof import _compile_error_in

    assert _compile_error_in("failed: run step sh failed (exit code 1): calc.cpp:12:5: error: no match", "src/calc.cpp")
    assert _compile_error_in(
        "failed: (exit code 1): src/main/java/calc/Calc.java:7: error: incompatible types", "x/Calc.java"
    )
    assert not _compile_error_in(
        "failed: (exit code 1): Exception in thread main java.lang.AssertionError", "Calc.java"
    )


def _four_repositories(corpus: Path) -> Path:
    for i, name in enumerate(("alpha", "beta", "gamma", "delta")):
        lib = LIB.replace("add", f"add_{name}").replace("words", f"words_{name}").replace("Counter", f"Counter{i}")
        lib = lib.replace("a + b", f"a + b + {i}").replace("lower()", "lower()" + ".strip()" * i)
        tests = TESTS.replace("add", f"add_{name}").replace("words", f"words_{name}").replace("Counter", f"Counter{i}")
        tests = (
            tests.replace("== 5", f"== {5 + i}")
            + f'''

def helper_{name}(x):
    """A documented helper of the tests, which must not reach training."""
    y = x + {i}
    return y
'''
        )
        _python_repo(corpus / name, lib, tests)
    return corpus


def test_held_out_functions_of_training_repositories_stay_out_of_training(tmp_path, tiny_qwen2_dir, make_config):
    from ferrylm.data import run_data
    from ferrylm.manifest import read_jsonl

    corpus = _four_repositories(tmp_path / "repos")
    (tmp_path / "link").symlink_to(corpus)  # named through a link: the functions' paths are still the repositories'
    cfg = make_config(
        tmp_path / "run",
        tiny_qwen2_dir,
        tmp_path / "link",
        "data.min_body_lines=1",
        "data.holdout_functions=0.5",
        "data.validation_functions=0.5",
    )
    data = run_data(cfg)
    repos = {r["name"]: r for r in json.loads(Path(data.outputs["repositories"]).read_text())}
    trained = [r for r in repos.values() if r["split"] == "train"]
    held_fns = {f"{r['name']}/{f}" for r in trained for f in r["held_out_functions"]}
    assert held_fns and all(f.split("/", 1)[1].startswith("pkg/__init__.py::") for f in held_fns)
    assert all(not r["held_out_functions"] for r in repos.values() if r["split"] == "eval")
    rows = read_jsonl(data.outputs["eval_prompts"])
    by_fn = {f"{r['source'].split('/', 1)[1]}" for r in rows if r["split"] == "functions"}
    assert by_fn == held_fns  # every held-out function is evaluated, and only those
    m = data.metrics
    assert m["held_out_functions"] == len(held_fns) + m["validation_functions"]  # the validating ones are no task
    assert m["test_file_pairs_dropped"] == len(trained) and m["validation_functions"]
    # the held-out loss that chooses the checkpoint holds the validating functions' rows, never a reported one's
    from ferrylm.data.encode import load_rows
    from ferrylm.models import load_tokenizer

    tok = load_tokenizer(tiny_qwen2_dir)
    validating = ["".join(tok.decode(ids).split()) for ids in load_rows(data.outputs["eval"])["input_ids"]]
    spans = {
        (name, f.id): "".join(f.body.split())
        for name in repos
        for f in functions((corpus / name / "pkg" / "__init__.py").read_text(), "pkg/__init__.py", "python", 1)
    }
    unique = Counter(spans.values())  # a body that another repository has word for word tells nothing here
    reported = [spans[name, fn] for name, r in repos.items() for fn in r["held_out_functions"]]
    assert [b for b in reported if unique[b] == 1]
    assert not any(b in v for b in reported if unique[b] == 1 for v in validating)
    assert len(validating) > sum(
        1 for r in rows if r["split"] == "repositories"
    )  # held-out repositories' rows, and more
    with pytest.raises(Exception, match="data.holdout_functions: needs format=sft"):
        make_config(tmp_path / "r2", tiny_qwen2_dir, corpus, "data.format=cpt", "data.holdout_functions=0.5")


UNDOCUMENTED = """

def scale_{name}(values, k):
    out = [v * k for v in values]
    return out + [{i}]
"""


def test_a_function_without_a_doc_comment_is_held_out_and_asked_with_its_file(tmp_path, tiny_qwen2_dir, make_config):
    """With the file shown a function needs no doc comment: one its tests call is drawn like any other, its body
    stays out of training, and the task finder proves it with its signature as the prompt."""
    from ferrylm.data import run_data
    from ferrylm.data.encode import load_rows
    from ferrylm.models import load_tokenizer

    corpus = _four_repositories(tmp_path / "repos")
    for i, name in enumerate(("alpha", "beta", "gamma", "delta")):
        with open(corpus / name / "pkg" / "__init__.py", "a") as lib:
            lib.write(UNDOCUMENTED.format(name=name, i=i))
        with open(corpus / name / "tests" / "test_pkg.py", "a") as tests:
            tests.write(
                f"\nfrom pkg import scale_{name}\n\ndef test_scale():\n    assert scale_{name}([1, 2], 3) == [3, 6, {i}]\n"
            )
    cfg = make_config(
        tmp_path / "run",
        tiny_qwen2_dir,
        corpus,
        "data.min_body_lines=1",
        "data.holdout_functions=0.99",
        "data.validation_functions=0",
        "data.tasks={generate: 1, file: 1}",
        "data.max_seq_len=1024",
        "data.repo_files=1",
    )
    data = run_data(cfg)
    repos = json.loads(Path(data.outputs["repositories"]).read_text())
    trained = [r for r in repos if r["split"] == "train"]
    assert all(f"pkg/__init__.py::scale_{r['name']}" in r["held_out_functions"] for r in trained)
    assert data.metrics["held_out_undocumented"] == len(trained)
    rows = [
        "".join(load_tokenizer(tiny_qwen2_dir).decode(ids).split())
        for ids in load_rows(data.outputs["train"])["input_ids"]
    ]
    assert not any("out=[v*kforvinvalues]" in r for r in rows)  # in no pair, file-shown question or file
    found = find_tasks(corpus / trained[0]["name"], only={f"pkg/__init__.py::scale_{trained[0]['name']}"})
    (task,) = found.tasks
    assert task["prompt"] == f"def scale_{trained[0]['name']}(values, k):\n", found.summary()


def test_retrieval_searches_the_whole_training_repositories_not_the_draw(tmp_path, tiny_qwen2_dir, make_config):
    """data.max_pairs=8 draws a part of the functions; the retrieval index still holds every function of the training
    repositories but their held-out ones and their tests, and nothing of a held-out repository."""
    import sqlite3

    from ferrylm.data import run_data
    from ferrylm.source.pairs import extract_pairs

    corpus = _four_repositories(tmp_path / "repos")
    cfg = make_config(
        tmp_path / "run",
        tiny_qwen2_dir,
        corpus,
        "data.min_body_lines=1",
        "data.holdout_functions=0.5",
        "data.validation_functions=0",  # every held-out function listed (a validating one is indexed by none)
        "data.max_pairs=8",
    )
    data = run_data(cfg)
    repos = json.loads(Path(data.outputs["repositories"]).read_text())
    with sqlite3.connect(data.outputs["library"]) as db:
        indexed = {s for (s,) in db.execute("SELECT source FROM functions")}
    trained = [r for r in repos if r["split"] == "train"]
    held = {f"{r['name']}/{f}" for r in trained for f in r["held_out_functions"]}
    indexed = {s.split("/", 1)[1] for s in indexed}  # as the repositories name them (the corpus folder's name off)
    want = {  # every documented function of the training repositories' code
        p.source
        for r in trained
        for p in extract_pairs(
            (corpus / r["name"] / "pkg" / "__init__.py").read_text(), f"{r['name']}/pkg/__init__.py", 1, 40
        )
    }
    # minus the held-out ones and their copies (the four repositories share some functions word for word)
    want = {f for f in want if f.split("::")[1] not in {h.split("::")[1] for h in held}}
    assert data.metrics["pairs_extracted"] > 8 + len(held)  # the draw left some of them out
    assert want and want <= indexed and not indexed & held
    assert not any(s.split("/")[0] in {r["name"] for r in repos if r["split"] == "eval"} for s in indexed)
    assert not any("tests" in s.split("::")[0] for s in indexed)  # a test file shows a held-out function's behaviour
    assert data.metrics["library_functions"] == len(indexed)


@pytest.mark.slow
def test_the_eval_stage_scores_held_out_repositories_on_their_own_tests(
    tmp_path, tiny_qwen2_dir, make_config, monkeypatch
):
    """Four small repositories with tests; the held-out ones become a "Your repositories (python)" track:
    each model's bodies run against the tests, Pass@1 compared with McNemar's test, judged by the criterion."""
    from ferrylm.data import run_data
    from ferrylm.eval import run_eval
    from ferrylm.eval.execution import queue
    from ferrylm.export import run_export
    from ferrylm.train import run_train

    monkeypatch.setattr(queue, "on_gpu", lambda: True)  # each model's replies executed beside the next's generation

    corpus = _four_repositories(tmp_path / "repos")
    run = tmp_path / "run"
    cfg = make_config(
        run,
        tiny_qwen2_dir,
        corpus,
        "train.max_steps=1",
        "train.save_steps=0",
        "eval.local=true",
        "eval.humaneval_limit=1",
        "eval.bleu_limit=1",
        "eval.max_new_tokens=8",
        "eval.enforce_gates=false",
        "data.min_body_lines=1",
        "eval.repo_task_limit=2",
        "eval.few_shot=0",
        "eval.retrieval_k=4",  # the default preset (the CPU demo) asks no retrieval
    )
    data = run_data(cfg)
    repos = json.loads(Path(data.outputs["repositories"]).read_text())
    assert sorted(r["name"] for r in repos) == ["alpha", "beta", "delta", "gamma"]
    held = [r["name"] for r in repos if r["split"] == "eval"]
    assert held and all(r["root"] == str(corpus / r["name"]) and r["test"] is None for r in repos)
    run_train(cfg)
    run_export(cfg)
    run_eval(cfg)
    report = json.loads((run / "eval" / "report.json").read_text())
    for label in ("fine-tuned", "base"):
        track = next(b for b in report["details"][label]["benchmarks"] if b["benchmark"] == "own-repos")
        assert (track["title"], track["key"], track["tasks"]) == (
            "Held-out repositories (python, the file shown)",
            "pass_at_1_own_repos_python",
            2 * len(held),
        )
        rows = [json.loads(line) for line in open(run / "eval" / f"own_repos_python_{label}.jsonl")]
        assert len(rows) == 2 * len(held) and all(r["result"] for r in rows)
        # the replies as generated, kept before they run (a run stopped in execution is scored elsewhere)
        replies = [json.loads(line) for line in open(run / "eval" / f"own_repos_python_{label}.replies.jsonl")]
        assert replies == [{"task_id": r["task_id"], "completion": r["completion"]} for r in rows]
    assert "own-repos/python" in report["paired"]
    assert "pass_at_1_own_repos_python" in {r["criterion"] for r in report["criteria"]}
    assert "Held-out repositories (python, the file shown) Pass@1" in {
        ln["metric"] for ln in report["details"]["helped"]
    }
    # retrieval (eval.retrieval_k=4): each model once more on the repository tasks alone, shown training functions
    for label in ("base + retrieval", "fine-tuned + retrieval"):
        assert [b["benchmark"] for b in report["details"][label]["benchmarks"]] == ["own-repos"]
        rows = [json.loads(line) for line in open(run / "eval" / f"own_repos_python_{label.replace(' ', '-')}.jsonl")]
        assert len(rows) == 2 * len(held)
        assert any(r["prompt"].startswith("Functions from the training repositories") for r in rows)
    against = {ln["against"] for ln in report["details"]["helped"] if ln["metric"].startswith("Held-out repositories")}
    assert against == {"base", "base + retrieval", "fine-tuned + retrieval"}
    assert "retrieval_off" not in report["details"]


@pytest.mark.integration
def test_a_repository_that_gives_no_task_is_named_on_every_track_and_in_the_report(tmp_path):
    """A repository skipped whole (no tests found; a root that cannot be read) was only logged:
    its absence from the own-code Pass@1 is now said where the tracks are reported."""
    from ferrylm.config.loader import load_config
    from ferrylm.eval.repo.track import Asking, tracks
    from ferrylm.eval.report.render import subset_note
    from ferrylm.eval.tasks.benchmark import with_tasks
    from ferrylm.eval.tasks.humaneval import tracks as humaneval_tracks

    good = _python_repo(tmp_path / "good")
    bare = tmp_path / "bare"
    (bare / "pkg").mkdir(parents=True)
    (bare / "pkg" / "__init__.py").write_text("def f(x):\n    return x\n")
    repos = [
        {"name": "good", "root": str(good), "split": "eval"},
        {"name": "bare", "root": str(bare), "split": "eval"},
        {"name": "gone", "root": str(tmp_path / "gone"), "split": "train", "held_out_functions": ["a.py::f"]},
    ]
    e = load_config(overrides=["eval.repo_task_cache=false"]).eval
    found = tracks(Asking.of(e), repos)
    assert [t.title.split(" (")[0] for t in found] == ["Held-out repositories"] and found[0].problems
    gave_none = found[0].gave_none
    assert set(gave_none) == {"bare", "gone"}, gave_none
    assert gave_none["bare"].startswith("held-out repositories: no tests found")
    assert gave_none["gone"].endswith("gone: not a directory")
    note = subset_note({"base": {"benchmarks": [{"title": found[0].title, "gave_none": gave_none}]}})
    assert note.startswith("Repositories that gave no task, left out of the own-code Pass@1: bare (held-out")
    assert "; gone (held-out functions of training repositories: " in note
    placeholder = tracks(Asking.of(e), repos[1:])  # none gave a task: no track is scored, the report still names them
    kept, none = with_tasks([*humaneval_tracks(e), *placeholder])
    assert [t.benchmark for t in kept] == ["humaneval"] and set(none) == {"bare", "gone"}, (kept, none)
    note = subset_note({"own_code_gave_none": none})
    assert note.startswith("No own-code Pass@1: no repository gave a task: bare (held-out repositories: no tests found")
    # the CPU demo asks no retrieval: the report says where those columns are measured
    note = subset_note({"retrieval_off": True, "few_shot_off": True})
    assert note.startswith("Not asked: retrieval (base + retrieval, fine-tuned + retrieval; eval.retrieval_k=0); ")
    assert "the base shown training examples (base 2-shot; eval.few_shot=0)" in note
    assert note.endswith("the demo-gpu preset measures them.")
    assert subset_note({"retrieval_off": True}).count("; eval.") == 1


GO_PKG = """package {name}

import "strings"

// Shout{i} returns s in capitals with a mark.
func Shout{i}(s string) string {{
	u := strings.ToUpper(s)
	return u + "!{i}"
}}

// Words{i} splits s at spaces.
func Words{i}(s string) []string {{
	f := strings.Fields(s)
	return append(f, "{i}")
}}
"""
GO_PKG_TEST = """package {name}

import "testing"

func TestShout{i}(t *testing.T) {{
	if Shout{i}("a") != "A!{i}" {{
		t.Fatal("Shout")
	}}
	if len(Words{i}("a b")) != 3 {{
		t.Fatal("Words")
	}}
}}
"""


@pytest.mark.integration
def test_no_held_out_body_reaches_a_training_row_with_the_file_shown(tmp_path, tiny_qwen2_dir, make_config):
    """data.tasks `file`: a training function is asked with its file shown, as the eval asks; data.repo_files: the
    training repositories' files are trained whole (their path named, fill-in-the-middle); no held-out
    function's body is in any training row (pairs, file-shown questions, files), in Python and in Go."""
    from ferrylm.data import run_data
    from ferrylm.data.encode import load_rows
    from ferrylm.models import load_tokenizer

    corpus = _four_repositories(tmp_path / "repos")
    for i, name in enumerate(("echo", "foxtrot", "golf")):
        (corpus / name).mkdir()
        (corpus / name / "go.mod").write_text(f"module example.com/{name}\n\ngo 1.19\n")
        (corpus / name / f"{name}.go").write_text(GO_PKG.format(name=name, i=i))
        (corpus / name / f"{name}_test.go").write_text(GO_PKG_TEST.format(name=name, i=i))
    cfg = make_config(
        tmp_path / "run",
        tiny_qwen2_dir,
        corpus,
        "data.min_body_lines=1",
        "data.holdout_functions=0.5",
        "data.tasks={generate: 1, file: 1}",
        "data.max_seq_len=1024",
        "data.eval_fraction=0.15",
        "data.repo_files=1",
    )
    data = run_data(cfg)
    repos = json.loads(Path(data.outputs["repositories"]).read_text())
    held = {(r["name"], f) for r in repos if r["split"] == "train" for f in r["held_out_functions"]}
    assert {f.split("::")[0].rsplit(".", 1)[-1] for _, f in held} == {"py", "go"}, held  # both languages hold out
    by_task = data.metrics["examples_by_task"]
    assert by_task.get("train/file/python") and by_task.get("train/file/go")
    assert not any(k.startswith("eval/file") for k in by_task)  # the eval asks those itself
    tok = load_tokenizer(tiny_qwen2_dir)
    rows = [tok.decode(ids) for ids in load_rows(data.outputs["train"])["input_ids"]]
    shown = [r for r in rows if "cut out and marked" in r]
    assert shown and any("// <the body to write>" in r for r in shown)
    bare = ["".join(r.split()) for r in rows]  # indentation aside: a file shows a body as written, a pair dedented
    for name, fn in held:
        root = next(Path(r["root"]) for r in repos if r["name"] == name)
        file = fn.split("::")[0]
        (span,) = [f for f in functions((root / file).read_text(), file, LANGUAGES[Path(file).suffix], 1) if f.id == fn]
        assert not any("".join(span.body.split()) in r for r in bare), fn
        # taken out whole: no stub stands where it was (a placeholder body teaches answering a hole with its marker)
        (signature,) = [line for line in span.prompt.splitlines() if line.lstrip().startswith(("def ", "func "))]
        assert not any("".join(signature.split()) in r for r in bare), fn
    assert not any("// …" in r or "\n...\n" in "\n".join(line.strip() for line in r.splitlines()) for r in rows)
    # every training repository's source files (not its tests) as rows of their own, headed by their path
    trained = {r["name"] for r in repos if r["split"] == "train"}
    files = [r.removeprefix("<repo_name>").split("<file_sep>", 1) for r in rows if r.startswith("<repo_name>")]
    assert {name.strip() for name, _ in files} == trained  # the tiny tokenizer's: the StarCoder family's tokens
    assert not any("_test.go" in r.splitlines()[0] or "tests/" in r.splitlines()[0] for _, r in files)
    assert data.metrics["repo_files"] == len(trained) and data.metrics["repo_file_functions_cut"] >= len(held)


def _eval_options(exec_workers: int, repo_task_limit: int):
    """The options the tracks read, no sandbox and no cache (find_tasks is replaced)."""
    from ferrylm.eval.repo.track import Asking

    return Asking(repo_task_limit, exec_workers, unconfined=True, cache=False, context="file", context_tokens=768)


def test_several_repositories_are_proved_at_once_sharing_the_sandbox_slots(monkeypatch):
    """eval.exec_workers=8: two repositories at once, each allowed all eight slots of one shared set (a large
    suite left last gets them all); the tracks keep the repositories' order."""
    import threading
    import time

    from ferrylm.eval.repo import track
    from ferrylm.eval.repo.tasks import RepoTasks

    running, most, seen = [0], [0], []
    lock = threading.Lock()

    def find(root, workers, shared, **_):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            seen.append((workers, shared))
        time.sleep(0.3)
        with lock:
            running[0] -= 1
        task = {"task_id": f"{root}/f", "language": "python", "repo": root, "timeout_s": 1.0, "command": "pytest"}
        return RepoTasks(root, "python", "pytest", tasks=[task])

    monkeypatch.setattr(track, "find_tasks", lambda root, **kw: find(root, **kw))
    e = _eval_options(exec_workers=8, repo_task_limit=10)
    repos = [{"name": n, "root": f"/r/{n}", "split": "eval"} for n in ("a", "b", "c")]
    (t,) = track.tracks(e, repos)
    assert most[0] == 2 and [w for w, _ in seen] == [8, 8, 8]
    assert len({id(s) for _, s in seen}) == 1 and isinstance(seen[0][1], threading.BoundedSemaphore)
    assert [p["repo_name"] for p in t.problems] == ["a", "b", "c"]


def test_the_largest_repositories_are_proved_first_and_only_held_out_ones_are_limited(monkeypatch):
    """One slot at a time: the held-out repository (every function a candidate) first, then the training
    repositories by how many functions they hold out; eval.repo_task_limit caps the held-out repository alone."""

    from ferrylm.eval.repo import track
    from ferrylm.eval.repo.tasks import RepoTasks

    calls = []

    def find(root, limit, only, **_):
        calls.append((root, limit, len(only) if only is not None else None))
        tasks = [{"task_id": f"{root}/{n}", "language": "python", "repo": root, "timeout_s": 1.0} for n in only or "f"]
        return RepoTasks(root, "python", "pytest", tasks=[t | {"command": "pytest"} for t in tasks])

    monkeypatch.setattr(track, "find_tasks", find)
    e = _eval_options(exec_workers=4, repo_task_limit=2)
    repos = [
        {"name": "small", "root": "/r/small", "split": "train", "held_out_functions": ["a.py::f"]},
        {"name": "big", "root": "/r/big", "split": "train", "held_out_functions": ["a.py::f", "a.py::g", "b.py::h"]},
        {"name": "held", "root": "/r/held", "split": "eval"},
    ]
    found = track.tracks(e, repos)
    assert calls == [("/r/held", 2, None), ("/r/big", None, 3), ("/r/small", None, 1)]
    functions = next(t for t in found if t.title.startswith("Held-out functions"))
    assert [p["repo_name"] for p in functions.problems] == ["small", "big", "big", "big"]  # the repositories' order


def test_a_rust_result_with_no_wrong_value_but_a_default_is_known_as_such():
    from ferrylm.eval.repo.functions import wrong_by_default

    text = (
        "pub fn inner<T>(g: Guard<T>) -> T {\n    g.value\n}\n\n"
        "pub fn count(xs: &[u8]) -> usize {\n    xs.len()\n}\n\n"
        "pub fn name(s: &str) -> String {\n    s.to_string()\n}\n"
    )
    fns = {f.name: f for f in functions(text, "src/lib.rs", "rust", min_lines=1, documented=False)}
    assert [n for n in ("inner", "count", "name") if wrong_by_default(fns[n], text)] == ["inner"]


JAVA_CTOR = """package p;

public class Err extends Exception {
    private final String opt;

    /** An error naming its option. */
    public Err(String msg, String opt) {
        super(msg +
              opt);
        this.opt = opt;
    }

    /** Parses one way. */
    public int parse(String s) {
        return s.length();
    }

    /** Parses another. */
    public int parse(String s, int base) {
        return Integer.parseInt(s, base);
    }
}
"""


def test_a_java_constructor_keeps_its_super_call_first_and_overloads_are_no_tasks():
    fns = {f.name.split(".")[-1]: f for f in functions(JAVA_CTOR, "p/Err.java", "java", min_lines=1, documented=False)}
    assert sorted(fns) == ["Err"]  # parse is two methods of one id: neither is a task
    assert same_named(JAVA_CTOR, "java") == ["Err.parse"]  # listed with its reason by the finder
    for how in ("raising", "wrong"):
        body = stub(fns["Err"], how, JAVA_CTOR).split("public Err(String msg, String opt) {\n")[1]
        assert body.startswith("        super(msg +\n              opt);\n        "), body


JAVA_THROWS = """package p;

public class E {
    private final int position;

    /** An error at a position. */
    public E(int position) {
        super();
        this.position = position;
    }

    /** The class named. */
    public static Class<?> named(String name) throws ClassNotFoundException {
        return Class.forName(name);
    }

    /** Twice, or throws. */
    public <T extends Number> long twice(T x) throws java.io.IOException {
        if (x == null) throw new java.io.IOException("none");
        return 2 * x.longValue();
    }

    static abstract class Oops extends Exception {
        Oops(String msg) { super(msg); }
    }
}
"""


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("javac") is None, reason="javac is not installed (make toolchains installs it)")
def test_java_stubs_compile_past_checked_exceptions_and_generics(tmp_path):
    fns = {f.name.split(".")[-1]: f for f in functions(JAVA_THROWS, "p/E.java", "java", min_lines=1, documented=False)}
    compiled = {}
    asked = [("named", "raising"), ("named", "wrong"), ("twice", "wrong"), ("E", "raising"), ("E", "wrong")]
    for name, how in asked + [("Oops", "raising"), ("Oops", "wrong")]:
        (tmp_path / "p").mkdir(exist_ok=True)
        (tmp_path / "p" / "E.java").write_text(stub(fns[name], how, JAVA_THROWS))
        done = subprocess.run(["javac", "-nowarn", "-d", str(tmp_path / "o"), str(tmp_path / "p" / "E.java")])
        compiled[name, how] = done.returncode == 0
    # a constructor that sets a final field has no body that does nothing: its verdict says so (proof.py)
    assert compiled == {
        ("named", "raising"): True,
        ("named", "wrong"): True,
        ("twice", "wrong"): True,
        ("E", "raising"): True,
        ("E", "wrong"): False,
        ("Oops", "raising"): True,  # a one-line constructor: split after its super(msg);
        ("Oops", "wrong"): True,
    }


def test_a_cpp_pointer_result_defined_outside_its_class_is_named_and_typed_apart():
    text = "struct S { char* parse(char* p); };\n\nchar* S::parse(char* p) {\n    return p + 1;\n}\n"
    (fn,) = functions(text, "s.cc", "cpp", min_lines=1, documented=False)
    assert (fn.name, fn.kind) == ("S::parse", "char *")
    assert "auto ferry_r = [&]() -> char * {" in stub(fn, "wrong", text) and "return nullptr;" in stub(
        fn, "wrong", text
    )
    text = 'struct S { const char* name() const; };\n\nstatic const char* S::name() const {\n    return "s";\n}\n'
    (fn,) = functions(text, "s.cc", "cpp", min_lines=1, documented=False)
    assert fn.kind == "const char *"  # the qualifier kept, the storage class not


def test_a_header_only_cpp_library_s_functions_are_read(tmp_path):
    from ferrylm.eval.repo.tasks import source_functions

    (tmp_path / "lib.hpp").write_text("#pragma once\n\ninline int twice(int x) {\n    return 2 * x;\n}\n")
    assert [f.name for f in source_functions(tmp_path, "cpp")] == ["twice"]
    # .h says neither C nor C++: a C++ repository's are C++ (picojson.h), another language's are not read
    (tmp_path / "json.h").write_text("#pragma once\n\ninline bool is_open(char c) {\n    return c == '{';\n}\n")
    assert sorted(f.name for f in source_functions(tmp_path, "cpp")) == ["is_open", "twice"]
    assert source_functions(tmp_path, "go") == []


@pytest.mark.integration
def test_a_repository_written_with_crlf_line_ends_is_found_and_scored(tmp_path):
    """A file's offsets and hash are of its bytes as written: CRLF files score too (tinyxml2 is one)."""
    repo = _python_repo(tmp_path / "crlf")
    lib = repo / "pkg" / "__init__.py"
    lib.write_bytes(lib.read_bytes().replace(b"\n", b"\r\n"))
    found = find_tasks(repo, only={"pkg/__init__.py::add"})
    assert [t["name"] for t in found.tasks] == ["add"], found.summary()
    rows = [("crlf/pkg/__init__.py::add", "    return a + b\n"), ("crlf/pkg/__init__.py::add", "    return a - b\n")]
    assert _passed(repo, found, tmp_path, rows) == [True, False]


def test_a_cpp_reply_that_repeats_an_out_of_class_definition_gives_its_body():
    from ferrylm.eval.repo.splice import body_from_reply

    task = {"language": "cpp", "prompt": "bool S::on(const char* s, int* v) {"}
    reply = "```cpp\nbool S::on(const char* s, int* v) {\n    *v = 1;\t// set %d\n    return s != nullptr;\n}\n```"
    assert body_from_reply(task, reply) == "\n    *v = 1;\t// set %d\n    return s != nullptr;\n}\n"
    # a call of its own name on a member inside the body is no repeated signature (tinyxml2's Accept)
    task = {"language": "cpp", "prompt": "bool D::Accept(V* v) const\n{"}
    body = "\n    for (N* n = first; n; n = n->next) {\n        if (!n->Accept(v)) {\n            break;\n        }\n    }\n    return true;\n}\n"
    assert body_from_reply(task, body) == body
