"""The own-code columns of a GPU run whose eval stopped part-way, paired from the files it left: the
fine-tuned model (with and without retrieval) from the eval's samples, the base with the file and with
the signature alone from the context probe run beside it (the same tasks, the same question), HumanEval
against an earlier run's base on the same 124 tasks (greedy: the base's replies do not change).

    .venv/bin/python studies/real_coder_forgetting/own_code_columns.py RESULTS_DIR [--base-humaneval FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ferrylm.eval.report.paired import mcnemar_exact


def outcomes(path: Path) -> dict[str, bool]:
    return {r["task_id"]: bool(r["passed"]) for r in map(json.loads, path.read_text().splitlines())}


def paired(a: dict[str, bool], b: dict[str, bool]) -> dict:
    """a against b on a's tasks: each one's passes, the discordant pairs, McNemar's exact p."""
    ids = list(a)
    only_a, only_b = sum(a[i] and not b[i] for i in ids), sum(b[i] and not a[i] for i in ids)
    return {
        "tasks": len(ids),
        "a": sum(a[i] for i in ids),
        "b": sum(b[i] for i in ids),
        "only_a": only_a,
        "only_b": only_b,
        "p": round(mcnemar_exact(only_a, only_b), 4),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--base-humaneval", type=Path, help="an earlier run's humaneval_python_base.jsonl")
    args = ap.parse_args(argv)
    d = args.results
    probe = json.loads((d / "repo_context_probe.json").read_text())["per_task"]
    base = {i: v["file"] for i, v in probe.items()}
    signature = {i: v["none"] for i, v in probe.items()}
    table = {}
    for split in ("repos", "functions"):
        tuned = outcomes(d / f"own_{split}_python_fine-tuned.jsonl")
        retrieved = outcomes(d / f"own_{split}_python_fine-tuned-+-retrieval.jsonl")
        table[split] = {
            "fine-tuned vs base (the file shown)": paired(tuned, base),
            "fine-tuned + retrieval vs fine-tuned": paired(retrieved, tuned),
            "base: the file vs the signature alone": paired({i: base[i] for i in tuned}, signature),
        }
    if args.base_humaneval:
        table["humaneval"] = {
            "fine-tuned vs base": paired(
                outcomes(d / "humaneval_python_fine-tuned.jsonl"), outcomes(args.base_humaneval)
            )
        }
    print(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
