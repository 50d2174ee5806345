"""Real projects with their own tests, one per language the Makefile installs one for (Rust: a Debian crate; Java and
C++: Debian's source tarballs, `make real-projects`): the finder keeps the tasks their tests prove, and every original
passes when given back as a reply, alone and as the whole function."""

import json
import shutil
from pathlib import Path

import pytest

from ferrylm.eval.repo.splice import score
from ferrylm.eval.repo.tasks import find_tasks

STRSIM = Path("/usr/share/cargo/registry/strsim-0.10.0")  # Debian's librust-strsim-dev (make toolchains)
REAL = Path(__file__).parents[2] / ".cache/ferrylm/real-projects"  # make real-projects
JUNIT = "/usr/share/java/junit4.jar:/usr/share/java/hamcrest-core.jar"  # Debian's junit4 (make toolchains)
OVERLOADS = "two or more functions of its name in its file (overloads): no id tells them apart"


def originals_pass(tmp_path: Path, tasks_found: list[dict]) -> dict:
    """Each task's original body given back as its reply, scored by the project's own tests."""
    tasks, samples = tmp_path / "tasks.jsonl", tmp_path / "samples.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in tasks_found))
    samples.write_text(
        "".join(json.dumps({"task_id": t["task_id"], "completion": t["body"]}) + "\n" for t in tasks_found)
    )
    return score(tasks, samples)


@pytest.mark.slow
@pytest.mark.skipif(
    not STRSIM.is_dir() or shutil.which("cargo") is None, reason="librust-strsim-dev or cargo is not installed"
)
def test_a_real_crate_strsim_gives_its_tasks_and_its_originals_pass(tmp_path):
    repo = tmp_path / "strsim"
    shutil.copytree(STRSIM, repo)
    found = find_tasks(repo, workers=2)
    names = {t["name"] for t in found.tasks}
    # hamming returns an alias of a Result, bigrams an impl Iterator: both are tasks
    assert {"hamming", "generic_hamming", "bigrams", "levenshtein", "jaro_winkler"} <= names, found.summary()
    assert len(names) >= 14 and not any(c["id"].startswith("benches/") for c in found.considered)
    assert found.dropped.get("its body is longer than 40 lines") == 1  # generic_jaro, listed with its reason
    out = originals_pass(tmp_path, found.tasks)
    assert out["passed_samples"] == len(found.tasks), out


@pytest.mark.slow
@pytest.mark.skipif(
    not (REAL / "jargs-1.0").is_dir() or not Path(JUNIT.split(":")[0]).is_file() or shutil.which("javac") is None,
    reason="make real-projects, junit4 or javac missing",
)
def test_a_real_java_project_jargs_gives_its_tasks_and_its_originals_pass(tmp_path):
    repo = tmp_path / "jargs"
    shutil.copytree(REAL / "jargs-1.0", repo)
    suites = "jargs.test.gnu.CmdLineParserTestCase jargs.test.gnu.CustomOptionTestCase"  # JUnit 3 cases, run by JUnit 4
    command = (
        f"rm -rf .o && mkdir .o && javac -nowarn -d .o -cp {JUNIT} $(find src -name '*.java')"
        f" && java -cp .o:{JUNIT} org.junit.runner.JUnitCore {suites}"
    )
    found = find_tasks(repo, command=command, workers=2, limit=6)
    assert len(found.tasks) == 6, found.summary()
    # methods named with their class; CmdLineParser's overloaded addOption and getOptionValue are listed, not tasks
    assert all("." in t["name"] for t in found.tasks) and found.dropped.get(OVERLOADS, 0) >= 10, found.summary()
    out = originals_pass(tmp_path, found.tasks)
    assert out["passed_samples"] == 6, out


@pytest.mark.slow
@pytest.mark.skipif(
    not (REAL / "tinyxml2-9.0.0").is_dir() or shutil.which("g++") is None, reason="make real-projects or g++ missing"
)
def test_a_real_cpp_library_tinyxml2_with_crlf_files_gives_its_tasks_and_its_originals_pass(tmp_path):
    repo = tmp_path / "tinyxml2"
    shutil.copytree(REAL / "tinyxml2-9.0.0", repo)
    assert b"\r\n" in (repo / "tinyxml2.cpp").read_bytes()  # its offsets are the bytes scoring splices at
    found = find_tasks(repo, command="g++ -O0 -o .t tinyxml2.cpp xmltest.cpp && ./.t", workers=2, limit=6)
    assert len(found.tasks) == 6, found.summary()
    out = originals_pass(tmp_path, found.tasks)
    assert out["passed_samples"] == 6, out
