"""An explain reply → the summary it gives, however a chat model wraps it.

Chat models answer "summarise this function" in many shapes: the bare sentence; a docstring or doc
comment of any of the five languages (`\"\"\"...\"\"\"`, `/** ... */`, `///`, `//`, `#`), alone or on the
function repeated whole; inside a fence; after a label ("Summary:", "**Description:**"), in bold or in
quotes; after a lead-in line ("Here is the summary:"); followed by an explanation. Each of these must
score as the bare summary does (tests/eval/replies/test_summary.py), so the summary is taken out the
way the data stage took the reference out of the doc comment: markers off, the first paragraph, cut
where parameter / return markup starts, inline markup reduced to its text.
"""

from __future__ import annotations

import re

from ...source.summary import comment_text, first_paragraph

_FENCE = re.compile(r"```[^\n]*\n(.*?)(?:```|\Z)", re.S)
_TRIPLE = re.compile(r'[rRuUbB]?("""|\'\'\')(.*?)(?:\1|\Z)', re.S)
_COMMENT_LINE = re.compile(r"^\s*(?:///?|//!|#|/\*+|\*/?|\*+/)")
_HEADING = re.compile(r"^\s*#{1,6}\s*(?:summary|description|docstring|explanation|answer)\s*:?\s*$", re.I | re.M)
_LABEL = re.compile(
    r"^\s*(?:[*_]{1,2})?\s*(?:one[- ]line\s+|short\s+|brief\s+)?(?:summary|description|docstring|"
    r"doc comment|answer|explanation|purpose|tl;?dr)\s*(?:[*_]{1,2})?\s*[:：—-]\s*(?:[*_]{1,2}\s*)?",
    re.I,
)
_LEAD_IN = re.compile(r"^[^\n]{0,120}:\s*$")
_WRAP = [
    (r"^\*\*(.+)\*\*$", 1),
    (r"^__(.+)__$", 1),
    (r"^\*(.+)\*$", 1),
    (r'^"(.+)"$', 1),
    (r"^'(.+)'$", 1),
    (r"^“(.+)”$", 1),
    (r"^`(.+)`$", 1),
    (r"^> ?(.+)$", 1),
]


def _outside_fences(text: str) -> str:
    return _FENCE.sub("\n\n", text)


def _drop_lead_in(text: str) -> str:
    """Without a first line that only announces what follows ("Here is the summary:")."""
    lines = text.strip().split("\n")
    if _LEAD_IN.match(lines[0]) and not _LABEL.match(lines[0] + " x"):
        return "\n".join(lines[1:]).strip()
    return text.strip()


def _unmarked(text: str) -> str:
    """The words of a docstring or doc comment, when the text holds one; else the text."""
    m = _TRIPLE.search(text)
    if m and m.group(2).strip():
        return m.group(2)
    lines = text.split("\n")
    start = next((i for i, ln in enumerate(lines) if _COMMENT_LINE.match(ln) and ln.strip()), None)
    if start is None:
        return text
    block = []
    for ln in lines[start:]:
        if not _COMMENT_LINE.match(ln) and ln.strip():
            break
        block.append(ln)
    return comment_text("\n".join(re.sub(r"^(\s*)#+ ?", r"\1", ln) for ln in block))


def _unwrapped(line: str) -> str:
    line = _LABEL.sub("", line.strip(), count=1).strip()
    for pattern, group in _WRAP * 2:  # bold inside quotes, or the other way round
        m = re.match(pattern, line)
        if m:
            line = m.group(group).strip()
    return _LABEL.sub("", line, count=1).strip()


def summary_from_reply(reply: str) -> str:
    """The summary an explain reply gives, as one line (see the module's docstring)."""
    text = _HEADING.sub("", reply.replace("\r\n", "\n").replace("\r", "\n")).strip()
    outside = _drop_lead_in(_outside_fences(text))
    if not re.search(r"\w", _LABEL.sub("", outside)) and _FENCE.search(text):
        text = _FENCE.search(text).group(1)  # nothing but a lead-in outside: the fence holds it
    else:
        text = outside
    text = _drop_lead_in(_LABEL.sub("", text.strip(), count=1) if _LABEL.match(text.strip() + " ") else text)
    return _unwrapped(first_paragraph(_unmarked(text)))
