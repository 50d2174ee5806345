#!/usr/bin/env bash
# 512 tokens of Qwen2.5-Coder-1.5B's shapes (random weights: the time depends on the shapes alone) through
# `ferrylm serve` on the engine's backend, bf16 and W4A16, on one GPU machine with no package index, in two calls:
#   studies/serving_a_team/gpu_serve_coder.sh setup   # carry [".whl", ".tri/np"]: ferrylm's small wheels, numpy 1.26
#   studies/serving_a_team/gpu_serve_coder.sh run     # carry [".tri/pytriton.tar.xz", ".tri/tok15.tar.xz"]: results to $OUT
# .whl: studies/real_coder_forgetting/carry.sh whl. .tri: the nvidia-pytriton 0.7.0 wheel unpacked with its Python
# 3.12 stub only (pytriton.tar.xz), numpy 1.26.4 cp312 (np/), and the 1.5B's own tokenizer read from its GGUF
# (tok15.tar.xz: AutoTokenizer.from_pretrained(gguf_file=...).save_pretrained("tok15")).
set -euo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/gpu_site.sh
export PYTHONPATH=$PWD:/tmp/site XDG_CACHE_HOME=/tmp/fcache PYTHONUNBUFFERED=1
case "${1:-}" in
  setup)
    mkdir -p /tmp/site /tmp/tri/np
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    cp .tri/np/*.whl /tmp/tri/np/ ;;
  run)
    cp .tri/pytriton.tar.xz /tmp/tri/ && install_triton /tmp/tri
    tar -C /tmp -xJf .tri/tok15.tar.xz
    python3 benchmarks/make_qwen7b_shape.py /tmp/q15 /tmp/tok15 --shape 1.5b
    python3 studies/serving_a_team/serve_team.py --model /tmp/q15 --levels 1,8 --out "$OUT/serve_coder1.5b_bf16.json" \
      > "$OUT/serve_coder1.5b_bf16.log" 2>&1 || tail -n 20 "$OUT/serve_coder1.5b_bf16.log"
    python3 benchmarks/make_qwen7b_shape.py /tmp/q15w4 /tmp/tok15 128 --shape 1.5b
    python3 studies/serving_a_team/serve_team.py --model /tmp/q15w4 --w4a16 --levels 1,8 \
      --out "$OUT/serve_coder1.5b_w4a16.json" > "$OUT/serve_coder1.5b_w4a16.log" 2>&1 || tail -n 20 "$OUT/serve_coder1.5b_w4a16.log"
    grep -h '"total_p50_s"\|stream_p50' "$OUT"/serve_coder1.5b_*.json | head ;;
  *) echo "usage: $0 setup | run" >&2; exit 2 ;;
esac
