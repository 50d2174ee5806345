"""The file around a repository task's function, as a team's assistant sees it: the function's own file
with its body cut out (imports, constants, sibling functions, the enclosing class kept), trimmed around
the function to a token budget. `eval.repo_context=file` (the default) asks every model this way;
`none` asks with the signature and doc comment alone.
"""

from __future__ import annotations

from ...prompts import LANGUAGE_NAMES
from .score import task_file

CHARS_PER_TOKEN = 3  # a budget in tokens, kept in characters (measured: Go 2.9, Python 3.4-3.8 a token)
_HOLE = {"python": "# <the body to write>", "go": "// <the body to write>"}


def hole_marker(language: str) -> str:
    return _HOLE.get(language, "// <the body to write>")


def file_with_hole(task: dict) -> tuple[str, str, str]:
    """(before, marker line, after): the task's file around its body, the body replaced by a marker."""
    raw = task_file(task)  # a changed file would cut in the wrong place, perhaps showing the body
    before, after = raw[: task["start"]].decode(errors="replace"), raw[task["end"] :].decode(errors="replace")
    indent = task.get("indent", "") + ("    " if task["language"] == "python" else "\t")
    closing = "" if task["language"] == "python" else "}\n"  # a brace body's span ends with its closing brace
    return before, f"{indent}{hole_marker(task['language'])}\n{closing}", after


def trimmed(before: str, hole: str, after: str, budget_chars: int) -> str:
    """The hole with as much of the file around it as fits: the lines just before it (the signature and
    doc comment first, then upward), then after it; the file's head (its imports) when room is left.
    Lines are kept whole; a cut is marked."""
    up, down = before.splitlines(keepends=True), after.splitlines(keepends=True)
    room = budget_chars - len(hole)
    top: list[str] = []
    while up and len(up[-1]) <= room:
        room -= len(up[-1])
        top.insert(0, up.pop())
    bottom: list[str] = []
    while down and len(down[0]) <= room:
        room -= len(down[0])
        bottom.append(down.pop(0))
    cut = "…\n"
    return (cut if up else "") + "".join(top) + hole + "".join(bottom) + (cut if down else "")


def question(task: dict, budget_tokens: int) -> str:
    """The chat question: the file with the hole, then what to write and in which form (the body only,
    as training asked)."""
    language = task["language"]
    before, hole, after = file_with_hole(task)
    shown = trimmed(before, hole, after, budget_tokens * CHARS_PER_TOKEN)
    name = task["name"]
    return (
        f"Here is `{task['file']}`, with the body of `{name}` cut out and marked `{hole_marker(language)}`:\n\n"
        f"```{language}\n{shown}```\n\n"
        f"Complete the body of this {LANGUAGE_NAMES.get(language, language)} function. Reply with the body "
        f"only, in a ```{language} block.\n\n```{language}\n{task['prompt']}```"
    )


def base_prompt(task: dict, budget_tokens: int) -> str:
    """Base prompting: the file up to the body, trimmed from the top to the budget (the model continues it)."""
    before, _, _ = file_with_hole(task)
    return trimmed(before, "", "", budget_tokens * CHARS_PER_TOKEN)
