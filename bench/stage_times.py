"""Print each stage's wall time and headline numbers from a finished run's records.

    .venv/bin/python bench/stage_times.py runs/default
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


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
            note = (f"{m['steps']} steps, {m['tokens_seen']} tokens, {tps:.0f} tok/s, "
                    f"eval loss {m['base_eval_loss']:.3f} → {m['eval_loss']:.3f}")
        elif stage == "export":
            p = m["parity"]
            note = f"parity {p['greedy_tokens_equal']}/{p['prompts']}, max Δlogit {p['max_abs_logit_diff']:.1e}"
        else:
            note = "; ".join(f"{k}: " + ", ".join(f"{c}={v:.3g}" for c, v in vals.items() if v is not None)
                             for k, vals in m["models"].items())
        print(f"| {stage} | {rec['seconds']:.0f} | {note} |")
    print(f"| total (stages) | {total:.0f} | |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/default")
