"""A repository's facts, decided once where the finder or the scorer starts and carried as one value through the
sandbox, the runner, the tracer and the proof: its language, its test command, whether it is a package of Go's
standard library (run where it lies, GOROOT never written) and the toolchain the sandbox runs its tests with."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...source import go_std
from . import suite, toolchain


@dataclass(frozen=True)
class RepoFacts:
    path: Path  # the checkout, resolved
    language: str  # "python", "go", "rust", "java" or "cpp"
    command: str | None  # its test command: asked for, or detected (None: no tests found, or Java/C++ unnamed)
    std_package: str | None  # the import path of the Go standard-library package it is, else None
    toolchain: toolchain.Toolchain  # what the sandbox runs its tests with (None's for Python: ferrylm's interpreter)

    @property
    def in_place(self) -> bool:
        """Run where it lies rather than on a copy bound into the sandbox."""
        return self.std_package is not None


def facts_of(repo: Path, language: str, command: str | None = None) -> RepoFacts:
    """The facts of `repo` (a directory) read as `language`, `command` detected where none is named."""
    std = go_std.std_package(repo) if language == "go" else None
    command = command or suite.detect_command(repo, language, std)
    return RepoFacts(Path(repo), language, command, std, toolchain.named(language, Path(repo)))
