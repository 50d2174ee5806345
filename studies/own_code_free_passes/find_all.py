"""Tasks and finder time for every repository of a data manifest, each taken whole (a held-out repository).

    PYTHONPATH=$PWD .venv/bin/python studies/own_code_free_passes/find_all.py \
        .cache/ferrylm/demo-repos-gpu/manifest.yaml --limit 40 --out OUT.json

Run it from two checkouts (PYTHONPATH naming each) to compare the finder before and after a change.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

import yaml

from ferrylm.eval.repo.tasks import find_tasks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("manifest", type=Path)
    ap.add_argument("--limit", type=int, default=40, help="tasks per repository (demo-gpu's eval.repo_task_limit)")
    ap.add_argument("--only", nargs="*", default=None, help="repository names to run (default: all)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--code", default=None, help="what the checkout is (default: its git commit)")
    args = ap.parse_args(argv)
    import ferrylm

    code = Path(ferrylm.__file__).parents[1]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=code, capture_output=True, text=True).stdout
    rows = []
    for r in yaml.safe_load(args.manifest.read_text())["repositories"]:
        if args.only and r["name"] not in args.only:
            continue
        t0 = time.perf_counter()
        found = find_tasks(
            args.manifest.parent / r["path"],
            command=r.get("test"),
            test_requires=r.get("test_requires"),
            limit=args.limit,
        )
        s = found.summary()
        rows.append({**s, "find_s": round(time.perf_counter() - t0, 1), "task_ids": [t["id"] for t in found.tasks]})
        print(json.dumps({k: rows[-1][k] for k in ("repo", "tasks", "skipped", "dropped", "find_s")}), flush=True)
    args.out.write_text(
        json.dumps({"code": args.code or commit.strip(), "limit": args.limit, "repositories": rows}, indent=1)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
