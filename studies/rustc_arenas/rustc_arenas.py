"""rustc under the sandbox's address-space limit, with glibc's default malloc arenas and with two
(`humaneval_x.FEW_ARENAS`, what the Rust compile step runs with): how many of N compiles of one
HumanEval-X canonical solution pass at each limit. On a loaded machine the default arenas fail.

    FERRYLM_HUMANEVAL_X=../shared/data/humaneval-x .venv/bin/python studies/rustc_arenas/rustc_arenas.py --runs 8 --out rustc_arenas.json
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def main() -> None:
    from ferrylm.eval.tasks import humaneval_x as hx

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--limits", default="500,700")
    args = ap.parse_args()
    first = hx.load_problems("rust")[0]
    two = hx.FEW_ARENAS
    rows = []
    for limit in map(int, args.limits.split(",")):
        for name, arenas in (("glibc default", []), ("MALLOC_ARENA_MAX=2", two)):
            hx.FEW_ARENAS = arenas
            results = hx.execute(
                "rust", [first] * args.runs, [first["canonical_solution"]] * args.runs, memory_mb=limit
            )
            rows.append(
                {
                    "memory_mb": limit,
                    "arenas": name,
                    "passed": sum(r["passed"] for r in results),
                    "runs": args.runs,
                    "failures": sorted({r["result"][:120] for r in results if not r["passed"]}),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    hx.FEW_ARENAS = two
    Path(args.out).write_text(
        json.dumps({"cpus": os.cpu_count(), "load_1min": os.getloadavg()[0], "rows": rows}, indent=2)
    )


if __name__ == "__main__":
    main()
