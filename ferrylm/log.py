"""Logging: one format for every stage, to stderr and optionally to a file in the run directory."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _Stderr(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time (test harnesses and daemons swap it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _):
        pass


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(f"ferrylm.{name}")


def setup_logging(log_file: str | Path | None = None, level: int = logging.INFO) -> None:
    """Idempotent: one stderr handler, and at most one file handler (the latest run's)."""
    root = logging.getLogger("ferrylm")
    root.setLevel(level)
    for h in list(root.handlers):
        if isinstance(h, logging.FileHandler):
            root.removeHandler(h)
            h.close()
    if not any(isinstance(h, _Stderr) for h in root.handlers):
        handler = _Stderr()
        handler.setFormatter(logging.Formatter(_FORMAT, "%H:%M:%S"))
        root.addHandler(handler)
    if log_file is not None:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        fh = logging.FileHandler(log_file)
        fh.setFormatter(logging.Formatter(_FORMAT))
        root.addHandler(fh)
