"""What executed Pass@1 on a team's own functions costs: finding the tasks of a data stage's repositories
(eval/repo/tasks.py), then scoring up to 40 tasks for one model — here the original bodies, which must
all pass, so the run also checks the scoring path end to end.

    .venv/bin/python benchmarks/repo_tasks_speed.py runs/default/data/repositories.json \
        --out benchmarks/results/repo_tasks_speed_demo.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ferrylm.eval.repo.splice import execute
from ferrylm.eval.repo.tasks import find_tasks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repositories", type=Path, help="a data stage's repositories.json")
    ap.add_argument("--limit", type=int, default=10, help="tasks per repository (the demo's eval.repo_task_limit)")
    ap.add_argument("--score", type=int, default=40, help="tasks scored for one model")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    rows, tasks = [], []
    for repo in json.loads(args.repositories.read_text()):
        only = None if repo["split"] == "eval" else set(repo.get("held_out_functions") or ())
        if only is not None and not only:
            continue
        t0 = time.perf_counter()
        found = find_tasks(repo["root"], command=repo.get("test"), only=only, limit=args.limit)
        rows.append(
            {
                **found.summary(),
                "split": repo["split"],
                "find_s": round(time.perf_counter() - t0, 1),
                "reference_s": [t["reference_s"] for t in found.tasks],
            }
        )
        tasks += found.tasks
        print(json.dumps(rows[-1]), flush=True)
    scored = tasks[: args.score]
    t0 = time.perf_counter()
    results = execute(scored, [(t["task_id"], t["body"]) for t in scored])
    score_s = time.perf_counter() - t0
    passed = sum(r["passed"] for r in results)
    summary = {
        "find_s": round(sum(r["find_s"] for r in rows), 1),
        "tasks": len(tasks),
        "scored": len(scored),
        "score_s": round(score_s, 1),
        "reference_bodies_passed": passed,
        "failures": [r for r in results if not r["passed"]],
    }
    print(json.dumps(summary))
    if args.out:
        args.out.write_text(json.dumps({"repositories": rows, **summary}, indent=1) + "\n")
    return 0 if passed == len(scored) else 1


if __name__ == "__main__":
    sys.exit(main())
