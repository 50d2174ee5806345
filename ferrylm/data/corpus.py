"""Scan source trees for code files with the seed's rules, counting every file dropped and why.

Rules (seed "Qwen 2.5 7B Code A40 训练方案", all configurable): the listed extensions, excluded
directory names, size < 1 MB, 100 < characters < 50,000, at least 10 lines.
"""
from __future__ import annotations

import os
import sysconfig
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from ..config import DataConfig


@dataclass
class CodeFile:
    root: Path
    path: Path
    text: str

    @property
    def rel(self) -> str:
        return str(self.path.relative_to(self.root))


@dataclass
class ScanStats:
    seen: int = 0
    kept: int = 0
    dropped: Counter = field(default_factory=Counter)
    by_extension: Counter = field(default_factory=Counter)


def resolve_source(source: str) -> tuple[Path, list[str]]:
    """Return (root, extra excluded dir names) for a data source."""
    if source == "stdlib":
        # The interpreter's own standard library: real code nobody here wrote, on every machine.
        return Path(sysconfig.get_paths()["stdlib"]), ["site-packages", "dist-packages"]
    root = Path(source).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"data.sources: {source} is not a directory")
    return root, []


def scan(cfg: DataConfig, stats: ScanStats) -> Iterator[CodeFile]:
    extensions = set(cfg.extensions)
    for source in cfg.sources:
        root, extra_excludes = resolve_source(source)
        excluded = set(cfg.exclude_dirs) | set(extra_excludes)
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d not in excluded)
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if path.suffix not in extensions:
                    continue
                stats.seen += 1
                text, reason = _read_checked(path, cfg)
                if reason:
                    stats.dropped[reason] += 1
                    continue
                stats.kept += 1
                stats.by_extension[path.suffix] += 1
                yield CodeFile(root, path, text)
                if cfg.max_files and stats.kept >= cfg.max_files:
                    return


def _read_checked(path: Path, cfg: DataConfig) -> tuple[str, str | None]:
    try:
        if path.is_symlink() or not path.is_file():
            return "", "not_regular_file"
        if path.stat().st_size >= cfg.max_file_bytes:
            return "", "too_large_bytes"
        raw = path.read_bytes()
    except OSError:
        return "", "unreadable"
    if b"\0" in raw:
        return "", "binary"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "", "not_utf8"
    if len(text) <= cfg.min_chars:
        return "", "too_short_chars"
    if len(text) >= cfg.max_chars:
        return "", "too_long_chars"
    if text.count("\n") < cfg.min_lines:
        return "", "too_few_lines"
    return text, None
