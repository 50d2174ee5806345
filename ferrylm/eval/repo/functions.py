"""A repository's functions (source/spans.py: found as spans of their files) blanked, to prove a task's tests.

Blanking proves a task's tests exercise its function, two ways (each must fail at least one test):
- `raising`: the body raises (Python) or panics (Go);
- `wrong`: a value of the right type that is wrong. Python: the original's result, changed (a number
  +1, a string or bytes longer, a container one item shorter or one longer, a bool negated, a
  generator without its first item); a function that returns nothing does nothing. Go: the original's
  first non-error result changed the same way (numbers +1, strings longer, bools negated, slices one
  shorter), other types their zero value; a function without results does nothing. Rust: the original's
  result changed (integers wrapping +1, floats +1, strings longer, bools and chars changed, a Vec or &str
  one item shorter, an Option None, a Result's Ok value changed), other types `Default::default()`; a
  function without a result does nothing. Java: the original's result (primitives +1 or negated, a String
  longer, a List one item shorter), other references null. C++: the original's result (arithmetic types +1,
  bools negated, std::string longer, a vector one item shorter), other types value-initialised. Raising:
  Java throws UnsupportedOperationException, C++ `throw 0`, Rust panics, each before the original body (unreachable,
  as Go's). A Rust alias's wrong value is its aliased type's; an `impl Iterator` or `Self::IntoIter` result loses
  its first item; other `impl Trait` results have no wrong value (no task, said so). (A stub that does not compile makes no task.)
Then the constants a broken model writes first must fail too (constant_stubs: `return None`, `return False`, Go's
zero values, Rust's `Default::default()`, …).
"""

from __future__ import annotations

import ast
import re

from ...source.pairs import parse
from ...source.spans import Function, body_indent, closing, python_nodes, splice
from . import wrong_values
from .wrong_values import JAVA_BOXED, cpp_wrong, cpp_zero, go_results, go_wrong, java_wrong, rust_wrong

# The wrong-value stub's change of a result, as one expression (it runs inside the repository's
# process, which has no ferrylm to import).
_WRONG_PY = (
    "(lambda v: (not v) if isinstance(v, bool) else v + 1 if isinstance(v, (int, float, complex)) "
    "else v + type(v)('x') if isinstance(v, str) else v + b'x' if isinstance(v, bytes) "
    "else type(v)(list(v)[1:]) if isinstance(v, (list, tuple)) and v "
    "else type(v)([None]) if isinstance(v, (list, tuple)) "
    "else type(v)(list(v.items())[1:]) if isinstance(v, dict) and v "
    "else type(v)(list(v)[1:]) if isinstance(v, (set, frozenset)) and v else v)"
)


def stub(fn: Function, how: str, text: str) -> str | None:
    """The whole file with `fn` blanked: how = "raising" or "wrong" (see the module's docstring); None where the
    language cannot say a wrong value of its result type."""
    ind = body_indent(fn)
    if fn.language == "go":
        return splice(text, fn, _go_stub(fn, how, ind))
    if fn.language in _PANIC:
        body = _brace_stub(fn, how, ind, text)
        return None if body is None else splice(text, fn, body)
    if how == "raising":
        return splice(text, fn, f'{ind}raise NotImplementedError("blanked by ferrylm")\n')
    if fn.kind == "procedure":
        return splice(text, fn, f"{ind}return None\n")
    change = "__import__('itertools').islice(r, 1, None)" if fn.kind == "generator" else f"{_WRONG_PY}(r)"
    # The original runs and its result is changed on the way out: a decorator right above `def`
    # (below any others, so it wraps the plain function of a method, property or classmethod).
    decorator = f"{fn.indent}@(lambda f: (lambda *a, **k: (lambda r: {change})(f(*a, **k))))\n"
    raw = text.encode()
    def_at = raw.rfind(b"\n", 0, raw.rfind(b"def ", 0, fn.start)) + 1
    return (raw[:def_at] + decorator.encode() + raw[def_at:]).decode()


# Go, Rust, Java and C++ ----------------------------------------------------------------------


def _go_stub(fn: Function, how: str, ind: str) -> str:
    close = closing(fn.body)
    if how == "raising":  # the original stays, unreachable: the imports only the body uses stay used
        return f'{ind}panic("blanked by ferrylm")\n{fn.body}'
    if not fn.kind:
        return f"{ind}return\n{close}"
    types = go_results(fn.kind)
    names = [f"ferryR{i}" for i in range(len(types))]
    changed = next((i for i, t in enumerate(types) if t != "error"), 0)
    values = [go_wrong(n, t) if i == changed else n for i, (n, t) in enumerate(zip(names, types))]
    signature = fn.kind if fn.kind.startswith("(") else f"({fn.kind})"
    original = fn.body[: len(fn.body) - len(close)]
    return (
        f"{ind}{', '.join(names)} := func() {signature} {{\n{original}{ind}}}()\n"
        f"{ind}{', '.join('_' for _ in names)} = {', '.join(names)}\n"  # used even where a zero value replaces it
        f"{ind}return {', '.join(values)}\n{close}"
    )


def _brace_stub(fn: Function, how: str, ind: str, text: str) -> str | None:
    """Rust, Java and C++: a panic or throw before the original, which stays unreachable (as Go's: a result type
    only the body spells out, `impl Trait` or `auto`, still has its type); or the original run inside a closure
    and its result changed. None where no wrong value of the type can be written (an `impl Trait` but an iterator)."""
    close = closing(fn.body)
    head, rest = _constructor_call(fn)  # Java: a constructor's super(…) or this(…) stays first, as javac requires
    if how == "raising":
        return f"{head}{ind}{_PANIC[fn.language]}\n{rest}"
    typ = fn.kind.strip()
    if typ in ("", "()", "void"):
        return f"{head}{ind}return;\n{close}"
    original = fn.body[: len(fn.body) - len(close)]
    if fn.language == "rust" and typ.startswith("impl "):  # no type to name: the closure's is inferred
        if not re.match(r"impl\s+(?:\w+::)*Iterator\b", typ):
            return None
        return f"{ind}let ferry_r = (|| {{\n{original}{ind}}})();\n{ind}ferry_r.skip(1)\n{close}"
    if fn.language == "rust":
        return (
            f"{ind}let ferry_r: {typ} = (|| -> {typ} {{\n{original}{ind}}})();\n"
            f"{ind}{rust_wrong('ferry_r', rust_alias(typ, text))}\n{close}"
        )
    if fn.language == "java":  # a Callable lets the body's checked exceptions out, rethrown as they are
        return (
            f"{head}{ind}{typ} ferryR;\n{ind}try {{\n"
            f"{ind}ferryR = ((java.util.concurrent.Callable<{JAVA_BOXED.get(typ, typ)}>) () -> {{\n"
            f"{original}{ind}}}).call();\n{ind}}} catch (Exception ferryE) {{\n{ind}{_JAVA_RETHROW}\n{ind}}}\n"
            f"{ind}return {java_wrong('ferryR', typ)};\n{close}"
        )
    return (
        f"{ind}auto ferry_r = [&]() -> {typ} {{\n{original}{ind}}}();\n"
        f"{ind}return {cpp_wrong('ferry_r', typ)};\n{close}"
    )


# rethrows a checked exception unchanged where the method declares it (a local class: a body may declare one)
_JAVA_RETHROW = (
    'class FerryThrow { @SuppressWarnings("unchecked") <E extends Throwable> RuntimeException of(Throwable e) '
    "throws E { throw (E) e; } } throw new FerryThrow().<RuntimeException>of(ferryE);"
)


def _constructor_call(fn: Function) -> tuple[str, str]:
    """(a Java body's leading `super(…);` or `this(…);` statement ending its line, the rest of the body), else
    ("", the body); a one-line constructor's `{ super(msg); }` is split after the statement."""
    m = re.match(r"\s*(?:super|this)\s*\(", fn.body) if fn.language == "java" else None
    depth = 0
    for i in range(m.end() - 1 if m else len(fn.body), len(fn.body)):
        depth += {"(": 1, ")": -1}.get(fn.body[i], 0)
        if depth == 0 and fn.body[i] == ";":
            rest = fn.body[i + 1 :]
            return fn.body[: i + 1] + "\n", rest[1:] if rest.startswith("\n") else rest
    return "", fn.body


# The constant bodies a broken model writes first: a task's tests must fail each (tasks.py). -----------------

# a Python return annotation's zero value, by the annotation's outer name
_PY_ZERO = {
    "str": '""',
    "int": "0",
    "float": "0.0",
    "bool": "False",
    "bytes": 'b""',
    "list": "[]",
    "List": "[]",
    "Sequence": "[]",
    "dict": "{}",
    "Dict": "{}",
    "Mapping": "{}",
    "tuple": "()",
    "Tuple": "()",
    "set": "set()",
    "Set": "set()",
    "frozenset": "frozenset()",
    "Optional": "None",
}
_PY_CONSTANTS = ("None", "False", "0", '""', "[]", "{}")
_GO_NIL = ("*", "[]", "map[", "func", "chan", "interface")
_JAVA_ZERO = {"boolean": "false", "char": "(char) 0"} | dict.fromkeys(
    ("int", "long", "short", "byte", "double", "float"), "0"
)


def constant_stubs(fn: Function, text: str) -> list[tuple[str, str]]:
    """(the constant body, the whole file with it) for each constant of the function's result: Python's
    `return None`, its annotation's zero value, `False`, `0`, `""`, `[]`, `{}` (a generator: none yielded);
    Go's zero values of its result types; Rust's `Default::default()`; Java's and C++'s default of the type.
    None for a function that returns nothing: its wrong stub already does nothing."""
    ind, close = body_indent(fn), closing(fn.body)
    if fn.language == "python":
        if fn.kind == "procedure":
            return []
        if fn.kind == "generator":
            return [("yield from ()", splice(text, fn, f"{ind}yield from ()\n"))]
        values = dict.fromkeys(["None", *_python_zero(fn, text), *_PY_CONSTANTS])
        return [(f"return {v}", splice(text, fn, f"{ind}return {v}\n")) for v in values]
    typ = fn.kind.strip()
    if typ in ("", "()", "void"):
        return []
    if fn.language == "go":  # the original stays, unreachable, as in the raising stub
        zeros = ", ".join(_go_zero(t) for t in go_results(fn.kind))
        return [(f"return {zeros}", splice(text, fn, f"{ind}return {zeros}\n{fn.body}"))]
    body = {
        "rust": "Default::default()",
        "java": f"return {_JAVA_ZERO.get(typ, 'null')};",
        "cpp": f"return {cpp_zero(typ)};",
    }[fn.language]
    if body in (f"return {java_wrong('ferryR', typ)};", f"return {cpp_wrong('ferry_r', typ)};"):
        return []  # the wrong stub returns this already
    return [(body, splice(text, fn, f"{ind}{body}\n{close}"))]


def _python_zero(fn: Function, text: str) -> list[str]:
    """The zero value of the function's return annotation (`-> str`: `""`), where one is known."""
    try:
        node = python_nodes(parse(text)).get(fn.name)
    except SyntaxError:
        return []
    hint = getattr(node, "returns", None)
    if isinstance(hint, ast.Constant) and isinstance(hint.value, str):  # `-> "str"`
        try:
            hint = parse(hint.value, mode="eval").body
        except SyntaxError:
            return []
    hint = hint.value if isinstance(hint, ast.Subscript) else hint
    name = hint.attr if isinstance(hint, ast.Attribute) else getattr(hint, "id", None)
    return [_PY_ZERO[name]] if name in _PY_ZERO else []


def _go_zero(typ: str) -> str:
    """Go's zero value of a type, spelled as a lazy body writes it."""
    if typ == "string":
        return '""'
    if typ == "bool":
        return "false"
    if wrong_values.GO_NUMBER.match(typ):
        return "0"
    if typ.startswith(_GO_NIL) or typ in ("error", "any"):
        return "nil"
    return f"*new({typ})"


# a raise the compiler does not count as the end of the body: the original after it is not "unreachable" to it
_PANIC = {
    "rust": 'if true { panic!("blanked by ferrylm"); }',
    "java": 'if (true) throw new UnsupportedOperationException("blanked by ferrylm");',
    "cpp": "if (true) throw 0;",
}


def wrong_by_default(fn: Function, text: str) -> bool:
    """Whether `fn`'s wrong stub can only return `Default::default()` (Rust: a generic `T`, a reference, a type
    ferrylm has no wrong value for), which compiles only where the type has a default."""
    typ = fn.kind.strip()
    if fn.language != "rust" or typ in ("", "()") or typ.startswith("impl "):
        return False
    return rust_wrong("ferry_r", rust_alias(typ, text)) == "Default::default()"


def rust_alias(typ: str, text: str) -> str:
    """What a type alias of the file stands for (`type HammingResult = Result<usize, StrSimError>;`), else `typ`."""
    if not re.fullmatch(r"\w+", typ):
        return typ
    found = re.search(rf"^\s*(?:pub(?:\([^)]*\))?\s+)?type\s+{typ}\s*=\s*([^;]+);", text, re.M)
    return " ".join(found.group(1).split()) if found else typ
