#!/bin/bash
# Starts vLLM's CPU build on a model directory, times the start, runs one probe against it, stops it.
#   studies/cpu_demo_sizing/vllm_probe.sh MODEL_DIR PROBE LABEL [vLLM flags...]
#   PROBE: throughput (128 tokens at 1/8/16 concurrent; throughput:16,32 at those) | fence (tokens after the
#          first code block) | he40 (40 seeded HumanEval tasks, chat, 16 concurrent; he40:32 at 32) | none (start only)
# The numbers of docs/notes/fresh_clone_runs.md, "What sized the CPU demo":
#   vllm_probe.sh DIR throughput compiled ; vllm_probe.sh DIR throughput eager --enforce-eager -O0
#   vllm_probe.sh DIR none cached ; vllm_probe.sh DIR fence eager --enforce-eager -O0
#   vllm_probe.sh DIR he40 eager --enforce-eager -O0
# (DIR: the embedded SmolLM2, e.g. as ferrylm.models.resolve_model_path("smollm2", CACHE) writes it.)
set -e
here=$(cd "$(dirname "$0")" && pwd); repo=$(cd "$here/../.." && pwd)
model=$1 probe=$2 label=$3; shift 3
start=$(date +%s)
VLLM_CPU_KVCACHE_SPACE=${KV_GIB:-1} "$repo/.venv/bin/python" -m vllm.entrypoints.openai.api_server --model "$model" \
  --host 127.0.0.1 --port 8123 --dtype float32 --max-model-len 2048 --served-model-name m "$@" > "/tmp/vllm_$label.log" 2>&1 &
pid=$!
until curl -sf 127.0.0.1:8123/health >/dev/null; do sleep 2; kill -0 $pid 2>/dev/null || { echo died; exit 1; }; done
echo "$label ready after $(( $(date +%s) - start )) s"
[ "$probe" = none ] || (cd "$repo" && .venv/bin/python "$here/probes.py" ${probe/:/ })
kill $pid; wait $pid || true
