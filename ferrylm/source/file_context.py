"""The file around a function, as a team's assistant sees it: the function's own file with its body cut out and
marked (imports, constants, sibling functions, the enclosing class kept), trimmed around the function to a
token budget. The eval's repository tasks are asked so (eval/repo/context.py), and the data stage's file-shown
examples (data.tasks `file`) train the same question.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..prompts import hole_marker
from .spans import Function, body_indent, closing

CHARS_PER_TOKEN = 3  # a budget in tokens, kept in characters (measured: Go 2.9, Python 3.4-3.8 a token)


def with_hole(text: str, fn: Function, cut: list[Function] = ()) -> tuple[str, str, str]:
    """(before, marker line, after) of `text` around `fn`'s body; `cut` (other functions of the file, never
    shown: held-out ones) taken out (cut_out)."""
    raw, fn = cut_out(text.encode(), [f for f in cut if f.id != fn.id], fn)
    return hole_around(raw, fn.start, fn.end, fn.language, fn.indent)


def cut_out(raw: bytes, cut: list[Function], fn: Function | None = None) -> tuple[bytes, Function | None]:
    """The file's bytes with the functions of `cut` taken out whole, doc comment and decorators too (a stub left
    in their place would teach that a placeholder is a body, the very reply a hole must not get), and `fn`
    (a function of the file kept) with its span moved by what was taken out above it. A function whose
    beginning is unknown (head -1) keeps its signature, its body replaced by `...` (`// …` in a brace language)."""
    outer: list[Function] = []
    for f in sorted(cut, key=lambda f: f.start):  # a function inside one taken out goes with it
        if not outer or f.start >= outer[-1].end:
            outer.append(f)
    for other in reversed(outer):
        if other.head >= 0:
            start, end, elided = other.head, other.end + raw[other.end : other.end + 1].count(b"\n"), b""
        else:
            python = other.language == "python"
            stub = f"{body_indent(other)}{'...' if python else '// …'}\n" + ("" if python else closing(other.body))
            start, end, elided = other.start, other.end, stub.encode()
        raw = raw[:start] + elided + raw[end:]
        if fn is not None and start < fn.start:
            shift = len(elided) - (end - start)
            fn = replace(fn, start=fn.start + shift, end=fn.end + shift, head=fn.head + shift if fn.head >= 0 else -1)
    return raw, fn


def hole_around(raw: bytes, start: int, end: int, language: str, indent: str) -> tuple[str, str, str]:
    """(before, marker line, after): the bytes of a file around the body at [start, end), replaced by a marker."""
    before, after = raw[:start].decode(errors="replace"), raw[end:].decode(errors="replace")
    inner = indent + ("    " if language == "python" else "\t")
    ending = "" if language == "python" else "}\n"  # a brace body's span ends with its closing brace
    return before, f"{inner}{hole_marker(language)}\n{ending}", after


# a line of the file's head that names what the file uses (Go's and Python's parenthesised groups are kept whole)
_IMPORT = {
    "python": re.compile(r"(import |from \S+ import )"),
    "go": re.compile(r"import\b"),
    "rust": re.compile(r"(pub )?use "),
    "java": re.compile(r"import "),
    "cpp": re.compile(r"#\s*include"),
}


# imports a Python file makes for its annotations alone: the names they bind are the body's too
_TYPE_CHECKING = re.compile(r"if (?:typing\.)?TYPE_CHECKING\s*:")


def _imports(lines: list[str], language: str) -> list[list[int]]:
    """The file's import lines, each a group of line numbers (a parenthesised group's lines with its first, an
    `if TYPE_CHECKING:` block's with its `if`)."""
    pattern, groups, inside, guarded = _IMPORT.get(language), [], False, False
    for i, line in enumerate(lines):
        if guarded and (not line.strip() or line[:1] in " \t"):  # `if TYPE_CHECKING:`'s block: its imports
            if line.strip():
                groups[-1].append(i)
            continue
        guarded = False
        if inside:
            groups[-1].append(i)
            inside = not line.rstrip().endswith(")")
        elif pattern is not None and pattern.match(line):
            groups.append([i])
            inside = line.rstrip().endswith("(")
        elif language == "python" and _TYPE_CHECKING.match(line):
            groups.append([i])
            guarded = True
    return groups


def _joined(lines: list[str], at: list[int]) -> str:
    """The lines at `at` (ascending), a cut marked wherever lines are left out: before, between, after them."""
    out, last = [], -1
    for i in at + [len(lines)]:
        out.append(("…\n" if i > last + 1 else "") + (lines[i] if i < len(lines) else ""))
        last = i
    return "".join(out)


# the lines that outline a Python file the window leaves out: what it defines and what its instances hold
_OUTLINE = {
    "python": re.compile(r"\s*(async\s+def\s|def\s|class\s|self\.\w+\s*(:[^=]+)?=(?!=))|[A-Za-z_]\w*\s*(:[^=]+)?=(?!=)")
}


# outlined first: the classes and what their instances hold (the names a method's body most often needs)
_STATE = re.compile(r"\s*(class\s|def __init__\(|self\.\w+\s*(:[^=]+)?=(?!=))")


def _outline(up: list[str], down: list[str], start: int, language: str, room: int) -> tuple[set[int], set[int]]:
    """The outline lines (above the window: indices of `up` before `start`; below it: of `down`) that fit
    `room`: classes and instance state first, then the other definitions; nearest the hole first in each."""
    pattern = _OUTLINE.get(language)
    if pattern is None:
        return set(), set()
    near = [(_STATE.match(up[i]) is None, start - i, 0, i) for i in range(start) if pattern.match(up[i])]
    near += [(_STATE.match(down[j]) is None, j + 1, 1, j) for j in range(len(down)) if pattern.match(down[j])]
    taken: tuple[set[int], set[int]] = (set(), set())
    for _, _, side, i in sorted(near):
        line = (up, down)[side][i]
        if len(line) <= room:
            taken[side].add(i)
            room -= len(line)
    return taken


def trimmed(
    before: str,
    hole: str,
    after: str,
    budget_chars: int,
    language: str = "python",
    after_share: float = 0.0,
    outline_share: float = 0.0,
) -> str:
    """The hole with as much of the file around it as fits: the file's imports first (up to half the room:
    the names a body uses come from there), then the lines just before the hole (the signature and doc
    comment first, then upward), then after it. `after_share` of the room the imports leave is kept for the
    lines after the hole (a method's class goes on below it) where there are any; `outline_share` of it for
    an outline of the lines the window leaves out (Python: def and class lines, `self.x =` and module-level
    assignments; classes and instance state first, then nearest the hole), so a body can name what its file defines far from it. Lines are
    kept whole; a cut is marked."""
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
    outline = int(room * outline_share) if language in _OUTLINE else 0
    kept = min(int(room * after_share), len(after))  # below the hole's share, where the file goes on
    room -= kept + outline
    start = len(up)  # the first line of the window around the hole
    while start > 0 and (start - 1 in head or len(up[start - 1]) <= room):
        start -= 1
        room -= 0 if start in head else len(up[start])
    room += kept
    shown_below = 0
    while shown_below < len(down) and len(down[shown_below]) <= room:
        room -= len(down[shown_below])
        shown_below += 1
    above, below = _outline(up, down[shown_below:], start, language, room + outline) if outline else (set(), set())
    shown = sorted((head | above) - set(range(start, len(up)))) + list(range(start, len(up)))
    rest = down[shown_below:]
    return _joined(up, shown) + hole + "".join(down[:shown_below]) + (_joined(rest, sorted(below)) if rest else "")
