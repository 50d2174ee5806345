"""A file's functions as spans: where each body the data stage would make a *generate* example of (a doc comment
and a body of a few lines) lies in its file, by byte offsets, so that it can be cut out, shown around, or replaced
by a reply. Its prompt is that example's prompt (signature + doc comment). Python, Go, Rust, Java and C++
(tree-sitter's grammars, as the data stage uses). The eval's repository tasks (eval/repo/) and the data stage's
file-shown examples read them alike.
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import asdict, dataclass

from .pairs import extract_pairs, header_end, parse
from .pairs import functions_of as python_defs
from .pairs_ts import extract_pairs_ts, function_name, parser

# the files repository tasks read (C++'s headers by their C++ names: a header-only library's functions live there)
LANGUAGES = {
    ".py": "python",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    **dict.fromkeys((".cpp", ".cc", ".cxx", ".hpp", ".hh", ".hxx"), "cpp"),
}


@dataclass(frozen=True)
class Function:
    file: str  # path inside the repository
    name: str  # qualified name (Class.method; Go: Receiver.method)
    language: str
    prompt: str  # signature + doc comment, dedented: the generate task's prompt
    body: str  # the body as written in the file
    start: int  # byte offsets of `body` in the file
    end: int
    indent: str  # Python: the def line's indentation, which a model's (dedented) body gets back
    kind: str  # Python: "value", "procedure" or "generator"; Go: the result types, "" for none
    head: int = -1  # byte offset where the whole function begins (decorators, a doc comment above it); -1: unknown

    @property
    def id(self) -> str:
        return f"{self.file}::{self.name}"

    def as_dict(self) -> dict:
        return asdict(self)


def functions(
    text: str, file: str, language: str, min_lines: int = 2, max_lines: int = 40, documented: bool = True
) -> list[Function]:
    """The file's functions that the data stage would take, with their body spans; `documented=False`: those
    without a doc comment too (their prompt the signature alone)."""
    if language == "python":
        return _python_functions(text, file, min_lines, max_lines, documented)
    return _brace_functions(text, file, language, min_lines, max_lines, documented)


def splice(text: str, fn: Function, body: str) -> str:
    """The file with `fn`'s body replaced by `body`."""
    raw = text.encode()
    return (raw[: fn.start] + body.encode() + raw[fn.end :]).decode()


# Python ------------------------------------------------------------------------------------------


def python_nodes(tree: ast.Module) -> dict:
    """Qualified name → def node, named as the data stage names its pairs (a property's setter apart)."""
    return dict(python_defs(tree.body))


def _python_functions(text: str, file: str, min_lines: int, max_lines: int, documented: bool) -> list[Function]:
    pairs = extract_pairs(text, file, min_lines, max_lines, documented)
    if not pairs:
        return []
    nodes = python_nodes(parse(text))
    lines = text.splitlines(keepends=True)  # as extract_pairs reads them
    line_starts = [0]
    for line in text.encode().splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))
    out = []
    for p in pairs:
        name = p.source.split("::", 1)[1]
        node = nodes.get(name)
        if node is None or isinstance(node, ast.AsyncFunctionDef):
            continue  # a coroutine's result cannot be changed before it is awaited
        documented_here = ast.get_docstring(node) is not None
        doc_end = node.body[0].end_lineno if documented_here else header_end(node, lines)
        end = node.end_lineno
        start_b, end_b = line_starts[doc_end], line_starts[end]
        body = text.encode()[start_b:end_b].decode()
        def_line = text.splitlines()[node.lineno - 1]
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        out.append(
            Function(
                file,
                name,
                "python",
                p.prompt_code,
                body,
                start_b,
                end_b,
                def_line[: len(def_line) - len(def_line.lstrip())],
                _python_kind(node),
                line_starts[first - 1],
            )
        )
    return out


def _python_kind(node: ast.FunctionDef) -> str:
    inner = {
        id(n)
        for f in ast.walk(node)
        if f is not node and isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))
        for n in ast.walk(f)
    }
    own = [n for n in ast.walk(node) if id(n) not in inner]
    if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in own):
        return "generator"
    if any(
        isinstance(n, ast.Return)
        and n.value is not None
        and not (isinstance(n.value, ast.Constant) and n.value.value is None)
        for n in own
    ):
        return "value"
    return "procedure"


def body_indent(fn: Function) -> str:
    first = next((ln for ln in fn.body.splitlines() if ln.strip()), fn.indent + "    ")
    return first[: len(first) - len(first.lstrip())]


# node types of a function, and the field that holds its result type
_BRACE = {
    "go": ({"function_declaration", "method_declaration"}, "result"),
    "rust": ({"function_item"}, "return_type"),
    "java": ({"method_declaration", "constructor_declaration"}, "type"),
    "cpp": ({"function_definition"}, "type"),
}


def _name(node) -> str:
    """A function's name as the data stage's pairs give it."""
    return function_name(node)


def _brace_functions(
    text: str, file: str, language: str, min_lines: int, max_lines: int, documented: bool
) -> list[Function]:
    found = extract_pairs_ts(text, file, language, min_lines, max_lines, documented)
    names = Counter(p.source.split("::", 1)[1] for p in found)
    # a name twice in one file (methods of two types) cannot be told apart by id: neither is a task
    pairs = {p.source.split("::", 1)[1]: p for p in found if names[p.source.split("::", 1)[1]] == 1}
    kinds, result_field = _BRACE[language]
    src = text.encode()
    out = []
    stack = [parser(language).parse(src).root_node]
    while stack:
        node = stack.pop()
        if node.type not in kinds:
            stack.extend(node.children)
            continue
        name = _name(node)
        body = node.child_by_field_name("body")
        if name not in pairs or body is None:
            continue
        start = body.start_byte + 1 + (src[body.start_byte + 1 : body.start_byte + 2] == b"\n")
        result = node.child_by_field_name(result_field)
        kind = result.text.decode() if result is not None else ""
        declarator = node.child_by_field_name("declarator")
        if language == "cpp" and declarator is not None:
            # the type as written before the declarator (`const char`), less what is no part of a type (`static`)
            words = [
                w for w in src[node.start_byte : declarator.start_byte].decode().split() if w not in _CPP_SPECIFIERS
            ]
            kind = " ".join(words) or kind
            if declarator.type != "function_declarator":  # T* or T&: the marks before the name (not `S::`)
                kind += " " + "".join(c for c in declarator.text.decode().split(name)[0] if c in "*&")
        out.append(
            Function(
                file,
                name,
                language,
                pairs[name].prompt_code,
                src[start : node.end_byte].decode(),
                start,
                node.end_byte,
                "",
                kind,
                _comments_above(src, node.start_byte),
            )
        )
    twice = {n for n, k in Counter(f.name for f in out).items() if k > 1}  # overloads: one id, so neither
    return sorted((f for f in out if f.name not in twice), key=lambda f: f.start)


def same_named(text: str, language: str) -> list[str]:
    """The names two or more functions of one file share in a brace language (overloads; methods of two types in
    Rust): functions() gives none of them, since no id tells them apart."""
    if language not in _BRACE:
        return []
    kinds, names = _BRACE[language][0], Counter()
    stack = [parser(language).parse(text.encode()).root_node]
    while stack:
        node = stack.pop()
        if node.type not in kinds:
            stack.extend(node.children)
        elif node.child_by_field_name("body") is not None:
            names[_name(node)] += 1
    return sorted(n for n, k in names.items() if k > 1)


_CPP_SPECIFIERS = {"static", "inline", "virtual", "explicit", "constexpr", "extern", "friend"}


def _comments_above(src: bytes, at: int) -> int:
    """Where the comment and attribute lines directly above the line at byte `at` begin (a brace function's doc
    comment, its annotations), else that line's start."""
    line = src.rfind(b"\n", 0, at) + 1
    while line > 0:
        above = src.rfind(b"\n", 0, line - 1) + 1
        if not src[above:line].strip().startswith((b"//", b"/*", b"*", b"#[", b"@")):
            break
        line = above
    return line


def closing(body: str) -> str:
    """The body's closing brace and what follows it, from the start of its line when the brace stands alone."""
    at = body.rstrip().rfind("}")
    line = body.rfind("\n", 0, at) + 1
    return body[line:] if not body[line:at].strip() else body[at:]
