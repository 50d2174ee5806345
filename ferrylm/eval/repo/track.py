"""The team's own functions as benchmark tracks of the eval stage (tasks/benchmark.py's seam): one track per
language and split — "Held-out repositories (python)", "Held-out functions of training repositories
(python)" (data.holdout_functions) — whose Pass@1 is judged by the seed's Pass@1 criterion and
compared between the models with McNemar's test like every benchmark.

Each repository is bound into the sandbox read-only at its own path; a program copies it, splices the
model's body into the task's file and runs the task's tests (runner.py).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ...log import get_logger
from ..replies.braces import go_body
from ..replies.python import python_body
from ..tasks.benchmark import Track
from . import context, runner
from .facts import facts_of
from .splice import body_from_reply, spliced_text
from .tasks import find_tasks

log = get_logger("eval")
# base mode (raw completion): where a body ends
_BASE_STOPS = {
    "python": ("\ndef ", "\nclass ", "\n@", "\nif __name__"),
    "go": ("\n}\n",),
    "rust": ("\n}\n",),
    "java": ("\n    }\n", "\n}\n"),
    "cpp": ("\n}\n",),
}


@dataclass(frozen=True)
class Asking:
    """The eval options own code reads, typed, read once from the eval section (`of`)."""

    task_limit: int  # eval.repo_task_limit: tasks per held-out repository at most
    workers: int  # eval.exec_workers: sandbox slots, shared among the repositories proved at once
    unconfined: bool  # eval.exec_unconfined: run without the sandbox
    cache: bool  # eval.repo_task_cache: keep the tasks found, keyed by everything they depend on
    context: Literal["file", "none"]  # eval.repo_context: the file shown around the function, or not
    context_tokens: int  # eval.repo_context_tokens: the file trimmed to about this many tokens
    outline: float = 0.0  # eval.repo_context_outline: the window's share for an outline of the rest of the file

    @classmethod
    def of(cls, e) -> Asking:
        return cls(
            e.repo_task_limit,
            e.exec_workers,
            e.exec_unconfined,
            e.repo_task_cache,
            e.repo_context,
            e.repo_context_tokens,
            e.repo_context_outline,
        )


# which functions a track holds -> (its title, its criterion key's part)
SPLITS = {
    "repositories": ("Held-out repositories", "repos"),
    "functions": ("Held-out functions of training repositories", "functions"),
}


def tracks(a: Asking, repositories: list[dict]) -> list[Track]:
    """Tracks of the held-out repositories' tasks and of the training repositories' held-out functions
    (at most a.task_limit per held-out repository; every held-out function that proves, as the data
    stage's share already bounds them). A repository that gives none is logged with the reason and named on
    every track (`gave_none`), so the report says what its Pass@1 left out."""
    tasks: list[dict] = []
    none: dict[str, str] = {}  # repository -> its split and why it gave no task
    asked = []
    for repo in repositories:
        split = "repositories" if repo["split"] == "eval" else "functions"
        only = None if split == "repositories" else set(repo.get("held_out_functions") or ())
        if only is None or only:
            asked.append((repo, split, only))
    # several repositories proved at once (a repository's proofs wait on its own tests; one at a time left most
    # of a 16-core machine idle), taking turns at one set of slots: a large suite left last gets them all
    at_once = max(1, min(len(asked), a.workers // 4))
    workers, shared = a.workers, threading.BoundedSemaphore(a.workers)
    # the longest first, so the last to finish is not a large suite begun late: a held-out repository's
    # functions all, then training repositories by how many functions they hold out
    first = sorted(range(len(asked)), key=lambda i: -(1e9 if asked[i][2] is None else len(asked[i][2])))
    with ThreadPoolExecutor(at_once) as pool:
        done = dict(zip(first, pool.map(lambda i: _find(*asked[i], a, workers, shared), first)))
    results = [done[i] for i in range(len(asked))]
    for (repo, split, _), (found, why) in zip(asked, results):
        if not found or not found.tasks:
            none[repo["name"]] = f"{SPLITS[split][0].lower()}: {why}"
        tasks += [t | {"split": split, "repo_name": repo["name"]} for t in (found.tasks if found else [])]
    groups = sorted({(t["split"], t["language"]) for t in tasks})
    out = [
        _track(split, language, [t for t in tasks if (t["split"], t["language"]) == (split, language)], a)
        for split, language in groups
    ]
    if not out and none:  # no track to score: one without tasks carries the names to the report (benchmark.with_tasks)
        out = [Track("own-code", "any", "Own code", "pass_at_1_own", not_measured="no repository gave a task")]
    ran_with = {r["name"]: f.toolchain for (r, _, _), (f, _) in zip(asked, results) if f and f.tasks and f.toolchain}
    for t in out:
        t.gave_none = dict(none)
        t.ran_with = {r: ran_with[r] for r in sorted({p["repo_name"] for p in t.problems}) if r in ran_with}
    return out


def _find(repo: dict, split: str, only: set | None, a: Asking, workers: int, shared):
    """(its tasks as find_tasks found them, or None, and why it gave none where it gave none)."""
    try:
        found = find_tasks(
            repo["root"],
            command=repo.get("test"),
            test_requires=repo.get("test_requires"),
            only=only,
            limit=a.task_limit if split == "repositories" else None,
            workers=workers,
            unconfined=a.unconfined,
            cache=a.cache,
            shared=shared,
        )
    except Exception as err:  # noqa: BLE001 — one repository that cannot be read is reported, not fatal
        why = str(err).splitlines()[0] if str(err) else type(err).__name__
        log.warning("repo tasks: %s: %s", repo["name"], why)
        return None, why
    log.info(
        "repo tasks: %s (%s): %d tasks%s; dropped %s",
        repo["name"],
        split,
        len(found.tasks),
        f" (skipped: {found.skipped})" if found.skipped else "",
        dict(found.dropped) or "none",
    )
    return found, found.skipped or f"no task kept (dropped: {dict(found.dropped) or 'none'})"


def _track(split: str, language: str, tasks: list[dict], a: Asking) -> Track:
    unconfined = a.unconfined
    roots = sorted({t["repo"] for t in tasks})
    facts = {
        root: facts_of(Path(root), language, next(t["command"] for t in tasks if t["repo"] == root)) for root in roots
    }
    in_place = {root for root in roots if unconfined or facts[root].in_place}
    seen_at = {root: root if root in in_place else f"{runner.REPO_IN_SANDBOX}/{i}" for i, root in enumerate(roots)}

    def program(task: dict, body: str) -> dict:
        return runner.program(
            seen_at[task["repo"]],
            task["command"],
            {task["file"]: spliced_text(task, body)},
            task.get("test_deps"),
            facts[task["repo"]],
            runner.crate_warm(facts[task["repo"]], unconfined),
        )

    def from_base(task: dict, text: str) -> str:
        return python_body(task, text) if language == "python" else go_body(task, text.rstrip() + "\n}\n")

    title, key = SPLITS[split]
    return Track(
        f"own-{key}",
        language,
        f"{title} ({language}{', the file shown' if a.context == 'file' else ''})",
        f"pass_at_1_own_{key}_{language}",
        tasks,
        len(tasks),
        # the file around the function (eval.repo_context=file), or its signature and doc comment alone
        prompt=(lambda t: context.base_prompt(t, a.context_tokens)) if a.context == "file" else (lambda t: t["prompt"]),
        question=(lambda t: context.question(t, a.context_tokens, outline_share=a.outline))
        if a.context == "file"
        else None,
        from_reply=body_from_reply,
        base_stops=_BASE_STOPS[language],
        from_base=from_base,
        program=program,
        binds=()
        if unconfined
        else tuple(f"{root}={seen_at[root]}" for root in roots if root not in in_place)
        + tuple(runner.toolchain_binds(list(facts.values())))
        + tuple(runner.site_binds())
        + tuple(sorted({t["test_deps"] for t in tasks if t.get("test_deps")})),
        timeout_s=max(t["timeout_s"] for t in tasks),
        limits=runner.LIMITS,
    )
