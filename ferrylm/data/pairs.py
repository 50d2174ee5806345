"""Docstring → body pairs from Python source, the HumanEval shape, extracted with `ast`.

The prompt is a top-level function's decorators, signature and docstring; the answer is the body
that follows, exactly as written in the file.
"""
from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass


@dataclass
class Pair:
    source: str       # file (relative to its corpus root) and function name
    prompt_code: str  # signature + docstring, ending in a newline
    body: str         # the rest of the function, ending in a newline


def extract_pairs(text: str, source: str, min_body_lines: int, max_body_lines: int) -> list[Pair]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences in old code are not our problem
            tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    lines = text.splitlines(keepends=True)
    pairs = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if ast.get_docstring(node) is None or len(node.body) < 2:
            continue
        doc_end = node.body[0].end_lineno
        if node.body[1].lineno <= doc_end:  # something shares the docstring's last line
            continue
        start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        body_lines = lines[doc_end:node.end_lineno]
        code_lines = [ln for ln in body_lines if ln.strip()]
        if not (min_body_lines <= len(code_lines) <= max_body_lines):
            continue
        if all(ln.strip() in ("pass", "...") or ln.strip().startswith("raise NotImplementedError") for ln in code_lines):
            continue
        body = "".join(body_lines).rstrip() + "\n"
        pairs.append(Pair(f"{source}::{node.name}", "".join(lines[start - 1:doc_end]), body))
    return pairs
