"""The build tool a repository's tests run with in the sandbox is named with its version, and a user whose PATH
runs another (rustup's cargo before Debian's) is told which runs."""

import os
import shutil

from ferrylm.eval.repo import toolchain


def test_python_names_no_tool_and_a_tool_on_the_sandbox_path_is_named_with_its_version():
    assert toolchain.named("python") == toolchain.Toolchain(None)
    jail = shutil.which("g++", path=toolchain.JAIL_PATH)
    named = toolchain.named("cpp").runs
    assert named == (f"{toolchain.version(jail)} ({jail})" if jail else "no g++ in /usr/bin:/bin")
    if jail:
        assert "g++" in named and "version unknown" not in named


def test_another_tool_first_on_the_users_path_is_named_beside_the_sandboxs(tmp_path, monkeypatch):
    fake = tmp_path / "cargo"
    fake.write_text("#!/bin/sh\necho 'cargo 9.9.9 (rustup)'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    named = toolchain.named("rust")
    jail = shutil.which("cargo", path=toolchain.JAIL_PATH)
    assert named.runs == (f"{toolchain.version(jail)} ({jail})" if jail else "no cargo in /usr/bin:/bin")
    assert f"your PATH's cargo is {fake} (cargo 9.9.9 (rustup)), but the sandbox runs" in named.other
    assert "gives no task" in named.other
