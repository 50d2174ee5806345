#!/usr/bin/env bash
# What a W4A16 group size costs in speed (issue 83's speed column): 512 greedy tokens after a 128-token prompt, batch 1,
# the 7B shape and Qwen2.5-Coder-1.5B's (random weights), on the engine's 4-bit Triton kernel (`int4-gemv`, what the
# engine's backend serves an artifact with), one process a shape and group (benchmarks/gpu_decode.py).
#   bash studies/real_coder_forgetting/gpu_qwen_canary.sh setup      # its wheels in /tmp/site (no index there)
#   bash studies/w4a16_choice/speed_by_group.sh [GROUP...]            # default 32 128 64; JSON to $OUT (or ./speed_by_group)
# The 7B's 1.058 s through `ferrylm serve` was measured at group 128; the export ships 32 (export.w4a16_group_size).
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(32 128 64)  # the shipped group and the served figure's first
out=${OUT:-speed_by_group}
mkdir -p "$out"
for shape in 7b 1.5b; do
  for g in "${groups[@]}"; do
    # a run that fails leaves its log and the others still run
    python3 benchmarks/gpu_decode.py --skip-hf --shape "$shape" --variants int4-gemv --runs 3 --int4-group "$g" \
      --out "$out/decode_${shape}_g$g.json" > "$out/decode_${shape}_g$g.log" 2>&1 || echo "failed: $shape group $g"
    python3 - "$out/decode_${shape}_g$g.json" "$shape" "$g" <<'PY' || true
import json, sys

r = json.load(open(sys.argv[1]))
e = r["engines"]["Engine int4-gemv"]
print(f"{sys.argv[2]} group {sys.argv[3]}: median {e['median_s']:.3f} s of {e['runs_s']}, {r['weight_gb_read_per_token_int4-gemv']:.2f} GB read a token")
PY
  done
done
