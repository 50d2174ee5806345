"""A server as a managed subprocess (vLLM's OpenAI server, Triton).

It runs in its own process group, so stopping it stops every process it started; on Linux it
also dies with its parent (PR_SET_PDEATHSIG), so a killed ferrylm never leaves a server behind.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import requests

from ..errors import FerryError
from ..log import get_logger

log = get_logger("serve")


class ServeError(FerryError, RuntimeError):
    pass


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def free_port(host: str = "127.0.0.1", count: int = 1) -> int:
    """A free port on `host` whose `count - 1` successors are free too (tritonserver takes HTTP,
    gRPC and metrics on three ports in a row)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if port + count <= 65536 and not any(port_in_use(host, p) for p in range(port + 1, port + count)):
            return port
    raise RuntimeError(f"no {count} consecutive free ports on {host}")


def _child_setup() -> None:
    os.setsid()
    try:  # Linux: SIGTERM this child when the parent dies, however it dies.
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except OSError:
        pass


def _signal(send, pid: int, sig: int) -> bool:
    """Send a signal; False when the process (or group) is gone."""
    try:
        send(pid, sig)
        return True
    except ProcessLookupError:
        return False


def _read_from(path: Path, offset: int | None) -> str:
    if offset is None:
        return ""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read(1 << 20).decode(errors="replace")
    except OSError:
        return ""


# vLLM's line prefix: "(EngineCore pid=934) ERROR 11-25 21:54:57 [core.py:1165] ".
_PREFIX = re.compile(r"^\([\w ]+pid=\d+\) (?:[A-Z]+ [\d-]+ [\d:]+ \[[^\]]*\] )?")
_RAISED = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception): ")


def why_it_stopped(log_file: Path, start: int = 0, lines: int = 15) -> str:
    """What a server that died while starting logged from byte `start` on: the first exception raised, with the
    lines that go on with its message, else the last lines. vLLM logs the cause in its engine process and,
    last, a generic "Engine core initialization failed. See root cause above" from its API process."""
    text = _read_from(log_file, start)
    body = [_PREFIX.sub("", line).rstrip() for line in text.splitlines()]
    for i, line in enumerate(body):
        if _RAISED.match(line):
            more = []
            for cont in body[i + 1 : i + 12]:  # vLLM lists, after its ValueError, why each kernel declined
                if not cont.startswith(" ") or cont.lstrip().startswith(("File ", "Traceback")):
                    break
                more.append(cont)
            return f"the first error in {log_file}:\n" + "\n".join([line, *more])
    return f"last lines of {log_file}:\n" + "\n".join(text.splitlines()[-lines:])


class ManagedServer:
    """Start → wait until `health_path` answers 200 → serve → stop with a drain. Subclasses give the
    command, the environment and the checks made before starting."""

    kind = "server"
    health_path = "/health"
    stopped_marker: str | None = None  # what the server logs once it has shut down

    def __init__(self, host: str, port: int, log_file: str | Path, startup_timeout_s: float, drain_timeout_s: int):
        self.host, self.port = host, port
        self.log_file = Path(log_file)
        self.startup_timeout_s = startup_timeout_s
        self.drain_timeout_s = drain_timeout_s
        self.proc: subprocess.Popen | None = None
        self._log_start = 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict:
        return dict(os.environ)

    def check(self) -> None:
        """Raise ServeError naming the key when the server cannot start."""
        if port_in_use(self.host, self.port):
            raise ServeError(f"serve.port: {self.host}:{self.port} is already in use; pick another with serve.port=N")

    def start(self):
        self.check()
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        log.info("starting %s on %s (log: %s)", self.kind, self.url, self.log_file)
        with open(self.log_file, "ab") as fh:
            self._log_start = fh.tell()  # the log is appended to: read only this start's part
            self.proc = subprocess.Popen(
                self.command(),
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env(),
                preexec_fn=_child_setup,
            )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        shown = self._log_start
        while time.monotonic() < deadline:
            shown = self._show_phases(shown)
            if self.proc.poll() is not None:
                raise ServeError(
                    f"{self.kind} exited with code {self.proc.returncode} while starting; "
                    + why_it_stopped(self.log_file, self._log_start)
                )
            try:
                if requests.get(self.url + self.health_path, timeout=2).status_code == 200:
                    self._show_phases(shown)
                    log.info("%s ready at %s", self.kind, self.url)
                    return
            except requests.RequestException:
                pass
            time.sleep(1)
        self.stop()
        raise ServeError(f"{self.kind} did not become healthy in {self.startup_timeout_s:.0f}s; see {self.log_file}")

    PHASE = "ferrylm: "  # what a model served logs as its start-up goes on (templates/triton_model.py)

    def _show_phases(self, offset: int) -> int:
        """Print the start-up lines the server logged since byte `offset` (whole lines only); the new offset."""
        text = _read_from(self.log_file, offset)
        done = text[: text.rfind("\n") + 1]
        for line in done.splitlines():
            if line.startswith(self.PHASE):
                print(line, flush=True)
        return offset + len(done.encode(errors="replace"))

    def wait(self) -> int:
        return self.proc.wait() if self.proc else 0

    def stop(self, grace_s: float | None = None) -> None:
        """Drain, then make sure nothing is left, promptly: SIGTERM the server alone (it stops
        accepting and finishes the requests in flight), wait until it exits, says in its log that
        it has shut down, or the drain time is over; then SIGTERM and SIGKILL whatever of its group
        remains (vLLM's engine process can outlive a server that has finished)."""
        if self.proc is None:
            return
        leader = self.proc.pid  # setsid made the child the group leader; pgid == its pid
        deadline = time.monotonic() + (self.drain_timeout_s + 5 if grace_s is None else grace_s)
        log_from = self.log_file.stat().st_size if self.log_file.is_file() else 0
        _signal(os.kill, leader, signal.SIGTERM)
        while self.proc.poll() is None and time.monotonic() < deadline:
            if self.stopped_marker and self.stopped_marker in _read_from(self.log_file, log_from):
                deadline = min(deadline, time.monotonic() + 3)  # done; a moment to exit by itself
                log_from = None
            time.sleep(0.1)
        for sig, wait_s in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            if not _signal(os.killpg, leader, sig):
                break
            end = time.monotonic() + wait_s
            while time.monotonic() < end and _signal(os.killpg, leader, 0):
                self.proc.poll()
                time.sleep(0.1)
        self.proc.wait()
        log.info("%s stopped", self.kind)
        self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
