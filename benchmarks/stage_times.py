"""Print each stage's wall time and headline numbers from a finished run's records, then the eval
stage's time split by phase (read off the run's ferrylm.log: each model's server start, benchmarks,
held-out examples and latency; the held-out losses computed before any server).

    .venv/bin/python benchmarks/stage_times.py runs/default
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path

# (the log line that starts a phase, its name); a phase ends where the next begins
PHASES = (
    (r"INFO ferrylm\.export: parity", "held-out losses, in-process, before any server"),
    (r"starting vLLM", "server start"),
    (r"vLLM ready", "benchmarks: generation and execution"),
    (r"\] \d+ held-out examples", "held-out examples"),
    (r"\] latency of", "latency"),
    (r"vLLM stopped", "between servers"),
    (r"report: ", None),
)


def eval_phases(log: Path) -> dict[str, float]:
    """Seconds per eval phase of the log's last run, summed over the models."""
    marks = []
    for line in log.read_text(errors="replace").splitlines():
        for i, (pattern, name) in enumerate(PHASES):
            if re.search(pattern, line):
                if i == 0:  # the log goes on over runs: the last run's eval only
                    marks = []
                marks.append((datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f"), name))
                break
    out: dict[str, float] = defaultdict(float)
    for (t0, name), (t1, _) in zip(marks, marks[1:]):
        if name:
            out[name] += (t1 - t0).total_seconds()
    return dict(out)


def main(run_dir: str) -> None:
    total = 0.0
    print("| stage | seconds | numbers |\n|---|---|---|")
    for stage in ("data", "train", "export", "eval"):
        path = Path(run_dir) / stage / "record.json"
        if not path.is_file():
            print(f"| {stage} | not run | |")
            continue
        rec = json.loads(path.read_text())
        total += rec["seconds"]
        m = rec["metrics"]
        if stage == "data":
            note = f"{m['files_kept']} files, {m['train_examples']} train / {m['eval_examples']} eval pairs"
        elif stage == "train":
            tps = m["tokens_seen"] / m["train_runtime_s"] if m.get("train_runtime_s") else 0
            note = (
                f"{m['steps']} steps, {m['tokens_seen']} tokens, {tps:.0f} tok/s, "
                f"eval loss {m['base_eval_loss']:.3f} → {m['eval_loss']:.3f}"
            )
        elif stage == "export":
            p = m["parity"]
            note = f"parity {p['greedy_tokens_equal']}/{p['prompts']}, max Δlogit {p['max_abs_logit_diff']:.1e}"
        else:
            note = "; ".join(
                f"{k}: " + ", ".join(f"{c}={v:.3g}" for c, v in vals.items() if v is not None)
                for k, vals in m["models"].items()
            )
        print(f"| {stage} | {rec['seconds']:.0f} | {note} |")
    print(f"| total (stages) | {total:.0f} | |")
    log = Path(run_dir) / "ferrylm.log"
    if log.is_file():
        print("\n| eval phase | seconds |\n|---|---|")
        for name, secs in eval_phases(log).items():
            print(f"| {name} | {secs:.0f} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/default")
