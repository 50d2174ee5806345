"""A repository's tests run with the toolchain the user's shell runs (PATH's cargo, go, javac, g++; rustup's proxy
resolved), shown to the sandbox where it lies outside /usr, and named with its version."""

import os
import shutil
import subprocess

import pytest

from ferrylm.eval.execution.sandbox import bwrap_command
from ferrylm.eval.repo import runner, toolchain
from ferrylm.eval.repo.facts import facts_of


def test_python_names_no_tool_and_a_system_tool_is_named_with_its_version():
    assert toolchain.named("python") == toolchain.Toolchain(None)
    user = shutil.which("g++")
    named = toolchain.named("cpp")
    if user is None:
        assert named.runs == "no g++ on PATH" and "install one" in named.other
        return
    assert named.runs.endswith(f"({os.path.realpath(user)})") and "version unknown" not in named.runs
    assert named.root is None  # under /usr: the sandbox sees it already


def _fake_cargo(where):
    (where / "bin").mkdir(parents=True)
    fake = where / "bin" / "cargo"
    fake.write_text("#!/bin/sh\necho 'cargo 9.9.9 (a toolchain of its own)'\n")
    fake.chmod(0o755)
    return fake


def test_a_toolchain_first_on_the_users_path_is_the_one_named_and_shown_to_the_sandbox(tmp_path, monkeypatch):
    fake = _fake_cargo(tmp_path / "tc")
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    named = toolchain.named("rust")
    assert named == toolchain.Toolchain(
        f"cargo 9.9.9 (a toolchain of its own) ({fake})", bin=str(fake.parent), root=str(tmp_path / "tc")
    )


def test_no_toolchain_anywhere_is_one_line_saying_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(toolchain, "JAIL_PATH", str(tmp_path))
    named = toolchain.named("go")
    assert named.runs == "no go on PATH" and named.other == "no go on PATH: install one, or put its go first on PATH"


@pytest.mark.skipif(bwrap_command() is None, reason="bubblewrap is not usable here")
def test_the_sandbox_runs_the_users_toolchain_not_its_own(tmp_path, monkeypatch):
    fake = _fake_cargo(tmp_path / "tc")
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    repo = tmp_path / "crate"
    repo.mkdir()
    with runner.sandbox(facts_of(repo, "rust", "cargo test"), 60, 1) as box:
        assert runner.run(box, "cargo | grep -q 'cargo 9.9.9'").status == "passed"
        assert runner.run(box, "cargo | grep -q 'cargo 1'").status != "passed"


def _cargo_version(cargo: str) -> tuple[int, ...]:
    out = subprocess.run([cargo, "--version"], capture_output=True, text=True).stdout.split()
    return tuple(int(x) for x in out[1].split(".")[:2]) if len(out) > 1 else (0,)


@pytest.mark.integration
@pytest.mark.skipif(
    shutil.which("cargo") is None or _cargo_version(shutil.which("cargo")) < (1, 78),
    reason="no cargo of 1.78 or newer on PATH (rustup's): a version-4 Cargo.lock needs one",
)
def test_a_crate_whose_lock_only_the_users_cargo_reads_gives_its_tasks(tmp_path):
    from ferrylm.eval.repo.tasks import find_tasks
    from tests.eval.test_repo_tasks import RUST_LIB

    repo = tmp_path / "rsrepo"
    (repo / "src").mkdir(parents=True)
    (repo / "Cargo.toml").write_text('[package]\nname = "rsrepo"\nversion = "0.1.0"\nedition = "2021"\n')
    (repo / "src" / "lib.rs").write_text(RUST_LIB)
    (repo / "Cargo.lock").write_text('version = 4\n\n[[package]]\nname = "rsrepo"\nversion = "0.1.0"\n')
    found = find_tasks(repo, only={"src/lib.rs::bump_sum"})
    assert [t["name"] for t in found.tasks] == ["bump_sum"], found.summary()
    assert found.toolchain.startswith("cargo 1.") and "/usr/bin/cargo" not in found.toolchain
