"""A W4A16 sweep's saved replies executed where the GPU machine was given back before they ran, and every column's
passing tasks kept.

    python studies/w4a16_choice/execute_replies.py --run RUN --labels gptq-32-search-1 --passed passed.json \
        [-- DOTTED=OVERRIDES ...]

RUN and OVERRIDES as the sweep had them (w4a16_variants.py): the same tracks, so the same programs. Each LABEL's
`<track>_<label>.replies.jsonl` in RUN/w4a16_variants/ is executed where its results file is missing, and written as
the eval writes it. `--passed` then holds every results file's passing tasks as `<track>_<label>` -> {"tasks",
"passed"} (the results folders' form: paired_columns.py pairs two of them, w4a16_variants.py --merged-passed reads
the merged model's). No GPU: the replies are text.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from common import run_tracks  # this folder's: the sweep's tracks

from ferrylm.eval.tasks import benchmark
from ferrylm.manifest import read_jsonl


def execute_missing(cfg, tracks, work: Path, label: str) -> None:
    """Each track's replies of `label` whose results file is missing, executed and written."""
    live, done = [], {}
    for t in tracks:
        replies = work / benchmark.replies_file(t.benchmark, t.language, label)
        if replies.exists() and not (work / benchmark.results_file(t.benchmark, t.language, label)).exists():
            live.append(t)
            done[id(t)] = [(r["task_id"], r["completion"]) for r in read_jsonl(replies)]
    for s in benchmark.scored(live, done, cfg.eval, work, label, None):
        print(label, s["key"], s.get("passed_samples"), "of", s.get("tasks"), flush=True)


def passed_columns(work: Path) -> dict:
    """Every results file in `work`: its stem -> {"tasks": n, "passed": [task ids]}."""
    out = {}
    for f in sorted(work.glob("*.jsonl")):
        if f.name.endswith(".replies.jsonl"):
            continue
        rows = read_jsonl(f)
        out[f.name.removesuffix(".jsonl")] = {
            "tasks": len({r["task_id"] for r in rows}),
            "passed": sorted(r["task_id"] for r in rows if r["passed"]),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True)
    ap.add_argument("--preset", default="demo-gpu")
    ap.add_argument("--labels", nargs="*", default=[], help="file labels (gptq:32:search:1 is gptq-32-search-1)")
    ap.add_argument("--passed", help="write every column's passing tasks here")
    ap.add_argument("overrides", nargs="*")
    a = ap.parse_args()
    cfg, _, tracks = run_tracks(a.preset, a.run, a.overrides)
    work = Path(a.run) / "w4a16_variants"
    for label in a.labels:
        execute_missing(cfg, tracks, work, label)
    if a.passed:
        Path(a.passed).write_text(json.dumps(passed_columns(work), indent=1) + "\n")


if __name__ == "__main__":
    main()
