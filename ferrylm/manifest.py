"""The record each stage returns and writes next to its artifacts (`record.json`).

A record says what a stage read (by hash), what it wrote, and what it measured, so any served model
can be traced back to its data and config. Records are written atomically: a killed stage leaves
the previous record or none, never half of one.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .errors import FerryError


class StageBusy(FerryError):
    """Another process is writing this stage directory."""


class StaleOutputs(FerryError):
    """A stage's outputs are newer than its record, or its record is missing."""


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_tree(path: str | Path) -> str:
    """One digest for a file or a directory (relative names and contents, in sorted order)."""
    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(path)).encode())
        h.update(sha256_file(f).encode())
    return h.hexdigest()


def temporary_name(path: str | Path) -> Path:
    """A name beside `path` that no other writer (process or thread) uses at the same time."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    return Path(tmp)


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write through a temporary file and one rename: a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


@dataclass
class StageRecord:
    stage: str
    config_digest: str
    inputs: dict[str, str] = field(default_factory=dict)  # name -> sha256 (or a path for large trees)
    outputs: dict[str, str] = field(default_factory=dict)  # name -> path
    metrics: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.time)
    seconds: float = 0.0

    def finish(self, stage_dir: str | Path) -> StageRecord:
        self.seconds = round(time.time() - self.started, 2)
        write_json_atomic(Path(stage_dir) / "record.json", asdict(self))
        return self


def read_jsonl(path: str | Path, limit: int | None = None) -> list[dict]:
    """The rows of a JSONL file a stage wrote, the first `limit` of them."""
    rows = []
    with open(path) as fh:
        for line in fh:
            if line.strip():
                rows.append(json.loads(line))
            if limit and len(rows) == limit:
                break
    return rows


def read_record(stage_dir: str | Path) -> dict:
    """A finished stage's record; refuses outputs written after it (a re-run that was killed)."""
    path = Path(stage_dir) / "record.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run `ferrylm {Path(stage_dir).name}` first")
    record = json.loads(path.read_text())
    written = path.stat().st_mtime
    here = Path(stage_dir).resolve()
    for name, out in record.get("outputs", {}).items():
        if not isinstance(out, str):
            continue
        moved = here / Path(out).name  # a run directory that was copied or moved reads its own files
        if not Path(out).resolve().is_relative_to(here) and moved.exists():
            record["outputs"][name] = out = str(moved)
        if os.path.isfile(out) and os.stat(out).st_mtime > written + 1:
            raise StaleOutputs(f"{out} is newer than {path}: a later run of the stage did not finish; run it again")
    return record


@contextmanager
def stage_lock(stage_dir: str | Path, stage: str, withdraw: bool = True) -> Iterator[None]:
    """Hold `stage_dir` for one writer, withdrawing its old record until the new one is written
    (withdraw=False: a writer that only re-renders the stage's own outputs keeps it).

    The lock is an flock on `<run_dir>/.<stage>.lock` (gone with its process, so a killed run leaves no
    stale lock); the file names the holder for the one-line refusal a second writer gets. Under a
    launcher only rank 0 takes it; the other ranks write through rank 0's stage.
    """
    stage_dir = Path(stage_dir)
    if os.environ.get("RANK", "0") != "0":
        yield
        return
    stage_dir.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(stage_dir.parent / f".{stage_dir.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "another process"
            raise StageBusy(
                f"{stage_dir} is being written by {holder}; wait for it to finish or use another run_dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(
            fd,
            (
                f"`ferrylm {stage}` (pid {os.getpid()} on {socket.gethostname()}, since "
                f"{time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(sys.argv[:3])})"
            ).encode(),
            0,
        )
        if withdraw:
            (stage_dir / "record.json").unlink(missing_ok=True)
        yield
    finally:
        os.close(fd)


def locked_stage(stage: str):
    """Decorator for a stage's entry function `run_<stage>(cfg, ...)`: it runs under stage_lock."""

    def wrap(fn):
        @functools.wraps(fn)
        def run(cfg, *args, **kwargs):
            with stage_lock(cfg.stage_dir(stage), stage):
                return fn(cfg, *args, **kwargs)

        return run

    return wrap
