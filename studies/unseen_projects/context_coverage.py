"""How much of what a hidden body needs does the file context show? For each Python repository task: the
module-level names of its file (imports, functions, classes, constants) that the original body uses, and
how many of them the question shows (outside the cut) — the window around the function alone (the rule
before the file's imports were kept, 94e1140) against the imports kept above it. No model: a property
of the prompt.

    .venv/bin/python studies/unseen_projects/context_coverage.py --run KEY=VALUE ... --out coverage.json
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import textwrap
from pathlib import Path

from ferrylm.config import load_config
from ferrylm.eval.repo import context
from ferrylm.eval.tasks import own_code
from ferrylm.manifest import read_record


def run_tasks(overrides: list[str]) -> list[dict]:
    """The own-code tasks of a run (the demo-gpu preset with `overrides`; read back from eval.repo_task_cache)."""
    cfg = load_config("demo-gpu", overrides)
    return [t for tr in own_code.tracks(cfg.eval, read_record(cfg.stage_dir("data"))["outputs"]) for t in tr.problems]


def window_only(before: str, hole: str, after: str, budget_chars: int) -> str:
    """The trimming before the imports were kept: the lines above the hole upward, then below it."""
    up, down = before.splitlines(keepends=True), after.splitlines(keepends=True)
    room = budget_chars - len(hole)
    top: list[str] = []
    while up and len(up[-1]) <= room:
        room -= len(up[-1])
        top.insert(0, up.pop())
    bottom: list[str] = []
    while down and len(down[0]) <= room:
        room -= len(down[0])
        bottom.append(down.pop(0))
    return ("…\n" if up else "") + "".join(top) + hole + "".join(bottom) + ("…\n" if down else "")


def module_names(text: str) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(text).body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def needed(task: dict, text: str) -> set[str]:
    """The file's module-level names that the original body reads."""
    body = ast.parse(textwrap.dedent(task["body"]))
    used = {n.id for n in ast.walk(body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return used & module_names(text) - {task["name"].split(".")[-1]}


def shown(names: set[str], question: str) -> set[str]:
    return {n for n in names if re.search(rf"\b{re.escape(n)}\b", question)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", nargs="+", required=True, metavar="KEY=VALUE")
    ap.add_argument("--budget", type=int, default=768, help="eval.repo_context_tokens")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    tasks = run_tasks(args.run)
    chars = args.budget * context.CHARS_PER_TOKEN
    rows = []
    for t in (t for t in tasks if t["language"] == "python"):
        before, hole, after = context.file_with_hole(t)
        want = needed(t, before + after)
        if not want:
            continue
        signature = t["prompt"]  # shown in both: names it holds do not count as the context's
        old = shown(want, window_only(before, hole, after, chars)) | shown(want, signature)
        new = shown(want, context.trimmed(before, hole, after, chars, "python")) | shown(want, signature)
        rows.append(
            {"task_id": t["task_id"], "needed": sorted(want), "window": sorted(old), "imports_kept": sorted(new)}
        )
    total = sum(len(r["needed"]) for r in rows)
    report = {
        "tasks": len(tasks),
        "tasks_needing_file_names": len(rows),
        "names_needed": total,
        "shown_window_only": sum(len(r["window"]) for r in rows),
        "shown_imports_kept": sum(len(r["imports_kept"]) for r in rows),
        "tasks_all_shown_window_only": sum(len(r["window"]) == len(r["needed"]) for r in rows),
        "tasks_all_shown_imports_kept": sum(len(r["imports_kept"]) == len(r["needed"]) for r in rows),
        "budget_tokens": args.budget,
    }
    print(json.dumps(report, indent=1))
    if args.out:
        args.out.write_text(json.dumps(report | {"per_task": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
