"""The "wrong value" of a blanked function's result in Go, Rust, Java and C++: an expression of the result's
type that differs from the original's value where a change is known (functions.py's docstring lists them),
written in the repository's own language.
"""

from __future__ import annotations

import re

from ...source.pairs_ts import parser

GO_NUMBER = re.compile(r"^(?:u?int(?:8|16|32|64)?|uintptr|float(?:32|64)|complex(?:64|128)|byte|rune)$")


def go_results(result: str) -> list[str]:
    """The result types of a Go signature's result text, one per value: `int`, `(int, error)`, `(n int, err
    error)`, `(equal, visited bool)` (two), `(s struct{ NI, NX int })` (one), read by Go's grammar."""
    if not result.startswith("("):
        return [result]
    src = f"package p\nfunc f() {result} {{}}\n".encode()
    fn = parser("go").parse(src).root_node.named_children[-1]
    types = []
    for p in fn.child_by_field_name("result").named_children:
        if p.type not in ("parameter_declaration", "variadic_parameter_declaration"):
            continue
        typ = p.child_by_field_name("type").text.decode()
        types += [typ] * max(1, len(p.children_by_field_name("name")))
    return types


def go_wrong(name: str, typ: str) -> str:
    """An expression of type `typ` that differs from `name`'s value (its zero value where no change is known)."""
    if GO_NUMBER.match(typ):
        return f"{name} + 1"
    if typ == "string":
        return f'{name} + "x"'
    if typ == "bool":
        return f"!{name}"
    if typ.startswith("[]"):
        return (
            f"func() {typ} {{ if len({name}) > 0 {{ return {name}[1:] }}; return append({name}, *new({typ[2:]})) }}()"
        )
    return f"*new({typ})"


_RUST_INT = re.compile(r"^(?:[iu](?:8|16|32|64|128|size))$")


def _rust_generic(typ: str, outer: str) -> str | None:
    """T of `outer<T>` (Option<T>, Vec<T>), or None."""
    typ = typ.replace(" ", "")
    return typ[len(outer) + 1 : -1] if typ.startswith(outer + "<") and typ.endswith(">") else None


def rust_wrong(name: str, typ: str) -> str:
    """An expression of type `typ` that differs from `name`'s value where it can (functions.py's docstring lists them)."""
    typ = typ.strip()
    if _RUST_INT.match(typ):
        return f"{name}.wrapping_add(1)"
    if typ in ("f32", "f64"):
        return f"{name} + 1.0"
    if typ == "bool":
        return f"!{name}"
    if typ == "char":
        return f"if {name} == 'x' {{ 'y' }} else {{ 'x' }}"
    if typ == "String":
        return f'{name} + "x"'
    if typ.replace(" ", "").startswith("&") and typ.endswith("str"):
        return f'match {name}.chars().next() {{ Some(c) => &{name}[c.len_utf8()..], None => "x" }}'
    if _rust_generic(typ, "Vec") is not None:
        return f"{{ let mut v = {name}; if !v.is_empty() {{ v.remove(0); }} v }}"
    if _rust_generic(typ, "Option") is not None:
        return f"{name}.and(None)"
    if (inner := _rust_generic(typ, "Result")) is not None:
        return f"{name}.map(|v| {rust_wrong('v', _first_argument(inner))})"
    if typ.replace(" ", "") == "Self::IntoIter":  # IntoIterator's own iterator: the same one, its first item gone
        return f"{{ let mut it = {name}; it.next(); it }}"
    return "Default::default()"


def _first_argument(arguments: str) -> str:
    """`Vec<u8>` of `Vec<u8>,String`: the first of a generic's arguments."""
    depth = 0
    for i, c in enumerate(arguments):
        depth += (c in "<([") - (c in ">)]")
        if c == "," and depth == 0:
            return arguments[:i]
    return arguments


JAVA_BOXED = {
    "int": "Integer",
    "long": "Long",
    "short": "Short",
    "byte": "Byte",
    "char": "Character",
    "boolean": "Boolean",
    "double": "Double",
    "float": "Float",
}
_CPP_NUMBER = re.compile(
    r"^(?:(?:unsigned|signed|long|short|const)\s+)*(?:int|long|short|char|float|double|size_t|"
    r"std::size_t|u?int(?:8|16|32|64)_t|std::u?int(?:8|16|32|64)_t|unsigned|long long)$"
)


def java_wrong(name: str, typ: str) -> str:
    if typ in ("int", "long", "short", "byte", "char"):
        return f"({typ}) ({name} + 1)"
    if typ in ("double", "float"):
        return f"{name} + 1"
    if typ == "boolean":
        return f"!{name}"
    if typ == "String":
        return f'{name} + "x"'
    if typ.startswith(("List<", "java.util.List<")):
        return f"{name} == null || {name}.isEmpty() ? null : {name}.subList(1, {name}.size())"
    return "null"


def cpp_wrong(name: str, typ: str) -> str:
    bare = typ.replace("const ", "").strip()
    if bare == "bool":
        return f"!{name}"
    if _CPP_NUMBER.match(bare):
        return f"{name} + 1"
    if bare in ("std::string", "string"):
        return f'{name} + "x"'
    if bare.startswith(("std::vector<", "vector<")):
        return f"[&] {{ auto v = {name}; if (!v.empty()) v.erase(v.begin()); return v; }}()"
    return cpp_zero(typ)


def cpp_zero(typ: str) -> str:
    """A C++ type's value-initialised value, as an expression (`char *{}` is none: a pointer's is nullptr)."""
    return "nullptr" if typ.rstrip().endswith("*") else f"{typ}{{}}"
