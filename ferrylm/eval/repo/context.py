"""The file around a repository task's function, as a team's assistant sees it: the function's own file
with its body cut out (imports, constants, sibling functions, the enclosing class kept), trimmed around
the function to a token budget. `eval.repo_context=file` (the default) asks every model this way;
`none` asks with the signature and doc comment alone.
"""

from __future__ import annotations

from ...prompts import file_question
from ...source.file_context import CHARS_PER_TOKEN, hole_around, trimmed
from .splice import task_file


def file_with_hole(task: dict) -> tuple[str, str, str]:
    """(before, marker line, after): the task's file around its body, the body replaced by a marker."""
    raw = task_file(task)  # a changed file would cut in the wrong place, perhaps showing the body
    return hole_around(raw, task["start"], task["end"], task["language"], task.get("indent", ""))


def question(task: dict, budget_tokens: int, after_share: float = 0.0, outline_share: float = 0.0) -> str:
    """The chat question: the file with the hole, then what to write and in which form (the body only,
    as training asked); `after_share`: the room kept for the file below the hole, `outline_share` for an
    outline of the lines the window leaves out (file_context.trimmed)."""
    before, hole, after = file_with_hole(task)
    budget = budget_tokens * CHARS_PER_TOKEN
    shown = trimmed(before, hole, after, budget, task["language"], after_share, outline_share)
    return file_question(task["file"], task["name"], task["language"], shown, task["prompt"])


def base_prompt(task: dict, budget_tokens: int) -> str:
    """Base prompting: the file up to the body, trimmed from the top to the budget (the model continues it)."""
    before, _, _ = file_with_hole(task)
    return trimmed(before, "", "", budget_tokens * CHARS_PER_TOKEN, task["language"])
