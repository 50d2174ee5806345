"""The data stage's view of a repository's files: a file's path inside its repository, the training functions'
generate question asked with their file shown (data.tasks `file`), and the words the training repositories'
tests hold (the held-out draw keeps to functions they name)."""

from __future__ import annotations

import os
from pathlib import Path

from ..prompts import assistant_message, file_question
from ..source.file_context import CHARS_PER_TOKEN, trimmed, with_hole
from ..source.spans import LANGUAGES, functions
from ..source.test_files import is_test_file
from .holdout import HeldOutFunctions, words_in

SPAN_LANGUAGES = set(LANGUAGES.values())


def in_repo(ref, roots: dict) -> str:
    """A file's path inside its repository (whose root is resolved: a source named through a link)."""
    return os.path.relpath(os.path.realpath(ref.path), roots[ref.repo]["root"]) if ref.repo in roots else ref.rel


class FileSpans:
    """Each code file's functions by id, documented or not, found once a file: the draw's undocumented
    candidates and the file-shown questions read the same spans."""

    def __init__(self, docs, d):
        self.text = {id(doc.ref): doc.text for doc in docs}
        self.d = d
        self._spans: dict[int, dict] = {}

    def of(self, ref) -> dict:
        spans = self._spans.get(id(ref))
        if spans is None and ref.language not in SPAN_LANGUAGES:  # C: its functions are never tasks
            spans = self._spans[id(ref)] = {}
        if spans is None:
            d = self.d
            found = functions(
                self.text[id(ref)], ref.rel, ref.language, d.min_body_lines, d.max_body_lines, documented=False
            )
            spans = self._spans[id(ref)] = {f.id: f for f in found}
        return spans


class FileShown:
    """data.tasks `file`: a training function's generate question asked with its file shown, as the eval asks
    (source/file_context.py), the body of every held-out function in that file, and of every near copy of one (a
    twin in another repository), cut out too."""

    def __init__(self, spans: FileSpans, held_out: HeldOutFunctions, d, roots: dict):
        self.spans, self.text = spans.of, spans.text
        self.held_out, self.d, self.roots, self.missing = held_out, d, roots, 0

    def cut(self, ref) -> list:
        """The file's functions whose bodies are never shown: held-out ones and their near copies."""
        return [f for f in self.spans(ref).values() if f.id in self.held_out.sources or self.held_out.near(f.body)]

    def turns(self, pair, ref) -> tuple[str, str] | None:
        """(question, answer), or None where the function's span is not found in its file (counted)."""
        fn = self.spans(ref).get(pair.source)
        if fn is None:
            self.missing += 1
            return None
        before, hole, after = with_hole(self.text[id(ref)], fn, self.cut(ref))
        budget = self.d.file_context_tokens * CHARS_PER_TOKEN
        view = trimmed(before, hole, after, budget, ref.language, outline_share=self.d.file_context_outline)
        path = in_repo(ref, self.roots)
        return file_question(path, fn.name, ref.language, view, fn.prompt), assistant_message(pair.body, ref.language)


def tested_words(held: set, roots: dict) -> dict[str, set[str]]:
    """Training repository (one whose tests the eval runs) → the words its test files hold, read from the
    repository itself: a test file the corpus filters dropped (too large, a near copy) still runs. One without
    test files names none: none of its functions could become a task, so none is held out."""
    out: dict[str, set[str]] = {}
    for repo, info in roots.items():
        if repo in held:
            continue
        root = Path(info["root"])
        out[repo] = set()
        for path in root.rglob("*"):
            rel = path.relative_to(root).as_posix()
            if path.suffix in LANGUAGES and is_test_file(rel) and path.is_file():
                out[repo].update(words_in(path.read_text(errors="replace")))
    return out
