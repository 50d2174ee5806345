"""Why a repository's tests failed, in one line a person can act on: the first error line of the output
(terminal colours stripped), the first test that failed, and the run's last line.

Run inside the sandbox on the test output (`python reason.py OUTPUT`, standard library only), and imported
on the host for the call-tracing run.
"""

from __future__ import annotations

import re
import sys

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")  # colours; links (OSC 8)
# in order of what tells most: an exception with its message, a tool's own "error:", a compiler's
# located error, a panic
_ERRORS = (
    # where a line begins with it (pytest's `E` lines, a traceback's last line, Java's `java.lang.X: …`): a source
    # line a traceback shows (a docstring's `:raises ValueError: …`) is not the error
    re.compile(r"^(?:E\s+)?(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit)\b: ?\S|^Exception in thread "),
    re.compile(r"^E\s{2,}\S"),  # pytest's first line of a failed assertion
    re.compile(r"^[\w./-]+(?: [\w./-]+)*: error: "),  # a tool's usage error: `python -m pytest: error: …`
    re.compile(r"^ERROR:|Missing required plugins"),
    re.compile(r":\d+(?::\d+)?: (?:fatal )?error|\.go:\d+:\d+: "),
    re.compile(
        r"^error(?:\[E\d+\])?: "
    ),  # Cargo's and rustc's: `error: no matching package named …`, `error[E0308]: …`
    re.compile(r"^panic: |^thread '.*' panicked"),
)
# pytest's summary (`3 failed, 1912 passed in 5.84s`): the run's last word, where its output ends on a source line
_SUMMARY = re.compile(r"^=*\s*\d+ (?:failed|passed|errors?)\b.* in [\d.]+s\b")
# the first test that failed: pytest's summary line, Go's, Cargo's, Maven's
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)|^--- FAIL: (\S+)|^test (\S+) \.\.\. FAILED|^\[ERROR\]\s+(\S+)\s.*FAIL")


def lines_of(text: str) -> list[str]:
    return [ln.rstrip() for ln in _ANSI.sub("", text).splitlines() if ln.strip()]


def first_error(text: str) -> str:
    """One line: the first error, the first failed test and the last line, whichever the output has."""
    lines = lines_of(text)
    error = next(
        (re.sub(r"^E\s+", "", ln.strip()) for pattern in _ERRORS for ln in lines if pattern.search(ln.strip())), ""
    )
    failed = next((next(g for g in m.groups() if g) for ln in lines if (m := _FAILED.search(ln.strip()))), "")
    summary = (ln.strip() for ln in reversed(lines) if _SUMMARY.match(ln.strip()))
    last = next(
        summary, next((ln.strip() for ln in reversed(lines) if ln.strip() not in ("FAIL", "=" * len(ln.strip()))), "")
    )
    parts = [error, f"first failed: {failed}" if failed else "", last.strip("= ")]
    return "; ".join(dict.fromkeys(p for p in parts if p)) or "no output"


if __name__ == "__main__":
    with open(sys.argv[1], errors="replace") as fh:
        print(first_error(fh.read(1 << 20))[:400])
