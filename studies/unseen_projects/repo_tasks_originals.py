"""Own-code tasks on projects nobody here wrote: every original must pass when given back as a reply.

For each repository: the tasks `ferrylm eval repo-tasks` finds (and the functions it considered, with
each drop reason), then every task scored four ways with the original — the body alone, the body
fenced, the whole definition (signature and docstring repeated), the whole definition fenced inside
prose. A correct reply that fails is a reader's or a splicer's defect.

    .venv/bin/python studies/unseen_projects/repo_tasks_originals.py DIR[:REQ,REQ...] [...] --out studies/unseen_projects/results/repo_tasks_originals.json

REQ: what that repository's tests need installed (repo-tasks' --test-requires), e.g. humanize:freezegun.
--found DIR: the tasks a run found before (a task cache's folders, e.g. a GPU run's repo_tasks_cache.tgz unpacked),
read for each DIR instead of finding them again; --tasks FILE: the tasks `ferrylm eval repo-tasks -o FILE` wrote (its
summary from FILE.log.jsonl), for a repository whose test command was named there; --forms: the reply forms to score
(all four unless named).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from ferrylm.eval.repo import runner
from ferrylm.eval.repo.splice import score
from ferrylm.eval.repo.tasks import RepoTasks, find_tasks


def definition(task: dict) -> str:
    """The original whole definition as a model repeats it: from its def (decorators left out) to its end."""
    raw = (Path(task["repo"]) / task["file"]).read_bytes()  # the task's offsets count bytes
    head = task["prompt"].splitlines()[0].strip().encode() if task["language"] == "python" else b""
    start = raw.rfind(head, 0, task["start"]) if head else raw.rfind(b"\n", 0, task["start"]) + 1
    line = raw.rfind(b"\n", 0, start) + 1
    return raw[line : task["end"]].decode()


def forms(task: dict) -> dict[str, str]:
    fence = "python" if task["language"] == "python" else task["language"]
    whole = definition(task)
    return {
        "body": task["body"],
        "body fenced": f"```{fence}\n{task['body'].rstrip()}\n```",  # a brace body ends at its brace: a line of its own
        "definition": whole,
        "definition fenced": f"Here is the function:\n```{fence}\n{whole.rstrip()}\n```\nIt does what the docstring says.",
    }


def kept(repo: Path, requires: list[str] | None, folder: Path) -> RepoTasks:
    """The tasks a run found for `repo` (the newest of the task cache's folders named after it), its test
    requirements installed here."""
    (newest,) = sorted(folder.glob(f"{repo.name}-*/tasks.json"), key=lambda p: p.stat().st_mtime)[-1:]
    found = RepoTasks.from_json(json.loads(newest.read_text()))
    deps = runner.test_deps(requires) if requires else None
    found.tasks = [t | {"test_deps": deps} for t in found.tasks]
    return found


def written(repo: Path, tasks: Path) -> RepoTasks:
    """The tasks repo-tasks wrote for `repo` into `tasks`, with the summary it logged beside them."""
    (row,) = [r for r in map(json.loads, Path(f"{tasks}.log.jsonl").open()) if r["repo"] == repo.name]
    found = RepoTasks(
        repo.name, row["language"], row["command"], skipped=row["skipped"], dropped=Counter(row["dropped"])
    )
    found.tasks = [t for t in map(json.loads, tasks.open()) if t["repo"] == str(repo)]
    found.suite_s, found.toolchain = row.get("suite_s"), row.get("toolchain")
    return found


def one(repo: Path, requires: list[str] | None, runs: int, folder: Path | None = None, only=None, tasks=None) -> dict:
    t0 = time.perf_counter()
    if tasks:
        found = written(repo, tasks)
    else:
        found = kept(repo, requires, folder) if folder else find_tasks(repo, runs=runs, test_requires=requires)
    row = found.summary() | {"find_s": round(time.perf_counter() - t0, 1)}
    row["considered"] = len(found.tasks) + sum(found.dropped.values())
    if not found.tasks:
        return row
    with tempfile.TemporaryDirectory() as tmp:
        tasks, samples = Path(tmp) / "tasks.jsonl", Path(tmp) / "samples.jsonl"
        tasks.write_text("".join(json.dumps(t) + "\n" for t in found.tasks))
        rows = [(t["task_id"], n, r) for t in found.tasks for n, r in forms(t).items() if not only or n in only]
        samples.write_text("".join(json.dumps({"task_id": i, "completion": r}) + "\n" for i, _, r in rows))
        out = score(tasks, samples)
        results = [json.loads(line) for line in Path(out["results"]).read_text().splitlines()]
    row["originals_passed"] = {
        name: f"{sum(r['passed'] for (_, n, _), r in zip(rows, results) if n == name)}/{len(found.tasks)}"
        for name in forms(found.tasks[0])
        if not only or name in only
    }
    row["failed"] = [
        {"task": i, "form": n, "result": r["result"][:300]} for (i, n, _), r in zip(rows, results) if not r["passed"]
    ]
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repos", nargs="+", help="DIR, or DIR:REQ,REQ for the pip requirements its tests need")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--found", type=Path, help="a task cache's folder: the tasks found before, not found again")
    ap.add_argument("--tasks", type=Path, help="the tasks a repo-tasks run wrote (-o FILE), not found again")
    ap.add_argument("--forms", help="comma-separated: body, body fenced, definition, definition fenced")
    args = ap.parse_args(argv)
    only = set(args.forms.split(",")) if args.forms else None
    report = []
    for arg in args.repos:
        repo, _, reqs = arg.partition(":")
        requires = [r for r in reqs.split(",") if r] or None
        report.append(one(Path(repo).resolve(), requires, args.runs, args.found, only, args.tasks))
        print(json.dumps({k: v for k, v in report[-1].items() if k != "failed"}), flush=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    bad = sum(len(r.get("failed", [])) for r in report)
    print(f"{bad} original replies failed" if bad else "every original passed, in every form")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
