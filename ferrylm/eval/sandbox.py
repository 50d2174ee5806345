"""Run untrusted generated code, contained, through a pool of confined workers (see jail.py).

Each slot is one worker process, confined once (namespaces, limits) and forking a child per
program, which gets a fresh directory, a clean environment, CPU-time, address-space, file-size,
open-file and process-count limits, its slot's own uid, and a wall-clock timeout after which its
process group and everything running as its uid are killed. A worker that dies (a program killed
it, where it could) is replaced and that program counts as failed.
"""
from __future__ import annotations

import json
import queue
import secrets
import select
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_JAIL = str(Path(__file__).with_name("jail.py"))
_BASE_UID = 61000


@dataclass
class Outcome:
    status: str      # 'passed', 'timed out' or 'failed: <last stderr line>'
    isolation: str   # 'namespaces+uid', 'namespaces' or 'limits'


class _Worker:
    def __init__(self, uid: int, cpu_s: int, memory_bytes: int, file_bytes: int, nproc: int):
        # -S: no site-packages — programs see the standard library only, and start-up is faster.
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", _JAIL, str(uid), str(cpu_s), str(memory_bytes), str(file_bytes),
             str(nproc)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, start_new_session=True)
        hello = self._read(30)
        if hello is None:
            raise RuntimeError("the sandbox worker did not start")
        self.isolation = json.loads(hello)["isolation"]

    def _read(self, timeout: float) -> str | None:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        return line or None

    def run(self, code: str, timeout_s: float) -> str | None:
        """The program's status, or None if the worker died or stopped answering."""
        nonce = secrets.token_hex(8)
        try:
            self.proc.stdin.write(json.dumps({"nonce": nonce, "code": code, "timeout": timeout_s}) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        line = self._read(timeout_s + 30)
        if line is None:
            return None
        reply = json.loads(line)
        return reply["status"] if reply.get("nonce") == nonce else None

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


class Sandbox:
    def __init__(self, slots: int = 2, timeout_s: float = 10.0, memory_mb: int = 1024, file_mb: int = 16,
                 nproc: int = 64):
        self.timeout_s = timeout_s
        self._spec = (int(timeout_s) + 1, memory_mb << 20, file_mb << 20, nproc)
        self._idle: queue.Queue[tuple[int, _Worker]] = queue.Queue()
        for i in range(slots):
            self._idle.put((_BASE_UID + i, _Worker(_BASE_UID + i, *self._spec)))

    def close(self) -> None:
        while not self._idle.empty():
            self._idle.get()[1].close()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(self, code: str) -> Outcome:
        uid, worker = self._idle.get()
        try:
            status = worker.run(code, self.timeout_s)
            isolation = worker.isolation
            if status is None:
                worker.close()
                worker = _Worker(uid, *self._spec)
                status = "failed: the program killed or hung its sandbox worker"
            return Outcome(status, isolation)
        finally:
            self._idle.put((uid, worker))


def run_program(code: str, timeout_s: float = 10.0, memory_mb: int = 1024, file_mb: int = 16) -> str:
    """One program in a one-slot sandbox; returns the status string."""
    with Sandbox(1, timeout_s, memory_mb, file_mb) as box:
        return box.run(code).status
