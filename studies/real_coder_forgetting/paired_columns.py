"""Two columns of different runs on the same tasks, paired: an ablation's fine-tuned model against a run's base.

    python studies/real_coder_forgetting/paired_columns.py A:COLUMN B:COLUMN [--track T] [--pooled] [--runnable F] [--out F]

Each side is a `passed.json` (track_label → {"tasks": n, "passed": [task ids]}, as the results folders keep them),
a run's eval folder (its `<track>_<label>.jsonl` samples) or a results folder as collect_run.py writes it
(`<corpus>_<track>.jsonl`, every model's result under its label), so a later run's fine-tuned column can be held
against an earlier run's base on the tasks both asked. Greedy replies of one model to one prompt are nearly, not
exactly, the same across runs on a GPU (the base's HumanEval replies were alike on 114 of 124 in kl2 and kw2): a pair
across runs carries that noise, a run's own base column does not. Prints per track: both counts, won, lost, the
difference with its 95 % interval and McNemar's p; `--pooled` the same over every track's tasks together; `--out`
keeps the same as JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ferrylm.eval.report.paired import compare

TRACKS = ("own_functions_go", "own_functions_python", "own_repos_python", "humaneval_python")


def column(
    spec: str, track: str, unrunnable: frozenset[str] = frozenset()
) -> tuple[int, set[str], set[str] | None] | None:
    """(tasks asked, tasks passed, the asked ids where the side keeps them) of one column, or None where not asked;
    `unrunnable`: tasks left out (their original bodies fail where this side's replies ran)."""
    where, label = spec.rsplit(":", 1)
    path = Path(where)
    if path.is_dir():
        f = path / f"{track}_{label.replace(' ', '-')}.jsonl"
        files = [f] if f.is_file() else sorted(path.glob(f"*_{track}.jsonl"))  # collect_run.py's: one file a track
        rows = [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]
        res = {r["task_id"]: r if f.is_file() else r.get(label) for r in rows}
        res = {t: r for t, r in res.items() if r and t not in unrunnable}
        return (len(res), {t for t, r in res.items() if r["passed"]}, set(res)) if res else None
    entry = json.loads(path.read_text()).get(f"{track}_{label.replace(' ', '-')}")
    return (entry["tasks"], set(entry["passed"]), None) if entry else None


def paired_rows(a: tuple, b: tuple) -> tuple[dict, dict] | str:
    """Each side's task → passed (1.0 or 0.0) over the same tasks, or why they are not the same. A passed.json keeps
    the passed ids alone: its failed tasks are the other side's ids it does not list (or, both sides so, tasks
    neither passed)."""
    if a[2] and b[2] is None and len(a[2]) < b[0]:  # tasks dropped from the kept side: the same from the other
        b = (len(a[2]), b[1] & a[2], None)
    if b[2] and a[2] is None and len(b[2]) < a[0]:
        a = (len(b[2]), a[1] & b[2], None)
    if a[0] != b[0]:
        return f"{a[0]} tasks against {b[0]}: not the same tasks"
    ids = a[2] or b[2] or (a[1] | b[1]) | {f"failed by both {i}" for i in range(a[0] - len(a[1] | b[1]))}
    if not a[1] | b[1] <= ids or len(ids) != a[0] or (a[2] and b[2] and a[2] != b[2]):
        return "not the same tasks"
    return {t: float(t in a[1]) for t in ids}, {t: float(t in b[1]) for t in ids}


def show(name: str, c: dict | str) -> None:
    """One line a comparison: both counts, the difference with its interval, won, lost and McNemar's p."""
    if isinstance(c, str) or not c.get("tasks"):
        print(f"{name}: {c if isinstance(c, str) else 'no task in both'}")
        return
    lo, hi = c["ci95"]
    print(
        f"{name}: {round(c['a'] * c['tasks'])} vs {round(c['b'] * c['tasks'])} of {c['tasks']}, "
        f"{100 * c['difference']:+.1f} points ({100 * lo:+.1f} to {100 * hi:+.1f}), won {c['only_a']}, "
        f"lost {c['only_b']}, McNemar p = {c['p']:.2g}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("a", help="PASSED_JSON_OR_FOLDER:LABEL (e.g. results/x/passed.json:fine-tuned)")
    ap.add_argument("b")
    ap.add_argument("--track", action="append", help=f"default: {', '.join(TRACKS)}")
    ap.add_argument("--out", type=Path, help="the pairs as JSON, a track each")
    ap.add_argument("--pooled", action="store_true", help='also the tracks\' tasks together (key "pooled")')
    ap.add_argument(
        "--runnable",
        type=Path,
        help="results of the original bodies run where A's replies ran: tasks whose originals fail there are left out",
    )
    args = ap.parse_args()
    out = {}
    unrunnable: frozenset[str] = frozenset()
    if args.runnable:
        rows = [json.loads(line) for line in args.runnable.read_text().splitlines() if line.strip()]
        unrunnable = frozenset(r["task_id"] for r in rows if not r["passed"])
        print(f"{args.runnable}: {len(rows) - len(unrunnable)} of {len(rows)} originals pass; the rest left out")
    pooled: tuple[dict, dict] = ({}, {})
    for track in args.track or TRACKS:
        a, b = column(args.a, track, unrunnable), column(args.b, track, unrunnable)
        rows = "not asked in both" if a is None or b is None else paired_rows(a, b)
        if not isinstance(rows, str) and args.pooled:  # a track's ids prefixed: two tracks may share a task id
            for side, kept in zip(rows, pooled):
                kept.update({f"{track}/{t}": v for t, v in side.items()})
        out[track] = rows if isinstance(rows, str) else compare(*rows)
        show(track, out[track])
    if args.pooled:
        joined = ", ".join(t for t, c in out.items() if not isinstance(c, str))
        out["pooled"] = compare(*pooled)
        show(f"pooled ({joined})", out["pooled"])
    if args.out:
        args.out.write_text(
            json.dumps(
                {"a": args.a, "b": args.b, "runnable": str(args.runnable) if args.runnable else None, "pairs": out},
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
