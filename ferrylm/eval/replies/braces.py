"""A chat reply in a brace language (C++, Java, Go, Rust) → the completion that follows the prompt.

Models answer with the body alone, or repeat the signature (with whatever its return type holds:
Go's `interface{}`, generics, where-clauses, default arguments), the imports, the class around the
method, helpers after it, a usage `main`, prose around the code block. Every shape of a correct answer
must become the program the bare canonical solution makes (tests/eval/tasks/test_humaneval_x.py checks all
164 tasks of each language).
"""

from __future__ import annotations

import re

from ...prompts import extract_code


def entry_point(problem: dict) -> str:
    """The function the prompt opens: the last declared name whose parameter list a body follows."""
    decl = problem["declaration"]
    names = [m.group(1) for m in NAME_PAREN.finditer(decl) if declares(decl, m) and _body_start(decl, m) is not None]
    return names[-1] if names else ""


# a name, type parameters (Rust/Java <..>, Go [..]) and the opening parenthesis of its parameters
NAME_PAREN = re.compile(r"\b(\w+)\s*(?:<[^(){};]*>|\[[^\]{};]*\])?\s*\(")
_CLOSE = {"(": ")", "[": "]", "{": "}"}


def _skip_group(code: str, i: int) -> int:
    """The index after the bracket group that opens at code[i] (its end when unbalanced)."""
    stack = [_CLOSE[code[i]]]
    for j in range(i + 1, len(code)):
        if code[j] in _CLOSE:
            stack.append(_CLOSE[code[j]])
        elif stack and code[j] == stack[-1]:
            stack.pop()
            if not stack:
                return j + 1
    return len(code)


_NOT_A_TYPE = {"if", "while", "for", "return", "match", "else", "in", "switch", "case", "new", "await", "go", "defer"}


def declares(code: str, m: re.Match) -> bool:
    """Whether a `name(` stands where a definition names its function: after `fn` / `func` / a
    receiver / a return type, not after `if` or an operator (`if is_palindrome(s) {` is a call)."""
    before = code[code.rfind("\n", 0, m.start()) + 1 : m.start()].rstrip()
    if before.endswith("->"):  # a member's call, `if (!node->f(v)) {`
        return False
    if re.search(r"\w::~?$", before):  # C++'s out-of-class definition, `bool S::f(`: the qualifier declares it
        return True
    word = re.search(r"(\w+)$", before)
    return bool(before) and before[-1] in "_>*&])" or (word is not None and word.group(1) not in _NOT_A_TYPE)


def _body_start(code: str, m: re.Match) -> int | None:
    """Where a definition's body begins (after its `{`), for a `name(` match: past the balanced
    parameters (default arguments, annotations, closures), then a return type or a where-clause whose
    own brackets are skipped — Go's `interface{}`, `struct{...}`, `map[string]interface{}`, `[2]T`.
    None for a call or a prototype (a `;` or the end comes first)."""
    i = _skip_group(code, m.end() - 1)
    while i < len(code):
        ch = code[i]
        if ch in ";}":
            return None
        if ch in "([":
            i = _skip_group(code, i)
            continue
        if ch == "{":
            if re.search(r"\b(?:interface|struct)\s*$", code[:i]):
                i = _skip_group(code, i)
                continue
            return i + 1
        i += 1
    return None


def completion_from_reply(problem: dict, reply: str, opened: int = 1) -> str:
    """What follows the prompt (which ends inside the opened function, `opened` braces deep: Java's
    method sits in its class): the body up to where what the prompt opened closes. The model may
    repeat the includes and the signature (the body after it is taken, whatever braces its return
    type holds) or the class around it, leave the braces out or be cut short (they are added), write
    helper functions after it (kept), or show a usage example after the function (a second `main`
    would not compile: it is dropped)."""
    code = extract_code(reply)
    name = entry_point(problem)
    for m in NAME_PAREN.finditer(code) if name else ():
        start = _body_start(code, m) if m.group(1) == name and declares(code, m) else None
        if start is not None:
            code = _past_prompt_body(problem, code[start:])
            break
    depth = 0
    for i, ch in enumerate(blank_literals(code)):
        depth += (ch == "{") - (ch == "}")
        if depth == -opened:
            return code[: i + 1] + "\n" + (_without_main(code[i + 1 :]) if opened == 1 else "")
    return code.rstrip() + "\n" + "}\n" * (opened + depth)


# what holds braces that are not the code's own: comments, strings (Java's text blocks, Rust's raw strings, Go's
# backquoted ones) and character literals ('{', '\n'; a Rust lifetime `'a` is none)
_LITERAL = re.compile(
    r"//[^\n]*|/\*.*?(?:\*/|\Z)|(?<!\w)r(#*)\".*?\"\1|\"\"\".*?(?:\"\"\"|\Z)|\"(?:\\.|[^\"\\\n])*\"?"
    r"|'(?:\\.[^'\n]{0,9}|[^'\\\n])'|`[^`]*`?",
    re.S,
)


def blank_literals(code: str) -> str:
    """`code` with every comment, string and character literal blanked (same length, newlines kept): the braces
    left are the code's own (picojson's `in.expect('}')`, Rust's `format!("{}", x)`)."""
    return _LITERAL.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), code)


def _past_prompt_body(problem: dict, code: str) -> str:
    """`code` (what follows the repeated signature) past the lines the prompt already holds after its
    own signature: a prompt that ends inside the body (HumanEval-X CPP/38 opens a loop) repeated whole
    must not declare those variables twice."""
    decl = problem["declaration"]
    m = next((m for m in NAME_PAREN.finditer(decl) if m.group(1) == entry_point(problem) and declares(decl, m)), None)
    given = [ln.strip() for ln in decl[_body_start(decl, m) :].splitlines() if ln.strip()] if m else []
    lines = code.splitlines(keepends=True)
    i = k = 0
    while i < len(lines) and k < len(given):
        if lines[i].strip() and lines[i].strip() != given[k]:
            return code
        k += bool(lines[i].strip())
        i += 1
    return "".join(lines[i:]) if given and k == len(given) else code


def _without_main(rest: str) -> str:
    """What a reply defines after the function (its helpers), less any `main` and what follows it."""
    for m in NAME_PAREN.finditer(rest):
        if m.group(1) == "main" and _body_start(rest, m) is not None:
            start = rest.rfind("\n", 0, m.start()) + 1
            return rest[:start].rstrip() + "\n" if rest[:start].strip() else ""
    return rest.rstrip() + "\n" if rest.strip() else ""


# Go in a repository task: a reply's imports travel with its body, marked, to the file's import block.
_GO_IMPORT = re.compile(r'^import\s*(?:\(([^)]*)\)|((?:[\w.]+\s+)?"[^"]+"))', re.M)
_GO_MARK = "// ferrylm:import "  # a reply's import, carried in its body to the file's import block


def go_body(task: dict, reply: str) -> str:
    """What follows the prompt's opening brace: the body, its closing brace, and any helpers after it;
    the imports the reply wrote above its function ride along as marked comment lines (the repository
    tasks' splice moves them into the file)."""
    reply = reply.replace("\r\n", "\n")
    body = completion_from_reply({"declaration": task["prompt"]}, reply)
    code = extract_code(reply)
    head = code[: code.find("func ")] if "func " in code else ""
    specs = [
        ln.strip()
        for m in _GO_IMPORT.finditer(head)
        for ln in (m.group(1) or m.group(2)).splitlines()
        if ln.strip() and not ln.strip().startswith("//")
    ]
    # only what the body uses: Go refuses an unused import (a dropped usage example's "fmt")
    used = [sp for sp in specs if re.search(rf"\b{re.escape(_go_name(sp))}\.", body)]
    return "".join(f"\t{_GO_MARK}{spec}\n" for spec in used) + body


def _go_name(spec: str) -> str:
    """The name an import spec binds: its alias, else its path's last element."""
    alias, _, path = spec.rpartition(" ")
    return alias.strip() or path.strip('"').rsplit("/", 1)[-1]


def go_imports_moved(text: str) -> str:
    """The marked imports out of the body and into the file, after its package clause, where the file
    does not import that path already (Go refuses an import declared twice)."""
    marks = re.findall(rf"^\s*{re.escape(_GO_MARK)}(.+)\n", text, re.M)
    if not marks:
        return text
    text = re.sub(rf"^\s*{re.escape(_GO_MARK)}.+\n", "", text, flags=re.M)
    have = set(re.findall(r'"([^"]+)"', "".join(m.group(0) for m in _GO_IMPORT.finditer(text))))
    new = [spec for spec in dict.fromkeys(marks) if spec.split('"')[1] not in have]
    package = re.search(r"^package\s+\w+.*\n", text, re.M)
    if not new or not package:
        return text
    return text[: package.end()] + "".join(f"import {spec}\n" for spec in new) + text[package.end() :]
