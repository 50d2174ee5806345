"""A function's proof, steps 3-5 of tasks.py: its tests pass with its body, fail with both blanked bodies and with
every constant body a broken model writes first; a stub the compiler refuses is no proof."""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from pathlib import Path

from ...source.pairs import parse
from ...source.spans import Function
from . import runner, suite
from .functions import constant_stubs, stub, wrong_by_default


@dataclass
class Verdict:
    """Why a function is no task (`reason`, counted) and what shows it (`detail`: a compiler's first error, a
    failing run's line); reason None for a task."""

    reason: str | None = None
    detail: str | None = None


def prove(
    box, fn: Function, command: str, runs: int, tests: dict[str, str], left_out: set[str] = frozenset()
) -> tuple[dict | None, Verdict]:
    """(the task of `fn`, Verdict()) when its tests pass with its body and fail with both blanked bodies and
    with every constant body; else (None, the verdict). `box`: the repository's sandbox (runner.sandbox)."""
    files = [m for m in suite.mentions(tests, fn) if m not in left_out]
    cmd = suite.narrowed(command, fn.language, files)
    text = (box.facts.path / fn.file).read_bytes().decode()  # CRLF kept: scoring hashes and splices the bytes
    times = []
    for i in range(runs):
        t0 = time.perf_counter()
        status = runner.run(box, cmd).status
        times.append(time.perf_counter() - t0)
        if status != "passed":
            why = "its tests fail when run alone" if i == 0 else "its tests flake (pass, then fail)"
            return None, Verdict(why, status)
    reference_s = max(times)
    timeout = round(max(10.0, 3 * reference_s + 5), 1)
    stubbed = suite.failing_fast(cmd, fn.language)  # a stub's run only asks whether every test passes
    for how in ("raising", "wrong"):
        blanked = stub(fn, how, text)
        if blanked is None:
            return None, Verdict(f"its result ({fn.kind.strip()}) has no wrong value ferrylm can write")
        if fn.language == "python" and not _parses(blanked):
            return None, Verdict(f"its {how} stub does not compile", "Python's parser refuses it")
        status = runner.run(box, stubbed, {fn.file: blanked}, timeout).status
        if _not_compiled(status, fn.file):
            if how == "wrong" and wrong_by_default(fn, text):  # a generic T, a reference: none can be written
                why = f"its result ({fn.kind.strip()}) has no wrong value ferrylm can write"
                return None, Verdict(why, status.removeprefix("failed: "))
            if (
                how == "wrong"
                and fn.language == "java"
                and not fn.kind.strip()
                and "not have been initialized" in status
            ):
                why = "a constructor that sets a final field has no body that does nothing"
                return None, Verdict(why, status.removeprefix("failed: "))
            return None, Verdict(f"its {how} stub does not compile", status.removeprefix("failed: "))
        if status == "passed":
            return None, Verdict(
                "its tests pass with a raising body" if how == "raising" else "its tests pass with a wrong value"
            )
    # a constant that loops its tests (a `popitem` that removes nothing) is cut off at twice the tests' own time
    if free := _constant_passing(box, fn, stubbed, text, round(max(3.0, 2 * reference_s + 1), 1)):
        return None, Verdict(f"its tests pass with `{free}`")
    return {
        **fn.as_dict(),
        "id": fn.id,
        "command": cmd,
        "tests": files,
        "reference_s": round(reference_s, 2),
        "timeout_s": timeout,
        "file_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "test_deps": getattr(box, "deps", None),
    }, None


def _constant_passing(box, fn: Function, cmd: str, text: str, timeout: float) -> str | None:
    """The first constant body (functions.constant_stubs) the function's tests pass with, or None. The constants
    are tried in one sandbox run that stops at the first passing one; only then is each tried alone to name it. A
    constant that does not compile (a type with no such default) is one no model's reply can be: skipped."""
    stubs = [
        (body, blanked) for body, blanked in constant_stubs(fn, text) if fn.language != "python" or _parses(blanked)
    ]
    together = len(stubs) > 1 and not box.facts.in_place
    if together:
        alternatives = [{fn.file: blanked} for _, blanked in stubs]
        if runner.run_alternatives(box, cmd, alternatives, timeout).status != "passed":
            return None
    for body, blanked in stubs:
        if runner.run(box, cmd, {fn.file: blanked}, timeout).status == "passed":
            return body
    return "a constant body (passed once of two tries)" if together else None


def _not_compiled(status: str, file: str) -> bool:
    """A run that failed because the file did not build: Go's `[build failed]`, Cargo's, or a located error."""
    return "[build failed]" in status or "could not compile" in status or _compile_error_in(status, file)


def _compile_error_in(status: str, file: str) -> bool:
    """A compiler's error (javac's `File.java:12: error`, g++'s `file.cc:12:5: error`) located in `file`."""
    return bool(re.search(rf"(?:^|[\s/:]){re.escape(Path(file).name)}:\d+(?::\d+)?: (?:fatal )?error", status))


def _parses(text: str) -> bool:
    try:
        parse(text)
        return True
    except SyntaxError:
        return False
