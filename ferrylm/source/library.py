"""The training functions as a search index: what retrieval may show a model beside its question.

One SQLite file with an FTS5 table (SQLite's full-text search, in Python's own sqlite3: no dependency, an
index on disk, BM25 ranking built in). The data stage writes every function the training saw (the whole
function: signature, doc comment, body); the eval's retrieval column looks up the k best matches of a
task's signature and doc comment in its language. Both sides of the schema live here.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterable
from pathlib import Path

# Words too common in code to tell functions apart.
_COMMON = frozenset(
    "def self return the and for none true false with this that func from import not are was str int list "
    "dict bool args kwargs param returns raises type var let const pub class".split()
)
MAX_TERMS = 32  # a query of the first this many distinct words of the question


def write(path: Path, functions: Iterable[tuple[str, str, str, str]]) -> int:
    """(source, language, code, repository) of each training function into a new index at `path` (replaced
    whole once written); returns how many."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    with sqlite3.connect(tmp) as db:
        db.execute(
            "CREATE VIRTUAL TABLE functions USING fts5(code, source UNINDEXED, language UNINDEXED, repo UNINDEXED)"
        )
        db.executemany("INSERT INTO functions (source, language, code, repo) VALUES (?, ?, ?, ?)", functions)
        n = db.execute("SELECT count(*) FROM functions").fetchone()[0]
    db.close()
    os.replace(tmp, path)
    return n


def query_terms(text: str) -> list[str]:
    """The distinct words of `text` (identifiers split at underscores), lower-cased, common ones left out."""
    words = dict.fromkeys(w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9]{2,}", text))
    return [w for w in words if w not in _COMMON][:MAX_TERMS]


def search(path: Path, text: str, language: str, limit: int, within: str | None = None) -> list[tuple[str, str]]:
    """(source, code) of the `limit` best matches of `text` in `language`, best first (BM25); `within`: only
    the functions of that repository (the data stage's name for it)."""
    terms = query_terms(text)
    if not terms:
        return []
    where, repo = ("", ()) if within is None else (" AND repo = ?", (within,))
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute(
            f"SELECT source, code FROM functions WHERE functions MATCH ? AND language = ?{where} ORDER BY rank LIMIT ?",
            (" OR ".join(f'"{t}"' for t in terms), language, *repo, limit),
        ).fetchall()
    db.close()
    return rows
