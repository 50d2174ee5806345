"""Every variant column of a sweep's passed.json against the merged model, track by track and pooled over all tasks.

    python studies/w4a16_choice/columns.py results/asks_h200/passed.json [--canary results/asks_h200/canary_tasks.json] \
        [--against LABEL] [--interval]

Prints a markdown table: each track's passes, won / lost against the merged model, McNemar's exact p and whether
the variant keeps the track (common.keeps: within 2 points, not significantly worse; the bar the shipped W4A16 must pass); `--canary` (the
training canary's HumanEval task ids) splits HumanEval into the tasks training watched and the rest. The last row
pools every track's tasks (different tasks, so the pairs stay independent): one test over ~900 tasks, where a track
of 89 cannot show less than a few points. `--against LABEL` holds the columns against another one instead (two
variants on one calibration seed: does clipping matter beyond the draw). `--interval` adds each difference in points
with its paired bootstrap 95 % interval (the eval report's): whether a track's tasks can place it against the 2 points.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from common import keeps  # this folder's: the shipping bar

from ferrylm.eval.report.paired import bootstrap_interval, mcnemar_exact

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


def cell(ref: set[str], other: set[str], tasks: int, interval: bool = False) -> str:
    """One track's comparison as text (`compared`), with whether the variant keeps the track."""
    won, lost = len(other - ref), len(ref - other)
    kept = keeps({"tasks": tasks, "merged": len(ref), "artifact": len(other), "p": mcnemar_exact(won, lost)})
    return compared(len(other), won, lost, tasks, interval, kept)


def compared(passes: int, won: int, lost: int, tasks: int, interval: bool, kept: bool = True) -> str:
    """Passes (won / lost, McNemar's exact p[, the difference in points and its 95 % interval][, not kept])."""
    text = f"{passes} ({won} / {lost}, p = {mcnemar_exact(won, lost):.2g}" + (
        difference(won, lost, tasks) if interval else ""
    )
    return text + ("" if kept else ", **not kept**") + ")"


def difference(won: int, lost: int, tasks: int) -> str:
    """The difference in points and its 95 % interval, by the paired bootstrap over the tasks (approximate where few
    tasks differ: 0 won / 4 lost of 89 gives an interval without 0 where McNemar's exact p is 0.12; the test is McNemar's)."""
    lo, hi = bootstrap_interval([1.0] * won + [-1.0] * lost + [0.0] * (tasks - won - lost))
    return f", {100 * (won - lost) / tasks:+.1f} points, 95 % {100 * lo:+.1f} to {100 * hi:+.1f}"


def pooled(passed: dict, tracks: list[str], ref: str, label: str, interval: bool = False) -> str:
    """`label` against `ref` over every track's tasks at once (`compared`), or why not."""
    if any(f"{t}_{label}" not in passed for t in tracks):
        return "not asked on every track"
    pairs = [(set(passed[f"{t}_{ref}"]["passed"]), set(passed[f"{t}_{label}"]["passed"])) for t in tracks]
    won, lost = sum(len(o - r) for r, o in pairs), sum(len(r - o) for r, o in pairs)
    tasks = sum(passed[f"{t}_{ref}"]["tasks"] for t in tracks)
    return compared(sum(len(o) for _, o in pairs), won, lost, tasks, interval)


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
    ap.add_argument("--interval", action="store_true", help="each difference in points with its 95 %% interval")
    a = ap.parse_args()
    passed = json.loads(Path(a.passed).read_text())
    tracks, labels = columns(passed, a.against)
    shown = tracks
    if a.canary:
        passed = split(passed, json.loads(Path(a.canary).read_text()))
        shown = ["humaneval_rest", "humaneval_canary", *tracks]
    print(f"| track | {a.against} | " + " | ".join(labels) + " |")
    print("|---" * (len(labels) + 2) + "|")
    for t in shown:
        ref = passed[f"{t}_{a.against}"]
        row = [f"{t} ({ref['tasks']})", str(len(ref["passed"]))]
        for label in labels:
            col = passed.get(f"{t}_{label}")
            row.append(cell(set(ref["passed"]), set(col["passed"]), ref["tasks"], a.interval) if col else "not asked")
        print("| " + " | ".join(row) + " |")
    total = sum(passed[f"{t}_{a.against}"]["tasks"] for t in tracks)
    base = sum(len(passed[f"{t}_{a.against}"]["passed"]) for t in tracks)
    cells = [pooled(passed, tracks, a.against, label, a.interval) for label in labels]
    print(f"| all tracks pooled ({total}) | {base} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
