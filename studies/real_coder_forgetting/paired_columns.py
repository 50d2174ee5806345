"""Two columns of different runs on the same tasks, paired: an ablation's fine-tuned model against a run's base.

    python studies/real_coder_forgetting/paired_columns.py A.json:COLUMN B.json:COLUMN [--track own_functions_go]

Each side is a `passed.json` (track_label → {"tasks": n, "passed": [task ids]}, as the results folders keep them) or
a run's eval folder (its `<track>_<label>.jsonl` samples), so a later run's fine-tuned column can be held against
an earlier run's base on the tasks both asked. Greedy replies of one model to one prompt are nearly, not exactly,
the same across runs on a GPU (the base's HumanEval replies were alike on 114 of 124 in kl2 and kw2): a pair across
runs carries that noise, a run's own base column does not. Prints per track: both counts, won, lost, McNemar's p.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ferrylm.eval.report.paired import mcnemar_exact

TRACKS = ("own_functions_go", "own_functions_python", "own_repos_python", "humaneval_python")


def column(spec: str, track: str) -> tuple[int, set[str]] | None:
    """(tasks asked, tasks passed) of one column, or None where it was not asked."""
    where, label = spec.rsplit(":", 1)
    path = Path(where)
    if path.is_dir():
        f = path / f"{track}_{label.replace(' ', '-')}.jsonl"
        if not f.is_file():
            return None
        rows = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        return len(rows), {r["task_id"] for r in rows if r["passed"]}
    entry = json.loads(path.read_text()).get(f"{track}_{label.replace(' ', '-')}")
    return (entry["tasks"], set(entry["passed"])) if entry else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("a", help="PASSED_JSON_OR_EVAL_DIR:LABEL (e.g. results/x/passed.json:fine-tuned)")
    ap.add_argument("b")
    ap.add_argument("--track", action="append", help=f"default: {', '.join(TRACKS)}")
    args = ap.parse_args()
    for track in args.track or TRACKS:
        a, b = column(args.a, track), column(args.b, track)
        if a is None or b is None:
            print(f"{track}: not asked in both")
            continue
        if a[0] != b[0]:
            print(f"{track}: {a[0]} tasks against {b[0]}: not the same tasks")
            continue
        won, lost = len(a[1] - b[1]), len(b[1] - a[1])
        print(
            f"{track}: {len(a[1])} vs {len(b[1])} of {a[0]}, won {won}, lost {lost}, McNemar p = {mcnemar_exact(won, lost):.2g}"
        )


if __name__ == "__main__":
    main()
