"""The linter (ruff, configured in pyproject.toml: pyflakes, pycodestyle's errors, sorted imports,
syntax of the supported Pythons) finds nothing in the package, the tests or the benchmarks."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_linter_finds_nothing():
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "ferrylm", "tests", "bench"], cwd=ROOT,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
