"""Doc comment → body pairs for Java, Go, Rust, C and C++, parsed with tree-sitter.

The prompt is the doc comment right above a function (Javadoc `/** */`, Rust `///`, Go and C
`//` or `/* */` blocks) and the signature up to and including the body's opening brace; the answer is
the rest of the body, exactly as written. Methods count wherever they stand (Java and C++ class
bodies, Go receivers, Rust `impl` blocks). The explain task's prompt is the function without its doc
comment, dedented; its answer the comment's summary. Same `Pair` shape as the Python extractor.
"""

from __future__ import annotations

import importlib
from functools import cache

from .pairs import Pair
from .summary import comment_text, dedent, summary

# language → (grammar module, function node types, comment node types, doc comment prefixes)
_SPECS = {
    "java": (
        "tree_sitter_java",
        {"method_declaration", "constructor_declaration"},
        {"block_comment", "line_comment"},
        ("/**",),
    ),
    "go": ("tree_sitter_go", {"function_declaration", "method_declaration"}, {"comment"}, ("//", "/*")),
    "rust": ("tree_sitter_rust", {"function_item"}, {"line_comment", "block_comment"}, ("///", "/**")),
    "c": ("tree_sitter_c", {"function_definition"}, {"comment"}, ("//", "/*")),
    "cpp": ("tree_sitter_cpp", {"function_definition"}, {"comment"}, ("//", "/*")),
}
_ATTRIBUTES = {"attribute_item", "marker_annotation", "annotation"}  # may sit between doc and fn


@cache
def parser(language: str):
    from tree_sitter import Language, Parser

    module = importlib.import_module(_SPECS[language][0])
    grammar = getattr(module, "language", None) or getattr(module, f"language_{language}")
    return Parser(Language(grammar()))


def supported(language: str) -> bool:
    if language not in _SPECS:
        return False
    try:
        parser(language)
    except ImportError:
        return False
    return True


def extract_pairs_ts(
    text: str, source: str, language: str, min_body_lines: int, max_body_lines: int, documented: bool = True
) -> list[Pair]:
    """The functions with a doc comment as pairs; `documented=False`: those without one too (their prompt the
    signature alone, no summary)."""
    functions, comments, prefixes = _SPECS[language][1:]
    src = text.encode()
    tree = parser(language).parse(src)
    pairs = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type not in functions:
            stack.extend(reversed(node.children))
            continue
        pair = _pair(node, src, source, (comments, prefixes, documented), min_body_lines, max_body_lines)
        if pair:
            pairs.append(pair)
    return pairs


def _doc_span(node, comments, prefixes) -> tuple[int, int] | None:
    """(start, end) bytes of the doc comment block directly above `node` (attributes may come between)."""
    start, end, row, cur = None, None, node.start_point[0], node.prev_sibling
    while cur is not None and cur.type in _ATTRIBUTES and cur.end_point[0] >= row - 1:
        row, cur = cur.start_point[0], cur.prev_sibling
    while cur is not None and cur.type in comments and cur.end_point[0] >= row - 1:
        body = cur.text.decode(errors="replace").lstrip()
        if not body.startswith(prefixes):
            break
        end = end if end is not None else cur.end_byte  # the comment nearest the function
        start, row, cur = cur.start_byte, cur.start_point[0], cur.prev_sibling
    return None if start is None else (start, end)


def _attributes(node) -> list[str]:
    """The attributes right above a node (Rust's `#[test]`, `#[cfg(test)]`), as written."""
    out, cur = [], node.prev_sibling
    while cur is not None and cur.type in ("attribute_item", "line_comment", "block_comment"):
        out += [cur.text.decode(errors="replace")] if cur.type == "attribute_item" else []
        cur = cur.prev_sibling
    return out


def _rust_test(node) -> bool:
    """A Rust test: a `#[test]` function, or any function of a `#[cfg(test)]` module (test code, never a task)."""
    if node.type != "function_item":
        return False
    if any(a.replace(" ", "") in ("#[test]", "#[tokio::test]") for a in _attributes(node)):
        return True
    cur = node.parent
    while cur is not None:
        if cur.type == "mod_item" and any("cfg(test)" in a.replace(" ", "") for a in _attributes(cur)):
            return True
        cur = cur.parent
    return False


def _is_function(node) -> bool:
    """A C/C++ function_definition whose declarator really declares a function: the C grammar reads
    `class Foo : public Bar { ... }` as one too (a type, an error, a name and a body). Parses with
    errors inside are never trusted."""
    if node.has_error:
        return False
    if node.type != "function_definition":
        return True
    decl = node.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    return decl is not None


def _pair(node, src: bytes, source: str, docs: tuple, min_lines: int, max_lines: int) -> Pair | None:
    """`docs`: (comment node types, doc comment prefixes, whether one is required)."""
    comments, prefixes, documented = docs
    body = node.child_by_field_name("body")
    if body is None or not src[body.start_byte : body.start_byte + 1] == b"{" or not _is_function(node):
        return None
    anchor = node.parent if node.parent is not None and node.parent.type == "template_declaration" else node
    if _rust_test(anchor):
        return None
    span = _doc_span(anchor, comments, prefixes)
    if span is None and documented:
        return None
    line_start = src.rfind(b"\n", 0, span[0] if span else anchor.start_byte) + 1
    split = body.start_byte + 1
    if src[split : split + 1] == b"\n":
        split += 1
    answer = src[split : node.end_byte].decode(errors="replace")
    # without the closing brace; a one-liner's code shares its line (`{ return sf.name }`)
    code_lines = [ln for ln in answer.rstrip().removesuffix("}").splitlines() if ln.strip()]
    if not (min_lines <= len(code_lines) <= max_lines):
        return None
    name = function_name(node)
    code_start = src.find(b"\n", span[1]) + 1 if span else 0  # the line after the doc comment,
    code_start = min(code_start, anchor.start_byte) if code_start > 0 else anchor.start_byte  # or its own
    column = anchor.start_point[1]
    code = dedent(" " * column + src[code_start : node.end_byte].decode(errors="replace").lstrip(" \t"), column) + "\n"
    doc = summary(comment_text(src[span[0] : span[1]].decode(errors="replace"))) if span else ""
    return Pair(f"{source}::{name}", src[line_start:split].decode(errors="replace"), answer + "\n", doc, code)


# Java's and C++'s classes: a method is named with the classes around it (`Outer.Inner.get`, `S::get`), so two
# classes' methods of one name in a file are two functions
_CLASSES = {
    "class_declaration": ".",
    "interface_declaration": ".",
    "enum_declaration": ".",
    "record_declaration": ".",
    "class_specifier": "::",
    "struct_specifier": "::",
}


def _enclosing(node) -> str:
    """The names of the classes around a Java or C++ method, each followed by its separator ("" for none)."""
    out, at = "", node.parent
    while at is not None:
        if at.type in _CLASSES and (named := at.child_by_field_name("name")) is not None:
            out = named.text.decode(errors="replace") + _CLASSES[at.type] + out
        at = at.parent
    return out


def function_name(node) -> str:
    """A function's name in its file (C++: its declarator up to the parameters); a Go method's with its
    receiver's type, `SliceIndex.Key`, a Java or C++ method's with its classes, `Calc.sum`, `S::get`, so two
    types' methods of one name are two functions."""
    named = node.child_by_field_name("name") or node.child_by_field_name("declarator")
    name = named.text.decode(errors="replace").split("(")[0] if named is not None else "?"
    name = name.lstrip("*& \t") if node.type == "function_definition" else name  # C++: `char* S::f` is S::f
    receiver = node.child_by_field_name("receiver") if node.type == "method_declaration" else None
    typ = next((c.child_by_field_name("type") for c in (receiver.named_children if receiver else [])), None)
    if typ is None:
        return _enclosing(node) + name
    return typ.text.decode(errors="replace").lstrip("*").split("[")[0].strip() + "." + name
