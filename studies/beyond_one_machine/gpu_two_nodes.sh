#!/usr/bin/env bash
# Two nodes of 2 GPUs on one 4-GPU host against one node of 4 (ZeRO-3 LoRA, Qwen2.5-7B shape), a node
# killed once checkpoint-5 is complete, and both launched again (benchmarks/train_zero.py zero3-lora-two-nodes),
# on a machine with no package index:
#   CARRY=.gpu55 RESULTS=/tmp/res bash studies/beyond_one_machine/gpu_two_nodes.sh
# CARRY holds the wheels the image lacks (pydantic, hjson, datasets, ..., and DeepSpeed built from its sdist
# with DS_BUILD_OPS=0: `pip wheel --no-deps --no-build-isolation .`) and tok/ (a tokenizer for the 7B shape).
# Runs in the background; RESULTS/done marks the end.
set -euo pipefail
CARRY=${CARRY:-.gpu55}
RESULTS=${RESULTS:-/tmp/res}
mkdir -p /tmp/site "$RESULTS"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$CARRY"/*.whl
export PYTHONPATH=$PWD:/tmp/site XDG_CACHE_HOME=/tmp/fcache PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
setsid nohup bash -c "python3 benchmarks/train_zero.py --work /tmp/ft --tokenizer $CARRY/tok --out $RESULTS/two_nodes.json \
  zero3-lora-two-nodes > $RESULTS/two_nodes.log 2>&1; cp -r /tmp/ft/logs-* $RESULTS/ 2>/dev/null; touch $RESULTS/done" \
  > /dev/null 2>&1 &
echo "started; poll $RESULTS"
