#!/usr/bin/env bash
# `ferrylm bench` on Qwen2.5-7B shapes (random bf16 weights, synthetic rows of 4,096 tokens), as
# docs/performance.md ran it on one GPU:
#
#   bash benchmarks/bench_7b.sh WORK_DIR TOKENIZER_DIR [STRATEGIES]
#
# STRATEGIES is bench.strategies' list (default: every single-GPU strategy but the two full
# fine-tunes without checkpointing, which cannot fit 80 GB and are the fp32 row's story again).
# The decode rows read an export record that names the random 7B itself as the merged artifact: a
# real export of a 7B needs a trained adapter and a parity pass longer than the bench. MODEL names an
# existing model directory instead of WORK_DIR/q7; PYTHON the interpreter (default .venv/bin/python).
set -euo pipefail
work=$1 tok=$2
strategies=${3:-lora-bf16-ckpt,lora-bf16,lora-bf16-ckpt-half,lora-bf16-liger,lora-bf16-compiled,qlora-bf16-ckpt,full-bf16-ckpt,full-fp32}
py=${PYTHON:-.venv/bin/python}
model=${MODEL:-$work/q7}
[ -f "$model/config.json" ] || "$py" benchmarks/make_qwen7b_shape.py "$model" "$tok"
mkdir -p "$work/run/export"
"$py" - "$work" "$model" <<'EOF'
import sys
from ferrylm.manifest import StageRecord
work = sys.argv[1]
record = StageRecord("export", "benchmarks/bench_7b.sh")
record.outputs = {"merged": sys.argv[2]}
record.finish(f"{work}/run/export")
EOF
"$py" -m ferrylm bench "run_dir=$work/run" "model.path=$model" bench.rows=synthetic data.max_seq_len=4096 \
  train.per_device_batch_size=1 train.gradient_accumulation_steps=1 train.lora_r=16 train.lora_alpha=32 \
  train.lora_dropout=0 train.learning_rate=1e-5 "bench.strategies=[$strategies]" bench.trial_timeout_s=420 "${@:4}"
