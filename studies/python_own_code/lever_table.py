"""A lever's runs against the team recipe's, task by task, over both corpora: the rows of the study's lever table.

    python studies/python_own_code/lever_table.py RECIPE_DIR LEVER_DIR... [--corpus team --corpus second]
        [--classes CLASSES_JSONL...] [--projects] [--out JSON]

Each folder holds `<corpus>_own_functions_python.jsonl` (a run's samples: task_id, and per model passed). Printed per
corpus and pooled: the lever's base → fine-tuned (its own run's base column; the recipe run's where the lever's run
did not ask the base), the recipe's, and the lever's fine-tuned model against the recipe's on the tasks both asked
(a pair across runs carries the GPU's greedy noise, as studies/real_coder_forgetting/paired_columns.py says). Each
difference with its paired 95 % interval and McNemar's p. A lever run on two machines names both folders: each
corpus is read from the first that holds it. `--classes`: the reader's classes of the recipe's failures
(failed_tasks.py's files): how many of each class the lever's fine-tuned model passed. `--projects`: each project's tasks and what the base,
the recipe and the lever passed of them.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from ferrylm.eval.report.paired import compare

TRACK = "own_functions_python"


def outcomes(folder: Path, corpus: str) -> dict[str, dict[str, float]]:
    """model label → {corpus/task_id: 1.0 or 0.0} of one run's samples."""
    rows = [json.loads(x) for x in (folder / f"{corpus}_{TRACK}.jsonl").read_text().splitlines() if x.strip()]
    models = [k for k in rows[0] if k != "task_id"]
    return {m: {f"{corpus}/{r['task_id']}": float(r[m]["passed"]) for r in rows} for m in models}


def row(a: dict[str, float], b: dict[str, float]) -> dict:
    """The paired comparison of a against b on their shared tasks, with counts a reader can check."""
    c = compare(a, b)
    lo, hi = c["ci95"]
    return {
        "tasks": c["tasks"],
        "b": round(c["b"] * c["tasks"]),
        "a": round(c["a"] * c["tasks"]),
        "points": round(100 * c["difference"], 1),
        "ci95_points": [round(100 * lo, 1), round(100 * hi, 1)],
        "won": c["only_a"],
        "lost": c["only_b"],
        "p": c["p"],
    }


def rows(lv: dict[str, dict], rc: dict[str, dict]) -> dict[str, dict]:
    """One corpus's (or the pooled) comparisons of a lever's run `lv` with the recipe's `rc`."""
    out = {
        "recipe: fine-tuned against base": row(rc["fine-tuned"], rc["base"]),
        "fine-tuned: lever against recipe": row(lv["fine-tuned"], rc["fine-tuned"]),
    }
    if "base" in lv:  # the lever's own base column, and how far it stands from the recipe run's
        out["lever: fine-tuned against base"] = row(lv["fine-tuned"], lv["base"])
        out["base: lever's run against recipe's"] = row(lv["base"], rc["base"])
    else:  # a run that did not ask the base: the recipe run's stands for it (the same tasks and questions)
        out["lever: fine-tuned against recipe's base"] = row(lv["fine-tuned"], rc["base"])
    return out


def pooled(runs: list[dict[str, dict]]) -> dict[str, dict]:
    """The corpora's outcomes together, model by model (task ids carry their corpus), for the models every run asked."""
    models = [m for m in runs[0] if all(m in run for run in runs)]
    return {m: {t: v for run in runs for t, v in run[m].items()} for m in models}


def holding(folders: list[Path], corpus: str) -> Path:
    """The first folder with the corpus's samples."""
    found = [f for f in folders if (f / f"{corpus}_{TRACK}.jsonl").is_file()]
    if not found:
        raise SystemExit(f"no {corpus}_{TRACK}.jsonl in {', '.join(map(str, folders))}")
    return found[0]


def table(recipe: Path, levers: list[Path], corpora: list[str]) -> dict:
    per = {c: (outcomes(holding(levers, c), c), outcomes(recipe, c)) for c in corpora}
    if len(corpora) > 1:
        per["pooled"] = (pooled([lv for lv, _ in per.values()]), pooled([rc for _, rc in per.values()]))
    return {corpus: rows(lv, rc) for corpus, (lv, rc) in per.items()}


def by_class(recipe: Path, levers: list[Path], corpora: list[str], classes: list[Path]) -> dict:
    """Per corpus, the recipe's failed tasks by their reader's class and how many of each the lever's model passed."""
    read = [json.loads(x) for f in classes for x in f.read_text().splitlines() if x.strip()]
    out = {}
    for corpus in corpora:
        lever = outcomes(holding(levers, corpus), corpus)["fine-tuned"]
        failed = {t: v for t, v in outcomes(recipe, corpus)["fine-tuned"].items() if not v}
        mine = [(r["class"], lever[t]) for r in read if (t := f"{corpus}/{r['task_id']}") in failed and t in lever]
        out[corpus] = {
            k: {"failed": n, "lever passed": int(sum(v for c, v in mine if c == k))}
            for k, n in Counter(c for c, _ in mine).most_common()
        }
    return out


def by_project(recipe: Path, levers: list[Path], corpora: list[str]) -> dict:
    """Per corpus and project (a task id's first folder): its tasks, and how many the base, the recipe's fine-tuned
    model and the lever's passed (the lever's counted over the tasks it asked)."""
    out = {}
    for corpus in corpora:
        rc, lv = outcomes(recipe, corpus), outcomes(holding(levers, corpus), corpus)["fine-tuned"]
        per: dict[str, Counter] = {}
        for t, passed in rc["fine-tuned"].items():
            c = per.setdefault(t.split("/")[1], Counter())
            c.update(tasks=1, base=rc["base"][t], recipe=passed, lever=lv.get(t, 0.0))
        out[corpus] = {
            p: {k: int(v) for k, v in c.items()} for p, c in sorted(per.items(), key=lambda x: -x[1]["tasks"])
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("recipe", type=Path)
    ap.add_argument("lever", type=Path, nargs="+")
    ap.add_argument("--corpus", action="append", help="default: team, second")
    ap.add_argument("--classes", type=Path, nargs="*", default=[])
    ap.add_argument("--projects", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    corpora = args.corpus or ["team", "second"]
    result = table(args.recipe, args.lever, corpora)
    for corpus, compared in result.items():
        for name, r in compared.items():
            lo, hi = r["ci95_points"]
            print(
                f"{corpus:7} {name:36} {r['b']:3} -> {r['a']:3} of {r['tasks']}: {r['points']:+.1f} points "
                f"({lo:+.1f} to {hi:+.1f}), {r['won']} won, {r['lost']} lost, p = {r['p']:.2g}"
            )
    if args.classes:
        result["recipe's failures by class"] = by_class(args.recipe, args.lever, corpora, args.classes)
        for corpus, counts in result["recipe's failures by class"].items():
            print(
                f"{corpus:7} the recipe's failures, by class: the lever passed "
                + ", ".join(f"{v['lever passed']} of {v['failed']} {k}" for k, v in counts.items())
            )
    if args.projects:
        result["by project"] = by_project(args.recipe, args.lever, corpora)
        for corpus, projects in result["by project"].items():
            for name, c in projects.items():
                print(
                    f"{corpus:7} {name:36} {c['tasks']:3} tasks: base {c['base']}, recipe {c['recipe']}, lever {c['lever']}"
                )
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
