"""The held-out repositories' tasks as benchmark tracks of the eval stage (benchmark.py's seam): one
track per language, "Your repositories (python)", whose Pass@1 is judged by the seed's Pass@1
criterion and compared between the models with McNemar's test like every benchmark.

Each repository is bound into the jail read-only at its own path; a program copies it, splices the
model's body into the task's file and runs the task's tests (runner.py).
"""
from __future__ import annotations

from ...log import get_logger
from ..benchmark import Track
from . import runner
from .score import go_body, python_body, spliced_text
from .tasks import find_tasks

log = get_logger("eval")
TITLE = "Your repositories"
# base mode (raw completion): where a body ends
_BASE_STOPS = {"python": ("\ndef ", "\nclass ", "\n@", "\nif __name__"), "go": ("\n}\n",)}


def tracks(e, repositories: list[dict]) -> list[Track]:
    """Tracks of the held-out repositories' tasks (at most e.repo_task_limit per repository); the
    repositories that give none are logged with the reason."""
    tasks: list[dict] = []
    for repo in repositories:
        if repo["split"] != "eval":
            continue
        try:
            found = find_tasks(repo["root"], command=repo.get("test"), limit=e.repo_task_limit,
                               workers=e.exec_workers, unconfined=e.exec_unconfined)
        except Exception as err:  # noqa: BLE001 — one repository that cannot be read is reported, not fatal
            log.warning("repo tasks: %s: %s", repo["name"], str(err).splitlines()[0] if str(err) else type(err).__name__)
            continue
        log.info("repo tasks: %s: %d tasks%s; dropped %s", repo["name"], len(found.tasks),
                 f" (skipped: {found.skipped})" if found.skipped else "", dict(found.dropped) or "none")
        tasks += found.tasks
    return [_track(language, [t for t in tasks if t["language"] == language], e.exec_unconfined)
            for language in sorted({t["language"] for t in tasks})]


def _track(language: str, tasks: list[dict], unconfined: bool) -> Track:
    roots = sorted({t["repo"] for t in tasks})
    seen_at = {root: root if unconfined else f"{runner.REPO_IN_JAIL}/{i}" for i, root in enumerate(roots)}

    def program(task: dict, body: str) -> dict:
        return runner.program(seen_at[task["repo"]], task["command"], {task["file"]: spliced_text(task, body)})

    def from_base(task: dict, text: str) -> str:
        return python_body(task, text) if language == "python" else go_body(task, text.rstrip() + "\n}\n")

    return Track("repo", language, f"{TITLE} ({language})", f"pass_at_1_repo_{language}", tasks, len(tasks),
                 prompt=lambda t: t["prompt"],
                 from_reply=lambda t, reply: python_body(t, reply) if language == "python" else go_body(t, reply),
                 base_stops=_BASE_STOPS[language], from_base=from_base, program=program,
                 binds=() if unconfined else tuple(f"{root}={seen_at[root]}" for root in roots),
                 timeout_s=max(t["timeout_s"] for t in tasks))
