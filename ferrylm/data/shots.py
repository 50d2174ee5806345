"""Training examples the eval stage may show the base model before a question (its few-shot column):
per task and language, the first few training examples in this stage's seeded order that fit a short
prompt. Only the training side offers them, so no held-out repository or function is ever shown, and
the same data gives the same examples on every run."""

from __future__ import annotations

import json
from pathlib import Path

from ..manifest import write_text_atomic

POOL = 8  # kept per (task, language); eval.few_shot shows the first k of them
MAX_TOKENS = 384  # a longer example would crowd a small model's prompt and slow every request


class ShotPool:
    def __init__(self):
        self.rows: dict[tuple, list[dict]] = {}

    def offer(self, task: str | None, language: str | None, messages: list[dict], tokens: int, **extra) -> None:
        """A training example (its user and assistant turns); kept while its (task, language) has room."""
        kept = self.rows.setdefault((task, language), [])
        if tokens <= MAX_TOKENS and len(kept) < POOL:
            kept.append({"task": task, "language": language, "messages": messages, **extra})

    def write(self, path: Path) -> Path:
        write_text_atomic(path, "".join(json.dumps(r) + "\n" for rows in self.rows.values() for r in rows))
        return path


def read_shots(path: str | Path) -> dict[tuple, list[dict]]:
    """(task, language) → its pool, in the order written."""
    pool: dict[tuple, list[dict]] = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            pool.setdefault((row["task"], row["language"]), []).append(row)
    return pool
