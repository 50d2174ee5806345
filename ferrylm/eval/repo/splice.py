"""A model's bodies for repository tasks, each spliced into a copy of its repository and run against the
task's tests in the sandbox: `ferrylm eval score --benchmark repo --tasks T --samples S`.

A sample is {"task_id", "completion"}: the completion is read as models write it (a fenced block or
not, the body alone or the whole function with its signature and doc comment repeated). Pass = every
test of the task passes within its time limit. The repository must be as it was when the tasks were
found (its file's hash is checked): otherwise the tasks are stale and scoring stops with one line.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..replies.braces import go_body, go_imports_moved
from ..replies.python import python_body
from ..tasks.benchmark import summarise
from ..tasks.humaneval import SamplesError
from . import runner
from .facts import facts_of


def read_tasks(path: str | Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--tasks: {path} does not exist")
    tasks = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                row = json.loads(line)
                row["task_id"], row["file"], row["start"], row["end"], row["command"]
            except (json.JSONDecodeError, KeyError, TypeError):
                raise SamplesError(
                    f"{path}:{n}: not a repository task (write them with ferrylm eval repo-tasks)"
                ) from None
            tasks.append(row)
    if not tasks:
        raise SamplesError(f"{path}: no tasks")
    return tasks


def task_file(task: dict) -> bytes:
    """The task's file as it was when the task was found (its offsets count these bytes); a changed file
    stops with one line: its tasks are stale."""
    path = Path(task["repo"]) / task["file"]
    raw = path.read_bytes()
    if hashlib.sha256(raw).hexdigest() != task["file_sha256"]:
        raise SamplesError(f"{path} changed since its tasks were found: find them again (ferrylm eval repo-tasks)")
    return raw


def spliced_text(task: dict, body: str) -> str:
    """The task's file with `body` in place of the original one."""
    raw = task_file(task)
    text = (raw[: task["start"]] + body.encode() + raw[task["end"] :]).decode()
    return go_imports_moved(text) if task.get("language") == "go" else text


def body_from_reply(task: dict, reply: str) -> str:
    """The body a reply gives, in its language's reading."""
    return python_body(task, reply) if task["language"] == "python" else go_body(task, reply)


def spliced(task: dict, reply: str) -> str:
    """The task's file with the reply's body in place of the original."""
    return spliced_text(task, body_from_reply(task, reply))


def execute(
    tasks: list[dict], samples: list[tuple[str, str]], workers: int = 2, unconfined: bool = False
) -> list[dict]:
    """One result per sample, in order: {"task_id", "passed", "result", "isolation"}."""
    by_id = {t["task_id"]: t for t in tasks}
    texts = [spliced(by_id[t], c) for t, c in samples]  # stale tasks stop here, before anything runs
    results: list[dict | None] = [None] * len(samples)
    for repo in sorted({by_id[t]["repo"] for t, _ in samples}):
        mine = [i for i, (t, _) in enumerate(samples) if by_id[t]["repo"] == repo]
        longest = max(by_id[samples[i][0]]["timeout_s"] for i in mine)
        deps = next((by_id[samples[i][0]].get("test_deps") for i in mine), None)
        first = by_id[samples[mine[0]][0]]
        facts = facts_of(Path(repo), first["language"], first["command"])
        with runner.sandbox(facts, longest, workers, unconfined, deps) as box:

            def one(i: int) -> dict:
                task = by_id[samples[i][0]]
                out = runner.run(box, task["command"], {task["file"]: texts[i]}, task["timeout_s"])
                return {
                    "task_id": task["task_id"],
                    "passed": out.status == "passed",
                    "result": out.status,
                    "isolation": out.isolation,
                }

            with ThreadPoolExecutor(workers) as pool:
                for i, r in zip(mine, pool.map(one, mine)):
                    results[i] = r
    return results


def score(
    tasks_path: str | Path,
    samples_path: str | Path,
    workers: int = 2,
    unconfined: bool = False,
    ks: tuple[int, ...] = (1, 10, 100),
) -> dict:
    from ..tasks.score import read_samples

    tasks = read_tasks(tasks_path)
    path = Path(samples_path)
    samples = read_samples(path, {t["task_id"] for t in tasks})
    results = execute(tasks, samples, workers, unconfined)
    out = path.with_name(path.name + "_results.jsonl")
    out.write_text("".join(json.dumps({**r, "completion": c}) + "\n" for r, (_, c) in zip(results, samples)))
    summary = summarise(results, list(ks))
    summary.pop("per_task")
    return {"benchmark": "repo", **summary, "results": str(out)}
