"""Found tasks kept between runs: proving a repository's functions runs its tests three times per candidate
(minutes per repository on a small machine), and an eval run again on the same code after another
fine-tune asks the same question. Kept under $XDG_CACHE_HOME/ferrylm/repo-tasks (hx_libs.prepared: written
whole, then renamed), keyed by everything the answer depends on: the repository's files, how it was asked
(language, test command and requirements, the functions asked for, the limit, the runs), the Python that
runs the tests and the finder's own code and the source-code readers it uses (ferrylm/source/), so a change to any of them finds again.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path

from ..execution import hx_libs
from . import suite

# the modules whose code decides which functions are tasks, and what we know of source code they read it with
FINDER = (
    "tasks.py",
    "facts.py",
    "proof.py",
    "functions.py",
    "suite.py",
    "runner.py",
    "trace.py",
    "reason.py",
    "wrong_values.py",
)
SOURCE = ("spans.py", "pairs.py", "pairs_ts.py", "test_files.py", "go_std.py")


class NotKept(Exception):
    """The finder's answer is not to be kept (a repository skipped: its cause may pass)."""


def key(repo: Path, language: str, asked: dict) -> str:
    h = hashlib.sha256(json.dumps([str(repo), language, asked, sys.version], sort_keys=True, default=str).encode())
    here = Path(__file__).parent
    for path in [*(here / n for n in FINDER), *(here.parents[1] / "source" / n for n in SOURCE)]:
        h.update(path.read_bytes())
    skip = suite.skip_dirs(language)
    for p in sorted(repo.rglob("*")):
        rel = p.relative_to(repo)
        if p.is_file() and not any(part in skip for part in rel.parts):
            h.update(str(rel).encode() + b"\0" + hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()[:24]


def kept(repo: Path, language: str, asked: dict, find: Callable[[], dict]) -> dict:
    """`find()`'s answer for this repository and question: read back when a run with the same key kept it,
    else found now and kept (`find` raises NotKept, carrying its answer, for one not to keep)."""
    fresh: list[dict] = []

    def build(d: Path) -> None:
        fresh.append(find())
        (d / "tasks.json").write_text(json.dumps(fresh[0]))

    try:
        where = hx_libs.prepared(f"{repo.name}-{key(repo, language, asked)}", build, under="repo-tasks")
    except NotKept as skipped:
        return skipped.args[0]
    return fresh[0] if fresh else json.loads((Path(where) / "tasks.json").read_text())
