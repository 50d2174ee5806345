"""Function pairs from Python source, extracted with `ast`: what the *generate* task (doc comment +
signature → body, the HumanEval shape) and the *explain* task (code → the docstring's summary) learn.

Top-level functions and the methods of classes (nested classes too) count; a function nested in
another is left out, since it reads its enclosing scope. A method is dedented to stand at the top level.
"""

from __future__ import annotations

import ast
import threading
import tokenize
import warnings
from dataclasses import dataclass

from .summary import dedent, summary

# CPython 3.11's AST constructor keeps one recursion count per interpreter: a thread switched in mid-parse (a
# finalizer run by the collector) that parses too fails with "AST constructor recursion depth mismatch" (gh-106905)
_PARSING = threading.Lock()


def parse(text: str, mode: str = "exec") -> ast.AST:
    """ast.parse, one thread at a time (the finder proves functions on threads); old code's invalid escape
    sequences are not our problem, so their warnings are silenced."""
    with _PARSING, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text, mode=mode)


@dataclass
class Pair:
    source: str  # file (relative to its corpus root) and function name
    prompt_code: str  # signature + docstring, ending in a newline
    body: str  # the rest of the function, ending in a newline
    summary: str = ""  # the doc comment's first paragraph, one line ("" when it has none usable)
    code: str = ""  # the function without its doc comment (the explain task's prompt)


ACCESSORS = (".setter", ".deleter")  # a property's other defs: `Class.x.setter` beside the getter `Class.x`


def functions_of(body: list, prefix: str = ""):
    """(qualified name, node) of the functions in a module or class body, classes recursed into. A property's
    setter and deleter (`@x.setter`) are named `Class.x.setter`: each def has its own name and span."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name + _accessor(node), node
        elif isinstance(node, ast.ClassDef):
            yield from functions_of(node.body, f"{prefix}{node.name}.")


def _accessor(node: ast.FunctionDef) -> str:
    """ ".setter" / ".deleter" for a def decorated `@<its own name>.setter` / `.deleter`, else ""."""
    for d in node.decorator_list:
        if isinstance(d, ast.Attribute) and isinstance(d.value, ast.Name) and d.value.id == node.name:
            if "." + d.attr in ACCESSORS:
                return "." + d.attr
    return ""


def called_name(qualified: str) -> str:
    """The name a caller writes for a function of this qualified name: `x` for Python's `Class.x.setter` (an
    accessor is always a class's, so two dots before it; a Go method `T.setter` keeps its name)."""
    return without_accessor(qualified).rsplit(".", 1)[-1]


def without_accessor(qualified: str) -> str:
    """`Class.x` for `Class.x.setter`; any other name as it is."""
    for suffix in ACCESSORS:
        if qualified.endswith(suffix) and qualified.count(".") >= 2:
            return qualified.removesuffix(suffix)
    return qualified


def header_end(node: ast.FunctionDef, lines: list[str]) -> int:
    """The line on which a def's header ends: its colon, at bracket depth 0 after `def` (tokenized: a colon in a
    default's lambda, a string or a comment is not it)."""
    depth, seen_def = 0, False
    start = node.lineno
    try:
        for tok in tokenize.generate_tokens(iter(lines[start - 1 : node.body[0].lineno]).__next__):
            if tok.type == tokenize.NAME and tok.string == "def":
                seen_def = True
            elif tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth -= 1
            elif seen_def and depth == 0 and tok.type == tokenize.OP and tok.string == ":":
                return start + tok.start[0] - 1
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return node.body[0].lineno  # not found: as if the body shared the header's line (never a pair)


def extract_pairs(
    text: str, source: str, min_body_lines: int, max_body_lines: int, documented: bool = True
) -> list[Pair]:
    """The functions with a docstring as pairs; `documented=False`: those without one too (their prompt the
    signature alone, no summary), as a task asked with its file shown needs none."""
    try:
        tree = parse(text)
    except (SyntaxError, ValueError):
        return []
    lines = text.splitlines(keepends=True)
    pairs = []
    for name, node in functions_of(tree.body):
        docstring = ast.get_docstring(node)
        if docstring is None and not documented:
            doc_end = header_end(node, lines)  # the prompt ends with the signature
            doc_start = doc_end + 1
            if node.body[0].lineno <= doc_end:
                continue  # the body shares the def's line
        elif docstring is None or len(node.body) < 2:
            continue
        else:
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
                summary(docstring) if docstring else "",
                dedent(signature + body, col),
            )
        )
    return pairs
