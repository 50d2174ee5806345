"""Retrieval, the rival a team would try before fine-tuning: each repository task's question with the k
functions that best match its signature and doc comment shown above it (eval.retrieval_k, source/library.py's
BM25 index of the training functions). A held-out function of a training repository is shown its own
repository's training functions only (a team's tools search the repository they work in); a held-out
repository, which has none there, the best of the training repositories'. Never the task's own function,
nor one whose text holds most of the hidden body (a near duplicate, e.g. a copy in another module):
retrieval must not hand over the answer.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from ...source import library
from ...source.file_context import CHARS_PER_TOKEN
from ..tasks.benchmark import Track

SHINGLE = 5  # tokens per shingle when comparing a retrieved function with the hidden body
NEAR = 0.5  # this share of the body's shingles found in a retrieved function: a near duplicate
LABEL = " + retrieval"  # "base" → "base + retrieval"


def _shingles(text: str) -> set[tuple[str, ...]]:
    tokens = re.findall(r"\w+|[^\w\s]", text)
    return {tuple(tokens[i : i + SHINGLE]) for i in range(max(1, len(tokens) - SHINGLE + 1))}


def holds_body(code: str, body: str) -> bool:
    """Whether `code` holds most of `body` (its shingles), renamed variables and moved lines aside."""
    want = _shingles(body)
    return bool(want) and len(want & _shingles(code)) / len(want) >= NEAR


def snippets(index: Path, task: dict, k: int, budget_chars: int) -> list[str]:
    """Up to k training functions for `task`, best first, whole, within `budget_chars`."""
    own = f"{task['file']}::{task['name']}"
    out: list[str] = []
    room, seen = budget_chars, set()
    repo = task.get("repo_name")
    ranked = library.search(index, task["prompt"], task["language"], 4 * k, within=repo) if repo else []
    if task.get("split") != "functions":  # a held-out repository: the training repositories'
        ranked += library.search(index, task["prompt"], task["language"], 4 * k)
    for source, code in ranked:
        if source in seen or source.endswith(own) or holds_body(code, task["body"]):
            continue
        seen.add(source)
        if len(code) <= room:
            out.append(code if code.endswith("\n") else code + "\n")
            room -= len(code)
        if len(out) == k:
            break
    return out


def shown(found: list[str], language: str) -> str:
    if not found:
        return ""
    blocks = "\n".join(f"```{language}\n{code}```\n" for code in found)
    return f"Functions from the training repositories that may help:\n\n{blocks}\n"


def with_retrieval(tracks: list[Track], index: Path, k: int, budget_tokens: int) -> list[Track]:
    """Copies of the repository tasks' tracks whose questions start with the retrieved functions (base
    prompts: with them as comments); the other tracks are not asked again."""
    budget = budget_tokens * CHARS_PER_TOKEN
    memo: dict[str, list[str]] = {}

    def found(p: dict) -> list[str]:
        if p["task_id"] not in memo:
            memo[p["task_id"]] = snippets(index, p, k, budget)
        return memo[p["task_id"]]

    def asked(track: Track):
        return lambda p: shown(found(p), track.language) + track.ask(p)

    def prompted(track: Track):  # each line of code made a comment; the prompt's own first line stays code
        mark = "# " if track.language == "python" else "// "
        return lambda p: "".join(re.sub(r"(?m)^(?=.)", mark, c) for c in found(p)) + track.prompt(p)

    return [
        dataclasses.replace(t, question=asked(t), prompt=prompted(t)) for t in tracks if t.benchmark.startswith("own-")
    ]
