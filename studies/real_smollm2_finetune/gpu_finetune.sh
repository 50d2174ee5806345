#!/usr/bin/env bash
# Does the fine-tune help, on real weights? The demo-gpu preset's learning rate and epochs chosen by
# held-out loss, on the real SmolLM2-135M-Instruct weights, by the product's own commands:
#
#   studies/real_smollm2_finetune/gpu_finetune.sh data                 # the preset's corpus: this machine's standard library and site-packages
#   studies/real_smollm2_finetune/gpu_finetune.sh train LR EPOCHS ...  # one run per (LR, EPOCHS) in runs/ft-LR-EPOCHS, held-out loss
#                                              # every half epoch (train.keep_best), summary line per run
#   studies/real_smollm2_finetune/gpu_finetune.sh eval LR EPOCHS       # that run: export (merged) and the eval stage (in-process, both models)
#
# FERRYLM: the command (default .venv/bin/ferrylm; `python3 -m ferrylm` where the package is on PYTHONPATH).
# RESULTS=DIR: where the records, the loss curves and the report are copied (default studies/real_smollm2_finetune/results/gpu_finetune).
# Extra dotted overrides for every stage: ARGS="data.max_pairs=6000 ...".
set -euo pipefail
cd "$(dirname "$0")/../.."
read -r -a FERRYLM <<< "${FERRYLM:-.venv/bin/ferrylm}"
RESULTS=${RESULTS:-studies/real_smollm2_finetune/results/gpu_finetune}
read -r -a EXTRA <<< "${ARGS:-}"
PY=$(command -v python3)
COMMON=(--config demo-gpu eval.local=true "${EXTRA[@]}")
mkdir -p "$RESULTS"

data() {
  "${FERRYLM[@]}" data "${COMMON[@]}" run_dir=runs/ft-data
  cp runs/ft-data/data/stats.md "$RESULTS/data_stats.md"
}

# steps for EPOCHS passes over the data stage's training examples at the preset's batch size
steps() {
  "$PY" - "$1" <<'EOF'
import json, math, sys
from ferrylm.config import load_config
n = json.load(open("runs/ft-data/data/stats.json"))["train_examples"]
t = load_config("demo-gpu").train
print(max(1, math.ceil(float(sys.argv[1]) * n / (t.per_device_batch_size * t.gradient_accumulation_steps))))
EOF
}

train() {
  local lr=$1 epochs=$2 run=runs/ft-$1-$2 total half t0=$SECONDS
  total=$(steps "$epochs"); half=$(( (total + 2 * epochs - 1) / (2 * epochs) ))
  rm -rf "$run"; mkdir -p "$run"; cp -a runs/ft-data/data "$run/"
  "${FERRYLM[@]}" train "${COMMON[@]}" run_dir="$run" train.learning_rate="$lr" train.max_steps="$total" \
    train.save_steps="$half" train.keep_best=true train.save_total_limit=1
  grep eval_loss "$run/train/log_history.jsonl" > "$RESULTS/heldout_loss_lr${lr}_ep${epochs}.jsonl"
  "$PY" - "$run" "$lr" "$epochs" "$((SECONDS - t0))" <<'EOF' | tee -a "$RESULTS/sweep.txt"
import json, sys
run, lr, epochs, secs = sys.argv[1:]
m = json.load(open(f"{run}/train/record.json"))["metrics"]
curve = [round(json.loads(l)["eval_loss"], 4) for l in open(f"{run}/train/log_history.jsonl") if "eval_loss" in l]
print(f"lr {lr} epochs {epochs}: {m['steps']} steps, held-out loss {m['base_eval_loss']:.4f} -> {m['eval_loss']:.4f} "
      f"(every half epoch: {curve}), best {m['best_eval_loss']:.4f}, {secs} s")
EOF
}

evaluate() {
  local run=runs/ft-$1-$2
  "${FERRYLM[@]}" export "${COMMON[@]}" run_dir="$run" export.onnx=false "export.vllm_quantize=[]"
  "${FERRYLM[@]}" eval "${COMMON[@]}" run_dir="$run"
  cp "$run/eval/report.md" "$run/eval/report.json" "$run/train/record.json" "$RESULTS/"
}

case "${1:-}" in
  data) data ;;
  train) shift; while [ $# -ge 2 ]; do train "$1" "$2"; shift 2; done ;;
  eval) evaluate "$2" "$3" ;;
  *) echo "usage: studies/real_smollm2_finetune/gpu_finetune.sh data | train LR EPOCHS [LR EPOCHS ...] | eval LR EPOCHS" >&2; exit 2 ;;
esac
