"""An explain reply scores as its bare summary does, however a chat model wraps it: every wrapping of
a reference, in each of the five languages' comment styles, gives back exactly the bare reference
(the tolerance is zero: the same text, so the same smoothed BLEU-4)."""

import pytest

from ferrylm.eval.heldout import smooth_bleu
from ferrylm.eval.replies.summary import summary_from_reply

# References as the data stage makes them: a doc comment's first paragraph, one line.
REFERENCES = {
    "python": "Time 'number' executions of the main statement.",
    "java": "Returns the number of elements in this list.",
    "go": "Reverse returns the string with its runes in reverse order.",
    "rust": "Splits the slice into two at the given index.",
    "cpp": "Computes the checksum of a buffer using CRC-32.",
}
DOC_COMMENT = {
    "python": lambda s: (
        f'def f(self, number):\n    """{s}\n\n    Args:\n        number: how many.\n    """\n    return 1\n'
    ),
    "java": lambda s: f"/**\n * {s}\n *\n * @return the count\n */\npublic int size() {{ return n; }}\n",
    "go": lambda s: f"// {s}\nfunc Reverse(s string) string {{ return s }}\n",
    "rust": lambda s: f"/// {s}\n///\n/// # Panics\n/// When out of range.\npub fn split_at(&self, mid: usize) {{}}\n",
    "cpp": lambda s: f"/* {s} */\nuint32_t crc(const char* b, size_t n);\n",
}
WRAPPINGS = {
    "bare": lambda s, lang: s,
    "fence": lambda s, lang: f"```\n{s}\n```",
    "doc comment in a fence": lambda s, lang: f"```{lang}\n{DOC_COMMENT[lang](s)}```",
    "doc comment alone": lambda s, lang: DOC_COMMENT[lang](s),
    "python docstring alone": lambda s, lang: f'"""{s}"""',
    "line comments": lambda s, lang: "".join(
        f"// {w}\n" for w in s.rsplit(" ", 3)[0:1] + [" ".join(s.rsplit(" ", 3)[1:])]
    ),
    "hash comment": lambda s, lang: f"# {s}",
    "label": lambda s, lang: f"Summary: {s}",
    "bold label": lambda s, lang: f"**Summary:** {s}",
    "label on its own line": lambda s, lang: f"Description:\n{s}",
    "heading": lambda s, lang: f"### Summary\n\n{s}",
    "bold": lambda s, lang: f"**{s}**",
    "quotes": lambda s, lang: f'"{s}"',
    "backticks": lambda s, lang: f"`{s}`",
    "lead-in line": lambda s, lang: f"Here is the summary:\n\n{s}",
    "lead-in and fence": lambda s, lang: f"Sure! Here's a one-line summary:\n```text\n{s}\n```",
    "trailing explanation": lambda s, lang: (
        f"{s}\n\nThe function works by looping over its input once and "
        "keeping a running total, so it runs in linear time."
    ),
    "lead-in, label, trailing": lambda s, lang: f"Sure:\n\n**Summary**: {s}\n\nIt is called by the scheduler.",
    "CRLF fence": lambda s, lang: f"```{lang}\r\n{DOC_COMMENT[lang](s)}```\r\n".replace("\n", "\r\n").replace(
        "\r\r", "\r"
    ),
}


@pytest.mark.parametrize("lang", sorted(REFERENCES))
@pytest.mark.parametrize("wrapping", sorted(WRAPPINGS))
def test_every_wrapping_scores_as_the_bare_summary(lang, wrapping):
    ref = REFERENCES[lang]
    got = summary_from_reply(WRAPPINGS[wrapping](ref, lang))
    assert got == ref
    assert smooth_bleu.sentence_score(got, ref) == smooth_bleu.sentence_score(ref, ref)


def test_a_wrong_summary_is_not_made_right():
    """Taking the summary out changes wrappings only: other words still score as other words."""
    ref = REFERENCES["python"]
    other = "Parse the command line and run the selected subcommand."
    assert summary_from_reply(f"Here is the summary:\n\n**{other}**") == other
    assert smooth_bleu.sentence_score(summary_from_reply(f'"""{other}"""'), ref) < 0.2
    assert summary_from_reply("") == ""


DECLARATIONS = {
    "cpp": "#include<stdio.h>\nint add(int a, int b){\n",
    "java": "class Solution {\n    public int add(int a, int b) {\n",
    "go": "func Add(a int, b int) int {\n",
    "rust": "fn add(a: i32, b: i32) -> i32 {\n",
}


@pytest.mark.parametrize("lang", sorted(DECLARATIONS))
def test_a_crlf_reply_gives_the_program_an_lf_reply_gives(lang):
    """A reply whose lines end in CRLF: its closing fence must not be compiled as code."""
    from ferrylm.eval.replies.braces import completion_from_reply

    problem = {"declaration": DECLARATIONS[lang]}
    body = {"go": "    return a + b\n}\n", "rust": "    a + b\n}\n"}.get(lang, "    return a + b;\n}\n")
    reply = f"Here it is:\n```{lang}\n{DECLARATIONS[lang]}{body}```\nDone."
    opened = 2 if lang == "java" else 1
    lf = completion_from_reply(problem, reply, opened)
    assert "```" not in lf and "return a + b" in lf or "a + b" in lf
    assert completion_from_reply(problem, reply.replace("\n", "\r\n"), opened).replace("\r", "") == lf
