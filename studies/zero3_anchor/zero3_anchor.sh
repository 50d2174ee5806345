#!/usr/bin/env bash
# ZeRO-3 full fine-tune through `ferrylm bench` beside the same recipe driven by DeepSpeed directly
# (studies/zero3_anchor/zero3_direct.py), in one run on one machine, Qwen2.5-7B shapes, seq 4096, micro-batch 1,
# checkpointing. Each argument is one trial, run in the order given:
#
#   bash studies/zero3_anchor/zero3_anchor.sh WORK_DIR TOKENIZER_DIR direct shipped "tuned:train.zero3_leaf_layers=true" direct
#
#   direct            studies/zero3_anchor/zero3_direct.py with DeepSpeed's defaults
#   direct:K=V,K=V    the same with zero_optimization settings over the defaults
#   NAME[:OVERRIDES]  `ferrylm bench` of zero3-full-bf16-ckpt with these space-separated overrides
#   bench:STRATEGIES  `ferrylm bench` of these strategies (comma-separated), as configured
#
# Results: WORK_DIR/<n>-<name>.json (the direct runs) and WORK_DIR/<n>-<name>/bench/bench.json.
# MODEL names an existing model directory instead of WORK_DIR/q7; PYTHON the interpreter (default
# .venv/bin/python); NPROC the processes (default 2); STEPS / WARMUP the timed and untimed steps (6 / 2).
set -euo pipefail
work=$1 tok=$2
shift 2
py=${PYTHON:-.venv/bin/python}
model=${MODEL:-$work/q7}
nproc=${NPROC:-2} steps=${STEPS:-6} warmup=${WARMUP:-2}
mkdir -p "$work"
[ -f "$model/config.json" ] || "$py" benchmarks/make_qwen7b_shape.py "$model" "$tok"
n=0
for trial in "$@"; do
  n=$((n + 1))
  name=${trial%%:*}
  rest=${trial#*:}
  [ "$rest" = "$trial" ] && rest=""
  echo "== $n $trial ($(date +%T))"
  if [ "$name" = direct ]; then
    zero=()
    for kv in ${rest//,/ }; do zero+=(--zero "$kv"); done
    "$py" -m torch.distributed.run --standalone --nproc_per_node "$nproc" studies/zero3_anchor/zero3_direct.py --model "$model" \
      --out "$work/$n-direct.json" --warmup "$warmup" --steps "$steps" "${zero[@]}" || echo "direct run failed"
    continue
  fi
  strategies=zero3-full-bf16-ckpt
  if [ "$name" = bench ]; then strategies=$rest; rest=""; fi
  # shellcheck disable=SC2086 # the overrides are space-separated on purpose
  "$py" -m ferrylm bench "run_dir=$work/$n-$name" "model.path=$model" bench.rows=synthetic data.max_seq_len=4096 \
    train.per_device_batch_size=1 train.gradient_accumulation_steps=1 train.learning_rate=1e-5 \
    train.lora_r=16 train.lora_alpha=32 train.lora_dropout=0 "bench.strategies=[$strategies]" "bench.gpus=$nproc" \
    bench.decode=false "bench.warmup_steps=$warmup" "bench.steps=$steps" bench.trial_timeout_s=${TRIAL_TIMEOUT:-420} \
    $rest || echo "bench run failed"
done
