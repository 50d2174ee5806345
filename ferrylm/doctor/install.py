"""The install: every pinned package of the profile, and the torch build for this machine."""

from __future__ import annotations

from ..pins import installed_version as _version
from .facts import Check, Facts


def pin_checks(prof: str, reqs: list, gpu_reqs: list, installed=_version) -> list[Check]:
    """Every requirement of the profile met; under `system` (the machine's own environment kept), another
    version of a package is named, not failed, and so are the gpu profile's pins it leaves unmet."""
    out, met, kept = [], 0, 0
    for r in reqs:
        have = installed(r.name)
        if have is None:
            out.append(Check(f"package {r.name}", "fail", "not installed", f"make install (needs {r})"))
        elif not r.specifier.contains(have, prereleases=True):
            if prof == "system":
                out.append(
                    Check(
                        f"package {r.name}",
                        "warn",
                        f"{have} installed, ferrylm pins {r.specifier}: the machine's own version is kept",
                    )
                )
                kept += 1
            else:
                out.append(
                    Check(f"package {r.name}", "fail", f"{have} installed, ferrylm needs {r.specifier}", "make install")
                )
        else:
            met += 1
    if prof == "system":
        for r in gpu_reqs:
            have = installed(r.name)
            if have is None or not r.specifier.contains(have, prereleases=True):
                out.append(
                    Check(
                        f"pin {r.name}{r.specifier}",
                        "warn",
                        f"not honoured ({have or 'not installed'}): the machine's own "
                        "environment is kept; the suite runs on the pinned versions",
                    )
                )
    out.insert(
        0,
        Check(
            "packages",
            "ok" if met + kept == len(reqs) else "fail",
            f"{met}/{len(reqs)} requirements of the "
            f"'{prof}' install profile met" + (f", {kept} at the machine's own versions" if kept else ""),
        ),
    )
    return out


def flavour_check(f: Facts, prof: str) -> Check:
    if f.torch_version is None:
        return Check("torch", "fail", "not importable", "make install")
    build = f"torch {f.torch_version} ({'CUDA ' + f.torch_cuda if f.torch_cuda else 'CPU build'}), profile '{prof}'"
    if f.gpus_listed and (not f.torch_cuda or prof == "cpu"):
        return Check("torch", "fail", f"{build}: CPU build on a GPU machine", "rm -rf .venv && make install DEVICE=gpu")
    if f.torch_cuda and not f.gpus:
        return Check("torch", "warn", f"{build}, but no GPU is usable: training runs on the CPU")
    return Check("torch", "ok", build)
