"""A GPU run's own-code replies executed on this machine, for the models whose replies came back unexecuted (the
machine was given back first), with the tasks that run found: read from its task cache, since the cache's key holds
the Python that ran the finder and this machine's differs.

    .venv/bin/python studies/python_own_code/execute_here.py --run /tmp/team_outline --cache TAG.repo_tasks.tgz \
        --skip OLDER.repo_tasks.tgz --out DIR --labels base fine-tuned -- OVERRIDES...

RUN: the run as `wait` brought it back (its records, replies, `data/repositories.json`), at the path it had there;
the projects where the run saw them (/tmp/projs); OVERRIDES: the run's keys (gpu_python.sh's T and LEVER).
`--skip`: a cache the run started from (`cache TGZ`), whose entries are an older finder's. Each label's replies are
executed into OUT (never over the run's own results) and OUT/paired.json pairs base with fine-tuned per track.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tarfile
import tempfile
from pathlib import Path


def unpack(cache: Path, skip: Path | None) -> dict[str, str]:
    """The run's task-cache entries under a cache home of their own: repository name -> the entry's key."""
    home = Path(tempfile.mkdtemp(prefix="run-cache-"))
    old = set()
    if skip:
        with tarfile.open(skip) as t:
            old = {m.name.split("/")[2] for m in t.getmembers() if m.name.count("/") >= 2}
    with tarfile.open(cache) as t:
        t.extractall(home, filter="data")
    entries = {}
    for d in (home / "ferrylm" / "repo-tasks").iterdir():
        if d.name in old or d.name.startswith("."):
            continue
        name, _, k = d.name.rpartition("-")
        assert name not in entries, f"two entries of {name}: pass --skip"
        entries[name] = k
    os.environ["XDG_CACHE_HOME"] = str(home)
    return entries


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True)
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--skip", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--labels", nargs="+", default=["base", "fine-tuned"])
    ap.add_argument("--preset", default="demo-gpu")
    ap.add_argument("overrides", nargs="*")
    a = ap.parse_args()
    entries = unpack(a.cache, a.skip)
    from ferrylm.config.loader import load_config
    from ferrylm.eval.repo import task_cache
    from ferrylm.eval.report.paired import mcnemar_exact
    from ferrylm.eval.tasks import benchmark
    from ferrylm.manifest import read_jsonl, read_record

    task_cache.key = lambda repo, language, asked: entries[repo.name]  # the run's own answer, not found again
    cfg = load_config(a.preset, [f"run_dir={a.run}", *a.overrides])
    data = read_record(cfg.stage_dir("data"))
    tracks, _ = benchmark.with_tasks(benchmark.tracks(cfg.eval, data["outputs"]))
    tracks = benchmark.asked_for(tracks, data["metrics"].get("answer_form", "body"))
    a.out.mkdir(parents=True, exist_ok=True)
    passed = {}
    for label in a.labels:
        live, done = [], {}
        for t in tracks:
            replies = cfg.stage_dir("eval") / benchmark.replies_file(t.benchmark, t.language, label)
            if replies.exists():
                shutil.copy(replies, a.out)
                live.append(t)
                done[id(t)] = [(r["task_id"], r["completion"]) for r in read_jsonl(replies)]
        for s in benchmark.scored(live, done, cfg.eval, a.out, label, None):
            print(label, s["key"], s.get("passed_samples"), "of", s.get("tasks"), flush=True)
        for t in live:
            rows = read_jsonl(a.out / benchmark.results_file(t.benchmark, t.language, label))
            passed.setdefault(f"{t.benchmark}/{t.language}", {})[label] = {
                r["task_id"]: bool(r["passed"]) for r in rows
            }
    paired = {}
    for track, by in passed.items():
        if {"base", "fine-tuned"} <= by.keys():
            b, f = by["base"], by["fine-tuned"]
            won = sum(f[i] and not b.get(i, False) for i in f)
            lost = sum(b.get(i, False) and not f[i] for i in f)
            paired[track] = {
                "tasks": len(f),
                "base": sum(b.values()),
                "fine-tuned": sum(f.values()),
                "won": won,
                "lost": lost,
                "p": mcnemar_exact(won, lost),
            }
    (a.out / "paired.json").write_text(json.dumps(paired, indent=1) + "\n")
    print(json.dumps(paired, indent=1))


if __name__ == "__main__":
    main()
