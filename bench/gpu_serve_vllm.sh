#!/usr/bin/env bash
# vLLM's CUDA build as the peer of the engine's backend on one GPU machine with no package index
# (docs/performance.md, "Serving a team"): bench/serve_team.py --steps vllm on the 7B shape in W4A16 and bf16,
# then the engine alone on the same weights, in one run:
#   PARTS=/tmp/vparts CARRY=.gpu55 RESULTS=/tmp/res bash bench/gpu_serve_vllm.sh
# PARTS holds vsite.tar.xz.part* (vLLM 0.22.0 and what it needs beyond the image: docs/gpu.md) and `sha`, its
# sha256; CARRY the small wheels ferrylm needs and tok/. Runs in the background; RESULTS/done marks the end.
set -euo pipefail
PARTS=${PARTS:-/tmp/vparts} CARRY=${CARRY:-.gpu55} RESULTS=${RESULTS:-/tmp/res}
mkdir -p /tmp/site /tmp/vsite "$RESULTS"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$CARRY"/*.whl
cat "$PARTS"/vsite.tar.xz.part* > /tmp/vsite.tar.xz
echo "$(cut -d' ' -f1 "$PARTS/sha")  /tmp/vsite.tar.xz" | sha256sum -c --quiet
tar -C /tmp/vsite -xJf /tmp/vsite.tar.xz --strip-components=1
# wheels in PARTS added or replacing: xgrammar 0.2.8 needs apache-tvm-ffi >= 0.1.11 where vLLM 0.22.0 pins 0.1.9
# (for flashinfer, left out); vLLM's quantization configs import humming-kernels (and it pyelftools)
rm -rf /tmp/vsite/tvm_ffi /tmp/vsite/apache_tvm_ffi-*
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/vsite "$PARTS"/*.whl
# a copy of the code and the tokenizer: later calls re-sync the checkout under the running job
rm -rf /tmp/ck && mkdir -p /tmp/ck && cp -r ferrylm bench "$CARRY/tok" /tmp/ck/ && cd /tmp/ck
# vLLM's pins (compressed-tensors 0.15.0.1, ...) before the small wheels'
export PYTHONPATH=/tmp/vsite:/tmp/ck:/tmp/site XDG_CACHE_HOME=/tmp/fcache PYTHONUNBUFFERED=1
team() { python3 bench/serve_team.py --out "$RESULTS/$1.json" "${@:2}" > "$RESULTS/$1.log" 2>&1 || true; }
setsid nohup bash -c "$(declare -f team); set -x
  python3 bench/make_qwen7b_shape.py /tmp/q7w4 /tmp/ck/tok 128 > $RESULTS/make_w4a16.log 2>&1
  RESULTS=$RESULTS team vllm_w4a16 --model /tmp/q7w4 --w4a16 --steps vllm
  python3 bench/make_qwen7b_shape.py /tmp/q7 /tmp/ck/tok > $RESULTS/make_bf16.log 2>&1
  RESULTS=$RESULTS team vllm_bf16 --model /tmp/q7 --steps vllm
  RESULTS=$RESULTS team engine_bf16 --model /tmp/q7 --steps engine
  RESULTS=$RESULTS team engine_w4a16 --model /tmp/q7w4 --w4a16 --steps engine
  find /tmp/fcache -name 'configs-*.json' -exec cp {} $RESULTS/ \\;
  touch $RESULTS/done" > "$RESULTS/driver.log" 2>&1 &
echo "started; poll $RESULTS"
