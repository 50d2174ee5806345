"""The traps a new user's repositories hold, each in a small repository made here: a docstring with a
fenced example, a tested one-liner, two Go types with one method name, a flaky test beside good ones, a
missing test dependency, a warnings-as-errors config, a virtual environment under /tmp, and what
`repo-tasks` says when every repository is skipped."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ferrylm.eval.repo import find_tasks, score

FENCED_LIB = '''
def scale(values, factor=2):
    """Multiply every value by a factor.

    ```pycon
    >>> scale([1, 2])
    [2, 4]
    ```
    """
    out = [v * factor for v in values]
    return out


def double(x):
    """Twice x."""
    return 2 * x
'''
FENCED_TESTS = """
from pkg import scale, double

def test_scale():
    assert scale([1, 2], 3) == [3, 6]

def test_double():
    assert double(4) == 8
"""


def _repo(root: Path, lib: str, tests: dict[str, str], extra: dict[str, str] | None = None) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text(lib)
    (root / "tests").mkdir()
    for name, text in tests.items():
        (root / "tests" / name).write_text(text)
    for name, text in (extra or {}).items():
        (root / name).write_text(text)
    return root


def _score(found, tmp_path: Path, rows) -> list[dict]:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in found.tasks))
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps({"task_id": t, "completion": c}) + "\n" for t, c in rows))
    out = score(tasks, samples)
    return [json.loads(line) for line in Path(out["results"]).read_text().splitlines()]


def _definition(repo: Path, task: dict) -> str:
    """The original whole definition, signature and docstring included, as a model would repeat it."""
    text = (repo / task["file"]).read_text()
    start = text.rfind("\ndef ", 0, task["start"]) + 1
    return text[start : task["end"]]


@pytest.mark.integration
def test_original_definitions_with_fenced_docstrings_and_one_liners_pass(tmp_path):
    repo = _repo(tmp_path / "fenced", FENCED_LIB, {"test_pkg.py": FENCED_TESTS})
    found = find_tasks(repo, runs=1)
    assert sorted(t["name"] for t in found.tasks) == ["double", "scale"], found.summary()
    rows = []
    for t in found.tasks:
        whole = _definition(repo, t)
        rows += [
            (t["task_id"], t["body"]),  # the body alone, unfenced
            (t["task_id"], f"```python\n{t['body']}```"),
            (t["task_id"], whole),  # the whole definition: its docstring's ```pycon is code, not a fence
            (t["task_id"], f"Here it is:\n```python\n{whole}```\nIt scales."),
        ]
    # a reply's imports above its function travel with the body (the file does not import operator)
    double = next(t["task_id"] for t in found.tasks if t["name"] == "double")
    rows.append(
        (double, '```python\nfrom operator import mul\n\n\ndef double(x):\n    """Twice."""\n    return mul(2, x)\n```')
    )
    results = _score(found, tmp_path, rows)
    assert all(r["passed"] for r in results), [r["result"] for r in results if not r["passed"]]


GO_TWO_RECEIVERS = """package idx

type SliceIndex struct{ k int }
type MapIndex struct{ k int }

// Key returns the slice index's key.
func (si SliceIndex) Key() int {
	x := si.k
	return x
}

// Key returns the map index's key, one past its own.
func (mi *MapIndex) Key() int {
	y := mi.k + 1
	return y
}
"""
GO_TWO_TESTS = """package idx

import "testing"

func TestKeys(t *testing.T) {
	if (SliceIndex{3}).Key() != 3 {
		t.Fatal("slice")
	}
	if (&MapIndex{3}).Key() != 4 {
		t.Fatal("map")
	}
}
"""


@pytest.mark.integration
def test_go_methods_of_one_name_on_two_receivers_are_two_tasks(tmp_path):
    repo = tmp_path / "gotwo"
    (repo / "idx").mkdir(parents=True)
    (repo / "go.mod").write_text("module example.com/gotwo\n\ngo 1.19\n")
    (repo / "idx" / "idx.go").write_text(GO_TWO_RECEIVERS)
    (repo / "idx" / "idx_test.go").write_text(GO_TWO_TESTS)
    found = find_tasks(repo, runs=1)
    ids = [t["task_id"] for t in found.tasks]
    assert sorted(ids) == ["gotwo/idx/idx.go::MapIndex.Key", "gotwo/idx/idx.go::SliceIndex.Key"], found.summary()
    prompts = {t["name"]: t["prompt"] for t in found.tasks}
    assert "func (si SliceIndex) Key() int" in prompts["SliceIndex.Key"]
    assert "func (mi *MapIndex) Key() int" in prompts["MapIndex.Key"]
    rows = [(t["task_id"], t["body"]) for t in found.tasks] + [(t["task_id"], "\treturn 0\n}\n") for t in found.tasks]
    # a whole-method reply whose import the file lacks: the import goes into the file with the body
    key = "gotwo/idx/idx.go::SliceIndex.Key"
    rows.append(
        (
            key,
            '```go\nimport "strconv"\n\nfunc (si SliceIndex) Key() int {\n\tn, _ := strconv.Atoi(strconv.Itoa(si.k))\n\treturn n\n}\n```',
        )
    )
    assert [r["passed"] for r in _score(found, tmp_path, rows)] == [True, True, False, False, True]


def test_repo_tasks_exits_non_zero_when_no_task_was_written(tmp_path):
    repo = _repo(tmp_path / "none", FENCED_LIB, {})
    done = subprocess.run(
        [sys.executable, "-m", "ferrylm", "eval", "repo-tasks", str(repo), "-o", str(tmp_path / "t.jsonl")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-1500:]
    assert "no task was written: every repository was skipped" in done.stderr
    assert "--test" in done.stderr and "`test:` in the manifest" not in done.stderr


FLAKY_BESIDE = """
import os
from pkg import scale, double

def test_scale():
    assert scale([1, 2], 3) == [3, 6]

def test_double():
    assert double(4) == 8

def test_flaky():
    path = COUNT
    n = int(open(path).read()) + 1 if os.path.exists(path) else 1
    open(path, "w").write(str(n))
    assert n > 1  # fails on its first run only
"""


@pytest.mark.integration
def test_a_flaky_test_is_left_out_alone_and_its_file_keeps_the_others(tmp_path):
    """Unconfined (the count must outlive each run)."""
    flaky = FLAKY_BESIDE.replace("COUNT", repr(str(tmp_path / "count")))
    repo = _repo(tmp_path / "flaky", FENCED_LIB, {"test_pkg.py": flaky})
    found = find_tasks(repo, unconfined=True, workers=1)
    assert found.deselected == ["tests/test_pkg.py::test_flaky"], found.summary()
    assert sorted(t["name"] for t in found.tasks) == ["double", "scale"], found.summary()
    assert all("--deselect tests/test_pkg.py::test_flaky" in t["command"] for t in found.tasks)


BROKEN_BESIDE = """
from pkg import scale, double

def test_scale_fast(benchmark):  # a plugin's fixture that is not installed: both fail, the file is left out
    benchmark(scale, [1])

def test_double_fast(benchmark):
    benchmark(double, 1)
"""


@pytest.mark.integration
def test_a_function_named_in_a_test_file_left_out_is_still_tried_on_the_tests_that_run(tmp_path):
    """A test file that fails as checked out (a missing plugin) is left out of the suite; a function it names is
    tried on the other files' tests alone, never on the left-out file's (its node ids would run nothing)."""
    repo = _repo(tmp_path / "r", FENCED_LIB, {"test_pkg.py": FENCED_TESTS, "test_bench.py": BROKEN_BESIDE})
    found = find_tasks(repo, workers=2)
    assert found.deselected == ["tests/test_bench.py"], found.summary()
    assert sorted(t["name"] for t in found.tasks) == ["double", "scale"], found.summary()
    assert all(t["tests"] == [f"tests/test_pkg.py::test_{t['name']}"] for t in found.tasks), found.tasks


def _wheel(folder: Path, name: str, code: str, entry_points: str = "") -> Path:
    """A one-module wheel made by hand (no index, no build): what a team's wheel cache holds."""
    import zipfile

    whl = folder / f"{name}-1.0-py3-none-any.whl"
    info = f"{name}-1.0.dist-info"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr(f"{name}/__init__.py", code)
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        if entry_points:
            z.writestr(f"{info}/entry_points.txt", entry_points)
        z.writestr(f"{info}/RECORD", "")
    return whl


def test_a_pytest_command_is_known_behind_environment_assignments_and_as_a_module():
    from ferrylm.eval.repo import suite

    for command in ("pytest -q", "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 pytest -q", "A=1 B= python -m pytest tests"):
        assert suite.pytest_command(command), command
    for command in ("python -m unittest discover", "go test ./...", "echo pytest", "pytest 'unbalanced", "A=1"):
        assert not suite.pytest_command(command), command
    assert suite.narrowed("A=1 pytest -q", "python", ["t.py::test_x"]) == "A=1 pytest -q t.py::test_x"


HOSTILE_PLUGIN = """
def pytest_collection_modifyitems(items):  # as pytest-benchmark met a project's own `benchmark` fixture
    raise RuntimeError("a plugin this project never asked for")
"""


@pytest.mark.integration
def test_a_suite_broken_only_by_a_pytest_plugin_installed_beside_it_runs_without_the_plugins(tmp_path):
    """The plugin is autoloaded by its entry point (installed as a test requirement here, as pytest-benchmark sat
    in a system environment): the suite fails as checked out, passes without autoloaded plugins, and its tasks are
    found and scored that way; the sandbox's own pytest hook (`-p`) still loads."""
    repo = _repo(tmp_path / "plugged", FENCED_LIB, {"test_pkg.py": FENCED_TESTS})
    whl = _wheel(
        tmp_path, "hostile_plugin_for_tests", HOSTILE_PLUGIN, "[pytest11]\nhostile = hostile_plugin_for_tests\n"
    )
    found = find_tasks(repo, runs=1, test_requires=[str(whl)])
    assert found.skipped is None, found.skipped
    assert sorted(t["name"] for t in found.tasks) == ["double", "scale"], found.summary()
    assert all(t["command"].startswith("PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 pytest ") for t in found.tasks), found.tasks
    assert all(t["command"].endswith(f" tests/test_pkg.py::test_{t['name']}") for t in found.tasks), found.tasks
    results = _score(found, tmp_path, [(t["task_id"], t["body"]) for t in found.tasks])
    assert all(r["passed"] for r in results), results
    wrong = _score(found, tmp_path, [(t["task_id"], "    return None\n") for t in found.tasks])
    assert not any(r["passed"] for r in wrong), wrong


NEEDS_DEP = """
import fakedep_for_tests
from pkg import scale, double

def test_scale():
    assert scale([1, 2], fakedep_for_tests.THREE) == [3, 6]

def test_double():
    assert double(4) == 8
"""


@pytest.mark.integration
def test_a_missing_test_dependency_is_named_and_test_requires_installs_it(tmp_path):
    repo = _repo(tmp_path / "needs", FENCED_LIB, {"test_pkg.py": NEEDS_DEP})
    skipped = find_tasks(repo, runs=1)
    assert "ModuleNotFoundError: No module named 'fakedep_for_tests'" in skipped.skipped, skipped.skipped
    assert "\x1b[" not in skipped.skipped and f"to see it: cd {repo} && PYTHONPATH=. pytest" in skipped.skipped
    assert "--test-requires" in skipped.skipped
    whl = _wheel(tmp_path, "fakedep_for_tests", "THREE = 3\n")
    found = find_tasks(repo, runs=1, test_requires=[str(whl)])
    assert sorted(t["name"] for t in found.tasks) == ["double", "scale"], found.summary()
    results = _score(found, tmp_path, [(t["task_id"], t["body"]) for t in found.tasks])
    assert all(r["passed"] for r in results), results


REFUSES_PROFILERS = """
import sys

def pytest_configure(config):
    if sys.getprofile() is not None:  # a suite that will not run under a profiler
        raise SystemExit(3)
"""


@pytest.mark.integration
def test_a_failed_call_trace_is_not_read_as_no_test_calls_anything(tmp_path):
    repo = _repo(tmp_path / "noprof", FENCED_LIB, {"test_pkg.py": FENCED_TESTS, "conftest.py": REFUSES_PROFILERS})
    found = find_tasks(repo, runs=1)
    assert "no test calls it" not in found.dropped, found.summary()
    assert sorted(t["name"] for t in found.tasks) == ["double", "scale"], found.summary()


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="the sandbox's python is a virtual environment's there")
def test_the_sandbox_runs_the_virtual_environment_s_python_without_the_base_interpreter_s_packages(tmp_path):
    """A pytest plugin installed in the base interpreter (pytest-benchmark, say) broke a suite in the sandbox that
    passed outside it: the sandbox's python is the environment's own, as outside."""
    import site

    from ferrylm.eval.repo import runner
    from ferrylm.eval.repo.facts import facts_of

    base = site.getsitepackages([sys.base_prefix])
    repo = tmp_path / "r"
    repo.mkdir()
    (repo / "check.py").write_text(
        f"import sys\nassert sys.prefix == {sys.prefix!r}, sys.prefix\nassert not set(sys.path) & set({base!r})\n"
    )
    with runner.sandbox(facts_of(repo, "python", "python check.py"), 60, 1) as box:
        assert runner.run(box, "python check.py").status == "passed"


@pytest.mark.skipif(importlib.util.find_spec("anyio") is None, reason="anyio is not installed here")
def test_anyio_s_plugin_loads_where_the_repository_names_anyio_and_only_there(tmp_path):
    """anyio's pytest plugin costs each start of pytest half its time: the sandbox leaves it out unless the
    repository names anyio."""
    from ferrylm.eval.repo import runner
    from ferrylm.eval.repo.facts import facts_of

    repo = tmp_path / "r"
    repo.mkdir()
    test = "def test_plugin(pytestconfig):\n    assert {}pytestconfig.pluginmanager.has_plugin({})\n"
    (repo / "test_plugin.py").write_text(test.format("not ", '"any" + "io"'))  # the name nowhere in the repository
    with runner.sandbox(facts_of(repo, "python", "pytest -q"), 60, 1) as box:
        assert runner.run(box, "pytest -q").status == "passed"
        (repo / "test_plugin.py").write_text(test.format("", '"anyio"'))
        assert runner.run(box, "pytest -q").status == "passed"
