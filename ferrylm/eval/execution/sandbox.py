"""Run untrusted generated code through a pool of sandboxed workers (the worker itself: sandbox.py).

Each slot is one worker started inside bubblewrap (Debian's `bubblewrap`, the sandbox Flatpak
relies on): its own root holding only /usr and the interpreter, read-only; a private /tmp and
/dev/shm; fresh /proc of its own pid namespace; no network, IPC or UTS namespace of the host; an
environment built from nothing (bwrap --clearenv, and the worker is a fresh exec, never a fork of
the evaluator, so none of the evaluator's memory or variables is inside). When the evaluator is
root, the worker keeps only the capabilities it needs to give each program its slot's own uid.
A worker that dies (a program killed it) is replaced and that program counts as failed.

Without bubblewrap the sandbox refuses to start, unless asked to run `unconfined` (resource limits
and a clean environment only, the host fully visible), which every outcome then records.
"""

from __future__ import annotations

import json
import os
import queue
import secrets
import select
import shutil
import subprocess
import sys
import threading
from contextlib import nullcontext
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ...errors import FerryError

_WORKER_SOURCE = Path(__file__).with_name("worker.py")
_BASE_UID = 61000
# Each sandbox of a machine claims its own block of uids (a lock file per block), so two evaluations at
# once never share a uid: its process limit and "no process left behind" stay each one's own.
_UID_BLOCK, _UID_BLOCKS = 64, 64
# Capabilities a root worker keeps: uid/gid changes and chown for its programs, killing their
# leftovers, removing what they left in the sticky /tmp.
_ROOT_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_CHOWN", "CAP_KILL", "CAP_FOWNER", "CAP_DAC_OVERRIDE")


class SandboxError(FerryError, RuntimeError):
    """The sandbox cannot start as asked; one line saying how to fix it."""


@dataclass
class Outcome:
    status: str  # 'passed', 'timed out' or 'failed: <reason>'
    isolation: str  # 'bwrap+uid', 'bwrap' or 'unconfined'


@lru_cache(maxsize=1)
def real_python() -> tuple[str, str]:
    """The real interpreter binary and its install prefix (a venv's python is a link to it)."""
    return os.path.realpath(sys.executable), os.path.realpath(sys.base_prefix)


def past_alternatives(tool: str) -> str:
    """The program a tool's name runs, past Debian's /etc/alternatives links (the sandbox has no /etc)."""
    return os.path.realpath(shutil.which(tool, path="/usr/bin:/bin") or tool)


def _root_fs_args() -> list[str]:
    """/usr and the top-level links or directories into it."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    # The JDK's configuration (its conf/ links into /etc), for HumanEval-X in Java; nothing else of /etc.
    return args + ["--perms", "0755", "--dir", "/etc", "--ro-bind-try", "/etc/java-17-openjdk", "/etc/java-17-openjdk"]


def _bind_args(binds: tuple[str, ...] = ()) -> list[str]:
    """The interpreter's prefix and the caller's read-only directories (a compiled language's prepared
    libraries, a virtual environment), each at its own path or, given as "SRC=PATH", at PATH. Mounted
    after the private /tmp, so a directory under /tmp is seen, not hidden by it."""
    args = []
    for bind in ([] if real_python()[1].startswith("/usr/") else [real_python()[1]]) + list(binds):
        src, path = bind.split("=", 1) if "=" in bind else (bind, bind)  # "SRC=PATH": SRC seen at PATH
        # Programs run as another uid: the directories leading to the path (pyenv, a cache under
        # /root) are made open in the sandbox; their other contents are not there.
        parents = [str(p) for p in reversed(Path(path).parents) if str(p) not in ("/", "/tmp", "/dev", "/dev/shm")]
        args += [a for d in parents for a in ("--perms", "0755", "--dir", d)] + ["--ro-bind", src, path]
    return args


def bwrap_command(binds: tuple[str, ...] = ()) -> list[str] | None:
    """The bubblewrap argv a worker runs under, or None when bubblewrap is missing or unusable here."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None
    cmd = [
        bwrap,
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/bin:/bin",
        *_root_fs_args(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--perms",
        "1777",
        "--size",
        str(256 << 20),
        "--tmpfs",
        "/tmp",
        "--perms",
        "1777",
        "--size",
        str(64 << 20),
        "--tmpfs",
        "/dev/shm",
        *_bind_args(binds),
        "--chdir",
        "/tmp",
    ]
    if os.geteuid() == 0:
        cmd += ["--cap-drop", "ALL"] + [a for cap in _ROOT_CAPS for a in ("--cap-add", cap)]
    else:
        cmd += ["--unshare-user"]
    return cmd if _usable(tuple(cmd)) else None


@lru_cache(maxsize=4)
def _usable(cmd: tuple[str, ...]) -> bool:
    """bwrap installed is not bwrap allowed (user namespaces may be off for non-root users)."""
    try:
        return (
            subprocess.run(
                [*cmd, real_python()[0], "-I", "-S", "-c", "pass"], capture_output=True, timeout=30, env={}
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def isolation_level(unconfined: bool = False) -> str:
    """What the sandbox would run programs under here; raises SandboxError if it cannot start."""
    if unconfined:
        return "unconfined"
    if bwrap_command() is None:
        raise SandboxError(
            "the code sandbox needs bubblewrap (apt-get install bubblewrap; as a non-root user, "
            "unprivileged user namespaces too); to run generated code unconfined anyway, set "
            "eval.exec_unconfined=true"
        )
    return "bwrap+uid" if os.geteuid() == 0 else "bwrap"


class _Worker:
    def __init__(
        self,
        uid: int,
        isolation: str,
        cpu_s: int,
        memory_bytes: int,
        file_bytes: int,
        nproc: int,
        binds: tuple[str, ...] = (),
    ):
        sandboxed = isolation != "unconfined"
        prog_uid = uid if isolation == "bwrap+uid" else -1
        # -S: no site-packages (programs see the standard library only, and start-up is faster);
        # -c: the sandbox's own root does not hold this package, so its source travels as an argument.
        argv = [
            real_python()[0],
            "-I",
            "-S",
            "-B",
            "-c",
            _WORKER_SOURCE.read_text(),
            *map(str, (cpu_s, memory_bytes, file_bytes, nproc, prog_uid, int(sandboxed))),
        ]
        if sandboxed:
            argv = bwrap_command(binds) + argv
        self.isolation = isolation
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
            env={"PATH": "/usr/bin:/bin"},
        )
        if self._read(30) is None:
            raise SandboxError("the sandbox worker did not start")

    def _read(self, timeout: float) -> str | None:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        return line or None

    def run(self, code: str | dict, timeout_s: float) -> str | None:
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
    def __init__(
        self,
        slots: int = 2,
        timeout_s: float = 10.0,
        memory_mb: int = 1024,
        file_mb: int = 16,
        nproc: int = 64,
        unconfined: bool = False,
        binds: tuple[str, ...] = (),
        shared: threading.Semaphore | None = None,
    ):
        if slots < 1 or timeout_s <= 0 or memory_mb <= 0:
            raise SandboxError(
                f"the sandbox needs at least one worker, a positive timeout and memory limit "
                f"(got workers={slots}, timeout={timeout_s}, memory_mb={memory_mb})"
            )
        self.timeout_s = timeout_s
        self.isolation = isolation_level(unconfined)
        self._spec = (self.isolation, int(timeout_s) + 1, memory_mb << 20, file_mb << 20, nproc, tuple(binds))
        self._idle: queue.Queue[tuple[int, _Worker]] = queue.Queue()
        self._shared = shared  # slots several sandboxes take turns at: one machine's cores, whichever repository asks
        self._claim = _claim_uids(slots) if self.isolation == "bwrap+uid" else None
        base = _BASE_UID + _UID_BLOCK * (self._claim[0] if self._claim else 0)
        for i in range(slots):
            self._idle.put((base + i, _Worker(base + i, *self._spec)))

    @property
    def uids(self) -> list[int]:
        return sorted(uid for uid, _ in list(self._idle.queue))

    def close(self) -> None:
        while not self._idle.empty():
            self._idle.get()[1].close()
        if self._claim:
            self._claim[1].close()  # the block is free again
            self._claim = None

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(self, code: str | dict, timeout_s: float | None = None) -> Outcome:
        """Python source, or a compiled program ({"files", "steps"}: see sandbox.py), within the
        sandbox's timeout or a shorter one."""
        with self._shared or nullcontext():
            uid, worker = self._idle.get()
            try:
                status = worker.run(code, min(timeout_s or self.timeout_s, self.timeout_s))
                if status is None:
                    worker.close()
                    worker = _Worker(uid, *self._spec)
                    status = "failed: the program killed or hung its sandbox worker"
                return Outcome(status, self.isolation)
            finally:
                self._idle.put((uid, worker))


def _claim_uids(slots: int):
    """(block number, its open lock file): the first block of uids no other sandbox on this machine holds."""
    import fcntl
    import tempfile

    if slots > _UID_BLOCK:
        raise SandboxError(f"the sandbox runs at most {_UID_BLOCK} programs at once (asked for {slots} workers)")
    where = Path(tempfile.gettempdir()) / "ferrylm-sandbox-uids"
    where.mkdir(mode=0o755, exist_ok=True)
    for block in range(_UID_BLOCKS):
        fh = open(where / f"{block}.lock", "w")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return block, fh
        except OSError:
            fh.close()
    raise SandboxError(f"{_UID_BLOCKS} sandboxes already run on this machine; wait for one to finish")


def run_program(
    code: str | dict, timeout_s: float = 10.0, memory_mb: int = 1024, file_mb: int = 16, unconfined: bool = False
) -> str:
    """One program in a one-slot sandbox; returns the status string."""
    with Sandbox(1, timeout_s, memory_mb, file_mb, unconfined=unconfined) as box:
        return box.run(code).status
