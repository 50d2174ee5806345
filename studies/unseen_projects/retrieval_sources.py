"""Where do the retrieved functions come from? For each repository task: the functions the retrieval column
showed in a GPU run (read from its samples' prompts: the index of the functions max_pairs drew, best overall)
against those the retriever shows now (every function of the training repositories, the task's own repository
first), and how many of them are the task's own repository's (a function of that name defined there).
No model: a property of the prompt.

    .venv/bin/python studies/unseen_projects/retrieval_sources.py --samples A.jsonl B.jsonl \\
        --run KEY=VALUE ... --projects /tmp/projs --out sources.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from ferrylm.config import load_config
from ferrylm.eval.repo.retrieval import snippets
from ferrylm.eval.tasks import own_code
from ferrylm.manifest import read_record


def run_tasks(overrides: list[str]) -> list[dict]:
    """The own-code tasks of a run (the demo-gpu preset with `overrides`; read back from eval.repo_task_cache)."""
    cfg = load_config("demo-gpu", overrides)
    return [t for tr in own_code.tracks(cfg.eval, read_record(cfg.stage_dir("data"))["outputs"]) for t in tr.problems]


def name(code: str) -> str:
    m = re.search(r"def (\w+)", code)
    return m.group(1) if m else "?"


def shown_then(samples: list[Path]) -> dict[str, list[str]]:
    """task id → the functions its retrieval prompt showed (the blocks above the question)."""
    out = {}
    for path in samples:
        for row in map(json.loads, path.read_text().splitlines()):
            above = row["prompt"].split("Here is `")[0]
            out[row["task_id"]] = [name(c) for c in re.findall(r"```python\n(.*?)```", above, re.S)]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", nargs="+", type=Path, required=True, help="the run's *+-retrieval.jsonl samples")
    ap.add_argument("--run", nargs="+", required=True, metavar="KEY=VALUE")
    ap.add_argument("--projects", type=Path, required=True, help="where the task's repositories are unpacked")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    then = shown_then(args.samples)
    tasks = run_tasks(args.run)
    cfg = load_config("demo-gpu", args.run)
    index = Path(read_record(cfg.stage_dir("data"))["outputs"]["library"])
    e = cfg.eval

    def own(task: dict, fn: str) -> bool:  # defined in the task's repository
        root = args.projects / task["task_id"].split("/")[0]
        return any(f"def {fn}(" in p.read_text(errors="replace") for p in root.rglob("*.py"))

    rows = []
    for t in (t for t in tasks if t["task_id"] in then and t["split"] == "functions"):
        now = [name(c) for c in snippets(index, t, e.retrieval_k, e.retrieval_tokens * 3)]
        rows.append(
            {
                "task_id": t["task_id"],
                "then": then[t["task_id"]],
                "now": now,
                "own_then": sum(own(t, f) for f in then[t["task_id"]]),
                "own_now": sum(own(t, f) for f in now),
            }
        )
    report = {
        "held_out_functions": len(rows),
        "tasks_with_an_own_function_then": sum(r["own_then"] > 0 for r in rows),
        "tasks_with_an_own_function_now": sum(r["own_now"] > 0 for r in rows),
        "own_functions_then": [sum(r["own_then"] for r in rows), sum(len(r["then"]) for r in rows)],
        "own_functions_now": [sum(r["own_now"] for r in rows), sum(len(r["now"]) for r in rows)],
    }
    print(json.dumps(report, indent=1))
    if args.out:
        args.out.write_text(json.dumps(report | {"per_task": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
