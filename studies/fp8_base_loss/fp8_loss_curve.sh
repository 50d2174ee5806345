#!/usr/bin/env bash
# LoRA on an FP8 base against the same LoRA on the bf16 base, on the real SmolLM2 weights, by the
# product's own commands: one data stage (the demo-gpu preset), then `ferrylm train` twice from the
# same rows and seed, the loss logged every step, with train.base_precision=model and =fp8.
#
#   bash studies/fp8_base_loss/fp8_loss_curve.sh WORK_DIR OUT_JSON [dotted overrides...]
#
# OUT_JSON holds both curves and the per-step difference (largest, mean over the last 100 steps),
# both held-out losses and each run's tokens/s. FERRYLM: the command (default `python3 -m ferrylm`);
# CONFIG: the preset (default demo-gpu). Each run starts clean (train.resume=false): a killed earlier run in
# WORK_DIR is not continued.
set -euo pipefail
work=$1 out=$2
shift 2
read -r -a FERRYLM <<< "${FERRYLM:-python3 -m ferrylm}"
args=(--config "${CONFIG:-demo-gpu}" train.max_steps=400 train.logging_steps=1 train.save_steps=200 train.keep_best=false
      train.resume=false "$@")
"${FERRYLM[@]}" data "${args[@]}" "run_dir=$work/model"
for precision in model fp8; do
  mkdir -p "$work/$precision"
  cp -r "$work/model/data" "$work/$precision/" 2>/dev/null || true
  t0=$SECONDS
  "${FERRYLM[@]}" train "${args[@]}" "run_dir=$work/$precision" "train.base_precision=$precision"
  echo "train.base_precision=$precision: $((SECONDS - t0)) s"
done
python3 - "$work" "$out" <<'EOF'
import json, sys
from pathlib import Path

work, out = Path(sys.argv[1]), sys.argv[2]
runs = {}
for precision in ("model", "fp8"):
    rows = [json.loads(line) for line in (work / precision / "train" / "log_history.jsonl").read_text().splitlines()]
    record = json.loads((work / precision / "train" / "record.json").read_text())
    runs[precision] = {"loss": {r["step"]: r["loss"] for r in rows if "loss" in r and "eval_loss" not in r},
                       "eval_loss": {r["step"]: r["eval_loss"] for r in rows if "eval_loss" in r},
                       "metrics": record.get("metrics", {})}
steps = sorted(set(runs["model"]["loss"]) & set(runs["fp8"]["loss"]))
diff = [runs["fp8"]["loss"][s] - runs["model"]["loss"][s] for s in steps]
tail = diff[-100:]
summary = {"steps": len(steps), "max_abs_difference": max(map(abs, diff)),
           "mean_difference_last_100": sum(tail) / len(tail), "mean_abs_difference_last_100": sum(map(abs, tail)) / len(tail),
           "eval_loss": {p: runs[p]["eval_loss"] for p in runs},
           "tokens_per_s": {p: runs[p]["metrics"].get("tokens_per_s") for p in runs}}
Path(out).write_text(json.dumps({"summary": summary, "runs": runs}, indent=1))
print(json.dumps(summary, indent=1))
EOF
