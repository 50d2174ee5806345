"""Every variant column of a sweep's passed.json against the merged model, track by track and pooled over all tasks.

    python studies/w4a16_choice/columns.py results/asks_h200/passed.json [--canary results/asks_h200/canary_tasks.json] \
        [--against LABEL]

Prints a markdown table: each track's passes, won / lost against the merged model, McNemar's exact p and whether
the variant keeps the track (within 2 points, p >= 0.05: the bar the shipped W4A16 must pass); `--canary` (the
training canary's HumanEval task ids) splits HumanEval into the tasks training watched and the rest. The last row
pools every track's tasks (different tasks, so the pairs stay independent): one test over ~900 tasks, where a track
of 89 cannot show less than a few points. `--against LABEL` holds the columns against another one instead (two
variants on one calibration seed: does clipping matter beyond the draw).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ferrylm.eval.report.paired import mcnemar_exact

ORDER = (
    "humaneval_python",
    "humaneval_x_java",
    "humaneval_x_cpp",
    "own_functions_go",
    "own_functions_python",
    "own_repos_python",
)


def columns(passed: dict, ref: str) -> tuple[list[str], list[str]]:
    """(tracks in ORDER that the `ref` column has, the other labels in the file's order)."""
    tracks = [t for t in ORDER if f"{t}_{ref}" in passed]
    labels = []
    for key in passed:
        for t in tracks:
            label = key.removeprefix(f"{t}_")
            if key.startswith(f"{t}_") and label != ref and label not in labels:
                labels.append(label)
    return tracks, labels


def cell(ref: set[str], other: set[str], tasks: int) -> tuple[str, int, int]:
    """One track's comparison as text, and its won / lost counts."""
    won, lost = len(other - ref), len(ref - other)
    p = mcnemar_exact(won, lost)
    keeps = (len(ref) - len(other)) * 100 / tasks <= 2 and p >= 0.05
    return f"{len(other)} ({won} / {lost}, p = {p:.2g}{'' if keeps else ', **not kept**'})", won, lost


def split(passed: dict, canary: list[str]) -> dict:
    """HumanEval's columns split into the canary's tasks and the rest (`humaneval_python` stays, all 164)."""
    out = dict(passed)
    for key, col in passed.items():
        if key.startswith("humaneval_python_"):
            label = key.removeprefix("humaneval_python_")
            ids = set(col["passed"])
            out[f"humaneval_rest_{label}"] = {"tasks": col["tasks"] - len(canary), "passed": sorted(ids - set(canary))}
            out[f"humaneval_canary_{label}"] = {"tasks": len(canary), "passed": sorted(ids & set(canary))}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("passed", help="a sweep's passed.json (execute_replies.py --passed writes it)")
    ap.add_argument("--canary", help="a JSON list of the HumanEval task ids the training canary watched")
    ap.add_argument("--against", default="merged", help="the column the others are held against (default: merged)")
    a = ap.parse_args()
    passed = json.loads(Path(a.passed).read_text())
    tracks, labels = columns(passed, a.against)
    shown = tracks
    if a.canary:
        passed = split(passed, json.loads(Path(a.canary).read_text()))
        shown = ["humaneval_rest", "humaneval_canary", *tracks]
    print(f"| track | {a.against} | " + " | ".join(labels) + " |")
    print("|---" * (len(labels) + 2) + "|")
    pooled = {label: [0, 0, 0] for label in labels}  # passes, won, lost over `tracks` (each task once)
    for t in shown:
        ref = passed[f"{t}_{a.against}"]
        row = [f"{t} ({ref['tasks']})", str(len(ref["passed"]))]
        for label in labels:
            col = passed.get(f"{t}_{label}")
            if col is None:
                row.append("not asked")
                pooled[label] = None if t in tracks else pooled[label]
                continue
            text, won, lost = cell(set(ref["passed"]), set(col["passed"]), ref["tasks"])
            row.append(text)
            if t in tracks and pooled[label] is not None:
                pooled[label] = [pooled[label][0] + len(col["passed"]), pooled[label][1] + won, pooled[label][2] + lost]
        print("| " + " | ".join(row) + " |")
    total = sum(passed[f"{t}_{a.against}"]["tasks"] for t in tracks)
    base = sum(len(passed[f"{t}_{a.against}"]["passed"]) for t in tracks)
    pooled_cells = [
        f"{v[0]} ({v[1]} / {v[2]}, p = {mcnemar_exact(v[1], v[2]):.2g})" if v else "not asked on every track"
        for v in pooled.values()
    ]
    print(f"| all tracks pooled ({total}) | {base} | " + " | ".join(pooled_cells) + " |")


if __name__ == "__main__":
    main()
