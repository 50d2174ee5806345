#!/usr/bin/env bash
# The serving figures of docs/performance.md ("Serving a team") on one GPU machine with no package index:
#   CARRY=.gpu54 RESULTS=/tmp/res bash studies/serving_a_team/gpu_serve_team.sh
# CARRY holds: the small wheels the image lacks (pydantic, compressed-tensors, ...), pytriton.tar.xz (the
# nvidia-pytriton 0.7.0 wheel unpacked, its Python 3.12 stub only), np/ (numpy 1.26.4 for Triton's Python
# stub) and tok/ (a tokenizer for the 7B-shaped models). Runs in the background; RESULTS/done marks the end.
set -euo pipefail
source benchmarks/gpu_site.sh
CARRY=${CARRY:-.gpu54}
RESULTS=${RESULTS:-/tmp/res}
mkdir -p /tmp/site "$RESULTS"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$CARRY"/*.whl
install_triton "$CARRY"
export PYTHONPATH=$PWD:/tmp/site XDG_CACHE_HOME=/tmp/fcache PYTHONUNBUFFERED=1
python3 benchmarks/make_qwen7b_shape.py /tmp/q7w4 "$CARRY/tok" 128 > "$RESULTS/make_w4a16.log" 2>&1
python3 benchmarks/make_qwen7b_shape.py /tmp/q7 "$CARRY/tok" > "$RESULTS/make_bf16.log" 2>&1
setsid nohup bash -c "python3 studies/serving_a_team/serve_team.py --model /tmp/q7w4 --w4a16 --out $RESULTS/team_w4a16.json > $RESULTS/team_w4a16.log 2>&1; \
  python3 studies/serving_a_team/serve_team.py --model /tmp/q7 --generate --out $RESULTS/team_bf16.json > $RESULTS/team_bf16.log 2>&1; \
  touch $RESULTS/done" > /dev/null 2>&1 &
echo "started; poll $RESULTS"
