"""Compare `ferrylm plan` with measured peaks (from benchmarks/measure_peak_memory.py's JSON).

    .venv/bin/python benchmarks/plan_vs_measured.py benchmarks/results/peaks_h200.json

The planner's total includes `reserve_gib` (CUDA context and allocator slack); torch's peak
allocated memory does not, so the comparison is planner total − reserve vs peak allocated.
"""

import json
import sys

from ferrylm.train.plan import Setup, estimate

KEYS = ("method", "lora_r", "gradient_checkpointing", "seq_len", "micro_batch", "lora_dropout", "optimizer_precision")


def main(path: str) -> None:
    data = json.load(open(path))
    print(f"GPU: {data['gpu']}\n")
    print(
        "| method | r | checkpointing | seq × micro-batch | LoRA dropout | measured peak allocated (GiB) | planned (GiB) | error |"
    )
    print("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for row in data["rows"]:
        spec = {k: row[k] for k in KEYS if k in row}
        plan = estimate(Setup(**spec, gpu_memory_gib=139.8))
        planned = plan.total_gib - Setup().reserve_gib
        err = 100 * (planned / row["allocated_peak_gib"] - 1)
        worst = max(worst, abs(err))
        r = row.get("lora_r", 16) if row["method"] == "lora" else "—"
        print(
            f"| {row['method']} | {r} | {row['gradient_checkpointing']} | {row['seq_len']} × {row['micro_batch']} | "
            f"{row.get('lora_dropout', 0.05) if row['method'] == 'lora' else '—'} | {row['allocated_peak_gib']:.2f} | "
            f"{planned:.2f} | {err:+.1f}% |"
        )
    print(f"\nworst |error|: {worst:.1f}%")


if __name__ == "__main__":
    main(sys.argv[1])
