"""Find and read code files in trees of repositories, never failing on what a tree holds.

Rules (seed "Qwen 2.5 7B Code A40 训练方案", all configurable): the listed extensions, excluded
directory names, size < 1 MB, 100 < characters < 50,000, at least 10 lines. Every file that does
not make it is counted under a reason — binary, not UTF-8, a symlink, unreadable, vanished while we
looked — and the scan goes on.

A source directory holds repositories: each entry directly under it is one repository, the unit of
the train/eval split. A manifest names repositories one by one, with priority and language.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import sysconfig
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..config import DataConfig
from ..errors import FerryError
from ..log import get_logger
from ..source import go_std

log = get_logger("data")
LANGUAGES = {
    ".py": "python",
    ".java": "java",
    ".go": "go",
    ".rs": "rust",
    ".c": "c",
    ".h": "c",
    ".cpp": "cpp",
    ".cc": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".ipp": "cpp",
}
_CPP_CLAIMS = {"cpp", "c++", "cxx", "cc"}


class ManifestError(FerryError, ValueError):
    pass


@dataclass(frozen=True)
class Tree:
    root: Path
    name: str
    priority: str = "-"
    language: str | None = None  # a manifest's claim; files are still labelled by extension
    repo_per_entry: bool = True  # a directory of repositories, or (manifest) one repository
    excludes: tuple[str, ...] = ()
    test: str | None = None  # a manifest's test command, run from the repository's root
    test_requires: tuple[str, ...] = ()  # a manifest's test requirements (pip), installed for its tests


@dataclass(frozen=True)
class FileRef:
    path: str
    rel: str  # "<tree name>/<path in tree>": unique across trees, stable across machines
    repo: str  # the split unit (same-named repositories of two sources share a side)
    priority: str
    language: str


@dataclass
class ScanStats:
    seen: int = 0
    kept: int = 0
    bytes_seen: int = 0
    bytes_kept: int = 0
    dropped: Counter = field(default_factory=Counter)
    by_language: Counter = field(default_factory=Counter)
    by_priority: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)  # directories not entered, by reason

    def as_dict(self) -> dict:
        return {
            "files_seen": self.seen,
            "files_kept": self.kept,
            "bytes_seen": self.bytes_seen,
            "bytes_kept": self.bytes_kept,
            "files_dropped": dict(self.dropped),
            "files_by_language": dict(self.by_language),
            "files_by_priority": dict(self.by_priority),
            "directories_skipped": dict(self.skipped),
        }


def trees(cfg: DataConfig) -> list[Tree]:
    out = []
    for source in cfg.sources:
        if source == "stdlib":
            # The interpreter's own standard library: real code nobody here wrote, on every machine.
            # Its top-level modules and packages play the part of repositories.
            out.append(
                Tree(Path(sysconfig.get_paths()["stdlib"]), "stdlib", excludes=("site-packages", "dist-packages"))
            )
            continue
        if source == "go-stdlib":
            # A few packages of Go's standard library with their own tests (none where Go is missing).
            packages = go_std.package_dirs()
            if not packages:
                log.warning("data.sources: go-stdlib: no Go here with its standard library's tests; no package read")
            out += [
                Tree(d, f"{go_std.REPO_PREFIX}{pkg}", language="go", repo_per_entry=False, excludes=("testdata",))
                for pkg, d in packages
            ]
            continue
        if source == "site-packages":
            # The packages installed for this interpreter (each one a repository): a larger real corpus.
            out.append(Tree(Path(sysconfig.get_paths()["purelib"]), "site-packages"))
            continue
        root = Path(source).expanduser()
        if not root.is_dir():
            raise FileNotFoundError(f"data.sources: {source} is not a directory")
        out.append(Tree(root, root.name or str(root)))
    if cfg.manifest:
        out.extend(load_manifest(cfg.manifest))
    return out


_ENTRY_KEYS = {"path", "name", "priority", "language", "test", "test_requires"}


def repository_roots(cfg: DataConfig) -> dict[str, dict]:
    """Each repository of the user's trees (not the built-in stdlib / site-packages corpora) that is a
    directory: name -> {"root", "test"} (the manifest's test command, or None to detect one)."""
    out: dict[str, dict] = {}
    for tree in trees(cfg):
        if tree.name in ("stdlib", "site-packages") and tree.repo_per_entry:
            continue
        if not tree.repo_per_entry:
            out[tree.name] = {
                "root": str(tree.root.resolve()),
                "test": tree.test,
                "test_requires": list(tree.test_requires),
            }
            continue
        for entry in sorted(tree.root.iterdir()):
            if entry.is_dir() and not entry.is_symlink():
                out.setdefault(entry.name, {"root": str(entry.resolve()), "test": None})
    return out


def load_manifest(path: str | Path) -> list[Tree]:
    """Repositories from a YAML manifest: `repositories: [{path, name?, priority?, language?, test?,
    test_requires?}]` (`test`: the command that runs the repository's tests from its root, for executed
    Pass@1; `test_requires`: pip requirements its tests need, installed for them)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data.manifest: {path} does not exist")
    doc = yaml.safe_load(path.read_text()) or {}
    entries = doc.get("repositories") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ManifestError(f"data.manifest: {path} has no 'repositories' list")
    out = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or "path" not in e:
            raise ManifestError(f"data.manifest: entry {i} of {path} needs a 'path'")
        unknown = sorted(set(e) - _ENTRY_KEYS)
        if unknown:
            raise ManifestError(
                f"data.manifest: entry {i} of {path} has an unknown key {unknown[0]!r} "
                f"(known: {', '.join(sorted(_ENTRY_KEYS))})"
            )
        if e.get("test") is not None and not (isinstance(e["test"], str) and e["test"].strip()):
            raise ManifestError(f"data.manifest: entry {i} of {path}: 'test' must be a shell command")
        reqs = e.get("test_requires") or []
        if not isinstance(reqs, list) or not all(isinstance(r, str) and r.strip() for r in reqs):
            raise ManifestError(
                f"data.manifest: entry {i} of {path}: 'test_requires' must be a list of pip requirements"
            )
        root = path.parent / Path(e["path"]).expanduser()
        if not root.is_dir():
            raise FileNotFoundError(f"data.manifest: entry {i} ({e['path']}) is not a directory")
        out.append(
            Tree(
                root,
                str(e.get("name") or root.name),
                str(e.get("priority", "-")),
                e.get("language"),
                repo_per_entry=False,
                test=e.get("test"),
                test_requires=tuple(reqs),
            )
        )
    return out


def manifest_from_layout(root: str | Path) -> dict:
    """The seed's layout, <root>/<priority>/<language>/<repo>, as a manifest document."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a directory")
    repos = []
    for prio in sorted(p for p in root.iterdir() if p.is_dir()):
        for lang in sorted(p for p in prio.iterdir() if p.is_dir()):
            for repo in sorted(p for p in lang.iterdir() if p.is_dir()):
                repos.append(
                    {
                        "path": str(repo.resolve()),
                        "name": f"{lang.name}/{repo.name}",
                        "priority": prio.name,
                        "language": lang.name,
                    }
                )
    if not repos:
        raise ManifestError(f"{root} holds no <priority>/<language>/<repo> directories")
    return {"repositories": repos}


def walk(tree: Tree, cfg: DataConfig, stats: ScanStats) -> Iterator[FileRef]:
    """Candidate files of a tree (by extension), in a stable order. Symlinks are never followed."""
    extensions = set(cfg.extensions)
    excluded = set(cfg.exclude_dirs) | set(tree.excludes)

    def on_error(err: OSError) -> None:
        stats.skipped["unreadable_dir"] += 1

    for dirpath, dirnames, filenames in os.walk(tree.root, onerror=on_error, followlinks=False):
        keep = []
        for d in sorted(dirnames):
            if d in excluded:
                stats.skipped["excluded_dir"] += 1
            elif os.path.islink(os.path.join(dirpath, d)):
                stats.skipped["symlinked_dir"] += 1
            else:
                keep.append(d)
        dirnames[:] = keep
        rel_dir = os.path.relpath(dirpath, tree.root)
        for name in sorted(filenames):
            ext = os.path.splitext(name)[1]
            if ext not in extensions:
                continue
            rel = name if rel_dir == "." else os.path.join(rel_dir, name)
            # The split unit: an entry of a directory of repositories is named by itself, not by the
            # directory holding it, so moving or renaming that directory keeps the split.
            repo = rel.split(os.sep, 1)[0] if tree.repo_per_entry else tree.name
            language = LANGUAGES.get(ext, ext.lstrip("."))
            if ext == ".h" and (tree.language or "").lower() in _CPP_CLAIMS:
                language = "cpp"  # the manifest says this repository is C++
            yield FileRef(os.path.join(dirpath, name), f"{tree.name}/{rel}", repo, tree.priority, language)


def cpp_headers(refs: list[FileRef]) -> list[FileRef]:
    """`.h` files of a repository that holds C++ sources are C++ (Google style names them so)."""
    cpp_repos = {r.repo for r in refs if r.language == "cpp"}
    return [
        dataclasses.replace(r, language="cpp")
        if r.language == "c" and r.path.endswith(".h") and r.repo in cpp_repos
        else r
        for r in refs
    ]


def read_checked(path: str, cfg: DataConfig) -> tuple[str, int, str | None]:
    """(text, size in bytes, drop reason or None). Never raises for anything a tree can hold."""
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            return "", 0, "symlink"
        if not stat.S_ISREG(st.st_mode):
            return "", 0, "not_regular_file"  # FIFOs, sockets, devices: opening could block
        if st.st_size >= cfg.max_file_bytes:
            return "", st.st_size, "too_large_bytes"
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read(cfg.max_file_bytes)
    except FileNotFoundError:
        return "", 0, "vanished"
    except OSError:
        return "", 0, "unreadable"
    if b"\0" in raw:
        return "", len(raw), "binary"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "", len(raw), "not_utf8"
    if len(text) <= cfg.min_chars:
        return "", len(raw), "too_short_chars"
    if len(text) >= cfg.max_chars:
        return "", len(raw), "too_long_chars"
    if text.count("\n") < cfg.min_lines:
        return "", len(raw), "too_few_lines"
    return text, len(raw), None
