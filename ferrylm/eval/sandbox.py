"""Run untrusted generated code, contained (see jail.py for the confinement itself).

Each program gets a fresh work directory owned by its slot's uid, a clean environment, CPU-time,
address-space, file-size, open-file and process-count limits, and a wall-clock timeout after which
its whole process group is killed. Slots give concurrent programs different uids, so one program's
fork bomb cannot use up another's process budget.
"""
from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

_JAIL = str(Path(__file__).with_name("jail.py"))
_BASE_UID = 61000


@dataclass
class Outcome:
    status: str      # 'passed', 'timed out' or 'failed: <last stderr line>'
    isolation: str   # 'namespaces+uid', 'namespaces', 'limits+uid' or 'limits'


class Sandbox:
    def __init__(self, slots: int = 2, timeout_s: float = 10.0, memory_mb: int = 1024, file_mb: int = 16,
                 nproc: int = 64):
        self.timeout_s, self.memory_mb, self.file_mb, self.nproc = timeout_s, memory_mb, file_mb, nproc
        self._slots: queue.Queue[int] = queue.Queue()
        for i in range(slots):
            self._slots.put(_BASE_UID + i)
        self._base = Path(tempfile.mkdtemp(prefix="ferrylm-exec-"))
        os.chmod(self._base, 0o711)  # slots may enter their own dir, but not list the others

    def close(self) -> None:
        shutil.rmtree(self._base, ignore_errors=True)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(self, code: str) -> Outcome:
        uid = self._slots.get()
        try:
            return self._run(code, uid)
        finally:
            self._slots.put(uid)

    def _run(self, code: str, uid: int) -> Outcome:
        workdir = Path(tempfile.mkdtemp(dir=self._base))
        try:
            (workdir / "program.py").write_text(code)
            if os.geteuid() == 0:
                os.chown(workdir, uid, uid)
                os.chown(workdir / "program.py", uid, uid)
            args = [sys.executable, "-I", "-S", "-B", _JAIL, str(workdir), str(uid), str(int(self.timeout_s) + 1),
                    str(self.memory_mb << 20), str(self.file_mb << 20), str(self.nproc)]
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, start_new_session=True)
            try:
                _, err = proc.communicate(timeout=self.timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # whatever it forked goes too
                except (ProcessLookupError, PermissionError):
                    pass
            if timed_out:
                err = proc.communicate()[1]
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        lines = err.decode(errors="replace").splitlines()
        isolation = lines.pop(0).removeprefix("ferrylm-jail: ") if lines and lines[0].startswith("ferrylm-jail: ") else "none"
        if timed_out:
            return Outcome("timed out", isolation)
        if proc.returncode == 0:
            return Outcome("passed", isolation)
        last = next((ln for ln in reversed(lines) if ln.strip()), f"exit code {proc.returncode}")
        return Outcome(f"failed: {last}", isolation)


def run_program(code: str, timeout_s: float = 10.0, memory_mb: int = 1024, file_mb: int = 16) -> str:
    """One program in a one-slot sandbox; returns the status string."""
    with Sandbox(1, timeout_s, memory_mb, file_mb) as box:
        return box.run(code).status
