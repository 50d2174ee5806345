"""Each Python own-code task a model failed, laid out to be read: the question it was asked (the file shown), its
reply, the original body (read from the project's own source) and the failing run's line, with what the base did
on the same task. A reader sorts them into classes (classes.jsonl beside the results); `--count` then tallies them.

  .venv/bin/python studies/python_own_code/failed_tasks.py RESULTS_DIR PROJECTS_DIR OUT_DIR [--label fine-tuned]
  .venv/bin/python studies/python_own_code/failed_tasks.py --count CLASSES_JSONL
"""

from __future__ import annotations

import argparse
import builtins
import json
import re
from collections import Counter
from pathlib import Path

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--label", default="fine-tuned")
    ap.add_argument("--count", type=Path)
    a = ap.parse_args()
    if a.count:
        return count(a.count)
    results, projects, out = a.paths
    print(f"{lay_out(results, projects, out, a.label)} failed tasks laid out in {out}")


if __name__ == "__main__":
    main()
