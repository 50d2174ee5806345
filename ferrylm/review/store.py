"""Votes in SQLite (WAL: several reviewers at once, readers never block the writer): one row per
reviewer × item, replaced when that reviewer judges the item again, committed before the page moves on."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

VERDICTS = ("correct", "partly", "incorrect")
PREFERENCES = ("fine-tuned", "base", "tie")

_SCHEMA = """CREATE TABLE IF NOT EXISTS votes (
    reviewer TEXT NOT NULL, item TEXT NOT NULL,
    fine_tuned TEXT NOT NULL, base TEXT NOT NULL, preference TEXT NOT NULL,
    comment TEXT NOT NULL DEFAULT '', shown_as_a TEXT NOT NULL, at REAL NOT NULL,
    PRIMARY KEY (reviewer, item))"""


class Votes:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as con:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)  # one per call: request threads share nothing

    def put(
        self, reviewer: str, item: str, verdicts: dict[str, str], preference: str, comment: str, shown_as_a: str
    ) -> None:
        with self._connect() as con:  # commits on leaving the block
            con.execute(
                "INSERT OR REPLACE INTO votes VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    reviewer,
                    item,
                    verdicts["fine-tuned"],
                    verdicts["base"],
                    preference,
                    comment,
                    shown_as_a,
                    time.time(),
                ),
            )

    def all(self) -> list[dict]:
        with self._connect() as con:
            con.row_factory = sqlite3.Row
            return [dict(r) for r in con.execute("SELECT * FROM votes ORDER BY at")]

    def of(self, reviewer: str) -> dict[str, dict]:
        """item → this reviewer's vote."""
        with self._connect() as con:
            con.row_factory = sqlite3.Row
            return {r["item"]: dict(r) for r in con.execute("SELECT * FROM votes WHERE reviewer = ?", (reviewer,))}
