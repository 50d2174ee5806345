"""Python replies: what a HumanEval reply appends to its prompt, and the body a repository task's reply
gives (the whole function or the body alone, fenced or not, with the imports it wrote above it)."""

from __future__ import annotations

import ast
import re
import textwrap

from ...prompts import extract_code
from ...source.pairs import called_name, parse


def completion_from_reply(problem: dict, reply: str) -> str:
    """What to append to the prompt: a body, or a whole redefinition if the model wrote one."""
    code = extract_code(reply)
    if re.search(rf"^\s*def\s+{re.escape(problem['entry_point'])}\s*\(", code, re.M):
        return "\n" + code  # the prompt's docstring-only function is redefined by the reply
    return code


def _relative_indent(task: dict) -> str:
    """The original body's indentation beyond the def line's."""
    first = next((ln for ln in task["body"].splitlines() if ln.strip()), task["indent"] + "    ")
    return first[len(task["indent"]) : len(first) - len(first.lstrip())] or "    "


def python_body(task: dict, reply: str) -> str:
    """The body a reply gives, indented as the function's body stands in its file."""
    code = extract_code(reply).replace("\r\n", "\n")
    name = called_name(task["name"])
    m = re.search(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(name)}[ \t]*\(", code, re.M)
    if m:  # the whole function: its body, past a doc string, after the imports the reply wrote above it
        above = _imports(code[: m.start()])
        chunk = textwrap.dedent(code[code.rfind("\n", 0, m.start()) + 1 :])
        try:
            node = next(n for n in parse(chunk).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
            # past the doc string (comments after it stay), else from the first statement
            start = (
                node.body[0].end_lineno if ast.get_docstring(node) and len(node.body) > 1 else node.body[0].lineno - 1
            )
            code = "\n".join(
                above + textwrap.dedent("\n".join(chunk.splitlines()[start : node.end_lineno])).splitlines()
            )
        except (SyntaxError, StopIteration):
            pass  # scored as written: the tests will say
    else:
        code = _before_a_sibling(code)
    lines = textwrap.dedent(code).strip("\n").splitlines()
    prefix = task["indent"] + _relative_indent(task)
    return "".join((prefix + ln if ln.strip() else "") + "\n" for ln in lines) or f"{prefix}pass\n"


def _before_a_sibling(code: str) -> str:
    """A body-only reply up to where it goes on into a sibling: a definition (`def`, `class`, a decorator) less
    indented than the body's first line. Left whole, dedenting it would push the body one level too deep."""
    lines = code.split("\n")
    first = next((ln for ln in lines if ln.strip()), "")
    depth = len(first) - len(first.lstrip())
    for i, ln in enumerate(lines):
        if ln.strip() and len(ln) - len(ln.lstrip()) < depth and re.match(r"\s*(?:async\s+def|def|class|@)\b", ln):
            return "\n".join(lines[:i])
    return code


def _imports(text: str) -> list[str]:
    """The import statements a reply wrote at its top level (above its function): they travel with the
    body as its first lines, since the name they bind is what the body uses."""
    try:
        tree = parse(textwrap.dedent(text))
    except SyntaxError:
        return [ln.strip() for ln in text.splitlines() if re.match(r"(?:import|from)\s+[\w.]+", ln)]
    return [
        ast.unparse(n)
        for n in tree.body
        if isinstance(n, (ast.Import, ast.ImportFrom)) and getattr(n, "module", None) != "__future__"
    ]
