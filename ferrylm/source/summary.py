"""A doc comment's summary: the target of the *explain* task (code → what it does).

CodeXGLUE's code-to-text takes a docstring's first paragraph as the reference summary; so do we, in
all five languages: the comment markers go (`///`, `//`, `/** * */`), then the first paragraph, cut
where the parameter / return / example markup starts (`@param`, `:param x:`, `Args:`, `# Arguments`,
`>>>`), with inline markup reduced to its text (`{@code x}`, `:class:`x``, ``x``, HTML tags).
"""

from __future__ import annotations

import re

# A line that starts the documentation's structured part: nothing from it on is the summary.
_SECTION = re.compile(
    r"^\s*(?:[@\\](?:param|return|returns|throws|exception|see|since|author|deprecated|tparam|retval|note|pre|post)\b"
    r"|:(?:param|parameter|arg|argument|key|keyword|type|raises?|except|returns?|rtype|var|ivar|cvar)\b"
    r"|(?:Args|Arguments|Parameters|Params|Returns?|Yields?|Raises|Throws|Examples?|Notes?|See Also|Attributes"
    r"|Warning|Usage|Panics|Errors|Safety)\s*:?\s*$"
    r"|#\s+(?:Arguments|Parameters|Returns?|Examples?|Panics|Errors|Safety|Notes?)\b"
    r"|>>>|-{3,}\s*$|={3,}\s*$)"
)
_INLINE = [
    (
        re.compile(r"\{@(?:code|link|linkplain|literal|value)\s+([^}\s]*)(?:\s+([^}]*))?\}"),
        lambda m: m.group(2) or m.group(1),
    ),  # Javadoc inline tags: the label or the name
    (re.compile(r":[\w:]+:`~?([^`]+)`"), lambda m: m.group(1)),  # reST roles
    (re.compile(r"``([^`]+)``"), lambda m: m.group(1)),
    (re.compile(r"</?[a-zA-Z][^>]*>"), lambda m: " "),  # HTML in Javadoc
    (re.compile(r"^\s*[@\\]brief\s+"), lambda m: ""),  # Doxygen
]


def comment_text(raw: str) -> str:
    """The words of a block of comments, markers removed, line structure kept."""
    lines = []
    for line in raw.strip().splitlines():
        s = line.strip()
        s = re.sub(r"^/\*+!?|\*+/$", "", s).strip()  # /** ... */ openers and closers
        s = re.sub(r"^(?://[/!]?|\*(?!\*))\s?", "", s)  # ///, //!, //, a leading * of a block
        lines.append(s.rstrip())
    return "\n".join(lines).strip("\n")


def first_paragraph(doc: str) -> str:
    """The first paragraph of a (marker-free) doc text as one line, cut where its structured part
    starts, inline markup reduced to its text."""
    para = []
    for line in doc.strip().splitlines():
        if _SECTION.match(line) or (not line.strip() and para):
            break
        if line.strip():
            para.append(line.strip())
    text = " ".join(para)
    for pattern, repl in _INLINE:
        text = pattern.sub(repl, text)
    return re.sub(r"\s+", " ", text).strip()


def summary(doc: str, max_words: int = 80) -> str:
    """The first paragraph of a (marker-free) doc text as one line, or "" when none is usable: fewer
    than three words, or more than `max_words` (a paragraph that long is not a summary)."""
    text = first_paragraph(doc)
    words = len(text.split())
    return text if 3 <= words <= max_words else ""


def dedent(text: str, columns: int) -> str:
    """Each line without up to `columns` leading blanks: a method read as if it stood at the top
    level (a continuation line indented less keeps what it has)."""
    if columns <= 0:
        return text
    return "".join(re.sub(rf"^[ \t]{{0,{columns}}}", "", line) for line in text.splitlines(keepends=True))
