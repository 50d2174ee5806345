"""The linter and the formatter (ruff, configured in pyproject.toml: pyflakes, pycodestyle's errors, sorted
imports, syntax of the supported Pythons; the formatter's layout) find nothing in the package, the tests
or the benchmarks."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff_finds_nothing(command):
    run = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "--no-cache", "ferrylm", "tests", "benchmarks", "studies"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
