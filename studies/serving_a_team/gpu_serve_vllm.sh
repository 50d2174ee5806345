#!/usr/bin/env bash
# Serving a team on one GPU machine with no package index, in one run (docs/performance.md, "Serving a team"):
# the engine's backend (Triton) and vLLM's CUDA build on the same 7B-shaped W4A16 weights, vLLM's prefix caching
# and n-gram speculation on the held-out prompts (the real SmolLM2 weights, then the 7B shape), then bf16:
#   PARTS=/tmp/vparts CARRY=.gpu55 TRITON=/tmp/tri SMOL=/tmp/smol PROMPTS=p.jsonl RESULTS=/tmp/res \
#     bash studies/serving_a_team/gpu_serve_vllm.sh
# PARTS holds vsite.tar.xz.part* (vLLM 0.22.0 and what it needs beyond the image: docs/gpu.md), its sha256 in
# `sha`, and wheels that replace some of it; CARRY the small wheels ferrylm needs and tok/; TRITON
# pytriton.tar.xz and np/ (studies/serving_a_team/gpu_serve_team.sh); SMOL the SmolLM2 GGUF in halves a, b with sha and init.py;
# PROMPTS studies/serving_a_team/heldout_prompts.py's file. Runs in the background; RESULTS/done marks the end.
set -euo pipefail
source benchmarks/gpu_site.sh
PARTS=${PARTS:-/tmp/vparts} CARRY=${CARRY:-.gpu55} RESULTS=${RESULTS:-/tmp/res}
TRITON=${TRITON:-/tmp/tri} SMOL=${SMOL:-/tmp/smol} PROMPTS=${PROMPTS:-/tmp/prompts.jsonl}
mkdir -p /tmp/site /tmp/vsite "$RESULTS"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$CARRY"/*.whl
cat "$PARTS"/vsite.tar.xz.part* > /tmp/vsite.tar.xz
echo "$(cut -d' ' -f1 "$PARTS/sha")  /tmp/vsite.tar.xz" | sha256sum -c --quiet
tar -C /tmp/vsite -xJf /tmp/vsite.tar.xz --strip-components=1
# wheels in PARTS added or replacing: xgrammar 0.2.8 needs apache-tvm-ffi >= 0.1.11 where vLLM 0.22.0 pins 0.1.9
# (for flashinfer, left out); vLLM's quantization configs import humming-kernels (and it pyelftools)
rm -rf /tmp/vsite/tvm_ffi /tmp/vsite/apache_tvm_ffi-*
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/vsite "$PARTS"/*.whl
install_triton "$TRITON"
install_smollm2 "$SMOL"
# a copy of the code and the tokenizer: later calls re-sync the checkout under the running job
rm -rf /tmp/ck && mkdir -p /tmp/ck && cp -r ferrylm bench "$CARRY/tok" /tmp/ck/ && cp "$PROMPTS" /tmp/ck/prompts.jsonl && cd /tmp/ck
# vLLM's pins (compressed-tensors 0.15.0.1, ...) before the small wheels'
export PYTHONPATH=/tmp/vsite:/tmp/ck:/tmp/site XDG_CACHE_HOME=/tmp/fcache PYTHONUNBUFFERED=1
team() { python3 studies/serving_a_team/serve_team.py --out "$RESULTS/$1.json" "${@:2}" > "$RESULTS/$1.log" 2>&1 || true; }
spec() { python3 studies/serving_a_team/serve_spec.py --prompts prompts.jsonl --out "$RESULTS/$1.json" "${@:2}" > "$RESULTS/$1.log" 2>&1 || true; }
setsid nohup bash -c "$(declare -f team spec); set -x
  python3 benchmarks/make_qwen7b_shape.py /tmp/q7w4 /tmp/ck/tok 128 > $RESULTS/make_w4a16.log 2>&1
  RESULTS=$RESULTS team engine_w4a16 --model /tmp/q7w4 --w4a16 --steps engine,triton
  smol=\$(python3 -c 'from ferrylm.models import convert_embedded; print(convert_embedded())')
  RESULTS=$RESULTS spec spec_smollm2 --model \$smol --n 32 --max-tokens 192
  RESULTS=$RESULTS team vllm_w4a16 --model /tmp/q7w4 --w4a16 --steps vllm
  RESULTS=$RESULTS spec spec_q7w4 --model /tmp/q7w4 --variants default,no-prefix --n 16 --max-tokens 64
  python3 benchmarks/make_qwen7b_shape.py /tmp/q7 /tmp/ck/tok > $RESULTS/make_bf16.log 2>&1
  RESULTS=$RESULTS team generate_bf16 --model /tmp/q7 --steps none --generate
  RESULTS=$RESULTS team vllm_bf16 --model /tmp/q7 --steps vllm
  RESULTS=$RESULTS team engine_bf16 --model /tmp/q7 --steps engine,triton
  find /tmp/fcache -name 'configs-*.json' -exec cp {} $RESULTS/ \\;
  touch $RESULTS/done" > "$RESULTS/driver.log" 2>&1 &
echo "started; poll $RESULTS"
