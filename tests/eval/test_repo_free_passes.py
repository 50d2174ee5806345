"""No free passes and no lost tasks: a function whose tests a constant body passes is no task, a property's
getter and setter are two tasks, Go stubs compile (imports only the body uses, named and struct results), a test
file that cannot be collected is left out alone, and a usage error's reason names the option it refused."""

import json
import shutil
from pathlib import Path

import pytest

from ferrylm.eval.repo import find_tasks
from ferrylm.eval.repo.functions import constant_stubs, stub
from ferrylm.eval.repo.tasks import write_tasks
from ferrylm.eval.repo.wrong_values import go_results
from ferrylm.source.spans import functions

PY_LIB = '''
class Version:
    def __init__(self, major):
        self._major = major

    @property
    def major(self):
        """The major number."""
        return self._major

    @major.setter
    def major(self, value):
        """Set the major number; never below zero."""
        if value < 0:
            raise ValueError(value)
        self._major = value


def needs_encoding(value):
    """Whether the text holds a character beyond ASCII."""
    text = str(value)
    return any(ord(c) > 127 for c in text)


def is_plain(value) -> bool:
    """Whether the text is plain ASCII."""
    text = str(value)
    return all(ord(c) < 128 for c in text)


def double(x):
    """Twice x."""
    y = x * 2
    return y


def pending(jobs) -> int:
    """How many jobs are still to run."""
    left = [j for j in jobs if j]
    return len(left)
'''
PY_TESTS = """
import pytest
from pkg import Version, double, is_plain, needs_encoding, pending

def test_major():
    v = Version(3)
    assert v.major == 3
    v.major = 5
    assert v.major == 5

def test_major_never_negative():
    with pytest.raises(ValueError):
        Version(1).major = -1

def test_needs_encoding():
    assert not needs_encoding("abc")  # only ever a falsy answer: `return None` passes

def test_is_plain():
    assert is_plain("abc") is True  # `return False` fails, `return True` is no constant a model writes first

def test_double():
    assert double(2) == 4

def test_pending_drains():
    while pending([]) != 0:  # `return None` never leaves the loop; `return 0` passes
        pass
"""
# collected with the project's `filterwarnings = error`: the deprecation is an error, the file fails to collect
PY_BROKEN = """
import warnings
warnings.warn("this helper is deprecated", DeprecationWarning)

def test_never_collected():
    assert True
"""


def _py_repo(root: Path, ini: str = "[pytest]\nfilterwarnings =\n    error\n") -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text(PY_LIB)
    (root / "tests").mkdir()
    (root / "tests" / "test_pkg.py").write_text(PY_TESTS)
    (root / "tests" / "test_old.py").write_text(PY_BROKEN)
    (root / "pytest.ini").write_text(ini)
    return root


def test_a_property_getter_and_its_setter_are_two_functions_with_their_own_spans():
    found = {f.name: f for f in functions(PY_LIB, "pkg/__init__.py", "python", min_lines=1)}
    assert {"Version.major", "Version.major.setter"} <= set(found)
    getter, setter = found["Version.major"], found["Version.major.setter"]
    assert getter.body.strip() == "return self._major" and "self._major = value" in setter.body
    assert getter.end <= setter.start  # the getter's span is its own, not the setter's end
    blanked = stub(getter, "raising", PY_LIB)
    assert "raise NotImplementedError" in blanked.split("@major.setter")[0]  # the getter is blanked, not the setter


def test_constant_bodies_are_the_ones_a_broken_model_writes_first():
    found = {f.name: f for f in functions(PY_LIB, "pkg/__init__.py", "python", min_lines=1)}
    bodies = [b for b, _ in constant_stubs(found["is_plain"], PY_LIB)]
    # None first, then the annotation's zero value, then the rest once each
    assert bodies == ["return None", "return False", "return 0", 'return ""', "return []", "return {}"]
    assert constant_stubs(found["Version.major.setter"], PY_LIB) == []  # its wrong stub returns None already
    go = (
        "package p\n\n// Cmp compares.\nfunc Cmp(a, b string) (equal, prefix bool, n struct{ A, B int }, err error) {\n"
    )
    go += "\tequal = a == b\n\treturn\n}\n"
    (fn,) = functions(go, "p.go", "go", min_lines=1)
    assert [b for b, _ in constant_stubs(fn, go)] == ["return false, false, *new(struct{ A, B int }), nil"]


def test_go_results_are_read_by_the_grammar():
    assert go_results("(equal, visited bool)") == ["bool", "bool"]
    assert go_results("(s struct{ NI, NX, NY, NM int })") == ["struct{ NI, NX, NY, NM int }"]
    assert go_results("(f func(a, b int) int, err error)") == ["func(a, b int) int", "error"]
    assert go_results("*T") == ["*T"]


def test_a_go_one_liner_is_a_candidate():
    go = "package p\n\n// Name is the field's name.\nfunc (sf StructField) Name() string { return sf.name }\n"
    (fn,) = functions(go, "p.go", "go", min_lines=1)
    assert fn.name == "StructField.Name" and fn.body.strip() == "return sf.name }"


@pytest.mark.integration
def test_python_free_passes_are_dropped_and_a_broken_test_file_is_left_out_alone(tmp_path):
    repo = _py_repo(tmp_path / "semver")
    out = tmp_path / "tasks.jsonl"
    (found,) = write_tasks([str(repo)], out, runs=1)
    assert found.skipped is None and found.deselected == ["tests/test_old.py"]  # the file, not the repository
    assert sorted(t["name"] for t in found.tasks) == [
        "Version.__init__",  # no doc comment: asked with its file shown, a task like the others
        "Version.major",
        "Version.major.setter",
        "double",
        "is_plain",
    ]
    # needs_encoding; pending, whose `return None` hangs its test: each constant has its own time limit
    assert found.dropped == {"its tests pass with `return None`": 1, "its tests pass with `return 0`": 1}
    verdicts = {c["id"]: c for c in map(json.loads, Path(f"{out}.functions.jsonl").read_text().splitlines())}
    assert verdicts["pkg/__init__.py::needs_encoding"]["reason"] == "its tests pass with `return None`"
    assert verdicts["pkg/__init__.py::is_plain"]["verdict"] == "task"
    assert len(verdicts) == 7  # every function considered is listed with its verdict


@pytest.mark.integration
def test_a_usage_error_names_the_option_and_how_to_install_its_plugin(tmp_path):
    repo = _py_repo(tmp_path / "cli", ini="[pytest]\naddopts = --no-cov-on-fail\n")
    found = find_tasks(repo, runs=1)
    assert "unrecognized arguments: --no-cov-on-fail" in found.skipped
    assert "--test-requires" in found.skipped and "PYTHONPATH=." in found.skipped  # shown on its own code


GO_LIB = """package strs

import "strings"

// Upper returns s in capitals.
func Upper(s string) string {
	return strings.ToUpper(s)
}

// Compare says whether a equals b and whether b is a's prefix.
func Compare(a, b string) (equal, prefix bool) {
	equal = a == b
	prefix = strings.HasPrefix(a, b)
	return
}

// Counts counts a text's words and runes.
func Counts(s string) (c struct{ Words, Runes int }) {
	c.Words = len(strings.Fields(s))
	c.Runes = len([]rune(s))
	return c
}

// IsBlank reports whether s holds only spaces.
func IsBlank(s string) bool {
	t := strings.TrimSpace(s)
	return len(t) == 0
}
"""
GO_TESTS = """package strs

import "testing"

func TestUpper(t *testing.T) {
	if Upper("ab") != "AB" {
		t.Fatal("Upper")
	}
}

func TestCompare(t *testing.T) {
	if e, p := Compare("ab", "a"); e || !p {
		t.Fatal("Compare ab a")
	}
	if e, p := Compare("a", "a"); !e || !p {
		t.Fatal("Compare a a")
	}
}

func TestCounts(t *testing.T) {
	if c := Counts("a bc"); c.Words != 2 || c.Runes != 4 {
		t.Fatal("Counts")
	}
}

func TestIsBlank(t *testing.T) {
	if IsBlank("x") { // only a false answer is ever checked: `return false` passes
		t.Fatal("IsBlank")
	}
}
"""


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("go") is None, reason="Go is not installed (make toolchains installs it as root)")
def test_go_stubs_compile_and_a_zero_value_pass_is_no_task(tmp_path):
    repo = tmp_path / "gostrs"
    (repo / "strs").mkdir(parents=True)
    (repo / "go.mod").write_text("module example.com/gostrs\n\ngo 1.19\n")
    (repo / "strs" / "strs.go").write_text(GO_LIB)
    (repo / "strs" / "strs_test.go").write_text(GO_TESTS)
    found = find_tasks(repo, runs=1)
    # Upper's body alone uses "strings"; Compare has named results, Counts a struct result
    assert sorted(t["name"] for t in found.tasks) == ["Compare", "Counts", "Upper"]
    assert found.dropped == {"its tests pass with `return false`": 1}
