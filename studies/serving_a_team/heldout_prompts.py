"""The held-out generation prompts of a data stage's run, as served requests: each question as the fine-tuned
model gets it and as the base is asked with k examples (what studies/serving_a_team/serve_spec.py sends):
    python studies/serving_a_team/heldout_prompts.py runs/default/data/record.json prompts.jsonl [--n 48] [--k 2]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ferrylm.eval.heldout.few_shot import FewShot


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("record", help="the data stage's record.json")
    ap.add_argument("out")
    ap.add_argument("--n", type=int, default=48, help="prompts, spread evenly over the held-out questions")
    ap.add_argument("--k", type=int, default=2, help="examples shown before each question")
    ap.add_argument(
        "--root",
        help="where the run was started (its record's paths are relative to it); default: the directory holding runs/",
    )
    a = ap.parse_args()
    record = Path(a.record)
    root = Path(a.root) if a.root else record.parents[3]  # runs/<name>/data/record.json
    outputs = json.loads(record.read_text())["outputs"]
    rows = [json.loads(line) for line in (root / outputs["eval_prompts"]).read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r["task"] == "generate"]
    shots = FewShot.read(root / outputs["shots"], a.k)
    step = max(len(rows) // a.n, 1)
    with open(a.out, "w") as fh:
        for r in rows[::step][: a.n]:
            shown = shots.messages(r["messages"], r["task"], r["language"])
            fh.write(json.dumps({"source": r["source"], "messages": r["messages"], "shown": shown}) + "\n")


if __name__ == "__main__":
    main()
