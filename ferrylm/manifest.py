"""The record each stage returns and writes next to its artifacts (`record.json`).

A record says what a stage read (by hash), what it wrote, and what it measured, so any served model
can be traced back to its data and config. Records are written atomically: a killed stage leaves
the previous record or none, never half of one.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


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


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write through a temporary file and one rename: a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_json_atomic(path: str | Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


@dataclass
class StageRecord:
    stage: str
    config_digest: str
    inputs: dict[str, str] = field(default_factory=dict)    # name -> sha256 (or a path for large trees)
    outputs: dict[str, str] = field(default_factory=dict)   # name -> path
    metrics: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.time)
    seconds: float = 0.0

    def finish(self, stage_dir: str | Path) -> "StageRecord":
        self.seconds = round(time.time() - self.started, 2)
        write_json_atomic(Path(stage_dir) / "record.json", asdict(self))
        return self


def read_record(stage_dir: str | Path) -> dict:
    path = Path(stage_dir) / "record.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run the stage that writes it first")
    return json.loads(path.read_text())
