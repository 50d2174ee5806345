"""A brace-language reply's body ends at the brace that closes it: braces inside comments, strings and character
literals are not the code's own."""

import pytest

from ferrylm.eval.replies.braces import blank_literals, go_body

OBJECT = (  # picojson's _parse_object: a '}' character literal, and a string holding one
    "  if (in.expect('}')) {\n    return ctx.parse_object_stop(\"}\");\n  }\n"
    "  return in.expect('}') && ctx.parse_object_stop(\"\");\n}"
)
PROMPT = "template <typename Context> inline bool _parse_object(Context &ctx, input &in) {\n"


@pytest.mark.parametrize(
    "reply",
    [
        OBJECT,  # the body alone
        f"```cpp\n{PROMPT}{OBJECT}\n```",  # the whole function, fenced
        f"Here it is:\n\n```cpp\n{OBJECT}\n```\nIt returns false on a bad key.",
    ],
)
def test_a_brace_in_a_character_literal_or_a_string_does_not_end_the_body(reply):
    assert go_body({"prompt": PROMPT, "language": "cpp"}, reply).strip() == OBJECT.strip()


@pytest.mark.parametrize(
    "code, braces",
    [
        ('format!("{}-{}", a, b) }', "}"),  # Rust's format string
        ("fn f<'a>(x: &'a str) -> &'a str { x }", "{}"),  # lifetimes are code
        ("/* { */ // {\n}", "}"),  # comments
        ('let s = r#"{"#; }', "}"),  # a raw string
        ("s := `{` }", "}"),  # Go's backquoted string
        ("c = '\\''; if (c == '{') { }", "{}"),  # an escaped quote, a brace's character
        ('t = """\n{\n"""; }', "}"),  # Java's text block
    ],
)
def test_literals_are_blanked_and_the_code_kept(code, braces):
    blank = blank_literals(code)
    assert len(blank) == len(code) and blank.count("\n") == code.count("\n")
    assert "".join(ch for ch in blank if ch in "{}") == braces
