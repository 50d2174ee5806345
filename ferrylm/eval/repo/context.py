"""The file around a repository task's function, as a team's assistant sees it: the function's own file
with its body cut out (imports, constants, sibling functions, the enclosing class kept), trimmed around
the function to a token budget. `eval.repo_context=file` (the default) asks every model this way;
`none` asks with the signature and doc comment alone.
"""

from __future__ import annotations

import re

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


# a line of the file's head that names what the file uses (Go's and Python's parenthesised groups are kept whole)
_IMPORT = {
    "python": re.compile(r"(import |from \S+ import )"),
    "go": re.compile(r"import\b"),
    "rust": re.compile(r"(pub )?use "),
    "java": re.compile(r"import "),
    "cpp": re.compile(r"#\s*include"),
}


def _imports(lines: list[str], language: str) -> list[list[int]]:
    """The file's import lines, each a group of line numbers (a parenthesised group's lines with its first)."""
    pattern, groups, inside = _IMPORT.get(language), [], False
    for i, line in enumerate(lines):
        if inside:
            groups[-1].append(i)
            inside = not line.rstrip().endswith(")")
        elif pattern is not None and pattern.match(line):
            groups.append([i])
            inside = line.rstrip().endswith("(")
    return groups


def _joined(lines: list[str], at: list[int]) -> str:
    """The lines at `at` (ascending), a cut marked wherever lines are left out: before, between, after them."""
    out, last = [], -1
    for i in at + [len(lines)]:
        out.append(("…\n" if i > last + 1 else "") + (lines[i] if i < len(lines) else ""))
        last = i
    return "".join(out)


def trimmed(before: str, hole: str, after: str, budget_chars: int, language: str = "python") -> str:
    """The hole with as much of the file around it as fits: the file's imports first (up to half the room:
    the names a body uses come from there), then the lines just before the hole (the signature and doc
    comment first, then upward), then after it. Lines are kept whole; a cut is marked."""
    up, down = before.splitlines(keepends=True), after.splitlines(keepends=True)
    room = budget_chars - len(hole)
    head: set[int] = set()
    used = 0  # the imports' characters, at most half the room
    for group in _imports(up, language):
        size = sum(len(up[i]) for i in group)
        if used + size > room // 2:
            break
        head.update(group)
        used += size
    room -= used
    start = len(up)  # the first line of the window around the hole
    while start > 0 and (start - 1 in head or len(up[start - 1]) <= room):
        start -= 1
        room -= 0 if start in head else len(up[start])
    bottom: list[str] = []
    while down and len(down[0]) <= room:
        room -= len(down[0])
        bottom.append(down.pop(0))
    shown = sorted(i for i in head if i < start) + list(range(start, len(up)))
    return _joined(up, shown) + hole + "".join(bottom) + ("…\n" if down else "")


def question(task: dict, budget_tokens: int) -> str:
    """The chat question: the file with the hole, then what to write and in which form (the body only,
    as training asked)."""
    language = task["language"]
    before, hole, after = file_with_hole(task)
    shown = trimmed(before, hole, after, budget_tokens * CHARS_PER_TOKEN, language)
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
    return trimmed(before, "", "", budget_tokens * CHARS_PER_TOKEN, task["language"])
