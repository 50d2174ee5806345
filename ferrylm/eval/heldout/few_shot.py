"""The base model shown a few of the team's own examples: what a team would try before fine-tuning.

Its column ("base 2-shot") asks every question the other two models get, with k training examples of
the same task and language (the data stage's shots.jsonl: never a held-out repository or function,
the same for every run of the same data) as earlier chat turns, the way a user shows examples in a
chat; in base mode (raw completion) the examples' code comes before the prompt.
"""

from __future__ import annotations

import re

from ...data.shots import read_shots


class FewShot:
    def __init__(self, pool: dict[tuple, list[dict]], k: int):
        self.k = k
        self.pool = {key: rows[:k] for key, rows in pool.items()}

    @classmethod
    def read(cls, path, k: int) -> FewShot:
        return cls(read_shots(path), k)

    @property
    def label(self) -> str:
        return f"base {self.k}-shot"

    def shown(self, task: str | None, language: str | None) -> list[dict]:
        """The examples shown before a question of this task and language ([] where training has none)."""
        return self.pool.get((task, language), [])

    def messages(self, messages: list[dict], task: str | None, language: str | None) -> list[dict]:
        """The question after its examples' turns; a system message stays first."""
        head = 0
        while head < len(messages) and messages[head]["role"] == "system":
            head += 1
        turns = [m for ex in self.shown(task, language) for m in ex["messages"]]
        return messages[:head] + turns + messages[head:]

    def prefix(self, language: str) -> str:
        """Base mode: the generation examples' code (declaration and body), each followed by a blank line."""
        return "".join(
            ex["prompt_code"] + ex["body"].rstrip("\n") + "\n\n"
            for ex in self.shown("generate", language)
            if "prompt_code" in ex
        )

    def summary(self, asked: set[tuple] = frozenset()) -> dict:
        """What was shown, for the report: k and, per task/language, which examples; and which of the
        (task, language) pairs `asked` had no training example, so were asked as they are."""
        return {
            "k": self.k,
            "shown": {f"{t}/{lang}": [ex.get("source") for ex in rows] for (t, lang), rows in self.pool.items()},
            "asked_without_examples": sorted(f"{t}/{lang}" for t, lang in asked if not self.shown(t, lang)),
        }


def shown_words(label: str) -> str:
    """How a sentence names a compared model: 'the base model', 'the base shown 2 examples', 'the base model
    with retrieval'."""
    m = re.fullmatch(r"base (\d+)-shot", label)
    if m:
        return f"the base shown {m.group(1)} example{'s' * (m.group(1) != '1')}"
    if label.endswith(" + retrieval"):  # the eval's retrieval column
        return f"the {label.removesuffix(' + retrieval')} model with retrieval"
    return f"the {label} model"


def with_shots(shots: FewShot | None, messages: list[dict], task: str | None, language: str | None) -> list[dict]:
    return shots.messages(messages, task, language) if shots else messages
