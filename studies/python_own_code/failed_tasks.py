"""Each Python own-code task a model failed, laid out to be read: the question it was asked (the file shown), its
reply, the original body (read from the project's own source) and the failing run's line, with what the base did
on the same task. A reader sorts them into classes (classes.jsonl beside the results); `--count` then tallies them.

  .venv/bin/python studies/python_own_code/failed_tasks.py RESULTS_DIR PROJECTS_DIR OUT_DIR [--label fine-tuned]
  .venv/bin/python studies/python_own_code/failed_tasks.py --count CLASSES_JSONL
  .venv/bin/python studies/python_own_code/failed_tasks.py --reach TASK_CACHE RESULTS_JSONL... [--classes CLASSES_JSONL...]
      [--budgets 768 1536 2048 3072] [--outline SHARE] [--out OUT.json]

`--reach`: how much of a function's own file the question must show before every name its original body uses is in
view (the reach of a wider window or an outline, eval.repo_context_tokens / _outline, measured before a GPU run
trains and asks with it): for each task and budget, the question as the eval builds it (eval/repo/context.py) and
the names the original calls or reads on self that it never shows (unseen_names). TASK_CACHE: a run's task cache
(`wait`'s $TAG.repo_tasks.tgz unpacked), RESULTS_JSONL: its tasks with each model's result
(results/team_recipe_h100/*_own_functions_python.jsonl), CLASSES_JSONL: the failed tasks' classes as read.
"""

from __future__ import annotations

import argparse
import builtins
import json
import re
from collections import Counter
from pathlib import Path

from ferrylm.eval.repo.context import question
from ferrylm.source.spans import functions

TRACKS = ("own_functions_python", "own_repos_python")
BUILTINS = set(dir(builtins))
BASE = {True: "passed", False: "failed", None: "not asked"}


def original(projects: Path, task_id: str):
    """The task's function as its project holds it (task ids are `<project dir>/<file>::<qualified name>`)."""
    where, name = task_id.split("::")
    project, file = where.split("/", 1)
    text = (projects / project / file).read_text()
    return next(
        f for f in functions(text, file, "python", min_lines=1, max_lines=10**6, documented=False) if f.name == name
    )


def unseen_names(body: str, prompt: str) -> list[str]:
    """Names the original body reads (`x`, `self.x`) that the question shows nowhere: what a model could not see."""
    names = set(re.findall(r"(?<![\w.])([A-Za-z_]\w*)\s*\(", body)) | set(re.findall(r"self\.(\w+)", body))
    return sorted(n for n in names if n not in BUILTINS and not re.search(rf"\b{re.escape(n)}\b", prompt))


def lay_out(results: Path, projects: Path, out: Path, label: str) -> int:
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for track in TRACKS:
        mine = results / f"{track}_{label}.jsonl"
        if not mine.is_file():
            continue
        theirs = results / f"{track}_base.jsonl"  # a run stopped mid-eval may lack the base's results of a track
        base = {r["task_id"]: r["passed"] for r in map(json.loads, theirs.open())} if theirs.is_file() else {}
        for r in map(json.loads, mine.open()):
            if r["passed"]:
                continue
            fn = original(projects, r["task_id"])
            row = {
                "task_id": r["task_id"],
                "track": track,
                "base_passed": base.get(r["task_id"]),
                "unseen_names": unseen_names(fn.body, r["prompt"]),
                "result": r["result"],
            }
            rows.append(row)
            page = out / (re.sub(r"[^\w.-]+", "_", r["task_id"]) + ".md")
            page.write_text(
                f"# {r['task_id']} ({track}; the base {BASE[row['base_passed']]})\n\n"
                f"## The question\n\n{r['prompt']}\n\n## The reply\n\n```python\n{r['completion']}\n```\n\n"
                f"## The original body\n\n```python\n{fn.body}\n```\n\n## The run\n\n{r['result']}\n\n"
                f"Names the original calls or reads on self that the question never shows: {row['unseen_names']}\n"
            )
    (out / "index.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return len(rows)


def count(classes: Path) -> None:
    rows = [json.loads(line) for line in classes.open()]
    by = Counter(r["class"] for r in rows)
    print(f"{len(rows)} failed tasks read")
    for cls, n in by.most_common():
        won = sum(r["class"] == cls and r.get("base_passed") for r in rows)
        print(f"{n:4d}  {cls}  (the base passed {won} of them)")


def load_tasks(cache: Path, wanted: set[str]) -> dict[str, dict]:
    found = {}
    for path in cache.glob("ferrylm/repo-tasks/*/tasks.json"):
        for t in json.loads(path.read_text())["tasks"]:
            if t["task_id"] in wanted:
                found[t["task_id"]] = t
    return found


def reach(tasks: dict[str, dict], budgets: list[int], outline: float) -> dict[str, dict]:
    """Per task: the names left unseen and the question's length in characters, at each budget."""
    return {
        tid: {
            str(b): {"unseen": unseen_names(t["body"], q), "chars": len(q)}
            for b in budgets
            for q in [question(t, b, outline_share=outline)]
        }
        for tid, t in tasks.items()
    }


def table(per_task: dict[str, dict], budgets: list[int], rows: dict[str, set[str]]) -> list[dict]:
    """For each group of tasks, at each budget: how many have every name their original uses in view."""
    out = []
    for label, ids in rows.items():
        ids = [i for i in ids if i in per_task]
        shown = {str(b): sum(not per_task[i][str(b)]["unseen"] for i in ids) for b in budgets}
        chars = {str(b): round(sum(per_task[i][str(b)]["chars"] for i in ids) / max(len(ids), 1)) for b in budgets}
        out.append({"tasks": label, "n": len(ids), "every name shown": shown, "mean question chars": chars})
    return out


def reach_table(a) -> None:
    runs = [json.loads(line) for path in a.paths for line in path.open()]
    tasks = load_tasks(a.reach, {r["task_id"] for r in runs})
    classes = [json.loads(line) for path in a.classes for line in path.open()]
    rows = {
        "every task": {r["task_id"] for r in runs},
        "failed by the fine-tuned model": {r["task_id"] for r in runs if not r["fine-tuned"]["passed"]},
        "read as a name the window does not show": {c["task_id"] for c in classes if c["class"] == "unseen-name"},
        "the same, the name cut from its own file": {
            c["task_id"] for c in classes if c.get("where") == "same-file-cut"
        },
    }
    per_task = reach(tasks, a.budgets, a.outline)
    result = {
        "budgets": a.budgets,
        "outline": a.outline,
        "missing tasks": len(runs) - len(tasks),
        "table": table(per_task, a.budgets, rows),
    }
    text = json.dumps(result, indent=1)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--label", default="fine-tuned")
    ap.add_argument("--count", type=Path)
    ap.add_argument("--reach", type=Path, help="a run's task cache: the window's reach over RESULTS_JSONL...")
    ap.add_argument("--classes", nargs="*", type=Path, default=[])
    ap.add_argument("--budgets", nargs="+", type=int, default=[768, 1536, 2048, 3072])
    ap.add_argument("--outline", type=float, default=0.0, help="eval.repo_context_outline")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if a.count:
        return count(a.count)
    if a.reach:
        return reach_table(a)
    results, projects, out = a.paths
    print(f"{lay_out(results, projects, out, a.label)} failed tasks laid out in {out}")


if __name__ == "__main__":
    main()
