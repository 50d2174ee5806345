"""Every HumanEval-X canonical solution through the sandbox, per language: passed / 164, each failure
by task id with its reason, and the wall time (2 sandbox workers, as the eval stage's default),
including the preparation of Go's and Rust's test libraries when they are not cached yet.

    FERRYLM_HUMANEVAL_X=../shared/data/humaneval-x .venv/bin/python benchmarks/humaneval_x_canonical.py [--out FILE] [LANG ...]
"""

from __future__ import annotations

import argparse
import json
import time

from ferrylm.eval.tasks import humaneval_x as hx


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("languages", nargs="*", default=list(hx.LANGUAGES))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rows = {}
    for lang in a.languages:
        t0 = time.perf_counter()
        if (why := hx.unavailable(lang)) is not None:
            rows[lang] = {"not_measured": why}
            continue
        problems = hx.load_problems(lang)
        results = hx.execute(lang, problems, [p["canonical_solution"] for p in problems], workers=a.workers)
        rows[lang] = {
            "passed": sum(r["passed"] for r in results),
            "tasks": len(problems),
            "wall_s": round(time.perf_counter() - t0, 1),
            "isolation": sorted({r["isolation"] for r in results}),
            "failures": {r["task_id"]: r["result"] for r in results if not r["passed"]},
        }
        print(json.dumps({lang: rows[lang]}), flush=True)
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
