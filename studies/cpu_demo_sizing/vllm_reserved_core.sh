#!/bin/bash
# vLLM's CPU build with one core kept for its scheduler (its default) against none (both cores compute),
# alternately, ROUNDS times: the start, 128 tokens at 1/8/16 concurrent and 40 seeded HumanEval tasks.
#   studies/cpu_demo_sizing/vllm_reserved_core.sh MODEL_DIR [ROUNDS]
# (MODEL_DIR: a demo run's runs/default/export/merged; bf16 and eager, as the demo serves it.)
set -e
here=$(cd "$(dirname "$0")" && pwd); repo=$(cd "$here/../.." && pwd)
model=$1 rounds=${2:-3}
cd "$repo"
for rep in $(seq "$rounds"); do
  for r in 1 0; do
    start=$(date +%s)
    VLLM_CPU_NUM_OF_RESERVED_CPU=$r VLLM_CPU_KVCACHE_SPACE=1 .venv/bin/python -m vllm.entrypoints.openai.api_server \
      --model "$model" --host 127.0.0.1 --port 8123 --dtype bfloat16 --max-model-len 2048 --served-model-name m \
      --enforce-eager -O0 > "/tmp/vllm_reserved_$r.log" 2>&1 &
    pid=$!
    until curl -sf 127.0.0.1:8123/health >/dev/null; do sleep 1; kill -0 $pid 2>/dev/null || { echo died; exit 1; }; done
    echo "reserve=$r rep=$rep ready $(( $(date +%s) - start )) s"
    .venv/bin/python "$here/probes.py" throughput
    .venv/bin/python "$here/probes.py" he40
    kill $pid; wait $pid || true
  done
done
