"""Run untrusted generated code: its own process group, temp dir, clean environment and limits.

Each program gets a fresh temporary working directory, an isolated interpreter (`-I`: no user
site, no PYTHON* variables), CPU-time, address-space, file-size and core limits, and a wall-clock
timeout after which its whole process group is killed.
"""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import tempfile
from pathlib import Path


def _limits(cpu_s: int, memory_bytes: int, file_bytes: int):
    def apply() -> None:
        os.setsid()
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def run_program(code: str, timeout_s: float = 10.0, memory_mb: int = 1024, file_mb: int = 16) -> str:
    """'passed', 'timed out' or 'failed: <last stderr line>'."""
    with tempfile.TemporaryDirectory(prefix="ferrylm-exec-") as workdir:
        prog = Path(workdir) / "program.py"
        prog.write_text(code)
        proc = subprocess.Popen(
            [sys.executable, "-I", "-B", str(prog)], cwd=workdir, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8"},
            preexec_fn=_limits(int(timeout_s) + 1, memory_mb << 20, file_mb << 20),
        )
        try:
            _, err = proc.communicate(timeout=timeout_s)
            status = "passed" if proc.returncode == 0 else None
        except subprocess.TimeoutExpired:
            err, status = b"", "timed out"
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # whatever it forked goes too
            except ProcessLookupError:
                pass
            proc.wait()
    if status:
        return status
    lines = err.decode(errors="replace").strip().splitlines()
    return f"failed: {lines[-1] if lines else f'exit code {proc.returncode}'}"
