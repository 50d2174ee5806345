"""The first look at a repository's tests: which of its functions they call at all (each function's first
start for Python, Go's coverage profile; none for the other languages), outside the sandbox on a copy. A cheap filter
before the blanking (tasks.py), which alone decides what is proven."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ...log import get_logger
from . import runner
from .facts import RepoFacts
from .reason import first_error

log = get_logger("eval")

# Each function of the repository noted once: Python 3.12's sys.monitoring reports a function's start and is then
# switched off for it (near no cost); before 3.12 a trace function on calls only (a profiler would also see
# every builtin call: more_itertools' suite ran over 10 minutes under one).
_PY_TRACER = """
import atexit, json, os, sys, threading
_root, _seen, _codes = os.environ["FERRYLM_TRACE_ROOT"], set(), set()
def _note(code):
    if code not in _codes:
        _codes.add(code)
        if code.co_filename.startswith(_root):
            _seen.add((os.path.relpath(code.co_filename, _root), getattr(code, "co_qualname", code.co_name)))
_m = getattr(sys, "monitoring", None)
_tool = next((t for t in (_m.PROFILER_ID, 3, 4) if _m.get_tool(t) is None), None) if _m else None
if _tool is not None:
    def _start(code, offset):
        _note(code)
        return _m.DISABLE
    _m.use_tool_id(_tool, "ferrylm-trace")
    _m.register_callback(_tool, _m.events.PY_START, _start)
    _m.set_events(_tool, _m.events.PY_START)
else:
    def _trace(frame, event, arg):
        _note(frame.f_code)  # called on 'call' events only; None: no tracing inside the frame
    sys.settrace(_trace)
    threading.settrace(_trace)
atexit.register(lambda: json.dump(sorted(_seen), open(os.environ["FERRYLM_TRACE_OUT"], "w")))
"""


def called(facts: RepoFacts, command: str, name: str, timeout_s: float, deps: str | None = None) -> set[str] | None:
    """The ids (file::name) of the functions the suite (`command`) calls, or None when that could not be seen
    (then every function goes on to the blanking, which decides alone)."""
    repo, language = facts.path, facts.language
    if language not in ("python", "go"):
        return None  # no cheap coverage for Rust, Java or C++ here
    with tempfile.TemporaryDirectory(prefix="ferrylm-trace-") as tmp:
        try:
            if facts.std_package:  # run in place: GOROOT is not written
                return _go_called(repo, Path(tmp), timeout_s, facts.std_package)
            copy = Path(tmp) / "r"
            shutil.copytree(repo, copy, symlinks=True, ignore=shutil.ignore_patterns(".git"))
            if language == "python":
                return _py_called(copy, command, Path(tmp), timeout_s, deps)
            return _go_called(copy, Path(tmp), timeout_s)
        except (OSError, subprocess.SubprocessError, ValueError) as e:
            log.info(
                "repo tasks: %s: which functions its tests call was not seen (%s); blanking decides alone",
                name,
                str(e).splitlines()[0][:200] if str(e) else type(e).__name__,
            )
            return None


def _py_called(copy: Path, command: str, tmp: Path, timeout_s: float, deps: str | None = None) -> set[str]:
    (tmp / "trace").mkdir()
    (tmp / "trace" / "sitecustomize.py").write_text(_PY_TRACER)
    (tmp / "bin").mkdir()
    for name in ("python", "python3"):
        os.symlink(sys.executable, tmp / "bin" / name)
    (tmp / "bin" / "pytest").write_text(f'#!/bin/sh\nexec {sys.executable} -m pytest "$@"\n')
    (tmp / "bin" / "pytest").chmod(0o755)
    # the sandbox's path (runner._prelude): the repository (src/ first), then this interpreter's packages
    own = [*([str(copy / "src")] if (copy / "src").is_dir() else []), str(copy)]
    paths = [str(tmp / "trace"), *own, *([deps] if deps else []), *runner.site_dirs(), *own]
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST"))},
        "PATH": f"{tmp / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join(paths),
        "FERRYLM_TRACE_ROOT": str(copy),
        "FERRYLM_TRACE_OUT": str(tmp / "called.json"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    done = subprocess.run(
        ["/bin/sh", "-c", command], cwd=copy, env=env, capture_output=True, text=True, timeout=3 * timeout_s
    )
    if done.returncode:  # a trace of a failed run would drop every function it did not reach
        raise ValueError(f"the traced run failed: {first_error(done.stdout + done.stderr)}")
    called = {f"{f}::{q}" for f, q in json.loads((tmp / "called.json").read_text())}
    if all(c.endswith("::<module>") for c in called):
        raise ValueError("the traced run called no function of the repository")
    return called


def _go_called(root: Path, tmp: Path, timeout_s: float, package: str | None = None) -> set[str]:
    """Go's coverage profile of the module's tests at `root` (a copy; `package`: that standard-library
    package's own tests, in place)."""
    env = {**os.environ, **runner.GO_VARS, "GOCACHE": str(tmp / "gocache"), "GOPATH": str(tmp / "gopath")}
    profile = tmp / "cover.out"
    subprocess.run(
        ["go", "test", "-count=1", f"-coverprofile={profile}", "."]
        if package
        else ["go", "test", "-count=1", "-coverpkg=./...", f"-coverprofile={profile}", "./..."],
        cwd=root,
        env=env,
        capture_output=True,
        timeout=3 * timeout_s,
    )
    listing = subprocess.run(
        ["go", "tool", "cover", f"-func={profile}"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    module = package or re.search(r"^module\s+(\S+)", (root / "go.mod").read_text(), re.M).group(1)
    called = set()
    for line in listing.splitlines():
        m = re.match(r"(\S+?):\d+:\s+(\S+)\s+([\d.]+)%", line)
        if m and float(m.group(3)) > 0:
            called.add(f"{m.group(1).removeprefix(module + '/')}::{m.group(2)}")
    return called
