"""Function pairs from Python source, extracted with `ast`: what the *generate* task (doc comment +
signature → body, the HumanEval shape) and the *explain* task (code → the docstring's summary) learn.

Top-level functions and the methods of classes (nested classes too) count; a function nested in
another is left out, since it reads its enclosing scope. A method is dedented to stand at the top level.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass

from .summary import dedent, summary


@dataclass
class Pair:
    source: str  # file (relative to its corpus root) and function name
    prompt_code: str  # signature + docstring, ending in a newline
    body: str  # the rest of the function, ending in a newline
    summary: str = ""  # the doc comment's first paragraph, one line ("" when it has none usable)
    code: str = ""  # the function without its doc comment (the explain task's prompt)


def _functions(body: list, prefix: str = ""):
    """(qualified name, node) of the functions in a module or class body, classes recursed into."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node.body, f"{prefix}{node.name}.")


def extract_pairs(text: str, source: str, min_body_lines: int, max_body_lines: int) -> list[Pair]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences in old code are not our problem
            tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    lines = text.splitlines(keepends=True)
    pairs = []
    for name, node in _functions(tree.body):
        docstring = ast.get_docstring(node)
        if docstring is None or len(node.body) < 2:
            continue
        doc_start, doc_end = node.body[0].lineno, node.body[0].end_lineno
        if node.body[1].lineno <= doc_end or lines[doc_start - 1][: node.body[0].col_offset].strip():
            continue  # code shares a line with the docstring
        start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        body_lines = lines[doc_end : node.end_lineno]
        code_lines = [ln for ln in body_lines if ln.strip()]
        if not (min_body_lines <= len(code_lines) <= max_body_lines):
            continue
        if all(
            ln.strip() in ("pass", "...") or ln.strip().startswith("raise NotImplementedError") for ln in code_lines
        ):
            continue
        body = "".join(body_lines).rstrip() + "\n"
        signature = "".join(lines[start - 1 : doc_start - 1])
        col = node.col_offset
        pairs.append(
            Pair(
                f"{source}::{name}",
                dedent("".join(lines[start - 1 : doc_end]), col),
                dedent(body, col),
                summary(docstring),
                dedent(signature + body, col),
            )
        )
    return pairs
